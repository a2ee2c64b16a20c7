"""Constant folding (whitepaper §5.1; TensorFlow's ConstantFolding): a node whose data inputs are
all constants computes the same value in every step, so it is computed once, here, with the CPU
kernels, and replaced by a Const on its task's host CPU. `Shape`, `Size`, `Rank` and `ShapeN` of
tensors whose static shape is known (static_shapes.py) fold the same way, without their input's
value.

Kept intact: a folded node keeps its name (a fetched or target node is still there, as a Const),
except that each output of a multi-output node becomes its own `ConstantFolding/<name>-<port>`
Const; every control dependency is kept: a folded Const waits for the unfolded nodes that the
subgraph it replaces waited for (and a folded shape for the tensor it measures, which also keeps
it in that tensor's loop frame). Never folded: impure ops (rules.py), ops whose kernel needs a
step or is asynchronous, reads of the file system, values over `max_bytes` (TF's 10 MiB), and
anything whose kernel fails here (it fails at run time instead, with the node's context).
"""

from __future__ import annotations

import numpy as np

from flowgraph.core import device_spec, dtypes, errors
from flowgraph.kernels.base import KernelContext, bind, find_kernel
from flowgraph.runtime.nodes import Node, make_node
from flowgraph.runtime.passes import rules
from flowgraph.runtime.passes.static_shapes import StaticShapes

MAX_CONSTANT_BYTES = 10 * 1024 * 1024  # TensorFlow's kMaxConstantSize
_SHAPE_OPS = frozenset({"Shape", "Size", "Rank", "ShapeN"})
_NEVER = frozenset({"ReadFile", "MatchingFiles", "ImmutableConst"})  # read outside the graph
_OPAQUE = frozenset({dtypes.resource, dtypes.variant})


def fold_constants(
    nodes: list[Node], keep: frozenset, feed_shapes: dict, max_bytes: int = MAX_CONSTANT_BYTES
) -> list[Node]:
    """Returns `nodes` with every constant subgraph replaced by the Consts its consumers read."""
    by_name = {n.name: n for n in nodes}
    values: dict[str, tuple] = {}  # node -> its constant outputs
    deps: dict[str, frozenset] = {}  # constant node -> the unfolded nodes it must wait for
    props = StaticShapes(by_name, values, feed_shapes) if _measures(nodes) else None
    for n in rules.topological_order(nodes):
        outs, measured = _constant_outputs(n, by_name, values, props, max_bytes)
        if outs is not None:
            values[n.name] = outs
            deps[n.name] = _waits_for(n, values, deps, measured)
        elif props is not None:
            props.record(n)
    folded = {name for name in values if by_name[name].op != "Const"}
    if not folded:
        return nodes
    return _rewrite(nodes, values, deps, folded, keep)


def _measures(nodes) -> bool:
    """Shapes are inferred only for graphs that ask for some."""
    return any(n.op in _SHAPE_OPS for n in nodes)


def _constant_outputs(n: Node, by_name, values, props, max_bytes):
    """(outputs, measured): the node's constant outputs or None; `measured` says they came from
    static shapes (so the node still waits for the tensors it measures)."""
    if n.op == "Const" and not n.output_types[0].is_ref_dtype:
        return (n.attrs["value"],), False
    if not _foldable(n, by_name):
        return None, False
    if all(src in values for src, _ in n.inputs):
        inputs = [values[src][port] for src, port in n.inputs]
        return _evaluate(n, inputs, props, max_bytes), False
    if n.op in _SHAPE_OPS and props is not None:
        return _measure(n, props), True
    return None, False


def _foldable(n: Node, by_name) -> bool:
    """Placement failures stay as they are: a node that could not be placed is not folded."""
    if not n.inputs or not n.output_types or n.op in _NEVER:
        return False
    if not device_spec.parse(n.device).is_fully_specified:
        return False
    if any(t.base_dtype in _OPAQUE for t in n.output_types):
        return False
    return rules.is_pure(n, by_name)


def _evaluate(n: Node, inputs: list, props, max_bytes):
    try:
        kdef = find_kernel(n.op, "CPU", n.attrs)
    except errors.NotFoundError:
        return None
    if kdef.step or kdef.async_ or _too_large(n, props, max_bytes):
        return None
    ctx = KernelContext(n.name, n.op, n.attrs, None, list(n.input_types), list(n.output_types))
    try:
        with np.errstate(all="ignore"):
            out = bind(kdef, ctx)(*inputs)
        outs = (out,) if len(n.output_types) == 1 else tuple(out)
        outs = tuple(_as_value(v, t) for v, t in zip(outs, n.output_types, strict=True))
    except Exception:  # noqa: BLE001 - the node fails at run time instead, with its context
        return None
    return None if sum(v.nbytes for v in outs) > max_bytes else outs


