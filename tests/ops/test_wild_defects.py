"""Regression tests for defects TF1 programs from the wild found (issue 7): each case was observed
on the landed code and is checked against what TensorFlow does."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import errors


@pytest.mark.parametrize("fn", [tf.assign_add, tf.assign_sub])
@pytest.mark.parametrize("use_resource", [False, True])
def test_assign_add_sub_never_broadcast_the_value(fn, use_resource):
    """Defect 4: a [1] value into a [3] variable is an error, at construction when the value's
    shape is known and at run time when it is not (TF: ValueError / InvalidArgumentError)."""
    v = tf.get_variable("v", initializer=tf.constant([1.0, 2.0, 3.0]), use_resource=use_resource)
    with pytest.raises(ValueError):
        fn(v, tf.constant([1.0]))
    p = tf.placeholder(tf.float32)
    update = fn(v, p)
    with tf.Session() as s:
        s.run(v.initializer)
        with pytest.raises(errors.InvalidArgumentError, match="shape"):
            s.run(update, {p: [1.0]})
        s.run(update, {p: [1.0, 1.0, 1.0]})
        want = [2.0, 3.0, 4.0] if fn is tf.assign_add else [0.0, 1.0, 2.0]
        np.testing.assert_array_equal(s.run(v.read_value()), want)


def test_exclusive_case_with_several_predicates():
    """Defect 5: exclusive=True counted the true predicates with a missing math function."""
    x = tf.placeholder(tf.int32, [])
    r = tf.case(
        [(x > 0, lambda: tf.constant(1)), (x < 0, lambda: tf.constant(-1))],
        default=lambda: tf.constant(0),
        exclusive=True,
    )
    both = tf.case(
        [(x > 0, lambda: tf.constant(1)), (x > 1, lambda: tf.constant(2))],
        default=lambda: tf.constant(0),
        exclusive=True,
    )
    with tf.Session() as s:
        assert [s.run(r, {x: v}) for v in (3, -3, 0)] == [1, -1, 0]
        assert s.run(both, {x: 1}) == 1
        with pytest.raises(errors.InvalidArgumentError, match="More than one condition"):
            s.run(both, {x: 2})


def test_float_range_counts_in_its_dtype():
    """Defect 7: float32 (0.3 - 0) / 0.1 is 3.0 in float32, so range(0., .3, .1) has 3 elements,
    statically and at run time (as in TF); float64 endpoints that are float32 values give 4."""
    r = tf.range(0.0, 0.3, 0.1)
    assert r.shape.as_list() == [3]
    p = tf.placeholder(tf.float32, [])
    dynamic = tf.range(0.0, p, 0.1)
    d64 = tf.range(tf.constant(0.0, tf.float64), tf.constant(np.float64(np.float32(0.3))), 0.1)
    with tf.Session() as s:
        np.testing.assert_allclose(s.run(r), [0.0, 0.1, 0.2])
        assert s.run(dynamic, {p: 0.3}).shape == (3,)
        assert s.run(d64).shape == (4,)
        assert d64.shape.as_list() == [4]


def test_arg_reductions_never_pick_nan():
    """Defect 12: TF's ArgMax/ArgMin skip NaN (an all-NaN row gives 0); Max/Min propagate it."""
    x = np.array([[1.0, np.nan, 3.0], [np.nan, np.nan, 1.0], [5.0, 4.0, np.nan]])
    rows = np.array([[np.nan, np.nan], [-np.inf, np.nan], [np.nan, 2.0]])
    with tf.Session() as s:
        for dtype in (np.float16, np.float32, np.float64):
            t = tf.constant(x.astype(dtype))
            assert s.run(tf.argmax(t, 1)).tolist() == [2, 2, 0]
            assert s.run(tf.argmin(t, 1)).tolist() == [0, 2, 1]
            assert s.run(tf.argmax(t, 0)).tolist() == [2, 2, 0]
            assert s.run(tf.argmax(tf.constant(rows.astype(dtype)), 1)).tolist() == [0, 0, 1]
            assert s.run(tf.argmin(tf.constant(-rows.astype(dtype)), 1)).tolist() == [0, 0, 1]
            assert np.isnan(s.run(tf.reduce_max(t, 1))).tolist() == [True, True, True]
            assert np.isnan(s.run(tf.reduce_min(t))).item()
            assert np.isnan(s.run(tf.maximum(t, 0.0))).sum() == 4


