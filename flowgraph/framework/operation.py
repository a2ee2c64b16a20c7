"""Operation and Tensor: the nodes and edges of a client-side Graph (whitepaper §2).

An Operation is one node: an op type (a key of the OpDef registry), attrs, data inputs, control
inputs and a requested device. A Tensor is one output of an Operation, named `op_name:index`.
Each Operation keeps the user's source line that created it, so runtime errors can name it.
"""

from __future__ import annotations

import os
import sys

from flowgraph.core import attr_value, dtypes, errors
from flowgraph.core.protos import NodeDef
from flowgraph.core.shapes import TensorShape, as_shape

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def user_frame() -> tuple[str, int, str]:
    """(file, line, function) of the first stack frame outside flowgraph: the user's call site."""
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(_PACKAGE_DIR):
        f = f.f_back
    if f is None:
        return ("<unknown>", 0, "<unknown>")
    return (f.f_code.co_filename, f.f_lineno, f.f_code.co_name)


_STACK_DEPTH = 16  # caller frames kept per op, from the user's line outward


def creation_stack() -> tuple:
    """user_frame() and the stack from it outward as (code, last instruction) pairs, at most
    _STACK_DEPTH frames: cheap enough for every op; user_stack() turns it into lines when a
    profile asks (the code view)."""
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(_PACKAGE_DIR):
        f = f.f_back
    if f is None:
        return ("<unknown>", 0, "<unknown>"), ()
    code = f.f_code
    site = (code.co_filename, f.f_lineno, code.co_name)
    raw = []
    for _ in range(_STACK_DEPTH):
        if f is None:
            break
        raw.append(f.f_code)
        raw.append(f.f_lasti)
        f = f.f_back
    return site, tuple(raw)


def _line(code, lasti) -> int:
    for start, end, line in code.co_lines():
        if start <= lasti < end:
            return line if line is not None else code.co_firstlineno
    return code.co_firstlineno


def user_stack(raw) -> list:
    """A creation_stack() as [(file, line, function)], outermost first, without flowgraph's own
    frames: the user's calls that led to an op (the profiler's code view)."""
    frames = []
    for code, lasti in zip(raw[0::2], raw[1::2]):
        if not code.co_filename.startswith(_PACKAGE_DIR):
            frames.append((code.co_filename, _line(code, lasti), code.co_name))
    return frames[::-1]


class Operation:
    """A node of the graph. Created by `Graph.create_op`; see the module docstring."""

    def __init__(
        self,
        graph,
        op_id,
        name,
        op_type,
        op_def,
        inputs,
        control_inputs,
        attrs,
        output_types,
        device,
        input_types=None,
    ):
        self._graph = graph
        self._id = op_id
        self._name = name
        self._type = op_type
        self._op_def = op_def
        self._inputs = list(inputs)
        self._input_types = input_types if input_types is not None else [t.dtype for t in inputs]
        self._control_inputs = list(control_inputs)
        self._attrs = attrs
        self._device = device
        self._outputs = [Tensor(self, i, dt) for i, dt in enumerate(output_types)]
        self._traceback, self._raw_stack = creation_stack()
        self._node_def = None
        self._control_flow_context = None
        for t in self._inputs:
            t._consumers.append(self)

    # -- identity -----------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._name

    @property
    def type(self) -> str:
        return self._type

    @property
    def graph(self):
        return self._graph

    @property
    def op_def(self):
        return self._op_def

    @property
    def inputs(self) -> tuple:
        return tuple(self._inputs)

    @property
    def outputs(self) -> list:
        return self._outputs

    def values(self) -> tuple:
        return tuple(self._outputs)

    @property
    def control_inputs(self) -> list:
        return list(self._control_inputs)

    @property
    def device(self) -> str:
        return self._device

    @property
    def traceback(self) -> list:
        return [self._traceback]

    def creation_site(self) -> str:
        file, line, func = self._traceback
        return f"{file}:{line} in {func}"

    def get_attr(self, name: str):
        if name not in self._attrs:
            raise ValueError(f"Operation '{self._name}' has no attr named '{name}'.")
        return self._attrs[name]

    @property
    def node_def(self) -> NodeDef:
        if self._node_def is None:
            self._node_def = self._make_node_def()
        return self._node_def

    def _make_node_def(self) -> NodeDef:
        nd = NodeDef(name=self._name, op=self._type, device=self._device)
        nd.input.extend(t._input_name() for t in self._inputs)
        nd.input.extend("^" + op._name for op in self._control_inputs)
        defs = self._op_def.attrs
        for key, value in self._attrs.items():
            kind = defs[key].type if key in defs else None
            nd.attr[key].CopyFrom(attr_value.to_attr_value(value, kind))
        return nd

    def colocation_groups(self) -> list:
        """The `loc:@name` groups the op is placed with, as bytes (TF's return type)."""
        return [g.encode() for g in self._colocation_names()]

    def _colocation_names(self) -> list:
        groups = [s for s in self._attrs.get("_class", []) if s.startswith("loc:@")]
        return groups or [f"loc:@{self._name}"]

    # -- mutation (rare; keeps the cached NodeDef honest) -------------------------------------
    def _set_attr(self, name: str, value):
        self._attrs[name] = value
        self._node_def = None

    def _set_device(self, device: str):
        self._device = device
        self._node_def = None

    def _add_control_input(self, op):
        if op not in self._control_inputs:
            self._control_inputs.append(op)
            self._node_def = None
            self._graph._mutated(self)

    def _add_control_inputs(self, ops):
        for op in ops:
            self._add_control_input(op)

    def _update_input(self, index: int, tensor):
        self._inputs[index]._consumers.remove(self)
        self._inputs[index] = tensor
        tensor._consumers.append(self)
        self._node_def = None
        self._graph._mutated(self)

    # -- running ------------------------------------------------------------------------------
    def run(self, feed_dict=None, session=None):
        from flowgraph.session import default_session

        default_session.resolve(session, self._graph).run(self, feed_dict)

    def __repr__(self):
        return f"<tf.Operation '{self._name}' type={self._type}>"


