"""OpDefs and the op registry: what an operation is (whitepaper §2 "Operations and Kernels").

An OpDef names an op type and declares its typed inputs and outputs, its attrs (with defaults and
allowed values) and a shape function. It is written in TensorFlow's REGISTER_OP notation:

    register_op(OpDef("MatMul", inputs=["a: T", "b: T"], outputs=["product: T"],
                      attrs=["transpose_a: bool = false", "transpose_b: bool = false",
                             "T: {half, float, double, int32, int64, complex64, complex128}"],
                      shape_fn=matmul_shape))

Arg specs: `name: T` (a type attr), `name: float` (a fixed type), `name: N * T` (a homogeneous list
whose length is the int attr N), `name: Tlist` (a list(type) attr), `name: Ref(T)` (a reference).
Both sides of the system read this table: graph construction validates ops and infers dtypes and
shapes from it; the runtime reads output counts, output types and ref-ness from it.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Callable
from typing import Any

from flowgraph.core import dtypes, errors, registry

_TYPE_SETS = {
    "numbertypes": dtypes.NUMERIC,
    "numeric": dtypes.NUMERIC,
    "realnumbertypes": dtypes.REAL_NUMBERS,
    "real": dtypes.REAL_NUMBERS,
    "floating": dtypes.FLOATING,
    "float_types": dtypes.FLOATING,
    "complex": dtypes.COMPLEX,
    "integer": dtypes.INTEGER,
    "int_types": dtypes.INTEGER,
    "all": dtypes.ALL_TYPES,
    "type": None,  # any type
}
_ATTR_TYPES = {"int", "float", "bool", "string", "type", "shape", "tensor", "func"}


@dataclasses.dataclass(frozen=True)
class ArgDef:
    """One input or output: a fixed `type`, a `type_attr`, or a list (`number_attr`/`type_list_attr`)."""

    name: str
    type: dtypes.DType | None = None
    type_attr: str | None = None
    number_attr: str | None = None
    type_list_attr: str | None = None
    is_ref: bool = False


@dataclasses.dataclass(frozen=True)
class AttrDef:
    """One attr: its kind ('int', 'list(int)', 'type', ...), default, allowed values, minimum."""

    name: str
    type: str
    has_default: bool = False
    default: Any = None
    allowed: tuple | None = None
    minimum: int | None = None


_ARG_RE = re.compile(r"^\s*(\w+)\s*:\s*(?:(\w+)\s*\*\s*)?(Ref\()?\s*(\w+)\s*\)?\s*$")
_ATTR_RE = re.compile(r"^\s*(\w+)\s*:\s*((?:>=|[^=>])+?)\s*(?:=\s*(.+?))?\s*$")


def _parse_arg(spec: str) -> ArgDef:
    m = _ARG_RE.match(spec)
    if not m:
        raise ValueError(f"bad arg spec {spec!r}")
    name, number, ref, typ = m.groups()
    fixed = dtypes._BY_NAME.get(typ)  # `x: float` is a fixed type; `x: T` names a type attr
    if fixed is not None:
        return ArgDef(name, type=fixed, number_attr=number, is_ref=bool(ref))
    return ArgDef(name, type_attr=typ, number_attr=number, is_ref=bool(ref))


def _parse_default(text: str, kind: str):
    text = text.strip()
    if kind == "type" or text.startswith("DT_"):
        return (
            dtypes.as_dtype(text[3:].lower()) if text.startswith("DT_") else dtypes.as_dtype(text)
        )
    if kind.startswith("list(type)"):
        return [
            dtypes.as_dtype(t.strip()[3:].lower()) for t in text.strip("[]").split(",") if t.strip()
        ]
    text = re.sub(r"\btrue\b", "True", re.sub(r"\bfalse\b", "False", text))
    value = ast.literal_eval(text)
    if kind == "float":
        return float(value)
    if kind == "shape" and value is not None:
        return list(value)
    return value


def _parse_attr(spec: str) -> AttrDef:
    m = _ATTR_RE.match(spec)
    if not m:
        raise ValueError(f"bad attr spec {spec!r}")
    name, kind, default = m.groups()
    allowed, minimum = None, None
    if ">=" in kind:
        kind, minimum = kind.split(">=")
        kind, minimum = kind.strip(), int(minimum)
    if kind.startswith("{"):  # a set of types or of strings
        items = [i.strip() for i in kind.strip("{}").split(",")]
        if items[0].startswith(("'", '"')):
            kind, allowed = "string", tuple(ast.literal_eval(i) for i in items)
        else:
            kind, allowed = "type", tuple(dtypes.as_dtype(i) for i in items)
    elif kind.startswith("list(") and kind[5:-1] in _TYPE_SETS and kind[5:-1] != "type":
        allowed, kind = _TYPE_SETS[kind[5:-1]], "list(type)"
    elif kind in _TYPE_SETS and kind != "type":
        allowed, kind = _TYPE_SETS[kind], "type"
    base = kind[5:-1] if kind.startswith("list(") else kind
    if base not in _ATTR_TYPES:
        raise ValueError(f"bad attr type {kind!r} in {spec!r}")
    if default is None:
        return AttrDef(name, kind, allowed=allowed, minimum=minimum)
    return AttrDef(name, kind, True, _parse_default(default, kind), allowed, minimum)


class OpDef:
    """The declaration of one op type; see the module docstring for the notation."""

    def __init__(
        self,
        name: str,
        inputs: list[str] = (),
        outputs: list[str] = (),
        attrs: list[str] = (),
        shape_fn: Callable | None = None,
        is_stateful: bool = False,
        allows_uninitialized_input: bool = False,
    ):
        self.name = name
        self.inputs = [_parse_arg(s) for s in inputs]
        self.outputs = [_parse_arg(s) for s in outputs]
        self.attrs = {a.name: a for a in (_parse_attr(s) for s in attrs)}
        self.shape_fn = shape_fn
        self.is_stateful = is_stateful
        self.allows_uninitialized_input = allows_uninitialized_input
        for arg in self.inputs + self.outputs:
            for attr in (arg.type_attr, arg.number_attr, arg.type_list_attr):
                if attr is not None and attr not in self.attrs:
                    raise ValueError(f"op {name}: arg {arg.name} uses undeclared attr {attr!r}")
        # A bare type attr name that is declared as list(type) makes the arg a type list.
        self.inputs = [self._fix_list(a) for a in self.inputs]
        self.outputs = [self._fix_list(a) for a in self.outputs]

    def _fix_list(self, arg: ArgDef) -> ArgDef:
        if arg.type_attr and self.attrs[arg.type_attr].type == "list(type)":
            return dataclasses.replace(arg, type_attr=None, type_list_attr=arg.type_attr)
        return arg

    # -- the runtime's questions --------------------------------------------------------------
    def arg_types(self, args: list[ArgDef], attrs: dict) -> list[dtypes.DType]:
        """The flat list of dtypes of `args` (inputs or outputs) given the node's attrs."""
        out = []
        for arg in args:
            if arg.type_list_attr:
                types = [dtypes.as_dtype(t) for t in attrs[arg.type_list_attr]]
            else:
                t = arg.type if arg.type is not None else dtypes.as_dtype(attrs[arg.type_attr])
                types = [t] * (int(attrs[arg.number_attr]) if arg.number_attr else 1)
            out.extend(t._as_ref if arg.is_ref else t for t in types)
        return out

    def output_types(self, attrs: dict) -> list[dtypes.DType]:
        return self.arg_types(self.outputs, attrs)

    def input_types(self, attrs: dict) -> list[dtypes.DType]:
        return self.arg_types(self.inputs, attrs)

    def check_attr(self, name: str, value, node: str = ""):
        """Raises InvalidArgumentError/TypeError if `value` is not allowed for attr `name`."""
        attr = self.attrs.get(name)
        if attr is None:
            return  # extra attrs such as _class are allowed, as in TF
        if attr.allowed is not None:
            values = value if attr.type.startswith("list(") else [value]
            for v in values:
                if v not in attr.allowed:
                    allowed = ", ".join(
                        a.name if isinstance(a, dtypes.DType) else repr(a) for a in attr.allowed
                    )
                    raise TypeError(
                        f"Value passed to parameter '{name}' of op '{self.name}'{node} has "
                        f"{getattr(v, 'name', repr(v))} not in list of allowed values: {allowed}"
                    )
        if attr.minimum is not None:
            n = len(value) if attr.type.startswith("list(") else value
            if n < attr.minimum:
                raise ValueError(
                    f"Attr '{name}' of '{self.name}' Op{node} has value {n} less than minimum "
                    f"{attr.minimum}"
                )

    def __repr__(self):
        return f"OpDef({self.name!r})"


_OPS = registry.Registry("op", op_type_of=lambda op_type: op_type)
registry.machinery(__file__)


def register_op(op_def: OpDef) -> OpDef:
    """Adds `op_def` to the op registry; a duplicate names both registration sites."""
    _OPS.register(op_def.name, op_def)
    return op_def


def get_op_def(op_type: str) -> OpDef:
    op_def = _OPS.get(op_type)
    if op_def is None:
        raise errors.NotFoundError(
            None,
            None,
            f"Op type not registered '{op_type}' in binary. Registered: {len(_OPS)} op types",
        )
    return op_def


def registered_ops() -> dict[str, OpDef]:
    return dict(_OPS.items())
