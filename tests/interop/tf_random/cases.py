"""Seeded random programs run both by real TensorFlow (make_fixtures.py, once) and by flowgraph
(test_tf_random_streams.py): `build(tf, case)` makes the case's graph with whichever TF1-API
module it is given, so both sides build the very same program.

Each case: a fresh graph, `set_random_seed(graph_seed)` unless it is None, three
`constant(0.0)` ops, then the random tensor; `runs` consecutive `Session.run`s of it in one
Session are recorded (the stream continues between runs). Cases with `var` wrap the tensor's
initial value in a variable (initializer run once; every run reads the variable).
"""

from __future__ import annotations

import numpy as np

_LOGITS = [[-1.0, 0.5, 2.0, 0.0], [0.3, 0.3, -5.0, 1.0]]


def _uniform(tf, shape, dtype="float32", minval=0, maxval=None, seed=None):
    return tf.random_uniform(shape, minval, maxval, dtype=getattr(tf, dtype), seed=seed)


def _normal(tf, shape, dtype="float32", mean=0.0, stddev=1.0, seed=None):
    return tf.random_normal(shape, mean, stddev, dtype=getattr(tf, dtype), seed=seed)


def _truncated(tf, shape, dtype="float32", mean=0.0, stddev=1.0, seed=None):
    return tf.truncated_normal(shape, mean, stddev, dtype=getattr(tf, dtype), seed=seed)


def _shuffle(tf, shape, seed=None):
    n = int(np.prod(shape))
    return tf.random_shuffle(tf.reshape(tf.range(n), shape), seed=seed)


def _multinomial(tf, num_samples, logits=_LOGITS, dtype="float32", seed=None):
    return tf.multinomial(tf.constant(logits, getattr(tf, dtype)), num_samples, seed=seed)


def _gamma(tf, shape, alpha, beta=None, dtype="float32", seed=None):
    return tf.random_gamma(shape, alpha, beta, dtype=getattr(tf, dtype), seed=seed)


def _poisson(tf, shape, lam, lam_dtype="float32", dtype="float32", seed=None):
    lam = tf.constant(lam, getattr(tf, lam_dtype))
    return tf.random_poisson(lam, shape, dtype=getattr(tf, dtype), seed=seed)


def _dropout(tf, shape, keep_prob, noise_shape=None, seed=None):
    return tf.nn.dropout(tf.ones(shape), keep_prob=keep_prob, noise_shape=noise_shape, seed=seed)


def _initializer(tf, shape, init, args=None, seed=None):
    initializer = getattr(tf, init)(seed=seed, **(args or {}))
    return tf.get_variable("w", shape, initializer=initializer)


def _normal_variable(tf, shape, seed=None):
    return tf.Variable(tf.random_normal(shape, seed=seed))


BUILDERS = {
    "uniform": _uniform,
    "normal": _normal,
    "truncated_normal": _truncated,
    "shuffle": _shuffle,
    "multinomial": _multinomial,
    "gamma": _gamma,
    "poisson": _poisson,
    "dropout": _dropout,
    "initializer": _initializer,
    "normal_variable": _normal_variable,
}


def case(name, op, graph_seed=1, runs=2, var=False, **args):
    return {
        "name": name,
        "op": op,
        "graph_seed": graph_seed,
        "runs": runs,
        "var": var,
        "args": args,
    }


