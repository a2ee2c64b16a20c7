"""Array ops (creation, shapes, reshaping, joining, splitting, padding) against NumPy, on every
dtype they claim, with static shapes and error cases."""

import numpy as np
import pytest
from array_helpers import run_with, sample, unknown

import flowgraph as tf
from flowgraph.core import errors
from flowgraph.testing.op_test import assert_close, check_op, run
from tests.helpers import ALL_DTYPES


# -- creation ---------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [tf.float32, tf.int64, tf.bool, tf.string, tf.complex64])
def test_zeros_ones(dtype):
    z = tf.zeros([2, 3], dtype)
    assert z.shape.as_list() == [2, 3] and z.op.type == "Const" and z.op.name == "zeros"
    want = (
        np.zeros((2, 3), dtype.as_numpy_dtype)
        if dtype != tf.string
        else np.full((2, 3), b"", object)
    )
    assert_close(run_with(z, None), want)
    if dtype != tf.string:
        assert_close(run_with(tf.ones((2, 3), dtype), None), np.ones((2, 3), dtype.as_numpy_dtype))


def test_zeros_large_and_dynamic_shapes_use_fill():
    big = tf.zeros([40, 30])
    assert big.op.type == "Fill" and big.shape.as_list() == [40, 30]
    n = tf.placeholder(tf.int32, [])
    dyn = tf.ones([n, 2], tf.int32)
    assert dyn.op.type == "Fill" and dyn.shape.as_list() == [None, 2]
    assert_close(run_with(dyn, {n: 3}), np.ones((3, 2), np.int32))
    s = tf.placeholder(tf.int32, [2])
    assert_close(run_with(tf.zeros(s), {s: [1, 2]}), np.zeros((1, 2), np.float32))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_zeros_like_ones_like(dtype):
    x = sample(dtype, (2, 3))
    zero = np.full((2, 3), b"", object) if dtype is object else np.zeros_like(x)
    check_op(lambda t: tf.zeros_like(t, optimize=False), [x], lambda a: zero)
    check_op(tf.zeros_like, [x], lambda a: zero)
    if dtype in (np.uint32, np.uint64):  # not in TF1's OnesLike type list
        with pytest.raises(TypeError, match="'OnesLike' has uint"):
            tf.ones_like(x, optimize=False)
    elif dtype is not object:
        check_op(lambda t: tf.ones_like(t, optimize=False), [x], lambda a: np.ones_like(a))


def test_zeros_like_unknown_shape_and_dtype():
    x = unknown(tf.int32)
    z = tf.zeros_like(x)
    assert z.op.type == "ZerosLike"
    assert_close(run_with(z, {x: [[1, 2]]}), np.zeros((1, 2), np.int32))
    o = tf.ones_like(x, dtype=tf.float64)
    assert o.dtype == tf.float64
    assert_close(run_with(o, {x: [[1, 2]]}), np.ones((1, 2), np.float64))
    assert tf.ones_like(x).op.type == "OnesLike"


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_fill(dtype):
    value = sample(dtype, ())
    check_op(lambda v: tf.fill([2, 3], v), [value], lambda v: np.full((2, 3), v, dtype=v.dtype))


def test_fill_errors():
    d = tf.placeholder(tf.int32, [2])
    with pytest.raises(errors.InvalidArgumentError, match="must be >= 0"):
        run_with(tf.fill(d, 1.0), {d: [2, -1]})
    with pytest.raises(ValueError, match="must be >= 0"):
        tf.fill([2, -1], 1.0)


@pytest.mark.parametrize(
    "args, dtype, want",
    [
        ((5,), None, np.arange(5, dtype=np.int32)),
        ((2, 9, 3), None, np.arange(2, 9, 3, dtype=np.int32)),
        ((1.0, 2.0, 0.25), None, np.arange(1, 2, 0.25, dtype=np.float32)),
        ((5, 1, -2), None, np.array([5, 3], np.int32)),
        ((3,), tf.int64, np.arange(3, dtype=np.int64)),
        ((0.0, 1.0, 0.1), tf.float64, np.arange(0, 1, 0.1)),
        ((2, 7.5), None, np.arange(2, 7.5, dtype=np.float32)),
        ((4, 4), None, np.zeros(0, np.int32)),
    ],
)
def test_range(args, dtype, want):
    r = tf.range(*args, dtype=dtype)
    assert r.shape.as_list() == [len(want)]
    assert_close(run_with(r, None), want, rtol=1e-6)


