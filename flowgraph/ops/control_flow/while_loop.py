"""tf.while_loop (whitepaper §4.4): a cyclic graph of Enter, Merge, LoopCond, Switch, Identity,
NextIteration and Exit, executed by frames and tagged iterations (runtime/frames.py).

For each loop variable: Enter (into the loop's frame) -> Merge (with the NextIteration back
edge) -> cond -> LoopCond -> Switch; the Switch's true output feeds the body through an
Identity, the body's result goes to NextIteration, and the false output leaves through Exit.
Names follow TF1 (while/Enter, while/Merge, while/LoopCond, while/Switch, while/Identity,
while/NextIteration, while/Exit; frame "while/while_context").
"""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.core.shapes import as_shape
from flowgraph.framework import default_graph, nest
from flowgraph.framework.convert import convert_to_tensor
from flowgraph.framework.operation import Tensor, user_frame
from flowgraph.ops.control_flow import primitives
from flowgraph.ops.control_flow.contexts import LoopVar, WhileContext, context_of, is_inside


def _graph_of(loop_vars):
    for v in nest.flatten(loop_vars):
        if isinstance(v, Tensor):
            return v.graph
    return default_graph.get()


def _identity(x, name="Identity"):
    from flowgraph.framework.apply_op import apply_op

    return apply_op("Identity", [x], name=name).outputs[0]


def while_loop(
    cond,
    body,
    loop_vars,
    shape_invariants=None,
    parallel_iterations=10,
    back_prop=True,
    swap_memory=False,
    name=None,
    maximum_iterations=None,
    return_same_structure=False,
):
    """Repeats `body` while `cond` holds; up to `parallel_iterations` iterations may overlap.

    Example: (n,) = flowgraph.while_loop(lambda i: i < 10, lambda i: [i + 1],
    [flowgraph.constant(0)])
    """
    if not callable(cond):
        raise TypeError("cond must be callable.")
    if not callable(body):
        raise TypeError("body must be callable.")
    if not isinstance(parallel_iterations, int) or parallel_iterations < 1:
        raise TypeError("parallel_iterations must be a positive integer.")
    if isinstance(loop_vars, (list, tuple)) and not loop_vars:
        raise ValueError("No loop variables provided")
    site = "{}:{} in {}".format(*user_frame())
    graph = _graph_of(loop_vars)
    with graph.name_scope(name or "while") as scope:
        if maximum_iterations is not None:
            return _with_maximum(
                cond,
                body,
                loop_vars,
                shape_invariants,
                parallel_iterations,
                back_prop,
                swap_memory,
                maximum_iterations,
                return_same_structure,
                graph,
            )
        ctx = WhileContext(
            graph, graph.unique_name("while_context"), parallel_iterations, back_prop, swap_memory
        )
        graph.add_to_collection("while_context", ctx)
        result = _build_loop(ctx, cond, body, loop_vars, shape_invariants, scope[:-1], site)
    if (
        not return_same_structure
        and isinstance(result, (list, tuple))
        and len(result) == 1
        and not hasattr(result, "_fields")
    ):
        return result[0]
    return result


def _with_maximum(
    cond,
    body,
    loop_vars,
    shape_invariants,
    parallel_iterations,
    back_prop,
    swap_memory,
    maximum_iterations,
    return_same_structure,
    graph,
):
    """TF1's maximum_iterations: an iteration counter that is part of the loop condition."""
    from flowgraph.ops import math as math_ops

    max_iter = convert_to_tensor(maximum_iterations, name="maximum_iterations")
    if max_iter.shape.ndims not in (None, 0):
        raise ValueError(f"maximum_iterations must be a scalar, saw shape: {max_iter.shape}")
    counter = convert_to_tensor(0, dtype=max_iter.dtype, name="iteration_counter")
    invariants = None if shape_invariants is None else (as_shape([]), shape_invariants)
    ctx = WhileContext(
        graph, graph.unique_name("while_context"), parallel_iterations, back_prop, swap_memory
    )
    graph.add_to_collection("while_context", ctx)
    site = "{}:{} in {}".format(*user_frame())
    out = _build_loop(
        ctx,
        lambda i, lv: math_ops.logical_and(i < max_iter, _call(cond, lv)),
        lambda i, lv: (i + 1, _as_sequence_like(lv, _call(body, lv))),
        (counter, loop_vars),
        invariants,
        graph.get_name_scope(),
        site,
    )
    result = out[1]
    if not return_same_structure and isinstance(result, (list, tuple)) and len(result) == 1:
        return result[0]
    return result


def _call(fn, loop_vars):
    """TF1 calls cond and body with the loop variables as positional arguments."""
    return fn(*loop_vars) if isinstance(loop_vars, (list, tuple)) else fn(loop_vars)


