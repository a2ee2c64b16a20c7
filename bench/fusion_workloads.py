"""Compiled-fusion workloads (issue 13 §10; whitepaper §10), written once over a `tf` module like
the rest of `workloads.py`, which appends them to its table.

W2j  W2's 1000 fed scalar adds with `global_jit_level=ON_1` on both peers: flowgraph runs them
     as one compiled loop (runtime/passes/fusion.py); TensorFlow's CPU auto-clustering is its own
     business. Target: at most TensorFlow's time for plain W2 (printed below the table).
F1   Adam's update of a 1M-element float32 variable written with basic ops (m, v and the
     variable each assigned the element-wise formula of its new value) inside `jit_scope()`;
     the gradient is a variable too, so that no feed is timed. F1u is the same graph without
     the scope: F1/F1u is what fusion saves (target at most 0.5, printed below the table).
     flowgraph writes the three new values straight into the variables' buffers.
F2   A loss that ends in a reduction: mean((a - b)^2) of two 1M-element float32 variables in
     `jit_scope()`, one loop with no temporaries; F2u without the scope (F2/F2u printed below
     the table, at most 1: a fused reduction must not be slower than NumPy's).
"""

from __future__ import annotations

import contextlib

import numpy as np
from workloads import Target, Workload, build_w2, initialized_session, timed_runs

F1_SIZE = 1_000_000


def build_w2j(tf):
    return build_w2(tf, jit=True)


def _adam_case(tf, jit: bool):
    g = tf.Graph()
    rng = np.random.RandomState(0)
    with g.as_default():
        grad = tf.Variable(rng.randn(F1_SIZE).astype(np.float32), name="grad")
        var = tf.Variable(rng.randn(F1_SIZE).astype(np.float32), name="var")
        m = tf.Variable(tf.zeros([F1_SIZE]), name="m")
        v = tf.Variable(tf.zeros([F1_SIZE]), name="v")
        lr, b1, b2, eps = 0.001, 0.9, 0.999, 1e-8
        scope = tf.xla.experimental.jit_scope() if jit else contextlib.nullcontext()
        with scope:
            m_t = b1 * m + (1 - b1) * grad
            v_t = b2 * v + (1 - b2) * grad * grad
            var_t = var - lr * m_t / (tf.sqrt(v_t) + eps)
        update = tf.group(tf.assign(m, m_t), tf.assign(v, v_t), tf.assign(var, var_t))
    return timed_runs(initialized_session(tf, g), update)


def _mse_case(tf, jit: bool):
    g = tf.Graph()
    rng = np.random.RandomState(0)
    with g.as_default():
        a = tf.Variable(rng.randn(F1_SIZE).astype(np.float32), name="a")
        b = tf.Variable(rng.randn(F1_SIZE).astype(np.float32), name="b")
        scope = tf.xla.experimental.jit_scope() if jit else contextlib.nullcontext()
        with scope:
            loss = tf.reduce_mean(tf.square(a - b))
    return timed_runs(initialized_session(tf, g), loss)


def build_f2(tf):
    return _mse_case(tf, jit=True)


def build_f2u(tf):
    return _mse_case(tf, jit=False)


def build_f1(tf):
    return _adam_case(tf, jit=True)


def build_f1u(tf):
    return _adam_case(tf, jit=False)


FUSION_WORKLOADS = [
    Workload(
        "W2j", "1000 fed scalar adds, jit ON_1", "us/op", 1000, Target(ratio=1.0), build_w2j, 25
    ),
    Workload("F1", "Adam update 1M, jit_scope", "ms/step", 1, Target(ratio=1.0), build_f1, 15, 2),
    Workload("F1u", "Adam update 1M, unfused", "ms/step", 1, Target(ratio=1.0), build_f1u, 15, 2),
    Workload("F2", "mean sq. diff 1M, jit_scope", "ms/step", 1, Target(ratio=1.0), build_f2, 25, 2),
    Workload("F2u", "mean sq. diff 1M, unfused", "ms/step", 1, Target(ratio=1.0), build_f2u, 25, 2),
]
