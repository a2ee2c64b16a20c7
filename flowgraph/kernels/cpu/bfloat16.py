"""bfloat16 kernels: every op whose OpDef admits bfloat16 and that has a float32 kernel computes
in float32 and rounds its float results to bfloat16, as TensorFlow's CPU kernels do: Eigen widens
each bfloat16 to float and rounds to nearest even, except MatMul/BatchMatMul, which run a float32
GEMM and truncate (TF's FloatToBFloat16); both were checked bit for bit against TensorFlow.
Kernels that TF evaluates in bfloat16 steps (softmax, sigmoid) can differ by a few ulps.
The values are NumPy arrays of ml_dtypes.bfloat16, TensorFlow's and JAX's bfloat16 type.

Ops whose OpDef admits any type (data movement: Identity, Reshape, Concat, ...) are not
wrapped: they move bfloat16 values as they are. Cast converts natively (ml_dtypes rounds).
Importing this module after the other kernel modules registers the wrappers: a kernel constrained
to bfloat16 is chosen over the op's generic kernel (kernels/base.py).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from flowgraph.core import dtypes
from flowgraph.core.op_def import registered_ops
from flowgraph.kernels.base import find_kernel, has_kernel, register_kernel

BF16 = np.dtype(ml_dtypes.bfloat16)
_NATIVE = {"Cast", "Bitcast"}  # convert bfloat16 themselves


def _widen(x):
    return x.astype(np.float32) if isinstance(x, np.ndarray) and x.dtype == BF16 else x


def _round(x):
    if isinstance(x, (np.ndarray, np.generic)) and x.dtype == np.float32:
        return np.asarray(x).astype(BF16)
    return x


def _truncate(x):
    """float32 -> bfloat16 by dropping the low 16 bits (NaN stays NaN)."""
    if not (isinstance(x, (np.ndarray, np.generic)) and x.dtype == np.float32):
        return x
    x = np.asarray(x)
    bits = (x.view(np.uint32) >> 16).astype(np.uint16).view(BF16)
    return np.where(np.isnan(x), np.asarray(np.nan, BF16), bits)


_TRUNCATING = {"MatMul", "BatchMatMul", "BatchMatMulV2"}


def _wrap(kdef, rounded: list[bool]):
    """`rounded[i]`: output i has the bfloat16 type attr (a fixed float output, such as
    ResizeBilinear's, stays float32)."""
    to_bf16 = _truncate if kdef.op_type in _TRUNCATING else _round

    def kernel(ctx, *args):
        out = kdef.fn(ctx, *(_widen(a) for a in args))
        if isinstance(out, tuple):
            return tuple(to_bf16(o) if r else o for o, r in zip(out, rounded))
        return to_bf16(out) if rounded[0] else out

    kernel.__name__ = f"{kdef.fn.__name__}_bfloat16"
    kernel.__doc__ = f"{kdef.op_type} on bfloat16: the float32 kernel, rounded back."
    return kernel


def _type_attrs(op_def) -> list[str]:
    """The type attrs that admit bfloat16 explicitly (not 'any type')."""
    return [
        name
        for name, a in op_def.attrs.items()
        if a.type == "type" and a.allowed is not None and dtypes.bfloat16 in a.allowed
    ]


def register_all():
    for op_type, op_def in sorted(registered_ops().items()):
        if op_type in _NATIVE or op_def.is_stateful:  # random ops own their bfloat16 streams
            continue
        for attr in _type_attrs(op_def):
            float_attrs = {attr: dtypes.float32}
            if not has_kernel(op_type, "CPU", float_attrs):
                continue
            kdef = find_kernel(op_type, "CPU", float_attrs)
            if kdef.step or kdef.async_:
                continue
            register_kernel(
                op_type,
                dtypes_=[dtypes.bfloat16],
                type_attr=attr,
                expensive=kdef.expensive,
                intra_op=kdef.intra_op,
            )(_wrap(kdef, [arg.type_attr == attr for arg in op_def.outputs] or [False]))


register_all()
