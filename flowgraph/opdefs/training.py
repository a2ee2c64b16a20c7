"""OpDefs of TensorFlow's fused training ops (training_ops.cc): one op per optimizer update.

An optimizer's update rule is a single kernel that reads the variable and its accumulators and
writes them back (whitepaper §4.1, "Gradient Computation", and §2 "Variables": the update is a
stateful op on a reference). Each `Apply*` op takes the variable and its accumulators as
`Ref(T)` inputs and outputs the variable's reference; `SparseApply*` updates only the rows named
by `indices` (gradients of embedding lookups, as IndexedSlices). `ResourceApply*` /
`ResourceSparseApply*` are the same updates on resource variables (what TF2 exports); they have
no outputs.

Inputs are written exactly as TensorFlow declares them, so GraphDefs from real TensorFlow import
unchanged. The shape function is derived from the input names: the variable and its accumulators
must have one shape, learning rates and coefficients are scalars, and the sparse forms need a
vector of indices with one gradient row per index.
"""

from __future__ import annotations

from flowgraph.core.op_def import OpDef, register_op
from flowgraph.core.shapes import TensorShape, unknown_shape

# Coefficient inputs: each must be a scalar.
SCALARS = frozenset(
    [
        "lr",
        "alpha",
        "momentum",
        "rho",
        "epsilon",
        "beta1_power",
        "beta2_power",
        "beta1",
        "beta2",
        "l1",
        "l2",
        "l2_shrinkage",
        "lr_power",
    ]
)

# op type (the Apply* form) -> (TensorFlow's input names in order, extra attrs). A name ending in
# '*' is a reference (the variable or one of its accumulators).
APPLY_OPS = {
    "ApplyGradientDescent": (["var*", "alpha", "delta"], []),
    "ApplyMomentum": (["var*", "accum*", "lr", "grad", "momentum"], ["use_nesterov: bool = false"]),
    "ApplyAdagrad": (["var*", "accum*", "lr", "grad"], ["update_slots: bool = true"]),
    "ApplyAdadelta": (["var*", "accum*", "accum_update*", "lr", "rho", "epsilon", "grad"], []),
    "ApplyRMSProp": (["var*", "ms*", "mom*", "lr", "rho", "momentum", "epsilon", "grad"], []),
    "ApplyCenteredRMSProp": (
        ["var*", "mg*", "ms*", "mom*", "lr", "rho", "momentum", "epsilon", "grad"],
        [],
    ),
    "ApplyAdam": (
        [
            "var*",
            "m*",
            "v*",
            "beta1_power",
            "beta2_power",
            "lr",
            "beta1",
            "beta2",
            "epsilon",
            "grad",
        ],
        ["use_nesterov: bool = false"],
    ),
    "ApplyFtrl": (
        ["var*", "accum*", "linear*", "grad", "lr", "l1", "l2", "lr_power"],
        ["multiply_linear_by_lr: bool = false"],
    ),
    "ApplyFtrlV2": (
        ["var*", "accum*", "linear*", "grad", "lr", "l1", "l2", "l2_shrinkage", "lr_power"],
        ["multiply_linear_by_lr: bool = false"],
    ),
    "ApplyProximalGradientDescent": (["var*", "alpha", "l1", "l2", "delta"], []),
    "ApplyProximalAdagrad": (["var*", "accum*", "lr", "l1", "l2", "grad"], []),
}

# op type (the SparseApply* form) -> (input names, extra attrs).
SPARSE_APPLY_OPS = {
    "SparseApplyMomentum": (
        ["var*", "accum*", "lr", "grad", "indices", "momentum"],
        ["use_nesterov: bool = false"],
    ),
    "SparseApplyAdagrad": (
        ["var*", "accum*", "lr", "grad", "indices"],
        ["update_slots: bool = true"],
    ),
    "SparseApplyAdadelta": (
        ["var*", "accum*", "accum_update*", "lr", "rho", "epsilon", "grad", "indices"],
        [],
    ),
    "SparseApplyRMSProp": (
        ["var*", "ms*", "mom*", "lr", "rho", "momentum", "epsilon", "grad", "indices"],
        [],
    ),
    "SparseApplyCenteredRMSProp": (
        ["var*", "mg*", "ms*", "mom*", "lr", "rho", "momentum", "epsilon", "grad", "indices"],
        [],
    ),
    "SparseApplyFtrl": (
        ["var*", "accum*", "linear*", "grad", "indices", "lr", "l1", "l2", "lr_power"],
        ["multiply_linear_by_lr: bool = false"],
    ),
    "SparseApplyFtrlV2": (
        [
            "var*",
            "accum*",
            "linear*",
            "grad",
            "indices",
            "lr",
            "l1",
            "l2",
            "l2_shrinkage",
            "lr_power",
        ],
        ["multiply_linear_by_lr: bool = false"],
    ),
    "SparseApplyProximalGradientDescent": (["var*", "alpha", "l1", "l2", "grad", "indices"], []),
    "SparseApplyProximalAdagrad": (["var*", "accum*", "lr", "l1", "l2", "grad", "indices"], []),
}

