"""The fused Apply*/SparseApply* kernels against their update formulas written out in NumPy.

The references (train_references.py) are written independently of the kernels, one formula per
optimizer in TensorFlow's documented form, computed in float64; the sparse reference sums
duplicate indices with a Python loop and applies the dense formula row by row.
"""

import threading

import numpy as np
import pytest
from train_references import (
    ref_adadelta,
    ref_adagrad,
    ref_adam,
    ref_centered_rms_prop,
    ref_ftrl,
    ref_gd,
    ref_momentum,
    ref_proximal_adagrad,
    ref_proximal_gd,
    ref_rms_prop,
)

import flowgraph as tf
from flowgraph.core import errors
from flowgraph.framework.apply_op import apply_op
from flowgraph.train import training_ops
from flowgraph.train.training_ops import snake_case

# op (Apply form) -> (reference, slot names after var, coefficients)
CASES = {
    "ApplyGradientDescent": (ref_gd, [], {"alpha": 0.1}),
    "ApplyMomentum": (ref_momentum, ["accum"], {"lr": 0.1, "momentum": 0.9}),
    "ApplyAdagrad": (ref_adagrad, ["accum"], {"lr": 0.1}),
    "ApplyAdadelta": (
        ref_adadelta,
        ["accum", "accum_update"],
        {"lr": 1.0, "rho": 0.95, "epsilon": 1e-6},
    ),
    "ApplyRMSProp": (
        ref_rms_prop,
        ["ms", "mom"],
        {"lr": 0.01, "rho": 0.9, "momentum": 0.5, "epsilon": 1e-3},
    ),
    "ApplyCenteredRMSProp": (
        ref_centered_rms_prop,
        ["mg", "ms", "mom"],
        {"lr": 0.01, "rho": 0.9, "momentum": 0.5, "epsilon": 1e-3},
    ),
    "ApplyAdam": (
        ref_adam,
        ["m", "v"],
        {
            "beta1_power": 0.9**3,
            "beta2_power": 0.999**3,
            "lr": 0.01,
            "beta1": 0.9,
            "beta2": 0.999,
            "epsilon": 1e-3,
        },
    ),
    "ApplyFtrl": (
        ref_ftrl,
        ["accum", "linear"],
        {"lr": 0.1, "l1": 0.05, "l2": 0.2, "lr_power": -0.5},
    ),
    "ApplyFtrlV2": (
        ref_ftrl,
        ["accum", "linear"],
        {"lr": 0.1, "l1": 0.05, "l2": 0.2, "l2_shrinkage": 0.1, "lr_power": -0.7},
    ),
    "ApplyProximalGradientDescent": (ref_proximal_gd, [], {"alpha": 0.1, "l1": 0.3, "l2": 0.2}),
    "ApplyProximalAdagrad": (ref_proximal_adagrad, ["accum"], {"lr": 0.1, "l1": 0.3, "l2": 0.2}),
}
SPARSE = ["Momentum", "Adagrad", "Adadelta", "RMSProp", "CenteredRMSProp", "Ftrl", "FtrlV2"]
SPARSE += ["ProximalGradientDescent", "ProximalAdagrad"]
TOL = {np.float16: (2e-2, 2e-2), np.float32: (2e-5, 1e-6), np.float64: (1e-12, 1e-14)}


def _slots(names, shape, rng):
    """Positive accumulators (they sit under square roots), signed var/linear/m/mg/mom."""
    out = {"var": rng.uniform(-1, 1, shape)}
    for n in names:
        positive = n in ("accum", "accum_update", "ms", "v")
        out[n] = rng.uniform(0.1, 1, shape) if positive else rng.uniform(-0.2, 0.2, shape)
    return out


