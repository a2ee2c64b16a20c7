"""Gradient functions of the matrix ops (whitepaper §4.1): MatMul, BatchMatMul and the
linear-algebra ops (inverse, determinant, Cholesky, solves, diagonals)."""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.gradients.math import reduce_to_inputs
from flowgraph.gradients.registry import register_gradient
from flowgraph.gradients.util import build, conj, constant


@register_gradient("MatMul")
def _matmul_grad(op, grad):
    """C = op(A) op(B): dA and dB are products of grad with the other operand, transposed to
    match each operand's layout (four cases, as in TensorFlow)."""
    t_a, t_b = op.get_attr("transpose_a"), op.get_attr("transpose_b")
    a, b = conj(op.inputs[0]), conj(op.inputs[1])
    if not t_a and not t_b:
        return build("MatMul", grad, b, transpose_b=True), build(
            "MatMul", a, grad, transpose_a=True
        )
    if not t_a and t_b:
        return build("MatMul", grad, b), build("MatMul", grad, a, transpose_a=True)
    if t_a and not t_b:
        return build("MatMul", b, grad, transpose_b=True), build("MatMul", a, grad)
    return (
        build("MatMul", b, grad, transpose_a=True, transpose_b=True),
        build("MatMul", grad, a, transpose_a=True, transpose_b=True),
    )


def _mm(a, b, adj_a=False, adj_b=False):
    """Batched matrix product with adjoints (BatchMatMulV2 also covers plain matrices)."""
    return build("BatchMatMulV2", a, b, adj_x=adj_a, adj_y=adj_b)


def _adjoint(x):
    rank = x.shape.ndims
    if rank is None:
        raise ValueError(f"the gradient needs the rank of {x.name}")
    perm = list(range(rank - 2)) + [rank - 1, rank - 2]
    return build("ConjugateTranspose" if x.dtype.is_complex else "Transpose", x, perm)


def _sum_batch_to(g, x):
    """Sums a batched-matmul gradient over the batch axes along which x was broadcast (g and x
    agree on the two matrix axes, so this is the broadcasting reduction of x against g)."""
    return reduce_to_inputs(x, g, g, None)[0]


def _batch_matmul_grads(op, grad):
    x, y = op.inputs
    adj_x, adj_y = op.get_attr("adj_x"), op.get_attr("adj_y")
    if not adj_x and not adj_y:
        return _mm(grad, y, adj_b=True), _mm(x, grad, adj_a=True)
    if not adj_x and adj_y:
        return _mm(grad, y), _mm(grad, x, adj_a=True)
    if adj_x and not adj_y:
        return _mm(y, grad, adj_b=True), _mm(x, grad)
    return _mm(y, grad, adj_a=True, adj_b=True), _mm(grad, x, adj_a=True, adj_b=True)


@register_gradient("BatchMatMul")
def _batch_matmul_grad(op, grad):
    return _batch_matmul_grads(op, grad)


@register_gradient("BatchMatMulV2")
def _batch_matmul_v2_grad(op, grad):
    gx, gy = _batch_matmul_grads(op, grad)
    return _sum_batch_to(gx, op.inputs[0]), _sum_batch_to(gy, op.inputs[1])


@register_gradient("MatrixInverse")
def _matrix_inverse_grad(op, grad):
    """d inv(A) = -inv(A) dA inv(A), so dL/dA = -inv(A)^H G inv(A)^H (adjoint: -C G^H C)."""
    c = op.outputs[0]
    if op.get_attr("adjoint"):
        return build("Neg", _mm(c, _mm(grad, c, adj_a=True)))
    return build("Neg", _mm(c, _mm(grad, c, adj_b=True), adj_a=True))


def _expand_last_two(t):
    return build("ExpandDims", build("ExpandDims", t, -1), -1)


@register_gradient("MatrixDeterminant")
def _matrix_determinant_grad(op, grad):
    """d det(A)/dA = det(A) inv(A)^H."""
    a, c = op.inputs[0], op.outputs[0]
    a_adj_inv = build("MatrixInverse", a, adjoint=True)
    return build("Mul", _expand_last_two(build("Mul", grad, c)), a_adj_inv)


