"""tf.data sources, map/batch/repeat/shuffle and one-shot/initializable iterators, checked
against Python/NumPy references."""

import numpy as np
import pytest
from dataset_helpers import drain_element

import flowgraph as tf

Dataset = tf.data.Dataset


def test_from_tensor_slices_map_batch_matches_numpy():
    x = np.arange(10, dtype=np.float32).reshape(10, 1) * 1.5
    y = np.arange(10, dtype=np.int64)
    ds = Dataset.from_tensor_slices((x, y)).map(lambda a, b: (a * 2.0, b + 1)).batch(4)
    assert ds.output_types == (tf.float32, tf.int64)
    assert [s.as_list() for s in ds.output_shapes] == [[None, 1], [None]]
    a, b = ds.make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        got = drain_element(sess, (a, b))
    assert [len(g[0]) for g in got] == [4, 4, 2]
    np.testing.assert_allclose(np.concatenate([g[0] for g in got]), x * 2.0)
    np.testing.assert_array_equal(np.concatenate([g[1] for g in got]), y + 1)


def test_batch_drop_remainder_gives_static_batch_dimension():
    ds = Dataset.range(10).batch(3, drop_remainder=True)
    assert ds.output_shapes.as_list() == [3]
    nxt = ds.make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        got = drain_element(sess, nxt)
    np.testing.assert_array_equal(np.stack(got), np.arange(9).reshape(3, 3))


def test_nested_dict_structure_and_output_classes():
    ds = Dataset.from_tensor_slices({"a": np.arange(3), "b": (np.ones((3, 2)), ["x", "y", "z"])})
    assert ds.output_types == {"a": tf.int64, "b": (tf.float64, tf.string)}
    assert ds.output_classes == {"a": tf.Tensor, "b": (tf.Tensor, tf.Tensor)}
    ds = ds.map(lambda d: {"sum": d["a"] + 1, "s": d["b"][1]})
    nxt = ds.make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        got = drain_element(sess, nxt)
    assert [int(g["sum"]) for g in got] == [1, 2, 3]
    assert [g["s"] for g in got] == [b"x", b"y", b"z"]


def test_from_tensors_and_range_forms():
    t = Dataset.from_tensors(([1, 2], 3.0)).repeat(2)
    r = [Dataset.range(5), Dataset.range(2, 5), Dataset.range(10, 0, -3)]
    with tf.Session() as sess:
        got = drain_element(sess, t.make_one_shot_iterator().get_next())
        ranges = [drain_element(sess, d.make_one_shot_iterator().get_next()) for d in r]
    assert len(got) == 2
    np.testing.assert_array_equal(got[1][0], [1, 2])
    assert ranges == [list(range(5)), list(range(2, 5)), list(range(10, 0, -3))]


def test_repeat_counts():
    with tf.Session() as sess:
        three = drain_element(sess, Dataset.range(3).repeat(3).make_one_shot_iterator().get_next())
        zero = drain_element(sess, Dataset.range(3).repeat(0).make_one_shot_iterator().get_next())
        forever = Dataset.range(2).repeat().make_one_shot_iterator().get_next()
        endless = [sess.run(forever) for _ in range(7)]
        empty_forever = Dataset.range(0).repeat().make_one_shot_iterator().get_next()
        with pytest.raises(tf.errors.OutOfRangeError):
            sess.run(empty_forever)
    assert three == [0, 1, 2] * 3
    assert zero == []
    assert endless == [0, 1, 0, 1, 0, 1, 0]


def _shuffled(seed, reshuffle=True, epochs=2, graph_seed=None):
    with tf.Graph().as_default():
        if graph_seed is not None:
            tf.set_random_seed(graph_seed)
        ds = Dataset.range(20).shuffle(8, seed=seed, reshuffle_each_iteration=reshuffle)
        nxt = ds.repeat(epochs).make_one_shot_iterator().get_next()
        with tf.Session() as sess:
            return drain_element(sess, nxt)


def test_shuffle_is_a_permutation_reproducible_with_a_seed():
    a, b = _shuffled(7), _shuffled(7)
    assert a == b  # run to run
    first, second = a[:20], a[20:]
    assert sorted(first) == list(range(20)) and sorted(second) == list(range(20))
    assert first != list(range(20))
    assert first != second  # reshuffled each epoch
    fixed = _shuffled(7, reshuffle=False)
    assert fixed[:20] == fixed[20:]
    assert _shuffled(None, graph_seed=3) == _shuffled(None, graph_seed=3)
    assert _shuffled(8) != a


