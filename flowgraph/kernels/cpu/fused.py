"""The kernel of `_FusedElementwise` (whitepaper §10): one compiled loop for a cluster of
element-wise nodes (the op: opdefs/fusion.py; the pass that forms clusters:
runtime/passes/fusion.py; the loop's source: fused_codegen.py).

A body is decoded once into a `Program`, shared by every node with the same body. Per distinct
tuple of input shapes the program infers every member's shape by the member's own rule and builds
one loop per output shape over the members those outputs need: flat when every full-size input
has the loop's shape, strided otherwise (one index per dimension, size-1 dimensions read at
stride 0). Shapes a member's rule rejects run the members' own kernels one by one instead: the
unfused results and the unfused errors (for shapes that do not broadcast), named after the
member that raised them.
"""

from __future__ import annotations

import math
import threading

import numpy as np

from flowgraph.core import attr_value, errors
from flowgraph.core.op_def import get_op_def
from flowgraph.core.protos import GraphDef
from flowgraph.kernels.base import KernelContext, bind, find_kernel, register_kernel
from flowgraph.kernels.cpu import fused_codegen as codegen
from flowgraph.kernels.sharding import ELEMENT_COST, parallel_for

_MAX_SHAPE_PLANS = 64  # distinct input-shape tuples remembered per program
_ONE_BY_ONE = "one by one"  # the plan of shapes the compiled loop does not cover
_programs: dict[bytes, Program] = {}
_lock = threading.Lock()


