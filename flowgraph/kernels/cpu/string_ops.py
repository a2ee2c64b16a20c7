"""CPU kernels of StringJoin and the regex matches (opdefs/string_ops.py). String tensors are
object arrays of bytes; NumPy's object loops do the per-element work."""

from __future__ import annotations

import functools
import re

import numpy as np

from flowgraph.core import errors
from flowgraph.kernels.base import register_kernel


def _bytes(x) -> bytes:
    return x if isinstance(x, bytes) else str(x).encode()


@register_kernel("StringJoin")
def string_join(ctx, *inputs):
    arrays = [np.asarray(x, dtype=object) for x in inputs]
    shapes = {a.shape for a in arrays if a.ndim}
    if len(shapes) > 1:
        raise errors.InvalidArgumentError(
            None, None, f"Input shapes do not match: {' vs. '.join(str(list(s)) for s in shapes)}"
        )
    if not arrays:
        return np.array(b"", dtype=object)
    sep = np.array(_bytes(ctx.attrs["separator"]), dtype=object)
    joined = functools.reduce(lambda a, b: np.add(np.add(a, sep), b), arrays)
    return np.asarray(joined, dtype=object)


def _full_match(values, pattern: bytes) -> np.ndarray:
    regex = re.compile(pattern)
    match = np.frompyfunc(lambda s: regex.fullmatch(_bytes(s)) is not None, 1, 1)
    return np.asarray(match(np.asarray(values, dtype=object)), dtype=bool)


@register_kernel("StaticRegexFullMatch")
def static_regex_full_match(ctx, values):
    return _full_match(values, _bytes(ctx.attrs["pattern"]))


@register_kernel("RegexFullMatch")
def regex_full_match(ctx, values, pattern):
    return _full_match(values, _bytes(np.asarray(pattern, dtype=object).reshape(-1)[0]))
