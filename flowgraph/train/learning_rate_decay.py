"""Learning-rate schedules (TF1's learning_rate_decay.py): functions of the global step built as
graph ops, so the rate changes as training advances without rebuilding the graph.

Each schedule computes in the learning rate's dtype: the step and the schedule's constants are
cast to it, as TF does. The result is named `name` (default: the schedule's TF name scope,
e.g. `ExponentialDecay`).
"""

from __future__ import annotations

import math

from flowgraph.framework import default_graph
from flowgraph.framework.convert import convert_to_tensor
from flowgraph.ops import array as array_ops
from flowgraph.ops import math as math_ops

__all__ = [
    "cosine_decay",
    "cosine_decay_restarts",
    "exponential_decay",
    "inverse_time_decay",
    "linear_cosine_decay",
    "natural_exp_decay",
    "noisy_linear_cosine_decay",
    "piecewise_constant",
    "piecewise_constant_decay",
    "polynomial_decay",
]


def _require_step(global_step, schedule: str):
    if global_step is None:
        raise ValueError(f"global_step is required for {schedule}.")


def _start(learning_rate, global_step, *constants):
    """(rate, step, constants...) as tensors of the rate's dtype."""
    rate = convert_to_tensor(learning_rate, name="learning_rate")
    dtype = rate.dtype.base_dtype
    step = math_ops.cast(global_step, dtype)
    return (rate, step) + tuple(math_ops.cast(c, dtype) for c in constants)


def exponential_decay(
    learning_rate, global_step, decay_steps, decay_rate, staircase=False, name=None
):
    """learning_rate * decay_rate ^ (global_step / decay_steps), the exponent floored if staircase.

    Example: lr = tf.train.exponential_decay(0.1, global_step, 1000, 0.96, staircase=True)
    """
    _require_step(global_step, "exponential_decay")
    graph = default_graph.get()
    with graph.name_scope(name or "ExponentialDecay") as scope:
        rate, step, decay_steps, decay_rate = _start(
            learning_rate, global_step, decay_steps, decay_rate
        )
        p = math_ops.truediv(step, decay_steps)
        if staircase:
            p = math_ops.floor(p)
        return math_ops.multiply(rate, math_ops.pow(decay_rate, p), name=scope)


def natural_exp_decay(
    learning_rate, global_step, decay_steps, decay_rate, staircase=False, name=None
):
    """learning_rate * exp(-decay_rate * global_step / decay_steps) (exponent floored if staircase).

    Example: lr = tf.train.natural_exp_decay(0.1, global_step, 5, 0.5)
    """
    _require_step(global_step, "natural_exp_decay")
    graph = default_graph.get()
    with graph.name_scope(name or "NaturalExpDecay") as scope:
        rate, step, decay_steps, decay_rate = _start(
            learning_rate, global_step, decay_steps, decay_rate
        )
        p = math_ops.truediv(step, decay_steps)
        if staircase:
            p = math_ops.floor(p)
        return math_ops.multiply(
            rate, math_ops.pow(math_ops.exp(math_ops.negative(decay_rate)), p), name=scope
        )


def inverse_time_decay(
    learning_rate, global_step, decay_steps, decay_rate, staircase=False, name=None
):
    """learning_rate / (1 + decay_rate * global_step / decay_steps) (floored if staircase).

    Example: lr = tf.train.inverse_time_decay(0.1, global_step, 1.0, 0.5)
    """
    _require_step(global_step, "inverse_time_decay")
    graph = default_graph.get()
    with graph.name_scope(name or "InverseTimeDecay") as scope:
        rate, step, decay_steps, decay_rate = _start(
            learning_rate, global_step, decay_steps, decay_rate
        )
        p = math_ops.truediv(step, decay_steps)
        if staircase:
            p = math_ops.floor(p)
        denom = math_ops.add(math_ops.cast(1, rate.dtype), math_ops.multiply(decay_rate, p))
        return math_ops.truediv(rate, denom, name=scope)


