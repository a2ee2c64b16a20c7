"""Initializers: objects that build a variable's initial value for a given shape and dtype.

`get_variable` and the layers call `initializer(shape, dtype=..., partition_info=None)` inside the
variable's name scope, so the ops they create ("w/Initializer/random_uniform") run once, when the
variable's initializer op runs. Random initializers pass their `seed` on to the random ops, which
combine it with the graph seed (TF1's seeding rule), so a fixed graph seed reproduces a model.
"""

from __future__ import annotations

import math

import numpy as np

from flowgraph.core import dtypes
from flowgraph.framework.convert import constant
from flowgraph.ops import array as array_ops
from flowgraph.ops import linalg as linalg_ops
from flowgraph.ops import math as math_ops
from flowgraph.ops import random as random_ops
from flowgraph.ops import variables

__all__ = [
    "constant_initializer",
    "glorot_normal_initializer",
    "glorot_uniform_initializer",
    "ones_initializer",
    "orthogonal_initializer",
    "random_normal_initializer",
    "random_uniform_initializer",
    "truncated_normal_initializer",
    "uniform_unit_scaling_initializer",
    "variance_scaling_initializer",
    "zeros_initializer",
]


def _float_dtype(dtype) -> dtypes.DType:
    dtype = dtypes.as_dtype(dtype)
    if not dtype.is_floating:
        raise ValueError(f"Expected floating point type, got {dtype.name}.")
    return dtype


def _as_list(shape) -> list:
    """The shape as a list of ints (a TensorShape, tuple or list)."""
    if hasattr(shape, "as_list"):
        return shape.as_list()
    return [int(d) for d in shape]


class Initializer:
    """Base class: `__call__(shape, dtype=None, partition_info=None)` returns a Tensor."""

    def __call__(self, shape, dtype=None, partition_info=None):
        raise NotImplementedError(f"{type(self).__name__} does not implement __call__")

    def get_config(self) -> dict:
        """The constructor arguments; `from_config(get_config())` builds an equal initializer."""
        return {}

    @classmethod
    def from_config(cls, config: dict):
        return cls(**config)


class _FillInitializer(Initializer):
    """Fills the shape with one value through `_fill` (array_ops.zeros or array_ops.ones)."""

    _fill = None

    def __init__(self, dtype=dtypes.float32):
        self.dtype = dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        return type(self)._fill(_as_list(shape), dtypes.as_dtype(dtype or self.dtype))

    def get_config(self):
        return {"dtype": self.dtype.name}


class zeros_initializer(_FillInitializer):
    """Initializes to 0 (False for bools)."""

    _fill = staticmethod(array_ops.zeros)


class ones_initializer(_FillInitializer):
    """Initializes to 1 (True for bools)."""

    _fill = staticmethod(array_ops.ones)


class constant_initializer(Initializer):
    """Initializes to `value`: a scalar fills the shape; a shorter list is padded with its last
    element (TF1's rule) unless `verify_shape` demands an exact match."""

    def __init__(self, value=0, dtype=dtypes.float32, verify_shape=False):
        if not (np.isscalar(value) or isinstance(value, (list, tuple, np.ndarray))):
            raise TypeError(
                f"Invalid type for initial value: {type(value).__name__} (expected Python scalar, "
                "list or tuple of values, or numpy.ndarray)."
            )
        self.value = value
        self.dtype = dtypes.as_dtype(dtype)
        self._verify_shape = verify_shape

    def __call__(self, shape, dtype=None, partition_info=None, verify_shape=None):
        dtype = dtypes.as_dtype(dtype or self.dtype)
        verify_shape = self._verify_shape if verify_shape is None else verify_shape
        return constant(self.value, dtype=dtype, shape=_as_list(shape), verify_shape=verify_shape)

    def get_config(self):
        return {"value": self.value, "dtype": self.dtype.name}


class random_uniform_initializer(Initializer):
    """Uniform in [minval, maxval) (maxval defaults to 1 for floats)."""

    def __init__(self, minval=0, maxval=None, seed=None, dtype=dtypes.float32):
        self.minval = minval
        self.maxval = maxval
        self.seed = seed
        self.dtype = dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        dtype = dtypes.as_dtype(dtype or self.dtype)
        return random_ops.random_uniform(
            _as_list(shape), self.minval, self.maxval, dtype, seed=self.seed
        )

    def get_config(self):
        return {
            "minval": self.minval,
            "maxval": self.maxval,
            "seed": self.seed,
            "dtype": self.dtype.name,
        }


