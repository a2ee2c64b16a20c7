"""In-graph replication (whitepaper §7, Figure 7): one client builds one graph holding a model
"tower" per device, each on its slice of the batch; the towers' gradients are averaged on the
parameter device and applied once. The devices may be one process's (`/cpu:0`, `/cpu:1`, ...
with ConfigProto(device_count={"CPU": 3})) or several tasks' (`/job:worker/task:1`, ...): the
graph is the same, only its device strings differ.

With equal slices, the mean of the towers' mean losses is the full batch's mean loss, so the
replicated model trains exactly as one tower on the whole batch would (up to rounding).

Run: python -m flowgraph.examples.in_graph_replication --towers 3 --steps 200
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import flowgraph as tf
from flowgraph.examples import input_data

_VARIABLE_OPS = ("VariableV2", "Variable", "VarHandleOp")


def params_on(param_device: str, tower_device: str):
    """A device function: variables on `param_device`, every other op on `tower_device`."""

    def device(op):
        return param_device if op.type in _VARIABLE_OPS else tower_device

    return device


def tower_loss(images, labels, hidden_units, seed):
    """The MLP's mean cross entropy on one slice; variables shared between towers."""
    init = tf.glorot_uniform_initializer(seed=seed)
    with tf.variable_scope("model", reuse=tf.AUTO_REUSE, initializer=init):
        hidden = tf.layers.dense(images, hidden_units, activation=tf.nn.relu, name="hidden")
        logits = tf.layers.dense(hidden, 10, name="logits")
    return tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)


def average_gradients(tower_grads):
    """[(gradient, variable)] per tower -> [(mean gradient, variable)] (cifar10_multi_gpu's)."""
    averaged = []
    for grads_and_vars in zip(*tower_grads):
        grads = [g for g, _ in grads_and_vars]
        averaged.append((tf.reduce_mean(tf.stack(grads), axis=0), grads_and_vars[0][1]))
    return averaged


def build(devices, param_device, learning_rate=0.1, hidden_units=64, pixels=64, seed=0):
    """Placeholders for the whole batch, one tower per device, the averaged update.

    Returns (images, labels, mean loss, train op)."""
    images = tf.placeholder(tf.float32, [None, pixels], name="images")
    labels = tf.placeholder(tf.int64, [None], name="labels")
    with tf.device(param_device):
        global_step = tf.train.get_or_create_global_step()
        opt = tf.train.GradientDescentOptimizer(learning_rate)
        image_slices = tf.split(images, len(devices))
        label_slices = tf.split(labels, len(devices))
    tower_grads, losses = [], []
    for i, device in enumerate(devices):
        with tf.device(params_on(param_device, device)), tf.name_scope(f"tower_{i}"):
            loss = tower_loss(image_slices[i], label_slices[i], hidden_units, seed)
            losses.append(loss)
            tower_grads.append(opt.compute_gradients(loss))
    with tf.device(param_device):
        train_op = opt.apply_gradients(average_gradients(tower_grads), global_step=global_step)
        mean_loss = tf.add_n(losses) / len(devices)
    return images, labels, mean_loss, train_op


def train(target, devices, param_device, steps, batch_size, config=None, seed=0):
    """Trains on the bundled digits; returns the losses and the final variables by name."""
    digits = input_data.load_digits(seed=seed)
    with tf.Graph().as_default():
        images, labels, loss, train_op = build(devices, param_device, seed=seed)
        with tf.Session(target, config=config) as sess:
            sess.run(tf.global_variables_initializer())
            losses = []
            for _ in range(steps):
                xs, ys = digits.train.next_batch(batch_size)
                losses.append(sess.run([loss, train_op], {images: xs, labels: ys})[0])
            names = [v.op.name for v in tf.trainable_variables()]
            return losses, dict(zip(names, sess.run(tf.trainable_variables())))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--towers", type=int, default=3)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch_size", type=int, default=96)
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    config = tf.ConfigProto(device_count={"CPU": args.towers})
    devices = [f"/cpu:{i}" for i in range(args.towers)]
    losses, _ = train("", devices, "/cpu:0", args.steps, args.batch_size, config)
    print(f"{args.towers} towers: loss {losses[0]:.4f} -> {np.mean(losses[-10:]):.4f}")
    return losses


if __name__ == "__main__":
    main()
