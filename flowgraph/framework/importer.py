"""GraphDef import (TF1's `tf.import_graph_def`): rebuilds the Operations of a GraphDef, made by
us or by TensorFlow, inside a client Graph (whitepaper §2: a graph is a value that can be shipped).

Graph export is `Graph.as_graph_def()`; this module is its inverse. Import follows TF 1.15:

* node names get the prefix `name` (default "import", made unique in the current name scope;
  `name=""` keeps names as they are and renames a node that clashes with an existing op, as
  `x_1`, rewriting every reference to it);
* `input_map` replaces references to imported tensors ("x:0", or "x" meaning "x:0") and control
  inputs ("^x") by Tensors/Operations of the target graph; the mapped nodes are still imported;
* attrs are decoded into Python values, missing attrs take their OpDef defaults, and each op's
  shape function runs, so an imported graph is indistinguishable from a built one;
* malformed NodeDefs are refused as TF refuses them (InvalidArgumentError, a ValueError, naming
  the node; nodedef_checks.py): an attr value of the wrong kind (an int where a type is expected),
  a Const whose `dtype` disagrees with its value, a control input before a data input;
* devices are kept (merged under the current `tf.device` scope) and `_class` colocation attrs
  are re-prefixed; a colocated op takes the device of the op it is colocated with;
* the GraphDef's function library (FunctionDefs: dataset functions, Defuns) joins the graph's
  under unchanged names; TensorFlow 2 attrs that only advise (a dataset's `metadata`) are
  declared by their owners with `register_newer_attrs`;
* cycles are allowed only where TensorFlow makes them, a NextIteration feeding a Merge (while
  loops, §4.4): such a Merge is built once one data input exists, with that input standing in
  for its back edges, which are patched in once their NextIteration exists.
"""

from __future__ import annotations

import heapq
import logging

from flowgraph.core import attr_value, dtypes, errors, shapes
from flowgraph.core.op_def import get_op_def
from flowgraph.core.protos import GraphDef
from flowgraph.framework import apply_op, convert, default_graph, nodedef_checks
from flowgraph.framework.operation import Operation, Tensor

__all__ = ["import_graph_def"]

_log = logging.getLogger(__name__)

# Attrs that TensorFlow releases after 1.15 write into GraphDefs. A node carrying one imports as
# if it were absent when it holds the value listed here (the 1.15 behaviour: TF's own rule for attrs
# unknown to the consumer that hold their default, cf. `producer_op_list`), or any value for
# `_HINT` attrs, which only advise kernels and never change results (MatMul's grad_a/grad_b mark
# matmuls built by the gradient code).
_HINT = object()
_NEWER_ATTR_DEFAULTS = {
    "MatMul": {"grad_a": _HINT, "grad_b": _HINT},
    "BatchMatMul": {"grad_x": _HINT, "grad_y": _HINT},
    "BatchMatMulV2": {"grad_x": _HINT, "grad_y": _HINT},
    "BatchMatMulV3": {"grad_x": _HINT, "grad_y": _HINT},
    "MaxPool": {"explicit_paddings": []},
    "MaxPoolGrad": {"explicit_paddings": []},
    # V1 batch norm is float-only; newer TF names its one type.
    "FusedBatchNorm": {"T": dtypes.float32},
    "FusedBatchNormGrad": {"T": dtypes.float32},
    "InitializeTableFromTextFileV2": {"offset": 0},
    # "" is the CPU behaviour of 1.15: an out-of-range index is an error.
    **{
        op: {"bad_indices_policy": ""}
        for op in (
            "GatherNd",
            "ScatterNd",
            "ScatterNdAdd",
            "ScatterNdSub",
            "ScatterNdUpdate",
            "ResourceScatterNdAdd",
            "ResourceScatterNdSub",
            "ResourceScatterNdUpdate",
        )
    },
}
HINT = _HINT


def register_newer_attrs(op_type: str, defaults: dict) -> None:
    """Declares attrs that newer TensorFlow writes for `op_type`: {attr: value that equals the
    1.15 behaviour, or HINT for an attr that never changes results}."""
    _NEWER_ATTR_DEFAULTS.setdefault(op_type, {}).update(defaults)


