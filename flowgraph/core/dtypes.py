"""Element types of tensors (whitepaper §2 "Tensors"): DType <-> NumPy dtype <-> DataType enum.

A DType is a small immutable value; there is exactly one instance per type, so `is` and `==` both
work. Reference types (`float32_ref`, the type of a Variable's output) are the base value + 100, as
in TensorFlow's DataType enum.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

_REF_OFFSET = 100


class DType:
    """One element type. `as_numpy_dtype` is the NumPy type kernels compute in."""

    __slots__ = ("_enum", "_np", "name")

    def __init__(self, enum: int, name: str, np_type):
        self._enum = enum
        self.name = name
        self._np = np_type

    # -- identity ---------------------------------------------------------------------------
    @property
    def as_datatype_enum(self) -> int:
        return self._enum

    @property
    def as_numpy_dtype(self):
        return self._np

    @property
    def is_ref_dtype(self) -> bool:
        return self._enum > _REF_OFFSET

    @property
    def base_dtype(self) -> DType:
        return _BY_ENUM[self._enum - _REF_OFFSET] if self.is_ref_dtype else self

    @property
    def _as_ref(self) -> DType:
        return self if self.is_ref_dtype else _BY_ENUM[self._enum + _REF_OFFSET]

    @property
    def real_dtype(self) -> DType:
        return {complex64: float32, complex128: float64}.get(self.base_dtype, self.base_dtype)

    # -- classification ---------------------------------------------------------------------
    @property
    def is_floating(self) -> bool:
        return self.base_dtype in (float16, bfloat16, float32, float64)

    @property
    def is_complex(self) -> bool:
        return self.base_dtype in (complex64, complex128)

    @property
    def is_integer(self) -> bool:
        return self.base_dtype in _INTEGERS

    @property
    def is_unsigned(self) -> bool:
        return self.base_dtype in (uint8, uint16, uint32, uint64, bool_)

    @property
    def is_bool(self) -> bool:
        return self.base_dtype is bool_

    @property
    def is_numpy_compatible(self) -> bool:
        return self._np is not None

    @property
    def is_quantized(self) -> bool:
        return False

    @property
    def size(self) -> int:
        return 1 if self._np is None or self._np is object else np.dtype(self._np).itemsize

    @property
    def min(self):
        return self._limit(0)

    @property
    def max(self):
        return self._limit(1)

    def _limit(self, which: int):
        base = self.base_dtype
        if base.is_floating:
            info = ml_dtypes.finfo(base._np)
            return float(info.min if which == 0 else info.max)
        if base.is_integer:
            info = np.iinfo(base._np)
            return int(info.min if which == 0 else info.max)
        if base is bool_:
            return bool(which)
        raise TypeError(f"Cannot find minimum/maximum value of {self.name}.")

    def is_compatible_with(self, other) -> bool:
        other = as_dtype(other)
        return self._enum in (other._enum, other.base_dtype._enum)

    # -- python protocol --------------------------------------------------------------------
    def __eq__(self, other) -> bool:
        if other is None:
            return False
        if isinstance(other, DType):
            return self._enum == other._enum
        try:
            return self._enum == as_dtype(other)._enum
        except TypeError:
            return False

    def __ne__(self, other) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return self._enum

    def __reduce__(self):
        return as_dtype, (self.name,)

    def __repr__(self) -> str:
        return f"tf.{self.name}"

    def __str__(self) -> str:
        return f"<dtype: '{self.name}'>"


def _make(enum: int, name: str, np_type) -> tuple[DType, DType]:
    return DType(enum, name, np_type), DType(enum + _REF_OFFSET, name + "_ref", np_type)


float16, float16_ref = _make(19, "float16", np.float16)
float32, float32_ref = _make(1, "float32", np.float32)
float64, float64_ref = _make(2, "float64", np.float64)
bfloat16, bfloat16_ref = _make(14, "bfloat16", ml_dtypes.bfloat16)  # NumPy's, via ml_dtypes
int8, int8_ref = _make(6, "int8", np.int8)
int16, int16_ref = _make(5, "int16", np.int16)
int32, int32_ref = _make(3, "int32", np.int32)
int64, int64_ref = _make(9, "int64", np.int64)
uint8, uint8_ref = _make(4, "uint8", np.uint8)
uint16, uint16_ref = _make(17, "uint16", np.uint16)
uint32, uint32_ref = _make(22, "uint32", np.uint32)
uint64, uint64_ref = _make(23, "uint64", np.uint64)
complex64, complex64_ref = _make(8, "complex64", np.complex64)
complex128, complex128_ref = _make(18, "complex128", np.complex128)
string, string_ref = _make(7, "string", object)
bool_, bool_ref = _make(10, "bool", np.bool_)
resource, resource_ref = _make(20, "resource", object)
variant, variant_ref = _make(21, "variant", object)
half = float16
double = float64
invalid = DType(0, "invalid", None)

_ALL = [
    float16,
    float32,
    float64,
    bfloat16,
    int8,
    int16,
    int32,
    int64,
    uint8,
    uint16,
    uint32,
    uint64,
    complex64,
    complex128,
    string,
    bool_,
    resource,
    variant,
]
_INTEGERS = (int8, int16, int32, int64, uint8, uint16, uint32, uint64)
_BY_ENUM: dict[int, DType] = {0: invalid}
for _name, _d in list(globals().items()):
    if isinstance(_d, DType) and not _name.startswith("_"):
        _BY_ENUM.setdefault(_d._enum, _d)

_BY_NAME: dict[str, DType] = {d.name: d for d in _BY_ENUM.values()}
_BY_NAME.update({"half": float16, "double": float64, "float": float32, "bool_": bool_})
_BY_NUMPY: dict[np.dtype, DType] = {
    np.dtype(d._np): d for d in _ALL if d._np is not None and d._np is not object
}
_BY_NUMPY[np.dtype(object)] = string

# Groups used by OpDefs ("T: {numeric}") and by TF1's public names.
FLOATING = (float16, bfloat16, float32, float64)
COMPLEX = (complex64, complex128)
INTEGER = _INTEGERS
REAL_NUMBERS = FLOATING + INTEGER
NUMERIC = REAL_NUMBERS + COMPLEX
ALL_TYPES = NUMERIC + (bool_, string)
QUANTIZED_DTYPES = frozenset()


def as_dtype(type_value) -> DType:
    """Converts a DType, NumPy dtype/type, DataType enum int or type name to the DType."""
    if isinstance(type_value, DType):
        return type_value
    if isinstance(type_value, (int, np.integer)) and not isinstance(type_value, bool):
        if int(type_value) in _BY_ENUM:
            return _BY_ENUM[int(type_value)]
    elif isinstance(type_value, str):
        if type_value in _BY_NAME:
            return _BY_NAME[type_value]
    else:
        if type_value in (bytes, str):
            return string
        if type_value is bool:
            return bool_
        if type_value is float:
            return float32
        if type_value is int:
            return int32
        if type_value is complex:
            return complex128
        try:
            dt = np.dtype(type_value)
        except TypeError:
            dt = None
        if dt is not None:
            if dt.kind in "SUO":
                return string
            if dt in _BY_NUMPY:
                return _BY_NUMPY[dt]
    raise TypeError(f"Cannot convert value {type_value!r} to a TensorFlow DType.")
