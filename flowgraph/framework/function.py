"""Graph functions (TensorFlow's function library): a Python function traced once into a
`FunctionDef` that the GraphDef carries in its `library`, as TensorFlow stores them, so the
functions a dataset applies (map, filter, ...) travel with the graph to the runtime and import
from and into TensorFlow.

A body is built in a `FuncGraph`, a Graph whose placeholders are the function's arguments.
Tensors of enclosing graphs used inside the body are *captured*: by reference (a new argument
whose value the caller passes, TensorFlow's `Targuments`/`other_arguments`), or by value (the
ops that compute them are copied into the body, which is how a one-shot iterator's dataset
factory becomes self-contained). `to_function_def` writes the body in TensorFlow's notation:
an argument is named by its name, an op output as `node:output_arg:index`.

`Defun` is TF1's decorator (tensorflow.python.framework.function.Defun); calling a defined
function adds a `PartitionedCall` (or `StatefulPartitionedCall`) node.
"""

from __future__ import annotations

import itertools
import re
import weakref

from flowgraph.core import dtypes, errors, shapes
from flowgraph.core.attr_value import to_attr_value
from flowgraph.core.protos import FunctionDef, NameAttrList
from flowgraph.framework import default_graph, nest
from flowgraph.framework.graph import Graph
from flowgraph.framework.operation import Tensor

_ids = itertools.count(1)
# Function bodies live as long as the root graph holding their FunctionDefs: what a body owns
# (the Python callables of its PyFuncs) must outlive the tracing.
_BODIES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_REF_OPS = {"VariableV2", "Variable", "VarHandleOp", "Placeholder", "PlaceholderV2"}


class FuncGraph(Graph):
    """A function body under construction; ops created while it is the default graph go here."""

    def __init__(self, name: str, outer_graph: Graph, capture_by_value: bool = False):
        super().__init__()
        self.name = name
        self.outer_graph = outer_graph
        self.capture_by_value = capture_by_value
        self.seed = outer_graph.seed
        self._building_function = True
        self.inputs: list[Tensor] = []  # the argument placeholders, explicit ones first
        self.captures: dict = {}  # outer Tensor -> the placeholder or copy standing for it
        self._copies: dict = {}  # outer Operation -> its copy (capture by value)
        self._outer_of: dict = {}  # captured placeholder -> the outer tensor the caller passes
        self.outputs: list[Tensor] = []  # the results, set by to_function_def

    def root_graph(self) -> Graph:
        g = self
        while isinstance(g, FuncGraph):
            g = g.outer_graph
        return g

    def _add_function(self, fdef) -> None:
        """Functions defined inside a body (a map inside an interleave) belong to the root."""
        super()._add_function(fdef)
        self.outer_graph._add_function(fdef)

    def capture(self, tensor: Tensor) -> Tensor:
        """The body's stand-in for `tensor` of an enclosing graph."""
        inner = self.captures.get(tensor)
        if inner is not None:
            return inner
        if self.capture_by_value:
            inner = self._copy(tensor.op).outputs[tensor.value_index]
        else:
            outer = tensor
            if tensor.graph is not self.outer_graph:
                if not isinstance(self.outer_graph, FuncGraph):
                    raise ValueError(
                        f"Tensor {tensor.name} belongs to {tensor.graph!r}, which does not "
                        f"enclose the function {self.name}"
                    )
                outer = self.outer_graph.capture(tensor)
            inner = self._placeholder(outer.dtype.base_dtype, outer.shape, "captured")
            self._outer_of[inner] = outer
        self.captures[tensor] = inner
        return inner

    def captured_inputs(self) -> list[Tensor]:
        """The outer tensors to pass for the captured arguments, in argument order."""
        return [self._outer_of[p] for p in self.inputs if p in self._outer_of]

    def _placeholder(self, dtype, shape, prefix: str) -> Tensor:
        from flowgraph.framework import apply_op

        scope, self._name_stack = self._name_stack, ""  # arguments are named at the top
        try:
            name = self.unique_name(_arg_name(prefix))
        finally:
            self._name_stack = scope
        op = apply_op.create(self, "Placeholder", [], {"dtype": dtype, "shape": shape}, name + "/")
        self.inputs.append(op.outputs[0])
        return op.outputs[0]

    def add_argument(self, dtype, shape, name: str = "args") -> Tensor:
        return self._placeholder(dtypes.as_dtype(dtype), shapes.as_shape(shape), name)

    def _copy(self, op):
        """Copies `op` and what it depends on into the body (capture by value)."""
        from flowgraph.framework import apply_op

        copy = self._copies.get(op)
        if copy is not None:
            return copy
        if op.type in _REF_OPS or any(t.dtype.is_ref_dtype for t in op.outputs):
            raise ValueError(
                f"Cannot capture a placeholder or variable ({op.type} '{op.name}') by value: "
                f"a one-shot iterator's dataset must be built from constants; use an "
                f"initializable iterator to parameterize it."
            )
        inputs = [self.capture(t) for t in op.inputs]
        name = self.unique_name(op.name)
        copy = apply_op.create(
            self,
            op.type,
            inputs,
            dict(op._attrs),
            name + "/",
            output_types=[t.dtype for t in op.outputs],
        )
        for t, c in zip(op.outputs, copy.outputs):
            c._shape = t.shape
        copy._add_control_inputs([self._copy(c) for c in op.control_inputs])
        self._copies[op] = copy
        return copy


