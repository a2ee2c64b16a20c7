"""The tf.* sub-namespaces (tf.nn, tf.math, tf.losses, ...), assembled from their owner modules."""

from __future__ import annotations

import types

from flowgraph.framework import importer as _importer
from flowgraph.framework import nest as _nest
from flowgraph.testing import gradient_checker as _gradient_checker
from flowgraph.testing import test_case as _test_case
from flowgraph.ops import dynamic_rnn as _dynamic_rnn
from flowgraph.ops import init_ops as _init_ops
from flowgraph.ops import linalg as _linalg
from flowgraph.ops import linalg_decomp as _linalg_decomp
from flowgraph.ops import linalg_expm as _linalg_expm
from flowgraph.ops import logging as _logging_ops
from flowgraph.ops import losses as _losses
from flowgraph.core import dtypes as _dtypes
from flowgraph.ops import bitwise_ops as _bitwise_ops
from flowgraph.ops import check_ops as _check_ops
from flowgraph.ops import check_shapes as _check_shapes
from flowgraph.ops import confusion_matrix as _confusion_matrix
from flowgraph.ops import math as _math
from flowgraph.ops import sets as _sets
from flowgraph.ops import metrics as _metrics
from flowgraph.ops import metrics_at_k as _metrics_at_k
from flowgraph.ops import metrics_means as _metrics_means
from flowgraph.ops import metrics_thresholds as _metrics_thresholds
from flowgraph.ops import nn as _nn
from flowgraph.ops import nn_conv3d as _nn_conv3d
from flowgraph.ops import random as _random
from flowgraph.ops import reduction as _reduction
from flowgraph.ops import rnn as _rnn
from flowgraph.ops import rnn_cell as _rnn_cell
from flowgraph.ops import segment as _segment
from flowgraph.ops import sparse as _sparse
from flowgraph.ops import sparse_embedding as _sparse_embedding
from flowgraph.ops import string_ops as _string_ops
from flowgraph.ops import lookup_ops as _lookup_ops
from flowgraph.ops import special_math as _special_math


def _namespace(name: str, *modules, **extra) -> types.ModuleType:
    ns = types.ModuleType(f"flowgraph.{name}")
    for m in modules:
        for key in getattr(m, "__all__", ()):
            setattr(ns, key, getattr(m, key))
    for key, value in extra.items():
        setattr(ns, key, value)
    return ns


nn = _namespace("nn", _nn, _nn_conv3d, _rnn, _dynamic_rnn, rnn_cell=_rnn_cell)
math = _namespace("math", _math, _reduction, _special_math, **_special_math.MATH_ONLY)
linalg = _namespace("linalg", _linalg_expm, **_linalg.LINALG, **_linalg_decomp.LINALG)
losses = _namespace("losses", _losses)
metrics = _namespace("metrics", _metrics, _metrics_at_k, _metrics_means, _metrics_thresholds)
random = _namespace("random", _random, **_random.RANDOM_NAMESPACE)
initializers = _namespace("initializers", _init_ops, **_init_ops.INITIALIZERS)
from flowgraph.framework import graph_util as _graph_util  # noqa: E402

