"""Compiled fusion (whitepaper §10) as a Session runs it: which nodes fuse under which options,
results equal to unfused execution on every op and dtype the fused loop computes, every
broadcast pattern, the same errors, and graphs with control dependencies, conds and loops."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import errors
from flowgraph.kernels.cpu import fused_codegen

ON = tf.OptimizerOptions(global_jit_level=tf.OptimizerOptions.ON_1)


def _session(jit: bool, graph=None):
    config = tf.ConfigProto()
    if jit:
        config.graph_options.optimizer_options.CopyFrom(ON)
    return tf.Session(graph=graph, config=config)


def _run(fetches, feeds=None, jit=True, init=False):
    """Returns (values, op types of every node that ran)."""
    with _session(jit) as s:
        if init:
            s.run(tf.global_variables_initializer())
        md = tf.RunMetadata()
        opts = tf.RunOptions(output_partition_graphs=True)
        out = s.run(fetches, feeds, options=opts, run_metadata=md)
    return out, [n.op for g in md.partition_graphs for n in g.node]


def _same(fused, unfused):
    for a, b in zip(fused, unfused):
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape
        if a.dtype.kind == "f":
            np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-30, equal_nan=True)
        else:
            np.testing.assert_array_equal(a, b)


def test_a_chain_of_fed_scalar_adds_is_one_fused_node():
    a = tf.placeholder(tf.float32, [])
    b = tf.placeholder(tf.float32, [])
    x = a
    for _ in range(50):
        x = x + b
    feeds = {a: 1.0, b: 0.25}
    fused, ops = _run(x, feeds)
    unfused, ops_off = _run(x, feeds, jit=False)
    assert fused == unfused == np.float32(13.5) and isinstance(fused, np.float32)
    assert ops.count("_FusedElementwise") == 1 and "AddV2" not in ops
    assert ops_off.count("AddV2") == 50


def test_jit_scope_marks_only_the_ops_inside_it():
    x = tf.placeholder(tf.float32, [4])
    with tf.xla.experimental.jit_scope():
        y = tf.exp(x) * 2.0 + 1.0
    z = tf.sqrt(y) - 1.0  # outside: stays two NumPy kernels
    feeds = {x: np.arange(4, dtype=np.float32)}
    fused, ops = _run([y, z], feeds, jit=False)
    unfused, _ = _run([y, z], feeds, jit=False)
    with _session(False) as s:  # no jit option at all: the scope alone fuses
        md = tf.RunMetadata()
        s.run(z, feeds, tf.RunOptions(output_partition_graphs=True), md)
    ops = [n.op for g in md.partition_graphs for n in g.node]
    assert ops.count("_FusedElementwise") == 1 and {"Sqrt", "Sub"} <= set(ops)
    assert "Exp" not in ops
    _same(fused, unfused)


def test_compile_ops_false_and_separate_scopes_are_respected():
    x = tf.placeholder(tf.float32, [3])
    with tf.contrib.compiler.jit.experimental_jit_scope(compile_ops=False):
        a = tf.exp(x) + 1.0
    with tf.contrib.compiler.jit.experimental_jit_scope():
        b = tf.exp(x) * 3.0
    with tf.contrib.compiler.jit.experimental_jit_scope():
        c = tf.tanh(b) - 2.0
    assert b.op.get_attr("_XlaScope") != c.op.get_attr("_XlaScope")
    feeds = {x: np.ones(3, np.float32)}
    (va, vc), ops = _run([a, c], feeds)  # global jit too: _XlaCompile=False still wins
    assert ops.count("_FusedElementwise") == 2  # b's scope and c's scope, never merged
    assert {"Exp", "AddV2"} <= set(ops)
    _same([va, vc], _run([a, c], feeds, jit=False)[0])


def test_compile_ops_callable_sees_each_node_def():
    x = tf.placeholder(tf.float32, [3])
    with tf.xla.experimental.jit_scope(compile_ops=lambda nd: nd.op != "Tanh"):
        y = tf.tanh(tf.exp(x) * 2.0) + 1.0
    assert not y.op.inputs[0].op.get_attr("_XlaCompile")
    _, ops = _run(y, {x: np.ones(3, np.float32)}, jit=False)
    assert "Tanh" in ops and ops.count("_FusedElementwise") == 1


def _values(dtype, n=12):
    rng = np.random.RandomState(0)
    if np.dtype(dtype).kind == "f":
        v = rng.uniform(-3, 3, n).astype(dtype)
        v[:4] = [0.0, -0.0, np.inf, np.nan]
        return v
    return rng.randint(-50, 50, n).astype(dtype)


def _ops_of(dtype):
    """The table's ops that take inputs of `dtype`, with their arity (SelectV2, Cast apart)."""
    arity = {"Add": 2, "AddV2": 2, "Sub": 2, "Mul": 2, "RealDiv": 2, "Div": 2, "Maximum": 2}
    arity.update(Minimum=2, SquaredDifference=2, Pow=2, ReluGrad=2, TanhGrad=2, SigmoidGrad=2)
    arity.update(Less=2, LessEqual=2, Greater=2, GreaterEqual=2, Equal=2, NotEqual=2)
    arity.update(LogicalAnd=2, LogicalOr=2)
    d = np.dtype(dtype)
    for op, row in sorted(fused_codegen.ELEMENTWISE.items()):
        if op not in ("SelectV2", "Cast", "AddN", "BiasAdd") and d in row.dtypes:
            yield op, arity.get(op, 1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.bool_])
