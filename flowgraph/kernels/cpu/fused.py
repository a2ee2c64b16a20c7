"""The kernel of `_FusedElementwise` (whitepaper §10): one compiled loop for a cluster of
element-wise nodes and the reductions and variable updates that end it (the op:
opdefs/fusion.py; the pass that forms clusters: runtime/passes/fusion.py; the loop's source:
fused_codegen.py).

A body is decoded once into a `Program`, shared by every node with the same body. Per distinct
tuple of input shapes the program infers every member's shape by the member's own rule and builds
one loop per output shape over the members those outputs need: flat when every full-size input
has the loop's shape, strided otherwise (one index per dimension, size-1 dimensions read at
stride 0). Shapes a member's rule rejects run the members' own kernels one by one instead: the
unfused results and the unfused errors (for shapes that do not broadcast), named after the
member that raised them. So do shapes large enough that the members' NumPy kernels are faster
(`Program._pays`: numba's tanh is ~16 ns an element, NumPy's ~0.4 ns).

A loop runs in one piece on the thread that runs the node (numba releases the GIL). Measured on
the 2-core machine, sharding these memory-bound loops over the device pool was no faster with
the machine to itself (F1 0.51 vs 0.42 ms) and 3-5x slower with a core busy (bench F1 3.4 vs
1.15 ms, F2 4.3 vs 0.8 ms): a shard whose thread is preempted holds up the whole step.

A cluster may end in reductions (Sum, Mean, Prod, Max, Min of a member over constant axes).
The loop over the reduced value accumulates them instead of storing it (`_Reduction`): no
temporary of the value's size, one pass. Floats accumulate in float64 and integers in int64, so
the result is within rounding of the unfused kernel's (NumPy's pairwise sum in the value's own
type) and integer wraparound is the same. An empty reduction, or axes the kernel rejects, runs
the members' kernels.

A cluster may also end in variable updates (Assign, AssignAdd, AssignSub of a member's value; the
pass folds them). Their values are written straight into the variables' buffers, which saves
the output's allocation, the Assign's copy and its dispatch: the F1 Adam update writes each
buffer once. In place only where that leaves exactly what the unfused kernel would (see
`Program._places`), with the variables' locks held while the loop writes, as TF's
use_locking Assign holds its mutex while it copies; a concurrent reader of the buffer sees what
it may see in TensorFlow (a ref read takes no lock). Anything else, an uninitialized variable,
a change of shape, an error to raise, goes through the unfused kernel after the loop.
"""

from __future__ import annotations

import functools
import math
import threading

import numpy as np

from flowgraph.core import attr_value, errors
from flowgraph.core.op_def import get_op_def
from flowgraph.core.protos import GraphDef
from flowgraph.kernels.base import KernelContext, bind, find_kernel, register_kernel
from flowgraph.kernels.cpu import fused_codegen as codegen
from flowgraph.kernels.cpu.math import mean_of_sum, reduction_axes
from flowgraph.kernels.variable_state import locked

_MAX_SHAPE_PLANS = 64  # distinct input-shape tuples remembered per program
_ONE_BY_ONE = "one by one"  # the plan of shapes the compiled loop does not cover
# Nanoseconds per element (float32, 1M elements, this 2-core machine): a member in a compiled
# loop (arithmetic vectorizes; transcendentals are one libm call each), a member's own NumPy
# kernel (a pass over memory and a temporary), and the executor's dispatch of one node.
_LOOP_NS = {None: 0.1, "Exp": 2.3, "Expm1": 3.0, "Sigmoid": 2.5, "Log": 10.0, "Log1p": 10.0}
_LOOP_NS.update({"Tanh": 16.0, "Sin": 7.0, "Cos": 7.0, "Pow": 20.0})
_KERNEL_NS = 1.0
_DISPATCH_NS = 2000.0
_programs: dict[bytes, Program] = {}
_lock = threading.Lock()