def test_range_fed_and_errors():
    n = tf.placeholder(tf.int32, [])
    r = tf.range(n)
    assert r.shape.as_list() == [None]
    assert_close(run_with(r, {n: 4}), np.arange(4, dtype=np.int32))
    with pytest.raises(ValueError, match="delta != 0"):
        tf.range(0, 5, 0)
    with pytest.raises(ValueError, match="start <= limit"):
        tf.range(5, 1, 1)
    with pytest.raises(errors.InvalidArgumentError, match="start >= limit"):
        run_with(tf.range(0, n, -1), {n: 3})
    f = tf.placeholder(tf.float32, [])
    assert_close(
        run_with(tf.range(0.0, f, 0.1), {f: 1.0}),
        np.cumsum(np.r_[0, np.full(9, 0.1)]).astype(np.float32),
        rtol=1e-6,
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_linspace(dtype):
    check_op(
        lambda a, b: tf.linspace(a, b, 7),
        [dtype(-1.5), dtype(4.0)],
        lambda a, b: np.linspace(a, b, 7).astype(dtype),
        rtol=1e-6,
    )
    assert tf.lin_space(0.0, 1.0, 3).shape.as_list() == [3]
    with pytest.raises(ValueError, match="num > 0"):
        tf.linspace(0.0, 1.0, 0)


# -- shape queries ----------------------------------------------------------------------------
def test_shape_size_rank_fold_when_known():
    x = tf.zeros([2, 3])
    for t, want in ((tf.shape(x), [2, 3]), (tf.size(x), 6), (tf.rank(x), 2)):
        assert t.op.type == "Const"
        assert_close(run_with(t, None), np.array(want, np.int32))
    assert tf.shape(x, out_type=tf.int64).dtype == tf.int64


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_, object])
def test_shape_size_rank_ops(dtype):
    x = tf.placeholder(tf.as_dtype(dtype), [None, 3])
    value = sample(dtype, (4, 3))
    s, n, r = tf.shape(x), tf.size(x, out_type=tf.int64), tf.rank(tf.placeholder(tf.float32))
    assert (s.op.type, n.op.type, r.op.type) == ("Shape", "Size", "Rank")
    assert s.shape.as_list() == [2] and n.shape.ndims == 0
    got = run_with([s, n, tf.shape_n([x, x[0]])], {x: value})
    assert_close(got[0], np.array([4, 3], np.int32))
    assert_close(got[1], np.array(12, np.int64))
    assert_close(got[2][1], np.array([3], np.int32))
    assert_close(run_with(r, {r.op.inputs[0]: np.zeros((1, 2, 3))}), np.array(3, np.int32))


def test_broadcast_ops():
    assert tf.broadcast_static_shape(tf.TensorShape([2, 1]), tf.TensorShape([3])).as_list() == [
        2,
        3,
    ]
    with pytest.raises(ValueError):
        tf.broadcast_static_shape(tf.TensorShape([2]), tf.TensorShape([3]))
    assert_close(
        run_with(tf.broadcast_dynamic_shape([2, 1], [4]), None), np.array([2, 4], np.int32)
    )
    for dtype in (np.float32, np.int32, np.bool_, object):
        check_op(
            lambda t: tf.broadcast_to(t, [2, 3]),
            [sample(dtype, (3,))],
            lambda a: np.broadcast_to(a, (2, 3)),
        )
    with pytest.raises(ValueError):
        tf.broadcast_to(tf.zeros([2]), [3])
    x = unknown()
    with pytest.raises(errors.InvalidArgumentError, match="Incompatible shapes"):
        run_with(tf.broadcast_to(x, [3]), {x: np.zeros(2, np.float32)})