def test_top_k_ranks_nan_last_and_agrees_with_argmax():
    """Defect 12: TF's top_k has no defined order for NaN (its sort comparator breaks on NaN);
    ours ranks NaN below every number, stable, so top_k(x, 1) is argmax(x)."""
    x = np.array([[1.0, np.nan, 3.0, np.nan, 2.0, -np.inf, 5.0], [np.nan, 1.0, 0.0, 0, 0, 0, 0]])
    values, indices = tf.nn.top_k(tf.constant(x, tf.float32), 7)
    top1 = tf.nn.top_k(tf.constant(x, tf.float32), 1).indices
    with tf.Session() as s:
        v, i = s.run([values, indices])
        assert i.tolist() == [[6, 2, 4, 0, 5, 1, 3], [1, 2, 3, 4, 5, 6, 0]]
        np.testing.assert_array_equal(v, np.take_along_axis(x, i, 1).astype(np.float32))
        assert s.run(top1)[:, 0].tolist() == s.run(tf.argmax(x, 1)).tolist()


_X = np.random.RandomState(0).rand(3, 7).astype(np.float32)
_Y = np.eye(7, dtype=np.float32)[[1, 2, 3]]
_XENT = [1.795347, 2.3057995, 1.709737]  # TensorFlow's values for _X and _Y


@pytest.mark.parametrize(
    "fn", [tf.nn.softmax_cross_entropy_with_logits, tf.nn.softmax_cross_entropy_with_logits_v2]
)
def test_softmax_xent_flattens_labels_and_takes_unknown_ranks(fn):
    """Defect 14: labels (1, ?, 7) against logits (?, 7) (a program's `[y]`), and logits of
    unknown rank, work as in TensorFlow: both flatten to [-1, classes]."""
    x, y = tf.placeholder(tf.float32, [None, 7]), tf.placeholder(tf.float32, [None, 7])
    wrapped = fn(labels=tf.stop_gradient([y]), logits=x)
    assert wrapped.shape.as_list() == [None]
    u, v = tf.placeholder(tf.float32), tf.placeholder(tf.float32)
    unknown = fn(labels=v, logits=u)
    assert unknown.shape.ndims is None
    with tf.Session() as s:
        np.testing.assert_allclose(s.run(wrapped, {x: _X, y: _Y}), _XENT, rtol=1e-6)
        np.testing.assert_allclose(s.run(unknown, {u: _X, v: _Y}), _XENT, rtol=1e-6)
        cube = s.run(unknown, {u: _X[None], v: _Y[None]})
        assert cube.shape == (1, 3)
        # a class axis other than the last, and no negative zeros where labels are zero
        along0 = s.run(fn(labels=_Y, logits=_X, dim=0))
        assert along0.shape == (7,) and not np.signbit(along0).any()


def test_softmax_xent_axis_as_tensor_and_out_of_range():
    """Defect 20 for the cross-entropy: any axis, a tensor axis, TF's error out of range."""
    x = np.random.RandomState(1).rand(2, 3, 4).astype(np.float32)
    y = np.random.RandomState(2).rand(2, 3, 4).astype(np.float32)
    with tf.Session() as s:
        for axis in (0, 1, -2, tf.placeholder_with_default(1, [])):
            got = s.run(tf.nn.softmax_cross_entropy_with_logits_v2(labels=y, logits=x, axis=axis))
            a = axis if isinstance(axis, int) else 1
            m, lab = np.moveaxis(x, a, -1), np.moveaxis(y, a, -1)
            want = -(lab * (m - np.log(np.exp(m).sum(-1, keepdims=True)))).sum(-1)
            np.testing.assert_allclose(got, want, rtol=1e-5)
    with pytest.raises(errors.InvalidArgumentError, match=r"Dimension \(3\) must be in the range"):
        tf.nn.softmax_cross_entropy_with_logits_v2(labels=y, logits=x, axis=3)


