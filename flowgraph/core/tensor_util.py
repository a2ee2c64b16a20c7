"""NumPy arrays <-> TensorProto, the one place tensor values are encoded (FORMATS.md §1.4).

A TensorProto carries its elements either as raw little-endian row-major bytes in
`tensor_content` or as values in the `*_val` field that matches its dtype. We write
`tensor_content` for every non-string tensor of more than one element, except a splat (all
elements equal), which is written as its single value: readers repeat the last `*_val` value to
fill the shape, which is how TF itself writes `tf.zeros`-like constants. `*_val` fields are slow
for large tensors (FORMATS.md measures 2.8 s for 64 MiB), so they are only for scalars and splats.

A DT_RESOURCE tensor of any shape holds ResourceHandles (core/resource_handle.py), one
ResourceHandleProto per element in `resource_handle_val` (field 14; TF's AsProtoField), so a
handle can be fed, fetched and sent between tasks like any value. We also read TF's other form
(AsProtoTensorContent, what TF's own RecvTensor sends): `tensor_content` holding one varint32
size per handle, then the serialized ResourceHandleProtos one after another. In memory a scalar
handle is the ResourceHandle itself or a 0-d object array holding it.
"""

from typing import Any, NamedTuple

import ml_dtypes
import numpy as np

from flowgraph.core.protos import DataType, ResourceHandleProto, TensorProto
from flowgraph.core.resource_handle import ResourceHandle

_REF_OFFSET = 100  # DT_FLOAT_REF = DT_FLOAT + 100: a ref tensor holds values of the base type.


class _Encoding(NamedTuple):
    """How one DataType is stored: its NumPy dtype, its `*_val` field and that field's values.

    When `bits` is set the field holds the element's raw parts (float16 bit patterns,
    interleaved real/imaginary components), so conversion is a view rather than a cast.
    """

    np_dtype: np.dtype
    field: str
    field_dtype: np.dtype
    bits: bool = False


# TF's own table (tensor.proto comments): small integer types share int_val.
_ENCODINGS = {
    DataType.DT_FLOAT: _Encoding(np.dtype(np.float32), "float_val", np.dtype(np.float32)),
    DataType.DT_DOUBLE: _Encoding(np.dtype(np.float64), "double_val", np.dtype(np.float64)),
    DataType.DT_HALF: _Encoding(np.dtype(np.float16), "half_val", np.dtype(np.uint16), True),
    # bfloat16 bit patterns share half_val, as in TF's tensor.proto.
    DataType.DT_BFLOAT16: _Encoding(
        np.dtype(ml_dtypes.bfloat16), "half_val", np.dtype(np.uint16), True
    ),
    DataType.DT_INT8: _Encoding(np.dtype(np.int8), "int_val", np.dtype(np.int32)),
    DataType.DT_INT16: _Encoding(np.dtype(np.int16), "int_val", np.dtype(np.int32)),
    DataType.DT_INT32: _Encoding(np.dtype(np.int32), "int_val", np.dtype(np.int32)),
    DataType.DT_INT64: _Encoding(np.dtype(np.int64), "int64_val", np.dtype(np.int64)),
    DataType.DT_UINT8: _Encoding(np.dtype(np.uint8), "int_val", np.dtype(np.int32)),
    DataType.DT_UINT16: _Encoding(np.dtype(np.uint16), "int_val", np.dtype(np.int32)),
    DataType.DT_UINT32: _Encoding(np.dtype(np.uint32), "uint32_val", np.dtype(np.uint32)),
    DataType.DT_UINT64: _Encoding(np.dtype(np.uint64), "uint64_val", np.dtype(np.uint64)),
    DataType.DT_BOOL: _Encoding(np.dtype(np.bool_), "bool_val", np.dtype(np.bool_)),
    DataType.DT_COMPLEX64: _Encoding(
        np.dtype(np.complex64), "scomplex_val", np.dtype(np.float32), True
    ),
    DataType.DT_COMPLEX128: _Encoding(
        np.dtype(np.complex128), "dcomplex_val", np.dtype(np.float64), True
    ),
    DataType.DT_STRING: _Encoding(np.dtype(object), "string_val", np.dtype(object)),
    DataType.DT_RESOURCE: _Encoding(np.dtype(object), "resource_handle_val", np.dtype(object)),
}
_BY_NUMPY = {
    enc.np_dtype: enum for enum, enc in _ENCODINGS.items() if enc.np_dtype != np.dtype(object)
}