@register_gradient("LogMatrixDeterminant")
def _log_matrix_determinant_grad(op, _, grad_log_abs):
    """d log|det A| / dA = inv(A)^H; the sign output is piecewise constant."""
    a_adj_inv = build("MatrixInverse", op.inputs[0], adjoint=True)
    return build("Mul", _expand_last_two(grad_log_abs), a_adj_inv)


@register_gradient("Cholesky")
def _cholesky_grad(op, grad):
    """Murray (2016), 'Differentiation of the Cholesky decomposition', eq. 10 (as in TF):
    Phi(L^H G) with Phi taking the lower triangle and halving the diagonal, then
    dA = sym(L^-H Phi L^-1) / 2."""
    l = op.outputs[0]
    eye = build("MatrixDiag", build("OnesLike", build("MatrixDiagPart", l)))
    l_inverse = build("MatrixTriangularSolve", l, eye, lower=True, adjoint=False)
    middle = _mm(l, grad, adj_a=True)
    half_diag = build(
        "Mul", constant(0.5, l.dtype.base_dtype, graph=l.graph), build("MatrixDiagPart", middle)
    )
    middle = build("MatrixSetDiag", middle, half_diag)
    middle = build(
        "MatrixBandPart",
        middle,
        constant(-1, dtypes.int64, graph=l.graph),
        constant(0, dtypes.int64, graph=l.graph),
    )
    grad_a = _mm(_mm(l_inverse, middle, adj_a=True), l_inverse)
    grad_a = build("AddV2", grad_a, _adjoint(grad_a))
    return build("Mul", grad_a, constant(0.5, l.dtype.base_dtype, graph=l.graph))


@register_gradient("MatrixSolve")
def _matrix_solve_grad(op, grad):
    """X = A^-1 B: dB = A^-H G, dA = -dB X^H (adjoint: dA = -X dB^H)."""
    a = op.inputs[0]
    adjoint = op.get_attr("adjoint")
    c = op.outputs[0]
    grad_b = build("MatrixSolve", a, grad, adjoint=not adjoint)
    if adjoint:
        return build("Neg", _mm(c, grad_b, adj_b=True)), grad_b
    return build("Neg", _mm(grad_b, c, adj_b=True)), grad_b


@register_gradient("MatrixTriangularSolve")
def _matrix_triangular_solve_grad(op, grad):
    """As MatrixSolve, with dA restricted to A's triangle."""
    a = op.inputs[0]
    adjoint, lower = op.get_attr("adjoint"), op.get_attr("lower")
    c = op.outputs[0]
    grad_b = build("MatrixTriangularSolve", a, grad, lower=lower, adjoint=not adjoint)
    if adjoint:
        grad_a = build("Neg", _mm(c, grad_b, adj_b=True))
    else:
        grad_a = build("Neg", _mm(grad_b, c, adj_b=True))
    lo, hi = (-1, 0) if lower else (0, -1)
    band = build(
        "MatrixBandPart",
        grad_a,
        constant(lo, dtypes.int64, graph=a.graph),
        constant(hi, dtypes.int64, graph=a.graph),
    )
    return band, grad_b


@register_gradient("Diag")
def _diag_grad(op, grad):
    return build("DiagPart", grad)


@register_gradient("DiagPart")
def _diag_part_grad(op, grad):
    return build("Diag", grad)


@register_gradient("MatrixDiag")
def _matrix_diag_grad(op, grad):
    return build("MatrixDiagPart", grad)


@register_gradient("MatrixDiagPart")
def _matrix_diag_part_grad(op, grad):
    return build("MatrixSetDiag", build("ZerosLike", op.inputs[0]), grad)


@register_gradient("MatrixSetDiag")
def _matrix_set_diag_grad(op, grad):
    diag = op.inputs[1]
    return build("MatrixSetDiag", grad, build("ZerosLike", diag)), build("MatrixDiagPart", grad)


@register_gradient("MatrixBandPart")
def _matrix_band_part_grad(op, grad):
    return build("MatrixBandPart", grad, op.inputs[1], op.inputs[2]), None, None
