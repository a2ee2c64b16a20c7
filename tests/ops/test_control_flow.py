"""tf.cond, tf.case, tf.while_loop, map_fn/scan/foldl/foldr, TensorArray (whitepaper §4.4)."""

import collections
import itertools

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.runtime.tracing import peak_memory  # noqa: F401  (tracing used below)


def run(fetches, feed_dict=None):
    with tf.Session() as s:
        return s.run(fetches, feed_dict)


# -- cond ------------------------------------------------------------------------------------
def test_cond_takes_one_branch():
    x = tf.placeholder(tf.float32, [])
    p = tf.placeholder(tf.bool, [])
    y = tf.cond(p, lambda: x * 2.0, lambda: x - 1.0)
    with tf.Session() as s:
        assert s.run(y, {x: 3.0, p: True}) == 6.0
        assert s.run(y, {x: 3.0, p: False}) == 2.0


def test_cond_runs_only_the_taken_branch_side_effects():
    v = tf.Variable(0, name="v")
    p = tf.placeholder(tf.bool, [])
    y = tf.cond(p, lambda: tf.assign_add(v, 1), lambda: tf.assign_add(v, 10))
    with tf.Session() as s:
        s.run(v.initializer)
        s.run(y, {p: True})
        s.run(y, {p: True})
        s.run(y, {p: False})
        assert s.run(v) == 12


def test_cond_old_keywords_and_structures():
    p = tf.constant(True)
    out = tf.cond(
        p,
        fn1=lambda: (tf.constant(1), {"a": tf.constant(2.0)}),
        fn2=lambda: (tf.constant(3), {"a": tf.constant(4.0)}),
    )
    got = run(out)
    assert got[0] == 1 and got[1]["a"] == 2.0
    single = tf.cond(p, lambda: [tf.constant(5)], lambda: [tf.constant(6)])
    assert run(single) == 5
    strict = tf.cond(p, lambda: [tf.constant(5)], lambda: [tf.constant(6)], strict=True)
    assert run(strict) == [5]


def test_cond_branch_returns_outer_tensor_and_operation():
    x = tf.constant(7.0)
    p = tf.placeholder(tf.bool, [])
    y = tf.cond(p, lambda: x, lambda: x + 1)
    with tf.Session() as s:
        assert s.run(y, {p: True}) == 7.0
        assert s.run(y, {p: False}) == 8.0


def test_cond_errors_name_the_cond():
    p = tf.constant(True)
    with pytest.raises(ValueError, match="cond.*same structure"):
        tf.cond(p, lambda: (tf.constant(1), tf.constant(2)), lambda: tf.constant(1))
    with pytest.raises(ValueError, match="same type: int32, float32"):
        tf.cond(p, lambda: tf.constant(1), lambda: tf.constant(1.0))
    with pytest.raises(TypeError, match="true_fn must be callable"):
        tf.cond(p, 1, lambda: 1)
    with pytest.raises(ValueError, match="test_control_flow.py"):
        tf.cond(p, lambda: tf.constant(1), lambda: tf.constant(1.0))


def test_fetching_an_untaken_branch_value_is_an_error():
    p = tf.placeholder(tf.bool, [])
    inner = []

    def true_fn():
        t = tf.constant(1.0) * 3
        inner.append(t)
        return t

    y = tf.cond(p, true_fn, lambda: tf.constant(0.0))
    with tf.Session() as s:
        assert s.run(y, {p: False}) == 0.0
        with pytest.raises(tf.errors.InvalidArgumentError, match="dead"):
            s.run(inner[0], {p: False})


def test_case():
    x = tf.placeholder(tf.int32, [])
    y = tf.case(
        [(x < 0, lambda: tf.constant(-1)), (x > 0, lambda: tf.constant(1))],
        default=lambda: tf.constant(0),
    )
    with tf.Session() as s:
        assert [s.run(y, {x: v}) for v in (-5, 0, 5)] == [-1, 0, 1]


# -- while_loop ------------------------------------------------------------------------------
def test_while_loop_basic_and_names():
    i = tf.constant(0)
    r = tf.while_loop(lambda i: i < 10, lambda i: i + 1, [i])
    assert run(r) == 10
    names = {op.name for op in tf.get_default_graph().get_operations()}
    assert {
        "while/Enter",
        "while/Merge",
        "while/LoopCond",
        "while/Switch",
        "while/Identity",
        "while/NextIteration",
        "while/Exit",
    } <= names
    enter = tf.get_default_graph().get_operation_by_name("while/Enter")
    assert enter.get_attr("frame_name") == "while/while_context"