def _encoding(enum: int) -> _Encoding:
    try:
        return _ENCODINGS[enum]
    except KeyError:
        supported = ", ".join(DataType.Name(e) for e in _ENCODINGS)
        message = f"no NumPy conversion for {DataType.Name(enum)}; supported: {supported}"
        raise TypeError(message) from None


def _datatype(dtype: Any) -> int:
    """The DataType enum of a DType (anything with `as_datatype_enum`), enum or NumPy dtype."""
    dtype = getattr(dtype, "as_datatype_enum", dtype)
    if isinstance(dtype, int):
        base = dtype - _REF_OFFSET if dtype > _REF_OFFSET else dtype
        _encoding(base)  # Fails early for types without a NumPy equivalent.
        return base
    np_dtype = np.dtype(dtype)
    if np_dtype.kind in "OSU":
        return DataType.DT_STRING
    try:
        return _BY_NUMPY[np_dtype.newbyteorder("=")]
    except KeyError:
        raise TypeError(f"no DataType for NumPy dtype {np_dtype}") from None


def _to_array(values: Any, dtype: Any) -> tuple[int, np.ndarray]:
    """Converts values to (DataType, C-ordered array of that type's NumPy dtype).

    Without a dtype, TF's defaults apply: Python floats become float32 and Python ints int32
    when they fit, while NumPy inputs keep their dtype. A cast that would drop a fraction or an
    imaginary part, or turn strings into numbers or back, is refused as in TF.
    """
    if isinstance(values, ResourceHandle):  # NumPy would see a sequence in its slots
        array = np.empty((), dtype=object)
        array[()] = values
    else:
        array = np.asarray(values, order="C")
    if array.dtype.kind in "SU" and not isinstance(values, np.ndarray):
        array = np.asarray(values, dtype=object)  # 'S' arrays would drop trailing NUL bytes.
    if dtype is None:
        if not isinstance(values, (np.ndarray, np.generic)):
            if array.dtype == np.float64:
                array = array.astype(np.float32)
            elif array.dtype == np.int64 and np.array_equal(array.astype(np.int32), array):
                array = array.astype(np.int32)
        enum = _datatype(array.dtype)
        if enum == DataType.DT_STRING and array.size and _is_handle(array.flat[0]):
            enum = DataType.DT_RESOURCE
    else:
        enum = _datatype(dtype)
        if array.size and not _castable(array.dtype, _encoding(enum).np_dtype):
            raise TypeError(f"cannot convert {array.dtype} values to {DataType.Name(enum)}")
    target = _encoding(enum).np_dtype
    return enum, array if target.kind == "O" else np.asarray(array, dtype=target, order="C")


def _is_handle(value: Any) -> bool:
    return type(value) is ResourceHandle


def _castable(source: np.dtype, target: np.dtype) -> bool:
    if target.kind == "O" or source.kind in "OSU":
        return target.kind == "O" and source.kind in "OSU"
    if source.kind == "c":
        return target.kind == "c"
    return source.kind in "biu" or target.kind in "fc" or target == ml_dtypes.bfloat16


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, bytes):
        return bytes(value)
    raise TypeError(f"expected bytes or str for a DT_STRING tensor, got {type(value).__name__}")


def _is_splat(flat: np.ndarray) -> bool:
    """True if all elements have identical bytes (so -0.0 vs 0.0 and NaN payloads are kept)."""
    raw = flat.view(np.uint8).reshape(flat.size, flat.itemsize)
    return bool(np.all(raw == raw[0]))