class _Loop:
    """One compiled loop of a plan: the outputs of one shape, and what to hand it. Its source
    has variants by where each output goes (`codegen.Sink`), compiled on first use."""

    __slots__ = ("args", "dims", "extent", "flat", "full", "make", "outputs", "plain", "reads")
    __slots__ += ("variants",)

    def __init__(self, make, flat: bool, full: tuple, args: list, outputs: list, sinks: tuple):
        self.make = make  # sinks -> source
        self.variants: dict = {}
        self.flat = flat  # one flat index over every full-size value
        self.full = full  # the loop's shape
        self.dims = () if flat else tuple(full[1:])
        self.extent = math.prod(full) if flat else (full[0] if full else 1)  # what i0 runs over
        self.args = args  # (input index, one element) per parameter
        self.reads = frozenset(a for a, _ in args)
        self.outputs = outputs  # indices into the plan's outputs
        self.plain = sinks  # each output's Sink, but for an in-place assign's

    def variant(self, sinks: tuple):
        fn = self.variants.get(sinks)
        if fn is None:
            fn = self.variants[sinks] = codegen.compile_source(self.make(sinks=sinks))
        return fn


class _Plan:
    """How one tuple of input shapes runs: its loops, the (shape, dtype, one element) of each
    output, the loop that computes each output, and the outputs that are reductions."""

    __slots__ = ("loop_of", "loops", "outputs", "reductions")

    def __init__(self, loops: list, outputs: list, reductions: dict):
        self.loops = loops
        self.outputs = outputs
        self.loop_of = {k: loop for loop in loops for k in loop.outputs}
        self.reductions = reductions


class _Reduction:
    """A reduction a loop ends in: its accumulator (in float64 for floats, int64 for integer
    sums and products, which wrap to the narrower type as the unfused kernel's do), and how
    the result is made from it."""

    __slots__ = ("acc_shape", "count", "dtype", "identity", "op", "shape", "sink")

    def __init__(self, op: str, dtype: np.dtype, xshape: tuple, axes: tuple, keep: bool):
        self.op, self.dtype = op, dtype
        dims = range(len(xshape))
        if keep:
            self.shape = tuple(1 if d in axes else xshape[d] for d in dims)
        else:
            self.shape = tuple(xshape[d] for d in dims if d not in axes)
        self.count = math.prod(xshape[d] for d in axes)
        kept = () if math.prod(xshape) == 1 else tuple(d for d in dims if d not in axes)
        self.acc_shape = tuple(xshape[d] for d in kept) or (1,)
        wide = np.dtype(np.float64 if dtype.kind == "f" else np.int64)
        acc = dtype if op in ("Max", "Min") else wide
        self.identity = {
            "Sum": -0.0,  # -0.0 + x is x for every x, -0.0 too
            "Mean": -0.0,
            "Prod": 1,
            "Max": -np.inf if dtype.kind == "f" else np.iinfo(dtype).min,
            "Min": np.inf if dtype.kind == "f" else np.iinfo(dtype).max,
        }[op]
        self.sink = codegen.Sink(reduce=op, kept=kept, acc=acc)

    @staticmethod
    def of(member, keep: bool, xshape: tuple, inputs):
        """The reduction of `member` over a value of `xshape`, or None where its own kernel
        must run (axes it rejects, with its error; an empty reduction)."""
        if 0 in xshape:
            return None
        try:
            axes = reduction_axes(len(xshape), inputs[member.args[1]])
        except errors.OpError:
            return None
        return _Reduction(member.op, member.dtype, xshape, axes, keep)

    def start(self) -> np.ndarray:
        return np.full(self.acc_shape, self.identity, self.sink.acc)

    def finish(self, acc: np.ndarray) -> np.ndarray:
        if self.op == "Mean":
            return mean_of_sum(acc, self.count, self.dtype).reshape(self.shape)
        return acc.astype(self.dtype).reshape(self.shape)


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

    def run(self, device, args):
        """The member's own kernel on `args`; its errors name it inside the fused node."""
        try:
            return self.bind(device)(*args)
        except errors.OpError as e:
            raise type(e)(
                None, None, f"{e.message} (in fused node '{self.name}', op {self.op})"
            ) from e


