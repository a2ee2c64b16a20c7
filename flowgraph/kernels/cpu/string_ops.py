"""CPU kernels of StringJoin and the regex matches (opdefs/string_ops.py). String tensors are
object arrays of bytes; NumPy's object loops do the per-element work."""

from __future__ import annotations

import base64
import binascii
import functools
import re

import numpy as np

from flowgraph.core import errors
from flowgraph.kernels.base import register_kernel
from flowgraph.kernels.cpu.farmhash import fingerprint64


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


# -- The string ops TF1 programs use (opdefs/string_ops.py) -------------------------------------
def _invalid(msg: str):
    return errors.InvalidArgumentError(None, None, msg)


def _map(fn, values, otype=object) -> np.ndarray:
    """fn over every element of a string tensor (NumPy's object loop), as an array of otype."""
    arr = np.asarray(values, dtype=object)
    return np.asarray(np.frompyfunc(lambda s: fn(_bytes(s)), 1, 1)(arr), dtype=otype).reshape(
        arr.shape
    )


def _sparse_tokens(tokens: list[list[bytes]]):
    """SparseTensor parts of a ragged list of token lists: [row, position] per token."""
    counts = np.array([len(t) for t in tokens], np.int64)
    rows = np.repeat(np.arange(len(tokens), dtype=np.int64), counts)
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    cols = np.arange(rows.size, dtype=np.int64) - starts
    values = np.empty(rows.size, dtype=object)
    values[:] = [t for row in tokens for t in row]
    width = int(counts.max()) if counts.size else 0
    return np.stack([rows, cols], axis=1).reshape(-1, 2), values, np.array([len(tokens), width])


@register_kernel("StringSplit")
def string_split(ctx, values, delimiter):
    """Splits at every byte of `delimiter` (each one is a delimiter); "" splits into bytes."""
    if values.ndim != 1:
        raise _invalid(f"input must be a vector, got shape: {list(values.shape)}")
    delim = _bytes(np.asarray(delimiter, dtype=object).reshape(-1)[0])
    skip = ctx.attrs["skip_empty"]
    if not delim:
        tokens = [[bytes([c]) for c in _bytes(s)] for s in values]
    else:
        pattern = re.compile(b"[" + re.escape(delim) + b"]")
        tokens = [pattern.split(_bytes(s)) for s in values]
        if skip:
            tokens = [[t for t in row if t] for row in tokens]
        else:
            tokens = [row if _bytes(s) else [] for row, s in zip(tokens, values)]
    return _sparse_tokens(tokens)


@register_kernel("StringSplitV2")
def string_split_v2(ctx, values, sep):
    """Python's bytes.split: an empty `sep` splits on whitespace runs and drops empty tokens."""
    sep = _bytes(np.asarray(sep, dtype=object).reshape(-1)[0]) or None
    maxsplit = ctx.attrs["maxsplit"]
    tokens = [
        _bytes(s).split(sep, maxsplit) if _bytes(s) or sep is None else []
        for s in values.reshape(-1)
    ]
    return _sparse_tokens(tokens)


@register_kernel("Substr")
def substr(ctx, values, pos, length):
    arrays = [np.asarray(values, dtype=object), np.asarray(pos), np.asarray(length)]
    try:
        s, p, n = np.broadcast_arrays(*arrays)
    except ValueError:
        raise _invalid(f"Substr: incompatible shapes {[list(a.shape) for a in arrays]}") from None
    utf8 = ctx.attrs["unit"] == "UTF8_CHAR"
    flat = [x.decode() if utf8 else x for x in map(_bytes, s.reshape(-1))]
    sizes = np.array([len(x) for x in flat], np.int64)
    p, n = p.reshape(-1).astype(np.int64), n.reshape(-1).astype(np.int64)
    bad = (p > sizes) | (p < -sizes)
    if bad.any():
        i = int(np.argmax(bad))
        raise _invalid(f"Position {int(p[i])} is out of range for string of length {sizes[i]}")
    start = np.where(p < 0, p + sizes, p)
    stop = np.minimum(start + np.maximum(n, 0), sizes)
    out = np.empty(len(flat), dtype=object)
    out[:] = [x[a:b] for x, a, b in zip(flat, start, stop)]
    if utf8:
        out[:] = [x.encode() for x in out]
    return out.reshape(s.shape)