class random_normal_initializer(Initializer):
    """Normal with `mean` and `stddev`."""

    def __init__(self, mean=0.0, stddev=1.0, seed=None, dtype=dtypes.float32):
        self.mean = mean
        self.stddev = stddev
        self.seed = seed
        self.dtype = _float_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        dtype = _float_dtype(dtype or self.dtype)
        return random_ops.random_normal(
            _as_list(shape), self.mean, self.stddev, dtype, seed=self.seed
        )

    def get_config(self):
        return {
            "mean": self.mean,
            "stddev": self.stddev,
            "seed": self.seed,
            "dtype": self.dtype.name,
        }


class truncated_normal_initializer(random_normal_initializer):
    """Normal with `mean` and `stddev`, redrawn beyond two standard deviations."""

    def __call__(self, shape, dtype=None, partition_info=None):
        dtype = _float_dtype(dtype or self.dtype)
        return random_ops.truncated_normal(
            _as_list(shape), self.mean, self.stddev, dtype, seed=self.seed
        )


class uniform_unit_scaling_initializer(Initializer):
    """Uniform in ±factor·sqrt(3 / input_size), input_size = product of all dims but the last:
    keeps the scale of activations constant through a deep linear network."""

    def __init__(self, factor=1.0, seed=None, dtype=dtypes.float32):
        self.factor = factor
        self.seed = seed
        self.dtype = _float_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        dtype = _float_dtype(dtype or self.dtype)
        shape = _as_list(shape)
        scale_shape = _as_list(partition_info.full_shape) if partition_info is not None else shape
        input_size = max(float(np.prod(scale_shape[:-1])), 1.0)
        max_val = math.sqrt(3 / input_size) * self.factor
        return random_ops.random_uniform(shape, -max_val, max_val, dtype, seed=self.seed)

    def get_config(self):
        return {"factor": self.factor, "seed": self.seed, "dtype": self.dtype.name}


def _compute_fans(shape) -> tuple[int, int]:
    """(fan_in, fan_out): a matrix is [in, out]; a conv kernel is [..., in_depth, out_depth]."""
    if len(shape) < 1:
        return 1, 1
    if len(shape) == 1:
        return int(shape[0]), int(shape[0])
    if len(shape) == 2:
        return int(shape[0]), int(shape[1])
    receptive_field = float(np.prod(shape[:-2]))
    return int(shape[-2] * receptive_field), int(shape[-1] * receptive_field)


# The standard deviation of a unit normal truncated to [-2, 2]: dividing by it makes the
# truncated distribution's stddev the requested one.
_TRUNCATED_STDDEV = 0.87962566103423978


class variance_scaling_initializer(Initializer):
    """Scales the variance to `scale / n`, n = fan_in, fan_out or their average (`mode`).

    `distribution` "truncated_normal" (or its old name "normal"), "untruncated_normal" or
    "uniform" (limit sqrt(3·scale/n)).
    """

    _MODES = ("fan_in", "fan_out", "fan_avg")
    _DISTRIBUTIONS = ("normal", "uniform", "truncated_normal", "untruncated_normal")

    def __init__(
        self,
        scale=1.0,
        mode="fan_in",
        distribution="truncated_normal",
        seed=None,
        dtype=dtypes.float32,
    ):
        if scale <= 0.0:
            raise ValueError(f"`scale` must be positive float, got {scale!r}.")
        if mode not in self._MODES:
            raise ValueError(f"Invalid `mode` argument: {mode!r}; expected one of {self._MODES}.")
        distribution = str(distribution).lower()
        if distribution not in self._DISTRIBUTIONS:
            raise ValueError(
                f"Invalid `distribution` argument: {distribution!r}; expected one of "
                f"{self._DISTRIBUTIONS}."
            )
        self.scale = scale
        self.mode = mode
        self.distribution = distribution
        self.seed = seed
        self.dtype = _float_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        dtype = _float_dtype(dtype or self.dtype)
        shape = _as_list(shape)
        scale_shape = _as_list(partition_info.full_shape) if partition_info is not None else shape
        fan_in, fan_out = _compute_fans(scale_shape)
        n = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2.0}[self.mode]
        scale = self.scale / max(1.0, n)
        if self.distribution in ("normal", "truncated_normal"):
            stddev = math.sqrt(scale) / _TRUNCATED_STDDEV
            return random_ops.truncated_normal(shape, 0.0, stddev, dtype, seed=self.seed)
        if self.distribution == "untruncated_normal":
            return random_ops.random_normal(shape, 0.0, math.sqrt(scale), dtype, seed=self.seed)
        limit = math.sqrt(3.0 * scale)
        return random_ops.random_uniform(shape, -limit, limit, dtype, seed=self.seed)

    def get_config(self):
        return {
            "scale": self.scale,
            "mode": self.mode,
            "distribution": self.distribution,
            "seed": self.seed,
            "dtype": self.dtype.name,
        }