def polynomial_decay(
    learning_rate,
    global_step,
    decay_steps,
    end_learning_rate=0.0001,
    power=1.0,
    cycle=False,
    name=None,
):
    """(lr - end) * (1 - step / decay_steps) ^ power + end, holding `end` after decay_steps;
    with `cycle`, decay_steps grows to the first multiple above the step instead.

    Example: lr = tf.train.polynomial_decay(0.1, global_step, 10000, 0.01, power=0.5)
    """
    _require_step(global_step, "polynomial_decay")
    graph = default_graph.get()
    with graph.name_scope(name or "PolynomialDecay") as scope:
        rate, step, decay_steps, end, power = _start(
            learning_rate, global_step, decay_steps, end_learning_rate, power
        )
        if cycle:
            # The first multiple of decay_steps above the step; 1 at step 0.
            multiplier = math_ops.where(
                math_ops.equal(step, 0),
                array_ops.ones_like(step),
                math_ops.ceil(step / decay_steps),
            )
            decay_steps = math_ops.multiply(decay_steps, multiplier)
        else:
            step = math_ops.minimum(step, decay_steps)
        p = math_ops.truediv(step, decay_steps)
        return math_ops.add(
            math_ops.multiply(rate - end, math_ops.pow(1 - p, power)), end, name=scope
        )


def cosine_decay(learning_rate, global_step, decay_steps, alpha=0.0, name=None):
    """lr * ((1 - alpha) * 0.5 * (1 + cos(pi * min(step, decay_steps) / decay_steps)) + alpha).

    Example: lr = tf.train.cosine_decay(0.1, global_step, 1000, alpha=0.01)
    """
    _require_step(global_step, "cosine_decay")
    graph = default_graph.get()
    with graph.name_scope(name or "CosineDecay") as scope:
        rate, step, decay_steps = _start(learning_rate, global_step, decay_steps)
        step = math_ops.minimum(step, decay_steps)
        fraction = step / decay_steps
        cosine = 0.5 * (1.0 + math_ops.cos(math_ops.cast(math.pi, rate.dtype) * fraction))
        decayed = (1 - alpha) * cosine + alpha
        return math_ops.multiply(rate, decayed, name=scope)


def cosine_decay_restarts(
    learning_rate, global_step, first_decay_steps, t_mul=2.0, m_mul=1.0, alpha=0.0, name=None
):
    """Cosine decay with warm restarts (SGDR): period i lasts first_decay_steps * t_mul^i
    steps and starts from learning_rate * m_mul^i.

    Example: lr = tf.train.cosine_decay_restarts(0.1, global_step, 1000)
    """
    _require_step(global_step, "cosine_decay_restarts")
    graph = default_graph.get()
    with graph.name_scope(name or "SGDRDecay") as scope:
        rate, step, first_steps, alpha_t, t_mul_t, m_mul_t = _start(
            learning_rate, global_step, first_decay_steps, alpha, t_mul, m_mul
        )
        fraction = step / first_steps

        def geometric():
            restart = math_ops.floor(
                math_ops.log(1.0 - fraction * (1.0 - t_mul_t)) / math_ops.log(t_mul_t)
            )
            done = (1.0 - math_ops.pow(t_mul_t, restart)) / (1.0 - t_mul_t)
            return restart, (fraction - done) / math_ops.pow(t_mul_t, restart)

        def uniform():
            restart = math_ops.floor(fraction)
            return restart, fraction - restart

        if isinstance(t_mul, (int, float)):
            restart, fraction = uniform() if t_mul == 1.0 else geometric()
        else:
            same = math_ops.equal(t_mul_t, 1.0)
            (r1, f1), (r2, f2) = uniform(), geometric()
            restart, fraction = math_ops.where(same, r1, r2), math_ops.where(same, f1, f2)
        pi = math_ops.cast(math.pi, rate.dtype)
        cosine = 0.5 * math_ops.pow(m_mul_t, restart) * (1.0 + math_ops.cos(pi * fraction))
        decayed = (1 - alpha_t) * cosine + alpha_t
        return math_ops.multiply(rate, decayed, name=scope)