# -- reshaping --------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_reshape_transpose_expand_squeeze(dtype):
    x = sample(dtype, (2, 3, 4))
    check_op(lambda t: tf.reshape(t, [4, -1]), [x], lambda a: a.reshape(4, -1))
    check_op(tf.transpose, [x], lambda a: a.T)
    check_op(lambda t: tf.transpose(t, [1, 0, 2]), [x], lambda a: a.transpose(1, 0, 2))
    check_op(lambda t: tf.expand_dims(t, -1), [x], lambda a: a[..., None])
    check_op(lambda t: tf.squeeze(t, [0, 2]), [x[:1, :, :1]], lambda a: a.reshape(3))


def test_reshape_static_shapes_and_errors():
    x = tf.placeholder(tf.float32, [None, 4, 3])
    assert tf.reshape(x, [-1, 12]).shape.as_list() == [None, 12]
    assert tf.reshape(tf.zeros([2, 6]), [3, -1]).shape.as_list() == [3, 4]
    assert tf.reshape(tf.zeros([1]), []).shape.as_list() == []
    n = tf.placeholder(tf.int32, [])
    assert tf.reshape(x, tf.stack([n, 12])).shape.as_list() == [None, 12]
    with pytest.raises(
        ValueError, match="Cannot reshape a tensor with 6 elements to shape \\[4\\]"
    ):
        tf.reshape(tf.zeros([2, 3]), [4])
    with pytest.raises(ValueError, match="multiple unknown"):
        tf.reshape(tf.zeros([2, 3]), [-1, -1])
    with pytest.raises(
        errors.InvalidArgumentError, match="Cannot reshape a tensor with 24 elements"
    ):
        run_with(tf.reshape(x, [5, -1]), {x: np.zeros((2, 4, 3))})
    assert_close(run_with(tf.reshape(x, [-1]), {x: np.ones((2, 4, 3))}), np.ones(24, np.float32))


def test_reshape_run_time_edge_cases():
    """The kernel's NumPy fast path and TF's rules agree: an empty tensor with -1 beside a 0,
    a scalar target, and TF's errors for two -1s, a negative size and a wrong count."""
    x, shape = unknown(), tf.placeholder(tf.int32, [None])
    out = tf.reshape(x, shape)
    empty = np.zeros((0, 3), np.float32)
    assert run_with(out, {x: empty, shape: [-1, 0]}).shape == (0, 0)
    assert run_with(out, {x: empty, shape: [3, -1, 2]}).shape == (3, 0, 2)
    assert run_with(out, {x: np.ones([1, 1], np.float32), shape: []}).shape == ()
    for target, message in [
        ([-1, -1], "multiple unknown"),
        ([-2, 3], "must be non-negative"),
        ([4, -1], "Cannot reshape a tensor with 6 elements"),
        ([7], "Cannot reshape a tensor with 6 elements"),
    ]:
        with pytest.raises(errors.InvalidArgumentError, match=message):
            run_with(out, {x: np.ones((2, 3), np.float32), shape: target})


def test_transpose_details():
    x = unknown()
    t = tf.transpose(x)
    assert_close(
        run_with(t, {x: np.arange(6.0).reshape(1, 2, 3)}),
        np.arange(6.0, dtype=np.float32).reshape(1, 2, 3).T,
    )
    c = np.array([[1 + 2j, 3 - 1j]], np.complex64)
    check_op(lambda t: tf.transpose(t, conjugate=True), [c], lambda a: np.conj(a.T))
    assert tf.transpose(tf.constant(c), conjugate=True).op.type == "ConjugateTranspose"
    assert tf.transpose(tf.placeholder(tf.float32, [None, 5]), [1, 0]).shape.as_list() == [5, None]
    with pytest.raises(ValueError, match="missing"):
        tf.transpose(tf.zeros([2, 3]), [0, 0])
    with pytest.raises(errors.InvalidArgumentError, match="vector of size 2"):
        run_with(tf.transpose(x, [1, 0]), {x: np.zeros((1, 2, 3))})


