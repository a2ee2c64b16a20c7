"""The function library on the runtime side: FunctionDefs received with the graph (TensorFlow's
`GraphDef.library`), instantiated per device into executor plans and called by kernels.

A FunctionDef's body names its inputs TensorFlow's way: an argument by its name, an op output
as `node:output_arg:index` (the index within that output arg, so a list output is addressed
by position). Instantiation turns the body into plain runtime Nodes (`runtime/nodes.py`) with
one `_Arg` node per argument and one `_Retval` node per result, and compiles them into an
`ExecutorPlan` once per (function, device). A call runs that plan as a fresh Step whose
step-local `resources` carry the argument values in and the results out, so the executor
needs nothing special for functions. Kernels that apply functions (the dataset kernels,
PartitionedCall) reach the library through their device (`Device.functions`).
"""

from __future__ import annotations

import itertools
import threading

from flowgraph.core import attr_value, dtypes, errors
from flowgraph.core.op_def import get_op_def
from flowgraph.core.protos import FunctionDefLibrary, NodeDef
from flowgraph.kernels.base import ARGS, RETS, library_of  # noqa: F401  (re-exported)
from flowgraph.runtime import nodes as rt_nodes
from flowgraph.runtime.executor import ASYNC, ExecutorPlan, execute
from flowgraph.runtime.rendezvous import LocalRendezvous
from flowgraph.runtime.step import Step, node_error

_call_ids = itertools.count(1 << 40)  # step ids of function calls, apart from Session steps


class FunctionLibrary:
    """name -> FunctionDef, and the instantiated bodies. Guarded by `_lock`."""

    def __init__(self):
        self._lock = threading.Lock()
        self._defs: dict = {}  # guarded by _lock
        self._bodies: dict = {}  # (name, device name) -> FunctionBody; guarded by _lock

    def add(self, library: FunctionDefLibrary) -> None:
        """Adds the functions of `library`; a name already defined differently is an error."""
        with self._lock:
            for fdef in library.function:
                name = fdef.signature.name
                old = self._defs.get(name)
                if old is None:
                    self._defs[name] = fdef
                elif old != fdef:
                    raise errors.InvalidArgumentError(
                        None,
                        None,
                        f"Cannot add function '{name}' because a different function with the "
                        f"same name already exists.",
                    )

    def __contains__(self, name: str) -> bool:
        with self._lock:
            return name in self._defs

    def definition(self, name: str):
        with self._lock:
            fdef = self._defs.get(name)
        if fdef is None:
            raise errors.NotFoundError(None, None, f"Function '{name}' is not defined.")
        return fdef

    def instantiate(self, func, device) -> FunctionBody:
        """The body of `func` (a name or NameAttrList) compiled for `device`, built once."""
        name = func if isinstance(func, str) else func.name
        key = (name, device.name)
        with self._lock:
            body = self._bodies.get(key)
        if body is not None:
            return body
        body = FunctionBody(self.definition(name), device)
        with self._lock:
            return self._bodies.setdefault(key, body)


class FunctionBody:
    """One FunctionDef compiled for one device: call it with a list of argument values."""

    def __init__(self, fdef, device):
        sig = fdef.signature
        self.name = sig.name
        self.device = device
        self.input_types = [dtypes.as_dtype(a.type) for a in sig.input_arg]
        self.output_types = [dtypes.as_dtype(a.type) for a in sig.output_arg]
        self.is_stateful = sig.is_stateful
        nodes = _body_nodes(fdef, device.name)
        try:
            rt_nodes.validate(nodes)
        except errors.OpError as e:
            raise errors.InvalidArgumentError(
                None, None, f"In function '{self.name}': {e.message}"
            ) from None
        self.plan = ExecutorPlan(nodes, device)
        self._inline = None if self.plan.has_control_flow else _inline_program(self.plan)

    def __call__(self, args, parent=None) -> list:
        """Runs the body on `args`; returns the results. `parent` is the calling Step: its
        deadline applies, and its cancellation fails the call."""
        if len(args) != len(self.input_types):
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Function '{self.name}' expects {len(self.input_types)} arguments, got "
                f"{len(args)}",
            )
        if parent is not None and parent.cancelled:
            raise errors.CancelledError(None, None, "The calling step was cancelled")
        if self._inline is not None:
            return self._run_inline(args, parent)
        step = _call_step(parent)
        rets = [None] * len(self.output_types)
        step.resources[ARGS] = args
        step.resources[RETS] = rets
        manager = getattr(parent, "cancellation", None)  # the caller's cancellation ends the call
        if manager is None:
            try:
                execute(self.plan, step)
            finally:
                step.end()  # no caller: the call is its own step
            return rets
        token = manager.get_cancellation_token()
        if not manager.register_callback(token, step.cancel):
            raise errors.CancelledError(None, None, "The calling step was cancelled")
        try:
            execute(self.plan, step)
        finally:
            manager.deregister_callback(token)
        return rets

    def _run_inline(self, args, parent) -> list:
        """Runs the body's kernels one after the other in this thread: a dataset function is
        called per element, and for small bodies the executor's scheduling would cost more than
        the kernels. Only bodies without control flow or async kernels run this way."""
        program, num_slots, arg_slots, ret_slots = self._inline
        vals = [None] * num_slots
        for slot, value in zip(arg_slots, args):
            vals[slot] = value
        step = None
        try:
            for item in program:
                inputs = [vals[s] for s in item.inputs]
                try:
                    if item.step_arg:
                        if step is None:
                            step = _call_step(parent)
                        out = item.compute(step, *inputs)
                    else:
                        out = item.compute(*inputs)
                except Exception as e:  # noqa: BLE001  (any kernel failure is the node's error)
                    raise node_error(item, self.device.name, e) from None
                n = item.num_outputs
                if n == 1:
                    vals[item.base] = out
                elif n:
                    vals[item.base : item.base + n] = out
        finally:
            if step is not None and parent is None:
                step.end()  # no caller: the call is its own step
        return [vals[s] for s in ret_slots]