def _too_large(n: Node, props, max_bytes) -> bool:
    """Skips computing a value its static shape already shows is over the bound."""
    if props is None:
        return False
    props.record(n)
    total = 0
    for port, t in enumerate(n.output_types):
        count = props.shape(n.name, port).num_elements()
        if count is None or t.base_dtype == dtypes.string:
            return False
        total += count * np.dtype(t.as_numpy_dtype).itemsize
    return total > max_bytes


def _as_value(v, t: dtypes.DType) -> np.ndarray:
    """The kernel's output as the read-only array a Const of type `t` holds; a TypeError if a
    Const could not hold it (a string tensor holds only bytes or str)."""
    v = np.array(v, dtype=t.as_numpy_dtype)
    if t.base_dtype == dtypes.string and not all(isinstance(e, (bytes, str)) for e in v.flat):
        raise TypeError(f"a string tensor of {v.dtype} elements")
    v.flags.writeable = False
    return v


def _measure(n: Node, props: StaticShapes):
    """Shape/Size/Rank/ShapeN outputs from static shapes, or None if not all are known."""
    outs = []
    for (src, port), t in zip(n.inputs, n.output_types):
        shape = props.shape(src, port)
        if n.op == "Rank":
            value = shape.ndims
        elif n.op == "Size":
            value = shape.num_elements()
        else:
            value = shape.as_tuple() if shape.is_fully_defined() else None
        if value is None:
            return None
        value = np.array(value, np.int64)
        if np.any(value > np.iinfo(t.as_numpy_dtype).max):
            return None  # the kernel reports the overflow
        outs.append(_as_value(value, t))
    return tuple(outs)


def _waits_for(n: Node, values, deps, measured: bool) -> frozenset:
    """The unfolded nodes a constant node must still wait for: its own control inputs (through
    constant ones) and those of its constant inputs, or the tensors a folded shape measures."""
    out = set()
    for c in n.control:
        out |= deps[c] if c in values else {c}
    for src, _ in n.inputs:
        if src in values:
            out |= deps[src]
        elif measured:
            out.add(src)
    return frozenset(out)


def _host(device: str) -> str:
    """The CPU of the task that `device` names: folded values live in host memory."""
    spec = device_spec.parse(device)
    if spec.device_type == "CPU":
        return device
    return spec.replace(device_type="CPU", device_index=0).to_string()


def _rewrite(nodes, values, deps, folded, keep) -> list[Node]:
    by_name = {n.name: n for n in nodes}
    taken = set(by_name)
    port_names: dict[tuple, str] = {}  # (multi-output folded node, port) -> its Const
    for n in nodes:
        for key in n.inputs:
            if key[0] in folded and len(by_name[key[0]].output_types) > 1 and key not in port_names:
                name = f"ConstantFolding/{key[0]}-{key[1]}"
                while name in taken:
                    name += "_"
                taken.add(name)
                port_names[key] = name
    out = []
    for n in nodes:
        if n.name in folded:
            out.extend(_consts(n, values[n.name], deps[n.name], port_names))
            if len(n.output_types) == 1 or n.name not in keep:
                continue
        inputs = tuple(
            (port_names[(s, p)], 0) if (s, p) in port_names else (s, p) for s, p in n.inputs
        )
        control = []
        for c in n.control:
            control.extend(sorted(deps[c]) if c in values else [c])
        control = tuple(dict.fromkeys(control))
        if inputs != n.inputs or control != n.control:
            n = n.replace(inputs=inputs, control=control)
        out.append(n)
    return rules.live(out, rules.sinks(nodes) | set(keep))


def _consts(n: Node, outs: tuple, waits: frozenset, port_names: dict) -> list[Node]:
    """The Consts replacing folded node `n`: itself by name, or one per read output."""
    device = _host(n.device)
    control = sorted(waits)
    if len(n.output_types) == 1:
        names = [(n.name, 0)]
    else:
        names = [
            (port_names[(n.name, p)], p) for p in range(len(outs)) if (n.name, p) in port_names
        ]
    return [
        make_node(
            name,
            "Const",
            control=control,
            device=device,
            attrs={"dtype": n.output_types[port].base_dtype, "value": outs[port]},
        )
        for name, port in names
    ]