CASES = [
    # RandomUniform: one uint32 per float/half/bfloat16 value, two per double.
    case("uniform_f32", "uniform", shape=[3, 5], seed=7),
    case("uniform_f32_big", "uniform", 11, shape=[4099], seed=1),
    case(
        "uniform_f64_range",
        "uniform",
        shape=[4, 5],
        dtype="float64",
        minval=-2.0,
        maxval=3.0,
        seed=3,
    ),
    case("uniform_f16", "uniform", shape=[2, 9], dtype="float16", seed=5),
    case("uniform_bf16", "uniform", shape=[11], dtype="bfloat16", seed=6),
    case("uniform_no_graph_seed", "uniform", None, shape=[6], seed=13),
    # RandomStandardNormal: Box-Muller on pairs of uint32s (pairs of uint64s for double).
    case("normal_f32", "normal", 5, shape=[2, 7], mean=1.0, stddev=2.0, seed=11),
    case("normal_f32_big", "normal", 5, shape=[20001], seed=21),
    case("normal_f64", "normal", 5, shape=[9], dtype="float64", seed=12),
    case("normal_f64_big", "normal", 5, shape=[10001], dtype="float64", seed=22),
    case("normal_f16", "normal", 5, shape=[7], dtype="float16", seed=13),
    case("normal_bf16", "normal", 5, shape=[7], dtype="bfloat16", seed=14),
    # TruncatedNormal: rejection beyond 2 stddevs, 256 blocks reserved per group of outputs.
    case("truncated_f32", "truncated_normal", 9, shape=[4, 6], seed=2),
    case("truncated_f32_big", "truncated_normal", 9, shape=[20003], seed=3),
    case("truncated_f64", "truncated_normal", 9, shape=[7], dtype="float64", seed=4),
    case("truncated_f64_big", "truncated_normal", 9, shape=[5001], dtype="float64", seed=5),
    case("truncated_f16", "truncated_normal", 9, shape=[9], dtype="float16", seed=6),
    case("truncated_bf16", "truncated_normal", 9, shape=[9], dtype="bfloat16", seed=7),
    # RandomUniformInt: uint32 (int32) or uint64 (int64) modulo the range.
    case("int32", "uniform", 42, shape=[10], dtype="int32", maxval=100, seed=5),
    case(
        "int32_wide",
        "uniform",
        42,
        shape=[1001],
        dtype="int32",
        minval=-(2**31),
        maxval=2**31 - 1,
        seed=8,
    ),
    case("int64", "uniform", 42, shape=[10], dtype="int64", minval=-50, maxval=50, seed=6),
    case(
        "int64_wide",
        "uniform",
        42,
        shape=[1001],
        dtype="int64",
        minval=-(2**62),
        maxval=2**62 + 12345,
        seed=9,
    ),
    # RandomShuffle: Fisher-Yates with one uint32 per swap.
    case("shuffle", "shuffle", 3, shape=[12], seed=4),
    case("shuffle_2d", "shuffle", 3, shape=[7, 3], seed=5),
    case("shuffle_big", "shuffle", 3, shape=[5000], seed=6),
    # Multinomial
    case("multinomial", "multinomial", 8, num_samples=8, seed=1),
    case("multinomial_f64", "multinomial", 8, num_samples=33, dtype="float64", seed=2),
    case(
        "multinomial_big",
        "multinomial",
        8,
        num_samples=3000,
        logits=[[0.0] * 50, list(np.linspace(-3, 3, 50))],
        seed=3,
    ),
    # RandomGamma: Marsaglia-Tsang; alpha < 1 boosted.
    case("gamma", "gamma", 8, shape=[5], alpha=[0.5, 1.5], seed=2),
    case("gamma_beta", "gamma", 8, shape=[3, 2], alpha=[[1.0], [4.0]], beta=[2.0, 0.5], seed=4),
    case("gamma_big", "gamma", 8, shape=[2000], alpha=[0.1, 0.9, 1.0, 2.5, 30.0], seed=5),
    case("gamma_f64", "gamma", 8, shape=[500], alpha=[0.3, 3.0], dtype="float64", seed=6),
    case("gamma_f16", "gamma", 8, shape=[50], alpha=[0.7, 7.0], dtype="float16", seed=7),
    # RandomPoissonV2: Knuth below rate 10, transformed rejection above.
    case("poisson", "poisson", 8, shape=[6], lam=[0.5, 7.0], seed=3),
    case(
        "poisson_big", "poisson", 8, shape=[2000], lam=[0.0, 0.1, 3.0, 9.9, 10.0, 55.0, 1e4], seed=4
    ),
    case(
        "poisson_f64_int64",
        "poisson",
        8,
        shape=[300],
        lam=[2.5, 40.0],
        lam_dtype="float64",
        dtype="int64",
        seed=5,
    ),
    case("poisson_int32", "poisson", 8, shape=[300], lam=[1.5, 25.0], dtype="int32", seed=6),
    # dropout's mask: a uniform draw compared against the rate.
    case("dropout", "dropout", 777, shape=[4, 8], keep_prob=0.7, seed=1),
    case("dropout_default_seed", "dropout", 777, shape=[5, 7], keep_prob=0.5),
    case(
        "dropout_noise_shape",
        "dropout",
        7,
        shape=[3, 7],
        keep_prob=0.6,
        noise_shape=[3, 1],
        seed=10,
    ),
    # Initializers through get_variable (op seed from the graph's default rule when None).
    case(
        "glorot_uniform",
        "initializer",
        777,
        var=True,
        shape=[5, 3],
        init="glorot_uniform_initializer",
    ),
    case(
        "glorot_normal",
        "initializer",
        777,
        var=True,
        shape=[6, 4],
        init="glorot_normal_initializer",
        seed=3,
    ),
    case(
        "truncated_normal_init",
        "initializer",
        123,
        var=True,
        shape=[6],
        init="truncated_normal_initializer",
        args={"stddev": 0.1},
    ),
    case(
        "random_normal_init",
        "initializer",
        123,
        var=True,
        shape=[3, 3],
        init="random_normal_initializer",
        args={"mean": 1.0, "stddev": 0.5},
        seed=9,
    ),
    case(
        "random_uniform_init",
        "initializer",
        123,
        var=True,
        shape=[8],
        init="random_uniform_initializer",
        args={"minval": -1.0, "maxval": 1.0},
        seed=9,
    ),
    case(
        "variance_scaling_init",
        "initializer",
        123,
        var=True,
        shape=[3, 4, 5],
        init="variance_scaling_initializer",
        args={"scale": 2.0},
        seed=10,
    ),
    case(
        "variance_scaling_fan_avg_uniform",
        "initializer",
        7,
        var=True,
        shape=[7, 3],
        init="variance_scaling_initializer",
        args={"scale": 1.3, "mode": "fan_avg", "distribution": "uniform"},
        seed=1,
    ),
    case(
        "variance_scaling_untruncated",
        "initializer",
        7,
        var=True,
        shape=[5, 3],
        init="variance_scaling_initializer",
        args={"distribution": "untruncated_normal"},
        seed=2,
    ),
    case(
        "variance_scaling_conv_fan_out",
        "initializer",
        7,
        var=True,
        shape=[2, 2, 3, 5],
        init="variance_scaling_initializer",
        args={"mode": "fan_out", "distribution": "normal"},
        seed=2,
    ),
    case(
        "uniform_unit_scaling_init",
        "initializer",
        123,
        var=True,
        shape=[4, 4],
        init="uniform_unit_scaling_initializer",
        seed=11,
    ),
]


def build(tf, case):
    """The case's graph and the tensor to fetch (a variable's value for `var` cases)."""
    graph = tf.Graph()
    with graph.as_default():
        if case["graph_seed"] is not None:
            tf.set_random_seed(case["graph_seed"])
        for _ in range(3):
            tf.constant(0.0)
        out = BUILDERS[case["op"]](tf, **case["args"])
        init = tf.global_variables_initializer() if case["var"] else None
    return graph, out, init


def run(tf, case):
    """The values of `runs` consecutive runs of the case's tensor in one Session."""
    graph, out, init = build(tf, case)
    with tf.Session(graph=graph) as sess:
        if init is not None:
            sess.run(init)
        return [sess.run(out) for _ in range(case["runs"])]
