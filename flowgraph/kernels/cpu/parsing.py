"""Kernels that decode records (whitepaper §4.5): tf.Example / SequenceExample parsing (dense
float and int64 features straight off the wire for the whole batch, example_wire.py; otherwise
protobuf's C parser, then one NumPy conversion per feature), DecodeCSV (Python's csv module, one
call per record: the record is the unit of work), DecodeRaw (one frombuffer for the whole batch) and
DecodeCompressed (zlib)."""

from __future__ import annotations

import csv
import functools
import gzip
import itertools
import zlib

import numpy as np

from flowgraph.core import dtypes, errors
from flowgraph.core.protos import Example, SequenceExample
from flowgraph.kernels.base import register_kernel
from flowgraph.kernels.cpu import example_wire

_KIND = {dtypes.float32: "float_list", dtypes.int64: "int64_list", dtypes.string: "bytes_list"}
_TF_NAME = {dtypes.float32: "float", dtypes.int64: "int64", dtypes.string: "string"}
_KIND_NAME = {"float_list": "float", "int64_list": "int64", "bytes_list": "string"}


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _check_dtype(dtype) -> dtypes.DType:
    dtype = dtypes.as_dtype(dtype).base_dtype
    if dtype not in _KIND:
        raise _invalid(f"Feature dtype must be float, int64 or string, got {dtype.name}")
    return dtype


def _empty(dtype) -> np.ndarray:
    return np.zeros(0, dtype=dtype.as_numpy_dtype)


def _values(feature, dtype, key: str, index: int, name: str = "") -> np.ndarray:
    """The values of one tf.train.Feature as a 1-D array of `dtype`."""
    kind = feature.WhichOneof("kind")
    if kind is None:
        return _empty(dtype)
    if kind != _KIND[dtype]:
        raise _invalid(
            f"Name: {name or '<unknown>'}, Key: {key}, Index: {index}.  Data types don't match. "
            f"Data type: {_KIND_NAME[kind]} but expected type: {_TF_NAME[dtype]}"
        )
    values = getattr(feature, kind).value
    if dtype == dtypes.string:
        out = np.empty(len(values), dtype=object)
        out[:] = list(values)
        return out
    return np.array(values, dtype=dtype.as_numpy_dtype)


def _parse(cls, data, index: int, name: str = ""):
    msg = cls()
    try:
        msg.ParseFromString(data if isinstance(data, bytes) else bytes(data))
    except Exception:  # noqa: BLE001  (protobuf's DecodeError)
        raise _invalid(f"Could not parse example input, value: '{data!r}'") from None
    return msg


def _names(names, n: int) -> list:
    flat = np.asarray(names, dtype=object).reshape(-1)
    return [v.decode() if isinstance(v, bytes) else str(v) for v in flat] if flat.size else [""] * n


@functools.lru_cache(maxsize=256)
def _layout(dims: tuple) -> tuple[bool, list, int]:
    """(variable, inner dims, values per row) of a dense feature's shape."""
    variable = bool(dims) and dims[0] is None
    inner = list(dims[1:] if variable else dims)
    size = 1
    for d in inner:
        size = size * d if d is not None else -1
    return variable, inner, size


def dense_feature(maps: list, key: str, dtype, shape, default: np.ndarray, names=None):
    """[batch, *shape] from one feature of each example; a first dim of None (a
    FixedLenSequenceFeature) takes whole rows and pads to the longest with the default."""
    variable, inner, size = _layout(tuple(shape.as_list()))
    if size < 0:
        raise _invalid(f"Key: {key}: dense shape {shape} may have an unknown first dimension only")
    np_dtype = dtype.as_numpy_dtype
    rows = []
    for i, feats in enumerate(maps):
        name = names[i] if names else ""
        if key not in feats:
            if variable:
                rows.append(np.zeros([0, *inner], dtype=np_dtype))
            elif default.size == 0:
                raise _invalid(
                    f"Name: {name or '<unknown>'}, Feature: {key} (data type: {_TF_NAME[dtype]}) "
                    f"is required but could not be found."
                )
            else:
                rows.append(np.reshape(default, inner))
            continue
        v = _values(feats[key], dtype, key, i, name)
        if variable:
            if size == 0 or v.size % size:
                raise _invalid(
                    f"Name: {name or '<unknown>'}, Key: {key}, Index: {i}.  Number of "
                    f"{_TF_NAME[dtype]} values is not a multiple of stride length. Saw {v.size} "
                    f"values but output shape is: {shape}"
                )
            rows.append(v.reshape([-1, *inner]))
        elif v.size != size:
            raise _invalid(
                f"Name: {name or '<unknown>'}, Key: {key}, Index: {i}.  Number of "
                f"{_TF_NAME[dtype]} values != expected.  Values size: {v.size} but output "
                f"shape: {inner}"
            )
        else:
            rows.append(v.reshape(inner))
    if not variable:
        if len(rows) == 1:
            return rows[0][np.newaxis]
        return np.stack(rows) if rows else np.zeros([0, *inner], dtype=np_dtype)
    longest = max((len(r) for r in rows), default=0)
    fill = default.reshape(-1)[0] if default.size else (b"" if np_dtype is object else 0)
    out = np.full([len(rows), longest, *inner], fill, dtype=np_dtype)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    return out