def _call_step(parent) -> Step:
    """The step of one function call. Called from a step (`parent`), it has the caller's
    deadline and per-step container (TF passes the caller's step_container), so the
    TensorArrays and stacks it makes or receives live as long as the caller's step."""
    if parent is None:
        return Step(next(_call_ids), LocalRendezvous())
    if parent.cancelled:
        raise errors.CancelledError(None, None, "The calling step was cancelled")
    step = Step(next(_call_ids), LocalRendezvous(), container=parent.container)
    step.deadline = parent.deadline
    return step


def _inline_program(plan):
    """(kernels in dependency order without _Arg/_Retval, slots, argument slots, result slots),
    or None when the body must run on the executor (async kernels)."""
    items = plan.items
    if any(item.kind == ASYNC for item in items):
        return None
    pending = plan.pending[:]
    ready = [i for i in plan.roots]
    order = []
    while ready:
        i = ready.pop(0)
        order.append(items[i])
        for c in items[i].out_edges:
            pending[c] -= 1
            if not pending[c]:
                ready.append(c)
    args = sorted(
        (it for it in items if it.node.op == "_Arg"), key=lambda it: it.node.attrs["index"]
    )
    rets = sorted(
        (it for it in items if it.node.op == "_Retval"), key=lambda it: it.node.attrs["index"]
    )
    program = [it for it in order if it.node.op not in ("_Arg", "_Retval")]
    return program, plan.num_slots, [it.base for it in args], [it.inputs[0] for it in rets]


def _output_ranges(op_def, attrs) -> dict:
    """{output arg name: first flat output port} for a node with these attrs."""
    ranges, port = {}, 0
    for arg in op_def.outputs:
        ranges[arg.name] = port
        if arg.type_list_attr:
            port += len(attrs[arg.type_list_attr])
        elif arg.number_attr:
            port += int(attrs[arg.number_attr])
        else:
            port += 1
    return ranges


def _body_nodes(fdef, device: str) -> list:
    """The runtime Nodes of a FunctionDef's body, with `_Arg` and `_Retval` nodes added."""
    sig = fdef.signature
    args = {a.name: i for i, a in enumerate(sig.input_arg)}
    nodes = []
    for i, a in enumerate(sig.input_arg):
        nodes.append(
            rt_nodes.make_node(
                a.name, "_Arg", device=device, attrs={"T": dtypes.as_dtype(a.type), "index": i}
            )
        )
    body = {}
    for nd in fdef.node_def:
        if nd.name in args:
            raise errors.InvalidArgumentError(
                None, None, f"Function '{sig.name}': node '{nd.name}' has the name of an argument"
            )
        for av in nd.attr.values():
            if av.WhichOneof("value") == "placeholder":
                raise errors.UnimplementedError(
                    None,
                    None,
                    f"Function '{sig.name}': attr placeholder ${av.placeholder} of node "
                    f"'{nd.name}' (polymorphic functions are not supported)",
                )
        body[nd.name] = nd
    ports = {}  # node name -> {output arg: first port}

    def flat(ref: str, where: str) -> str:
        if ref.startswith("^"):
            return ref
        parts = ref.split(":")
        if len(parts) == 1:
            if parts[0] not in args:
                raise errors.InvalidArgumentError(
                    None, None, f"Function '{sig.name}': {where} names unknown input '{ref}'"
                )
            return parts[0]
        src = body.get(parts[0])
        if src is None or len(parts) != 3:
            raise errors.InvalidArgumentError(
                None, None, f"Function '{sig.name}': {where} names unknown input '{ref}'"
            )
        if src.name not in ports:
            op_def = get_op_def(src.op)
            attrs = {k: attr_value.from_attr_value(v) for k, v in src.attr.items()}
            for k, a in op_def.attrs.items():
                attrs.setdefault(k, a.default)
            ports[src.name] = _output_ranges(op_def, attrs)
        first = ports[src.name].get(parts[1])
        if first is None:
            raise errors.InvalidArgumentError(
                None, None, f"Function '{sig.name}': {where}: '{src.op}' has no output '{parts[1]}'"
            )
        return f"{src.name}:{first + int(parts[2])}"

    for nd in fdef.node_def:
        copy = NodeDef()
        copy.CopyFrom(nd)
        del copy.input[:]
        copy.input.extend(flat(r, f"node '{nd.name}'") for r in nd.input)
        copy.device = device
        nodes.append(rt_nodes.from_node_def(copy))
    for i, a in enumerate(sig.output_arg):
        ref = fdef.ret.get(a.name)
        if ref is None:
            raise errors.InvalidArgumentError(
                None, None, f"Function '{sig.name}': no return value for output '{a.name}'"
            )
        src, port = rt_nodes.parse_input(flat(ref, f"return value '{a.name}'"))
        nodes.append(
            rt_nodes.make_node(
                f"{a.name}_RetVal",
                "_Retval",
                inputs=[(src, port)],
                device=device,
                attrs={"T": dtypes.as_dtype(a.type), "index": i},
            )
        )
    for name in fdef.control_ret.values():
        if name not in body:
            raise errors.InvalidArgumentError(
                None, None, f"Function '{sig.name}': unknown control output '{name}'"
            )
    return nodes