def test_while_loop_ten_thousand_iterations_with_fed_trip_count():
    n = tf.placeholder(tf.int32, [])
    i, s = tf.while_loop(
        lambda i, s: i < n,
        lambda i, s: (i + 1, s + tf.cast(i, tf.float64)),
        [tf.constant(0), tf.constant(0.0, tf.float64)],
    )
    with tf.Session() as sess:
        assert sess.run([i, s], {n: 10000}) == [10000, sum(range(10000))]
        assert sess.run([i, s], {n: 0}) == [0, 0.0]
        assert sess.run(i, {n: 3}) == 3


def test_nested_loops_and_cond_in_loop():
    def outer_body(i, acc):
        _, acc = tf.while_loop(
            lambda j, a: j < i, lambda j, a: (j + 1, a + 1), [tf.constant(0), acc]
        )
        return i + 1, acc

    nested = tf.while_loop(lambda i, a: i < 5, outer_body, [tf.constant(0), tf.constant(0)])
    assert run(nested) == [5, 0 + 1 + 2 + 3 + 4]
    cl = tf.while_loop(
        lambda i, a: i < 6,
        lambda i, a: (i + 1, tf.cond(tf.equal(i % 2, 0), lambda: a + i, lambda: a - 1)),
        [tf.constant(0), tf.constant(0)],
    )
    assert run(cl) == [6, (0 + 2 + 4) - 3]


def test_loop_captures_outer_tensor_and_variable():
    x = tf.placeholder(tf.float32, [3])
    w = tf.Variable([1.0, 2.0, 3.0])
    out = tf.while_loop(
        lambda i, a: i < 4, lambda i, a: (i + 1, a * x + w), [tf.constant(0), tf.zeros([3])]
    )
    with tf.Session() as s:
        s.run(w.initializer)
        xv = np.array([0.5, 1.0, 2.0], np.float32)
        a = np.zeros(3, np.float32)
        for _ in range(4):
            a = a * xv + np.array([1, 2, 3], np.float32)
        np.testing.assert_allclose(s.run(out[1], {x: xv}), a)


def test_loop_with_stateful_ops_and_control_dependencies():
    v = tf.Variable(0)

    def body(i):
        with tf.control_dependencies([tf.assign_add(v, i)]):
            return i + 1

    r = tf.while_loop(lambda i: i < 5, body, [tf.constant(0)], parallel_iterations=1)
    with tf.Session() as s:
        s.run(v.initializer)
        assert s.run(r) == 5
        assert s.run(v) == 0 + 1 + 2 + 3 + 4


def test_nested_structure_loop_vars():
    Pair = collections.namedtuple("Pair", "a b")
    out = tf.while_loop(
        lambda p, d: p.a < 3,
        lambda p, d: (Pair(p.a + 1, p.b * 2), {"k": d["k"] + 1.0}),
        (Pair(tf.constant(0), tf.constant(1)), {"k": tf.constant(0.0)}),
    )
    got = run(out)
    assert isinstance(got[0], Pair) and tuple(got[0]) == (3, 8) and got[1]["k"] == 3.0


def test_shape_invariants():
    x = tf.constant(np.zeros((1, 2), np.float32))
    with pytest.raises(ValueError, match="shape_invariants"):
        tf.while_loop(
            lambda i, x: i < 3, lambda i, x: (i + 1, tf.concat([x, x], 0)), [tf.constant(0), x]
        )
    out = tf.while_loop(
        lambda i, x: i < 3,
        lambda i, x: (i + 1, tf.concat([x, x], 0)),
        [tf.constant(0), x],
        shape_invariants=[tf.TensorShape([]), tf.TensorShape([None, 2])],
    )
    assert out[1].shape.as_list() == [None, 2]
    assert run(out[1]).shape == (8, 2)


def test_loop_construction_errors_name_the_loop():
    with pytest.raises(ValueError, match="while_loop 'while'.*same structure"):
        tf.while_loop(lambda i, j: i < 3, lambda i, j: i + 1, [tf.constant(0), tf.constant(0)])
    with pytest.raises(TypeError, match="float32"):
        tf.while_loop(lambda i: i < 3, lambda i: tf.cast(i, tf.float32), [tf.constant(0)])
    with pytest.raises(TypeError, match="cond must be callable"):
        tf.while_loop(None, lambda i: i, [tf.constant(0)])


def test_maximum_iterations():
    r = tf.while_loop(lambda i: i < 100, lambda i: i + 1, [tf.constant(0)], maximum_iterations=7)
    assert run(r) == 7