def test_every_op_matches_its_unfused_kernel(dtype):
    """All the table's ops on one dtype in one cluster: each reads t = x * one, a member, so
    they fuse together; each result is fetched. Fused and unfused results must agree."""
    dt = tf.as_dtype(dtype)
    x = tf.placeholder(dt, [12])
    y = tf.placeholder(dt, [12])
    one = tf.placeholder(dt, [])
    t = tf.logical_and(x, one) if dtype == np.bool_ else x * one
    results = []
    for op, arity in _ops_of(dtype):
        inputs = [t, y][:arity]
        attrs = {} if op.startswith("Logical") else {"T": dt}
        node = tf.get_default_graph().create_op(op, inputs, attrs=attrs)
        results.append(node.outputs[0])
    if dtype == np.bool_:
        xs, ys = np.arange(12) % 3 == 0, np.arange(12) % 2 == 0
        feeds = {x: xs, y: ys, one: True}
    else:
        feeds = {x: _values(dtype), y: _values(dtype)[::-1].copy(), one: 1}
    fused, ops = _run(results, feeds)
    assert ops.count("_FusedElementwise") == 1, ops
    _same(fused, _run(results, feeds, jit=False)[0])


def test_select_and_casts_fuse_with_unfused_results():
    x = tf.placeholder(tf.float32, [6])
    n = tf.cast(tf.floor(x), tf.int32)  # float -> int: not fused, an input of the cluster
    cond = x > 0.0
    picked = tf.where_v2(cond, x * 2.0, tf.cast(n, tf.float32))
    widened = tf.cast(picked, tf.float64) + 1.0
    narrowed = tf.cast(tf.cast(n, tf.int64) * 3, tf.int32)
    from_bool = tf.cast(cond, tf.float32) * 2.0
    fetches = [picked, widened, narrowed, from_bool]
    feeds = {x: np.array([-1, 2, 0, 3.5, -0.5, 7], np.float32)}
    fused, ops = _run(fetches, feeds)
    assert "Select" not in ops and "SelectV2" not in ops and ops.count("Cast") == 1
    _same(fused, _run(fetches, feeds, jit=False)[0])


