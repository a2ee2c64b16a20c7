"""The one owner of AttrValue encoding: Python attr values <-> `AttrValue` protos.

Python forms: int, float, bool, str (string attrs; bytes are kept as bytes), DType (type),
TensorShape (shape), np.ndarray (tensor), NameAttrList (func), and lists of those.
"""

from __future__ import annotations

import numpy as np

from flowgraph.core import dtypes, tensor_util
from flowgraph.core.protos import AttrValue, NameAttrList
from flowgraph.core.shapes import TensorShape, as_shape

_LIST_FIELDS = ("s", "i", "f", "b", "type", "shape", "tensor", "func")


def _encode_str(v) -> bytes:
    return v if isinstance(v, bytes) else str(v).encode("utf-8")


def to_attr_value(value, kind: str | None = None) -> AttrValue:
    """Encodes `value`; `kind` is the OpDef attr type ('int', 'list(type)', ...) when known."""
    if isinstance(value, AttrValue):
        return value
    if kind is None:
        kind = _guess_kind(value)
    av = AttrValue()
    if kind.startswith("list("):
        base = kind[5:-1]
        lst = av.list
        lst.SetInParent()  # an empty list is still a list, not an unset value
        if base == "int":
            lst.i.extend(int(v) for v in value)
        elif base == "float":
            lst.f.extend(float(v) for v in value)
        elif base == "bool":
            lst.b.extend(bool(v) for v in value)
        elif base == "string":
            lst.s.extend(_encode_str(v) for v in value)
        elif base == "type":
            lst.type.extend(dtypes.as_dtype(v).as_datatype_enum for v in value)
        elif base == "shape":
            lst.shape.extend(as_shape(v).as_proto() for v in value)
        elif base == "tensor":
            lst.tensor.extend(tensor_util.make_tensor_proto(v) for v in value)
        else:
            raise TypeError(f"unsupported attr kind {kind}")
    elif kind == "int":
        av.i = int(value)
    elif kind == "float":
        av.f = float(value)
    elif kind == "bool":
        av.b = bool(value)
    elif kind == "string":
        av.s = _encode_str(value)
    elif kind == "type":
        av.type = dtypes.as_dtype(value).as_datatype_enum
    elif kind == "shape":
        av.shape.CopyFrom(as_shape(value).as_proto())
    elif kind == "tensor":
        av.tensor.CopyFrom(
            value if hasattr(value, "tensor_content") else tensor_util.make_tensor_proto(value)
        )
    elif kind == "func":
        av.func.CopyFrom(
            value if isinstance(value, NameAttrList) else NameAttrList(name=str(value))
        )
    else:
        raise TypeError(f"unsupported attr kind {kind}")
    return av


def _guess_kind(value) -> str:
    if isinstance(value, (list, tuple)):
        return "list(int)" if not value else f"list({_guess_kind(value[0])})"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, np.integer)):
        return "int"
    if isinstance(value, (float, np.floating)):
        return "float"
    if isinstance(value, (str, bytes)):
        return "string"
    if isinstance(value, dtypes.DType):
        return "type"
    if isinstance(value, TensorShape):
        return "shape"
    if isinstance(value, np.ndarray):
        return "tensor"
    raise TypeError(f"cannot infer the attr kind of {value!r}")


def _decode_str(b: bytes):
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return b


def from_attr_value(av: AttrValue):
    """Decodes an AttrValue into its Python form (strings as str when valid UTF-8)."""
    which = av.WhichOneof("value")
    if which == "list":
        lst = av.list
        for field in _LIST_FIELDS:
            items = getattr(lst, field)
            if len(items):
                return _decode_list(field, items)
        return []
    if which == "s":
        return _decode_str(av.s)
    if which in ("i", "f", "b"):
        return getattr(av, which)
    if which == "type":
        return dtypes.as_dtype(av.type)
    if which == "shape":
        return TensorShape(av.shape)
    if which == "tensor":
        return tensor_util.make_ndarray(av.tensor)
    if which == "func":
        return av.func
    if which == "placeholder":
        return av.placeholder
    return None


def _decode_list(field, items) -> list:
    if field == "s":
        return [_decode_str(s) for s in items]
    if field == "type":
        return [dtypes.as_dtype(t) for t in items]
    if field == "shape":
        return [TensorShape(s) for s in items]
    if field == "tensor":
        return [tensor_util.make_ndarray(t) for t in items]
    return list(items)