# Element types the update kernels compute in (TF registers its CPU kernels for these).
FLOAT_TYPES = "{half, float, double}"
# Gradient descent and momentum are linear, so TF also runs them on complex numbers.
LINEAR_TYPES = "{half, float, double, complex64, complex128}"
TYPES = {
    "ApplyGradientDescent": LINEAR_TYPES,
    "ApplyMomentum": LINEAR_TYPES,
    "SparseApplyMomentum": LINEAR_TYPES,
}


def input_names(op_type: str) -> list[str]:
    """The input names of `op_type` (any of the Apply/SparseApply/Resource* forms), without '*'."""
    base = op_type.removeprefix("Resource")
    names = (APPLY_OPS.get(base) or SPARSE_APPLY_OPS[base])[0]
    return [n.rstrip("*") for n in names]


def _merge(shape: TensorShape, other: TensorShape, what: str) -> TensorShape:
    if not shape.is_compatible_with(other):
        raise ValueError(f"Shapes must be equal rank, but are {shape} and {other} ({what})")
    return shape.merge_with(other)


def _shape_fn(names: list[str]):
    """Builds the shape function of one Apply op from its input names."""

    def shape_fn(ctx):
        shapes = dict(zip(names, ctx.input_shapes))
        var = unknown_shape()
        for name in names:
            if name in SCALARS:
                if shapes[name].ndims not in (None, 0):
                    raise ValueError(
                        f"Shape must be rank 0 but is rank {shapes[name].ndims} ({name})"
                    )
            elif name not in ("grad", "delta", "indices"):
                var = _merge(var, shapes[name], f"var and {name}")
        grad = shapes.get("grad", shapes.get("delta"))
        if "indices" in shapes:
            indices = shapes["indices"].with_rank(1)
            grad = grad.with_rank_at_least(1)
            _merge(
                TensorShape([indices[0].value]), TensorShape([grad[0].value]), "grad and indices"
            )
            if var.ndims is not None:
                var.with_rank_at_least(1)
                _merge(var[1:], grad[1:], "var and grad, dimensions after the first")
        else:
            var = _merge(var, grad, "var and grad")
        return var

    return shape_fn


def _specs(names: list[str], var_kind: str) -> list[str]:
    specs = []
    for name in names:
        if name.endswith("*"):
            specs.append(f"{name[:-1]}: {var_kind}")
        elif name == "indices":
            specs.append("indices: Tindices")
        else:
            specs.append(f"{name}: T")
    return specs


def _register_all():
    for table in (APPLY_OPS, SPARSE_APPLY_OPS):
        for op_type, (names, extra) in table.items():
            attrs = (
                [f"T: {TYPES.get(op_type, FLOAT_TYPES)}"] + extra + ["use_locking: bool = false"]
            )
            if "indices" in names:
                attrs.insert(1, "Tindices: {int32, int64}")
            plain = [n.rstrip("*") for n in names]
            register_op(
                OpDef(
                    op_type,
                    inputs=_specs(names, "Ref(T)"),
                    outputs=["out: Ref(T)"],
                    attrs=attrs,
                    shape_fn=_shape_fn(plain),
                )
            )
            # The resource form: handles carry no static shape, so only scalars are checked.
            register_op(
                OpDef(
                    "Resource" + op_type,
                    inputs=_specs(names, "resource"),
                    outputs=[],
                    attrs=attrs,
                    shape_fn=lambda ctx: [],
                    is_stateful=True,
                )
            )


_register_all()