def _build_loop(ctx: WhileContext, cond, body, loop_vars, shape_invariants, loop_name, site):
    graph = ctx.graph
    structure = loop_vars if isinstance(loop_vars, (list, tuple, dict)) else [loop_vars]
    originals = nest.flatten(structure)
    flat = [_flow_or_tensor(v) for v in originals]
    if shape_invariants is not None:
        try:
            nest.assert_same_structure(
                loop_vars, shape_invariants, "loop_vars and shape_invariants"
            )
        except ValueError as e:
            raise ValueError(f"while_loop '{loop_name}' (created at {site}): {e}") from None
        invariants = [as_shape(s) for s in nest.flatten(shape_invariants)]
        for v, s in zip(flat, invariants):
            if not s.is_compatible_with(v.shape):
                raise ValueError(
                    f"while_loop '{loop_name}' (created at {site}): the shape invariant specified "
                    "for "
                    f"{v.name} is not compatible with the initial shape of the loop variable. It "
                    "enters "
                    f"the loop with shape {v.shape}, but the specified shape invariant is {s}."
                )
    else:
        invariants = [v.shape for v in flat]
    real = [ctx.outer_context.add_value(v) for v in flat] if ctx.outer_context is not None else flat
    with graph.control_dependencies(None):
        enters = [
            primitives.enter(
                v, ctx.name, is_constant=False, parallel_iterations=ctx.parallel_iterations
            )
            for v in real
        ]
    for e, s in zip(enters, invariants):
        e._shape = s
        e.op._control_flow_context = ctx
    ctx.loop_enters = enters
    ctx.enter()
    try:
        merges = [primitives.merge([e, e])[0] for e in enters]
        for m, s in zip(merges, invariants):
            m._shape = s
        ctx.pivot_for_pred = merges[0]
        c = convert_to_tensor(
            _call(cond, nest.pack_sequence_as(structure, _rewrap(originals, merges)))
        )
        if c.dtype.base_dtype != dtypes.bool_ or c.shape.ndims not in (None, 0):
            raise ValueError(
                f"while_loop '{loop_name}' (created at {site}): cond must return a boolean scalar, "
                f"got {c.dtype.name} with shape {c.shape}"
            )
        pivot = primitives.loop_cond(c)
        ctx.pivot = pivot
        switches = [primitives.switch(m, pivot) for m in merges]
        body_vars = [_identity(s[1]) for s in switches]
        ctx.pivot_for_body = body_vars[0]
        result = _call(body, nest.pack_sequence_as(structure, _rewrap(originals, body_vars)))
        try:
            nest.assert_same_structure(
                _top_list(structure), _top_list(result), "loop_vars and body results"
            )
        except ValueError as e:
            raise ValueError(
                f"while_loop '{loop_name}' (created at {site}): body must return the same "
                "structure as "
                f"loop_vars ({len(flat)} values): {e}"
            ) from None
        next_vals = []
        for i, (m, v) in enumerate(zip(merges, nest.flatten(result))):
            v = _flow_or_tensor(v)
            if not is_inside(context_of(v.op), ctx):
                v = ctx.add_value(v)
            if v.dtype.base_dtype != m.dtype.base_dtype:
                raise TypeError(
                    f"while_loop '{loop_name}' (created at {site}): loop variable {i} enters the "
                    "loop "
                    f"as {m.dtype.name} but the body returns {v.dtype.name}"
                )
            if not _less_specific_or_equal(v.shape, m.shape):
                raise ValueError(
                    f"while_loop '{loop_name}' (created at {site}): input tensor '{flat[i].name}' "
                    "enters "
                    f"the loop with shape {m.shape}, but has shape {v.shape} after one iteration. "
                    "To "
                    "allow the shape to vary across iterations, use the `shape_invariants` "
                    "argument of "
                    "tf.while_loop to specify a less-specific shape."
                )
            nxt = primitives.next_iteration(v)
            m.op._update_input(1, nxt)
            next_vals.append(nxt)
    finally:
        ctx.exit()
    exits = [primitives.exit(s[0]) for s in switches]
    for x, m in zip(exits, merges):
        x._shape = m.shape
        x.op._control_flow_context = ctx  # an Exit belongs to its loop (gradients find it so)
    ctx.loop_exits = exits
    ctx.loop_vars = [
        LoopVar(*v)
        for v in zip(enters, merges, [s[0].op for s in switches], body_vars, next_vals, exits)
    ]
    return nest.pack_sequence_as(structure, _rewrap(originals, exits))


def _flow_or_tensor(v):
    """A TensorArray travels through the loop as its flow; everything else as a Tensor."""
    from flowgraph.ops.tensor_array import TensorArray

    return v.flow if isinstance(v, TensorArray) else convert_to_tensor(v)


def _rewrap(originals, tensors):
    from flowgraph.ops.tensor_array import TensorArray

    return [
        o._with_flow(t) if isinstance(o, TensorArray) else t for o, t in zip(originals, tensors)
    ]


def _as_sequence_like(loop_vars, result):
    """A body of one loop variable may return it bare; TF1 wraps it in a list."""
    if isinstance(loop_vars, (list, tuple)) and not isinstance(result, (list, tuple, dict)):
        return [result]
    return result


def _top_list(x):
    """The structure with its outer level as a plain list (TF1 compares body results so)."""
    return list(x) if isinstance(x, (list, tuple)) else x if isinstance(x, dict) else [x]


def _less_specific_or_equal(value_shape, invariant) -> bool:
    """True if every known dim of `invariant` equals the value's (TF's _ShapeLessThanOrEqual)."""
    inv = invariant.as_tuple()
    if inv is None:
        return True
    val = value_shape.as_tuple()
    if val is None or len(val) != len(inv):
        return False
    return all(i is None or i == v for v, i in zip(val, inv))
