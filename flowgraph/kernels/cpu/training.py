"""CPU kernels of the fused training ops: each optimizer's update rule as one NumPy function.

An update rule is written once, on whole arrays: it gets writable arrays holding the variable and
its accumulators (`s`), the scalar coefficients (`c`) and the gradient (`g`), updates in place the
ones it changes and returns their names. The dense kernel (`Apply*`) runs it on the whole
variable; the sparse kernel (`SparseApply*`) runs it on copies of the rows named by `indices` and
scatters them back; the `Resource*` forms run the same code on resource variables.

Formulas are TensorFlow's (training_ops.cc), so float32 results agree with TF to rounding (where
one temporary forces a different association, e.g. (g / sqrt(accum)) * lr for TF's
(g * lr) / sqrt(accum), or a BLAS axpy's fused multiply-add, the results differ by an ulp). Each
rule makes at most one temporary the size of the variable (Nesterov's forms and the rarely used
Adadelta and FTRL make two or three, and half precision, which has no BLAS, one more): a pass over
a large variable costs mostly memory traffic and page faults of fresh arrays, and the in-place
form measured 5.1 -> 0.7 ms for the SGD update of LeNet's 3.3M weights (see `_axpy`).

Two deliberate choices:

* A reference variable is updated in place in its buffer (runtime/resources.py: reads of a ref
  alias it) and a resource variable by rebinding to an updated copy, as in TF. With
  `use_locking` the references are locked (in a fixed order, so two updates cannot deadlock)
  for the whole read-compute-write; without it, concurrent updates may lose one another's
  writes, as in TF.
* Duplicate indices in a sparse update are summed first and the rule is applied once per row
  (what TF's Optimizer feeds these kernels: it de-duplicates IndexedSlices before applying).
"""

from __future__ import annotations

import contextlib

import numpy as np
from scipy.linalg import blas

from flowgraph.core import errors
from flowgraph.kernels.base import register_kernel
from flowgraph.kernels.cpu.loops import COMPILED_TYPES, compiled
from flowgraph.kernels.variable_state import locked
from flowgraph.opdefs.training import APPLY_OPS, SCALARS, SPARSE_APPLY_OPS, TYPES, input_names


def _invalid(message: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, message)


_AXPY = {
    np.dtype(t): getattr(blas, p + "axpy")
    for t, p in ((np.float32, "s"), (np.float64, "d"), (np.complex64, "c"), (np.complex128, "z"))
}


def _axpy(a, x: np.ndarray, y: np.ndarray) -> None:
    """y += a * x in place: one BLAS pass with no temporary (7x faster than `y -= x * a` on a
    3136x1024 float32 layer: 0.24 vs 1.7 ms), or NumPy's two passes where BLAS has no type."""
    axpy = _AXPY.get(y.dtype)
    if axpy is not None and x.dtype == y.dtype and x.flags.c_contiguous and y.flags.c_contiguous:
        a = a.item() if isinstance(a, np.generic | np.ndarray) else a
        axpy(x.reshape(-1), y.reshape(-1), a=a)
    else:
        y += x * np.asarray(a, y.dtype)


# -- update rules: (attrs, slots s, coefficients c, gradient g) -> names of the slots changed ----
def gradient_descent(a, s, c, g):
    """var -= alpha * g."""
    _axpy(-c["alpha"], g, s["var"])
    return ("var",)


def momentum(a, s, c, g):
    accum, var, lr, mu = s["accum"], s["var"], c["lr"], c["momentum"]
    accum *= mu
    accum += g
    if a["use_nesterov"]:  # var -= g * lr + accum * momentum * lr
        t = np.multiply(accum, mu)
        t *= lr
        _axpy(lr, g, t)
        var -= t
    else:
        _axpy(-lr, accum, var)
    return ("var", "accum")


def adagrad(a, s, c, g):
    accum, var = s["accum"], s["var"]
    t = np.multiply(g, g)
    if a["update_slots"]:
        accum += t
    np.sqrt(accum, out=t)
    np.divide(g, t, out=t)
    _axpy(-c["lr"], t, var)
    return ("var", "accum") if a["update_slots"] else ("var",)


