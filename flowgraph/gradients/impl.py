"""tf.gradients: symbolic differentiation by extending the graph backwards (whitepaper §4.1).

"When TensorFlow needs to compute the gradient of a tensor C with respect to some tensor I on
which C depends, it first finds the path in the computation graph from I to C. Then it
backtracks from C to I, and for each operation on the backward path it adds a node to the
TensorFlow graph, composing the partial gradients along the backwards path using the chain
rule." The algorithm, as in TensorFlow:

1. Mark the ops reachable forward from `xs` (through floating-point edges only), then keep
   those also reachable backward from `ys`: only these "between" ops get gradient nodes.
2. Each between op has a pending count: the number of its consumers that are between ops. An op
   is ready for backprop once every consumer has delivered its input gradients.
3. Pop a ready op, sum the gradients its outputs received (AddN, or concatenation when all are
   IndexedSlices), give zeros to outputs that received none, and call its gradient function in
   the name scope `gradients/<op name>_grad`. Inputs then receive those gradients.
4. The gradient of x is what x's op received; None when x does not reach ys.

Because gradients are ordinary ops, gradients of gradients work (`hessians`).
"""

from __future__ import annotations

import collections
import contextlib
import enum

from flowgraph.core import dtypes
from flowgraph.framework import convert, default_graph, jit
from flowgraph.framework.indexed_slices import IndexedSlices
from flowgraph.framework.operation import Operation, Tensor
from flowgraph.gradients import control_flow, registry, util
from flowgraph.gradients.aggregation import AggregationMethod, aggregate, sum_dense
from flowgraph.ops.control_flow.contexts import WhileContext, context_of


class UnconnectedGradients(enum.Enum):
    """What gradients() returns for an x that ys do not depend on (tf.UnconnectedGradients)."""

    NONE = "none"
    ZERO = "zero"


def _is_backpropagatable(t: Tensor) -> bool:
    """Gradients flow only through floating-point, complex and resource/variant edges."""
    dt = t.dtype.base_dtype
    return dt.is_floating or dt.is_complex or dt in (dtypes.resource, dtypes.variant)


def _is_trainable(t: Tensor) -> bool:
    dt = t.dtype.base_dtype
    return dt.is_floating or dt.is_complex or dt in (dtypes.resource, dtypes.variant)


def _as_list(x) -> list:
    if x is None:
        return []
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _to_graph_tensor(x, name: str, as_ref: bool = False):
    if isinstance(x, (Tensor, IndexedSlices)):
        return x
    if hasattr(x, "_as_graph_element") and not as_ref:
        return x._as_graph_element()
    return convert.convert_to_tensor(x, name=name, as_ref=as_ref)


def _between_ops(
    to_ops: list[Operation], from_ops: list[Operation], exclude=frozenset()
) -> set[Operation]:
    """Ops on some path from `from_ops` to `to_ops` (steps 1 of the module docstring); paths
    never pass through `exclude` (a loop's own Merge/Switch/NextIteration ring)."""
    reached: set[Operation] = set()
    queue = collections.deque(from_ops)
    while queue:
        op = queue.popleft()
        if op in reached or op in exclude:
            continue
        reached.add(op)
        for out in op.outputs:
            if _is_backpropagatable(out):
                queue.extend(out.consumers())
    between: set[Operation] = set()
    queue = collections.deque(op for op in to_ops if op in reached)
    while queue:
        op = queue.popleft()
        if op in between:
            continue
        between.add(op)
        queue.extend(t.op for t in op.inputs if t.op in reached)
    return between


def _pending_counts(between: set[Operation]) -> dict[Operation, int]:
    counts = {op: 0 for op in between}
    for op in between:
        for t in op.inputs:
            if t.op in between:
                counts[t.op] += 1
    return counts


def _stop_ops(from_ops, stop_gradient_ops, counts) -> set[Operation]:
    """xs' ops that no between op feeds stop backprop (gradients go no further than xs), and so
    do the ops of `stop_gradients`."""
    stops = set(stop_gradient_ops)
    for op in from_ops:
        if all(counts.get(t.op, 0) == 0 for t in op.inputs):
            stops.add(op)
    return stops


def _default_grad_y(y: Tensor, i: int) -> Tensor:
    """ones_like(y) as TF builds it: Fill(shape(y), Const 1 named grad_ys_<i>)."""
    if y.dtype.is_complex:
        raise TypeError(
            f"Gradients of complex tensors ({y}) must set grad_ys (y.dtype = {y.dtype.name})"
        )
    dims = util.shape(y)
    one = util.constant(1, y.dtype.base_dtype, name=f"grad_ys_{i}", graph=y.graph)
    return util.build("Fill", dims, one)


