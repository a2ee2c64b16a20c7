"""OpDefs of the fused weight-gradient updates: a weight gradient's MatMul and the optimizer
update that is its only reader, as one op (whitepaper §4.1 memory; the memory optimizer's
rewrite in runtime/passes/weight_updates.py makes them, users never do).

`_FusedMatMul<Apply op>` takes the Apply op's inputs, TensorFlow's names and order, with its
gradient (`delta` or `grad`) replaced by the two MatMul operands `a` and `b` and the MatMul's
`transpose_a`/`transpose_b`; the gradient is op(a) @ op(b). `gradient` names the MatMul node
the rewrite removed, so `output_partition_graphs` shows what was fused. Only the types the
kernel computes in with BLAS (float, double).
"""

from __future__ import annotations

from flowgraph.core.op_def import OpDef, register_op
from flowgraph.opdefs.shape_fns import unknown
from flowgraph.opdefs.training import APPLY_OPS

FUSED_PREFIX = "_FusedMatMul"
# The Apply ops whose gradient input a MatMul may be fused into.
FUSABLE = ("ApplyGradientDescent", "ApplyMomentum")


def fused_op(apply_op: str) -> str:
    """'ResourceApplyMomentum' -> '_FusedMatMulResourceApplyMomentum'."""
    return FUSED_PREFIX + apply_op


def input_names(op_type: str) -> list[str]:
    """The input names of a fused op (or of the Apply op it is made from): the Apply op's,
    its gradient replaced by `a`, `b`."""
    names = []
    for name in APPLY_OPS[op_type.removeprefix(FUSED_PREFIX).removeprefix("Resource")][0]:
        name = name.rstrip("*")
        names.extend(("a", "b") if name in ("delta", "grad") else (name,))
    return names


def _register_all():
    for base in FUSABLE:
        spec, extra = APPLY_OPS[base]
        attrs = ["T: {float, double}", *extra, "use_locking: bool = false"]
        attrs += ["transpose_a: bool = false", "transpose_b: bool = false", "gradient: string"]
        for resource in (False, True):
            kind = "resource" if resource else "Ref(T)"
            inputs = []
            for name in spec:
                if name.endswith("*"):
                    inputs.append(f"{name[:-1]}: {kind}")
                elif name in ("delta", "grad"):
                    inputs.extend(("a: T", "b: T"))
                else:
                    inputs.append(f"{name}: T")
            register_op(
                OpDef(
                    fused_op(("Resource" if resource else "") + base),
                    inputs=inputs,
                    outputs=[] if resource else ["out: Ref(T)"],
                    attrs=attrs,
                    shape_fn=unknown,  # made after shape inference; the kernel checks shapes
                    is_stateful=True,
                )
            )


_register_all()
