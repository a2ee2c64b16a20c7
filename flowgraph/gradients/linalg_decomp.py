"""Gradient functions of Cross, the decompositions (SelfAdjointEigV2, Svd) and least squares
(MatrixSolveLs), as TensorFlow's math_grad.py and linalg_grad.py build them (whitepaper §4.1).

The eigen- and singular-vector terms divide by differences of eigen- (squared singular) values:
with repeated values the vectors are not unique and the gradient is not defined. A "safe"
reciprocal x / (x^2 + 1e-20) keeps it finite, as TensorFlow's does.
"""

from __future__ import annotations

from flowgraph.gradients.linalg import _adjoint, _mm
from flowgraph.gradients.registry import register_gradient
from flowgraph.gradients.util import build, constant, shape


@register_gradient("Cross")
def _cross_grad(op, grad):
    """d(u x v) = du x v + u x dv, so du = v x g and dv = g x u."""
    u, v = op.inputs
    return build("Cross", v, grad), build("Cross", grad, u)


def _scalar(value, like):
    return constant(value, like.dtype.base_dtype, graph=like.graph)


def _safe_reciprocal(x):
    """x / (x^2 + 1e-20): 1/x away from 0, and 0 at 0 (no inf or nan)."""
    denominator = build("AddV2", build("Square", x), _scalar(1e-20, x))
    return build("Mul", x, build("Reciprocal", denominator))


def _pairwise_reciprocal(values):
    """f[..., i, j] = 1 / (values[j] - values[i]) off the diagonal, 0 on it."""
    diff = build("Sub", build("ExpandDims", values, -2), build("ExpandDims", values, -1))
    return build("MatrixSetDiag", _safe_reciprocal(diff), build("ZerosLike", values))


def _columns(x, lo, hi):
    """x[..., :, lo:hi] (hi None: to the end)."""
    end_mask = 2 | (4 if hi is None else 0)
    return build(
        "StridedSlice",
        x,
        [0, 0, lo],
        [0, 0, 0 if hi is None else hi],
        [1, 1, 1],
        begin_mask=2,
        end_mask=end_mask,
        ellipsis_mask=1,
        new_axis_mask=0,
        shrink_axis_mask=0,
    )


def _lower_symmetrized(grad_a):
    """The forward op reads only A's lower triangle: fold the gradient onto it."""
    grad_a = build("AddV2", grad_a, _adjoint(grad_a))
    grad_a = build("MatrixBandPart", grad_a, -1, 0)
    half_diag = build("Mul", _scalar(0.5, grad_a), build("MatrixDiagPart", grad_a))
    return build("MatrixSetDiag", grad_a, half_diag)


@register_gradient("SelfAdjointEigV2")
def _self_adjoint_eig_grad(op, grad_e, grad_v):
    """A = V diag(e) V^H: dA = V (diag(de) + F o (V^H dV)) V^H, F the pairwise reciprocal of
    eigenvalue differences; without V, only the eigenvalue term (V recomputed)."""
    e = op.outputs[0]
    if op.get_attr("compute_v"):
        v = op.outputs[1]
        f = _pairwise_reciprocal(e)
        inner = build(
            "AddV2", build("MatrixDiag", grad_e), build("Mul", f, _mm(v, grad_v, adj_a=True))
        )
    else:
        _, v = build("SelfAdjointEigV2", op.inputs[0], compute_v=True)
        inner = build("MatrixDiag", grad_e)
    return _lower_symmetrized(_mm(v, _mm(inner, v, adj_b=True)))


@register_gradient("Svd")
def _svd_grad(op, grad_s, grad_u, grad_v):
    """Giles (2008) and Townsend (2016) for thin U and V; complex inputs add the phase term
    of the complex SVD; full U/V only when M and N differ by at most one (as TF)."""
    a = op.inputs[0]
    a_shape = a.shape.with_rank_at_least(2)
    grad_s_mat = build("MatrixDiag", grad_s)
    if not op.get_attr("compute_uv"):
        _, u, v = build("Svd", a, compute_uv=True, full_matrices=False)
        return _mm(u, _mm(grad_s_mat, v, adj_b=True))
    m, n = a_shape[-2].merge_with(grad_u.shape[-2]), a_shape[-1].merge_with(grad_v.shape[-2])
    m, n = m.value, n.value
    if m is None or n is None:
        raise NotImplementedError(
            "SVD gradient has not been implemented for input with unknown inner matrix shape."
        )
    s, u, v = op.outputs
    use_adjoint = m > n  # differentiate A^H = V S U^H instead, and take the adjoint at the end
    if use_adjoint:
        m, n, u, v, grad_u, grad_v = n, m, v, u, grad_v, grad_u
    full_matrices = op.get_attr("full_matrices")
    if full_matrices and abs(m - n) > 1:
        raise NotImplementedError(
            f"svd gradient is not implemented for abs(m - n) > 1 when full_matrices is True; "
            f"got m={m} and n={n} from {a.name} of shape {a_shape}"
        )
    s_mat = build("MatrixDiag", s)
    f = _pairwise_reciprocal(build("Square", s))
    s_inv_mat = build("MatrixDiag", _safe_reciprocal(s))
    v1, grad_v1 = _columns(v, 0, m), _columns(grad_v, 0, m)
    f_u = build("Mul", f, _mm(u, grad_u, adj_a=True))
    v_gv = _mm(v1, grad_v1, adj_a=True)
    f_v = build("Mul", f, v_gv)
    term1_nouv = build(
        "AddN",
        [
            grad_s_mat,
            _mm(build("AddV2", f_u, _adjoint(f_u)), s_mat),
            _mm(s_mat, build("AddV2", f_v, _adjoint(f_v))),
        ],
    )
    grad_a = _mm(u, _mm(term1_nouv, v1, adj_b=True))
    if m != n:
        gv1t = _adjoint(grad_v1)
        term2_nous = build("Sub", gv1t, _mm(_mm(gv1t, v1), v1, adj_b=True))
        if full_matrices:
            v2, grad_v2 = _columns(v, m, None), _columns(grad_v, m, None)
            term2_nous = build("Sub", term2_nous, _mm(_mm(v1, grad_v2, adj_a=True), v2, adj_b=True))
        grad_a = build("AddV2", grad_a, _mm(_mm(u, s_inv_mat), term2_nous))
    if a.dtype.is_complex:
        l_mat = build("MatrixDiag", build("MatrixDiagPart", v_gv))
        term3_nouv = _mm(s_inv_mat, build("Sub", _adjoint(l_mat), l_mat))
        term3 = _mm(u, _mm(term3_nouv, v1, adj_b=True))
        grad_a = build("AddV2", grad_a, build("Mul", _scalar(0.5, term3), term3))
    return _adjoint(grad_a) if use_adjoint else grad_a


