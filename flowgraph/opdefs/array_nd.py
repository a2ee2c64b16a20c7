"""OpDefs of index arithmetic over N-d tensors (TensorFlow's array_ops.cc): batched sorted
search (LowerBound, UpperBound), UnravelIndex, the functional scatters TensorScatter{Update,
Add, Sub, Max, Min} that return a new tensor, and ExtractImagePatches (im2col as an op).
"""

from __future__ import annotations

from flowgraph.core.op_def import OpDef, register_op
from flowgraph.core.shapes import TensorShape, unknown_shape
from flowgraph.opdefs.array import dims_of
from flowgraph.opdefs.array_index import check_scatter_nd
from flowgraph.opdefs.nn_conv import window_geometry


def _bound_shape(ctx) -> TensorShape:
    """sorted_inputs [B, N], values [B, M] -> [B, M]."""
    ctx.input_shapes[0].with_rank(2)
    return ctx.input_shapes[1].with_rank(2)


for _op in ("LowerBound", "UpperBound"):
    register_op(
        OpDef(
            _op,
            inputs=["sorted_inputs: T", "values: T"],
            outputs=["output: out_type"],
            attrs=["T: type", "out_type: {int32, int64} = DT_INT32"],
            shape_fn=_bound_shape,
        )
    )


def _unravel_index_shape(ctx) -> TensorShape:
    """A scalar index gives [len(dims)]; a vector of n gives [len(dims), n]."""
    dims = ctx.input_shapes[1].with_rank(1)
    indices = ctx.input_shapes[0]
    if indices.ndims is None:
        return unknown_shape()
    if indices.ndims == 0:
        return TensorShape([dims[0].value])
    return TensorShape([dims[0].value, indices.num_elements()])


register_op(
    OpDef(
        "UnravelIndex",
        inputs=["indices: Tidx", "dims: Tidx"],
        outputs=["output: Tidx"],
        attrs=["Tidx: {int32, int64} = DT_INT32"],
        shape_fn=_unravel_index_shape,
    )
)


def _tensor_scatter_shape(ctx) -> TensorShape:
    tensor, indices, updates = (s.with_rank_at_least(1) for s in ctx.input_shapes)
    return check_scatter_nd(indices, updates, tensor)


for _op in ("Update", "Add", "Sub", "Max", "Min"):
    register_op(
        OpDef(
            f"TensorScatter{_op}",
            inputs=["tensor: T", "indices: Tindices", "updates: T"],
            outputs=["output: T"],
            attrs=["T: type", "Tindices: {int32, int64}"],
            shape_fn=_tensor_scatter_shape,
        )
    )


def patch_geometry(size, ksize: int, stride: int, rate: int, padding: str):
    """(output size, pad before) of ExtractImagePatches along one dim: the window geometry of
    convolution, except that VALID windows larger than the input give 0 outputs, not an error."""
    if padding == "VALID" and size is not None and size < (ksize - 1) * rate + 1:
        return 0, 0
    out, before, _ = window_geometry(size, ksize, stride, rate, padding)
    return out, before


def check_patch_attrs(attrs) -> tuple:
    """(ksizes, strides, rates) once each has 4 values of which only rows and columns are not
    1; otherwise ValueError, as TF's shape function."""
    lists = tuple(list(attrs[name]) for name in ("ksizes", "strides", "rates"))
    for name, values in zip(("ksizes", "strides", "rates"), lists):
        if len(values) != 4:
            raise ValueError(
                f"ExtractImagePatches requires the {name} attribute to contain 4 values, but "
                f"got: {len(values)}"
            )
        if values[0] != 1 or values[3] != 1:
            raise ValueError(
                f"ExtractImagePatches is only supported across rows and columns, but got "
                f"{name} {values}"
            )
        if min(values) < 1:
            raise ValueError(f"ExtractImagePatches {name} must be positive, got {values}")
    return lists


def _extract_image_patches_shape(ctx) -> TensorShape:
    """[B, H, W, D] -> [B, OH, OW, KH * KW * D]."""
    ksizes, strides, rates = check_patch_attrs(ctx.attrs)
    dims = dims_of(ctx.input_shapes[0].with_rank(4))
    batch, rows, cols, depth = dims
    out = [batch]
    for axis, size in ((1, rows), (2, cols)):
        out.append(
            patch_geometry(size, ksizes[axis], strides[axis], rates[axis], ctx.attrs["padding"])[0]
        )
    out.append(None if depth is None else depth * ksizes[1] * ksizes[2])
    return TensorShape(out)


register_op(
    OpDef(
        "ExtractImagePatches",
        inputs=["images: T"],
        outputs=["patches: T"],
        attrs=[
            "ksizes: list(int) >= 4",
            "strides: list(int) >= 4",
            "rates: list(int) >= 4",
            "T: realnumbertypes",
            "padding: {'SAME', 'VALID'}",
        ],
        shape_fn=_extract_image_patches_shape,
    )
)