def test_add_n_and_bias_add_fuse_and_keep_their_shape_rules():
    x = tf.placeholder(tf.float32, None)
    b = tf.placeholder(tf.float32, None)
    h = tf.nn.relu(tf.nn.bias_add(x * 2.0, b))
    s = tf.add_n([h, x, h * 0.5])
    xs, bs = np.arange(12, dtype=np.float32).reshape(4, 3) - 5, np.array([1, -2, 3], np.float32)
    fused, ops = _run([h, s], {x: xs, b: bs})
    assert ops.count("_FusedElementwise") == 1 and "AddN" not in ops and "BiasAdd" not in ops
    _same(fused, _run([h, s], {x: xs, b: bs}, jit=False)[0])
    for bad in ({x: xs, b: bs[:2]}, {x: xs[0], b: bs}):  # bias length; value of rank 1
        for jit in (True, False):
            with pytest.raises(errors.InvalidArgumentError):
                _run(s, bad, jit=jit)
    y = tf.placeholder(tf.float32, None)
    t = tf.add_n([x * 2.0, y])
    for jit in (True, False):
        with pytest.raises(errors.InvalidArgumentError, match="same size and shape"):
            _run(t, {x: xs, y: bs}, jit=jit)


@pytest.mark.parametrize(
    "shapes",
    [
        [(3, 4), (3, 4), (3, 4)],  # flat
        [(3, 4), (4,), ()],  # a row vector and a scalar: strided
        [(3, 1), (1, 4), (1,)],  # outer product
        [(), (), ()],  # all scalars: no loop
        [(1, 1), (3,), (1,)],  # one-element inputs of higher rank
        [(0, 3), (3,), ()],  # empty
        [(2, 3, 4), (3, 1), (2, 1, 1)],
    ],
)
def test_broadcast_patterns_match_unfused(shapes):
    rng = np.random.RandomState(1)
    ph = [tf.placeholder(tf.float32, s) for s in shapes]
    u = ph[0] * ph[1] + ph[2]
    w = tf.tanh(u) - ph[1]
    feeds = {p: np.asarray(rng.randn(*s), np.float32) for p, s in zip(ph, shapes)}
    fused, ops = _run([u, w], feeds)
    assert ops.count("_FusedElementwise") == 1
    _same(fused, _run([u, w], feeds, jit=False)[0])


def test_outputs_of_different_shapes_get_a_loop_each():
    a = tf.placeholder(tf.float32, [4])
    b = tf.placeholder(tf.float32, [3, 4])
    small = tf.exp(a) * 2.0  # [4], fetched
    big = small + b  # [3, 4]
    feeds = {a: np.arange(4, dtype=np.float32), b: np.ones((3, 4), np.float32)}
    fused, ops = _run([small, big], feeds)
    assert ops.count("_FusedElementwise") == 1
    _same(fused, _run([small, big], feeds, jit=False)[0])


def test_shapes_that_do_not_broadcast_fail_as_unfused():
    a = tf.placeholder(tf.float32, None)
    b = tf.placeholder(tf.float32, None)
    y = tf.exp(a) + b
    feeds = {a: np.ones(3, np.float32), b: np.ones(4, np.float32)}
    for jit in (True, False):
        with pytest.raises(errors.InvalidArgumentError, match=r"Incompatible shapes: \[3\] vs"):
            _run(y, feeds, jit=jit)


def test_relu_grad_requires_equal_shapes_fused_too():
    dy = tf.placeholder(tf.float32, None)
    x = tf.placeholder(tf.float32, None)
    g = (
        tf.get_default_graph()
        .create_op("ReluGrad", [dy * 2.0, x], attrs={"T": tf.float32})
        .outputs[0]
    )
    y = g + 1.0
    feeds = {dy: np.ones(3, np.float32), x: np.ones((2, 3), np.float32)}
    for jit in (True, False):
        with pytest.raises(errors.InvalidArgumentError):
            _run(y, feeds, jit=jit)


def test_integer_overflow_wraps_as_unfused():
    x = tf.placeholder(tf.int32, [3])
    y = x * x + x
    feeds = {x: np.array([2**20, -(2**20), 46341], np.int32)}
    fused, ops = _run(y, feeds)
    assert "_FusedElementwise" in ops
    _same([fused], [_run(y, feeds, jit=False)[0]])