def _format_float(ctx, kind: str) -> str:
    precision, width, fill = ctx.attrs["precision"], ctx.attrs["width"], ctx.attrs["fill"]
    if fill not in ("", " ", "0") and len(fill) > 1:
        raise _invalid(f"Fill string must be one or fewer characters, got {fill!r}")
    spec = ("0" if fill == "0" else "") + (str(width) if width > -1 else "")
    if kind in "iub":
        return spec + "d"
    if ctx.attrs["shortest"]:
        return spec + "g"
    prec = f".{precision}" if precision > -1 else ".6"
    return spec + prec + ("e" if ctx.attrs["scientific"] else "f")


@register_kernel("AsString")
def as_string(ctx, values):
    """printf-like formatting as TF's AsString: %f (6 digits) for floats, %e with scientific,
    %g with shortest, true/false for bools, (re,im) for complex numbers."""
    kind = values.dtype.kind
    if kind == "b":
        return _map(lambda b: b, np.where(values, b"true", b"false"))
    fmt = "%" + _format_float(ctx, kind)
    fill = ctx.attrs["fill"]

    def one(x) -> bytes:
        text = (
            fmt % x
            if kind != "f" or np.isfinite(x)
            else ("nan" if np.isnan(x) else ("-inf" if x < 0 else "inf"))
        )
        if fill not in ("", "0") and ctx.attrs["width"] > len(text):
            text = text.rjust(ctx.attrs["width"], fill)
        return text.encode()

    if kind == "c":
        flat = [b"(" + one(z.real) + b"," + one(z.imag) + b")" for z in values.reshape(-1)]
    else:
        flat = [one(x) for x in values.reshape(-1).tolist()]
    out = np.empty(len(flat), dtype=object)
    out[:] = flat
    return out.reshape(values.shape)


@register_kernel("StringToNumber")
def string_to_number(ctx, values):
    out_type = ctx.attrs["out_type"].as_numpy_dtype
    parse = float if np.dtype(out_type).kind == "f" else int

    def one(s: bytes):
        try:
            v = parse(s.decode("ascii"))
        except (ValueError, UnicodeDecodeError):
            raise _invalid(
                f"StringToNumberOp could not correctly convert string: {s.decode(errors='replace')}"
            ) from None
        if parse is int and not np.iinfo(out_type).min <= v <= np.iinfo(out_type).max:
            raise _invalid(f"StringToNumberOp could not correctly convert string: {s.decode()}")
        return v

    return _map(one, values).astype(out_type)


@register_kernel("StringToHashBucketFast")
def string_to_hash_bucket_fast(ctx, values):
    """FarmHash Fingerprint64(s) mod num_buckets: TensorFlow's bucket ids, bit for bit."""
    n = ctx.attrs["num_buckets"]
    return _map(lambda s: fingerprint64(s) % n, values).astype(np.int64)


def _rewrite(template: bytes) -> bytes:
    """RE2's rewrite syntax (\\0-\\9) as Python's (\\g<0>-\\g<9>)."""
    return re.sub(rb"\\(\d)", rb"\\g<\1>", template)


def _replace(values, pattern: bytes, rewrite: bytes, replace_global: bool):
    try:
        regex = re.compile(pattern)
    except re.error as e:
        raise _invalid(f"Invalid pattern: {pattern!r}, error: {e}") from None
    repl = _rewrite(rewrite)
    return _map(lambda s: regex.sub(repl, s, count=0 if replace_global else 1), values)


@register_kernel("RegexReplace")
def regex_replace(ctx, values, pattern, rewrite):
    first = lambda t: _bytes(np.asarray(t, dtype=object).reshape(-1)[0])
    return _replace(values, first(pattern), first(rewrite), ctx.attrs["replace_global"])


@register_kernel("StaticRegexReplace")
def static_regex_replace(ctx, values):
    a = ctx.attrs
    return _replace(values, _bytes(a["pattern"]), _bytes(a["rewrite"]), a["replace_global"])


