"""Each optimizer trains a small MLP (dense gradients) and an embedding (sparse gradients with
repeated ids) for two steps; every variable and slot must equal the same steps computed in
NumPy with the formulas of train_references.py and gradients derived by hand."""

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
    ref_rms_prop,
)

import flowgraph as tf
from flowgraph.framework.indexed_slices import IndexedSlices

# name -> (optimizer factory, reference,
#          {TF slot name: (reference slot, initial value)}, coefficients)
SPECS = {
    "sgd": (lambda: tf.train.GradientDescentOptimizer(0.3), ref_gd, {}, {"alpha": 0.3}),
    "momentum": (
        lambda: tf.train.MomentumOptimizer(0.1, 0.9),
        ref_momentum,
        {"momentum": ("accum", 0.0)},
        {"lr": 0.1, "momentum": 0.9},
    ),
    "nesterov": (
        lambda: tf.train.MomentumOptimizer(0.1, 0.9, use_nesterov=True),
        lambda s, c, g, a: ref_momentum(s, c, g, {"use_nesterov": True}),
        {"momentum": ("accum", 0.0)},
        {"lr": 0.1, "momentum": 0.9},
    ),
    "adagrad": (
        lambda: tf.train.AdagradOptimizer(0.2, initial_accumulator_value=0.5),
        ref_adagrad,
        {"accumulator": ("accum", 0.5)},
        {"lr": 0.2},
    ),
    "adadelta": (
        lambda: tf.train.AdadeltaOptimizer(1.0, rho=0.9, epsilon=1e-4),
        ref_adadelta,
        {"accum": ("accum", 0.0), "accum_update": ("accum_update", 0.0)},
        {"lr": 1.0, "rho": 0.9, "epsilon": 1e-4},
    ),
    "rmsprop": (
        lambda: tf.train.RMSPropOptimizer(0.05, decay=0.8, momentum=0.5, epsilon=1e-3),
        ref_rms_prop,
        {"rms": ("ms", 1.0), "momentum": ("mom", 0.0)},
        {"lr": 0.05, "rho": 0.8, "momentum": 0.5, "epsilon": 1e-3},
    ),
    "centered_rmsprop": (
        lambda: tf.train.RMSPropOptimizer(
            0.05, decay=0.8, momentum=0.5, epsilon=1e-3, centered=True
        ),
        ref_centered_rms_prop,
        {"rms": ("ms", 1.0), "mg": ("mg", 0.0), "momentum": ("mom", 0.0)},
        {"lr": 0.05, "rho": 0.8, "momentum": 0.5, "epsilon": 1e-3},
    ),
    "adam": (
        lambda: tf.train.AdamOptimizer(0.05, beta1=0.8, beta2=0.9, epsilon=1e-3),
        ref_adam,
        {"m": ("m", 0.0), "v": ("v", 0.0)},
        {"lr": 0.05, "beta1": 0.8, "beta2": 0.9, "epsilon": 1e-3},
    ),
    "ftrl": (
        lambda: tf.train.FtrlOptimizer(
            0.3, l1_regularization_strength=0.01, l2_regularization_strength=0.1
        ),
        ref_ftrl,
        {"accum": ("accum", 0.1), "linear": ("linear", 0.0)},
        {"lr": 0.3, "l1": 0.01, "l2": 0.1, "lr_power": -0.5},
    ),
    "ftrl_shrinkage": (
        lambda: tf.train.FtrlOptimizer(
            0.3,
            learning_rate_power=-0.6,
            l1_regularization_strength=0.01,
            l2_shrinkage_regularization_strength=0.2,
        ),
        ref_ftrl,
        {"accum": ("accum", 0.1), "linear": ("linear", 0.0)},
        {"lr": 0.3, "l1": 0.01, "l2": 0.0, "l2_shrinkage": 0.2, "lr_power": -0.6},
    ),
}


def _f32(value):
    """Python hyper-parameters become float32 tensors (TF's default), then are cast to the
    variable's type: the reference uses the same rounded values."""
    return float(np.float32(value))


class NumpyOptimizer:
    """The reference optimizer: slots per parameter, the formula per step, Adam's beta powers
    (float32 variables, as TF creates them from Python floats)."""

    def __init__(self, spec, params):
        _, self.ref, slots, coefs = spec
        self.coefs = {k: _f32(v) for k, v in coefs.items()}
        self.is_adam = self.ref is ref_adam
        self.state = {k: {"var": v.astype(np.float64)} for k, v in params.items()}
        for st in self.state.values():
            for ref_name, init in slots.values():
                st[ref_name] = np.full_like(st["var"], init)
        self.powers = (np.float32(coefs.get("beta1", 0)), np.float32(coefs.get("beta2", 0)))

    def step(self, grads, sparse_rows=None):
        c = dict(self.coefs)
        if self.is_adam:
            c["beta1_power"], c["beta2_power"] = (float(p) for p in self.powers)
        for k, g in grads.items():
            if sparse_rows is None or self.is_adam or self.ref is ref_gd:
                self.state[k] = self.ref(self.state[k], c, g, {})  # every row moves
                continue
            st = self.state[k]
            new = self.ref({n: v[sparse_rows] for n, v in st.items()}, c, g[sparse_rows], {})
            for n, v in new.items():
                st[n] = st[n].copy()
                st[n][sparse_rows] = v
        if self.is_adam:
            self.powers = (
                self.powers[0] * np.float32(c["beta1"]),
                self.powers[1] * np.float32(c["beta2"]),
            )