def test_expand_dims_squeeze_details():
    x = tf.placeholder(tf.float32, [None, 1, 3])
    assert tf.expand_dims(x, dim=0).shape.as_list() == [1, None, 1, 3]
    assert tf.squeeze(x, axis=1).shape.as_list() == [None, 3]
    assert tf.squeeze(x, squeeze_dims=[-2]).shape.as_list() == [None, 3]
    assert tf.squeeze(x).shape.ndims is None  # the unknown dim might be 1
    assert tf.squeeze(tf.zeros([1, 2, 1])).shape.as_list() == [2]
    with pytest.raises(ValueError):
        tf.expand_dims(x, 0, dim=0)
    with pytest.raises(ValueError, match="Tried to expand dim index 4"):
        tf.expand_dims(x, 4)
    with pytest.raises(ValueError, match="Can not squeeze dim\\[2\\]"):
        tf.squeeze(x, [2])
    u = unknown()
    with pytest.raises(errors.InvalidArgumentError, match="Can not squeeze dim\\[0\\]"):
        run_with(tf.squeeze(u, [0]), {u: np.zeros((2, 1))})


# -- joining and splitting --------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_concat_stack_unstack(dtype):
    a, b = sample(dtype, (2, 3), 1), sample(dtype, (2, 3), 2)
    check_op(lambda x, y: tf.concat([x, y], -1), [a, b], lambda x, y: np.concatenate([x, y], -1))
    check_op(lambda x, y: tf.concat([x, y], 0), [a, b], lambda x, y: np.concatenate([x, y], 0))
    check_op(lambda x, y: tf.stack([x, y], axis=1), [a, b], lambda x, y: np.stack([x, y], 1))
    check_op(lambda x: tf.unstack(x, axis=1), [a], lambda x: list(np.moveaxis(x, 1, 0)))


def test_concat_stack_static_shapes_and_errors():
    x = tf.placeholder(tf.float32, [None, 3])
    y = tf.placeholder(tf.float32, [2, None])
    assert tf.concat([x, y], 0).shape.as_list() == [None, 3]
    assert tf.concat([x, tf.zeros([2, 3])], 0).shape.as_list() == [None, 3]
    assert tf.concat([tf.zeros([1, 3]), tf.zeros([2, 3])], 0).shape.as_list() == [3, 3]
    assert tf.concat([x], 0).op.type == "Identity"
    assert tf.stack([x, x], axis=-1).shape.as_list() == [None, 3, 2]
    assert tf.stack([1, 2]).op.type == "Const"
    n = tf.placeholder(tf.int32, [])
    packed = tf.stack([n, 2])
    assert packed.op.type == "Pack" and packed.shape.as_list() == [2]
    assert_close(run_with(packed, {n: 7}), np.array([7, 2], np.int32))
    assert_close(run_with(tf.reshape(tf.zeros([6]), [n, 3]), {n: 2}), np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match="Dimension 1 in both shapes must be equal"):
        tf.concat([tf.zeros([2, 3]), tf.zeros([2, 4])], 0)
    with pytest.raises(ValueError, match="axis = 3 not in"):
        tf.stack([tf.zeros([2]), tf.zeros([2])], axis=3)
    with pytest.raises(ValueError, match="Cannot infer num"):
        tf.unstack(x)
    u, v = unknown(), unknown()
    with pytest.raises(errors.InvalidArgumentError, match="Dimensions of inputs should match"):
        run_with(tf.concat([u, v], 0), {u: np.zeros((1, 2)), v: np.zeros((1, 3))})
    with pytest.raises(errors.InvalidArgumentError, match="Shapes of all inputs must match"):
        run_with(tf.stack([u, v]), {u: np.zeros(2), v: np.zeros(3)})
    with pytest.raises(errors.InvalidArgumentError, match="must equal 3"):
        run_with(tf.unstack(u, num=3)[0], {u: np.zeros(2)})


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_split(dtype):
    x = sample(dtype, (4, 6))
    check_op(lambda t: tf.split(t, 3, axis=1), [x], lambda a: np.split(a, 3, axis=1))
    check_op(lambda t: tf.split(t, [1, -1, 2], axis=-1), [x], lambda a: np.split(a, [1, 4], axis=1))
    check_op(lambda t: tf.split(t, [3, 1]), [x], lambda a: np.split(a, [3]))