def adadelta(a, s, c, g):
    rho, eps = c["rho"], c["epsilon"]
    accum, accum_update, var = s["accum"], s["accum_update"], s["var"]
    accum *= rho
    t = np.multiply(g, g)
    t *= 1 - rho
    accum += t
    update = accum_update + eps  # update = sqrt(accum_update + eps) / sqrt(accum + eps) * g
    np.sqrt(update, out=update)
    np.add(accum, eps, out=t)
    np.sqrt(t, out=t)
    update /= t
    update *= g
    accum_update *= rho
    np.multiply(update, update, out=t)
    t *= 1 - rho
    accum_update += t
    _axpy(-c["lr"], update, var)
    return ("var", "accum", "accum_update")


def _ms_update(ms, g, rho, t):
    """ms += (g * g - ms) * (1 - rho), through the temporary t."""
    np.multiply(g, g, out=t)
    t -= ms
    t *= 1 - rho
    ms += t


def rms_prop(a, s, c, g):
    ms, mom, var = s["ms"], s["mom"], s["var"]
    t = np.empty_like(var)
    _ms_update(ms, g, c["rho"], t)
    np.add(ms, c["epsilon"], out=t)  # mom = mom * momentum + g * lr / sqrt(ms + epsilon)
    np.sqrt(t, out=t)
    np.divide(g, t, out=t)
    mom *= c["momentum"]
    _axpy(c["lr"], t, mom)
    var -= mom
    return ("var", "ms", "mom")


def centered_rms_prop(a, s, c, g):
    ms, mg, mom, var = s["ms"], s["mg"], s["mom"], s["var"]
    t = np.empty_like(var)
    _ms_update(ms, g, c["rho"], t)
    np.subtract(g, mg, out=t)  # mg += (g - mg) * (1 - rho)
    t *= 1 - c["rho"]
    mg += t
    np.multiply(mg, mg, out=t)  # denominator sqrt((ms - mg * mg) + epsilon)
    np.subtract(ms, t, out=t)
    t += c["epsilon"]
    np.sqrt(t, out=t)
    np.divide(g, t, out=t)
    mom *= c["momentum"]
    _axpy(c["lr"], t, mom)
    var -= mom
    return ("var", "ms", "mg", "mom")


def _same_layout(arrays) -> bool:
    """All of one dtype and C-contiguous: the compiled rules' flat loops need it."""
    dtype = arrays[0].dtype
    for x in arrays:
        if x.dtype != dtype or not x.flags.c_contiguous:
            return False
    return True


def adam(a, s, c, g):
    """Adam with TF's bias correction folded into the step size and epsilon outside the sqrt."""
    m, v, var = s["m"], s["v"], s["var"]
    arrays = (var, m, v, g)
    if var.dtype in COMPILED_TYPES and _same_layout(arrays):
        # One compiled pass (loops.adam), same formulas and order as the NumPy form below; it
        # also does the scalar arithmetic, in var's dtype (as NumPy scalars of 0-d arrays, that
        # took 8 us a call, more than the whole update of a bias).
        coefficients = np.array(
            [c["lr"], c["beta1_power"], c["beta2_power"], c["beta1"], c["beta2"], c["epsilon"]],
            var.dtype,
        )
        flat = var.reshape(-1), m.reshape(-1), v.reshape(-1), g.reshape(-1)
        compiled("adam")(*flat, coefficients, bool(a["use_nesterov"]))
        return ("var", "m", "v")
    beta1, beta2 = c["beta1"], c["beta2"]
    alpha = c["lr"] * np.sqrt(1 - c["beta2_power"]) / (1 - c["beta1_power"])
    t = np.subtract(g, m)  # m += (g - m) * (1 - beta1)
    t *= 1 - beta1
    m += t
    np.multiply(g, g, out=t)  # v += (g * g - v) * (1 - beta2)
    t -= v
    t *= 1 - beta2
    v += t
    if a["use_nesterov"]:  # var -= (g * (1 - beta1) + beta1 * m) * alpha / (sqrt(v) + epsilon)
        num = np.multiply(g, 1 - beta1)
        _axpy(beta1, m, num)
    else:  # var -= m * alpha / (sqrt(v) + epsilon)
        num = m
    np.sqrt(v, out=t)
    t += c["epsilon"]
    np.divide(num, t, out=t)
    _axpy(-alpha, t, var)
    return ("var", "m", "v")