def test_a_path_through_another_op_keeps_the_two_ends_apart():
    """x -> Sum -> y and x -> y: fusing x with y would make a cycle through Sum."""
    a = tf.placeholder(tf.float32, [5])
    x = tf.exp(a) * 2.0
    y = x + tf.reduce_sum(x)
    feeds = {a: np.arange(5, dtype=np.float32)}
    fused, ops = _run(y, feeds)
    assert ops.count("_FusedElementwise") == 1 and "AddV2" in ops  # exp*2 fused, + alone
    _same([fused], [_run(y, feeds, jit=False)[0]])


def test_control_dependencies_of_members_order_the_fused_node():
    v = tf.Variable(1.0)
    assign = tf.assign(v, 5.0)
    with tf.control_dependencies([assign]):
        y = tf.identity(v) * 2.0 + 1.0
    after, ops = _run(y, init=True)
    assert after == 11.0 and "_FusedElementwise" in ops


def test_cond_branches_fuse_without_mixing_deadness():
    p = tf.placeholder(tf.bool, [])
    x = tf.placeholder(tf.float32, [3])
    y = tf.cond(p, lambda: tf.exp(x) * 2.0 + 1.0, lambda: tf.tanh(x) - 1.0) * 3.0 + x
    xs = np.array([0.5, -1, 2], np.float32)
    for pv in (True, False):
        fused, ops = _run(y, {p: pv, x: xs})
        assert ops.count("_FusedElementwise") >= 3  # each branch, and the tail
        _same([fused], [_run(y, {p: pv, x: xs}, jit=False)[0]])


def test_loop_bodies_fuse_inside_their_frame():
    x0 = tf.placeholder(tf.float32, [4])

    def body(i, x):
        return i + 1, tf.tanh(x * 1.5 + 0.25) * 0.5 + x

    _, y = tf.while_loop(lambda i, x: i < 7, body, [tf.constant(0), x0])
    feeds = {x0: np.linspace(-1, 1, 4).astype(np.float32)}
    fused, ops = _run(y, feeds)
    assert "_FusedElementwise" in ops and "Tanh" not in ops
    _same([fused], [_run(y, feeds, jit=False)[0]])


def test_adam_update_written_with_basic_ops_is_one_fused_node():
    n = 1000
    rng = np.random.RandomState(2)
    g = tf.placeholder(tf.float32, [n])
    var = tf.Variable(rng.randn(n).astype(np.float32))
    m = tf.Variable(tf.zeros([n]))
    v = tf.Variable(tf.zeros([n]))
    lr, b1, b2, eps = 0.01, 0.9, 0.999, 1e-8
    with tf.xla.experimental.jit_scope():
        m_t = b1 * m + (1 - b1) * g
        v_t = b2 * v + (1 - b2) * g * g
        var_t = var - lr * m_t / (tf.sqrt(v_t) + eps)
    update = tf.group(tf.assign(m, m_t), tf.assign(v, v_t), tf.assign(var, var_t))
    grads = [rng.randn(n).astype(np.float32) for _ in range(3)]
    results = []
    for jit in (True, False):
        config = tf.ConfigProto()
        if not jit:  # jit_scope holds even without the option; switch it off explicitly
            for op in tf.get_default_graph().get_operations():
                if "_XlaCompile" in op.node_def.attr:
                    op._set_attr("_XlaCompile", False)
        with tf.Session(config=config) as s:
            s.run(tf.global_variables_initializer())
            md = tf.RunMetadata()
            for k, gv in enumerate(grads):
                opts = tf.RunOptions(output_partition_graphs=k == 0)
                s.run(update, {g: gv}, options=opts, run_metadata=md)
            results.append(s.run([var, m, v]))
            ops = [nd.op for gd in md.partition_graphs for nd in gd.node]
            assert ops.count("_FusedElementwise") == (1 if jit else 0)
    _same(results[0], results[1])