class _Assign:
    """A folded Assign/AssignAdd/AssignSub: its variable (the ref input `ref`), the value id
    it stores, how it combines with the old value in place, and its node (the unfused kernel,
    for what the in-place write does not cover)."""

    __slots__ = ("combine", "node", "ref", "value")

    def __init__(self, node: _Member, ref: int, value: int):
        self.node, self.ref, self.value = node, ref, value
        self.combine = codegen.ASSIGN_OPS[node.op]


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
    outputs, the folded assigns, and per input-shape tuple its `_Plan`. The plan computes the
    *sinks*: the outputs, then the value each assign stores."""

    def __init__(self, body: bytes):
        args, rets, nodes, assigns = {}, {}, [], []
        refs = set()
        for nd in GraphDef.FromString(body).node:
            if nd.op == "_Arg":
                args[nd.attr["index"].i] = nd.name
                if attr_value.from_attr_value(nd.attr["T"]).is_ref_dtype:
                    refs.add(nd.attr["index"].i)
            elif nd.op == "_Retval":
                rets[nd.attr["index"].i] = nd.input[0]
            elif nd.op in codegen.ASSIGN_OPS:
                assigns.append(nd)
            else:
                nodes.append(nd)
        self.num_args = len(args)
        self.refs = frozenset(refs)  # inputs that are variables (VariableState), not values
        value_of = {args[i]: i for i in range(self.num_args)}
        self.nodes = [_Member(nd) for nd in nodes]
        self.members = []
        for j, (nd, node) in enumerate(zip(nodes, self.nodes)):
            ids = tuple(value_of[name.split(":")[0]] for name in nd.input)
            dtype = np.dtype(node.output_types[0].as_numpy_dtype)
            self.members.append(codegen.Member(nd.op, ids, dtype))
            value_of[nd.name] = self.num_args + j
        self.outputs = [value_of[rets[k].split(":")[0]] for k in range(len(rets))]
        # reductions: member index -> keep_dims; loops only where nothing reads their results
        # and their axes are inputs of the fused node (the plan reads them)
        self.reductions = {
            j: node.attrs["keep_dims"]
            for j, node in enumerate(self.nodes)
            if node.op in codegen.REDUCTIONS
        }
        reduced = {self.num_args + j for j in self.reductions}
        self.loopable = not any(
            a in reduced or (j in self.reductions and k == 1 and a >= self.num_args)
            for j, m in enumerate(self.members)
            for k, a in enumerate(m.args)
        )
        self.axes = [self.members[j].args[1] for j in self.reductions]
        self.assigns = [
            _Assign(_Member(nd), value_of[nd.input[0]], value_of[nd.input[1].split(":")[0]])
            for nd in assigns
        ]
        self.sinks = self.outputs + [a.value for a in self.assigns]
        self.dtypes = [m.dtype for m in self.members]
        self._plans: dict = {}

    def run(self, ctx, inputs):
        if self.refs:
            shapes = tuple(() if i in self.refs else np.shape(x) for i, x in enumerate(inputs))
        else:
            shapes = tuple(np.shape(x) for x in inputs)
        key = shapes
        if self.axes and self.loopable:  # a plan per value of the reduction axes too
            key = (shapes, tuple(tuple(np.ravel(inputs[a]).tolist()) for a in self.axes))
        plan = self._plans.get(key)
        if plan is None:
            if len(self._plans) >= _MAX_SHAPE_PLANS:
                self._plans.clear()
            plan = self._plans[key] = self._plan(shapes, inputs)
        if self.assigns:
            return self._run_assigning(ctx, plan, inputs)
        if plan is _ONE_BY_ONE:
            values = self._one_by_one(ctx, inputs)
            return _results([values[v] for v in self.outputs])
        return _results(self._loop(ctx, plan, inputs))

    def _plan(self, shapes, inputs):
        """Infers each value's shape; the loops that compute the sinks, or _ONE_BY_ONE."""
        if not self.loopable:
            return _ONE_BY_ONE
        value_shapes = list(shapes)
        scalar = [math.prod(s) == 1 for s in shapes]
        reduce = {}  # reduction value id -> its _Reduction
        for j, m in enumerate(self.members):
            if j in self.reductions:
                r = _Reduction.of(m, self.reductions[j], value_shapes[m.args[0]], inputs)
                if r is None:
                    return _ONE_BY_ONE
                reduce[self.num_args + j] = r
                value_shapes.append(r.shape)
                scalar.append(False)  # read by no member
                continue
            shape = _shape(codegen.ELEMENTWISE[m.op].shape_rule, [value_shapes[a] for a in m.args])
            if shape is None:
                return _ONE_BY_ONE
            value_shapes.append(shape)
            scalar.append(all(scalar[a] for a in m.args))
        if not self._pays(value_shapes):
            return _ONE_BY_ONE
        groups: dict = {}  # loop shape (None: one element) -> sink indices
        for k, v in enumerate(self.sinks):
            v = self.members[v - self.num_args].args[0] if v in reduce else v
            groups.setdefault(None if scalar[v] else value_shapes[v], []).append(k)
        loops = [self._loop_of(ks, shape, shapes, scalar, reduce) for shape, ks in groups.items()]
        outputs = [(value_shapes[v], self._dtype(v), scalar[v]) for v in self.sinks]
        reductions = {k: reduce[v] for k, v in enumerate(self.sinks) if v in reduce}
        return _Plan(loops, outputs, reductions)

    def _pays(self, value_shapes) -> bool:
        """Whether the loop is expected to beat the members' own kernels on these shapes: it
        saves a pass over memory and a dispatch per member, but numba computes tanh, log, sin
        ... one element at a time where NumPy's kernels use SIMD (`_LOOP_NS`)."""
        loop = unfused = 0.0
        for j, m in enumerate(self.members):
            size = math.prod(value_shapes[m.args[0] if j in self.reductions else self.num_args + j])
            loop += size * _LOOP_NS.get(m.op, _LOOP_NS[None])
            unfused += size * _KERNEL_NS + _DISPATCH_NS
        return loop <= unfused

    def _loop_of(self, ks: list, shape, shapes, scalar, reduce: dict) -> _Loop:
        """The loop computing sinks `ks` (all of `shape`, or for a reduction the shape of the
        value it reduces) from the members they need."""
        outs, sinks = [], []
        for k in ks:
            v = self.sinks[k]
            r = reduce.get(v)
            outs.append(v if r is None else self.members[v - self.num_args].args[0])
            sinks.append(codegen.PLAIN if r is None else r.sink)
        needed, stack = set(), list(outs)
        while stack:
            v = stack.pop()
            if v >= self.num_args and v not in needed:
                needed.add(v)
                stack.extend(self.members[v - self.num_args].args)
        used = sorted(v - self.num_args for v in needed)
        args = {a for j in used for a in self.members[j].args if a < self.num_args}
        args = sorted(args | {v for v in outs if v < self.num_args})
        full_args = [shapes[a] for a in args if not scalar[a]]
        # flat: the full-size inputs share one shape, so every full-size value has its
        # elements in the same order (broadcasting against one-element values adds 1-dims);
        # a reduction that keeps dimensions needs them (strided)
        flat = all(s == full_args[0] for s in full_args) and not any(s.kept for s in sinks)
        full = (full_args[0] if full_args else ()) if flat else shape
        ndim = 0 if not full_args else 1 if flat else len(full)
        make = functools.partial(
            codegen.generate, self.num_args, self.members, args, used, outs, scalar, ndim
        )
        loop = _Loop(make, flat, full, [(a, scalar[a]) for a in args], ks, tuple(sinks))
        loop.variant(loop.plain)  # compiled now: the plain variant always runs
        return loop

    def _dtype(self, value: int) -> np.dtype:
        return self.dtypes[value - self.num_args]

    def _loop(self, ctx, plan: _Plan, inputs, places=None) -> list:
        """Runs the plan's loops; returns every sink's array. `places` maps a sink to the
        (variable buffer, `codegen.Sink`) of an assign written in place."""
        outs = [np.empty(shape, dtype) for shape, dtype, _ in plan.outputs]
        for k, r in plan.reductions.items():
            outs[k] = r.start()
        for k, (buf, _) in (places or {}).items():
            outs[k] = buf
        for loop in plan.loops:
            sinks, aliased = loop.plain, {}
            if places:
                sinks = tuple(
                    places[k][1] if k in places else s for k, s in zip(loop.outputs, sinks)
                )
                aliased = {
                    s.alias: outs[k] for k, s in zip(loop.outputs, sinks) if s.alias is not None
                }
            args = []
            for a, one in loop.args:
                x = aliased.get(a)
                if x is None:
                    x = np.asarray(inputs[a])
                    x = x.reshape(-1) if one or loop.flat else np.broadcast_to(x, loop.full)
                elif one or loop.flat:
                    x = x.reshape(-1)  # the writable buffer, in place of its read-only view
                args.append(x)
            views = [
                outs[k].reshape(-1)
                if (plan.outputs[k][2] or loop.flat) and not s.reduce
                else outs[k]
                for k, s in zip(loop.outputs, sinks)
                if s.alias is None
            ]
            loop.variant(sinks)(0, loop.extent, *loop.dims, *args, *views)
        for k, r in plan.reductions.items():
            outs[k] = r.finish(outs[k])
        return outs

    def _run_assigning(self, ctx, plan, inputs):
        """Computes the sinks and stores each assign's value: straight into the variable's
        buffer where that is exactly what its unfused kernel would leave there, holding the
        variables' locks (use_locking) while the loop writes; else by its own kernel."""
        n = len(self.outputs)
        states = [inputs[a.ref] for a in self.assigns]
        if plan is _ONE_BY_ONE:
            values = self._one_by_one(ctx, inputs)
            sinks, places = [values[v] for v in self.sinks], {}
        else:
            with locked(states):
                places = self._places(plan, inputs, states)
                sinks = self._loop(ctx, plan, inputs, places)
        for j, (a, state) in enumerate(zip(self.assigns, states)):
            if n + j not in places:
                a.node.run(ctx.device, [state, sinks[n + j]])
        return _results(sinks[:n])

    def _places(self, plan, inputs, states) -> dict:
        """sink -> (buffer, `codegen.Sink`) for each assign written in place: the
        variable has a buffer of the value's shape and dtype, and every input that shares its
        memory is that very buffer, read only by the loop that writes it (at the index it
        writes). The first of two assigns to one variable only: the other runs its kernel."""
        places, taken = {}, set()
        for j, (a, state) in enumerate(zip(self.assigns, states)):
            k = len(self.outputs) + j
            buf = state.update_buffer()
            shape, dtype, _ = plan.outputs[k]
            if id(state) in taken or buf is None or buf.shape != shape or buf.dtype != dtype:
                continue
            if not buf.flags.c_contiguous:
                continue
            writer, alias = plan.loop_of[k], None
            for i, x in enumerate(inputs):
                if i in self.refs or not np.may_share_memory(x, buf):
                    continue
                readers = [loop for loop in plan.loops if i in loop.reads]
                if not _same_layout(x, buf) or any(r is not writer for r in readers):
                    break
                if readers:
                    alias = i
            else:
                places[k] = (buf, codegen.Sink(alias=alias, combine=a.combine))
                taken.add(id(state))
        return places

    def _one_by_one(self, ctx, inputs) -> list:
        values = list(inputs)
        for node, m in zip(self.nodes, self.members):
            values.append(node.run(ctx.device, [values[a] for a in m.args]))
        return values


def _same_layout(x, buf: np.ndarray) -> bool:
    """Whether array `x` is a view of exactly `buf`'s elements in `buf`'s order."""
    return (
        isinstance(x, np.ndarray)
        and x.shape == buf.shape
        and x.strides == buf.strides
        and x.__array_interface__["data"][0] == buf.__array_interface__["data"][0]
    )


def _results(outs: list):
    """A kernel's return value: one output, a tuple, or None (a node of no outputs)."""
    results = [o[()] if isinstance(o, np.ndarray) and not o.ndim else o for o in outs]
    if len(results) == 1:
        return results[0]
    return tuple(results) if results else None


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


@register_kernel("_FusedElementwise", expensive=True)
def fused_elementwise(ctx, *inputs):
    prog = ctx.state
    if prog is None:
        prog = ctx.state = program(ctx.attrs["body"])
    return prog.run(ctx, inputs)