def ftrl(a, s, c, g):
    """FTRL-Proximal; with `l2_shrinkage` (FtrlV2) the shrinkage enters the linear term only."""
    lr, l1, l2, power = c["lr"], c["l1"], c["l2"], c["lr_power"]
    var, accum = s["var"], s["accum"]
    shrunk = g + 2 * c["l2_shrinkage"] * var if "l2_shrinkage" in c else g
    new_accum = accum + g * g
    if power == -0.5:
        new_pow, old_pow = np.sqrt(new_accum), np.sqrt(accum)
    else:
        new_pow, old_pow = new_accum ** (-power), accum ** (-power)
    if a["multiply_linear_by_lr"]:
        linear = s["linear"] + shrunk * lr - (new_pow - old_pow) * var
        l1, quadratic = l1 * lr, new_pow + 2 * l2 * lr
    else:
        linear = s["linear"] + shrunk - (new_pow - old_pow) / lr * var
        quadratic = new_pow / lr + 2 * l2
    # clip(linear, -l1, l1) - linear is 0 where |linear| <= l1: the L1 penalty zeroes the weight.
    np.divide(np.clip(linear, -l1, l1) - linear, quadratic, out=var)
    accum[...] = new_accum
    s["linear"][...] = linear
    return ("var", "accum", "linear")


def _proximal_step(var, prox, threshold, shrink) -> None:
    """var = sign(prox) * max(|prox| - threshold, 0) / shrink (soft thresholding, the proximal
    step of the L1 term; threshold 0 without L1) and the L2 term's shrinkage."""
    if np.any(threshold > 0):
        np.subtract(np.abs(prox), threshold, out=var)
        np.maximum(var, 0, out=var)
        var *= np.sign(prox)
    else:
        var[...] = prox
    var /= shrink


def proximal_gradient_descent(a, s, c, g):
    """FOBOS with a fixed step: prox = var - alpha * g, then the L1/L2 proximal step."""
    var, alpha = s["var"], c["alpha"]
    prox = var - g * alpha
    l1 = max(0, c["l1"])
    _proximal_step(var, prox, alpha * l1, 1 + alpha * c["l2"])
    return ("var",)


def proximal_adagrad(a, s, c, g):
    """FOBOS with Adagrad's per-coordinate step lr / sqrt(accum), accum += g^2 first."""
    var, accum = s["var"], s["accum"]
    accum += g * g
    step = c["lr"] / np.sqrt(accum)
    prox = var - g * step
    l1 = max(0, c["l1"])
    _proximal_step(var, prox, step * l1, 1 + c["l2"] * step)
    return ("var", "accum")


RULES = {
    "GradientDescent": gradient_descent,
    "Momentum": momentum,
    "Adagrad": adagrad,
    "Adadelta": adadelta,
    "RMSProp": rms_prop,
    "CenteredRMSProp": centered_rms_prop,
    "Adam": adam,
    "Ftrl": ftrl,
    "FtrlV2": ftrl,
    "ProximalGradientDescent": proximal_gradient_descent,
    "ProximalAdagrad": proximal_adagrad,
}


# -- the kernels ------------------------------------------------------------------------------
_UNLOCKED = contextlib.nullcontext()  # reusable: without `use_locking` nothing is held


def _locked(ctx, states):
    """Holds every reference's lock when `use_locking`; a fixed order rules out deadlock."""
    return locked(states) if ctx.attrs.get("use_locking") else _UNLOCKED


def _publish(state, value, resource: bool):
    """Stores a new value computed by the rule (a fresh array): see the module docstring."""
    state.write(value, in_place=not resource, owned=True)


def _coefficients(scalars, args, dtype) -> dict:
    coefs = {}
    for name in scalars:
        value = args[name]
        if value.__class__ is not np.ndarray:
            value = np.asarray(value)
        if value.ndim != 0:
            raise _invalid(f"{name} is not a scalar: {list(value.shape)}")
        coefs[name] = value if value.dtype == dtype else value.astype(dtype)
    return coefs


def _shares(grad: np.ndarray, slots: dict) -> bool:
    return any(np.may_share_memory(grad, b) for b in slots.values())


