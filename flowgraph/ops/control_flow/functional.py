"""Higher-order functions over the first dimension: map_fn, scan, foldl, foldr (TF1's
functional_ops), each a while_loop that reads its elements from TensorArrays."""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.framework import default_graph, nest
from flowgraph.framework.convert import convert_to_tensor
from flowgraph.ops.control_flow.while_loop import while_loop
from flowgraph.ops.tensor_array import TensorArray


def _num_elems(elems_flat):
    from flowgraph.ops import array as array_ops

    first = elems_flat[0]
    static = first.shape[0].value if first.shape.ndims else None
    if first.shape.ndims == 0:
        raise ValueError("elems must be a 1+ dimensional Tensor, not a scalar")
    for e in elems_flat[1:]:
        if e.shape.ndims and static is not None and e.shape[0].value not in (None, static):
            raise ValueError(
                f"All elems must have the same first dimension: {first.shape} vs {e.shape}"
            )
    return (static if static is not None else array_ops.shape(first)[0]), static


def _unstacked(elems_flat, n):
    return [
        TensorArray(e.dtype, size=n, dynamic_size=False, infer_shape=True).unstack(e)
        for e in elems_flat
    ]


def map_fn(
    fn,
    elems,
    dtype=None,
    parallel_iterations=None,
    back_prop=True,
    swap_memory=False,
    infer_shape=True,
    name=None,
):
    """[fn(e) for e in unstack(elems)], stacked; `dtype` gives fn's output structure if it differs.

    Example: squares = flowgraph.map_fn(lambda x: x * x, flowgraph.constant([1, 2, 3]))
    """
    if not callable(fn):
        raise TypeError("fn must be callable.")
    parallel_iterations = parallel_iterations or 10
    graph = default_graph.get()
    with graph.name_scope(name or "map"):
        elems_flat = [convert_to_tensor(e, name="elem") for e in nest.flatten(elems)]
        n, static_n = _num_elems(elems_flat)
        out_structure = dtype if dtype is not None else nest.map_structure(lambda e: e.dtype, elems)
        out_dtypes = [dtypes.as_dtype(d) for d in nest.flatten(out_structure)]
        elem_tas = _unstacked(elems_flat, n)
        acc_tas = [
            TensorArray(d, size=n, dynamic_size=False, infer_shape=infer_shape) for d in out_dtypes
        ]

        def body(i, *tas):
            x = nest.pack_sequence_as(elems, [ta.read(i) for ta in elem_tas])
            values = nest.flatten(fn(x))
            if len(values) != len(tas):
                raise ValueError(
                    f"fn returned {len(values)} values, but dtype describes {len(tas)}"
                )
            return (i + 1,) + tuple(ta.write(i, v) for ta, v in zip(tas, values))

        out = while_loop(
            lambda i, *_: i < n,
            body,
            (convert_to_tensor(0, name="i"),) + tuple(acc_tas),
            parallel_iterations=parallel_iterations,
            back_prop=back_prop,
            swap_memory=swap_memory,
        )
        results = [ta.stack() for ta in out[1:]]
        for r, ta in zip(results, out[1:]):
            if ta.element_shape.ndims is not None:
                r.set_shape([static_n] + ta.element_shape.as_list())
        return nest.pack_sequence_as(out_structure, results)


def scan(
    fn,
    elems,
    initializer=None,
    parallel_iterations=10,
    back_prop=True,
    swap_memory=False,
    infer_shape=True,
    reverse=False,
    name=None,
):
    """a_i = fn(a_{i-1}, elems[i]) for every i (the first a is `initializer`, else elems[0]);
    stacked."""
    return _scan(
        fn,
        elems,
        initializer,
        parallel_iterations,
        back_prop,
        swap_memory,
        infer_shape,
        reverse,
        name or "scan",
        keep_all=True,
    )


def foldl(
    fn,
    elems,
    initializer=None,
    parallel_iterations=10,
    back_prop=True,
    swap_memory=False,
    name=None,
):
    """fn(...fn(fn(initializer, elems[0]), elems[1])..., elems[n-1])."""
    return _scan(
        fn,
        elems,
        initializer,
        parallel_iterations,
        back_prop,
        swap_memory,
        True,
        False,
        name or "foldl",
        keep_all=False,
    )


def foldr(
    fn,
    elems,
    initializer=None,
    parallel_iterations=10,
    back_prop=True,
    swap_memory=False,
    name=None,
):
    """foldl over the elements in reverse order."""
    return _scan(
        fn,
        elems,
        initializer,
        parallel_iterations,
        back_prop,
        swap_memory,
        True,
        True,
        name or "foldr",
        keep_all=False,
    )


def _scan(
    fn,
    elems,
    initializer,
    parallel_iterations,
    back_prop,
    swap_memory,
    infer_shape,
    reverse,
    name,
    keep_all,
):
    if not callable(fn):
        raise TypeError("fn must be callable.")
    graph = default_graph.get()
    with graph.name_scope(name):
        elems_flat = [convert_to_tensor(e, name="elem") for e in nest.flatten(elems)]
        n, static_n = _num_elems(elems_flat)
        elem_tas = _unstacked(elems_flat, n)
        last = n - 1
        if initializer is None:
            a_structure = elems
            a_flat = [ta.read(last if reverse else 0) for ta in elem_tas]
            start = 1
        else:
            a_structure = initializer
            a_flat = [convert_to_tensor(a) for a in nest.flatten(initializer)]
            start = 0
        acc_tas = [
            TensorArray(a.dtype, size=n, dynamic_size=False, infer_shape=infer_shape)
            for a in a_flat
        ]
        if initializer is None and keep_all:
            acc_tas = [ta.write(last if reverse else 0, a) for ta, a in zip(acc_tas, a_flat)]
        k = len(a_flat)

        def body(i, *state):
            a, tas = state[:k], state[k:]
            idx = last - i if reverse else i
            x = nest.pack_sequence_as(elems, [ta.read(idx) for ta in elem_tas])
            new = nest.flatten(fn(nest.pack_sequence_as(a_structure, list(a)), x))
            if len(new) != k:
                raise ValueError(f"fn returned {len(new)} values, but the accumulator has {k}")
            if keep_all:
                tas = tuple(ta.write(idx, v) for ta, v in zip(tas, new))
            return (i + 1,) + tuple(new) + tuple(tas)

        loop_vars = (
            (convert_to_tensor(start, name="i"),)
            + tuple(a_flat)
            + (tuple(acc_tas) if keep_all else ())
        )
        out = while_loop(
            lambda i, *_: i < n,
            body,
            loop_vars,
            parallel_iterations=parallel_iterations,
            back_prop=back_prop,
            swap_memory=swap_memory,
        )
        if not keep_all:
            return nest.pack_sequence_as(a_structure, list(out[1 : 1 + k]))
        results = [ta.stack() for ta in out[1 + k :]]
        for r, a in zip(results, a_flat):
            if a.shape.ndims is not None:
                r.set_shape([static_n] + a.shape.as_list())
        return nest.pack_sequence_as(a_structure, results)