def test_shuffle_buffer_bounds_displacement():
    # With a buffer of k, element i can come out no earlier than position i - k + 1.
    got = _shuffled(1, epochs=1)
    for pos, value in enumerate(got):
        assert value <= pos + 7


def test_initializable_iterator_with_fed_parameters_reinitializes():
    n = tf.placeholder(tf.int64, [])
    data = tf.placeholder(tf.float32, [None])
    ds = Dataset.from_tensor_slices(data).map(lambda v: v * tf.cast(n, tf.float32)).take(n)
    it = ds.make_initializable_iterator()
    nxt = it.get_next()
    with tf.Session() as sess:
        with pytest.raises(tf.errors.FailedPreconditionError, match="not been initialized"):
            sess.run(nxt)
        sess.run(it.initializer, {n: 2, data: [1.0, 2.0, 3.0]})
        assert drain_element(sess, nxt) == [2.0, 4.0]
        sess.run(it.initializer, {n: 3, data: [1.0, 5.0, 7.0, 9.0]})
        assert sess.run(nxt) == 3.0
        sess.run(it.initializer, {n: 1, data: [4.0]})  # restarts mid-way
        assert drain_element(sess, nxt) == [4.0]


def test_one_shot_iterator_ends_with_out_of_range_and_stays_ended():
    nxt = Dataset.range(2).make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        assert drain_element(sess, nxt) == [0, 1]
        for _ in range(2):
            with pytest.raises(tf.errors.OutOfRangeError, match="End of sequence"):
                sess.run(nxt)


def test_one_shot_iterator_refuses_placeholders():
    p = tf.placeholder(tf.float32, [3])
    with pytest.raises(ValueError, match="by value"):
        Dataset.from_tensor_slices(p).make_one_shot_iterator()


def test_map_captures_outer_tensor_and_errors_name_the_function_node():
    scale = tf.constant(3, tf.int64)
    nxt = Dataset.range(3).map(lambda v: v * scale).make_one_shot_iterator().get_next()
    bad = Dataset.range(3).map(lambda v: tf.reshape(v, tf.cast(tf.stack([v + 2]), tf.int32)))
    bad = bad.make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        assert drain_element(sess, nxt) == [0, 3, 6]
        with pytest.raises(tf.errors.InvalidArgumentError, match="Reshape"):
            sess.run(bad)


def test_map_output_shape_is_checked_against_the_declared_one():
    ds = Dataset.range(3).map(lambda v: tf.fill(tf.cast(tf.stack([v + 1]), tf.int32), v))
    assert ds.output_shapes.as_list() == [None]
    nxt = ds.batch(2).make_one_shot_iterator().get_next()
    with tf.Session() as sess, pytest.raises(tf.errors.InvalidArgumentError, match="batch"):
        sess.run(nxt)


def test_graph_def_carries_dataset_functions():
    ds = Dataset.range(4).map(lambda v: v + 1).filter(lambda v: v > 2)
    ds.make_one_shot_iterator().get_next()
    gd = tf.get_default_graph().as_graph_def()
    names = {f.signature.name for f in gd.library.function}
    assert any(n.startswith("Dataset_map") for n in names)
    assert any(n.startswith("Dataset_filter") for n in names)
    assert any(n.startswith("_make_dataset") for n in names)
    with tf.Graph().as_default():
        tf.import_graph_def(gd, name="")
        with tf.Session() as sess:
            assert drain_element(sess, "IteratorGetNext:0") == [3, 4]


def test_meta_graph_round_trip_keeps_the_dataset_functions(tmp_path):
    ds = Dataset.range(5).map(lambda v: v * 3).batch(2)
    it = ds.make_initializable_iterator()
    it.get_next(name="nxt")
    tf.add_to_collection("it_init", it.initializer)
    tf.Variable(1.0)
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        saver.save(sess, str(tmp_path / "model"))
    with tf.Graph().as_default():
        saver = tf.train.import_meta_graph(str(tmp_path / "model.meta"))
        with tf.Session() as sess:
            saver.restore(sess, str(tmp_path / "model"))
            sess.run(tf.get_collection("it_init"))
            assert [sess.run("nxt:0").tolist() for _ in range(3)] == [[0, 3], [6, 9], [12]]