graph_util = _namespace("graph_util", _importer, _graph_util)
sparse = _namespace("sparse", **_sparse.SPARSE_NAMESPACE)
strings = _namespace("strings", **_string_ops.STRINGS_NAMESPACE)
sets = _namespace("sets", **_sets.SETS_NAMESPACE)
_DTYPE_NAMES = [
    "DType",
    "as_dtype",
    "bfloat16",
    "complex128",
    "complex64",
    "double",
    "float16",
    "float32",
    "float64",
    "half",
    "int16",
    "int32",
    "int64",
    "int8",
    "qint16",
    "qint32",
    "qint8",
    "quint16",
    "quint8",
    "resource",
    "string",
    "uint16",
    "uint32",
    "uint64",
    "uint8",
    "variant",
]
bitwise = _namespace("bitwise", _bitwise_ops)
dtypes = _namespace(
    "dtypes",
    **{name: getattr(_dtypes, name) for name in _DTYPE_NAMES if hasattr(_dtypes, name)},
    bool=_dtypes.bool_,
    cast=_math.cast,
    complex=_math.complex,
    saturate_cast=_math.saturate_cast,
    as_string=_string_ops.as_string,
)
debugging = _namespace(
    "debugging",
    _check_ops,
    Assert=_logging_ops.Assert,
    assert_all_finite=_logging_ops.verify_tensor_all_finite,
    assert_shapes=_check_shapes.assert_shapes,
    check_numerics=_logging_ops.check_numerics,
    is_finite=_math.is_finite,
    is_inf=_math.is_inf,
    is_nan=_math.is_nan,
)
lookup = _namespace("lookup", **_lookup_ops.LOOKUP_NAMESPACE)  # tf.lookup, tf.contrib.lookup
for _name in _segment.__all__:  # tf.math.segment_sum, tf.math.bincount, ...
    setattr(math, _name, getattr(_segment, _name))
linalg.einsum = _segment.einsum
math.confusion_matrix = _confusion_matrix.confusion_matrix
for _name in _sparse_embedding.__all__:  # tf.nn.embedding_lookup_sparse, ...
    setattr(nn, _name, getattr(_sparse_embedding, _name))
test = _namespace(
    "test",
    TestCase=_test_case.TestCase,
    main=_test_case.main,
    is_gpu_available=_test_case.is_gpu_available,
    gpu_device_name=_test_case.gpu_device_name,
    compute_gradient=_gradient_checker.compute_gradient,
    compute_gradient_error=_gradient_checker.compute_gradient_error,
)
for _name in _test_case.__all__:  # the rest of tf.test (TestCase helpers, Benchmark, mock)
    setattr(test, _name, getattr(_test_case, _name))
del _name
nest = _namespace(
    "nest",
    flatten=_nest.flatten,
    pack_sequence_as=_nest.pack_sequence_as,
    is_sequence=_nest.is_sequence,
    assert_same_structure=_nest.assert_same_structure,
    map_structure=_nest.map_structure,
)
from flowgraph import contrib  # noqa: E402
from flowgraph.framework import jit as _jit  # noqa: E402

xla = _namespace("xla", experimental=_namespace("xla.experimental", jit_scope=_jit.jit_scope))

# tf.app, tf.flags, tf.logging, tf.gfile, tf.io.gfile, tf.version (flowgraph/platform).
from flowgraph.platform import app as _app  # noqa: E402
from flowgraph.platform import flags as _flags  # noqa: E402
from flowgraph.platform import gfile as _gfile  # noqa: E402
from flowgraph.platform import tf_logging as _tf_logging  # noqa: E402
from flowgraph.platform import version as _version  # noqa: E402

flags = _namespace("flags", _flags)
app = _namespace("app", run=_app.run, flags=flags)
logging = _namespace("logging", _tf_logging)
gfile = _namespace("gfile", _gfile)
from flowgraph.train import graph_io as _graph_io  # noqa: E402

io = _namespace(
    "io", gfile=_namespace("io.gfile", **_gfile.IO_GFILE), write_graph=_graph_io.write_graph
)
version = _namespace("version", _version)

# tf.python_io, and the input-pipeline names of tf.io (readers, records, parsing).
from flowgraph.ops import readers as _readers  # noqa: E402
from flowgraph.ops import parsing_ops as _parsing_ops  # noqa: E402
from flowgraph.ops import tf_record as _tf_record  # noqa: E402

python_io = _namespace("python_io", _tf_record)
for _module in (_tf_record, _readers, _parsing_ops):
    for _key in _module.__all__:
        setattr(io, _key, getattr(_module, _key))

from flowgraph.ops import image_ops as _image_ops  # noqa: E402