class glorot_uniform_initializer(variance_scaling_initializer):
    """Xavier uniform: limit sqrt(6 / (fan_in + fan_out)). The default for float variables."""

    def __init__(self, seed=None, dtype=dtypes.float32):
        super().__init__(scale=1.0, mode="fan_avg", distribution="uniform", seed=seed, dtype=dtype)

    def get_config(self):
        return {"seed": self.seed, "dtype": self.dtype.name}


class glorot_normal_initializer(variance_scaling_initializer):
    """Xavier normal: a truncated normal with stddev sqrt(2 / (fan_in + fan_out))."""

    def __init__(self, seed=None, dtype=dtypes.float32):
        super().__init__(
            scale=1.0, mode="fan_avg", distribution="truncated_normal", seed=seed, dtype=dtype
        )

    def get_config(self):
        return {"seed": self.seed, "dtype": self.dtype.name}


class orthogonal_initializer(Initializer):
    """An orthogonal matrix (rows or columns orthonormal) times `gain`; a tensor of rank > 2 is
    treated as a [prod(shape[:-1]), shape[-1]] matrix. Built from the QR decomposition of a
    normal matrix, with Q's columns signed by R's diagonal so the result is uniformly
    distributed."""

    def __init__(self, gain=1.0, seed=None, dtype=dtypes.float32):
        self.gain = gain
        self.seed = seed
        self.dtype = _float_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        dtype = _float_dtype(dtype or self.dtype)
        shape = _as_list(shape)
        if len(shape) < 2:
            raise ValueError("The tensor to initialize must be at least two-dimensional")
        rows, cols = int(np.prod(shape[:-1])), int(shape[-1])
        flat = (cols, rows) if rows < cols else (rows, cols)
        a = random_ops.random_normal(flat, dtype=dtype, seed=self.seed)
        q, r = linalg_ops.qr(a, full_matrices=False)
        q = q * math_ops.sign(linalg_ops.matrix_diag_part(r))
        if rows < cols:
            q = array_ops.transpose(q)
        return self.gain * array_ops.reshape(q, shape)

    def get_config(self):
        return {"gain": self.gain, "seed": self.seed, "dtype": self.dtype.name}


class identity_initializer(Initializer):
    """`gain` times the identity matrix (2-D shapes only)."""

    def __init__(self, gain=1.0, dtype=dtypes.float32):
        self.gain = gain
        self.dtype = dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        dtype = dtypes.as_dtype(dtype or self.dtype)
        full = (
            _as_list(partition_info.full_shape) if partition_info is not None else _as_list(shape)
        )
        if len(full) != 2:
            raise ValueError("Identity matrix initializer can only be used for 2D matrices.")
        if partition_info is not None:
            raise NotImplementedError("identity_initializer does not support partitioned variables")
        return constant(self.gain * np.eye(*full), dtype=dtype)

    def get_config(self):
        return {"gain": self.gain, "dtype": self.dtype.name}


def he_normal(seed=None):
    return variance_scaling_initializer(2.0, "fan_in", "truncated_normal", seed)


def he_uniform(seed=None):
    return variance_scaling_initializer(2.0, "fan_in", "uniform", seed)


def lecun_normal(seed=None):
    return variance_scaling_initializer(1.0, "fan_in", "truncated_normal", seed)


def lecun_uniform(seed=None):
    return variance_scaling_initializer(1.0, "fan_in", "uniform", seed)


# tf.initializers.<short name>: TF1's aliases. They stay out of `__all__` because tf.zeros,
# tf.ones and tf.constant are ops, not initializers.
INITIALIZERS = {
    "zeros": zeros_initializer,
    "ones": ones_initializer,
    "constant": constant_initializer,
    "random_uniform": random_uniform_initializer,
    "random_normal": random_normal_initializer,
    "truncated_normal": truncated_normal_initializer,
    "uniform_unit_scaling": uniform_unit_scaling_initializer,
    "variance_scaling": variance_scaling_initializer,
    "glorot_uniform": glorot_uniform_initializer,
    "glorot_normal": glorot_normal_initializer,
    "orthogonal": orthogonal_initializer,
    "identity": identity_initializer,
    "he_normal": he_normal,
    "he_uniform": he_uniform,
    "lecun_normal": lecun_normal,
    "lecun_uniform": lecun_uniform,
    "global_variables": variables.global_variables_initializer,
    "local_variables": variables.local_variables_initializer,
    "variables": variables.variables_initializer,
}
