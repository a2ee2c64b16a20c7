"""The whitepaper's Figure 1 program: C = ReLU(W x + b), built and run as a TF1 graph.

Run: python -m flowgraph.examples.figure1 [--steps 10]
"""

from __future__ import annotations

import argparse

import numpy as np

import flowgraph as tf


def build():
    """The graph of Figure 1 (a ReLU layer over a 100-wide input) and its placeholder."""
    b = tf.Variable(tf.zeros([100]), name="b")  # 100-d vector, init to zeroes
    W = tf.Variable(tf.random_uniform([784, 100], -1, 1, seed=1), name="W")  # 784x100 matrix
    x = tf.placeholder(tf.float32, [None, 784], name="x")  # placeholder for input
    relu = tf.nn.relu(tf.matmul(x, W) + b, name="relu")  # Relu(Wx+b)
    C = tf.reduce_sum(relu, name="C")  # cost computed as a function of Relu
    return x, relu, C


def main(argv=None):
    parser = argparse.ArgumentParser(description="The whitepaper's Figure 1: C = ReLU(W x + b).")
    parser.add_argument("--steps", type=int, default=10, help="batches of 32 to run")
    args = parser.parse_args(argv)
    x, relu, C = build()
    rng = np.random.RandomState(0)
    with tf.Session() as s:  # create a context to execute a graph
        s.run(tf.global_variables_initializer())  # initialize the variables
        for step in range(args.steps):
            batch = rng.rand(32, 784).astype(np.float32)
            result, cost = s.run([relu, C], feed_dict={x: batch})  # fetch relu and C
            print(f"step {step}: relu {result.shape}, C = {cost:.3f}")


if __name__ == "__main__":
    main()