def make_tensor_proto(values: Any, dtype: Any = None, shape: Any = None) -> TensorProto:
    """Returns a TensorProto holding values (an array, scalar, nested list, bytes or str).

    Args:
        values: the elements; str is stored UTF-8 encoded.
        dtype: a DType, DataType enum or NumPy dtype; None infers it like TF does.
        shape: the tensor's shape. values may then have fewer elements than the shape needs:
            the last one is repeated (TF's rule), so `make_tensor_proto(0, shape=[2, 3])` is
            a splat of zeros.

    Example: make_tensor_proto([[1.0, 2.0]]) has dtype DT_FLOAT, shape [1, 2] and its 8
    bytes in tensor_content.
    """
    enum, array = _to_array(values, dtype)
    encoding = _encoding(enum)
    shape = array.shape if shape is None else tuple(int(d) for d in shape)
    num_elements = int(np.prod(shape, dtype=np.int64))
    if array.size > num_elements or (array.size == 0 and num_elements > 0):
        raise ValueError(f"{array.size} values cannot fill shape {list(shape)}")

    proto = TensorProto(dtype=enum)
    for size in shape:
        proto.tensor_shape.dim.add(size=size)
    flat = array.reshape(-1)
    if encoding.field == "string_val":
        proto.string_val.extend(_as_bytes(v) for v in flat)
    elif encoding.field == "resource_handle_val":
        proto.resource_handle_val.extend(_handle_proto(v) for v in flat)
    elif array.size == num_elements and num_elements > 1 and not _is_splat(flat):
        proto.tensor_content = flat.astype(flat.dtype.newbyteorder("<"), copy=False).tobytes()
    else:
        if array.size == num_elements:
            flat = flat[:1]  # A scalar, or a splat written as its one value.
        if encoding.bits:
            field_values = flat.view(encoding.field_dtype)
        else:
            field_values = flat.astype(encoding.field_dtype)
        getattr(proto, encoding.field).extend(field_values.tolist())
    return proto


def _handle_proto(value: Any):
    if not _is_handle(value):
        raise TypeError(
            f"expected a ResourceHandle for a DT_RESOURCE tensor, got {type(value).__name__}"
        )
    return value.to_proto()


def _decode_handle_list(content: bytes, n: int) -> np.ndarray:
    """TF's EncodeResourceHandleList: n varint32 sizes, then the n serialized protos."""
    sizes, pos = [], 0
    for _ in range(n):
        size, shift = 0, 0
        while True:
            if pos >= len(content) or shift > 28:
                raise ValueError("a DT_RESOURCE tensor_content ends inside its sizes")
            byte = content[pos]
            pos += 1
            size |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                break
        sizes.append(size)
    if pos + sum(sizes) != len(content):
        raise ValueError(
            f"a DT_RESOURCE tensor_content of {len(content)} bytes does not hold {n} handles "
            f"of {sum(sizes)} bytes after {pos} bytes of sizes"
        )
    flat = np.empty(n, dtype=object)
    for i, size in enumerate(sizes):
        flat[i] = ResourceHandle.from_proto(
            ResourceHandleProto.FromString(content[pos : pos + size])
        )
        pos += size
    return flat


def make_ndarray(proto: TensorProto) -> np.ndarray:
    """Returns the value of proto as a new, writable array (strings as an object array of bytes).

    Example: make_ndarray(make_tensor_proto(7, shape=[2])) is array([7, 7], dtype=int32).
    """
    encoding = _encoding(proto.dtype)
    shape = tuple(d.size for d in proto.tensor_shape.dim)
    num_elements = int(np.prod(shape, dtype=np.int64))
    if proto.tensor_content:
        if encoding.field == "resource_handle_val":
            return _decode_handle_list(proto.tensor_content, num_elements).reshape(shape)
        stored = np.frombuffer(proto.tensor_content, dtype=encoding.np_dtype.newbyteorder("<"))
        return stored.astype(encoding.np_dtype).reshape(shape)

    values = getattr(proto, encoding.field)
    if encoding.field == "string_val":
        flat = np.empty(len(values), dtype=object)
        flat[:] = list(values)
    elif encoding.field == "resource_handle_val":
        flat = np.empty(len(values), dtype=object)
        flat[:] = [ResourceHandle.from_proto(h) for h in values]
    else:
        flat = np.array(values, dtype=encoding.field_dtype)
        flat = flat.view(encoding.np_dtype) if encoding.bits else flat.astype(encoding.np_dtype)
    if flat.size > num_elements:
        raise ValueError(f"{flat.size} values for shape {list(shape)} in {encoding.field}")
    if flat.size == 0 and num_elements and encoding.field == "resource_handle_val":
        raise ValueError(f"a DT_RESOURCE tensor of shape {list(shape)} holds no handles")
    if flat.size == 0:
        # TF reads a tensor without values as all zeros (empty strings for DT_STRING).
        flat = np.full(min(num_elements, 1), b"" if encoding.field == "string_val" else 0)
        flat = flat.astype(encoding.np_dtype)
    if flat.size < num_elements:
        flat = np.concatenate([flat, np.repeat(flat[-1:], num_elements - flat.size)])
    return flat.reshape(shape)
