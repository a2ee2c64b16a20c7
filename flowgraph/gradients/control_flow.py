"""Gradients through control flow (whitepaper §4.4).

cond: the dualities Switch -> Merge and Merge -> Switch. The gradient of a cond's Merge is a
Switch of the incoming gradient on the cond's predicate, so only the taken branch's gradient
ops run; the gradient of a branch's Switch merges the gradient of the taken output with the
zeros of the untaken (dead) one.

while_loop: the gradient of a loop is another loop that runs as many iterations backwards.
A GradLoopState adds to the forward loop a counter of its iterations and, for every forward
value the backward pass needs, a stack: the forward loop pushes the value in each iteration, the
backward loop pops it, so iteration t of the gradient sees the values of forward iteration
T - t. Per loop variable the duality is: Exit -> Enter (of the gradient into the backward
frame), Switch -> Merge (with the NextIteration back edge), Merge -> Switch (on the backward
loop's predicate), Enter -> Exit. A loop invariant (a constant Enter) gets an accumulator loop
variable that sums its gradient over all iterations. Control triggers keep pushes and pops in
iteration order when iterations run in parallel.
"""

from __future__ import annotations

import contextlib

from flowgraph.core import dtypes
from flowgraph.framework.convert import convert_to_tensor
from flowgraph.framework.indexed_slices import IndexedSlices
from flowgraph.gradients import util
from flowgraph.gradients.registry import not_differentiable, register_gradient
from flowgraph.ops.control_flow import primitives
from flowgraph.ops.control_flow.contexts import (
    CondContext,
    WhileContext,
    context_of,
    is_inside,
    output_context,
)


@contextlib.contextmanager
def in_context(graph, ctx):
    """Builds ops in control-flow context `ctx`, free of outer control dependencies."""
    saved = graph._control_flow_context
    graph._control_flow_context = ctx
    try:
        with graph.control_dependencies(None):
            yield
    finally:
        graph._control_flow_context = saved


def _owned_by(op, ctx):
    """Marks an Enter/Exit built outside `ctx` as part of it (like the loops' own Enters)."""
    op._control_flow_context = ctx


class GradWhileContext(WhileContext):
    """The backward loop of a forward WhileContext. Values of the forward loop that its ops use
    are replaced by their per-iteration history (stack pops); loop invariants re-enter."""

    def __init__(self, graph, name, forward: WhileContext, grad_state):
        super().__init__(
            graph, name, forward.parallel_iterations, forward.back_prop, forward.swap_memory
        )
        self.grad_state = grad_state

    def add_value(self, val):
        forward = self.grad_state.forward
        where = output_context(val.op)
        if is_inside(where, forward) and not is_inside(where, self):
            if val.op.type in ("Enter", "RefEnter") and val.op.get_attr("is_constant"):
                return self.add_value(val.op.inputs[0])  # a loop invariant: its outside value
            return self.grad_state.real_value(val)
        return super().add_value(val)


class GradLoopState:
    """The bookkeeping that connects one forward loop with its gradient loop."""

    def __init__(self, graph, forward: WhileContext):
        self.graph = graph
        self.forward = forward
        self.history: dict[
            str, object
        ] = {}  # forward tensor name -> its value in the backward loop
        self._build_forward_counter()
        self._build_backward_loop()

    def _build_forward_counter(self):
        """f_count: counts the forward iterations; pushes are ordered through it."""
        g, fwd = self.graph, self.forward
        with in_context(g, fwd.outer_context):
            zero = util.constant(0, "int32", name="f_count", graph=g)
            enter = primitives.enter(
                zero, fwd.name, parallel_iterations=fwd.parallel_iterations, name="f_count"
            )
        _owned_by(enter.op, fwd)
        with in_context(g, fwd):
            merge = primitives.merge([enter, enter])[0]
            switch = primitives.switch(merge, fwd.pivot)
            self.forward_index = util.build("AddV2", switch[1], 1, name="Add")
            self.forward_sync = primitives.control_trigger(name="f_sync")
            nxt = primitives.next_iteration(self.forward_index)
            nxt.op._add_control_input(self.forward_sync)
            merge.op._update_input(1, nxt)
        with in_context(g, fwd.outer_context):
            self.forward_count = primitives.exit(switch[0], name="f_count")
        _owned_by(self.forward_count.op, fwd)

    def _build_backward_loop(self):
        """b_count: runs the backward loop as many iterations as the forward one ran."""
        g, fwd = self.graph, self.forward
        outer = g._control_flow_context
        self.grad_context = ctx = GradWhileContext(g, g.unique_name(fwd.name), fwd, self)
        with in_context(g, outer):
            count = self.forward_count
            if outer is not None:
                count = outer.add_value(count)
            enter = primitives.enter(
                count, ctx.name, parallel_iterations=ctx.parallel_iterations, name="b_count"
            )
        _owned_by(enter.op, ctx)
        with in_context(g, ctx):
            merge = primitives.merge([enter, enter])[0]
            ctx.pivot_for_pred = merge
            one = util.constant(1, "int32", name="b_count", graph=g)
            ctx.pivot = primitives.loop_cond(util.build("GreaterEqual", merge, one), name="b_count")
            switch = primitives.switch(merge, ctx.pivot)
            index = util.build("Sub", switch[1], one)
            ctx.pivot_for_body = index
            self.grad_sync = primitives.control_trigger(name="b_sync")
            nxt = primitives.next_iteration(index)
            nxt.op._add_control_input(self.grad_sync)
            merge.op._update_input(1, nxt)
        with in_context(g, outer):
            done = primitives.exit(switch[0], name="b_count")
        _owned_by(done.op, ctx)

    def real_value(self, value):
        """`value` of forward iteration T - t, in backward iteration t (through a stack)."""
        hit = self.history.get(value.name)
        if hit is not None:
            return hit
        g, fwd, ctx = self.graph, self.forward, self.grad_context
        value_ctx = output_context(value.op)
        if value.op.type == "Const" and not value.op.inputs:
            with in_context(g, ctx):
                real = util.constant(
                    value.op.get_attr("value"), value.dtype.base_dtype, name="Const", graph=g
                )
            self.history[value.name] = real
            return real
        with in_context(g, fwd.outer_context):
            max_size = util.constant(-1, "int32", name="Const", graph=g)
            stack = util.build("StackV2", max_size, elem_type=value.dtype.base_dtype, name="f_acc")
        with in_context(g, value_ctx):  # inside a cond branch, the push happens only when taken
            push = util.build("StackPushV2", stack, value, name="StackPushV2")
        push.op._add_control_input(self.forward_index.op)
        self.forward_sync._add_control_input(push.op)
        with in_context(g, ctx):
            handle = ctx.add_value(stack)
            cond = _enclosing_cond(value_ctx, fwd)
            if cond is not None:  # pop only in the iterations where the branch ran
                handle = primitives.switch(handle, self.real_value(cond.pred))[cond.branch]
            pop = util.build(
                "StackPopV2", handle, elem_type=value.dtype.base_dtype, name="StackPopV2"
            )
            pop.op._add_control_input(ctx.pivot_for_body.op)
        pop._shape = value.shape
        self.grad_sync._add_control_input(pop.op)
        self.history[value.name] = pop
        return pop