@register_kernel("ReduceJoin")
def reduce_join(ctx, values, axes):
    values = np.asarray(values, dtype=object)
    rank = values.ndim
    axes = np.asarray(axes, np.int64).reshape(-1)
    if ((axes < -rank) | (axes >= rank)).any():
        raise _invalid(f"Invalid reduction dimension {axes.tolist()} for input with {rank} dims")
    # Axes are joined in the given order: the first is the innermost (TF reduces one by one).
    axes = list(dict.fromkeys(int(a) % rank for a in axes)) if rank else []
    kept = [i for i in range(rank) if i not in axes]
    moved = np.transpose(values, kept + axes[::-1]).reshape([values.shape[i] for i in kept] + [-1])
    sep = _bytes(ctx.attrs["separator"])
    joined = np.empty(moved.shape[:-1], dtype=object)
    flat = moved.reshape(-1, moved.shape[-1]) if moved.size else moved.reshape(joined.size, 0)
    joined.reshape(-1)[:] = [sep.join(map(_bytes, row)) for row in flat]
    if ctx.attrs["keep_dims"]:
        return joined.reshape([1 if i in axes else values.shape[i] for i in range(rank)])
    return joined


@register_kernel("StringLength")
def string_length(ctx, values):
    if ctx.attrs["unit"] == "UTF8_CHAR":
        return _map(lambda s: len(s.decode("utf-8", errors="replace")), values, np.int32)
    return _map(len, values, np.int32)


def _case(ctx, values, method: str):
    """ASCII case mapping, or Unicode's with encoding 'utf-8'."""
    encoding = ctx.attrs["encoding"]
    if encoding == "":
        return _map(getattr(bytes, method), values)
    if encoding.lower() not in ("utf-8", "utf8"):
        raise _invalid(f"encoding {encoding!r} is not supported (only '' and 'utf-8')")
    return _map(lambda s: getattr(s.decode("utf-8"), method)().encode("utf-8"), values)


@register_kernel("StringLower")
def string_lower(ctx, values):
    return _case(ctx, values, "lower")


@register_kernel("StringUpper")
def string_upper(ctx, values):
    return _case(ctx, values, "upper")


@register_kernel("StringStrip")
def string_strip(ctx, values):
    return _map(bytes.strip, values)


@register_kernel("EncodeBase64")
def encode_base64(ctx, values):
    """Web-safe base64 ('-' and '_'), '=' padding only with pad=True, as TF's."""
    strip = b"" if ctx.attrs["pad"] else b"="
    return _map(lambda s: base64.urlsafe_b64encode(s).rstrip(strip), values)


@register_kernel("DecodeBase64")
def decode_base64(ctx, values):
    def one(s: bytes) -> bytes:
        try:
            return base64.urlsafe_b64decode(s + b"=" * (-len(s) % 4))
        except (ValueError, binascii.Error):
            raise _invalid(f"Invalid character found in base64: {s!r}") from None

    return _map(one, values)


def _fingerprint_bytes(chunks) -> np.ndarray:
    """The little-endian bytes of FarmHash Fingerprint64 of each chunk, as [len, 8] uint8."""
    values = np.array([fingerprint64(c) for c in chunks], dtype="<u8")
    return values.view(np.uint8).reshape(len(values), 8)


@register_kernel("Fingerprint")
def fingerprint(ctx, data, method):
    """TF's Fingerprint: farmhash64 of each row's bytes; a row of several strings is the
    fingerprint of their fingerprints' bytes."""
    name = _bytes(np.asarray(method, dtype=object).reshape(-1)[0])
    if name != b"farmhash64":
        raise _invalid(f"Unsupported fingerprint method: {name.decode(errors='replace')}")
    if data.ndim < 1:
        raise _invalid("data must have rank at least one")
    rows = data.shape[0]
    if data.dtype == object:
        flat = [_bytes(s) for s in data.reshape(-1)]
        if rows == len(flat):
            return _fingerprint_bytes(flat)
        per_row = _fingerprint_bytes(flat).reshape(rows, -1)
        return _fingerprint_bytes([row.tobytes() for row in per_row])
    raw = np.ascontiguousarray(data).reshape(rows, -1).view(np.uint8).reshape(rows, -1)
    return _fingerprint_bytes([row.tobytes() for row in raw])