def _periodic_cosine(step, decay_steps, num_periods):
    """0.5 * (1 + cos(2 pi num_periods step / decay_steps))."""
    fraction = 2.0 * num_periods * (step / decay_steps)
    return 0.5 * (1.0 + math_ops.cos(math_ops.cast(math.pi, step.dtype) * fraction))


def linear_cosine_decay(
    learning_rate, global_step, decay_steps, num_periods=0.5, alpha=0.0, beta=0.001, name=None
):
    """lr * ((alpha + (decay_steps - step) / decay_steps) * cosine + beta), the cosine making
    `num_periods` periods over decay_steps (Bello et al., 2017)."""
    _require_step(global_step, "linear_cosine_decay")
    graph = default_graph.get()
    with graph.name_scope(name or "LinearCosineDecay") as scope:
        rate, step, decay_steps, num_periods, alpha, beta = _start(
            learning_rate, global_step, decay_steps, num_periods, alpha, beta
        )
        step = math_ops.minimum(step, decay_steps)
        linear = (decay_steps - step) / decay_steps
        cosine = _periodic_cosine(step, decay_steps, num_periods)
        return math_ops.multiply(rate, (alpha + linear) * cosine + beta, name=scope)


def noisy_linear_cosine_decay(
    learning_rate,
    global_step,
    decay_steps,
    initial_variance=1.0,
    variance_decay=0.55,
    num_periods=0.5,
    alpha=0.0,
    beta=0.001,
    name=None,
):
    """linear_cosine_decay whose linear part gets Gaussian noise of variance
    initial_variance / (1 + step)^variance_decay, drawn anew each step."""
    from flowgraph.ops.random import random_normal

    _require_step(global_step, "noisy_linear_cosine_decay")
    graph = default_graph.get()
    with graph.name_scope(name or "NoisyLinearCosineDecay") as scope:
        rate, step, decay_steps, initial_variance, variance_decay = _start(
            learning_rate, global_step, decay_steps, initial_variance, variance_decay
        )
        num_periods, alpha, beta = (
            math_ops.cast(c, rate.dtype) for c in (num_periods, alpha, beta)
        )
        step = math_ops.minimum(step, decay_steps)
        linear = (decay_steps - step) / decay_steps
        std = math_ops.sqrt(initial_variance / math_ops.pow(1.0 + step, variance_decay))
        noisy = linear + random_normal(array_ops.shape(linear), stddev=std, dtype=rate.dtype)
        cosine = _periodic_cosine(step, decay_steps, num_periods)
        return math_ops.multiply(rate, (alpha + noisy) * cosine + beta, name=scope)


def piecewise_constant(x, boundaries, values, name=None):
    """values[0] while x <= boundaries[0], values[i] while boundaries[i-1] < x <= boundaries[i],
    values[-1] after the last boundary.

    TF builds this with tf.case; a chain of selects gives the same value with no control flow,
    since every value is already computed.

    Example: lr = tf.train.piecewise_constant(global_step, [1000, 2000], [1.0, 0.5, 0.1])
    """
    if len(boundaries) != len(values) - 1:
        raise ValueError("The length of boundaries should be 1 less than the length of values")
    graph = default_graph.get()
    with graph.name_scope(name or "PiecewiseConstant") as scope:
        x = convert_to_tensor(x)
        boundaries = [convert_to_tensor(b) for b in boundaries]
        values = [convert_to_tensor(v) for v in values]
        for i, b in enumerate(boundaries):
            if (
                b.dtype.base_dtype != x.dtype.base_dtype
            ):  # boundaries take the step's type, as in TF
                boundaries[i] = math_ops.cast(b, x.dtype.base_dtype)
        for v in values[1:]:
            if v.dtype.base_dtype != values[0].dtype.base_dtype:
                raise ValueError(
                    "Values must have elements all with the same dtype "
                    f"({values[0].dtype.base_dtype.name} "
                    f"vs {v.dtype.base_dtype.name})."
                )
        result = values[0]
        for b, v in zip(boundaries, values[1:]):
            result = math_ops.where(math_ops.greater(x, b), v, result)
        return array_ops.identity(result, name=scope)


piecewise_constant_decay = piecewise_constant  # TF 1.15's newer name