def _check_grad_y(y: Tensor, grad_y, i: int):
    if isinstance(grad_y, (Tensor, IndexedSlices)):
        gdt, ydt = grad_y.dtype.base_dtype, y.dtype.base_dtype
        if ydt.is_complex != gdt.is_complex or (ydt.is_floating and not gdt.is_floating):
            raise TypeError(
                f"Gradient type {gdt.name} generated for tensor {y.name} with type {ydt.name} "
                f"must be {'complex' if ydt.is_complex else 'real'}"
            )
        if ydt.is_integer and gdt != ydt:
            raise TypeError(
                f"Gradient type {gdt.name} generated for integer tensor {y.name} with type "
                f"{ydt.name} must be {ydt.name}"
            )
        return grad_y
    return convert.convert_to_tensor(grad_y, dtype=y.dtype.base_dtype, name=f"grad_ys_{i}")


@contextlib.contextmanager
def _maybe_colocate(graph, op: Operation, colocate: bool):
    if colocate:
        with graph.colocate_with(op):
            yield
    else:
        yield


def _gate(graph, in_grads: list) -> list:
    """gate_gradients: no input gradient of the op is usable before all are computed
    (TF's control_flow_ops.tuple)."""
    present = [g for g in in_grads if g is not None]
    if len(present) <= 1:
        return in_grads
    with (
        graph.device(None),
        graph.colocate_with(None, ignore_existing=True),
        graph.name_scope("tuple"),
    ):
        ops = []
        for g in present:
            op = g.op if isinstance(g, (Tensor, IndexedSlices)) else g
            if op not in ops:
                ops.append(op)
        with graph.control_dependencies(ops):
            gate = util.build("NoOp", name="group_deps")
        out = []
        for g in in_grads:
            if g is None:
                out.append(None)
                continue
            with graph.control_dependencies([gate]):
                if isinstance(g, IndexedSlices):
                    values = util.build("Identity", g.values, name="control_dependency")
                    out.append(IndexedSlices(values, g.indices, g.dense_shape))
                else:
                    out.append(util.build("Identity", g, name="control_dependency"))
        return out


def _gradient_function(op: Operation):
    """The op's gradient function, honoring a `gradient_override_map` recorded at creation."""
    op_type = op._attrs.get("_gradient_op_type", op.type)
    if isinstance(op_type, bytes):
        op_type = op_type.decode()
    if not op.inputs:
        return None
    try:
        return registry.get_gradient_function(op_type)
    except LookupError:
        raise LookupError(
            f"No gradient defined for operation '{op.name}' (op type: {op_type})"
        ) from None


def gradients(
    ys,
    xs,
    grad_ys=None,
    name="gradients",
    colocate_gradients_with_ops=False,
    gate_gradients=False,
    aggregation_method=None,
    stop_gradients=None,
    unconnected_gradients=UnconnectedGradients.NONE,
):
    """Symbolic partial derivatives of sum(ys) with respect to each x in xs.

    Returns a list with one entry per x: a Tensor, an IndexedSlices (gathers), or None when x is
    not connected to ys (or zeros with unconnected_gradients='zero').

    Example: dw, db = tf.gradients(loss, [w, b])
    """
    ys = [_to_graph_tensor(y, "y") for y in _as_list(ys)]
    xs = [_to_graph_tensor(x, "x", as_ref=True) for x in _as_list(xs)]
    stop_gradients = [_to_graph_tensor(s, "stop") for s in _as_list(stop_gradients)]
    if grad_ys is None:
        grad_ys = [None] * len(ys)
    else:
        grad_ys = _as_list(grad_ys)
    if len(grad_ys) != len(ys):
        raise ValueError(f"Passed {len(grad_ys)} grad_ys for {len(ys)} ys")
    if aggregation_method is None:
        aggregation_method = AggregationMethod.DEFAULT
    if aggregation_method not in (
        AggregationMethod.ADD_N,
        AggregationMethod.EXPERIMENTAL_TREE,
        AggregationMethod.EXPERIMENTAL_ACCUMULATE_N,
    ):
        raise ValueError(f"Invalid aggregation_method specified {aggregation_method}.")
    unconnected_gradients = UnconnectedGradients(
        unconnected_gradients.value
        if isinstance(unconnected_gradients, UnconnectedGradients)
        else unconnected_gradients
    )
    if not ys:
        raise ValueError("gradients() needs at least one y")
    graph = ys[0].graph
    for t in ys + xs + stop_gradients:
        if t.graph is not graph:
            raise ValueError(f"{t.name} belongs to {t.graph!r}, but ys belong to {graph!r}")
    with graph.as_default(), graph.name_scope(name or "gradients"):
        return _backprop(
            graph,
            ys,
            xs,
            grad_ys,
            colocate_gradients_with_ops,
            gate_gradients,
            aggregation_method,
            stop_gradients,
            unconnected_gradients,
        )