from flowgraph.ops import image_color as _image_color  # noqa: E402
from flowgraph.ops import image_boxes as _image_boxes  # noqa: E402
from flowgraph.ops import image_geometry as _image_geometry  # noqa: E402
from flowgraph.ops import image_measures as _image_measures  # noqa: E402

from flowgraph.ops import array_nd as _array_nd  # noqa: E402
from flowgraph.ops import image_resample as _image_resample  # noqa: E402

image = _namespace(
    "image",
    _image_ops,
    _image_boxes,
    _image_color,
    _image_geometry,
    _image_measures,
    _image_resample,
    **_array_nd.IMAGE,
)

# tf.queue (TF 1.15's home of the queue classes) and tf.io's image codecs.
from flowgraph.ops import queues as _queues  # noqa: E402

queue = _namespace("queue", _queues)
for _key in ("decode_image", "decode_jpeg", "decode_png", "encode_jpeg", "encode_png"):
    setattr(io, _key, getattr(_image_ops, _key))

# Second homes TF 1.x gives names that live elsewhere (tf.math.top_k is tf.nn.top_k, ...).
from flowgraph.ops import candidate_sampling as _candidate_sampling  # noqa: E402
from flowgraph.ops import clip as _clip  # noqa: E402
from flowgraph.ops import data_flow as _data_flow  # noqa: E402
from flowgraph.ops import norms as _norms  # noqa: E402
from flowgraph.train import loops as _loops  # noqa: E402

_SECOND_HOMES = {
    math: {
        "in_top_k": _nn.in_top_k,
        "invert_permutation": _data_flow.invert_permutation,
        "l2_normalize": _nn.l2_normalize,
        "log_softmax": _nn.log_softmax,
        "softmax": _nn.softmax,
        "softplus": _nn.softplus,
        "softsign": _nn.softsign,
        "top_k": _nn.top_k,
        "unsorted_segment_sum": _data_flow.unsorted_segment_sum,
    },
    linalg: {
        "global_norm": _clip.global_norm,
        "l2_normalize": _nn.l2_normalize,
        "norm": _norms.norm,
    },
    io: {
        "PaddingFIFOQueue": _queues.PaddingFIFOQueue,
        "PriorityQueue": _queues.PriorityQueue,
        "QueueBase": _queues.QueueBase,
        "RandomShuffleQueue": _queues.RandomShuffleQueue,
        "decode_base64": _string_ops.decode_base64,
        "encode_base64": _string_ops.encode_base64,
        "deserialize_many_sparse": _sparse.deserialize_many_sparse,
        "serialize_many_sparse": _sparse.serialize_many_sparse,
        "serialize_sparse": _sparse.serialize_sparse,
        "matching_files": _loops.matching_files,
    },
    initializers: {"tables_initializer": _lookup_ops.tables_initializer},
    random: {
        "log_uniform_candidate_sampler": _candidate_sampling.log_uniform_candidate_sampler,
        "uniform_candidate_sampler": _candidate_sampling.uniform_candidate_sampler,
    },
}
from flowgraph.ops import array as _array  # noqa: E402
from flowgraph.ops import array_index as _array_index  # noqa: E402
from flowgraph.ops import array_space as _array_space  # noqa: E402

_SECOND_HOMES[nn] = {
    "depth_to_space": _array_space.depth_to_space,
    "space_to_batch": _array_space.space_to_batch,
    "space_to_depth": _array_space.space_to_depth,
}
# tf.manip: TF 1.x's home of roll and of second names of the element-moving array ops.
manip = _namespace(
    "manip",
    batch_to_space_nd=_array_space.batch_to_space_nd,
    gather_nd=_array_index.gather_nd,
    reshape=_array.reshape,
    reverse=_array.reverse,
    roll=_array_space.roll,
    scatter_nd=_array_index.scatter_nd,
    space_to_batch_nd=_array_space.space_to_batch_nd,
    tile=_array.tile,
)
for _space, _names in _SECOND_HOMES.items():
    for _key, _value in _names.items():
        setattr(_space, _key, _value)
