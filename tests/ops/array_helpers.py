"""Helpers shared by the array-op tests: deterministic values of every dtype (the dtypes are
tests.helpers.ALL_DTYPES), and runners."""

import numpy as np

import flowgraph as tf


def sample(dtype, shape, seed=0):
    """Deterministic test values of `dtype` (object means TF strings)."""
    rng = np.random.RandomState(seed)
    n = int(np.prod(shape))
    if dtype is object:
        out = np.empty(n, dtype=object)
        out[:] = [f"s{i}".encode() for i in rng.randint(0, 50, n)]
        return out.reshape(shape)
    if dtype is np.bool_:
        return np.asarray(rng.rand(*shape) > 0.5)
    values = rng.randint(0, 100, size=shape)
    if np.dtype(dtype).kind == "c":
        return (values + 1j * rng.randint(0, 9, size=shape)).astype(dtype)
    return values.astype(dtype)


def unknown(dtype=tf.float32):
    return tf.placeholder(dtype, None)


def run_with(fetch, feeds):
    with tf.Session() as sess:
        return sess.run(fetch, feeds)
