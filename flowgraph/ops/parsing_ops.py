"""Decoding records (whitepaper §4.5): tf.parse_example / parse_single_example /
tf.io.parse_sequence_example with FixedLenFeature, VarLenFeature and FixedLenSequenceFeature,
tf.decode_csv, tf.decode_raw and tf.io.decode_compressed.

Example:
    features = tf.parse_single_example(record, {
        "image": tf.FixedLenFeature([784], tf.float32),
        "label": tf.FixedLenFeature([], tf.int64),
        "tags": tf.VarLenFeature(tf.int64),        # a SparseTensor
    })
"""

from __future__ import annotations

import collections
import re

from flowgraph.core import dtypes
from flowgraph.core.shapes import TensorShape, as_shape
from flowgraph.framework import convert, default_graph
from flowgraph.framework.apply_op import apply_op
from flowgraph.framework.operation import Tensor
from flowgraph.ops import array as array_ops
from flowgraph.ops.array_index import slice_

__all__ = [
    "FixedLenFeature",
    "FixedLenSequenceFeature",
    "SparseFeature",
    "VarLenFeature",
    "decode_compressed",
    "decode_csv",
    "decode_raw",
    "parse_example",
    "parse_sequence_example",
    "parse_single_example",
    "parse_single_sequence_example",
]


class FixedLenFeature(
    collections.namedtuple("FixedLenFeature", ["shape", "dtype", "default_value"])
):
    """A feature with a fixed number of values: a dense tensor of `shape` (required unless a
    default_value is given)."""

    def __new__(cls, shape, dtype, default_value=None):
        return super().__new__(cls, shape, dtype, default_value)


class FixedLenSequenceFeature(
    collections.namedtuple(
        "FixedLenSequenceFeature", ["shape", "dtype", "allow_missing", "default_value"]
    )
):
    """A variable number of blocks of `shape`: dense [num_blocks, *shape], padded to the
    longest in a batch with `default_value`."""

    def __new__(cls, shape, dtype, allow_missing=False, default_value=None):
        return super().__new__(cls, shape, dtype, allow_missing, default_value)


class VarLenFeature(collections.namedtuple("VarLenFeature", ["dtype"])):
    """A variable number of values: parsed as a SparseTensor."""


class SparseFeature(
    collections.namedtuple(
        "SparseFeature", ["index_key", "value_key", "dtype", "size", "already_sorted"]
    )
):
    """A SparseTensor of dense shape `size` whose values come from `value_key` and whose
    indices come from the `index_key` feature(s), entry by entry."""

    def __new__(cls, index_key, value_key, dtype, size, already_sorted=False):
        return super().__new__(cls, index_key, value_key, dtype, size, already_sorted)


def _sparse_tensor(indices, values, dense_shape):
    try:
        from flowgraph.framework.sparse_tensor import SparseTensor
    except ImportError:
        raise NotImplementedError(
            "VarLenFeature parses to a tf.SparseTensor, which flowgraph does not have yet; "
            "use FixedLenFeature or FixedLenSequenceFeature(allow_missing=True)"
        ) from None
    return SparseTensor(indices, values, dense_shape)


def _split_features(features):
    """(sparse keys, sparse types, dense keys, dense types, dense shapes, dense defaults)."""
    if not features:
        raise ValueError(f"Missing: features was {features}.")
    sparse_keys, sparse_types = [], []
    dense_keys, dense_types, dense_shapes, defaults = [], [], [], []
    for key in sorted(features):
        feature = features[key]
        if isinstance(feature, VarLenFeature):
            sparse_keys.append(key)
            sparse_types.append(dtypes.as_dtype(feature.dtype))
        elif isinstance(feature, FixedLenFeature):
            dense_keys.append(key)
            dense_types.append(dtypes.as_dtype(feature.dtype))
            dense_shapes.append(as_shape(feature.shape))
            defaults.append(feature.default_value)
        elif isinstance(feature, FixedLenSequenceFeature):
            if not feature.allow_missing:
                raise ValueError(
                    "Unsupported: FixedLenSequenceFeature requires allow_missing to be True."
                )
            dense_keys.append(key)
            dense_types.append(dtypes.as_dtype(feature.dtype))
            dense_shapes.append(TensorShape([None]).concatenate(as_shape(feature.shape)))
            defaults.append(feature.default_value)
        elif isinstance(feature, SparseFeature):
            raise NotImplementedError(f"SparseFeature ({key}) reaches _split_features")
        else:
            raise ValueError(f"Invalid feature {key}:{feature}.")
    for t in sparse_types + dense_types:
        if t not in (dtypes.float32, dtypes.int64, dtypes.string):
            raise ValueError(f"Feature dtype must be float32, int64 or string, got {t.name}")
    return sparse_keys, sparse_types, dense_keys, dense_types, dense_shapes, defaults