def import_graph_def(
    graph_def, input_map=None, return_elements=None, name=None, op_dict=None, producer_op_list=None
):
    """Imports the nodes of `graph_def` into the default graph.

    Args:
      graph_def: a `GraphDef` (or its serialized bytes).
      input_map: dict from names in `graph_def` ("x:0", "x", "^x") to Tensors (or, for "^x",
        Operations) of the default graph that replace them.
      return_elements: names in `graph_def` to return: "x:0" gives a Tensor, "x" an Operation.
      name: prefix of the imported names; default "import"; "" keeps the names.
      op_dict: deprecated and unused, as in TF 1.15 (a warning is logged when given).
      producer_op_list: an `OpList` of the producer's OpDefs: attrs our OpDefs do not know are
        dropped when they hold the producer's default value.

    Returns:
      The list of elements named by `return_elements`, else None.

    Example:
      c, = tf.import_graph_def(g.as_graph_def(), input_map={"x:0": x}, return_elements=["c:0"])
    """
    graph_def = _as_graph_def(graph_def)
    if op_dict is not None:
        _log.warning("import_graph_def: op_dict is deprecated and unused (as in TensorFlow 1.15)")
    input_map = _check_input_map(input_map, name)
    if return_elements is not None:
        if isinstance(return_elements, (str, bytes)) or not all(
            isinstance(x, (str, bytes)) for x in return_elements
        ):
            raise TypeError("return_elements must be a list of strings.")
        return_elements = [x.decode() if isinstance(x, bytes) else x for x in return_elements]
    nodedef_checks.check_versions(graph_def)
    graph = default_graph.get()
    graph._check_not_finalized()
    for fdef in graph_def.library.function:  # functions keep their names (as in TF)
        graph._add_function(fdef)
    with graph.name_scope(name if name is not None else "import") as scope:
        if any(not isinstance(v, (Tensor, Operation)) for v in input_map.values()):
            with graph.name_scope("_inputs"):
                input_map = {k: _to_element(k, v) for k, v in input_map.items()}
        importer = _Importer(
            graph, graph_def, scope[:-1] if scope else "", input_map, producer_op_list
        )
        importer.run()
    if return_elements is None:
        return None
    return [importer.element(x) for x in return_elements]


def _as_graph_def(graph_def) -> GraphDef:
    if isinstance(graph_def, (bytes, bytearray)):
        gd = GraphDef()
        gd.ParseFromString(bytes(graph_def))
        return gd
    if not isinstance(graph_def, GraphDef):
        raise TypeError(f"graph_def must be a GraphDef proto, got {type(graph_def).__name__}.")
    return graph_def


def _check_input_map(input_map, name) -> dict:
    if input_map is None:
        return {}
    if not isinstance(input_map, dict):
        raise TypeError("input_map must be a dictionary mapping strings to Tensor objects.")
    out = {}
    for key, value in input_map.items():
        if isinstance(key, bytes):
            key = key.decode()
        if not isinstance(key, str):
            raise TypeError(f"input_map keys must be strings, got {key!r}.")
        if not isinstance(value, (Tensor, Operation)) and name == "":
            raise ValueError(
                "tf.import_graph_def() requires a non-empty `name` if `input_map` contains "
                "non-Tensor values. Try calling tf.convert_to_tensor() on `input_map` values "
                "before calling tf.import_graph_def()."
            )
        out[key if key.startswith("^") or ":" in key else key + ":0"] = value
    return out


def _to_element(key, value):
    if isinstance(value, (Tensor, Operation)):
        return value
    return convert.convert_to_tensor(value)


def _parse_input(text: str) -> tuple[str, int]:
    """'x' -> ('x', 0); 'x:2' -> ('x', 2); '^x' -> ('x', -1) (a control input)."""
    if text.startswith("^"):
        return text[1:], -1
    node, sep, port = text.rpartition(":")
    if sep and port.isdigit():
        return node, int(port)
    return text, 0