def find_body(graph: Graph, name: str) -> FuncGraph | None:
    """The traced body of function `name` used in `graph`, if it was traced in this process."""
    root = graph.root_graph() if isinstance(graph, FuncGraph) else graph
    for body in _BODIES.get(root, ()):
        if body.name == name:
            return body
    return None


def inline(body: FuncGraph, args: list) -> list:
    """Copies the ops of `body` into the default graph with its arguments bound to `args`;
    returns the copies of its results (how a gradient function re-derives a forward pass)."""
    from flowgraph.framework import apply_op

    graph = default_graph.get()
    mapping = dict(zip(body.inputs, args))
    copies = {}
    for op in body.get_operations():
        if op.outputs and op.outputs[0] in mapping:
            continue
        inputs = [mapping[t] for t in op.inputs]
        copy = apply_op.create(
            graph,
            op.type,
            inputs,
            dict(op._attrs),
            graph.unique_name(op.name) + "/",
            output_types=[t.dtype for t in op.outputs],
        )
        copy._add_control_inputs([copies[c] for c in op.control_inputs])
        copies[op] = copy
        for t, c in zip(op.outputs, copy.outputs):
            c._shape = t.shape
            mapping[t] = c
    return [mapping[t] for t in body.outputs]


def _arg_name(prefix: str) -> str:
    name = re.sub(r"[^a-z0-9_]", "_", prefix.lower())
    return name if name[:1].isalpha() else "arg_" + name


class DefinedFunction:
    """A traced function: its FunctionDef, the structure of its outputs, its captured inputs."""

    def __init__(self, fdef: FunctionDef, graph: FuncGraph, outputs):
        self.definition = fdef
        self.name = fdef.signature.name
        self.graph = graph
        self.structured_outputs = outputs  # the Python structure returned (Tensors or None)
        self.captured_inputs = graph.captured_inputs()
        flat = [t for t in nest.flatten(outputs) if t is not None]
        self.output_types = [t.dtype.base_dtype for t in flat]
        self.output_shapes = [t.shape for t in flat]

    @property
    def func_attr(self) -> NameAttrList:
        return NameAttrList(name=self.name)

    def add_to_graph(self, graph: Graph) -> None:
        graph._add_function(self.definition)


def trace(
    fn,
    arg_types,
    arg_shapes,
    name: str,
    capture_by_value: bool = False,
    graph: Graph | None = None,
    structure_fn=None,
):
    """Traces `fn` into a FunctionDef named `name` (made unique) and adds it to `graph`.

    `fn` receives one Tensor per (type, shape), or what `structure_fn(tensors)` makes of them
    (the nested element of a dataset); it returns a Tensor or a nested structure of Tensors.
    """
    outer = graph if graph is not None else default_graph.get()
    fname = f"{_sanitize(name)}_{next(_ids)}"
    body = FuncGraph(fname, outer, capture_by_value)
    with body.as_default():
        args = [body.add_argument(t, s) for t, s in zip(arg_types, arg_shapes)]
        call_args = structure_fn(args) if structure_fn is not None else args
        outputs = fn(*call_args) if structure_fn is None else fn(call_args)
    fdef = to_function_def(body, fname, outputs)
    defined = DefinedFunction(fdef, body, outputs)
    defined.add_to_graph(outer)
    _BODIES.setdefault(body.root_graph(), []).append(body)
    return defined