def _run(op_type, slots, coefs, grad, dtype, indices=None, resource=False, **attrs):
    """Builds variables holding `slots`, runs the op once, returns (op output, new slot values)."""
    g = tf.Graph()
    with g.as_default():
        refs, inits = {}, []
        for n, value in slots.items():
            arr = np.asarray(value, dtype)
            if resource:
                refs[n] = apply_op(
                    "VarHandleOp", [], name=n, dtype=tf.as_dtype(dtype), shape=arr.shape
                ).outputs[0]
                inits.append(apply_op("AssignVariableOp", [refs[n], arr]))
            else:
                refs[n] = apply_op(
                    "VariableV2", [], name=n, dtype=tf.as_dtype(dtype), shape=arr.shape
                ).outputs[0]
                inits.append(apply_op("Assign", [refs[n], arr]))
        grad_ph = tf.placeholder(tf.as_dtype(dtype), np.shape(grad))
        inputs = {n: tf.constant(np.asarray(v, dtype)) for n, v in coefs.items()}
        dense_gd = op_type.removeprefix("Resource").startswith("Apply")
        inputs["delta" if dense_gd and op_type.endswith("GradientDescent") else "grad"] = grad_ph
        if indices is not None:
            inputs["indices"] = tf.constant(indices)
        fn = getattr(training_ops, snake_case(("Resource" if resource else "") + op_type))
        out = fn(**refs, **inputs, **attrs)
        if resource:
            reads = {
                n: apply_op("ReadVariableOp", [r], dtype=tf.as_dtype(dtype)).outputs[0]
                for n, r in refs.items()
            }
        with tf.Session(graph=g) as sess:
            sess.run(inits)
            result = sess.run(out, {grad_ph: np.asarray(grad, dtype)})
            return result, sess.run(reads if resource else refs)


def _check(got, want, dtype):
    rtol, atol = TOL[dtype]
    for n, w in want.items():
        assert got[n].dtype == dtype, n
        np.testing.assert_allclose(got[n], w, rtol=rtol, atol=atol, err_msg=n)


def _cast_slots(slots, dtype):
    """Values as the kernel sees them (rounded to dtype), widened back for the reference."""
    return {n: np.asarray(v, dtype).astype(np.float64) for n, v in slots.items()}


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("op_type", list(CASES))
def test_dense_apply(op_type, dtype):
    ref, names, coefs = CASES[op_type]
    rng = np.random.RandomState(1)
    slots = _slots(names, (3, 4), rng)
    grad = rng.uniform(-1, 1, (3, 4))
    out, got = _run(op_type, slots, coefs, grad, dtype)
    c = {k: float(np.asarray(v, dtype)) for k, v in coefs.items()}
    want = ref(_cast_slots(slots, dtype), c, np.asarray(grad, dtype).astype(np.float64), {})
    _check(got, want, dtype)
    np.testing.assert_array_equal(out, got["var"])  # the op outputs the updated variable


@pytest.mark.parametrize("attrs", [{"use_nesterov": True}])
@pytest.mark.parametrize("op_type", ["ApplyMomentum", "ApplyAdam"])
def test_nesterov(op_type, attrs):
    ref, names, coefs = CASES[op_type]
    rng = np.random.RandomState(2)
    slots, grad = _slots(names, (5,), rng), rng.uniform(-1, 1, (5,))
    _, got = _run(op_type, slots, coefs, grad, np.float64, **attrs)
    _check(got, ref(slots, coefs, grad, attrs), np.float64)


def test_adagrad_without_slot_update():
    rng = np.random.RandomState(3)
    slots, grad = _slots(["accum"], (4,), rng), rng.uniform(-1, 1, (4,))
    _, got = _run("ApplyAdagrad", slots, {"lr": 0.1}, grad, np.float64, update_slots=False)
    want = ref_adagrad(slots, {"lr": 0.1}, grad, {"update_slots": False})
    _check(got, want, np.float64)
    np.testing.assert_array_equal(got["accum"], slots["accum"])


