"""Batch-level paths of tf.data (kernels/cpu/dataset_runs.py): a batch takes runs of elements
from its input (get_many) where it used to take them one by one. Each pipeline here is drained
twice, once as written and once with an identity map before the batch (a map hands its input
to the batch one element at a time, the old path); both must give the same batches, and the
shuffles must give the order of the buffer algorithm run in Python with the op's seeds."""

import numpy as np
import pytest
from dataset_helpers import drain, drain_element

import flowgraph as tf

Dataset = tf.data.Dataset


def _both(make, batch):
    """(as written, element by element) batches of make().batch(**batch)."""
    fast = drain(make().batch(**batch))
    slow = drain(make().map(lambda *x: x[0] if len(x) == 1 else x).batch(**batch))
    return fast, slow


def _assert_same(fast, slow):
    assert len(fast) == len(slow)
    for a, b in zip(fast, slow):
        for x, y in zip(tf.nest.flatten(a), tf.nest.flatten(b)):
            assert x.dtype == y.dtype
            np.testing.assert_array_equal(x, y)


def _shuffled(values, size, seed, seed2, epoch):
    """The shuffle buffer algorithm (ShuffleDataset's docstring) in Python."""
    rng = np.random.default_rng(
        np.random.SeedSequence([seed & 0xFFFFFFFF, seed2 & 0xFFFFFFFF], spawn_key=(epoch,))
    )
    buf, out, source = [], [], iter(values)
    done = False
    while True:
        while not done and len(buf) < size:
            v = next(source, None)
            if v is None:
                done = True
            else:
                buf.append(v)
        if not buf:
            return out
        i = int(rng.integers(len(buf)))
        out.append(buf[i])
        buf[i] = buf[-1]
        buf.pop()


def _op_seeds(graph) -> tuple:
    (op,) = [op for op in graph.get_operations() if op.type == "ShuffleDataset"]
    with tf.Session(graph=graph) as sess:
        return tuple(int(v) for v in sess.run([op.inputs[2], op.inputs[3]]))