def test_parallel_iterations_overlap():
    """Two independent slow ops in successive iterations run at the same time."""
    w = tf.constant(np.random.RandomState(0).rand(8, 192, 192, 8).astype(np.float32))

    def body(i, acc):
        m = w  # does not depend on the previous iteration
        for _ in range(3):  # pooling is single-threaded NumPy: an "expensive" pool-thread kernel
            m = tf.nn.max_pool(m, [1, 3, 3, 1], [1, 1, 1, 1], "SAME")
        return i + 1, acc + tf.reduce_sum(m)

    out = tf.while_loop(
        lambda i, a: i < 6, body, [tf.constant(0), tf.constant(0.0)], parallel_iterations=4
    )
    config = tf.ConfigProto(inter_op_parallelism_threads=2)
    with tf.Session(config=config) as s:
        md = tf.RunMetadata()
        s.run(out, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE), run_metadata=md)
    spans = sorted(
        (n.all_start_micros, n.all_start_micros + n.all_end_rel_micros)
        for d in md.step_stats.dev_stats
        for n in d.node_stats
        if n.node_name == "while/MaxPool"
    )
    assert len(spans) == 6
    assert any(b[0] < a[1] for a, b in itertools.pairwise(spans)), spans


# -- functional ops and TensorArray ---------------------------------------------------------
def test_map_fn_scan_folds():
    elems = tf.constant([1.0, 2.0, 3.0])
    assert run(tf.map_fn(lambda v: v * v, elems)).tolist() == [1.0, 4.0, 9.0]
    pairs = tf.map_fn(lambda p: p[0] * p[1], (elems, elems + 1), dtype=tf.float32)
    assert run(pairs).tolist() == [2.0, 6.0, 12.0]
    assert run(tf.scan(lambda a, v: a + v, tf.constant([1, 2, 3, 4]))).tolist() == [1, 3, 6, 10]
    assert run(
        tf.scan(
            lambda a, v: a + v, tf.constant([1, 2, 3]), initializer=tf.constant(10), reverse=True
        )
    ).tolist() == [16, 15, 13]
    assert run(tf.foldl(lambda a, v: a * v, tf.constant([1, 2, 3, 4]))) == 24
    assert (
        run(tf.foldr(lambda a, v: a - v, tf.constant([1, 2, 3]), initializer=tf.constant(0))) == -6
    )


def test_tensor_array_ops():
    ta = tf.TensorArray(tf.float32, size=3, clear_after_read=False)
    ta = ta.write(0, [1.0, 2.0]).write(1, [3.0, 4.0]).write(2, [5.0, 6.0])
    stacked, concat, size, read = run([ta.stack(), ta.concat(), ta.size(), ta.read(1)])
    assert stacked.tolist() == [[1, 2], [3, 4], [5, 6]] and concat.tolist() == [1, 2, 3, 4, 5, 6]
    assert size == 3 and read.tolist() == [3.0, 4.0]
    tb = tf.TensorArray(tf.int32, size=0, dynamic_size=True).unstack(tf.constant([[1, 2], [3, 4]]))
    assert run(tb.gather([1, 0])).tolist() == [[3, 4], [1, 2]]
    ts = tf.TensorArray(tf.float32, size=2).split(tf.constant([1.0, 2.0, 3.0]), [1, 2])
    assert run(ts.read(1)).tolist() == [2.0, 3.0]


def test_tensor_array_errors():
    ta = tf.TensorArray(tf.float32, size=2)
    twice = ta.write(0, 1.0).write(0, 2.0)
    with pytest.raises(tf.errors.InvalidArgumentError, match="already been written"):
        run(twice.read(0))
    with pytest.raises(tf.errors.InvalidArgumentError, match="not yet been written"):
        run(tf.TensorArray(tf.float32, size=2).read(1))
    with pytest.raises(tf.errors.InvalidArgumentError, match="not resizeable"):
        run(tf.TensorArray(tf.float32, size=1).write(3, 1.0).flow)


def test_tensor_array_through_loop():
    ta = tf.TensorArray(tf.float32, size=5)

    def body(i, ta):
        return i + 1, ta.write(i, tf.cast(i, tf.float32) * 2.0)

    _, ta = tf.while_loop(lambda i, ta: i < 5, body, [tf.constant(0), ta])
    assert run(ta.stack()).tolist() == [0, 2, 4, 6, 8]


# -- partial runs ----------------------------------------------------------------------------
def test_partial_run():
    a, b, c = (tf.placeholder(tf.float32, []) for _ in range(3))
    r1 = a + b
    r2 = r1 * c
    with tf.Session() as s:
        h = s.partial_run_setup([r1, r2], [a, b, c])
        v1 = s.partial_run(h, r1, feed_dict={a: 1, b: 2})
        assert v1 == 3.0
        assert s.partial_run(h, r2, feed_dict={c: v1}) == 9.0
        h2 = s.partial_run_setup([r1], [a, b])
        with pytest.raises(
            tf.errors.InvalidArgumentError, match="not specified in partial_run_setup"
        ):
            s.partial_run(h2, r1, feed_dict={c: 1.0})