def test_ftrl_multiply_linear_by_lr():
    rng = np.random.RandomState(4)
    slots, grad = _slots(["accum", "linear"], (6,), rng), rng.uniform(-1, 1, (6,))
    coefs = {"lr": 0.5, "l1": 0.05, "l2": 0.2, "lr_power": -0.5}
    _, got = _run("ApplyFtrl", slots, coefs, grad, np.float64, multiply_linear_by_lr=True)
    # With the flag, `linear` is lr times the plain form's, and so are l1 and the l2 term.
    plain = ref_ftrl(slots | {"linear": slots["linear"] / 0.5}, coefs, grad, {})
    np.testing.assert_allclose(got["linear"], plain["linear"] * 0.5, rtol=1e-12)
    np.testing.assert_allclose(got["var"], plain["var"], rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@pytest.mark.parametrize("op_type", ["ApplyGradientDescent", "ApplyMomentum"])
def test_complex_linear_rules(op_type, dtype):
    ref, names, coefs = CASES[op_type]
    rng = np.random.RandomState(5)
    shape = (2, 3)
    slots = {n: rng.randn(*shape) + 1j * rng.randn(*shape) for n in ["var"] + names}
    grad = rng.randn(*shape) + 1j * rng.randn(*shape)
    _, got = _run(op_type, slots, coefs, grad, dtype)
    want = ref(
        {n: np.asarray(v, dtype) for n, v in slots.items()}, coefs, np.asarray(grad, dtype), {}
    )
    for n, w in want.items():
        assert got[n].dtype == dtype
        np.testing.assert_allclose(got[n], w, rtol=1e-5)


def _sparse_reference(ref, slots, coefs, grad, indices, attrs):
    """Sums the gradient rows of duplicate indices, then applies the dense formula per row."""
    summed = {}
    for i, row in zip(indices, grad):
        summed[int(i)] = summed.get(int(i), 0) + row
    out = {n: v.copy() for n, v in slots.items()}
    for i, row in summed.items():
        new = ref({n: v[i] for n, v in slots.items()}, coefs, row, attrs)
        for n, v in new.items():
            out[n][i] = v
    return out


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("rule", SPARSE)
def test_sparse_apply_with_duplicates(rule, dtype, index_dtype):
    ref, names, coefs = CASES["Apply" + rule]
    rng = np.random.RandomState(6)
    slots = _slots(names, (6, 3), rng)
    indices = np.array([4, 0, 4, 2, 4], index_dtype)  # row 4 three times; rows 1, 3, 5 untouched
    grad = rng.uniform(-1, 1, (5, 3))
    _out, got = _run("SparseApply" + rule, slots, coefs, grad, dtype, indices=indices)
    c = {k: float(np.asarray(v, dtype)) for k, v in coefs.items()}
    want = _sparse_reference(
        ref, _cast_slots(slots, dtype), c, np.asarray(grad, dtype).astype(np.float64), indices, {}
    )
    _check(got, want, dtype)
    for n in got:
        np.testing.assert_array_equal(got[n][[1, 3, 5]], np.asarray(slots[n], dtype)[[1, 3, 5]])


def test_sparse_momentum_nesterov_on_3d_rows():
    ref, names, coefs = CASES["ApplyMomentum"]
    rng = np.random.RandomState(7)
    slots, grad, indices = (
        _slots(names, (4, 2, 3), rng),
        rng.uniform(-1, 1, (3, 2, 3)),
        np.array([3, 1, 3]),
    )
    _, got = _run(
        "SparseApplyMomentum", slots, coefs, grad, np.float64, indices=indices, use_nesterov=True
    )
    _check(
        got, _sparse_reference(ref, slots, coefs, grad, indices, {"use_nesterov": True}), np.float64
    )


@pytest.mark.parametrize(
    "op_type",
    [
        "ApplyAdam",
        "SparseApplyAdagrad",
        "ApplyProximalAdagrad",
        "SparseApplyProximalGradientDescent",
    ],
)
def test_resource_forms(op_type):
    rule = op_type.replace("SparseApply", "").replace("Apply", "")
    ref, names, coefs = CASES["Apply" + rule]
    rng = np.random.RandomState(8)
    slots = _slots(names, (4, 2), rng)
    sparse = op_type.startswith("Sparse")
    indices = np.array([1, 1, 3]) if sparse else None
    grad = rng.uniform(-1, 1, (3, 2) if sparse else (4, 2))
    _, got = _run(op_type, slots, coefs, grad, np.float64, indices=indices, resource=True)
    want = (
        _sparse_reference(ref, slots, coefs, grad, indices, {})
        if sparse
        else ref(slots, coefs, grad, {})
    )
    _check(got, want, np.float64)


def test_use_locking_updates_the_same():
    ref, names, coefs = CASES["ApplyRMSProp"]
    rng = np.random.RandomState(9)
    slots, grad = _slots(names, (3,), rng), rng.uniform(-1, 1, (3,))
    _, got = _run("ApplyRMSProp", slots, coefs, grad, np.float64, use_locking=True)
    _check(got, ref(slots, coefs, grad, {}), np.float64)


def test_use_locking_serializes_concurrent_updates():
    """Many threads stepping one variable: with use_locking no update is lost."""
    var = apply_op("VariableV2", [], name="v", dtype=tf.float64, shape=[1000]).outputs[0]
    acc = apply_op("VariableV2", [], name="a", dtype=tf.float64, shape=[1000]).outputs[0]
    init = [apply_op("Assign", [v, np.zeros(1000)]) for v in (var, acc)]
    step = training_ops.apply_adagrad(var, acc, np.float64(1.0), np.ones(1000), use_locking=True)
    with tf.Session() as sess:
        sess.run(init)
        threads = [
            threading.Thread(target=lambda: [sess.run(step.op) for _ in range(10)])
            for _ in range(6)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        np.testing.assert_array_equal(sess.run(acc), np.full(1000, 60.0))  # every accum += 1 landed
        np.testing.assert_allclose(
            sess.run(var), np.full(1000, -sum(k**-0.5 for k in range(1, 61)))
        )


def test_repeated_steps_accumulate():
    g = tf.Graph()
    with g.as_default():
        var = apply_op("VariableV2", [], name="v", dtype=tf.float64, shape=[2]).outputs[0]
        acc = apply_op("VariableV2", [], name="a", dtype=tf.float64, shape=[2]).outputs[0]
        init = [
            apply_op("Assign", [var, np.array([1.0, 2.0])]),
            apply_op("Assign", [acc, np.zeros(2)]),
        ]
        step = training_ops.apply_momentum(
            var, acc, np.float64(0.5), np.array([1.0, -1.0]), np.float64(0.9)
        )
        with tf.Session(graph=g) as sess:
            sess.run(init)
            first = sess.run(step)
            second = sess.run(step)
    np.testing.assert_allclose(first, [0.5, 2.5])
    np.testing.assert_allclose(second, [0.5 - 0.5 * 1.9, 2.5 + 0.5 * 1.9])


# -- errors -----------------------------------------------------------------------------------
def _vars(shape=(3,), dtype=tf.float32, n=2):
    return [apply_op("VariableV2", [], dtype=dtype, shape=shape).outputs[0] for _ in range(n)]


def test_graph_time_shape_errors():
    var, acc = _vars()
    with pytest.raises(errors.InvalidArgumentError, match="ApplyMomentum"):
        training_ops.apply_momentum(var, acc, 0.1, np.ones(4, np.float32), 0.9)
    with pytest.raises(errors.InvalidArgumentError, match="rank 0"):
        training_ops.apply_momentum(var, acc, [0.1, 0.2], np.ones(3, np.float32), 0.9)
    (other,) = _vars(shape=(4,), n=1)
    with pytest.raises(errors.InvalidArgumentError, match="var and accum"):
        training_ops.apply_momentum(var, other, 0.1, np.ones(3, np.float32), 0.9)
    with pytest.raises(errors.InvalidArgumentError, match="grad and indices"):
        training_ops.sparse_apply_adagrad(var, acc, 0.1, np.ones((2,), np.float32), [0, 1, 2])


def test_unsupported_dtype_and_non_ref():
    (ivar,) = _vars(dtype=tf.int32, n=1)
    with pytest.raises(TypeError, match="int32"):
        training_ops.apply_gradient_descent(ivar, 1, np.ones(3, np.int32))
    with pytest.raises(TypeError, match="mutable"):
        training_ops.apply_gradient_descent(tf.constant([1.0, 2.0, 3.0]), 0.1, [1.0, 1.0, 1.0])
    (var,) = _vars(n=1)
    with pytest.raises(TypeError, match="unexpected"):
        training_ops.apply_gradient_descent(var, 0.1, np.ones(3, np.float32), use_nesterov=True)


def test_run_time_errors():
    var, acc = _vars(shape=(3, 2))
    init = [apply_op("Assign", [v, np.zeros((3, 2), np.float32)]) for v in (var, acc)]
    indices = tf.placeholder(tf.int32, [None])
    grad = tf.placeholder(tf.float32, [None, 2])
    step = training_ops.sparse_apply_momentum(var, acc, 0.1, grad, indices, 0.9)
    with tf.Session() as sess:
        with pytest.raises(errors.FailedPreconditionError, match="uninitialized"):
            sess.run(step, {indices: [0], grad: np.ones((1, 2))})
        sess.run(init)
        with pytest.raises(errors.InvalidArgumentError, match="Index 3 at offset 1"):
            sess.run(step, {indices: [0, 3], grad: np.ones((2, 2))})
        with pytest.raises(errors.InvalidArgumentError, match="same size as indices"):
            sess.run(step, {indices: [0, 1], grad: np.ones((3, 2))})
        np.testing.assert_array_equal(
            sess.run(var), np.zeros((3, 2))
        )  # failed steps change nothing
        assert sess.run(step, {indices: np.zeros(0, np.int32), grad: np.zeros((0, 2))}).shape == (
            3,
            2,
        )


@pytest.mark.parametrize("op_type", list(CASES))
def test_gradient_aliasing_the_variable(op_type):
    """The rules update a ref variable in its buffer: a gradient that is that buffer (a read of
    the variable itself) must still be read as it was before the update."""
    ref, names, coefs = CASES[op_type]
    rng = np.random.RandomState(11)
    slots = _slots(names, (3, 4), rng)
    g = tf.Graph()
    with g.as_default():
        refs = {
            n: apply_op("VariableV2", [], name=n, dtype=tf.float64, shape=[3, 4]).outputs[0]
            for n in slots
        }
        inits = [apply_op("Assign", [refs[n], v]) for n, v in slots.items()]
        inputs = {n: tf.constant(np.float64(v)) for n, v in coefs.items()}
        inputs["delta" if op_type.endswith("GradientDescent") else "grad"] = tf.identity(
            refs["var"]
        )
        out = getattr(training_ops, snake_case(op_type))(**refs, **inputs)
        with tf.Session(graph=g) as sess:
            sess.run(inits)
            sess.run(out.op)
            got = sess.run(refs)
    _check(got, ref(slots, coefs, slots["var"], {}), np.float64)


@pytest.mark.parametrize(
    "op_type, rule, refs, temporaries",
    [
        ("ApplyGradientDescent", "gradient_descent", ["var"], 0),
        ("ApplyMomentum", "momentum", ["var", "accum"], 0),
        ("ApplyAdagrad", "adagrad", ["var", "accum"], 1),
        ("ApplyRMSProp", "rms_prop", ["var", "ms", "mom"], 1),
        ("ApplyAdam", "adam", ["var", "m", "v"], 1),
    ],
)
def test_dense_rules_update_in_place(op_type, rule, refs, temporaries):
    """A dense update of a ref variable writes into its buffers and allocates at most one array
    of the variable's size (a temporary), measured by tracemalloc (NumPy reports to it)."""
    import tracemalloc
    from types import SimpleNamespace

    from flowgraph.kernels.cpu import training
    from flowgraph.runtime.resources import VariableState

    _, _, coefs = CASES[op_type]
    n = 1 << 18  # 2 MiB of float64
    rng = np.random.RandomState(12)
    states = []
    for name in refs:
        st = VariableState(name, None, None)
        st.write(rng.uniform(0.1, 1.0, n), in_place=True)
        states.append(st)
    buffers = [st.update_buffer() for st in states]
    grad = rng.uniform(-1, 1, n)
    args = {k: np.float64(v) for k, v in coefs.items()}
    args["delta" if rule == "gradient_descent" else "grad"] = grad
    args.update(zip(refs, states))
    kernel = training._make_kernel(op_type, training.RULES[op_type[5:]], refs, False, False)
    inputs = [args[name] for name in training.input_names(op_type)]
    ctx = SimpleNamespace(attrs={"use_locking": False, "use_nesterov": False, "update_slots": True})
    # Once untraced first: loading a compiled rule (numba's cache) allocates ~15 MB the first
    # time a process calls it, which failed this test when it ran first in its worker.
    kernel(ctx, *inputs)
    tracemalloc.start()
    try:
        kernel(ctx, *inputs)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < (temporaries + 0.5) * n * 8
    for st, buf in zip(states, buffers):
        assert st.update_buffer() is buf and np.shares_memory(st.read(), buf)


def test_axpy_falls_back_where_blas_has_no_type():
    from flowgraph.kernels.cpu.training import _axpy

    for dtype in (np.float16, np.float32, np.complex64):
        y = np.arange(12, dtype=dtype).reshape(3, 4)
        x = np.ones((4, 3), dtype).T  # not contiguous: NumPy's path
        want = y + 2 * x
        _axpy(dtype(2), x, y)
        np.testing.assert_array_equal(y, want)
        z = np.ones((3, 4), dtype)
        _axpy(np.asarray(-1, dtype), y, z)
        np.testing.assert_array_equal(z, 1 - want)