def _backprop(graph, ys, xs, grad_ys, colocate, gate, method, stop_gradients, unconnected):
    for i, (y, g) in enumerate(zip(ys, grad_ys)):
        with _maybe_colocate(graph, y.op, colocate):
            grad_ys[i] = _default_grad_y(y, i) if g is None else _check_grad_y(y, g, i)
    level = graph._control_flow_context  # None, or the gradient loop of an enclosing backprop
    for y in ys:
        node = _loop_of(y.op, level)
        if node is not y.op and y.op not in [lv.exit.op for lv in node.loop_vars]:
            raise ValueError(
                f"Cannot take the gradient of {y.name}: it is computed inside the body of a "
                "while_loop; differentiate the loop's outputs instead"
            )
    grads: dict[Operation, list] = {}
    for y, g in zip(ys, grad_ys):
        _add_grad(grads, y, g)
    _propagate(
        graph,
        level,
        [y.op for y in ys],
        [x.op for x in xs],
        grads,
        [s.op for s in stop_gradients],
        gate,
        method,
        colocate,
        exclude=set(),
    )
    return [_result(grads, x, unconnected) for x in xs]


def _loop_of(op: Operation, level):
    """`op` itself if it belongs to `level` (None: outside every loop), else the outermost
    while loop inside `level` that contains it: a loop is differentiated as one node."""
    ctx = context_of(op)
    outermost = None
    while ctx is not None and ctx is not level:
        if isinstance(ctx, WhileContext):
            outermost = ctx
        ctx = ctx.outer_context
    return op if outermost is None else outermost


def _propagate(graph, level, to_ops, from_ops, grads, stop_ops, gate, method, colocate, exclude):
    """Steps 1-3 of the module docstring over the ops of one level (a loop body, or outside all
    loops); a loop nested in the level is one node whose gradient is a whole backward loop."""
    between = _between_ops(to_ops, from_ops, exclude)
    counts: dict = {}
    for op in between:
        counts.setdefault(_loop_of(op, level), 0)
    for op in between:
        node = _loop_of(op, level)
        for t in op.inputs:
            if t.op in between and _loop_of(t.op, level) is not node:
                counts[_loop_of(t.op, level)] += 1
    stops = _stop_ops(from_ops, stop_ops, counts)
    queue = collections.deque()
    queued: set = set()
    for op in to_ops:
        node = _loop_of(op, level)
        if counts.get(node, -1) == 0 and node not in queued:
            queued.add(node)
            queue.append(node)
    while queue:
        node = queue.popleft()
        if isinstance(node, WhileContext):
            inputs = _backprop_loop(graph, node, between, grads, gate, method, colocate)
        else:
            with _maybe_colocate(graph, node, colocate):
                _backprop_op(graph, node, grads, stops, gate, method)
            inputs = node.inputs
        for t in inputs:
            key = _loop_of(t.op, level)
            if key in counts and t.op in between:
                counts[key] -= 1
                if counts[key] == 0 and key not in queued:
                    queued.add(key)
                    queue.append(key)


def _backprop_loop(graph, loop, between, grads, gate, method, colocate) -> list:
    """The gradient of a whole while loop (gradients/control_flow.py); returns the outside
    tensors the loop consumed, whose gradients it delivered."""
    exit_grads = [aggregate(grads, lv.exit.op, method)[0] for lv in loop.loop_vars]

    def backprop_body(level, ys, grad_ys, xs):
        body_grads: dict[Operation, list] = {}
        for y, g in zip(ys, grad_ys):
            _add_grad(body_grads, y, g)
        ring = {
            op
            for lv in level.loop_vars
            for op in (lv.merge.op, lv.switch, lv.next_iteration.op, lv.exit.op, lv.enter.op)
        }
        _propagate(
            graph,
            level,
            [y.op for y in ys],
            [x.op for x in xs],
            body_grads,
            [],
            gate,
            method,
            colocate,
            exclude=ring,
        )
        return [_result(body_grads, x, UnconnectedGradients.NONE) for x in xs]

    for outside, g in control_flow.loop_gradient(graph, loop, exit_grads, backprop_body):
        _add_grad(grads, outside, g)
    return [
        t
        for op in between
        if _loop_of(op, context_of_level(loop)) is loop
        for t in op.inputs
        if _loop_of(t.op, context_of_level(loop)) is not loop
    ]