def _mlp_grads(p, x, t):
    h_pre = x @ p["w1"] + p["b1"]
    h = np.maximum(h_pre, 0)
    out = h @ p["w2"] + p["b2"]
    d_out = 2 * (out - t) / out.size
    d_h = d_out @ p["w2"].T * (h_pre > 0)
    loss = np.mean((out - t) ** 2)
    return loss, {"w1": x.T @ d_h, "b1": d_h.sum(0), "w2": h.T @ d_out, "b2": d_out.sum(0)}


def _check_slots(sess, optimizer, variables, spec, reference, rtol):
    for key, var in variables.items():
        np.testing.assert_allclose(
            sess.run(var), reference.state[key]["var"], rtol=rtol, atol=1e-6, err_msg=key
        )
        for slot_name, (ref_name, _) in spec[2].items():
            slot = optimizer.get_slot(var, slot_name)
            np.testing.assert_allclose(
                sess.run(slot),
                reference.state[key][ref_name],
                rtol=rtol,
                atol=1e-6,
                err_msg=f"{key}/{slot_name}",
            )


@pytest.mark.parametrize("name", list(SPECS))
def test_dense_mlp_two_steps(name):
    spec = SPECS[name]
    rng = np.random.RandomState(0)
    params = {
        "w1": rng.randn(3, 4),
        "b1": rng.randn(4) * 0.1,
        "w2": rng.randn(4, 2),
        "b2": rng.randn(2) * 0.1,
    }
    batches = [(rng.randn(5, 3), rng.randn(5, 2)) for _ in range(2)]
    x = tf.placeholder(tf.float64, [None, 3])
    t = tf.placeholder(tf.float64, [None, 2])
    variables = {k: tf.Variable(v, name=k) for k, v in params.items()}
    h = tf.nn.relu(tf.matmul(x, variables["w1"]) + variables["b1"])
    loss = tf.reduce_mean(tf.square(tf.matmul(h, variables["w2"]) + variables["b2"] - t))
    global_step = tf.train.create_global_step()
    optimizer = spec[0]()
    train = optimizer.minimize(loss, global_step=global_step)
    reference = NumpyOptimizer(spec, params)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for bx, bt in batches:
            want_loss, grads = _mlp_grads({k: s["var"] for k, s in reference.state.items()}, bx, bt)
            got_loss, _ = sess.run([loss, train], {x: bx, t: bt})
            np.testing.assert_allclose(got_loss, want_loss, rtol=1e-10)
            reference.step(grads)
        _check_slots(sess, optimizer, variables, spec, reference, rtol=1e-9)
        assert sess.run(global_step) == 2
        if reference.is_adam:
            beta1_power, beta2_power = optimizer._get_beta_accumulators()
            np.testing.assert_allclose(
                sess.run([beta1_power, beta2_power]), reference.powers, rtol=1e-12
            )


@pytest.mark.parametrize("name", list(SPECS))
def test_sparse_embedding_two_steps(name):
    """Gradients of a gather are IndexedSlices; repeated ids are summed before the update."""
    spec = SPECS[name]
    rng = np.random.RandomState(1)
    table = rng.randn(6, 3)
    ids = tf.placeholder(tf.int32, [None])
    weights = tf.placeholder(tf.float64, [None, 3])
    emb = tf.Variable(table, name="emb")
    loss = tf.reduce_sum(tf.gather(emb, ids) * weights)
    optimizer = spec[0]()
    grads_and_vars = optimizer.compute_gradients(loss, [emb])
    assert isinstance(grads_and_vars[0][0], IndexedSlices)
    train = optimizer.apply_gradients(grads_and_vars)
    reference = NumpyOptimizer(spec, {"emb": table})
    steps = [np.array([4, 0, 4, 2]), np.array([1, 4, 1])]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for step_ids in steps:
            w = rng.randn(len(step_ids), 3)
            dense = np.zeros_like(table)
            np.add.at(dense, step_ids, w)
            sess.run(train, {ids: step_ids, weights: w})
            reference.step({"emb": dense}, sparse_rows=np.unique(step_ids))
        _check_slots(sess, optimizer, {"emb": emb}, spec, reference, rtol=1e-9)


def _linear_model():
    x = tf.constant([[1.0, 2.0], [3.0, -1.0]])
    w = tf.Variable([[0.5], [-0.5]], name="w")
    b = tf.Variable([0.1], name="b")
    loss = tf.reduce_sum(tf.square(tf.matmul(x, w) + b))
    return w, b, loss


