"""Whole-program workloads (issue 9): training loops as TF1 programs write them, input batching,
feeding and fetching included, written once over a `tf` module like `workloads.py`.

P1  the README's main job: the digits CNN of `flowgraph/examples/digits_cnn.py` (conv 3x3x32
    SAME -> ReLU -> max-pool -> conv 3x3x64 -> ReLU -> pool -> dense 128 -> ReLU -> dropout
    -> dense 10, Adam 1e-3, batch 64), each step `sess.run([train, loss, accuracy])` on the next
    shuffled batch of the bundled digits, keep_prob fed.
P2  the softmax-regression MNIST tutorial: x[?, 784] @ W + b, softmax cross-entropy against
    one-hot labels, GradientDescent(0.5), batches of 100 from an `input_data`-style DataSet
    (shuffled once per epoch) over 5,500 synthetic 28x28 images (no MNIST is shipped).

A measured step is PROGRAM_STEPS training steps; the unit is ms per training step (steps/s =
1000 / that).
"""

from __future__ import annotations

import time

import numpy as np
from workloads import DIGITS, Case, Target, Workload, session

PROGRAM_STEPS = 50
P1_BATCH = 64
P2_BATCH = 100
P2_EXAMPLES = 5_500


class DataSet:
    """`input_data.DataSet.next_batch` in NumPy: consecutive batches of a permutation that is
    redrawn at each epoch (seeded, so both peers see the same batches)."""

    def __init__(self, images: np.ndarray, labels: np.ndarray, seed: int):
        self._images, self._labels = images, labels
        self._rng = np.random.RandomState(seed)
        self._order = self._rng.permutation(len(images))
        self._at = 0

    def next_batch(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        if self._at + n > len(self._order):
            self._order = self._rng.permutation(len(self._images))
            self._at = 0
        idx = self._order[self._at : self._at + n]
        self._at += n
        return self._images[idx], self._labels[idx]


def _training_loop(sess, fetches, next_feed) -> Case:
    def step() -> float:
        t0 = time.perf_counter()
        for _ in range(PROGRAM_STEPS):
            sess.run(fetches, feed_dict=next_feed())
        return time.perf_counter() - t0

    return Case(step, sess.close)


def _conv_relu_pool(tf, x, c_in, c_out, name):
    with tf.variable_scope(name):
        init = tf.truncated_normal_initializer(stddev=0.1, seed=1)
        w = tf.get_variable("weights", [3, 3, c_in, c_out], initializer=init)
        b = tf.get_variable("biases", [c_out], initializer=tf.constant_initializer(0.1))
        conv = tf.nn.conv2d(x, w, strides=[1, 1, 1, 1], padding="SAME")
        relu = tf.nn.relu(tf.nn.bias_add(conv, b))
        return tf.nn.max_pool(relu, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="SAME")


def _dense(tf, x, n_in, n_out, name):
    with tf.variable_scope(name):
        init = tf.truncated_normal_initializer(stddev=0.1, seed=2)
        w = tf.get_variable("weights", [n_in, n_out], initializer=init)
        b = tf.get_variable("biases", [n_out], initializer=tf.constant_initializer(0.1))
        return tf.matmul(x, w) + b


def build_p1(tf) -> Case:
    """The digits CNN main job's training loop (see the module docstring)."""
    data = np.load(DIGITS)
    images = (data["images"].reshape(len(data["images"]), -1) / 16.0).astype(np.float32)
    digits = DataSet(images, data["labels"].astype(np.int64), seed=0)
    g = tf.Graph()
    with g.as_default():
        tf.set_random_seed(0)
        x = tf.placeholder(tf.float32, [None, 64], name="x")
        y = tf.placeholder(tf.int64, [None], name="y")
        keep_prob = tf.placeholder_with_default(1.0, [], name="keep_prob")
        h = _conv_relu_pool(tf, tf.reshape(x, [-1, 8, 8, 1]), 1, 32, "conv1")
        h = _conv_relu_pool(tf, h, 32, 64, "conv2")
        h = tf.nn.relu(_dense(tf, tf.reshape(h, [-1, 2 * 2 * 64]), 256, 128, "fc1"))
        logits = _dense(tf, tf.nn.dropout(h, keep_prob), 128, 10, "fc2")
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
        )
        correct = tf.equal(tf.argmax(logits, 1), y)
        accuracy = tf.reduce_mean(tf.cast(correct, tf.float32))
        train = tf.train.AdamOptimizer(1e-3).minimize(loss)
        init = tf.global_variables_initializer()
    sess = session(tf, g)
    sess.run(init)

    def feed():
        xs, ys = digits.next_batch(P1_BATCH)
        return {x: xs, y: ys, keep_prob: 0.5}

    return _training_loop(sess, [train, loss, accuracy], feed)


def p2_data() -> DataSet:
    """P2's synthetic images and one-hot labels (the same on every peer and the floor)."""
    rng = np.random.RandomState(0)
    images = rng.rand(P2_EXAMPLES, 784).astype(np.float32)
    labels = np.eye(10, dtype=np.float32)[rng.randint(0, 10, P2_EXAMPLES)]
    return DataSet(images, labels, seed=1)


def build_p2(tf) -> Case:
    """The softmax-regression tutorial's training loop (see the module docstring)."""
    mnist = p2_data()
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 784])
        w = tf.Variable(tf.zeros([784, 10]))
        b = tf.Variable(tf.zeros([10]))
        y = tf.matmul(x, w) + b
        y_ = tf.placeholder(tf.float32, [None, 10])
        cross_entropy = tf.reduce_mean(
            tf.nn.softmax_cross_entropy_with_logits_v2(labels=y_, logits=y)
        )
        train = tf.train.GradientDescentOptimizer(0.5).minimize(cross_entropy)
        init = tf.global_variables_initializer()
    sess = session(tf, g)
    sess.run(init)

    def feed():
        xs, ys = mnist.next_batch(P2_BATCH)
        return {x: xs, y_: ys}

    return _training_loop(sess, train, feed)


PROGRAM_WORKLOADS = [
    Workload(
        "P1",
        "digits CNN main job (Adam, 64)",
        "ms/step",
        PROGRAM_STEPS,
        Target(ratio=1.0),
        build_p1,
        9,
        1,
    ),
    Workload(
        "P2",
        "softmax regression, batches of 100",
        "ms/step",
        PROGRAM_STEPS,
        Target(ratio=1.0),
        build_p2,
        9,
        1,
    ),
]
