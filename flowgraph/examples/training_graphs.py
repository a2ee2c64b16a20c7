"""The examples' training graphs, built without running their programs, with a fixed batch to
feed: what graph tools inspect and compare (bench/pass_effects.py counts the nodes each graph pass
removes; tests/runtime/test_pass_equivalence.py checks that training gives identical results with
and without the passes).

Each builder adds its graph to the default graph (seeded with `tf.set_random_seed`, so two
builds initialize identically) and returns a TrainingGraph.
"""

from __future__ import annotations

import argparse
import dataclasses

import numpy as np

import flowgraph as tf
from flowgraph.examples import digits_cnn, digits_mlp, lstm_lm, mnist


@dataclasses.dataclass
class TrainingGraph:
    """`train` is the op one step runs with `loss`; `feeds` is one batch."""

    loss: object
    train: object
    feeds: dict


def mlp() -> TrainingGraph:
    """digits_mlp: three dense layers, momentum SGD, summaries."""
    tf.set_random_seed(1)
    x, labels, loss, _, train_op, _ = digits_mlp.build(0.1, 0.9, seed=1)
    rng = np.random.RandomState(0)
    feeds = {x: rng.rand(32, 64).astype(np.float32), labels: rng.randint(0, 10, 32)}
    return TrainingGraph(loss, train_op, feeds)


def cnn() -> TrainingGraph:
    """digits_cnn: two conv/relu/pool blocks, dropout, Adam."""
    tf.set_random_seed(1)
    model = digits_cnn.build_model(0.001)
    rng = np.random.RandomState(0)
    feeds = {
        model["x"]: rng.rand(16, 64).astype(np.float32),
        model["y"]: rng.randint(0, 10, 16),
    }
    return TrainingGraph(model["loss"], model["train_op"], feeds)


def lstm() -> TrainingGraph:
    """lstm_lm: an unrolled LSTM language model, clipped gradients, Adam."""
    tf.set_random_seed(1)
    args = argparse.Namespace(seed=1, embedding=8, hidden=32, learning_rate=0.01, max_grad_norm=5.0)
    model = lstm_lm.Model(vocab_size=20, num_steps=8, args=args)
    targets, loss, train_op, _ = lstm_lm.build_training(model, args)
    rng = np.random.RandomState(0)
    feeds = {model.inputs: rng.randint(0, 20, (4, 8)), targets: rng.randint(0, 20, (4, 8))}
    return TrainingGraph(loss, train_op, feeds)


def mnist_mlp() -> TrainingGraph:
    """mnist: the tutorial's two hidden layers and gradient descent."""
    tf.set_random_seed(1)
    images = tf.placeholder(tf.float32, [None, mnist.IMAGE_PIXELS])
    labels = tf.placeholder(tf.int32, [None])
    loss = mnist.loss(mnist.inference(images, 32, 16), labels)
    train_op = mnist.training(loss, 0.01)
    rng = np.random.RandomState(0)
    feeds = {
        images: rng.rand(8, mnist.IMAGE_PIXELS).astype(np.float32),
        labels: rng.randint(0, 10, 8),
    }
    return TrainingGraph(loss, train_op, feeds)


BUILDERS = {"digits_mlp": mlp, "digits_cnn": cnn, "lstm_lm": lstm, "mnist": mnist_mlp}
