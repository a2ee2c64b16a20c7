"""Model parallelism (whitepaper §7, Figure 8): the layers of a stacked LSTM live on different
devices. Each layer is unrolled over time on its own device and sends its output at step t to
the next layer's device, so layer 2 works on step t while layer 1 already works on step t + 1:
the devices form a pipeline along the layers, with one Send/Recv pair per crossing edge.

The devices may be one process's (`/cpu:0..2` with device_count={"CPU": 3}) or several tasks'
(`/job:worker/task:0..2`); the graph and its results are the same as on one device.

The task: predict the sum of the last two inputs of a random sequence (a regression the LSTM
learns in a few hundred steps).

Run: python -m flowgraph.examples.model_parallel_lstm --layers 3 --steps 200
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import flowgraph as tf


def build(devices, num_steps=8, units=16, learning_rate=0.01, seed=0):
    """One LSTM layer per device (unrolled over `num_steps`), a linear head on the last device.

    Returns (inputs [batch, num_steps, 1], targets [batch, 1], loss, train op)."""
    inputs = tf.placeholder(tf.float32, [None, num_steps, 1], name="inputs")
    targets = tf.placeholder(tf.float32, [None, 1], name="targets")
    sequence = tf.unstack(inputs, num_steps, axis=1)
    init = tf.glorot_uniform_initializer(seed=seed)
    for i, device in enumerate(devices):
        with tf.device(device), tf.variable_scope(f"layer_{i}", initializer=init):
            cell = tf.nn.rnn_cell.LSTMCell(units)
            sequence, _ = tf.nn.static_rnn(cell, sequence, dtype=tf.float32)
    with tf.device(devices[-1]):
        prediction = tf.layers.dense(sequence[-1], 1, kernel_initializer=init, name="head")
        loss = tf.losses.mean_squared_error(targets, prediction)
        train_op = tf.train.AdamOptimizer(learning_rate).minimize(
            loss, global_step=tf.train.get_or_create_global_step()
        )
    return inputs, targets, loss, train_op


def batches(batch_size, num_steps, seed):
    """Endless (inputs, targets): uniform sequences, target = sum of their last two values."""
    rng = np.random.RandomState(seed)
    while True:
        x = rng.uniform(-1.0, 1.0, (batch_size, num_steps, 1)).astype(np.float32)
        yield x, x[:, -2:, 0].sum(axis=1, keepdims=True)


def train(target, devices, steps, batch_size=32, num_steps=8, config=None, seed=0):
    """Returns the losses and the final variables by name."""
    with tf.Graph().as_default():
        inputs, targets, loss, train_op = build(devices, num_steps, seed=seed)
        data = batches(batch_size, num_steps, seed)
        with tf.Session(target, config=config) as sess:
            sess.run(tf.global_variables_initializer())
            losses = []
            for _ in range(steps):
                x, y = next(data)
                losses.append(sess.run([loss, train_op], {inputs: x, targets: y})[0])
            names = [v.op.name for v in tf.trainable_variables()]
            return losses, dict(zip(names, sess.run(tf.trainable_variables())))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--steps", type=int, default=200)
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    config = tf.ConfigProto(device_count={"CPU": args.layers})
    devices = [f"/cpu:{i}" for i in range(args.layers)]
    losses, _ = train("", devices, args.steps, config=config)
    print(
        f"{args.layers} layers on {args.layers} devices: loss {losses[0]:.4f} -> "
        f"{np.mean(losses[-10:]):.4f}"
    )
    return losses


if __name__ == "__main__":
    main()