def _dense_defaults(keys, types, shapes, defaults):
    out = []
    for key, dtype, shape, default in zip(keys, types, shapes, defaults):
        clean = re.sub(r"[^A-Za-z0-9_.\-/]", "_", key)
        if shape.ndims and shape.as_list()[0] is None:  # padding value of a sequence feature
            if default is None:
                default = "" if dtype == dtypes.string else 0
            value = convert.convert_to_tensor(default, dtype=dtype, name="padding_" + clean)
            out.append(array_ops.reshape(value, []))
        elif default is None:
            out.append(convert.constant([], dtype=dtype))
        else:
            value = convert.convert_to_tensor(default, dtype=dtype, name="key_" + clean)
            out.append(array_ops.reshape(value, shape.as_list()))
    return out


def _assemble(op, sparse_keys, dense_keys, dense_shapes, batch_dim):
    ns = len(sparse_keys)
    outs = list(op.outputs)
    result = {}
    rank = 1 if batch_dim is False else 2
    for i, key in enumerate(sparse_keys):
        outs[i].set_shape([None, rank])
        outs[ns + i].set_shape([None])
        outs[2 * ns + i].set_shape([rank])
        result[key] = _sparse_tensor(outs[i], outs[ns + i], outs[2 * ns + i])
    for i, (key, shape) in enumerate(zip(dense_keys, dense_shapes)):
        t = outs[3 * ns + i]
        t.set_shape(shape if batch_dim is False else TensorShape([batch_dim]).concatenate(shape))
        result[key] = t
    return result


def _expand_sparse_features(features):
    """(features with each SparseFeature replaced by VarLenFeatures of its index and value
    keys, the SparseFeatures to rebuild afterwards)."""
    sparse = {k: f for k, f in features.items() if isinstance(f, SparseFeature)}
    if not sparse:
        return features, {}
    out = {k: f for k, f in features.items() if not isinstance(f, SparseFeature)}
    for key, f in sparse.items():
        index_keys = f.index_key if isinstance(f.index_key, (list, tuple)) else [f.index_key]
        sizes = f.size if isinstance(f.size, (list, tuple)) else [f.size]
        if len(index_keys) != len(sizes):
            raise ValueError(f"SparseFeature {key}: index_key and size must have equal lengths")
        for k in index_keys:
            out.setdefault(k, VarLenFeature(dtypes.int64))
        out.setdefault(f.value_key, VarLenFeature(f.dtype))
    return out, sparse


def _build_sparse_features(parsed, requested, sparse, batched):
    """The SparseTensors of SparseFeatures: entry i of value_key sits at index i of each
    index_key (per example), so the parts share the VarLen features' row structure."""
    from flowgraph.ops import sparse as sparse_ops

    result = {k: v for k, v in parsed.items() if k in requested}
    for key, f in sparse.items():
        index_keys = f.index_key if isinstance(f.index_key, (list, tuple)) else [f.index_key]
        sizes = list(f.size) if isinstance(f.size, (list, tuple)) else [f.size]
        values = parsed[f.value_key]
        columns = [array_ops.expand_dims(parsed[k].values, 1) for k in index_keys]
        if batched:
            rows = slice_(values.indices, [0, 0], [-1, 1])
            indices = array_ops.concat([rows] + columns, 1)
            batch = slice_(values.dense_shape, [0], [1])
            shape = array_ops.concat([batch, convert.constant(sizes, dtypes.int64)], 0)
        else:
            indices = array_ops.concat(columns, 1)
            shape = convert.constant(sizes, dtypes.int64)
        st = _sparse_tensor(indices, values.values, shape)
        result[key] = st if f.already_sorted else sparse_ops.sparse_reorder(st)
    return result


