"""Our optimizers rebuild the models of the real-TF training fixtures (train_sgd, train_momentum,
train_adam) through the Python API and must reproduce TF's training: the same variable names
(slots and non-slots included), the same fused update ops, the same losses and final values.

The initial weights are read from the fixture GraphDef's `<var>/initial_value` constants; the
batches and expected values come from the fixture's .npz (see the fixtures README).
"""

import json

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core.tensor_util import make_ndarray
from tests.helpers import TF_FIXTURES

GRAPHS = TF_FIXTURES / "graphs"
if not (GRAPHS / "cases.json").is_file():
    pytest.skip(f"TensorFlow fixtures not found under {GRAPHS}", allow_module_level=True)

OPTIMIZERS = {
    "train_sgd": (lambda: tf.train.GradientDescentOptimizer(0.5), "ApplyGradientDescent"),
    "train_momentum": (lambda: tf.train.MomentumOptimizer(0.2, momentum=0.9), "ApplyMomentum"),
    "train_adam": (lambda: tf.train.AdamOptimizer(0.01), "ApplyAdam"),
}


def _fixture(case):
    gd = tf.GraphDef()
    gd.ParseFromString((GRAPHS / f"{case}.pb").read_bytes())
    spec = json.loads((GRAPHS / "cases.json").read_text())[case]
    return gd, spec, np.load(GRAPHS / f"{case}.npz")


def _build(gd, make_optimizer):
    """The fixture's model: a ReLU MLP with a mean sparse softmax cross-entropy loss."""
    consts = {n.name: make_ndarray(n.attr["value"].tensor) for n in gd.node if n.op == "Const"}
    x = tf.placeholder(tf.float32, [None, 4], name="x")
    y = tf.placeholder(tf.int64, [None], name="y")
    with tf.variable_scope("layer"):
        w1, b1, w2, b2 = (
            tf.Variable(consts[f"layer/{n}/initial_value"], name=n)
            for n in ("w1", "b1", "w2", "b2")
        )
    global_step = tf.train.get_or_create_global_step()
    logits = tf.matmul(tf.nn.relu(tf.matmul(x, w1) + b1), w2) + b2
    xent = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
    loss = tf.reduce_mean(xent, name="loss")
    optimizer = make_optimizer()
    train = optimizer.minimize(loss, global_step=global_step, name="train")
    return optimizer, train, tf.global_variables_initializer()


@pytest.mark.parametrize("case", list(OPTIMIZERS))
def test_variables_and_update_ops_match_tf(case):
    gd, _, _ = _fixture(case)
    make_optimizer, apply_type = OPTIMIZERS[case]
    optimizer, train, _ = _build(gd, make_optimizer)
    ours = tf.get_default_graph().as_graph_def()
    names = lambda g, op: sorted(n.name for n in g.node if n.op == op)
    assert names(ours, "VariableV2") == names(gd, "VariableV2")
    assert names(ours, apply_type) == names(gd, apply_type)
    assert train.name == "train" and train.type == "AssignAdd"
    assert train in tf.get_collection(tf.GraphKeys.TRAIN_OP)
    slot_vars = {v.op.name for v in optimizer.variables()}
    assert slot_vars == set(names(gd, "VariableV2")) - {
        "layer/w1",
        "layer/b1",
        "layer/w2",
        "layer/b2",
        "global_step",
    }
    for v in tf.trainable_variables():
        for slot in optimizer.get_slot_names():
            s = optimizer.get_slot(v, slot)
            assert s is not None and s.get_shape() == v.get_shape() and not s.trainable
            assert s.op.colocation_groups() == [f"loc:@{v.op.name}".encode()]


@pytest.mark.parametrize("case", list(OPTIMIZERS))
def test_training_matches_tf(case):
    gd, spec, data = _fixture(case)
    _, train, init = _build(gd, OPTIMIZERS[case][0])
    graph = tf.get_default_graph()
    rtol, atol = spec["rtol"], spec["atol"]
    with tf.Session() as sess:
        sess.run(init)
        for step in spec["steps"][1:]:
            feeds = {graph.get_tensor_by_name(k): data[v] for k, v in step.get("feeds", {}).items()}
            fetch_names = list(step.get("fetches", {}))
            targets = [train] if step.get("targets") else []
            got = sess.run([graph.get_tensor_by_name(n) for n in fetch_names] + targets, feeds)
            for name, value in zip(fetch_names, got):
                want = data[step["fetches"][name]]
                assert np.asarray(value).dtype == want.dtype, name
                np.testing.assert_allclose(value, want, rtol=rtol, atol=atol, err_msg=name)
