"""The rest of the tf.data transformations against Python references: filter, padded_batch,
unbatch, take/skip, cache, prefetch, interleave/flat_map, zip/concatenate, apply,
from_generator and the tf.data.experimental aliases."""

import numpy as np
import pytest
from dataset_helpers import drain

import flowgraph as tf

Dataset = tf.data.Dataset


def test_filter_take_skip():
    ds = Dataset.range(20).filter(lambda v: tf.equal(v % 3, 0))
    assert drain(ds) == [v for v in range(20) if v % 3 == 0]
    assert drain(ds.skip(2).take(3)) == [6, 9, 12]
    assert drain(Dataset.range(5).take(-1)) == list(range(5))
    assert drain(Dataset.range(5).skip(-1)) == []
    with pytest.raises(ValueError, match="scalar boolean"):
        Dataset.range(3).filter(lambda v: v)


def test_padded_batch_pads_to_longest_and_to_fixed_sizes():
    ds = Dataset.range(1, 5).map(lambda n: (tf.fill(tf.cast(tf.stack([n]), tf.int32), n), n))
    got = drain(
        ds.padded_batch(2, padded_shapes=([None], []), padding_values=(np.int64(-1), np.int64(0)))
    )
    ref = [np.array([[1, -1], [2, 2]]), np.array([[3, 3, 3, -1], [4, 4, 4, 4]])]
    for (values, lengths), want in zip(got, ref):
        np.testing.assert_array_equal(values, want)
    fixed = drain(ds.padded_batch(3, padded_shapes=([5], []), drop_remainder=True))
    assert len(fixed) == 1
    np.testing.assert_array_equal(fixed[0][0], [[1, 0, 0, 0, 0], [2, 2, 0, 0, 0], [3, 3, 3, 0, 0]])
    too_small = ds.padded_batch(4, padded_shapes=([2], []))
    with pytest.raises(tf.errors.InvalidArgumentError, match="smaller size"):
        drain(too_small)


def test_unbatch_inverts_batch():
    x = np.arange(12).reshape(6, 2)
    ds = Dataset.from_tensor_slices(x).batch(4).unbatch()
    assert ds.output_shapes.as_list() == [2]
    np.testing.assert_array_equal(np.stack(drain(ds)), x)
    via_apply = Dataset.from_tensor_slices(x).batch(4).apply(tf.data.experimental.unbatch())
    np.testing.assert_array_equal(np.stack(drain(via_apply)), x)


def test_cache_reads_the_input_once():
    calls = []

    def record(v):
        calls.append(int(v))
        return v

    ds = Dataset.range(4).map(lambda v: tf.py_func(record, [v], tf.int64)).cache().repeat(3)
    assert drain(ds) == [0, 1, 2, 3] * 3
    assert calls == [0, 1, 2, 3]


def test_prefetch_keeps_order_and_ends():
    ds = Dataset.range(50).map(lambda v: v * v).prefetch(4)
    assert drain(ds) == [v * v for v in range(50)]
    auto = Dataset.range(7).prefetch(tf.data.experimental.AUTOTUNE).batch(3)
    assert [list(b) for b in drain(auto)] == [[0, 1, 2], [3, 4, 5], [6]]


def test_parallel_map_keeps_order_and_reports_errors_in_place():
    ds = Dataset.range(40).map(lambda v: v + 100, num_parallel_calls=4)
    assert drain(ds) == list(range(100, 140))

    def check(v):
        if v == 3:
            raise ValueError("bad element")
        return v

    bad = Dataset.range(6).map(lambda v: tf.py_func(check, [v], tf.int64), num_parallel_calls=3)
    nxt = bad.make_one_shot_iterator().get_next()
    got = []
    with tf.Session() as sess:
        for _ in range(6):
            try:
                got.append(sess.run(nxt))
            except tf.errors.InvalidArgumentError as e:
                got.append("error")
                assert "bad element" in str(e)
        with pytest.raises(tf.errors.OutOfRangeError):
            sess.run(nxt)
    assert got == [0, 1, 2, "error", 4, 5]


def _interleave_ref(inputs, make, cycle, block):
    """TensorFlow's interleave order (InterleaveDatasetOp), in plain Python: an exhausted
    slot is refilled from the input when the cycle comes back to it."""
    pending = list(inputs)
    slots = [None] * cycle
    out, index, taken = [], 0, 0
    while pending or any(s is not None for s in slots):
        if slots[index] is None and pending:
            slots[index] = iter(make(pending.pop(0)))
            continue
        if slots[index] is not None:
            v = next(slots[index], None)
            if v is not None:
                out.append(v)
                taken += 1
                if taken < block:
                    continue
            else:
                slots[index] = None
        index, taken = (index + 1) % cycle, 0
    return out


