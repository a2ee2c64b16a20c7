"""Optimizer update formulas written out in NumPy, independently of the kernels: one function
per optimizer in the form TF documents, on float64 arrays. Each takes the slot values `s`
(var and accumulators), the coefficients `c`, the gradient `g` and the op's attrs `a`, and
returns the new slot values."""

import numpy as np


# -- references -------------------------------------------------------------------------------
def ref_gd(s, c, g, a):
    return {"var": s["var"] - c["alpha"] * g}


def ref_momentum(s, c, g, a):
    accum = s["accum"] * c["momentum"] + g
    if a.get("use_nesterov"):
        return {"var": s["var"] - c["lr"] * (g + c["momentum"] * accum), "accum": accum}
    return {"var": s["var"] - c["lr"] * accum, "accum": accum}


def ref_adagrad(s, c, g, a):
    accum = s["accum"] + g**2 if a.get("update_slots", True) else s["accum"]
    return {"var": s["var"] - c["lr"] * g / np.sqrt(accum), "accum": accum}


def ref_adadelta(s, c, g, a):
    rho, eps = c["rho"], c["epsilon"]
    accum = rho * s["accum"] + (1 - rho) * g**2
    update = np.sqrt(s["accum_update"] + eps) / np.sqrt(accum + eps) * g
    accum_update = rho * s["accum_update"] + (1 - rho) * update**2
    return {"var": s["var"] - c["lr"] * update, "accum": accum, "accum_update": accum_update}


def ref_rms_prop(s, c, g, a):
    ms = c["rho"] * s["ms"] + (1 - c["rho"]) * g**2
    mom = c["momentum"] * s["mom"] + c["lr"] * g / np.sqrt(ms + c["epsilon"])
    return {"var": s["var"] - mom, "ms": ms, "mom": mom}


def ref_centered_rms_prop(s, c, g, a):
    ms = c["rho"] * s["ms"] + (1 - c["rho"]) * g**2
    mg = c["rho"] * s["mg"] + (1 - c["rho"]) * g
    mom = c["momentum"] * s["mom"] + c["lr"] * g / np.sqrt(ms - mg**2 + c["epsilon"])
    return {"var": s["var"] - mom, "ms": ms, "mg": mg, "mom": mom}


def ref_adam(s, c, g, a):
    b1, b2 = c["beta1"], c["beta2"]
    lr_t = c["lr"] * np.sqrt(1 - c["beta2_power"]) / (1 - c["beta1_power"])
    m = b1 * s["m"] + (1 - b1) * g
    v = b2 * s["v"] + (1 - b2) * g * g
    m_used = b1 * m + (1 - b1) * g if a.get("use_nesterov") else m
    return {"var": s["var"] - lr_t * m_used / (np.sqrt(v) + c["epsilon"]), "m": m, "v": v}


def ref_ftrl(s, c, g, a):
    lr, l1, l2, p = c["lr"], c["l1"], c["l2"], c["lr_power"]
    g_lin = g + 2 * c.get("l2_shrinkage", 0.0) * s["var"]
    new_accum = s["accum"] + g * g
    sigma = (new_accum ** (-p) - s["accum"] ** (-p)) / lr
    linear = s["linear"] + g_lin - sigma * s["var"]
    quadratic = new_accum ** (-p) / lr + 2 * l2
    var = np.where(np.abs(linear) > l1, (np.sign(linear) * l1 - linear) / quadratic, 0.0)
    return {"var": var, "accum": new_accum, "linear": linear}


def _fobos(prox, step, l1, l2):
    """The proximal step of l1 |w| + l2 / 2 |w|^2 after a gradient step of size `step`."""
    return np.sign(prox) * np.maximum(np.abs(prox) - step * max(l1, 0.0), 0.0) / (1 + step * l2)


def ref_proximal_gd(s, c, g, a):
    return {"var": _fobos(s["var"] - c["alpha"] * g, c["alpha"], c["l1"], c["l2"])}


def ref_proximal_adagrad(s, c, g, a):
    accum = s["accum"] + g * g
    step = c["lr"] / np.sqrt(accum)
    return {"var": _fobos(s["var"] - step * g, step, c["l1"], c["l2"]), "accum": accum}
