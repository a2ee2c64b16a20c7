"""Our tf.gradients on the model of the real-TF fixture `gradients_mlp`: the same program built
here names its gradient tensors as TF does, and they hold TF's values."""

import os

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import tensor_util
from flowgraph.core.protos import GraphDef

FIXTURES = "/work/shared/fixtures/tensorflow/graphs"
FETCHES = [
    "gradients/BiasAdd_grad/BiasAddGrad:0",
    "gradients/MatMul_1_grad/MatMul_1:0",
    "gradients/MatMul_grad/MatMul:0",
    "gradients/MatMul_grad/MatMul_1:0",
    "gradients/add_grad/Reshape:0",
]


@pytest.mark.skipif(not os.path.exists(f"{FIXTURES}/gradients_mlp.pb"), reason="fixtures absent")
def test_gradients_mlp_rebuilt_matches_tf_names_and_values():
    gd = GraphDef()
    with open(f"{FIXTURES}/gradients_mlp.pb", "rb") as f:
        gd.ParseFromString(f.read())
    consts = {
        n.name: tensor_util.make_ndarray(n.attr["value"].tensor) for n in gd.node if n.op == "Const"
    }
    data = np.load(f"{FIXTURES}/gradients_mlp.npz")

    x = tf.placeholder(tf.float32, [None, 5], name="x")
    labels = tf.placeholder(tf.float32, [None, 3], name="labels")
    w1, b1 = tf.constant(consts["w1"], name="w1"), tf.constant(consts["b1"], name="b1")
    w2, b2 = tf.constant(consts["w2"], name="w2"), tf.constant(consts["b2"], name="b2")
    h = tf.tanh(tf.matmul(x, w1) + b1)
    h = tf.nn.relu(h) + consts["mul/x"] * tf.sigmoid(h)
    logits = tf.nn.bias_add(tf.matmul(h, w2), b2)
    xent = tf.nn.softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    loss = tf.reduce_mean(xent, name="loss")
    tf.gradients(loss, [x, w1, b1, w2, b2])

    g = tf.get_default_graph()
    fetches = [g.get_tensor_by_name(n) for n in FETCHES]
    with tf.Session() as sess:
        got = sess.run(fetches, {x: data["feed_x_0"], labels: data["feed_labels_0"]})
    for name, value in zip(FETCHES, got):
        key = "fetch_" + name.replace("/", ".").replace(":", "_")
        np.testing.assert_allclose(value, data[key], rtol=1e-5, atol=1e-6, err_msg=name)
