"""The kernel of `_FusedElementwise` (whitepaper §10): one compiled loop for a cluster of
element-wise nodes (the op: opdefs/fusion.py; the pass that forms clusters:
runtime/passes/fusion.py; the loop's source: fused_codegen.py).

A body is decoded once into a `Program`, shared by every node with the same body. Per distinct
tuple of input shapes the program infers every member's shape by the member's own rule and picks
a loop: flat when every full-size input has the loop's shape, strided otherwise (one index per
dimension, size-1 dimensions read at stride 0). Shapes a member's rule rejects, and outputs the
loop cannot write (smaller than the loop but larger than one element), run the members' own
kernels one by one instead: the unfused results and the unfused errors (for shapes that do not
broadcast), named after the member that raised them.
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


class _Plan:
    """How one tuple of input shapes runs: the compiled loop and what to hand it."""

    __slots__ = ("arg_scalar", "dims", "extent", "flat", "fn", "full", "inner", "outputs")

    def __init__(self, fn, flat: bool, full: tuple, arg_scalar: list, outputs: list):
        self.fn = fn
        self.flat = flat  # one flat index over every full-size value
        self.full = full  # the loop's shape
        self.dims = () if flat else tuple(full[1:])
        size = math.prod(full)
        self.extent = size if flat else (full[0] if full else 1)  # what i0 runs over
        self.inner = max(1, size // max(self.extent, 1))  # elements per i0
        self.arg_scalar = arg_scalar
        self.outputs = outputs  # (shape, dtype, scalar) per output


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
        """Infers each value's shape; the loop that computes them, or _ONE_BY_ONE."""
        value_shapes = list(shapes)
        scalar = [math.prod(s) == 1 for s in shapes]
        for m in self.members:
            ins = [value_shapes[a] for a in m.args]
            if codegen.ELEMENTWISE[m.op].same_shape and any(s != ins[0] for s in ins):
                return _ONE_BY_ONE
            try:
                value_shapes.append(np.broadcast_shapes(*ins))
            except ValueError:
                return _ONE_BY_ONE
            scalar.append(all(scalar[a] for a in m.args))
        # flat: the full-size inputs share one shape, so every full-size value has its elements
        # in the same order (broadcasting against one-element values adds only 1-dimensions)
        full_args = [s for s, one in zip(shapes, scalar) if not one]
        flat = all(s == full_args[0] for s in full_args)
        if flat:
            full = full_args[0] if full_args else ()
        else:
            try:  # members broadcast their own inputs; the loop needs all inputs at once
                full = np.broadcast_shapes(*shapes)
            except ValueError:
                return _ONE_BY_ONE
            if any(not scalar[v] and value_shapes[v] != full for v in self.outputs):
                return _ONE_BY_ONE
        ndim = 0 if not full_args else 1 if flat else len(full)
        source = codegen.generate(self.num_args, self.members, self.outputs, scalar, ndim)
        outputs = [(value_shapes[v], self._dtype(v), scalar[v]) for v in self.outputs]
        return _Plan(codegen.compile_source(source), flat, full, scalar[: self.num_args], outputs)

    def _dtype(self, value: int) -> np.dtype:
        return self.dtypes[value - self.num_args]

    def _loop(self, ctx, plan: _Plan, inputs):
        args = []
        for x, one in zip(inputs, plan.arg_scalar):
            a = np.asarray(x)
            args.append(a.reshape(-1) if one or plan.flat else np.broadcast_to(a, plan.full))
        outs = [np.empty(shape, dtype) for shape, dtype, _ in plan.outputs]
        views = [
            o.reshape(-1) if one or plan.flat else o for o, (_, _, one) in zip(outs, plan.outputs)
        ]
        fn, dims = plan.fn, plan.dims

        def block(lo: int, hi: int) -> None:
            fn(lo, hi, *dims, *args, *views)

        parallel_for(ctx, plan.extent, ELEMENT_COST * plan.inner, block)
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
