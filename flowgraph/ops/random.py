"""Random ops (Table 1 row "Random"; TF1's random_ops.py) with TF1's seed rules.

Each wrapper asks `random_seed.get_seed(seed)` for its (seed, seed2) attrs, so a graph-level
seed (`set_random_seed`) makes every op repeatable across Sessions while keeping different ops
different. Wrappers build the same small subgraphs as TF1 (e.g. `random_uniform/RandomUniform`,
`random_uniform/mul`, and the final `random_uniform` Add), so op names match.
"""

from __future__ import annotations

import numpy as np

from flowgraph.core import dtypes
from flowgraph.core.shapes import TensorShape
from flowgraph.framework import default_graph
from flowgraph.framework.apply_op import apply_op
from flowgraph.framework.convert import convert_to_tensor
from flowgraph.framework.operation import Tensor
from flowgraph.framework.random_seed import DEFAULT_GRAPH_SEED, get_seed, set_random_seed
from flowgraph.ops import math as math_ops

__all__ = [
    "DEFAULT_GRAPH_SEED",
    "get_seed",
    "multinomial",
    "random_crop",
    "random_gamma",
    "random_normal",
    "random_poisson",
    "random_shuffle",
    "random_uniform",
    "set_random_seed",
    "truncated_normal",
]

_FLOAT_OR_INT = (
    dtypes.float16,
    dtypes.bfloat16,
    dtypes.float32,
    dtypes.float64,
    dtypes.int32,
    dtypes.int64,
)


def _seed_attrs(seed) -> dict:
    seed1, seed2 = get_seed(seed)
    return {"seed": seed1 or 0, "seed2": seed2 or 0}


def shape_tensor(shape, name: str = "shape") -> Tensor:
    """A 1-D int32 (int64 if a dimension needs it) tensor for `shape`: a Tensor, TensorShape,
    or list of ints and scalar Tensors (TF's tensor_util.shape_tensor)."""
    if isinstance(shape, Tensor):
        if shape.dtype.base_dtype not in (dtypes.int32, dtypes.int64):
            raise TypeError(f"shape must be an int32 or int64 tensor, got {shape.dtype.name}")
        return shape
    if isinstance(shape, TensorShape):
        if not shape.is_fully_defined():
            raise ValueError(f"Cannot convert a partially known TensorShape {shape} to a Tensor")
        shape = shape.as_list()
    if isinstance(shape, (list, tuple)) and any(isinstance(d, Tensor) for d in shape):
        items = [
            d if isinstance(d, Tensor) else convert_to_tensor(d, dtype=dtypes.int32) for d in shape
        ]
        return apply_op("Pack", [items], name=name, axis=0).outputs[0]
    dims = np.asarray(shape)
    if dims.size and dims.dtype.kind not in "iu":
        raise TypeError(f"shape must hold integers, got {shape!r}")
    big = dims.size and (dims.max() >= 2**31 or dims.min() < -(2**31))
    return convert_to_tensor(dims.astype(np.int64 if big else np.int32), name=name)


def _scope(name, default):
    return default_graph.get().name_scope(name or default)


def random_uniform(shape, minval=0, maxval=None, dtype=dtypes.float32, seed=None, name=None):
    """Uniform values in [minval, maxval); integer dtypes need `maxval`.

    Example: x = tf.random_uniform([2, 3], -1.0, 1.0, seed=7)
    """
    dtype = dtypes.as_dtype(dtype)
    if dtype not in _FLOAT_OR_INT:
        raise ValueError(f"Invalid dtype {dtype!r}")
    if maxval is None:
        if dtype.is_integer:
            raise ValueError(f"Must specify maxval for integer dtype {dtype!r}")
        maxval = 1
    with _scope(name, "random_uniform") as scope:
        shape = shape_tensor(shape)
        minval = convert_to_tensor(minval, dtype=dtype, name="min")
        maxval = convert_to_tensor(maxval, dtype=dtype, name="max")
        seeds = _seed_attrs(seed)
        if dtype.is_integer:
            return apply_op(
                "RandomUniformInt", [shape, minval, maxval], name=scope, **seeds
            ).outputs[0]
        rnd = apply_op("RandomUniform", [shape], dtype=dtype, **seeds).outputs[0]
        return math_ops.add(rnd * (maxval - minval), minval, name=scope)


def _scaled_normal(op_type, default_name, shape, mean, stddev, dtype, seed, name):
    dtype = dtypes.as_dtype(dtype)
    with _scope(name, default_name) as scope:
        shape = shape_tensor(shape)
        mean = convert_to_tensor(mean, dtype=dtype, name="mean")
        stddev = convert_to_tensor(stddev, dtype=dtype, name="stddev")
        rnd = apply_op(op_type, [shape], dtype=dtype, **_seed_attrs(seed)).outputs[0]
        return math_ops.add(rnd * stddev, mean, name=scope)


def random_normal(shape, mean=0.0, stddev=1.0, dtype=dtypes.float32, seed=None, name=None):
    """Normally distributed values. Example: w = tf.random_normal([784, 10], stddev=0.1)"""
    return _scaled_normal(
        "RandomStandardNormal", "random_normal", shape, mean, stddev, dtype, seed, name
    )