def test_partial_runs_fetch_a_member_before_the_feed_its_consumer_needs():
    """r1 = a + b is fetched before c is fed: r1 must not wait in a cluster that needs c."""
    a, b, c = (tf.placeholder(tf.float32, []) for _ in range(3))
    r1 = tf.exp(a) + b
    r2 = r1 * c + 1.0
    with _session(True) as s:
        h = s.partial_run_setup([r1, r2], [a, b, c])
        v1 = s.partial_run(h, r1, feed_dict={a: 0.0, b: 2.0})
        assert v1 == 3.0
        assert s.partial_run(h, r2, feed_dict={c: v1}) == 10.0
        md = tf.RunMetadata()
        opts = tf.RunOptions(output_partition_graphs=True)
        s.run([r1, r2], {a: 0.0, b: 2.0, c: 3.0}, options=opts, run_metadata=md)
    ops = [n.op for g in md.partition_graphs for n in g.node]
    assert ops.count("_FusedElementwise") == 2  # {exp, add} and {mul, add}: split by feeds
    assert "Exp" not in ops


def test_reads_of_a_variable_buffer_are_not_fused():
    """A read of a reference aliases the buffer that an in-place update writes later in the
    step; a fused node would read it at its own time (TF's snapshot semantics differ)."""
    v = tf.Variable(1.0)
    a = tf.assign(v, v * 3.0)
    with tf.control_dependencies([a]):
        r = tf.identity(v)
    with _session(True) as s:
        s.run(tf.global_variables_initializer())
        assert s.run(r) == 3.0 and s.run(r) == 9.0


def test_a_cluster_of_unrelated_shapes_gets_a_loop_per_shape():
    """clip_by_global_norm scales tensors of different shapes by one shared scalar member."""
    ts = [tf.placeholder(tf.float32, s) for s in ((3, 2), (2, 2), (4,))]
    clipped, norm = tf.clip_by_global_norm(ts, 0.5)
    rng = np.random.RandomState(3)
    feeds = {t: rng.randn(*t.shape.as_list()).astype(np.float32) for t in ts}
    fused, ops = _run(clipped + [norm], feeds)
    assert "_FusedElementwise" in ops
    _same(fused, _run(clipped + [norm], feeds, jit=False)[0])


def test_gradients_of_ops_in_a_jit_scope_are_marked_and_fused():
    x = tf.placeholder(tf.float32, [4])
    with tf.xla.experimental.jit_scope():
        y = tf.tanh(x * 2.0) * 3.0
    with tf.xla.experimental.jit_scope(separate_compiled_gradients=True):
        z = tf.exp(x) * 2.0
    (gy,) = tf.gradients(tf.reduce_sum(y), [x])
    (gz,) = tf.gradients(tf.reduce_sum(z), [x])
    scopes = {
        (op.type, op.get_attr("_XlaScope"))
        for op in tf.get_default_graph().get_operations()
        if op.name.startswith("gradients") and "_XlaCompile" in op.node_def.attr
    }
    assert ("TanhGrad", y.op.get_attr("_XlaScope")) in scopes  # merged with the forward ops
    assert any(s.startswith(z.op.get_attr("_XlaScope") + "_grad_") for _, s in scopes)
    xs = np.linspace(-1, 1, 4).astype(np.float32)
    (vy, vz), ops = _run([gy, gz], {x: xs}, jit=False)
    assert "TanhGrad" not in ops and "_FusedElementwise" in ops
    np.testing.assert_allclose(vy, 6 * (1 - np.tanh(2 * xs) ** 2), rtol=1e-5)
    np.testing.assert_allclose(vz, 2 * np.exp(xs), rtol=1e-6)


def test_large_transcendental_clusters_run_the_numpy_kernels():
    """numba's tanh costs ~40x NumPy's per element: on 1M elements the fused node runs its
    members' own kernels (the unfused results, bit for bit); on 12 it runs its loop."""
    x = tf.placeholder(tf.float32, [None])
    y = tf.tanh(x * 2.0 + 1.0) * 3.0
    big = np.linspace(-3, 3, 1_000_000).astype(np.float32)
    small = big[::100_000].copy()
    with _session(True) as s:
        fused_big, fused_small = s.run(y, {x: big}), s.run(y, {x: small})
    with _session(False) as s:
        unfused_big, unfused_small = s.run(y, {x: big}), s.run(y, {x: small})
    np.testing.assert_array_equal(fused_big, unfused_big)
    _same([fused_small], [unfused_small])
