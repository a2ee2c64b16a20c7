"""Building blocks of gradient graphs (whitepaper §4.1).

Gradient functions add ordinary ops to the graph. They build them through `build`, which names
nodes exactly as TensorFlow's generated op functions do: the op is `<scope>/<OpType>` (made
unique) and a Python value passed as an input becomes a Const named after the OpDef's argument
inside the op's scope, e.g. `gradients/add_grad/Sum/reduction_indices`. Matching TF's names
matters because programs fetch gradients by name (`gradients/MatMul_grad/MatMul:0`).

`shape` returns a Const when the static shape is fully known, like TF's `array_ops.shape`; most
gradient graphs of fixed-shape models therefore need no Shape ops at run time.
"""

from __future__ import annotations

import numpy as np

from flowgraph.core import dtypes
from flowgraph.core.op_def import get_op_def
from flowgraph.framework import convert
from flowgraph.framework.apply_op import apply_op, graph_of, preferred_input_dtype
from flowgraph.framework.operation import Tensor


def _is_graph_value(value) -> bool:
    return (
        isinstance(value, Tensor)
        or hasattr(value, "_as_graph_element")
        or (hasattr(value, "values") and hasattr(value, "indices"))
    )


def _const_dtype(op_def, arg, inputs_by_arg):
    """The dtype a Python value for `arg` must take: the arg's fixed type, or that of another
    input sharing its type attr; None lets TF1's inference decide (ints become int32)."""
    if arg.type is not None:
        return arg.type
    for other, value in inputs_by_arg:
        if other.type_attr == arg.type_attr and isinstance(value, Tensor):
            return value.dtype.base_dtype
    return None


def build(op_type: str, *inputs, name: str | None = None, **attrs):
    """Adds one `op_type` op named like TF's generated wrappers; returns its output, its outputs
    (a tuple) when it has several, or the Operation when it has none."""
    op_def = get_op_def(op_type)
    graph = graph_of(inputs)
    pairs = list(zip(op_def.inputs, inputs))
    with graph.as_default(), graph.name_scope(name or op_type) as scope:
        converted = []
        for arg, value in pairs:
            if _is_graph_value(value) or arg.number_attr or arg.type_list_attr:
                converted.append(value)
            else:
                dtype = _const_dtype(op_def, arg, pairs)
                preferred = preferred_input_dtype(op_def, arg, value, dtype)
                converted.append(
                    convert.convert_to_tensor(
                        value, dtype=dtype, preferred_dtype=preferred, name=arg.name, graph=graph
                    )
                )
        op = apply_op(op_type, converted, name=scope, graph=graph, **attrs)
    if len(op.outputs) == 1:
        return op.outputs[0]
    return tuple(op.outputs) if op.outputs else op


def constant(value, dtype, name: str = "Const", graph=None) -> Tensor:
    return convert.constant(value, dtype=dtype, name=name, graph=graph)


def shape(x: Tensor, out_type=dtypes.int32, name: str = "Shape") -> Tensor:
    """The shape of `x` as a 1-D tensor: a Const if statically known, else a Shape op."""
    if x.shape.is_fully_defined():
        return constant(x.shape.as_list(), out_type, name=name, graph=x.graph)
    return build("Shape", x, name=name, out_type=out_type)


def size(x: Tensor, out_type=dtypes.int32, name: str = "Size") -> Tensor:
    n = x.shape.num_elements()
    if n is not None:
        return constant(n, out_type, name=name, graph=x.graph)
    return build("Size", x, name=name, out_type=out_type)


def rank(x: Tensor, name: str = "Rank") -> Tensor:
    if x.shape.ndims is not None:
        return constant(x.shape.ndims, dtypes.int32, name=name, graph=x.graph)
    return build("Rank", x, name=name)


def slice_first(t: Tensor, name: str = "strided_slice") -> Tensor:
    """t[0] for a 1-D tensor (TF's `dense_shape[0]`)."""
    return build(
        "StridedSlice",
        t,
        [0],
        [1],
        [1],
        name=name,
        shrink_axis_mask=1,
        begin_mask=0,
        end_mask=0,
        ellipsis_mask=0,
        new_axis_mask=0,
    )


def reshape(x, shape_, name: str = "Reshape") -> Tensor:
    return build("Reshape", x, shape_, name=name)


def reduce_sum(x, axes, keep_dims: bool = False, name: str = "Sum") -> Tensor:
    """Sum over `axes` (a Python list, or a tensor of axes)."""
    return build("Sum", x, axes, name=name, keep_dims=keep_dims)


def zeros_like(x: Tensor, name: str = "zeros_like") -> Tensor:
    return build("ZerosLike", x, name=name)


def is_zeros(g) -> bool:
    """Whether the gradient `g` is known to be all zeros: a ZerosLike, which is what an output
    that received no gradient gets (gradients/impl.py). TF tags these (`_is_zeros_tensor`) so
    that the cross-entropies' gradients skip their second-order term, which would otherwise
    cost a Softmax, a reduction and four element-wise ops on every training step."""
    return g is None or (isinstance(g, Tensor) and g.op.type == "ZerosLike")


def ones_like(x: Tensor, name: str = "ones_like") -> Tensor:
    return build("OnesLike", x, name=name)


def cast(x: Tensor, dtype, name: str = "Cast") -> Tensor:
    dtype = dtypes.as_dtype(dtype).base_dtype
    if x.dtype.base_dtype == dtype:
        return x
    return build("Cast", x, name=name, DstT=dtype)


def add_n(tensors: list, name: str = "AddN") -> Tensor:
    if len(tensors) == 1:
        return build("Identity", tensors[0], name=name)
    return build("AddN", list(tensors), name=name)


def conj(x: Tensor) -> Tensor:
    """Complex conjugate; the identity (no op) for real tensors, like TF's math_ops.conj."""
    if x.dtype.is_complex:
        return build("Conj", x)
    return x


def static_value(t) -> np.ndarray | None:
    """The value of `t` when known at graph-construction time."""
    return convert.constant_value(t) if isinstance(t, Tensor) else None