def _regularized_gramian_cholesky(a, l2, first_kind: bool):
    """chol(A^H A + l2 I) (first kind) or chol(A A^H + l2 I) (second kind)."""
    gramian = _mm(a, a, adj_a=first_kind, adj_b=not first_kind)
    identity = build("MatrixDiag", build("OnesLike", build("MatrixDiagPart", gramian)))
    gramian = build("AddV2", gramian, build("Mul", l2, identity))
    return build("Cholesky", gramian)


def _cholesky_solve(chol, rhs):
    y = build("MatrixTriangularSolve", chol, rhs, lower=True, adjoint=False)
    return build("MatrixTriangularSolve", chol, y, lower=True, adjoint=True)


def _solve_ls_overdetermined(op, grad):
    """X = (A^H A + l2 I)^-1 A^H B: with Z = (A^H A + l2 I)^-1 G,
    dA = -A (X Z^H + Z X^H) + B Z^H and dB = A Z."""
    a, b, l2 = op.inputs
    x = op.outputs[0]
    l2 = build("Cast", l2, DstT=a.dtype.base_dtype)
    z = _cholesky_solve(_regularized_gramian_cholesky(a, l2, first_kind=True), grad)
    xzt = _mm(x, z, adj_b=True)
    zx_sym = build("AddV2", xzt, _adjoint(xzt))
    grad_a = build("Sub", _mm(b, z, adj_b=True), _mm(a, zx_sym))
    return grad_a, _mm(a, z), None


def _solve_ls_underdetermined(op, grad):
    """X = A^H (A A^H + l2 I)^-1 B: with T = (A A^H + l2 I)^-1 B,
    dB = (A A^H + l2 I)^-1 A G and dA = -dB T^H A + T (G - A^H dB)^H."""
    a, b, l2 = op.inputs
    l2 = build("Cast", l2, DstT=a.dtype.base_dtype)
    chol = _regularized_gramian_cholesky(a, l2, first_kind=False)
    grad_b = _cholesky_solve(chol, _mm(a, grad))
    tmp = _cholesky_solve(chol, b)
    a1 = build("Neg", _mm(grad_b, _mm(tmp, a, adj_a=True)))
    a2 = _mm(tmp, build("Sub", grad, _mm(a, grad_b, adj_a=True)), adj_b=True)
    return build("AddV2", a1, a2), grad_b, None


@register_gradient("MatrixSolveLs")
def _matrix_solve_ls_grad(op, grad):
    """Differentiates the normal equations the fast kernel solves; with inner dimensions known
    only at run time, a cond picks the over- or underdetermined case."""
    if not op.get_attr("fast"):
        raise ValueError("Gradient not defined for fast=False")
    dims = op.inputs[0].shape[-2:]
    if dims.is_fully_defined():
        if dims[0].value >= dims[1].value:
            return _solve_ls_overdetermined(op, grad)
        return _solve_ls_underdetermined(op, grad)
    from flowgraph.ops.control_flow import cond

    matrix_shape = shape(op.inputs[0])
    rows = build("StridedSlice", matrix_shape, [-2], [-1], [1], shrink_axis_mask=1)
    cols = build("StridedSlice", matrix_shape, [-1], [0], [1], shrink_axis_mask=1, end_mask=1)
    grad_a, grad_b = cond(
        build("GreaterEqual", rows, cols),
        lambda: _solve_ls_overdetermined(op, grad)[:2],
        lambda: _solve_ls_underdetermined(op, grad)[:2],
    )
    return grad_a, grad_b, None
