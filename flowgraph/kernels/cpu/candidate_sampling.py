"""CPU kernels for candidate sampling (sampled softmax and NCE losses; TF's range_sampler.cc).

A sampler draws `num_sampled` class ids from a fixed distribution P over [0, range_max) and
reports, for each true and each sampled id, its expected count in the sample: P * num_sampled
when sampling with replacement, and 1 - (1 - P)^num_tries with `unique`, where num_tries is how
many draws rejection sampling needed. Each node keeps its own generator in `ctx.state`, seeded
from (seed, seed2) like TF's op seeds (both 0: nondeterministic).
"""

from __future__ import annotations

import numpy as np

from flowgraph.core import errors
from flowgraph.kernels.base import register_kernel


class _Uniform:
    def __init__(self, range_max: int):
        self.range_max = range_max

    def probability(self, ids: np.ndarray) -> np.ndarray:
        return np.full(ids.shape, 1.0 / self.range_max)

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.integers(0, self.range_max, size=n, dtype=np.int64)


class _LogUniform:
    """Zipfian: P(k) = log((k + 2) / (k + 1)) / log(range_max + 1)."""

    def __init__(self, range_max: int):
        self.range_max = range_max
        self.log_range = np.log(range_max + 1.0)

    def probability(self, ids: np.ndarray) -> np.ndarray:
        ids = ids.astype(np.float64)
        return (np.log(ids + 2.0) - np.log(ids + 1.0)) / self.log_range

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        values = np.floor(np.exp(rng.random(n) * self.log_range)).astype(np.int64) - 1
        return np.clip(values, 0, self.range_max - 1)


def _draw_unique(sampler, rng, num_sampled: int) -> tuple[np.ndarray, int]:
    """Rejection sampling: the first `num_sampled` distinct ids of a stream of draws, in order,
    and the number of draws that took. Draws come in vectorised chunks."""
    stream = np.empty(0, np.int64)
    while True:
        stream = np.concatenate([stream, sampler.draw(rng, max(2 * num_sampled, 64))])
        _, first = np.unique(stream, return_index=True)
        if first.size >= num_sampled:
            first = np.sort(first)[:num_sampled]
            return stream[first], int(first[-1]) + 1


def _expected_count(p: np.ndarray, num_tries: int, num_sampled: int, unique: bool) -> np.ndarray:
    if not unique:
        return (p * num_sampled).astype(np.float32)
    return (-np.expm1(num_tries * np.log1p(-p))).astype(np.float32)


def _rng(ctx) -> np.random.Generator:
    if ctx.state is None:
        seed, seed2 = ctx.attrs.get("seed", 0), ctx.attrs.get("seed2", 0)
        ctx.state = (
            np.random.default_rng([seed, seed2]) if seed or seed2 else np.random.default_rng()
        )
    return ctx.state


def _sampler_kernel(distribution):
    def kernel(ctx, true_classes):
        a = ctx.attrs
        num_true, num_sampled, unique, range_max = (
            a["num_true"],
            a["num_sampled"],
            a["unique"],
            a["range_max"],
        )
        if true_classes.ndim != 2 or true_classes.shape[1] != num_true:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"true_classes must be a matrix with num_true={num_true} columns, "
                f"got shape {true_classes.shape}",
            )
        if unique and num_sampled > range_max:
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Sampler's range ({range_max}) is too small to sample {num_sampled} unique ids",
            )
        sampler = distribution(range_max)
        rng = _rng(ctx)
        if unique:
            sampled, num_tries = _draw_unique(sampler, rng, num_sampled)
        else:
            sampled, num_tries = sampler.draw(rng, num_sampled), num_sampled
        true_p = sampler.probability(true_classes)
        sampled_p = sampler.probability(sampled)
        return (
            sampled,
            _expected_count(true_p, num_tries, num_sampled, unique),
            _expected_count(sampled_p, num_tries, num_sampled, unique),
        )

    return kernel


register_kernel("UniformCandidateSampler")(_sampler_kernel(_Uniform))
register_kernel("LogUniformCandidateSampler")(_sampler_kernel(_LogUniform))


@register_kernel("ComputeAccidentalHits")
def compute_accidental_hits(ctx, true_classes, sampled):
    """Every (row, sampled position) whose sampled id is one of that row's true ids, in row, true
    column, sampled position order, with weight -FLT_MAX (so the logit vanishes in a softmax)."""
    num_true = ctx.attrs["num_true"]
    if true_classes.ndim != 2 or true_classes.shape[1] != num_true:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"true_classes must be a matrix with num_true={num_true} columns, got "
            f"{true_classes.shape}",
        )
    if sampled.ndim != 1:
        raise errors.InvalidArgumentError(
            None, None, f"sampled_candidates must be a vector, got {sampled.shape}"
        )
    rows, _, positions = np.nonzero(true_classes[:, :, None] == sampled[None, None, :])
    weights = np.full(rows.shape, -np.finfo(np.float32).max, np.float32)
    return rows.astype(np.int32), positions.astype(np.int64), weights