def sparse_feature(value_lists: list, dtype, batched: bool):
    """(indices, values, dense_shape) of a VarLenFeature from per-example value arrays."""
    lengths = np.array([len(v) for v in value_lists], dtype=np.int64)
    values = (np.concatenate(value_lists) if value_lists else _empty(dtype)).astype(
        dtype.as_numpy_dtype, copy=False
    )
    longest = int(lengths.max()) if lengths.size else 0
    if not batched:
        n = int(lengths[0]) if lengths.size else 0
        return np.arange(n, dtype=np.int64).reshape(-1, 1), values, np.array([n], np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    rows = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
    cols = np.arange(lengths.sum(), dtype=np.int64) - np.repeat(starts, lengths)
    indices = np.stack([rows, cols], axis=1) if rows.size else np.zeros((0, 2), np.int64)
    return indices, values, np.array([len(lengths), longest], np.int64)


def _parse_examples(
    serialized,
    names,
    sparse_keys,
    sparse_types,
    dense_keys,
    dense_types,
    dense_shapes,
    dense_defaults,
    batched,
    wire=True,
):
    """The outputs of ParseExample (`batched`) or ParseSingleExample; `wire` False skips the
    fast path (it was tried and did not apply)."""
    flat = np.asarray(serialized, dtype=object).reshape(-1)
    fast = _dense_fast(flat, sparse_keys, dense_keys, dense_types, dense_shapes) if wire else None
    if fast is not None:
        return fast if batched else [a[0] for a in fast]
    maps = [_parse(Example, s, i).features.feature for i, s in enumerate(flat)]
    sparse = [
        sparse_feature(
            [
                _values(m[key], dtype, key, i) if key in m else _empty(dtype)
                for i, m in enumerate(maps)
            ],
            dtype,
            batched,
        )
        for key, dtype in zip(sparse_keys, sparse_types)
    ]
    dense = []
    for key, dtype, shape, default in zip(dense_keys, dense_types, dense_shapes, dense_defaults):
        out = dense_feature(maps, key, dtype, shape, np.asarray(default), names)
        dense.append(out if batched else out[0])
    return [s[0] for s in sparse] + [s[1] for s in sparse] + [s[2] for s in sparse] + dense


def _dense_fast(flat, sparse_keys, dense_keys, dense_types, dense_shapes) -> list | None:
    """Dense float32/int64 features of fixed shape read off the wire (example_wire.py), or
    None where that fast path does not apply."""
    if sparse_keys or not dense_keys:
        return None
    layout = _fast_layout(
        tuple(dense_keys),
        tuple(dense_types),
        tuple(tuple(s.as_list()) if s.rank is not None else None for s in dense_shapes),
    )
    if layout is None:
        return None
    sp, dims = layout
    out = example_wire.dense_batch(list(flat), sp)
    if out is None:
        return None
    return [a.reshape(len(flat), *d) for a, d in zip(out, dims)]


def dense_layout(sparse_keys, dense_keys, tdense, dense_shapes):
    """(example_wire.Spec, shapes) when only dense features of fixed shape are asked for; None
    otherwise, or where the attrs are wrong (the general path raises for them)."""
    if len(sparse_keys) or not dense_keys:
        return None
    try:
        types = tuple(_check_dtype(t) for t in tdense)
    except errors.InvalidArgumentError:
        return None
    dims = tuple(tuple(s.as_list()) if s.rank is not None else None for s in dense_shapes)
    return _fast_layout(tuple(dense_keys), types, dims)


@functools.lru_cache(maxsize=256)
def _fast_layout(keys: tuple, types: tuple, dims: tuple):
    """(example_wire.Spec, shapes) of features the fast path reads; None if it cannot."""
    if not all(t in (dtypes.float32, dtypes.int64) for t in types):
        return None
    if any(d is None or None in d for d in dims):
        return None
    sizes = tuple(int(np.prod(d, dtype=np.int64)) for d in dims)
    np_types = tuple(t.as_numpy_dtype for t in types)
    return example_wire.spec(keys, np_types, sizes), dims


def feature_keys(values) -> list:
    """The feature keys given as string tensors (ParseExample's key inputs)."""
    return [
        v.item().decode() if isinstance(v.item(), bytes) else str(v.item())
        for v in map(np.asarray, values)
    ]


@register_kernel("ParseExample")
def parse_example(ctx, serialized, names, *rest):
    return parse_example_batch(ctx.attrs, serialized, names, rest)


def parse_example_batch(a: dict, serialized, names, rest: tuple) -> tuple:
    """ParseExample's outputs for its attrs `a` and inputs (`rest`: the sparse keys, the dense
    keys, the dense defaults)."""
    ns, nd = a["Nsparse"], a["Ndense"]
    sparse_keys, dense_keys = feature_keys(rest[:ns]), feature_keys(rest[ns : ns + nd])
    serialized = np.asarray(serialized, dtype=object)
    if serialized.ndim != 1:
        raise _invalid(f"Expected serialized to be a vector, got shape: {list(serialized.shape)}")
    out = _parse_examples(
        serialized,
        _names(names, len(serialized)),
        sparse_keys,
        [_check_dtype(t) for t in a["sparse_types"]],
        dense_keys,
        [_check_dtype(t) for t in a["Tdense"]],
        a["dense_shapes"],
        rest[ns + nd :],
        True,
    )
    return tuple(out)


@register_kernel("ParseSingleExample")
def parse_single_example(ctx, serialized, *dense_defaults):
    fast = ctx.state  # (Spec, shapes) of the dense fast path, or False: decided once
    if fast is None:
        a = ctx.attrs
        fast = dense_layout(a["sparse_keys"], a["dense_keys"], a["Tdense"], a["dense_shapes"])
        fast = ctx.state = fast or False
    if fast:
        record = serialized.item() if type(serialized) is np.ndarray else serialized
        if type(record) is bytes and np.ndim(serialized) == 0:
            rows = example_wire.dense_one(record, fast[0])
            if rows is not None:
                return tuple(row.reshape(dims) for row, dims in zip(rows, fast[1]))
    a = ctx.attrs
    serialized = np.asarray(serialized, dtype=object)
    if serialized.ndim != 0:
        raise _invalid(f"Expected serialized to be a scalar, got shape: {list(serialized.shape)}")
    out = _parse_examples(
        serialized,
        None,
        a["sparse_keys"],
        [_check_dtype(t) for t in a["sparse_types"]],
        a["dense_keys"],
        [_check_dtype(t) for t in a["Tdense"]],
        a["dense_shapes"],
        dense_defaults,
        False,
        wire=False,  # the fast path above was tried or cannot apply: protobuf decides
    )
    return tuple(out)


@register_kernel("ParseExampleV2")
def parse_example_v2(ctx, serialized, names, sparse_keys, dense_keys, ragged_keys, *defaults):
    """ParseExample with the keys as tensors; a scalar `serialized` parses one example (no batch
    dimension), as TF 2's parse_single_example uses it. Ragged features are not supported."""
    a = ctx.attrs
    if np.asarray(ragged_keys).size or a["ragged_value_types"]:
        raise errors.UnimplementedError(None, None, "ParseExampleV2 with ragged features")
    serialized = np.asarray(serialized, dtype=object)
    if serialized.ndim > 1:
        raise _invalid(f"Expected serialized to be a scalar or vector, got {serialized.shape}")
    batched = serialized.ndim == 1
    out = _parse_examples(
        serialized,
        _names(names, serialized.size) if batched else None,
        feature_keys(np.asarray(sparse_keys, dtype=object).reshape(-1)),
        [_check_dtype(t) for t in a["sparse_types"]],
        feature_keys(np.asarray(dense_keys, dtype=object).reshape(-1)),
        [_check_dtype(t) for t in a["Tdense"]],
        a["dense_shapes"],
        defaults,
        batched,
    )
    return tuple(out)


def _feature_list_dense(lists, key, dtype, shape, missing_ok):
    """[batch, max_steps, *shape] and the number of steps of each example."""
    inner = shape.as_list()
    size = int(np.prod(inner, dtype=np.int64))
    per_example = []
    for i, fl in enumerate(lists):
        if key not in fl:
            if not missing_ok:
                raise _invalid(
                    f"Name: <unknown>, Feature list '{key}' is required but could not be found.  "
                    f"Did you mean to include it in feature_list_dense_missing_assumed_empty or "
                    f"feature_list_dense_defaults?"
                )
            per_example.append([])
            continue
        steps = []
        for j, feature in enumerate(fl[key].feature):
            v = _values(feature, dtype, key, i)
            if v.size != size:
                raise _invalid(
                    f"Name: <unknown>, Key: {key}, Index: {j}.  Number of {_TF_NAME[dtype]} "
                    f"values != expected.  values size: {v.size} but output shape: {inner}"
                )
            steps.append(v.reshape(inner))
        per_example.append(steps)
    lengths = np.array([len(s) for s in per_example], dtype=np.int64)
    longest = int(lengths.max()) if lengths.size else 0
    np_dtype = dtype.as_numpy_dtype
    out = np.full(
        [len(per_example), longest, *inner], b"" if np_dtype is object else 0, dtype=np_dtype
    )
    for i, steps in enumerate(per_example):
        if steps:
            out[i, : len(steps)] = np.stack(steps)
    return out, lengths


def _feature_list_sparse(lists, key, dtype):
    """Indices [N, 3] (example, step, position), values, shape [batch, steps, longest]."""
    idx, vals = [], []
    max_steps = max_len = 0
    for i, fl in enumerate(lists):
        if key not in fl:
            continue
        features = fl[key].feature
        max_steps = max(max_steps, len(features))
        for j, feature in enumerate(features):
            v = _values(feature, dtype, key, i)
            max_len = max(max_len, len(v))
            n = len(v)
            idx.append(
                np.stack([np.full(n, i), np.full(n, j), np.arange(n)], axis=1).astype(np.int64)
            )
            vals.append(v)
    indices = np.concatenate(idx) if idx else np.zeros((0, 3), np.int64)
    values = np.concatenate(vals) if vals else _empty(dtype)
    return indices, values, np.array([len(lists), max_steps, max_len], np.int64)


@register_kernel("ParseSequenceExample")
def parse_sequence_example(ctx, serialized, debug_name, *context_defaults):
    a = ctx.attrs
    flat = np.asarray(serialized, dtype=object).reshape(-1)
    seqs = [_parse(SequenceExample, s, i) for i, s in enumerate(flat)]
    maps = [s.context.feature for s in seqs]
    c_sparse = [
        sparse_feature(
            [_values(m[k], t, k, i) if k in m else _empty(t) for i, m in enumerate(maps)], t, True
        )
        for k, t in zip(a["context_sparse_keys"], map(_check_dtype, a["context_sparse_types"]))
    ]
    c_dense = [
        dense_feature(maps, k, _check_dtype(t), shape, np.asarray(d))
        for k, t, shape, d in zip(
            a["context_dense_keys"],
            a["Tcontext_dense"],
            a["context_dense_shapes"],
            context_defaults,
        )
    ]
    lists = [s.feature_lists.feature_list for s in seqs]
    f_sparse = [
        _feature_list_sparse(lists, k, _check_dtype(t))
        for k, t in zip(a["feature_list_sparse_keys"], a["feature_list_sparse_types"])
    ]
    missing_ok = set(a["feature_list_dense_missing_assumed_empty"])
    f_dense = [
        _feature_list_dense(lists, k, _check_dtype(t), shape, k in missing_ok)
        for k, t, shape in zip(
            a["feature_list_dense_keys"],
            a["feature_list_dense_types"],
            a["feature_list_dense_shapes"],
        )
    ]
    return tuple(
        [s[0] for s in c_sparse]
        + [s[1] for s in c_sparse]
        + [s[2] for s in c_sparse]
        + c_dense
        + [s[0] for s in f_sparse]
        + [s[1] for s in f_sparse]
        + [s[2] for s in f_sparse]
        + [d[0] for d in f_dense]
        + [d[1] for d in f_dense]
    )


# -- DecodeRaw / DecodeCompressed / DecodeCSV ----------------------------------------------------
@register_kernel("DecodeRaw")
def decode_raw(ctx, data):
    dtype = np.dtype(ctx.attrs["out_type"].as_numpy_dtype)
    dtype = dtype.newbyteorder("<" if ctx.attrs["little_endian"] else ">")
    arr = np.asarray(data, dtype=object)
    flat = arr.reshape(-1)
    if flat.size == 0:
        return np.zeros(arr.shape + (0,), dtype=dtype.newbyteorder("="))
    size = len(flat[0])
    for i, s in enumerate(flat):
        if len(s) != size:
            raise _invalid(
                f"DecodeRaw requires input strings to all be the same size, but element {i} has "
                f"size {len(s)} != {size}"
            )
    if size % dtype.itemsize:
        raise _invalid(
            f"Input to DecodeRaw has length {size} that is not a multiple of {dtype.itemsize}, "
            f"the size of {ctx.attrs['out_type'].name}"
        )
    out = np.frombuffer(b"".join(flat), dtype=dtype).astype(dtype.newbyteorder("="))
    return out.reshape(arr.shape + (size // dtype.itemsize,))


def _decompress(data: bytes, compression: str) -> bytes:
    if compression == "ZLIB":
        return zlib.decompress(data)
    if compression == "GZIP":
        return gzip.decompress(data)
    return data


@register_kernel("DecodeCompressed")
def decode_compressed(ctx, data):
    compression = (ctx.attrs["compression_type"] or "").upper()
    if compression not in ("", "ZLIB", "GZIP"):
        raise _invalid(f"Unsupported compression type: {ctx.attrs['compression_type']}")
    arr = np.asarray(data, dtype=object)
    out = np.empty(arr.shape, dtype=object)
    try:
        out.reshape(-1)[:] = [_decompress(s, compression) for s in arr.reshape(-1)]
    except (zlib.error, OSError, EOFError) as e:
        raise errors.DataLossError(None, None, f"DecodeCompressed: {e}") from None
    return out


def _convert(field: str, dtype, col: int, row: int):
    try:
        if dtype == dtypes.string:
            return field.encode()
        if dtype in (dtypes.float32, dtypes.float64):
            return float(field)
        value = int(field)
    except ValueError:
        raise _invalid(
            f"Field {col} in record {row} is not a valid {_CSV_NAME.get(dtype, dtype.name)}: "
            f"{field}"
        ) from None
    if dtype == dtypes.int32 and not -(2**31) <= value < 2**31:
        raise _invalid(f"Field {col} in record {row} is not a valid int32: {field}")
    return value


_CSV_NAME = {
    dtypes.float32: "float",
    dtypes.float64: "double",
    dtypes.int32: "int32",
    dtypes.int64: "int64",
}


def _split(record: str, delim: str, quoted: bool) -> list:
    if not quoted:
        return record.split(delim)
    try:
        return next(csv.reader([record], delimiter=delim, quotechar='"', strict=True))
    except csv.Error as e:
        raise _invalid(
            f"Quoted field has to end with quote followed by delim or end: {e}"
        ) from None
    except StopIteration:
        return [""]


@register_kernel("DecodeCSV")
def decode_csv(ctx, records, *defaults):
    a = ctx.attrs
    delim, quoted, na = a["field_delim"], a["use_quote_delim"], a["na_value"]
    cols = list(a["select_cols"])
    if len(delim) != 1:
        raise _invalid("field_delim should be only 1 char")
    if cols and any(b <= c for c, b in itertools.pairwise(cols)):
        raise _invalid("select_cols is not strictly increasing.")
    if cols and cols[0] < 0:
        raise _invalid("select_cols contains negative values.")
    types = [t.base_dtype for t in ctx.output_types]
    if cols and len(cols) != len(types):
        raise _invalid("select_cols should match record_defaults.")
    defaults = [np.asarray(d) for d in defaults]
    for i, d in enumerate(defaults):
        if d.size > 1:
            raise _invalid(f"Each record default should be at most rank 1; default {i} is not")
    arr = np.asarray(records, dtype=object)
    columns = [[] for _ in types]
    for row, rec in enumerate(arr.reshape(-1)):
        fields = _split(rec.decode() if isinstance(rec, bytes) else str(rec), delim, quoted)
        if cols:
            if len(fields) <= cols[-1]:
                raise _invalid(
                    f"Expect {cols[-1] + 1} fields but have {len(fields)} in record {row}"
                )
            fields = [fields[c] for c in cols]
        elif len(fields) != len(types):
            raise _invalid(f"Expect {len(types)} fields but have {len(fields)} in record {row}")
        for col, (field, dtype, default) in enumerate(zip(fields, types, defaults)):
            if field == "" or field == na:
                if default.size == 0:
                    raise _invalid(f"Field {col} is required but missing in record {row}!")
                columns[col].append(default.reshape(-1)[0])
            else:
                columns[col].append(_convert(field, dtype, col, row))
    out = []
    for values, dtype in zip(columns, types):
        np_dtype = dtype.as_numpy_dtype
        col = np.empty(len(values), dtype=object) if np_dtype is object else None
        if col is not None:
            col[:] = values
        else:
            col = np.array(values, dtype=np_dtype)
        out.append(col.reshape(arr.shape))
    return tuple(out) if len(out) != 1 else (out[0],)
