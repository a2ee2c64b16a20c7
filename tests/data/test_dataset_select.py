"""shard, enumerate, reduce, take_while, ignore_errors, choose_from_datasets,
get_single_element, Counter and Options, against Python references."""

import numpy as np
import pytest
from dataset_helpers import drain

import flowgraph as tf

Dataset = tf.data.Dataset
exp = tf.data.experimental


def test_shard_partitions_the_elements():
    parts = [drain(Dataset.range(10).shard(3, i)) for i in range(3)]
    assert parts == [list(range(10))[i::3] for i in range(3)]
    with pytest.raises(tf.errors.InvalidArgumentError, match="Index"):
        drain(Dataset.range(3).shard(2, 2))


def test_enumerate_and_counter():
    assert drain(Dataset.from_tensor_slices(["a", "b"]).enumerate(5)) == [(5, b"a"), (6, b"b")]
    got = drain(Dataset.zip((exp.Counter(3, 2), Dataset.range(3))))
    assert [c for c, _ in got] == [3, 5, 7]
    floats = drain(exp.Counter(1, 1, tf.float32).take(2))
    assert floats == [1.0, 2.0] and isinstance(floats[0], np.float32)
    assert drain(Dataset.range(2).apply(exp.enumerate_dataset())) == [(0, 0), (1, 1)]


def test_reduce_folds_like_python():
    x = np.arange(1, 7, dtype=np.float32)
    total, count = Dataset.from_tensor_slices(x).reduce(
        (np.float32(0), np.int64(0)), lambda state, v: (state[0] + v * v, state[1] + 1)
    )
    with tf.Session() as sess:
        got = sess.run([total, count])
    assert got[0] == np.sum(x * x) and got[1] == 6


def test_take_while_and_ignore_errors():
    ds = Dataset.range(10).apply(exp.take_while(lambda v: v < 4))
    assert drain(ds) == [0, 1, 2, 3]

    def check(v):
        if v % 3 == 1:
            raise ValueError("odd one")
        return v

    flaky = Dataset.range(8).map(lambda v: tf.py_func(check, [v], tf.int64))
    assert drain(flaky.apply(exp.ignore_errors())) == [v for v in range(8) if v % 3 != 1]


def test_choose_from_datasets_follows_the_choices():
    inputs = [Dataset.from_tensors(np.int64(i)).repeat(2) for i in range(3)]
    choice = Dataset.from_tensor_slices(np.array([2, 0, 2, 1, 2, 0, 1], np.int64))
    assert drain(exp.choose_from_datasets(inputs, choice)) == [2, 0, 2, 1, 0, 1]


def test_get_single_element():
    one = exp.get_single_element(Dataset.from_tensors((1, "x")))
    two = exp.get_single_element(Dataset.range(2))
    none = exp.get_single_element(Dataset.range(0))
    with tf.Session() as sess:
        assert sess.run(one) == (1, b"x")
        with pytest.raises(tf.errors.InvalidArgumentError, match="more than one"):
            sess.run(two)
        with pytest.raises(tf.errors.InvalidArgumentError, match="empty"):
            sess.run(none)


def test_options_and_unsupported_names():
    opts = tf.data.Options()
    opts.experimental_deterministic = False
    opts.experimental_optimization.map_parallelization = True
    ds = Dataset.range(3).with_options(opts)
    assert ds.options() is opts
    assert drain(ds) == [0, 1, 2]
    with pytest.raises(NotImplementedError, match="rejection_resample"):
        exp.rejection_resample  # noqa: B018
    with pytest.raises(NotImplementedError, match="window"):
        Dataset.range(3).window(2)


def test_contrib_data_aliases():
    ds = Dataset.range(7).apply(tf.contrib.data.batch_and_drop_remainder(3))
    assert [b.tolist() for b in drain(ds)] == [[0, 1, 2], [3, 4, 5]]
    assert tf.contrib.data.shuffle_and_repeat is exp.shuffle_and_repeat
    with pytest.raises(NotImplementedError, match="sliding_window_batch"):
        tf.contrib.data.sliding_window_batch  # noqa: B018


def _sampled():
    with tf.Graph().as_default():
        tf.set_random_seed(3)
        a = Dataset.from_tensors(np.int64(0)).repeat(300)
        b = Dataset.from_tensors(np.int64(1)).repeat(100)
        return drain(exp.sample_from_datasets([a, b], weights=[0.75, 0.25], seed=5))


def test_sample_from_datasets_draws_by_weight_and_empties_every_input():
    got = _sampled()
    assert sorted(got) == [0] * 300 + [1] * 100
    head = got[:200]  # before either input runs out, about 3 in 4 draws pick `a`
    assert 0.6 < head.count(0) / len(head) < 0.9
    assert _sampled() == got  # reproducible with seeds


def test_group_by_window_matches_python_grouping():
    ds = Dataset.range(20).apply(
        exp.group_by_window(lambda v: v % 3, lambda k, w: w.batch(4), window_size=4)
    )
    got = [b.tolist() for b in drain(ds)]
    want, groups = [], {}
    for v in range(20):
        groups.setdefault(v % 3, []).append(v)
        if len(groups[v % 3]) == 4:
            want.append(groups.pop(v % 3))
    want += [groups[k] for k in sorted(groups)]  # leftovers by increasing key, as TF does
    assert got == want
    sized = Dataset.range(10).apply(
        exp.group_by_window(
            lambda v: v % 2, lambda k, w: w.batch(10), window_size_func=lambda k: k + 2
        )
    )
    assert [b.tolist() for b in drain(sized)] == [[0, 2], [1, 3, 5], [4, 6], [8], [7, 9]]


def test_bucket_by_sequence_length_pads_within_buckets():
    lengths = [1, 5, 2, 7, 3, 6, 1, 8]
    ds = Dataset.from_tensor_slices(np.array(lengths, np.int64)).map(
        lambda n: tf.fill(tf.cast(tf.stack([n]), tf.int32), n)
    )
    out = drain(ds.apply(exp.bucket_by_sequence_length(lambda x: tf.shape(x)[0], [4], [2, 3])))
    # bucket 0 (< 4) takes 2 per batch, bucket 1 takes 3; each batch padded to its longest
    assert [b.shape for b in out] == [(2, 2), (3, 7), (2, 3), (1, 8)]
    np.testing.assert_array_equal(out[0], [[1, 0], [2, 2]])


def test_scan_is_a_running_fold_and_unique_keeps_first_occurrences():
    x = np.array([3, 1, 4, 1, 5, 9, 2, 6], np.int64)
    sums = Dataset.from_tensor_slices(x).apply(
        exp.scan(np.int64(0), lambda total, v: (total + v, (total + v, v * 2)))
    )
    got = drain(sums)
    assert [s for s, _ in got] == np.cumsum(x).tolist()
    assert [d for _, d in got] == (x * 2).tolist()
    with pytest.raises(TypeError, match="new state"):
        Dataset.range(3).apply(exp.scan(np.int64(0), lambda s, v: (tf.cast(s, tf.float32), v)))
    assert drain(Dataset.from_tensor_slices(x).apply(exp.unique())) == [3, 1, 4, 5, 9, 2, 6]
    words = Dataset.from_tensor_slices(["a", "b", "a", "c", "b"]).apply(exp.unique())
    assert drain(words) == [b"a", b"b", b"c"]