class _Importer:
    """One import: the node order, the new names, and the Operations built so far."""

    def __init__(self, graph, graph_def, prefix, input_map, producer_op_list):
        self.graph = graph
        self.nodes = list(graph_def.node)
        self.prefix = prefix
        self.input_map = input_map
        self.used_keys: set[str] = set()
        self.producer_defaults = _producer_defaults(producer_op_list)
        self.index = {}
        for i, nd in enumerate(self.nodes):
            if nd.name in self.index:
                raise ValueError(f"Node '{nd.name}' is not unique in the GraphDef.")
            self.index[nd.name] = i
            nodedef_checks.check_input_order(nd)
        self.ops: dict[str, Operation] = {}  # GraphDef name -> new Operation
        self.new_names: dict[str, str] = {}  # GraphDef name -> name in the graph
        self.back_edges: list[tuple[Operation, int, str]] = []  # (Merge, input index, input)

    def run(self):
        """Builds every node; on any error the graph is left as it was (TF imports atomically)."""
        version = self.graph.version
        try:
            new_ops = [self._build(self.nodes[i]) for i in self._order()]
            for op, index, text in self.back_edges:
                tensor = self._tensor(text, op.name, index)
                if tensor.dtype.base_dtype != op.inputs[index].dtype.base_dtype:
                    raise ValueError(
                        f"Input {index} of node {op.name} was passed "
                        f"{tensor.dtype.base_dtype.name} "
                        f"from {tensor.name} incompatible with expected "
                        f"{op.inputs[index].dtype.base_dtype.name}."
                    )
                op._update_input(index, tensor)
            unused = sorted(set(self.input_map) - self.used_keys)
            if unused:
                raise ValueError(
                    "Attempted to map inputs that were not found in graph_def: "
                    f"[{', '.join(unused)}]"
                )
            for op in new_ops:
                if "_class" in op._attrs:
                    op._set_attr("_class", [self._coloc(s) for s in op._attrs["_class"]])
            self._place(new_ops)
        except BaseException:
            self.graph._remove_ops_since(version)
            raise

    def _order(self) -> list[int]:
        """Node indices with every node after its inputs. A Merge does not wait for inputs that
        come from a NextIteration: those are the back edges of a while loop (§4.4)."""
        pending, consumers = [], [[] for _ in self.nodes]
        for i, nd in enumerate(self.nodes):
            deps = set()
            for text in nd.input:
                src, port = _parse_input(text)
                if (text if port < 0 else f"{src}:{port}") in self.input_map:
                    continue
                j = self.index.get(src)
                if j is None:
                    raise ValueError(f"Node '{nd.name}': Unknown input node '{text}'")
                if port >= 0 and _is_merge(nd) and _is_next_iteration(self.nodes[j]):
                    continue
                deps.add(j)
            for j in deps:
                consumers[j].append(i)
            pending.append(len(deps))
        return _topological(self.nodes, pending, consumers)

    # -- building one op ----------------------------------------------------------------------
    def _build(self, nd) -> Operation:
        try:
            op_def = get_op_def(nd.op)
        except errors.NotFoundError as e:
            raise errors.NotFoundError(
                None, None, f"{e.message} (node '{nd.name}' of the GraphDef)"
            ) from None
        attrs = self._attrs(nd, op_def)
        inputs, standins = [], []
        for i, text in enumerate(t for t in nd.input if not t.startswith("^")):
            src, port = _parse_input(text)
            if src not in self.ops and f"{src}:{port}" not in self.input_map:
                standins.append((i, text))  # a back edge into a Merge; patched in run()
                inputs.append(None)
            else:
                inputs.append(self._tensor(text, nd.name, i))
        controls = [self._control(t) for t in nd.input if t.startswith("^")]
        if standins:
            first = next((t for t in inputs if t is not None), None)
            if first is None:
                raise ValueError(f"Merge node '{nd.name}' has no input from outside its loop.")
            inputs = [first if t is None else t for t in inputs]
        input_types = self._input_types(nd, op_def, attrs, inputs)
        new_name = self._new_name(nd.name)
        try:
            op = apply_op.create(
                self.graph, nd.op, inputs, attrs, new_name + "/", input_types=input_types
            )
        except (TypeError, errors.InvalidArgumentError) as e:
            msg = getattr(e, "message", str(e))
            raise ValueError(f"Node '{nd.name}' ({nd.op}) of the GraphDef: {msg}") from None
        self.graph._names_in_use.setdefault(new_name.lower(), 1)
        op._add_control_inputs(controls)
        if nd.device:
            op._set_device(nd.device)
        if standins:
            self.back_edges.extend((op, i, text) for i, text in standins)
            _infer_with_unknown(op, [i for i, _ in standins])
        self.ops[nd.name] = op
        return op

    def _attrs(self, nd, op_def) -> dict:
        """Decoded attrs; an attr our OpDef lacks is an error unless it holds a known default."""
        attrs = {}
        for key, av in nd.attr.items():
            if key in op_def.attrs:
                nodedef_checks.check_attr_kind(nd, key, av, op_def.attrs[key].type)
            value = attr_value.from_attr_value(av)
            if key not in op_def.attrs and not key.startswith("_"):
                if self._known_default(nd.op, key, value):
                    continue
                raise ValueError(
                    f"NodeDef '{nd.name}' mentions attr '{key}' not in Op<name={nd.op}>; its "
                    "attrs: "
                    f"{', '.join(sorted(op_def.attrs)) or 'none'}"
                )
            attrs[key] = value
        for key, attr in op_def.attrs.items():
            if key not in attrs and not attr.has_default:
                raise ValueError(
                    f"NodeDef '{nd.name}' ({nd.op}) is missing attr '{key}', which has no default."
                )
        if nd.op == "Const" and "value" in nd.attr and "dtype" in nd.attr:
            nodedef_checks.check_const_dtype(nd)
        return attrs

    def _known_default(self, op_type, key, value) -> bool:
        for table in (self.producer_defaults, _NEWER_ATTR_DEFAULTS):
            defaults = table.get(op_type, {})
            if key in defaults and (defaults[key] is _HINT or _same(defaults[key], value)):
                return True
        return False

    def _input_types(self, nd, op_def, attrs, inputs) -> list:
        """The OpDef's input types under these attrs, checked against the tensors fed in."""
        full = {k: attrs.get(k, a.default) for k, a in op_def.attrs.items()}
        try:
            want = op_def.input_types(full)
        except (TypeError, ValueError, KeyError) as e:
            raise ValueError(
                f"Node '{nd.name}' ({nd.op}) of the GraphDef has bad attrs: {e}"
            ) from None
        if len(want) != len(inputs):
            raise ValueError(
                f"NodeDef '{nd.name}' ({nd.op}) has {len(inputs)} data inputs, but its attrs "
                f"call for {len(want)}."
            )
        for i, (t, w) in enumerate(zip(inputs, want)):
            if t.dtype.base_dtype != w.base_dtype or (w.is_ref_dtype and not t.dtype.is_ref_dtype):
                raise ValueError(
                    f"Input {i} of node {nd.name} was passed {t.dtype.name} from {t.name} "
                    f"incompatible with expected {w.name}."
                )
        return want

    # -- names and references -----------------------------------------------------------------
    def _new_name(self, name: str) -> str:
        """`prefix/name`, or `name_1`, `name_2`, ... when an op of that name already exists."""
        full = f"{self.prefix}/{name}" if self.prefix else name
        base, i = full, 1
        while self.graph._get_operation_by_name_unsafe(full) is not None:
            full = f"{base}_{i}"
            i += 1
        self.new_names[name] = full
        return full

    def _tensor(self, text: str, node_name: str, i: int) -> Tensor:
        src, port = _parse_input(text)
        key = f"{src}:{port}"
        if key in self.input_map:
            self.used_keys.add(key)
            t = self.input_map[key]
            if not isinstance(t, Tensor):
                raise ValueError(f"input_map['{key}'] must be a Tensor, got {t!r}")
            return t
        op = self.ops[src]
        if port >= len(op.outputs):
            raise ValueError(
                f"Node '{node_name}': input {i} '{text}' names output {port} of '{src}', which has "
                f"{len(op.outputs)} outputs."
            )
        return op.outputs[port]

    def _control(self, text: str) -> Operation:
        if text in self.input_map:
            self.used_keys.add(text)
            el = self.input_map[text]
            return el.op if isinstance(el, Tensor) else el
        return self.ops[text[1:]]

    def _coloc(self, entry):
        if isinstance(entry, str) and entry.startswith("loc:@"):
            target = entry[5:]
            default = f"{self.prefix}/{target}" if self.prefix else target
            return "loc:@" + self.new_names.get(target, default)
        return entry

    def element(self, name: str):
        """A return element: 'x:0' -> Tensor, 'x' -> Operation (names as in the GraphDef)."""
        src, port = _parse_input(name)
        op = self.ops.get(src)
        if op is None or name.startswith("^"):
            raise ValueError(f"Requested return_element '{name}' not found in graph_def.")
        if ":" not in name:
            return op
        if port >= len(op.outputs):
            raise ValueError(
                f"Requested return_element '{name}' not found in graph_def: '{src}' has "
                f"{len(op.outputs)} outputs."
            )
        return op.outputs[port]

    # -- devices ------------------------------------------------------------------------------
    def _place(self, new_ops):
        """TF's rule: an op's own device is the innermost of the current device scopes; an op
        with `_class` colocation takes the device of the first op of its group that has one."""
        graph = self.graph
        if graph._device_stack:
            for op in new_ops:
                if "_class" not in op._attrs:
                    with graph.device(op._device):
                        op._set_device(graph._apply_device(op))
        for op in new_ops:
            for entry in op._attrs.get("_class", []):
                if not (isinstance(entry, str) and entry.startswith("loc:@")):
                    continue
                target = graph._get_operation_by_name_unsafe(entry[5:])
                if target is not None and target is not op and target._device:
                    op._set_device(target._device)
                    break