def parse_example(serialized, features, name=None, example_names=None):
    """Parses a batch (vector) of serialized tf.train.Examples into a dict of tensors."""
    requested = dict(features or {})
    features, sparse = _expand_sparse_features(requested)
    if sparse:
        parsed = parse_example(serialized, features, name, example_names)
        return _build_sparse_features(parsed, requested, sparse, True)
    sk, st, dk, dt, ds, dd = _split_features(features)
    graph = default_graph.get()
    with graph.name_scope(name or "ParseExample"):
        serialized = convert.convert_to_tensor(serialized, dtype=dtypes.string, name="serialized")
        names = convert.convert_to_tensor(
            example_names if example_names is not None else [], dtype=dtypes.string, name="names"
        )
        sparse_keys = [convert.constant(k, dtype=dtypes.string) for k in sk]
        dense_keys = [convert.constant(k, dtype=dtypes.string) for k in dk]
        op = apply_op(
            "ParseExample",
            [serialized, names, sparse_keys, dense_keys, _dense_defaults(dk, dt, ds, dd)],
            name="ParseExample",
            sparse_types=st,
            dense_shapes=ds,
        )
    return _assemble(op, sk, dk, ds, serialized.shape.with_rank(1)[0].value)


def parse_single_example(serialized, features, name=None, example_names=None):
    """Parses one serialized tf.train.Example (a scalar) into a dict of tensors."""
    requested = dict(features or {})
    features, sparse = _expand_sparse_features(requested)
    if sparse:
        parsed = parse_single_example(serialized, features, name, example_names)
        return _build_sparse_features(parsed, requested, sparse, False)
    sk, st, dk, dt, ds, dd = _split_features(features)
    graph = default_graph.get()
    with graph.name_scope(name or "ParseSingleExample"):
        serialized = convert.convert_to_tensor(serialized, dtype=dtypes.string, name="serialized")
        serialized.shape.assert_is_compatible_with([])
        op = apply_op(
            "ParseSingleExample",
            [serialized, _dense_defaults(dk, dt, ds, dd)],
            name="ParseSingleExample",
            num_sparse=len(sk),
            sparse_keys=sk,
            dense_keys=dk,
            sparse_types=st,
            dense_shapes=ds,
        )
    return _assemble(op, sk, dk, ds, False)


def parse_sequence_example(
    serialized, context_features=None, sequence_features=None, example_names=None, name=None
):
    """Parses a batch of tf.train.SequenceExamples: (context dict, feature-list dict, lengths
    dict: the number of steps of each dense feature list per example)."""
    if not (context_features or sequence_features):
        raise ValueError("Missing features.")
    csk, cst, cdk, cdt, cds, cdd = (
        _split_features(context_features) if context_features else ([], [], [], [], [], [])
    )
    fsk, fst, fdk, fdt, fds = [], [], [], [], []
    missing_ok = []
    for key in sorted(sequence_features or {}):
        f = sequence_features[key]
        if isinstance(f, VarLenFeature):
            fsk.append(key)
            fst.append(dtypes.as_dtype(f.dtype))
        elif isinstance(f, FixedLenSequenceFeature):
            if f.default_value is not None:
                raise NotImplementedError(
                    f"FixedLenSequenceFeature default_value in sequence_features ({key})"
                )
            fdk.append(key)
            fdt.append(dtypes.as_dtype(f.dtype))
            fds.append(as_shape(f.shape))
            if f.allow_missing:
                missing_ok.append(key)
        else:
            raise ValueError(
                f"Invalid sequence feature {key}:{f}: use VarLenFeature or FixedLenSequenceFeature"
            )
    graph = default_graph.get()
    with graph.name_scope(name or "ParseSequenceExample"):
        serialized = convert.convert_to_tensor(serialized, dtype=dtypes.string, name="serialized")
        debug = convert.convert_to_tensor(
            example_names if example_names is not None else [], dtype=dtypes.string
        )
        op = apply_op(
            "ParseSequenceExample",
            [serialized, debug, _dense_defaults(cdk, cdt, cds, cdd)],
            name="ParseSequenceExample",
            feature_list_dense_missing_assumed_empty=missing_ok,
            context_sparse_keys=csk,
            context_dense_keys=cdk,
            feature_list_sparse_keys=fsk,
            feature_list_dense_keys=fdk,
            Ncontext_sparse=len(csk),
            Ncontext_dense=len(cdk),
            Nfeature_list_sparse=len(fsk),
            Nfeature_list_dense=len(fdk),
            context_sparse_types=cst,
            feature_list_dense_types=fdt,
            context_dense_shapes=cds,
            feature_list_sparse_types=fst,
            feature_list_dense_shapes=fds,
        )
    outs = list(op.outputs)
    batch = serialized.shape.with_rank(1)[0].value
    n = len(csk)
    context = {}
    for i, key in enumerate(csk):
        context[key] = _sparse_tensor(outs[i], outs[n + i], outs[2 * n + i])
    pos = 3 * n
    for key, shape in zip(cdk, cds):
        outs[pos].set_shape(TensorShape([batch]).concatenate(shape))
        context[key] = outs[pos]
        pos += 1
    lists, lengths = {}, {}
    m = len(fsk)
    for i, key in enumerate(fsk):
        lists[key] = _sparse_tensor(outs[pos + i], outs[pos + m + i], outs[pos + 2 * m + i])
    pos += 3 * m
    for i, (key, shape) in enumerate(zip(fdk, fds)):
        outs[pos + i].set_shape(TensorShape([batch, None]).concatenate(shape))
        lists[key] = outs[pos + i]
        lengths[key] = outs[pos + len(fdk) + i]
    return context, lists, lengths