def test_split_static_shapes_and_errors():
    x = tf.placeholder(tf.float32, [None, 6])
    parts = tf.split(x, [2, -1], 1)
    assert [p.shape.as_list() for p in parts] == [[None, 2], [None, 4]]
    assert [p.op.type for p in (tf.split(x, 2, 1)[0], parts[0])] == ["Split", "SplitV"]
    with pytest.raises(ValueError, match="evenly divisible by 4"):
        tf.split(x, 4, 1)
    with pytest.raises(ValueError):
        tf.split(x, [2, 2], 1)
    with pytest.raises(ValueError, match="Only one"):
        tf.split(x, [-1, -1], 1)
    u = unknown()
    with pytest.raises(errors.InvalidArgumentError, match="evenly divide"):
        run_with(tf.split(u, 2)[0], {u: np.zeros(3)})
    with pytest.raises(ValueError, match="Cannot infer num"):
        tf.split(u, tf.placeholder(tf.int32, [None]))
    assert len(tf.split(u, tf.placeholder(tf.int32, [None]), num=3)) == 3


# -- tiling, padding, reversing ---------------------------------------------------------------
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_tile_pad_reverse(dtype):
    x = sample(dtype, (2, 3))
    empty = b"" if dtype is object else 0
    check_op(lambda t: tf.tile(t, [2, 1]), [x], lambda a: np.tile(a, (2, 1)))
    check_op(
        lambda t: tf.pad(t, [[1, 0], [2, 1]]),
        [x],
        lambda a: np.pad(a, [[1, 0], [2, 1]], constant_values=empty),
    )
    for mode in ("REFLECT", "symmetric"):
        check_op(
            lambda t, m=mode: tf.pad(t, [[1, 1], [2, 0]], m),
            [x],
            lambda a, m=mode: np.pad(a, [[1, 1], [2, 0]], m.lower()),
        )
    check_op(lambda t: tf.reverse(t, [1]), [x], lambda a: a[:, ::-1])
    check_op(lambda t: tf.reverse(t, [0, -1]), [x], lambda a: a[::-1, ::-1])


def test_pad_v2_and_static_shapes():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    check_op(
        lambda t: tf.pad(t, [[0, 1], [1, 1]], constant_values=7.5),
        [x],
        lambda a: np.pad(a, [[0, 1], [1, 1]], constant_values=7.5),
    )
    assert tf.pad(tf.constant(x), [[0, 1], [1, 1]], constant_values=7.5).op.type == "PadV2"
    p = tf.placeholder(tf.float32, [None, 3])
    assert tf.pad(p, [[1, 1], [0, 2]]).shape.as_list() == [None, 5]
    assert tf.tile(p, [2, 3]).shape.as_list() == [None, 9]
    with pytest.raises(ValueError, match="less than the dimension size"):
        tf.pad(p, [[0, 0], [3, 0]], "REFLECT")
    with pytest.raises(ValueError, match="Unknown padding mode"):
        tf.pad(p, [[0, 0], [1, 0]], "WRAP")
    with pytest.raises(ValueError, match="non-negative"):
        tf.pad(p, [[0, 0], [-1, 0]])
    u = unknown()
    with pytest.raises(errors.InvalidArgumentError, match="less than or equal to"):
        run_with(tf.pad(u, [[0, 4]], "SYMMETRIC"), {u: np.zeros(3)})
    with pytest.raises(errors.InvalidArgumentError, match="multiples argument"):
        run_with(tf.tile(u, [2, 2]), {u: np.zeros(3)})
    with pytest.raises(errors.InvalidArgumentError, match="specified more than once"):
        run_with(tf.reverse(u, [0, -1]), {u: np.zeros(3)})


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_, object])
def test_reverse_sequence(dtype):
    x = sample(dtype, (3, 4, 2))
    lengths = np.array([2, 4, 0], np.int64)

    def reference(a, lens):
        out = a.copy()
        for b, n in enumerate(lens):  # the obvious loop, as a reference only
            out[b, :n] = a[b, :n][::-1]
        return out

    check_op(
        lambda t, n: tf.reverse_sequence(t, n, seq_axis=1, batch_axis=0), [x, lengths], reference
    )
    xt = np.swapaxes(x, 0, 1)
    check_op(
        lambda t, n: tf.reverse_sequence(t, n, seq_dim=0, batch_dim=1),
        [xt, lengths],
        lambda a, n: np.swapaxes(reference(np.swapaxes(a, 0, 1), n), 0, 1),
    )
    u = unknown()
    with pytest.raises(errors.InvalidArgumentError, match="seq_lens"):
        run_with(tf.reverse_sequence(u, [5, 1], seq_axis=1), {u: np.zeros((2, 3))})