class _Loop:
    """One compiled loop of a plan: the outputs of one shape, and what to hand it."""

    __slots__ = ("args", "dims", "extent", "flat", "fn", "full", "inner", "outputs")

    def __init__(self, fn, flat: bool, full: tuple, args: list, outputs: list):
        self.fn = fn
        self.flat = flat  # one flat index over every full-size value
        self.full = full  # the loop's shape
        self.dims = () if flat else tuple(full[1:])
        size = math.prod(full)
        self.extent = size if flat else (full[0] if full else 1)  # what i0 runs over
        self.inner = max(1, size // max(self.extent, 1))  # elements per i0
        self.args = args  # (input index, one element) per parameter
        self.outputs = outputs  # indices into the plan's outputs


class _Plan:
    """How one tuple of input shapes runs: its loops, and the (shape, dtype, one element) of
    each output."""

    __slots__ = ("loops", "outputs")

    def __init__(self, loops: list, outputs: list):
        self.loops = loops
        self.outputs = outputs


class _Member:
    """A member's node as its kernel needs it on the one-by-one path."""

    def __init__(self, nd):
        op_def = get_op_def(nd.op)
        attrs = {k: attr_value.from_attr_value(v) for k, v in nd.attr.items()}
        for key, a in op_def.attrs.items():
            if key not in attrs and a.has_default:
                attrs[key] = a.default
        self.name, self.op, self.attrs = nd.name, nd.op, attrs
        self.input_types = tuple(op_def.input_types(attrs))
        self.output_types = tuple(op_def.output_types(attrs))

    def bind(self, device):
        ctx = KernelContext(
            self.name, self.op, self.attrs, device, self.input_types, self.output_types
        )
        return bind(find_kernel(self.op, "CPU", self.attrs), ctx)


def _shape(rule: str, ins: list) -> tuple | None:
    """A member's output shape by its op's rule; None where the op rejects the shapes."""
    if rule == "same":
        return ins[0] if all(s == ins[0] for s in ins) else None
    if rule == "bias":
        value, bias = ins
        return value if len(value) >= 2 and bias == value[-1:] else None
    try:
        return np.broadcast_shapes(*ins)
    except ValueError:
        return None


class Program:
    """A decoded body: members in order (`codegen.Member`s over value ids), the value ids of the
    outputs, and per input-shape tuple its `_Plan`."""

    def __init__(self, body: bytes):
        args, rets, nodes = {}, {}, []
        for nd in GraphDef.FromString(body).node:
            if nd.op == "_Arg":
                args[nd.attr["index"].i] = nd.name
            elif nd.op == "_Retval":
                rets[nd.attr["index"].i] = nd.input[0]
            else:
                nodes.append(nd)
        self.num_args = len(args)
        value_of = {args[i]: i for i in range(self.num_args)}
        self.nodes = [_Member(nd) for nd in nodes]
        self.members = []
        for j, (nd, node) in enumerate(zip(nodes, self.nodes)):
            ids = tuple(value_of[name.split(":")[0]] for name in nd.input)
            dtype = np.dtype(node.output_types[0].as_numpy_dtype)
            self.members.append(codegen.Member(nd.op, ids, dtype))
            value_of[nd.name] = self.num_args + j
        self.outputs = [value_of[rets[k].split(":")[0]] for k in range(len(rets))]
        self.dtypes = [m.dtype for m in self.members]
        self._plans: dict = {}

    def run(self, ctx, inputs):
        shapes = tuple(np.shape(x) for x in inputs)
        plan = self._plans.get(shapes)
        if plan is None:
            if len(self._plans) >= _MAX_SHAPE_PLANS:
                self._plans.clear()
            plan = self._plans[shapes] = self._plan(shapes)
        if plan is _ONE_BY_ONE:
            return self._one_by_one(ctx, inputs)
        return self._loop(ctx, plan, inputs)

    def _plan(self, shapes):
        """Infers each value's shape; the loops that compute the outputs, or _ONE_BY_ONE."""
        value_shapes = list(shapes)
        scalar = [math.prod(s) == 1 for s in shapes]
        for m in self.members:
            shape = _shape(codegen.ELEMENTWISE[m.op].shape_rule, [value_shapes[a] for a in m.args])
            if shape is None:
                return _ONE_BY_ONE
            value_shapes.append(shape)
            scalar.append(all(scalar[a] for a in m.args))
        groups: dict = {}  # loop shape (None: one element) -> output indices
        for k, v in enumerate(self.outputs):
            groups.setdefault(None if scalar[v] else value_shapes[v], []).append(k)
        loops = [self._loop_of(ks, shape, shapes, scalar) for shape, ks in groups.items()]
        outputs = [(value_shapes[v], self._dtype(v), scalar[v]) for v in self.outputs]
        return _Plan(loops, outputs)

    def _loop_of(self, ks: list, shape, shapes, scalar) -> _Loop:
        """The loop computing outputs `ks` (all of `shape`) from the members they need."""
        outs = [self.outputs[k] for k in ks]
        needed, stack = set(), list(outs)
        while stack:
            v = stack.pop()
            if v >= self.num_args and v not in needed:
                needed.add(v)
                stack.extend(self.members[v - self.num_args].args)
        used = sorted(v - self.num_args for v in needed)
        args = sorted({a for j in used for a in self.members[j].args if a < self.num_args})
        full_args = [shapes[a] for a in args if not scalar[a]]
        # flat: the full-size inputs share one shape, so every full-size value has its
        # elements in the same order (broadcasting against one-element values adds 1-dims)
        flat = all(s == full_args[0] for s in full_args)
        full = (full_args[0] if full_args else ()) if flat else shape
        ndim = 0 if not full_args else 1 if flat else len(full)
        source = codegen.generate(self.num_args, self.members, args, used, outs, scalar, ndim)
        fn = codegen.compile_source(source)
        return _Loop(fn, flat, full, [(a, scalar[a]) for a in args], ks)

    def _dtype(self, value: int) -> np.dtype:
        return self.dtypes[value - self.num_args]

    def _loop(self, ctx, plan: _Plan, inputs):
        outs = [np.empty(shape, dtype) for shape, dtype, _ in plan.outputs]
        for loop in plan.loops:
            args = []
            for a, one in loop.args:
                x = np.asarray(inputs[a])
                args.append(x.reshape(-1) if one or loop.flat else np.broadcast_to(x, loop.full))
            views = [
                outs[k].reshape(-1) if plan.outputs[k][2] or loop.flat else outs[k]
                for k in loop.outputs
            ]
            fn, dims = loop.fn, loop.dims

            def block(lo: int, hi: int, fn=fn, dims=dims, args=args, views=views) -> None:
                fn(lo, hi, *dims, *args, *views)

            parallel_for(ctx, loop.extent, ELEMENT_COST * loop.inner, block)
        results = [o if o.ndim else o[()] for o in outs]
        return results[0] if len(results) == 1 else tuple(results)

    def _one_by_one(self, ctx, inputs):
        values = list(inputs)
        for node, m in zip(self.nodes, self.members):
            compute = node.bind(ctx.device)
            try:
                values.append(compute(*[values[a] for a in m.args]))
            except errors.OpError as e:
                raise type(e)(
                    None, None, f"{e.message} (in fused node '{node.name}', op {node.op})"
                ) from e
        results = [values[v] for v in self.outputs]
        return results[0] if len(results) == 1 else tuple(results)


def program(body) -> Program:
    """The decoded program of `body` (bytes, or str where an attr decoder made it one)."""
    if isinstance(body, str):
        body = body.encode("utf-8")
    p = _programs.get(body)
    if p is None:
        with _lock:
            p = _programs.get(body)
            if p is None:
                p = _programs[body] = Program(body)
    return p


@register_kernel("_FusedElementwise", intra_op=True)
def fused_elementwise(ctx, *inputs):
    prog = ctx.state
    if prog is None:
        prog = ctx.state = program(ctx.attrs["body"])
    return prog.run(ctx, inputs)
