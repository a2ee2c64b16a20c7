"""tf.cond and tf.case (whitepaper §4.4): only the taken branch's ops run.

cond(pred, true_fn, false_fn) builds both branches, each in a CondContext whose pivot is an
Identity of one output of Switch(pred, pred); values from outside reach a branch through a
Switch on pred, so everything in the untaken branch is dead. A Merge per result forwards the
live value. TF1's structure and names: cond/Switch, cond/switch_t, cond/switch_f, cond/pred_id,
cond/Merge.
"""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.framework import default_graph, nest
from flowgraph.framework.convert import convert_to_tensor
from flowgraph.framework.operation import Operation, Tensor, user_frame
from flowgraph.ops.control_flow import primitives
from flowgraph.ops.control_flow.contexts import CondContext, context_of, is_inside


def _identity(x, name):
    from flowgraph.framework.apply_op import apply_op

    return apply_op("Identity", [x], name=name).outputs[0]


def _pick(new, old, new_name, old_name):
    if new is not None and old is not None:
        raise TypeError(
            f"{new_name} and {old_name} arguments are mutually exclusive; use {new_name}"
        )
    return new if new is not None else old


def _build_branch(ctx: CondContext, fn, which: str):
    ctx.enter()
    try:
        result = fn()
        if result is None:
            raise ValueError(f"{which} must have a return value.")
        flat = []
        for v in nest.flatten(result):
            if isinstance(v, Operation):
                with ctx.graph.control_dependencies([v]):
                    v = _identity(ctx.pivot, "Identity")
            else:
                v = convert_to_tensor(v)
                if not is_inside(context_of(v.op), ctx):
                    v = ctx.add_value(v)
            flat.append(v)
    finally:
        ctx.exit()
    return result, flat


def cond(pred, true_fn=None, false_fn=None, strict=False, name=None, fn1=None, fn2=None):
    """Returns true_fn() if pred else false_fn(); only the taken branch runs.

    Example: y = flowgraph.cond(x < 0, lambda: -x, lambda: x)
    """
    true_fn = _pick(true_fn, fn1, "true_fn", "fn1")
    false_fn = _pick(false_fn, fn2, "false_fn", "fn2")
    if not callable(true_fn):
        raise TypeError("true_fn must be callable.")
    if not callable(false_fn):
        raise TypeError("false_fn must be callable.")
    site = "{}:{} in {}".format(*user_frame())
    graph = pred.graph if isinstance(pred, Tensor) else default_graph.get()
    with graph.name_scope(name or "cond") as scope:
        pred = convert_to_tensor(pred, dtype=dtypes.bool_)
        if pred.shape.ndims not in (None, 0):
            raise ValueError(
                f"cond '{scope[:-1]}' (created at {site}): pred must be a scalar, got shape {pred.shape}"
            )
        p_false, p_true = primitives.switch(pred, pred)
        pivot_t = _identity(p_true, "switch_t")
        pivot_f = _identity(p_false, "switch_f")
        pred = _identity(pred, "pred_id")
        ctx_t = CondContext(graph, pred, pivot_t, 1, scope + "cond_text")
        ctx_f = CondContext(graph, pred, pivot_f, 0, scope + "cond_text_1")
        pivot_t.op._control_flow_context = ctx_t
        pivot_f.op._control_flow_context = ctx_f
        res_t, flat_t = _build_branch(ctx_t, true_fn, "true_fn")
        res_f, flat_f = _build_branch(ctx_f, false_fn, "false_fn")
        try:
            nest.assert_same_structure(res_t, res_f, "branch outputs")
        except ValueError as e:
            raise ValueError(
                f"cond '{scope[:-1]}' (created at {site}): true_fn and false_fn must return the same "
                f"structure: {e}"
            ) from None
        for t, f in zip(flat_t, flat_f):
            if t.dtype.base_dtype != f.dtype.base_dtype:
                raise ValueError(
                    f"cond '{scope[:-1]}' (created at {site}): outputs of true_fn and false_fn must "
                    f"have the same type: {t.dtype.base_dtype.name}, {f.dtype.base_dtype.name}"
                )
        merges = [primitives.merge([f, t])[0] for f, t in zip(flat_f, flat_t)]
        for m in merges:
            m.op._cond_context = (
                ctx_t  # its predicate routes the gradient (gradients/control_flow.py)
            )
    packed = nest.pack_sequence_as(res_t, merges)
    if (
        not strict
        and isinstance(packed, (list, tuple))
        and len(packed) == 1
        and not hasattr(packed, "_fields")
    ):
        return packed[0]
    return packed


def _chained(pred, true_fn, false_fn, strict):
    """One link of case's chain: cond(pred, true_fn, false_fn), built when called."""
    return lambda: cond(pred, true_fn, false_fn, strict=strict)


def case(pred_fn_pairs, default=None, exclusive=False, strict=False, name="case"):
    """The first pair whose predicate holds decides (a chain of conds); `default` otherwise.

    With exclusive=True, more than one true predicate is an InvalidArgumentError at run time.
    """
    from flowgraph.ops import math as math_ops

    if isinstance(pred_fn_pairs, dict):
        pred_fn_pairs = list(pred_fn_pairs.items())
    pairs = list(pred_fn_pairs)
    for p, f in pairs:
        if not callable(f):
            raise TypeError(f"fn for pred {getattr(p, 'name', p)} must be callable.")
    if default is None:
        if not pairs:
            raise ValueError("case needs at least one predicate/function pair or a default")
        *pairs, (_last_pred, default) = pairs
    graph = default_graph.get()
    with graph.name_scope(name) as scope:
        preds = [convert_to_tensor(p, dtype=dtypes.bool_) for p, _ in pairs]
        if exclusive and len(preds) > 1:
            from flowgraph.ops import array as array_ops
            from flowgraph.ops import logging as logging_ops
            from flowgraph.ops import reduction

            count = reduction.reduce_sum(math_ops.cast(array_ops.stack(preds), dtypes.int32))
            check = logging_ops.Assert(
                count <= 1, [f"More than one condition evaluated as True in {scope[:-1]}"]
            )
            with graph.control_dependencies([check]):
                preds = [array_ops.identity(p) for p in preds]
        fn = default
        for p, f in reversed(list(zip(preds, [f for _, f in pairs]))):
            fn = _chained(p, f, fn, strict)
        return fn()