# -- identity family and grouping -------------------------------------------------------------
def test_identity_family():
    x = tf.placeholder(tf.float32, [None, 2])
    a, b = tf.identity_n([x, tf.constant([1, 2])])
    assert a.shape.as_list() == [None, 2] and b.dtype == tf.int32
    e = tf.ensure_shape(x, [3, 2])
    assert e.shape.as_list() == [3, 2]
    assert_close(run_with(e, {x: np.ones((3, 2))}), np.ones((3, 2), np.float32))
    with pytest.raises(errors.InvalidArgumentError, match="not compatible with expected shape"):
        run_with(e, {x: np.ones((4, 2))})
    with pytest.raises(ValueError):
        tf.ensure_shape(x, [3, 3])
    d = tf.placeholder_with_default(tf.constant([1.0, 2.0]), [None])
    assert d.shape.as_list() == [None]
    assert_close(run_with(d, None), np.array([1, 2], np.float32))
    assert_close(run_with(tf.stop_gradient(d), {d: [5.0]}), np.array([5], np.float32))


def test_group_and_tuple_gate_execution():
    v = tf.Variable(0, name="counter")
    inc = tf.assign_add(v, 1)
    g = tf.group(inc, [tf.no_op()], name="both")
    assert g.type == "NoOp" and g.name == "both" and inc.op in g.control_inputs
    assert tf.group().type == "NoOp"
    x = tf.constant(3.0)
    gated = tf.tuple([x, None], control_inputs=[inc])
    assert gated[1] is None and gated[0].op.type == "Identity"
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(g)
        assert sess.run(v) == 1
        assert sess.run(gated[0]) == 3.0
        assert sess.run(v) == 2
    with pytest.raises(TypeError, match="Unknown keyword"):
        tf.group(inc, bogus=1)


def test_group_per_device():
    with tf.device("/cpu:0"):
        a = tf.no_op(name="a")
    b = tf.no_op(name="b")
    g = tf.group(a, b)
    assert g.type == "NoOp" and len(g.control_inputs) == 2
    assert all(dep.type == "NoOp" and len(dep.control_inputs) == 1 for dep in g.control_inputs)
    with tf.Session() as sess:
        sess.run(g)


def test_autopacking_lists_with_tensors():
    n = tf.placeholder(tf.int32, [])
    t = tf.convert_to_tensor([[n, 1], [2, 3]])
    assert t.op.type == "Pack" and t.shape.as_list() == [2, 2]
    assert_close(run_with(t, {n: 9}), np.array([[9, 1], [2, 3]], np.int32))
    assert_close(run_with(tf.zeros([n, 2]), {n: 1}), np.zeros((1, 2), np.float32))


def test_wrappers_return_expected_dtypes_for_empty_shapes():
    assert tf.reshape(tf.constant([5.0]), []).shape.as_list() == []
    assert_close(run([lambda: tf.fill([], 2.0)][0], []), np.float32(2.0))


def test_tensor_shapes_and_dimensions_convert():
    x = tf.zeros([2, 3])
    assert tf.reshape(x, x.shape[::-1]).shape.as_list() == [3, 2]
    assert tf.reshape(x, [x.shape[1], -1]).shape.as_list() == [3, 2]
    assert tf.convert_to_tensor(x.shape, dtype=tf.int64).dtype == tf.int64
    assert_close(run_with(tf.convert_to_tensor(x.shape[0]), None), np.int32(2))
    with pytest.raises(ValueError, match="partially known"):
        tf.convert_to_tensor(tf.TensorShape([None, 2]))
    with pytest.raises(TypeError):
        tf.convert_to_tensor(x.shape, dtype=tf.float32)


def test_tuple_gated_on_a_fed_placeholder():
    """Control edges from a fed Placeholder leave from its feed (TF's subgraph rewrite)."""
    x = tf.placeholder(tf.float32, [2])
    y, z = tf.tuple([x, x * 2.0])
    assert x.op in y.op.control_inputs[0].control_inputs
    got = run_with([y, z], {x: [1.0, 2.0]})
    assert_close(got[1], np.array([2, 4], np.float32))
