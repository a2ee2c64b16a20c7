"""Control-flow contexts: while a cond branch or a loop body is built, every new op passes
through its context, which routes values from outside into the branch or frame.

A tensor from outside a cond branch enters through a Switch on the branch's predicate, so it
is dead when the branch is not taken; a tensor from outside a loop enters through a constant
Enter, so every iteration sees it. An op with no data inputs gets a control edge from the
context's pivot, which puts it in the branch (dead when untaken) or in the frame. Contexts
nest: a value crossing several boundaries is routed through each one, outermost first.
"""

from __future__ import annotations

import abc
import collections

from flowgraph.ops.control_flow import primitives

LoopVar = collections.namedtuple("LoopVar", "enter merge switch identity next_iteration exit")
LoopVar.__doc__ = """One loop variable's ring: Enter -> Merge -> Switch -> (Identity -> body ->
NextIteration -> Merge) and Switch -> Exit. Gradients walk it backwards. All fields are
Tensors except `switch`, the Switch Operation."""


def context_of(op):
    return getattr(op, "_control_flow_context", None)


def output_context(op):
    """Where `op`'s outputs live: an Exit belongs to its loop but its value to the loop's outside."""
    ctx = context_of(op)
    if op.type in ("Exit", "RefExit") and ctx is not None:
        return ctx.outer_context
    return ctx


def is_inside(ctx, outer) -> bool:
    """True if `ctx` is `outer` or nested in it (None is the root, outside everything)."""
    while ctx is not None:
        if ctx is outer:
            return True
        ctx = ctx.outer_context
    return outer is None


class ControlFlowContext(abc.ABC):
    """Common machinery: entering/leaving the graph's current context and rewriting inputs."""

    def __init__(self, graph):
        self.graph = graph
        self.outer_context = graph._control_flow_context
        self.external_values: dict[str, object] = {}  # outside tensor name -> its inside proxy

    def enter(self):
        self.graph._control_flow_context = self

    def exit(self):
        self.graph._control_flow_context = self.outer_context

    def add_op(self, op):
        """Called by Graph for every op created while this context is current."""
        op._control_flow_context = self
        if not op.inputs:
            ext = [c for c in op.control_inputs if not is_inside(context_of(c), self)]
            if not [c for c in op.control_inputs if c not in ext]:
                op._add_control_input(self.pivot_op())
        for i, x in enumerate(op.inputs):
            if not is_inside(context_of(x.op), self):
                with self.graph.name_scope(op.name + "/"):  # TF names it e.g. while/mul/Enter
                    op._update_input(i, self.add_value(x))
        self._fix_external_control_inputs(op)

    def _fix_external_control_inputs(self, op):
        """A control edge from outside would wait in the wrong frame: route it like a value."""
        external = [c for c in op.control_inputs if not is_inside(context_of(c), self)]
        if not external or self.pivot_op() in external:
            return
        keep = [c for c in op._control_inputs if c not in external]
        op._control_inputs = keep
        for c in external:
            if c.outputs:
                op._add_control_input(self.add_value(c.outputs[0]).op)
            else:
                op._add_control_input(self.pivot_op())
        op._node_def = None

    def add_value(self, val):
        """The stand-in for `val` inside this context (`val` itself if it is already inside),
        routed through every enclosing context first; one stand-in per value and context."""
        if is_inside(context_of(val.op), self):
            return val
        proxy = self.external_values.get(val.name)
        if proxy is not None:
            return proxy
        outer = self.outer_context.add_value(val) if self.outer_context is not None else val
        saved = self.graph._control_flow_context
        self.graph._control_flow_context = self.outer_context
        try:
            with self.graph.control_dependencies(None):
                proxy = self._proxy(outer)
        finally:
            self.graph._control_flow_context = saved
        proxy.op._control_flow_context = self
        self.external_values[val.name] = proxy
        return proxy

    def fetchable(self, op) -> bool:
        """Whether a Session may fetch `op` (or feed its outputs): see WhileContext."""
        return self.outer_context is None or self.outer_context.fetchable(op)

    @abc.abstractmethod
    def _proxy(self, outer):
        """Builds the stand-in of an outside value (in the outer context)."""

    @abc.abstractmethod
    def pivot_op(self):
        """The op that ties a branch's or a loop's input-less ops to it (a control input)."""


class CondContext(ControlFlowContext):
    """One branch of a cond: `pred` selects it, `pivot` is the Identity of the taken Switch output."""

    def __init__(self, graph, pred, pivot, branch: int, name: str):
        super().__init__(graph)
        self.pred = pred
        self.pivot = pivot
        self.branch = branch
        self.name = name

    def pivot_op(self):
        return self.pivot.op

    def _proxy(self, outer):
        return primitives.switch(outer, self.pred)[self.branch]


class WhileContext(ControlFlowContext):
    """The body and condition of one while loop; its name is the frame name of its Enters."""

    def __init__(
        self, graph, name: str, parallel_iterations: int, back_prop: bool, swap_memory: bool
    ):
        super().__init__(graph)
        self.name = name
        self.parallel_iterations = parallel_iterations
        self.back_prop = back_prop
        self.swap_memory = swap_memory
        self.pivot = None  # the LoopCond output: the predicate of every Switch of the loop
        self.pivot_for_pred = None  # output of the first Merge: the loop's "start of iteration"
        self.pivot_for_body = None  # Identity of the first Switch's true output
        self.loop_enters = []
        self.loop_exits = []
        self.loop_vars: list[LoopVar] = []
        self.grad_state = (
            None  # set on the gradient loop of a forward loop (gradients/control_flow.py)
        )

    def pivot_op(self):
        pivot = self.pivot_for_body if self.pivot_for_body is not None else self.pivot_for_pred
        return pivot.op

    def add_op(self, op):
        super().add_op(op)
        # An op fed only by loop invariants would also run in the iteration where the loop
        # ends (nothing dead reaches it): tie it to the pivot, as TF does.
        if (
            op.inputs
            and not op.control_inputs
            and all(
                x.op.type in ("Enter", "RefEnter") and x.op.get_attr("is_constant")
                for x in op.inputs
            )
        ):
            op._add_control_input(self.pivot_op())

    def fetchable(self, op) -> bool:
        """Values inside a loop exist once per iteration: only the Exits of an outermost loop
        may be fetched or fed (TF's WhileContext marks the rest with prevent_fetching)."""
        return self.outer_context is None and op.type in ("Exit", "RefExit")

    def _proxy(self, outer):
        return primitives.enter(
            outer, self.name, is_constant=True, parallel_iterations=self.parallel_iterations
        )