def _enclosing_cond(ctx, stop):
    """The innermost CondContext between `ctx` and the while context `stop`, if any."""
    while ctx is not None and ctx is not stop:
        if isinstance(ctx, CondContext):
            return ctx
        ctx = ctx.outer_context
    return None


def _trainable(t) -> bool:
    dt = t.dtype.base_dtype
    return dt.is_floating or dt.is_complex


def _is_handle(t) -> bool:
    return t.dtype.base_dtype == dtypes.resource


def loop_gradient(graph, loop: WhileContext, exit_grads: list, backprop_body) -> list:
    """Builds the backward loop of `loop`; returns [(outside tensor, its gradient)].

    `exit_grads[k]` is the gradient reaching the k-th loop variable's Exit (or None).
    `backprop_body(level, ys, grad_ys, xs)` runs the ordinary gradient traversal over the loop
    body (from the NextIteration inputs back to the Identity outputs and loop invariants) and
    returns the gradients of `xs`.
    """
    if loop.grad_state is not None:
        raise TypeError("Second-order gradients of while loops are not supported")
    if not loop.back_prop:
        return []
    lvs = [lv for lv, g in zip(loop.loop_vars, exit_grads) if _trainable(lv.exit)]
    grads = [g for lv, g in zip(loop.loop_vars, exit_grads) if _trainable(lv.exit)]
    if all(g is None for g in grads):
        return []
    state = GradLoopState(graph, loop)
    ctx = state.grad_context
    outer = ctx.outer_context
    result, merges, body_ys, body_grad_ys = [], [], [], []
    for lv, g in zip(lvs, grads):
        with graph.name_scope(lv.exit.op.name + "_grad"):
            with in_context(graph, outer):
                g = util.zeros_like(lv.exit) if g is None else convert_to_tensor(g)
                b_exit = primitives.enter(
                    g, ctx.name, parallel_iterations=ctx.parallel_iterations, name="b_exit"
                )
            _owned_by(b_exit.op, ctx)
        with in_context(graph, ctx):
            with graph.name_scope(lv.switch.name + "_grad"):
                b_merge = primitives.merge([b_exit, b_exit], name="b_switch")[0]
            with graph.name_scope(lv.merge.op.name + "_grad"):
                switch = primitives.switch(b_merge, ctx.pivot)
        with in_context(graph, outer), graph.name_scope(lv.enter.op.name + "_grad"):
            done = primitives.exit(switch[0])
        _owned_by(done.op, ctx)
        result.append((lv.enter.op.inputs[0], done))
        merges.append(b_merge)
        body_ys.append(lv.next_iteration.op.inputs[0])
        body_grad_ys.append(switch[1])
    # A resource handle read inside the loop (a resource variable) is an invariant too: its
    # gradient is the summed gradient of the reads.
    invariants = [t for t in loop.external_values.values() if _trainable(t) or _is_handle(t)]
    ctx.enter()
    try:
        xs = [lv.identity for lv in lvs] + invariants
        body_grads = backprop_body(loop, body_ys, body_grad_ys, xs)
        for lv, b_merge, g in zip(lvs, merges, body_grads[: len(lvs)]):
            g = util.zeros_like(lv.identity) if g is None else convert_to_tensor(g)
            with graph.name_scope(lv.switch.name + "_grad"):
                b_merge.op._update_input(1, primitives.next_iteration(g))
    finally:
        ctx.exit()
    for enter_out, g in zip(invariants, body_grads[len(lvs) :]):
        if g is not None:
            result.append((enter_out.op.inputs[0], _accumulate(graph, state, enter_out, g)))
    return result