@pytest.mark.parametrize(
    "n, size, batch, drop",
    [
        (23, 7, 4, False),
        (23, 7, 4, True),
        (10, 1, 3, False),
        (10, 100, 3, False),
        (64, 16, 64, False),
        (3000, 16, 64, False),  # reserves of 1024 draws used up exactly (16 batches of 64)
    ],
)
def test_shuffle_then_batch_matches_the_element_path_and_the_algorithm(n, size, batch, drop):
    def make():
        return Dataset.range(n).shuffle(size, seed=7)

    fast, slow = _both(make, {"batch_size": batch, "drop_remainder": drop})
    _assert_same(fast, slow)
    g = tf.Graph()
    with g.as_default():
        make()
        seeds = _op_seeds(g)
    want = _shuffled(list(range(n)), size, *seeds, epoch=0)
    if drop:
        want = want[: len(want) // batch * batch]
    assert np.concatenate(fast).tolist() == want
    assert all(len(b) == batch for b in fast[:-1])
    assert len(fast[-1]) == (batch if drop or n % batch == 0 else n % batch)


@pytest.mark.parametrize("reshuffle", [True, False])
def test_repeat_boundaries_inside_batches(reshuffle):
    def make():
        return Dataset.range(10).shuffle(4, seed=3, reshuffle_each_iteration=reshuffle).repeat(3)

    fast, slow = _both(make, {"batch_size": 7})
    _assert_same(fast, slow)
    g = tf.Graph()
    with g.as_default():
        make()
        seeds = _op_seeds(g)
    want = []
    for epoch in range(3):
        want += _shuffled(list(range(10)), 4, *seeds, epoch=epoch if reshuffle else 0)
    assert np.concatenate(fast).tolist() == want
    assert [len(b) for b in fast] == [7, 7, 7, 7, 2]


def test_seeded_runs_repeat_and_differ_by_seed():
    def run(seed):
        ds = Dataset.range(50).shuffle(20, seed=seed).repeat(2).batch(8)
        return np.concatenate(drain(ds)).tolist()

    assert run(5) == run(5)
    assert run(5) != run(6)
    assert sorted(run(5)) == sorted(list(range(50)) * 2)


def test_nested_structures_and_dtypes():
    def make():
        return Dataset.from_tensor_slices(
            {
                "a": np.arange(30, dtype=np.float32).reshape(10, 3),
                "b": (np.arange(10, dtype=np.int32), np.array([b"s%d" % i for i in range(10)])),
                "c": np.arange(10) % 2 == 0,
            }
        ).shuffle(4, seed=1)

    fast, slow = _both(make, {"batch_size": 4})
    _assert_same(fast, slow)
    assert fast[0]["a"].shape == (4, 3) and fast[-1]["a"].shape == (2, 3)
    assert fast[0]["b"][1].dtype == object
    firsts = [int(x) for b in fast for x in b["b"][0]]
    assert [bytes(s) for b in fast for s in b["b"][1]] == [b"s%d" % i for i in firsts]
    np.testing.assert_array_equal(
        np.concatenate([b["a"][:, 0] for b in fast]), np.array(firsts) * 3
    )


def test_sources_take_skip_unbatch(tmp_path):
    paths = []
    for f in range(3):
        paths.append(str(tmp_path / f"r{f}.tfrecord"))
        with tf.python_io.TFRecordWriter(paths[-1]) as w:
            for i in range(5 + f):
                w.write(b"f%d-%d" % (f, i))
    text = tmp_path / "lines.txt"
    text.write_bytes(b"".join(b"line %d\n" % i for i in range(9)))
    fixed = tmp_path / "fixed.bin"
    fixed.write_bytes(bytes(range(40)))
    makers = [
        lambda: tf.data.TFRecordDataset(paths),
        lambda: tf.data.TFRecordDataset(paths).shuffle(5, seed=2),
        lambda: tf.data.TextLineDataset([str(text)]).skip(2).take(5),
        lambda: tf.data.FixedLengthRecordDataset([str(fixed)], 4),
        lambda: Dataset.range(3, 40, 4).skip(1),
        lambda: Dataset.range(20).batch(6).unbatch().take(15),
        lambda: Dataset.range(7).repeat(2).skip(-1),
    ]
    for make in makers:
        for drop in (False, True):
            fast, slow = _both(make, {"batch_size": 4, "drop_remainder": drop})
            _assert_same(fast, slow)
    records = np.concatenate(drain(tf.data.TFRecordDataset(paths).batch(4))).tolist()
    assert records == [b"f%d-%d" % (f, i) for f in range(3) for i in range(5 + f)]


def test_out_of_range_after_the_last_batch_and_no_aliasing():
    g = tf.Graph()
    with g.as_default():
        values = np.arange(6, dtype=np.float32)
        it = Dataset.from_tensor_slices(values).repeat(2).batch(6).make_one_shot_iterator()
        nxt = it.get_next()
    with tf.Session(graph=g) as sess:
        first = sess.run(nxt)
        first += 100  # a fetched batch is the caller's, not the dataset's constant
        np.testing.assert_array_equal(sess.run(nxt), values)
        with pytest.raises(tf.errors.OutOfRangeError):
            sess.run(nxt)
        with pytest.raises(tf.errors.OutOfRangeError):
            sess.run(nxt)


def test_elements_of_different_shapes():
    def gen():
        yield np.zeros(2, np.int64)
        yield np.zeros(3, np.int64)
        yield np.zeros(3, np.int64)

    def make():
        return Dataset.from_generator(gen, tf.int64, [None])

    ones = drain(make().shuffle(2, seed=1).batch(1))
    assert sorted(len(b[0]) for b in ones) == [2, 3, 3]
    with pytest.raises(tf.errors.InvalidArgumentError, match="different shapes in component 0"):
        drain(make().batch(3))


def test_an_input_error_loses_no_element():
    """Elements read before an input error stay in the shuffle buffer (as element by element),
    and the iteration goes on after it."""

    def check(v):
        if v == 6:
            raise ValueError("bad element")
        return v

    def collect(batched):
        g = tf.Graph()
        with g.as_default():
            ds = Dataset.range(15).map(lambda v: tf.py_func(check, [v], tf.int64))
            ds = batched(ds.shuffle(5, seed=9))
            nxt = ds.make_one_shot_iterator().get_next()
        got, errors = [], 0
        with tf.Session(graph=g) as sess:
            for _ in range(20):
                try:
                    got.append(sess.run(nxt).tolist())
                except tf.errors.OutOfRangeError:
                    return got, errors
                except tf.errors.OpError:
                    errors += 1
        raise AssertionError("no end")

    fast = collect(lambda ds: ds.batch(4))
    slow = collect(lambda ds: ds.map(lambda v: v).batch(4))
    assert fast == slow
    assert fast[1] == 1


def test_long_steady_state_then_the_end_of_the_input():
    """Thousands of draws of a full buffer (made ahead in blocks, the unused ones given back
    when the buffer drains), batched and element by element: the algorithm's order."""
    g = tf.Graph()
    with g.as_default():
        ds = Dataset.range(2500).shuffle(16, seed=11, reshuffle_each_iteration=False)
        seeds = _op_seeds(g)
        batches = ds.batch(64).make_one_shot_iterator().get_next()
        elements = ds.take(100).make_one_shot_iterator().get_next()
    with tf.Session(graph=g) as sess:
        got = np.concatenate(drain_element(sess, batches)).tolist()
        singles = [int(v) for v in drain_element(sess, elements)]
    want = _shuffled(list(range(2500)), 16, *seeds, epoch=0)
    assert got == want
    assert singles == want[:100]