def test_train_op_without_global_step_is_a_named_group():
    _w, _b, loss = _linear_model()
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    assert train.type == "NoOp" and train.name == "GradientDescent"
    assert sorted(op.type for op in train.control_inputs) == ["ApplyGradientDescent"] * 2
    assert tf.get_default_graph().get_operation_by_name(
        "GradientDescent/update_w/ApplyGradientDescent"
    )


@pytest.mark.parametrize(
    "gate",
    [tf.train.Optimizer.GATE_NONE, tf.train.Optimizer.GATE_OP, tf.train.Optimizer.GATE_GRAPH],
)
def test_gating_and_var_list(gate):
    w, b, loss = _linear_model()
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss, var_list=[w], gate_gradients=gate)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(train)
        # d/dw sum((xw+b)^2) = 2 x^T (xw+b), with xw + b = [-0.4, 2.1]
        np.testing.assert_allclose(
            sess.run(w), [[0.5 - 0.2 * (-0.4 + 6.3)], [-0.5 - 0.2 * (-0.8 - 2.1)]], rtol=1e-6
        )
        np.testing.assert_allclose(sess.run(b), [0.1])  # not in var_list


def test_learning_rate_tensor_callable_and_schedule():
    _w, _b, loss = _linear_model()
    step = tf.train.get_or_create_global_step()
    lr = tf.train.exponential_decay(0.1, step, decay_steps=1, decay_rate=0.5)
    train = tf.train.GradientDescentOptimizer(lambda: lr).minimize(loss, global_step=step)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert sess.run(lr) == pytest.approx(0.1)
        sess.run(train)
        assert sess.run(lr) == pytest.approx(0.05)
        assert tf.train.global_step(sess, step) == 1


def test_use_locking_reaches_the_update_ops():
    _w, _b, loss = _linear_model()
    train = tf.train.MomentumOptimizer(0.1, 0.9, use_locking=True).minimize(loss)
    applies = [op for op in train.control_inputs if op.type == "ApplyMomentum"]
    assert applies and all(op.get_attr("use_locking") for op in applies)


def test_slot_api_and_optimizer_variables():
    w, _b, loss = _linear_model()
    opt = tf.train.RMSPropOptimizer(0.1, centered=True)
    opt.minimize(loss)
    assert opt.get_slot_names() == ["mg", "momentum", "rms"]
    assert opt.get_slot(w, "rms").op.name == "w/RMSProp"
    assert opt.get_slot(w, "mg").op.name == "w/RMSProp_1"
    assert opt.get_slot(w, "momentum").op.name == "w/RMSProp_2"
    assert opt.get_slot(w, "nope") is None
    assert [v.op.name for v in opt.variables()] == [
        "b/RMSProp",
        "b/RMSProp_1",
        "b/RMSProp_2",
        "w/RMSProp",
        "w/RMSProp_1",
        "w/RMSProp_2",
    ]
    assert all(v not in tf.trainable_variables() for v in opt.variables())
    assert all(v in tf.global_variables() for v in opt.variables())


def test_errors():
    w, _b, loss = _linear_model()
    opt = tf.train.GradientDescentOptimizer(0.1)
    with pytest.raises(ValueError, match="No gradients provided for any variable"):
        opt.minimize(tf.reduce_sum(tf.constant([1.0, 2.0])))
    with pytest.raises(ValueError, match="gate_gradients"):
        opt.compute_gradients(loss, gate_gradients=7)
    with pytest.raises(ValueError, match="Invalid type"):
        opt.compute_gradients(tf.constant(1), var_list=[w])
    with pytest.raises(ValueError, match="No variables provided"):
        opt.apply_gradients([])
    with pytest.raises(ValueError, match="No gradients provided"):
        opt.apply_gradients([(None, w)])
    with pytest.raises(ValueError, match="initial_accumulator_value must be positive"):
        tf.train.AdagradOptimizer(0.1, initial_accumulator_value=0.0)
    with pytest.raises(ValueError, match="l1_regularization_strength"):
        tf.train.FtrlOptimizer(0.1, l1_regularization_strength=-1.0)
    with pytest.raises(ValueError, match="learning_rate_power"):
        tf.train.FtrlOptimizer(0.1, learning_rate_power=0.5)


@pytest.mark.parametrize("name", ["momentum", "adam", "rmsprop"])
def test_half_precision_variables(name):
    """float16 variables: the float32 hyper-parameters are cast to half for the fused op."""
    spec = SPECS[name]
    table = np.array([[0.5, -1.0], [2.0, 0.25]], np.float16)
    w = tf.Variable(table, name="w")
    loss = tf.reduce_sum(tf.square(w))
    optimizer = spec[0]()
    train = optimizer.minimize(loss)
    reference = NumpyOptimizer(spec, {"w": table})
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(2):
            reference.step({"w": 2 * reference.state["w"]["var"]})
            sess.run(train)
        got = sess.run(w)
    assert got.dtype == np.float16
    np.testing.assert_allclose(got, reference.state["w"]["var"], rtol=5e-3, atol=5e-3)
