"""CPU kernels of the fused weight-gradient updates (opdefs/weight_updates.py): the gradient
op(a) @ op(b) of a weight is accumulated by BLAS gemm straight into the buffer the optimizer
updates, so it never exists as a tensor (whitepaper §4.1 memory; the 4 MiB gradient of W4's
1024x1024 layer was most of its peak).

* Gradient descent: var = -alpha * (a @ b) + 1 * var, one gemm into var.
* Momentum: accum = 1 * (a @ b) + momentum * accum, one gemm into accum, then
  var -= lr * accum. Nesterov's var -= lr * g + lr * momentum * accum needs g itself; with
  g = accum_new - momentum * accum_old it is var += lr * momentum * accum_old before the gemm
  and var -= lr * (1 + momentum) * accum_new after it: one gemm and two axpys, no gradient.

Results equal the unfused MatMul + Apply to rounding: gemm adds each product to the buffer as
it finishes (and SciPy's BLAS is not NumPy's), where the unfused update adds a rounded
gradient. A reference variable is updated in its buffer and a resource variable in a copy that
is then published, as the Apply kernels do (training.py); a buffer that is not C-contiguous or
not of the update's type is updated through a C-contiguous copy written back. The rules are
row-separable, so a large product runs in blocks of rows of the variable on the device's pool
(linalg.blas_blocks, as the MatMul kernel), each block one gemm (and axpy) writing its rows; the
BLAS calls release the GIL (blas_nogil.py). With `use_locking` the variable's (and
accumulator's) locks are held for the whole update.
"""

from __future__ import annotations

import contextlib

import numpy as np

from flowgraph.core import errors
from flowgraph.kernels.base import register_kernel
from flowgraph.kernels.cpu.blas_nogil import DTYPES, axpy, gemm
from flowgraph.kernels.cpu.linalg import blas_blocks
from flowgraph.kernels.variable_state import locked
from flowgraph.opdefs.training import APPLY_OPS, SCALARS
from flowgraph.opdefs.weight_updates import FUSABLE, fused_op, input_names


def _invalid(message: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, message)


def _dims(shape) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


# -- update rules on one block of rows: (attrs, slots s, coefficients c, a rows, b) ----------
def gradient_descent(attrs, s, c, a, b) -> None:
    gemm(-c["alpha"], a, b, 1.0, s["var"])


def momentum(attrs, s, c, a, b) -> None:
    var, accum, lr, mu = s["var"], s["accum"], c["lr"], c["momentum"]
    if attrs["use_nesterov"]:
        axpy(lr * mu, accum, var)
        gemm(1.0, a, b, mu, accum)
        axpy(-lr * (1 + mu), accum, var)
    else:
        gemm(1.0, a, b, mu, accum)
        axpy(-lr, accum, var)


RULES = {"ApplyGradientDescent": gradient_descent, "ApplyMomentum": momentum}


# -- the kernels -------------------------------------------------------------------------------
def _operands(attrs, a, b) -> tuple[np.ndarray, np.ndarray]:
    """op(a), op(b) as views, checked as the MatMul kernel checks them."""
    if a.ndim != 2 or b.ndim != 2:
        raise _invalid(f"In[{0 if a.ndim != 2 else 1}] is not a matrix")
    a = a.T if attrs["transpose_a"] else a
    b = b.T if attrs["transpose_b"] else b
    if a.shape[1] != b.shape[0]:
        raise _invalid(
            f"Matrix size-incompatible: In[0]: {_dims(a.shape)}, In[1]: {_dims(b.shape)}"
        )
    return a, b


def _check(values: dict, shape: tuple, dtype, resource: bool) -> None:
    """The Apply kernel's checks of the variable, its accumulators and the gradient's shape."""
    var = values["var"]
    if resource and var.dtype != dtype:
        raise _invalid(f"var has dtype {var.dtype} but the update has dtype {dtype}")
    for name, value in values.items():
        if name != "var" and value.shape != var.shape:
            raise _invalid(
                f"var and {name} do not have the same shape{list(var.shape)} {list(value.shape)}"
            )
    if var.shape != shape:
        raise _invalid(f"var and grad do not have the same shape{list(var.shape)} {list(shape)}")


def _coefficients(args: dict, dtype) -> dict:
    """The scalar inputs as Python numbers rounded to the update's type."""
    coefs = {}
    for name, value in args.items():
        if name in SCALARS:
            value = np.asarray(value)
            if value.ndim != 0:
                raise _invalid(f"{name} is not a scalar: {list(value.shape)}")
            coefs[name] = value.astype(dtype).item()
    return coefs


def _slots(states: dict, values: dict, dtype, resource: bool) -> tuple[dict, bool]:
    """The arrays the rule writes, and whether they are the variables' own buffers."""
    buffers = {n: None if resource else st.update_buffer() for n, st in states.items()}
    if all(b is not None and b.flags.c_contiguous and b.dtype == dtype for b in buffers.values()):
        return buffers, True
    return {n: np.array(v, dtype=dtype, order="C") for n, v in values.items()}, False


def _run(ctx, rule, slots: dict, coefs: dict, a: np.ndarray, b: np.ndarray) -> None:
    """The rule over blocks of rows of the variable, on the device's pool when large."""
    m, k = a.shape
    n = b.shape[1]

    def rows(lo: int, hi: int) -> None:
        rule(ctx.attrs, {name: s[lo:hi] for name, s in slots.items()}, coefs, a[lo:hi], b)

    blas_blocks(ctx, m, k * n, rows)


def _make_kernel(op_type: str, rule, refs: list[str], resource: bool):
    names = input_names(op_type)

    def kernel(ctx, *inputs):
        args = dict(zip(names, inputs))
        a, b = _operands(ctx.attrs, np.asarray(args["a"]), np.asarray(args["b"]))
        states = {n: args[n] for n in refs}
        lock = locked(states.values()) if ctx.attrs["use_locking"] else contextlib.nullcontext()
        with lock:
            values = {n: st.read() for n, st in states.items()}
            _check(values, (a.shape[0], b.shape[1]), a.dtype, resource)
            coefs = _coefficients(args, a.dtype)
            slots, in_place = _slots(states, values, a.dtype, resource)
            # an operand that reads a buffer the rule writes (a ref read aliases it) is copied
            a, b = (
                x.copy() if any(np.may_share_memory(x, s) for s in slots.values()) else x
                for x in (a, b)
            )
            _run(ctx, rule, slots, coefs, a, b)
            if not in_place:
                for name, state in states.items():
                    state.write(slots[name], in_place=not resource, owned=True)
        return None if resource else args["var"]

    kernel.__name__ = op_type
    kernel.__doc__ = f"{op_type}: the {rule.__name__} rule on the gradient op(a) @ op(b)."
    return kernel


def _register_all():
    types = sorted(str(d) for d in DTYPES)
    for base in FUSABLE:
        refs = [n[:-1] for n in APPLY_OPS[base][0] if n.endswith("*")]
        for resource in (False, True):
            name = fused_op(("Resource" if resource else "") + base)
            register_kernel(name, dtypes_=types, intra_op=True)(
                _make_kernel(name, RULES[base], refs, resource)
            )


_register_all()
