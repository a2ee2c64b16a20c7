"""Concurrent steps on one device (whitepaper §7, Figure 9): several client threads run training
steps of the same model at once in one Session, each on its own batches, updating the shared
variables asynchronously (as replicas on several devices would, but sharing one device). The
steps overlap inside the executor, which fills the device's threads with whichever step has
ready work: small models, whose single step cannot keep the device busy, gain throughput.

Run: python -m flowgraph.examples.concurrent_steps --threads 4 --steps 100
"""

from __future__ import annotations

import argparse
import sys
import threading
import time

import numpy as np

import flowgraph as tf
from flowgraph.examples import input_data


def build(learning_rate=0.05, hidden_units=64, seed=0):
    """The digits MLP: (images, labels, loss, train op, global step)."""
    images = tf.placeholder(tf.float32, [None, 64], name="images")
    labels = tf.placeholder(tf.int64, [None], name="labels")
    init = tf.glorot_uniform_initializer(seed=seed)
    hidden = tf.layers.dense(
        images, hidden_units, tf.nn.relu, kernel_initializer=init, name="hidden"
    )
    logits = tf.layers.dense(hidden, 10, kernel_initializer=init, name="logits")
    loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    global_step = tf.train.get_or_create_global_step()
    train_op = tf.train.GradientDescentOptimizer(learning_rate).minimize(loss, global_step)
    return images, labels, loss, train_op, global_step


def train(threads, steps_per_thread, batch_size=32, seed=0):
    """Runs `threads` clients of one Session; returns (global step, final test loss, secs)."""
    digits = input_data.load_digits(seed=seed)
    with tf.Graph().as_default():
        images, labels, loss, train_op, global_step = build(seed=seed)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            errors = []
            # each client reads its own shuffle of the training digits
            batches = [input_data.load_digits(seed=seed + 1 + i).train for i in range(threads)]

            def client(data):
                try:
                    for _ in range(steps_per_thread):
                        xs, ys = data.next_batch(batch_size)
                        sess.run(train_op, {images: xs, labels: ys})
                except Exception as e:  # noqa: BLE001 - reported to the caller
                    errors.append(e)

            workers = [threading.Thread(target=client, args=(b,)) for b in batches]
            start = time.perf_counter()
            for w in workers:
                w.start()
            for w in workers:
                w.join()
            elapsed = time.perf_counter() - start
            if errors:
                raise errors[0]
            test = {images: digits.test.images, labels: digits.test.labels}
            return sess.run(global_step), sess.run(loss, test), elapsed


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--steps", type=int, default=100, help="steps per thread")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    for threads in sorted({1, args.threads}):
        step, test_loss, secs = train(threads, args.steps * args.threads // threads)
        print(
            f"{threads} concurrent client(s): {step} steps in {secs:.2f} s "
            f"({step / secs:.0f} steps/s), test loss {np.float32(test_loss):.4f}"
        )


if __name__ == "__main__":
    main()