class Tensor:
    """One output of an Operation. Operator overloads are installed by `flowgraph.ops.math`."""

    __array_priority__ = 100
    OVERLOADABLE_OPERATORS = frozenset(
        {
            "__add__",
            "__radd__",
            "__sub__",
            "__rsub__",
            "__mul__",
            "__rmul__",
            "__div__",
            "__rdiv__",
            "__truediv__",
            "__rtruediv__",
            "__floordiv__",
            "__rfloordiv__",
            "__mod__",
            "__rmod__",
            "__lt__",
            "__le__",
            "__gt__",
            "__ge__",
            "__and__",
            "__rand__",
            "__or__",
            "__ror__",
            "__xor__",
            "__rxor__",
            "__getitem__",
            "__pow__",
            "__rpow__",
            "__invert__",
            "__neg__",
            "__abs__",
            "__matmul__",
            "__rmatmul__",
        }
    )

    def __init__(self, op: Operation, value_index: int, dtype: dtypes.DType):
        self._op = op
        self._value_index = value_index
        self._dtype = dtype
        self._shape = TensorShape(None)
        self._consumers = []
        self._name = f"{op._name}:{value_index}"

    @property
    def op(self) -> Operation:
        return self._op

    @property
    def value_index(self) -> int:
        return self._value_index

    @property
    def dtype(self) -> dtypes.DType:
        return self._dtype

    @property
    def graph(self):
        return self._op._graph

    @property
    def name(self) -> str:
        return self._name

    @property
    def device(self) -> str:
        return self._op._device

    def _input_name(self) -> str:
        """The name as a NodeDef input: port 0 is written bare, like TensorFlow."""
        return self._op._name if self._value_index == 0 else self.name

    @property
    def shape(self) -> TensorShape:
        return self._shape

    def get_shape(self) -> TensorShape:
        return self._shape

    def set_shape(self, shape):
        """Merges `shape` into the static shape; ValueError if they are incompatible."""
        self._shape = self._shape.merge_with(as_shape(shape))

    def consumers(self) -> list:
        return list(self._consumers)

    def eval(self, feed_dict=None, session=None):
        from flowgraph.session import default_session

        return default_session.resolve(session, self.graph).run(self, feed_dict)

    # -- python protocol ----------------------------------------------------------------------
    def __hash__(self):
        return id(self)

    def __eq__(self, other):
        return self is other

    def __ne__(self, other):
        return self is not other

    def __bool__(self):
        raise errors.OperatorNotAllowedInGraphError(
            "Using a `tf.Tensor` as a Python `bool` is not allowed. Use `if t is not None:` "
            "instead of `if t:` or use TensorFlow ops such as tf.cond to execute subgraphs "
            "conditioned on the value of a tensor."
        )

    __nonzero__ = __bool__

    def __iter__(self):
        dims = self._shape.as_tuple()
        if dims is None or not dims or dims[0] is None:
            raise TypeError("Tensor objects are only iterable when the first dimension is known.")
        return (self[i] for i in range(dims[0]))

    def __len__(self):
        raise TypeError(
            f"len is not well defined for symbolic Tensors. ({self.name}) Please call `x.shape` "
            "rather than `len(x)` for shape information."
        )

    def __array__(self, dtype=None, copy=None):
        raise NotImplementedError(
            f"Cannot convert a symbolic Tensor ({self.name}) to a numpy array."
        )

    def __repr__(self):
        return f"<tf.Tensor '{self.name}' shape={self._shape} dtype={self._dtype.name}>"

    def __str__(self):
        return f'Tensor("{self.name}", shape={self._shape}, dtype={self._dtype.name})'