def _sparse_rows(var: np.ndarray, grad: np.ndarray, indices: np.ndarray):
    """Checks the sparse inputs; returns the distinct rows and the gradient summed per row."""
    if var.ndim < 1:
        raise _invalid("var must be at least 1 dimensional")
    if indices.ndim != 1:
        raise _invalid(f"indices must be one-dimensional, got shape {list(indices.shape)}")
    if grad.ndim < 1 or grad.shape[0] != indices.shape[0]:
        raise _invalid(
            f"grad must be the same size as indices in the first dimension: grad shape "
            f"{list(grad.shape)}, indices shape {list(indices.shape)}"
        )
    if grad.shape[1:] != var.shape[1:]:
        raise _invalid(
            f"var and grad do not have the same shape except in the first dimension: "
            f"{list(var.shape)} {list(grad.shape)}"
        )
    bad = (indices < 0) | (indices >= var.shape[0])
    if bad.any():
        i = int(np.argmax(bad))
        raise _invalid(f"Index {indices[i]} at offset {i} in indices is out of range")
    rows, inverse = np.unique(indices, return_inverse=True)
    summed = np.zeros((rows.size,) + grad.shape[1:], dtype=grad.dtype)
    if rows.size == indices.size:
        summed[inverse] = grad
    else:
        np.add.at(summed, inverse, grad)
    return rows, summed


def _make_kernel(op_type: str, rule, refs: list[str], sparse: bool, resource: bool):
    names = input_names(op_type)
    scalars = [n for n in names if n in SCALARS]
    gradient = "delta" if "delta" in names else "grad"

    def kernel(ctx, *inputs):
        args = dict(zip(names, inputs))
        states = [args[n] for n in refs]
        grad = np.asarray(args[gradient])
        with _locked(ctx, states):
            values = {n: st.read() for n, st in zip(refs, states)}
            var = values["var"]
            if resource and var.dtype != grad.dtype:
                raise _invalid(f"var has dtype {var.dtype} but the update has dtype {grad.dtype}")
            for name in refs[1:]:
                if values[name].shape != var.shape:
                    raise _invalid(
                        f"var and {name} do not have the same shape{list(var.shape)} "
                        f"{list(values[name].shape)}"
                    )
            coefs = _coefficients(scalars, args, var.dtype)
            # A ref variable's rule works in its buffers; a resource variable's on copies,
            # published after (copy-on-write); rows of a sparse update on gathered copies.
            buffers = {n: None if resource else st.update_buffer() for n, st in zip(refs, states)}
            in_place = all(b is not None for b in buffers.values())
            if not sparse:
                if grad.shape != var.shape:
                    raise _invalid(
                        "var and grad do not have the same shape"
                        f"{list(var.shape)} {list(grad.shape)}"
                    )
                slots = buffers if in_place else {n: v.copy() for n, v in values.items()}
                # A gradient that reads a slot the rule overwrites is a view (buffers are never
                # handed out themselves: reads get views of them).
                if in_place and grad.base is not None and _shares(grad, slots):
                    grad = grad.copy()
                for name in rule(ctx.attrs, slots, coefs, grad):
                    if not in_place:
                        _publish(args[name], slots[name], resource)
            else:
                rows, grad_rows = _sparse_rows(var, grad, np.asarray(args["indices"]))
                if rows.size:
                    gathered = {n: v[rows] for n, v in values.items()}
                    for name in rule(ctx.attrs, gathered, coefs, grad_rows):
                        if in_place:
                            buffers[name][rows] = gathered[name]
                        else:
                            full = values[name].copy()
                            full[rows] = gathered[name]
                            _publish(args[name], full, resource)
        return None if resource else args["var"]

    kernel.__name__ = op_type
    kernel.__doc__ = f"{op_type}: the {rule.__name__} rule" + (
        " on the rows in `indices`." if sparse else "."
    )
    return kernel


def _register_all():
    for table, sparse in ((APPLY_OPS, False), (SPARSE_APPLY_OPS, True)):
        for op_type, (spec, _) in table.items():
            rule = RULES[op_type[len("SparseApply" if sparse else "Apply") :]]
            refs = [n[:-1] for n in spec if n.endswith("*")]
            types = TYPES.get(op_type, "{half, float, double}").strip("{}").split(", ")
            for resource in (False, True):
                name = ("Resource" if resource else "") + op_type
                register_kernel(name, dtypes_=types)(
                    _make_kernel(name, rule, refs, sparse, resource)
                )


_register_all()