def truncated_normal(shape, mean=0.0, stddev=1.0, dtype=dtypes.float32, seed=None, name=None):
    """Normal values, redrawn when more than 2 stddevs from the mean.

    Example: w = tf.truncated_normal([5, 5, 1, 32], stddev=0.1)
    """
    return _scaled_normal(
        "TruncatedNormal", "truncated_normal", shape, mean, stddev, dtype, seed, name
    )


def random_shuffle(value, seed=None, name=None):
    """Shuffles `value` along its first dimension. Example: tf.random_shuffle(tf.range(10))"""
    return apply_op("RandomShuffle", [value], name=name, **_seed_attrs(seed)).outputs[0]


def multinomial(logits, num_samples, seed=None, name=None, output_dtype=None):
    """Draws `num_samples` class indices per row of `logits` [batch, classes] (int64 by default).

    Example: tf.multinomial(tf.log([[0.5, 0.5]]), 5)
    """
    return _categorical("multinomial", logits, num_samples, seed, name, output_dtype)


def categorical(logits, num_samples, dtype=None, seed=None, name=None):
    """tf.random.categorical: `multinomial` with the output dtype named `dtype`."""
    return _categorical("categorical", logits, num_samples, seed, name, dtype)


def _categorical(default_name, logits, num_samples, seed, name, output_dtype):
    with _scope(name, default_name):
        logits = convert_to_tensor(logits, name="logits")
        output_dtype = None if output_dtype is None else dtypes.as_dtype(output_dtype)
        return apply_op(
            "Multinomial", [logits, num_samples], output_dtype=output_dtype, **_seed_attrs(seed)
        ).outputs[0]


def random_gamma(shape, alpha, beta=None, dtype=dtypes.float32, seed=None, name=None):
    """Gamma(alpha, beta) samples of shape `shape + broadcast(alpha, beta).shape`; beta is the
    inverse scale. Results are kept at or above the dtype's smallest normal number.

    Example: tf.random_gamma([10], [0.5, 1.5])  # shape [10, 2]
    """
    dtype = dtypes.as_dtype(dtype)
    with _scope(name, "random_gamma"):
        shape = convert_to_tensor(shape, name="shape", dtype=dtypes.int32)
        alpha = convert_to_tensor(alpha, name="alpha", dtype=dtype)
        beta = convert_to_tensor(beta if beta is not None else 1, name="beta", dtype=dtype)
        alpha_broadcast = alpha + apply_op("ZerosLike", [beta]).outputs[0]
        sample = apply_op("RandomGamma", [shape, alpha_broadcast], **_seed_attrs(seed)).outputs[0]
        scaled = apply_op("RealDiv", [sample, beta]).outputs[0]
        tiny = np.finfo(dtype.as_numpy_dtype).tiny
        return apply_op("Maximum", [convert_to_tensor(tiny, dtype=dtype), scaled]).outputs[0]


def random_poisson(lam, shape, dtype=dtypes.float32, seed=None, name=None):
    """Poisson(lam) samples of shape `shape + lam.shape`. Example: tf.random_poisson([1.5], [10])"""
    with _scope(name, "random_poisson"):
        shape = convert_to_tensor(shape, name="shape", dtype=dtypes.int32)
        return apply_op(
            "RandomPoissonV2", [shape, lam], dtype=dtypes.as_dtype(dtype), **_seed_attrs(seed)
        ).outputs[0]


def random_crop(value, size, seed=None, name=None):
    """A random slice of `value` with shape `size` (uniform offset per dimension); fails at run
    time unless value.shape >= size. Example: tf.random_crop(image, [24, 24, 3])"""
    graph = default_graph.get()
    with _scope(name, "random_crop") as scope:
        value = convert_to_tensor(value, name="value")
        size = convert_to_tensor(size, dtype=dtypes.int32, name="size")
        shape = apply_op("Shape", [value], out_type=dtypes.int32).outputs[0]
        fits = apply_op("GreaterEqual", [shape, size]).outputs[0]
        all_fit = apply_op("All", [fits, convert_to_tensor([0])]).outputs[0]
        message = convert_to_tensor("Need value.shape >= size, got ")
        check = apply_op("Assert", [all_fit, [message, shape, size]], summarize=1000)
        with graph.control_dependencies([check]):
            shape = apply_op("Identity", [shape]).outputs[0]
        limit = shape - size + 1
        rank = apply_op("Shape", [shape], out_type=dtypes.int32).outputs[0]
        offset = (
            random_uniform(rank, dtype=dtypes.int32, maxval=dtypes.int32.max, seed=seed) % limit
        )
        return apply_op("Slice", [value, offset, size], name=scope).outputs[0]


# tf.random.* names (TF 1.15's tf.compat.v1.random), assembled by flowgraph/namespaces.py.
RANDOM_NAMESPACE = {
    "uniform": random_uniform,
    "normal": random_normal,
    "truncated_normal": truncated_normal,
    "shuffle": random_shuffle,
    "multinomial": multinomial,
    "categorical": categorical,
    "gamma": random_gamma,
    "poisson": random_poisson,
    "crop": random_crop,
    "set_random_seed": set_random_seed,
    "get_seed": get_seed,
}