def test_sparse_xent_of_unknown_rank_and_half_precision():
    u, labels = tf.placeholder(tf.float32), tf.placeholder(tf.int32)
    cost = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=u)
    half = tf.nn.softmax_cross_entropy_with_logits_v2(labels=_Y, logits=_X.astype(np.float16))
    with tf.Session() as s:
        np.testing.assert_allclose(s.run(cost, {u: _X, labels: [1, 2, 3]}), _XENT, rtol=1e-6)
        np.testing.assert_allclose(s.run(cost, {u: _X[None], labels: [[1, 2, 3]]}), [_XENT], 1e-6)
        with pytest.raises(errors.InvalidArgumentError, match="labels must have the shape"):
            s.run(cost, {u: _X[None], labels: [1, 2, 3]})
        assert half.dtype == tf.float16
        np.testing.assert_allclose(s.run(half), _XENT, rtol=1e-3)
    for loss in (tf.losses.softmax_cross_entropy, tf.losses.sparse_softmax_cross_entropy):
        assert loss(labels, u).shape == ()


@pytest.mark.parametrize("fn", [tf.nn.softmax, tf.nn.log_softmax])
def test_softmax_axis_may_be_a_tensor(fn):
    """Defect 20: a tensor-valued axis is read at run time; out of range is TF's
    InvalidArgumentError."""
    x = np.random.RandomState(0).rand(2, 3, 4).astype(np.float32)

    def reference(a):
        e = np.exp(x - x.max(a, keepdims=True))
        p = e / e.sum(a, keepdims=True)
        return p if fn is tf.nn.softmax else np.log(p)

    with tf.Session() as s:
        for a in (0, 1, -2):
            for axis in (tf.constant(a), tf.placeholder_with_default(a, [])):
                result = fn(x, axis=axis)
                assert result.shape == (2, 3, 4)
                np.testing.assert_allclose(s.run(result), reference(a), rtol=1e-5, atol=1e-6)
        u = tf.placeholder(tf.float32)
        np.testing.assert_allclose(s.run(fn(u, axis=0), {u: x}), reference(0), 1e-5, 1e-6)
    with pytest.raises(errors.InvalidArgumentError, match=r"Dimension \(3\) must be in the range"):
        fn(x, axis=3)


def test_gather_tensor_axis_keeps_the_rank_and_batch_dims_none_is_zero():
    """Defect 20: TF infers the output rank of a gather whose axis is a tensor."""
    params = tf.zeros([2, 3, 4])
    axis = tf.placeholder_with_default(1, [])
    assert tf.gather(params, [0, 1], axis=axis).shape.as_list() == [None, None, None]
    assert tf.gather(params, [[0, 1]], axis=axis, batch_dims=0).shape.ndims == 4
    assert tf.gather(params, [0, 1], batch_dims=None).shape == (2, 3, 4)
    with pytest.raises(ValueError, match="out of valid range"):
        tf.reverse(params, [3])
    with pytest.raises(ValueError, match="more than once"):
        tf.reverse(params, [1, -2])


def test_half_precision_elu_and_selu_match_tensorflow_bits():
    """Defect 20: TF computes exp(x) - 1 in the input's type (not expm1)."""
    h = np.array([-3, -1, -0.5, -1e-3, 0.1, 2], np.float16)
    with tf.Session() as s:
        elu, selu = s.run([tf.nn.elu(h), tf.nn.selu(h)])
    assert elu.view(np.uint16).tolist() == [48026, 47374, 46668, 37888, 11878, 16384]
    assert selu.view(np.uint16).tolist() == [48814, 48241, 47497, 38664, 11961, 16436]