@pytest.mark.parametrize("cycle,block", [(2, 1), (3, 2), (1, 1)])
def test_interleave_matches_tensorflow_order(cycle, block):
    inputs = [1, 2, 3, 4]
    ds = Dataset.from_tensor_slices(np.array(inputs, np.int64)).interleave(
        lambda v: Dataset.from_tensors(v).repeat(v), cycle_length=cycle, block_length=block
    )
    assert drain(ds) == _interleave_ref(inputs, lambda v: [v] * v, cycle, block)
    parallel = Dataset.from_tensor_slices(np.array(inputs, np.int64)).interleave(
        lambda v: Dataset.from_tensors(v).repeat(v), cycle, block, num_parallel_calls=2
    )
    assert drain(parallel) == drain(ds)


def test_flat_map_and_zip_and_concatenate():
    ds = Dataset.range(3).flat_map(lambda v: Dataset.range(v))
    assert drain(ds) == [0, 0, 1]
    z = Dataset.zip((Dataset.range(3), Dataset.range(10, 20)))
    assert drain(z) == [(0, 10), (1, 11), (2, 12)]
    zd = Dataset.zip({"a": Dataset.range(2), "b": Dataset.from_tensor_slices(["x", "y", "z"])})
    assert zd.output_types == {"a": tf.int64, "b": tf.string}
    assert drain(zd) == [{"a": 0, "b": b"x"}, {"a": 1, "b": b"y"}]
    c = Dataset.range(2).concatenate(Dataset.range(5, 7))
    assert drain(c) == [0, 1, 5, 6]
    with pytest.raises(TypeError):
        Dataset.range(2).concatenate(Dataset.from_tensors(1.0))


def test_experimental_shuffle_and_repeat_and_map_and_batch():
    sr = Dataset.range(6).apply(tf.data.experimental.shuffle_and_repeat(6, count=2, seed=4))
    got = drain(sr)
    assert sorted(got[:6]) == list(range(6)) and sorted(got[6:]) == list(range(6))
    assert got == drain(
        Dataset.range(6).apply(tf.data.experimental.shuffle_and_repeat(6, count=2, seed=4))
    )
    mb = Dataset.range(10).apply(
        tf.data.experimental.map_and_batch(lambda v: (v, v * 2), 4, drop_remainder=True)
    )
    assert [s.as_list() for s in mb.output_shapes] == [[4], [4]]
    got = drain(mb)
    np.testing.assert_array_equal(np.concatenate([g[1] for g in got]), np.arange(8) * 2)


def test_from_generator_structures_and_errors():
    def gen(n):
        for i in range(n):
            yield {"i": i, "v": np.arange(i, dtype=np.float32)}

    ds = Dataset.from_generator(
        gen, {"i": tf.int64, "v": tf.float32}, {"i": [], "v": [None]}, args=(3,)
    )
    got = drain(ds.repeat(2))
    assert [g["i"] for g in got] == [0, 1, 2] * 2
    np.testing.assert_array_equal(got[2]["v"], [0.0, 1.0])

    def wrong():
        yield np.zeros(3)

    bad = Dataset.from_generator(wrong, tf.float64, [2])
    with pytest.raises(tf.errors.InvalidArgumentError, match="shape"):
        drain(bad)


def test_list_files_matches_sorted_and_shuffles(tmp_path):
    for name in ("b.txt", "a.txt", "c.txt", "skip.dat"):
        (tmp_path / name).write_text(name)
    pattern = str(tmp_path / "*.txt")
    ordered = drain(Dataset.list_files(pattern, shuffle=False))
    assert ordered == [str(tmp_path / n).encode() for n in ("a.txt", "b.txt", "c.txt")]
    shuffled = drain(Dataset.list_files(pattern, seed=2))
    assert sorted(shuffled) == ordered
    with pytest.raises(tf.errors.InvalidArgumentError, match="No files matched"):
        drain(Dataset.list_files(str(tmp_path / "*.none")))


def test_file_cache_is_written_once_and_read_by_later_sessions(tmp_path):
    calls = []

    def record(v):
        calls.append(int(v))
        return v

    prefix = str(tmp_path / "cache" / "c")

    def pipeline():
        ds = Dataset.range(3).map(
            lambda v: (tf.py_func(record, [v], tf.int64), tf.cast(v, tf.float32) * 0.5)
        )
        return ds.cache(prefix)

    partial = pipeline().take(2)
    assert drain(partial) == [(0, 0.0), (1, 0.5)]
    assert not (tmp_path / "cache" / "c.index").exists()  # an unfinished pass leaves no cache
    calls.clear()
    assert drain(pipeline().repeat(2)) == [(0, 0.0), (1, 0.5), (2, 1.0)] * 2
    assert calls == [0, 1, 2]
    with tf.Graph().as_default():
        assert drain(pipeline()) == [(0, 0.0), (1, 0.5), (2, 1.0)]  # a new graph and Session
    assert calls == [0, 1, 2]
    keys = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
    assert sorted(keys) == [
        "      0_0",
        "      0_1",
        "      1_0",
        "      1_1",
        "      2_0",
        "      2_1",
    ]