def parse_single_sequence_example(
    serialized, context_features=None, sequence_features=None, example_name=None, name=None
):
    """Parses one SequenceExample: (context dict, feature-list dict) without the batch dim."""
    batch = array_ops.reshape(
        convert.convert_to_tensor(serialized, dtype=dtypes.string), [1], name=None
    )
    names = None if example_name is None else [example_name]
    context, lists, _ = parse_sequence_example(
        batch, context_features, sequence_features, names, name or "ParseSingleSequenceExample"
    )
    return (
        {k: _drop_batch(v) for k, v in context.items()},
        {k: _drop_batch(v) for k, v in lists.items()},
    )


def _drop_batch(value):
    """`value` of a batch of one without its batch dimension (a SparseTensor drops the first
    column of its indices and the first entry of its shape)."""
    if not isinstance(value, Tensor):
        rank = value.dense_shape.shape[0].value
        indices = slice_(value.indices, [0, 1], [-1, -1])
        indices.set_shape([None, None if rank is None else rank - 1])
        return _sparse_tensor(indices, value.values, slice_(value.dense_shape, [1], [-1]))
    return array_ops.squeeze(value, [0])


# -- raw, compressed and CSV records -------------------------------------------------------------
def decode_raw(input_bytes=None, out_type=None, little_endian=True, name=None, bytes=None):
    """Reinterprets the bytes of each string as a vector of `out_type` (a new last dimension)."""
    if bytes is not None:
        if input_bytes is not None:
            raise ValueError("Cannot pass both `input_bytes` and `bytes`")
        input_bytes = bytes
    value = convert.convert_to_tensor(input_bytes, dtype=dtypes.string, name="bytes")
    return apply_op(
        "DecodeRaw",
        [value],
        name=name,
        out_type=dtypes.as_dtype(out_type),
        little_endian=bool(little_endian),
    ).outputs[0]


def decode_compressed(bytes, compression_type="", name=None):
    """Decompresses each string ('' for none, 'ZLIB' or 'GZIP')."""
    value = convert.convert_to_tensor(bytes, dtype=dtypes.string, name="bytes")
    return apply_op(
        "DecodeCompressed", [value], name=name, compression_type=compression_type or ""
    ).outputs[0]


def decode_csv(
    records,
    record_defaults,
    field_delim=",",
    use_quote_delim=True,
    name=None,
    na_value="",
    select_cols=None,
):
    """Parses CSV records into one tensor per column, of the types of `record_defaults` (a
    value, or an empty tensor for a required column)."""
    records = convert.convert_to_tensor(records, dtype=dtypes.string, name="records")
    defaults = []
    for i, d in enumerate(record_defaults):
        t = convert.convert_to_tensor(d, name=f"record_default_{i}")
        if t.dtype.base_dtype not in (
            dtypes.float32,
            dtypes.float64,
            dtypes.int32,
            dtypes.int64,
            dtypes.string,
        ):
            raise TypeError(
                f"record_defaults[{i}] has type {t.dtype.name}; DecodeCSV supports float32, "
                f"float64, int32, int64 and string"
            )
        defaults.append(t)
    if select_cols is not None and len(select_cols) != len(defaults):
        raise ValueError("Length of select_cols and record_defaults do not match.")
    op = apply_op(
        "DecodeCSV",
        [records, defaults],
        name=name,
        field_delim=field_delim,
        use_quote_delim=bool(use_quote_delim),
        na_value=na_value,
        select_cols=list(select_cols or []),
    )
    return list(op.outputs)