def test_gradients_through_dynamic_rnn_when_only_the_final_state_is_used():
    """Defect 16: the encoder's outputs unused, its state the loss (or a decoder's initial
    state): the TensorArray of outputs was never read, so its gradient reads zeros. Checked
    against the same cell unrolled by static_rnn, which has no TensorArray."""
    xv = np.random.RandomState(0).rand(2, 5, 3)
    x = tf.constant(xv)
    with tf.variable_scope("rnn", reuse=tf.AUTO_REUSE):
        cell = tf.nn.rnn_cell.LSTMCell(4, initializer=tf.constant_initializer(0.3))
        _, state = tf.nn.dynamic_rnn(cell, x, dtype=tf.float64)
        _, static_state = tf.nn.static_rnn(cell, tf.unstack(x, axis=1), dtype=tf.float64)
    grads = tf.gradients(tf.reduce_sum(state.h * state.c), [x] + cell.weights)
    static = tf.gradients(tf.reduce_sum(static_state.h * static_state.c), [x] + cell.weights)
    train = tf.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(state.h))
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        for got, want in zip(*s.run([grads, static])):
            np.testing.assert_allclose(got, want, rtol=1e-10)
        s.run(train)


@pytest.mark.parametrize("use_resource", [False, True])
def test_assigning_a_slice_of_a_variable(use_resource):
    """`v[:, 0].assign(x)` (StridedSliceAssign / ResourceStridedSliceAssign), masks and
    shrinking included; the value broadcasts to the slice (TF 2's kernel; 1.15 refused), a
    value that cannot is TF's InvalidArgumentError."""
    v = tf.get_variable("v", initializer=np.arange(6.0).reshape(2, 3), use_resource=use_resource)
    column = v[:, 0].assign([9.0, 8.0])
    row = v[1:, ::2].assign([[7.0, 7.0]])
    item = v[0, -1].assign(5.0)
    wrong = v[:, 0].assign([1.0, 2.0, 3.0])
    broadcast = v[1:].assign(3.0)
    with tf.Session() as s:
        s.run(v.initializer)
        np.testing.assert_array_equal(s.run(column), [[9, 1, 2], [8, 4, 5]])
        np.testing.assert_array_equal(s.run(row), [[9, 1, 2], [7, 4, 7]])
        np.testing.assert_array_equal(s.run(item), [[9, 1, 5], [7, 4, 7]])
        with pytest.raises(
            errors.InvalidArgumentError, match=r"Cannot broadcast input shape \[3\]"
        ):
            s.run(wrong)
        np.testing.assert_array_equal(s.run(v.read_value()), [[9, 1, 5], [7, 4, 7]])
        np.testing.assert_array_equal(s.run(broadcast), [[9, 1, 5], [3, 3, 3]])
    expected = "ResourceStridedSliceAssign" if use_resource else "StridedSliceAssign"
    assert tf.get_default_graph().get_operation_by_name("strided_slice/_assign").type == expected
    assert expected in {op.type for op in tf.get_default_graph().get_operations()}


def test_container_scopes_stateful_ops():
    """tf.container sets the `container` attr of the stateful ops created in the block."""
    with tf.container("experiment"):
        v = tf.Variable(1.0)
        q = tf.FIFOQueue(3, tf.float32)
        r = tf.get_variable("r", [], use_resource=True)
        c = tf.constant(1.0)
    outside = tf.Variable(2.0)
    assert v.op.get_attr("container") == "experiment"
    assert q.queue_ref.op.get_attr("container") == "experiment"
    assert r.op.get_attr("container") == "experiment"
    assert outside.op.get_attr("container") == "" and "container" not in c.op.node_def.attr
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        assert s.run(v) == 1.0 and s.run(outside) == 2.0


def test_a_tensor_as_a_python_bool_is_operator_not_allowed():
    with pytest.raises(tf.errors.OperatorNotAllowedInGraphError, match="Python `bool`"):
        bool(tf.constant(True))
    assert issubclass(tf.errors.OperatorNotAllowedInGraphError, TypeError)