def context_of_level(loop):
    """The level a loop node lives in: its nearest enclosing while context (or None)."""
    ctx = loop.outer_context
    while ctx is not None and not isinstance(ctx, WhileContext):
        ctx = ctx.outer_context
    return ctx


def _backprop_op(graph, op: Operation, grads: dict, stops: set, gate: bool, method):
    """Step 3 of the module docstring for one op."""
    out_grads = aggregate(grads, op, method)
    has_grads = any(g is not None for g in out_grads)
    grad_fn = _gradient_function(op) if has_grads and op not in stops else None
    if grad_fn is None:
        return
    for i, g in enumerate(out_grads):
        if g is None and _is_trainable(op.outputs[i]):
            out_grads[i] = control_flow.zeros_for_output(op, i)
    with graph.name_scope(op.name + "_grad") as scope, jit.maybe_compile(graph, scope, op):
        in_grads = grad_fn(op, *out_grads)
        in_grads = list(in_grads) if isinstance(in_grads, (list, tuple)) else [in_grads]
        if len(in_grads) != len(op.inputs):
            raise ValueError(
                f"Num gradients {len(in_grads)} generated for op {op.node_def} do not match num "
                f"inputs {len(op.inputs)}"
            )
        if gate:
            in_grads = _gate(graph, in_grads)
    for i, (t, g) in enumerate(zip(op.inputs, in_grads)):
        if g is None:
            continue
        if isinstance(g, Tensor) and t.dtype.base_dtype != dtypes.resource:
            try:
                g.set_shape(t.shape)
            except ValueError:
                raise ValueError(
                    "Incompatible shapes between op input and calculated input gradient. Forward "
                    f"operation: {op.name}. Input index: {i}. Original input shape: {t.shape}. "
                    f"Calculated input gradient shape: {g.shape}"
                ) from None
        _add_grad(grads, t, g)


def _add_grad(grads: dict, t: Tensor, g):
    out = grads.setdefault(t.op, [[] for _ in t.op.outputs])
    out[t.value_index].append(g)


def _result(grads: dict, x: Tensor, unconnected: UnconnectedGradients):
    op_grads = grads.get(x.op)
    g = None
    if op_grads is not None:
        g = op_grads[x.value_index]
        if isinstance(g, list):  # received gradients but x's op never ran backprop
            g = [t for t in g if t is not None]
            g = (
                None
                if not g
                else g[0]
                if len(g) == 1
                else sum_dense([convert.convert_to_tensor(t) for t in g], AggregationMethod.ADD_N)
            )
    if g is None and unconnected == UnconnectedGradients.ZERO:
        return util.zeros_like(x)
    return g


def hessians(
    ys,
    xs,
    name="hessians",
    colocate_gradients_with_ops=False,
    gate_gradients=False,
    aggregation_method=None,
):
    """The Hessian of sum(ys) with respect to each x in xs: a tensor of shape x.shape + x.shape.

    Built as the gradient of each component of the gradient (a Python loop over the components
    of the flattened gradient, so intended for small x).
    """
    xs = _as_list(xs)
    kwargs = {
        "colocate_gradients_with_ops": colocate_gradients_with_ops,
        "gate_gradients": gate_gradients,
        "aggregation_method": aggregation_method,
    }
    graph = default_graph.get() if not xs else _to_graph_tensor(xs[0], "x").graph
    results = []
    with graph.as_default(), graph.name_scope(name):
        for x in xs:
            x = _to_graph_tensor(x, "x")
            n = x.shape.num_elements()
            if n is None:
                raise ValueError(
                    f"hessians() needs x with a fully defined static shape; {x.name} has shape "
                    f"{x.shape}"
                )
            grad = gradients(ys, x, **kwargs)[0]
            if grad is None:
                results.append(None)
                continue
            grad = convert.convert_to_tensor(grad)
            flat = util.reshape(grad, [-1])
            rows = []
            for j in range(n):
                component = util.build(
                    "StridedSlice",
                    flat,
                    [j],
                    [j + 1],
                    [1],
                    shrink_axis_mask=1,
                    begin_mask=0,
                    end_mask=0,
                    ellipsis_mask=0,
                    new_axis_mask=0,
                )
                row = gradients(component, x, **kwargs)[0]
                rows.append(util.zeros_like(x) if row is None else convert.convert_to_tensor(row))
            stacked = util.build("Pack", rows, axis=0)
            results.append(util.reshape(stacked, x.shape.as_list() + x.shape.as_list()))
    return results