def _topological(nodes, pending, consumers) -> list[int]:
    """Kahn's algorithm; among ready nodes the earliest in the GraphDef goes first, so a graph
    that is already in order imports in the same order (and exports the same GraphDef)."""
    ready = [i for i, n in enumerate(pending) if n == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for c in consumers[i]:
            pending[c] -= 1
            if pending[c] == 0:
                heapq.heappush(ready, c)
    if len(order) < len(nodes):
        stuck = [nodes[i].name for i, n in enumerate(pending) if n > 0]
        raise ValueError(
            f"GraphDef has a cycle that is not a while loop (NextIteration -> Merge): "
            f"{len(stuck)} nodes cannot be ordered, e.g. {stuck[:5]}"
        )
    return order


def _is_merge(nd) -> bool:
    return nd.op in ("Merge", "RefMerge")


def _is_next_iteration(nd) -> bool:
    return nd.op in ("NextIteration", "RefNextIteration")


def _infer_with_unknown(op, unknown: list[int]):
    """Re-runs the shape function with the back-edge inputs' shapes unknown (TF's ShapeRefiner
    sees no shape for an edge that does not exist yet)."""
    op_def = op.op_def
    if op_def.shape_fn is None:
        return
    ctx = apply_op.InferenceContext(op.name, list(op.inputs), op._attrs, len(op.outputs))
    ctx.input_shapes = [
        shapes.TensorShape(None) if i in unknown else s for i, s in enumerate(ctx.input_shapes)
    ]
    result = op_def.shape_fn(ctx)
    if isinstance(result, shapes.TensorShape) or result is None:
        result = [result]
    for t, s in zip(op.outputs, result):
        t._shape = shapes.TensorShape(None) if s is None else shapes.as_shape(s)


def _producer_defaults(op_list) -> dict:
    """{op type: {attr: default}} from the producer's OpList."""
    if op_list is None:
        return {}
    return {
        od.name: {
            a.name: attr_value.from_attr_value(a.default_value)
            for a in od.attr
            if a.HasField("default_value")
        }
        for od in op_list.op
    }


def _same(a, b) -> bool:
    try:
        return bool(a == b)
    except ValueError:  # arrays compare element-wise
        return False