def _accumulate(graph, state: GradLoopState, enter_out, grad):
    """b_acc: the sum over all iterations of a loop invariant's gradient."""
    ctx = state.grad_context
    if isinstance(grad, IndexedSlices):  # densified per iteration, inside the backward loop
        with in_context(graph, ctx):
            grad = convert_to_tensor(grad)
    with graph.name_scope(enter_out.op.name + "_grad"):
        with in_context(graph, ctx.outer_context):
            source = enter_out.op.inputs[0]
            if _is_handle(source):  # zeros shaped like the variable the handle names
                fill = util.constant(0, grad.dtype.base_dtype, name="zero", graph=graph)
                zeros = util.build("Fill", util.build("VariableShape", source), fill, name="b_acc")
            else:
                zeros = util.zeros_like(source, name="b_acc")
            enter = primitives.enter(
                zeros, ctx.name, parallel_iterations=ctx.parallel_iterations, name="b_acc"
            )
        _owned_by(enter.op, ctx)
        with in_context(graph, ctx):
            merge = primitives.merge([enter, enter], name="b_acc")[0]
            switch = primitives.switch(merge, ctx.pivot)
            total = util.build("AddV2", switch[1], grad, name="Add")
            merge.op._update_input(1, primitives.next_iteration(total))
        with in_context(graph, ctx.outer_context):
            out = primitives.exit(switch[0], name="b_acc")
        _owned_by(out.op, ctx)
    return out


def zeros_for_output(op, index: int):
    """Zeros for an output of `op` that received no gradient, alive exactly when that output is.

    The untaken output of a cond's Switch inside a loop has no forward value to take the shape
    of in that iteration; its zeros take the shape of the Switch's input and are switched on the
    (remembered) predicate instead."""
    ctx = op.graph._control_flow_context
    cond = context_of(op)
    if not (
        isinstance(ctx, GradWhileContext)
        and op.type in ("Switch", "RefSwitch")
        and isinstance(cond, CondContext)
    ):
        return util.zeros_like(op.outputs[index])
    value = op.inputs[0]
    if value.shape.is_fully_defined():
        zeros = util.constant(0, value.dtype.base_dtype, name="zeros", graph=op.graph)
        zeros = util.build("Fill", value.shape.as_list(), zeros) if value.shape.ndims else zeros
    else:
        zeros = util.zeros_like(value)
    return primitives.switch(zeros, ctx.add_value(cond.pred))[1 - cond.branch]


# -- the gradient functions of the primitives, for cond -------------------------------------
def _check_cond(op):
    """A loop's own Switch (fed by LoopCond) or Merge (fed by NextIteration) is never
    differentiated op by op; reaching one means the loop was not built by tf.while_loop."""
    if any(t.op.type in ("LoopCond", "NextIteration", "RefNextIteration") for t in op.inputs):
        raise LookupError(
            f"Gradient of '{op.name}' ({op.type}): this op is part of a while loop that was not built "
            "by tf.while_loop in this program (e.g. imported from a GraphDef); gradients through "
            "such loops are not supported"
        )


@register_gradient("Switch")
@register_gradient("RefSwitch")
def _switch_grad(op, grad_false, grad_true):
    """Switch -> Merge: the live one of the two output gradients (the other is dead)."""
    _check_cond(op)
    return primitives.merge([grad_false, grad_true], name="cond_grad")[0], None


@register_gradient("Merge")
@register_gradient("RefMerge")
def _merge_grad(op, grad, _):
    """Merge -> Switch on the cond's predicate: each branch gets the gradient only if taken."""
    _check_cond(op)
    cond = getattr(op, "_cond_context", None)
    if cond is None:  # a Merge without a cond: route by which input fired
        outs = []
        for i in range(len(op.inputs)):
            pred = util.build("Equal", op.outputs[1], i)
            outs.append(primitives.switch(grad, pred)[1])
        return outs
    false_grad, true_grad = primitives.switch(grad, cond.pred, name="cond_grad")
    return false_grad, true_grad


@register_gradient("Enter")
@register_gradient("RefEnter")
@register_gradient("Exit")
@register_gradient("RefExit")
@register_gradient("NextIteration")
@register_gradient("RefNextIteration")
def _loop_primitive_grad(op, *grads):
    raise LookupError(
        f"Gradient of '{op.name}' ({op.type}): loop primitives are differentiated as a whole loop; "
        "this one is not part of a tf.while_loop built in this program (e.g. imported from a GraphDef)"
    )


not_differentiable("LoopCond")
not_differentiable("ControlTrigger")