def _sanitize(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


def to_function_def(body: FuncGraph, name: str, outputs) -> FunctionDef:
    """The FunctionDef of `body`: arguments are `body.inputs`, results the Tensors of `outputs`."""
    from flowgraph.framework import convert

    flat = []
    for t in nest.flatten(outputs):
        if t is None:
            continue
        if not isinstance(t, Tensor):
            with body.as_default():
                t = convert.convert_to_tensor(t)
        if t.graph is not body:
            t = body.capture(t)
        flat.append(t)
    body.outputs = flat
    fdef = FunctionDef()
    sig = fdef.signature
    sig.name = name
    args = {}
    for t in body.inputs:
        arg = sig.input_arg.add()
        arg.name = t.op.name
        arg.type = t.dtype.base_dtype.as_datatype_enum
        args[t] = arg.name
    stateful = False
    for op in body.get_operations():
        if op.outputs and op.outputs[0] in args:
            continue
        if op.type in ("Placeholder", "PlaceholderV2"):
            raise ValueError(f"Function {name}: placeholder '{op.name}' inside a function body")
        stateful = stateful or op.op_def.is_stateful
        nd = fdef.node_def.add()
        nd.name = op.name
        nd.op = op.type
        nd.device = op.device
        nd.input.extend(_ref(t, args) for t in op.inputs)
        nd.input.extend("^" + c.name for c in op.control_inputs)
        for key, value in op._attrs.items():
            kind = op.op_def.attrs[key].type if key in op.op_def.attrs else None
            nd.attr[key].CopyFrom(to_attr_value(value, kind))
    for i, t in enumerate(flat):
        out = sig.output_arg.add()
        out.name = f"output_{i}"
        out.type = t.dtype.base_dtype.as_datatype_enum
        fdef.ret[out.name] = _ref(t, args)
    sig.is_stateful = stateful
    return fdef


def _ref(t: Tensor, args: dict) -> str:
    """TensorFlow's name of a tensor inside a function body."""
    if t in args:
        return args[t]
    op = t.op
    port = t.value_index
    for arg in op.op_def.outputs:
        if arg.type_list_attr:
            n = len(op._attrs[arg.type_list_attr])
        elif arg.number_attr:
            n = int(op._attrs[arg.number_attr])
        else:
            n = 1
        if port < n:
            return f"{op.name}:{arg.name}:{port}"
        port -= n
    raise errors.InternalError(None, None, f"output {t.name} not found in its OpDef")


class Defun:
    """TF1's `@function.Defun(*input_types)`: traces the decorated function into the default
    graph's library; calling it adds a PartitionedCall node.

    Example:
      @Defun(tf.float32, tf.float32)
      def add_mul(x, y):
          return x + y, x * y
      s, p = add_mul(a, b)
    """

    def __init__(self, *input_types, func_name=None, **kwargs):
        unknown = set(kwargs) - {"noinline", "shape_func", "python_grad_func", "out_names"}
        if unknown:
            raise ValueError(f"Defun: unsupported arguments {sorted(unknown)}")
        if kwargs.get("python_grad_func") is not None:
            raise NotImplementedError("Defun(python_grad_func=...) is not supported")
        self._types = [dtypes.as_dtype(t) for t in input_types]
        self._name = func_name

    def __call__(self, fn):
        return _DefunFunction(fn, self._types, self._name or fn.__name__)


class _DefunFunction:
    def __init__(self, fn, types, name):
        self._fn = fn
        self._types = types
        self._name = name
        self._defined = {}  # graph -> DefinedFunction

    def _define(self, graph) -> DefinedFunction:
        d = self._defined.get(graph)
        if d is None:
            d = self._defined[graph] = trace(
                self._fn, self._types, [None] * len(self._types), self._name, graph=graph
            )
        return d

    def __call__(self, *args, name=None):
        from flowgraph.framework import apply_op, convert

        graph = default_graph.get()
        defined = self._define(graph)
        if len(args) != len(self._types):
            raise ValueError(f"{self._name} takes {len(self._types)} arguments, got {len(args)}")
        inputs = [convert.convert_to_tensor(a, dtype=t) for a, t in zip(args, self._types)]
        inputs += defined.captured_inputs
        op_type = (
            "StatefulPartitionedCall"
            if defined.definition.signature.is_stateful
            else ("PartitionedCall")
        )
        op = apply_op.apply_op(
            op_type,
            [inputs],
            name=name or self._name,
            Tin=[t.dtype.base_dtype for t in inputs],
            Tout=defined.output_types,
            f=defined.func_attr,
        )
        for t, s in zip(op.outputs, defined.output_shapes):
            t._shape = s
        outs = defined.structured_outputs
        if outs is None:
            return op
        return nest.pack_sequence_as(outs, op.outputs) if nest.is_sequence(outs) else op.outputs[0]
