"""`tf.data` in TF1 graph mode (whitepaper §4.5): datasets as graph ops, iterators as
resources, the functions they apply in the graph's function library."""

from flowgraph.data import experimental
from flowgraph.data.dataset_ops import AUTOTUNE, Dataset, DatasetV1, Options
from flowgraph.data.experimental import INFINITE_CARDINALITY, UNKNOWN_CARDINALITY
from flowgraph.data.iterator_ops import (
    Iterator,
    get_output_classes,
    get_output_shapes,
    get_output_types,
    make_initializable_iterator,
    make_one_shot_iterator,
)
from flowgraph.data.readers import FixedLengthRecordDataset, TextLineDataset, TFRecordDataset

__all__ = [
    "AUTOTUNE",
    "INFINITE_CARDINALITY",
    "UNKNOWN_CARDINALITY",
    "Dataset",
    "DatasetV1",
    "FixedLengthRecordDataset",
    "Iterator",
    "Options",
    "TFRecordDataset",
    "TextLineDataset",
    "experimental",
    "get_output_classes",
    "get_output_shapes",
    "get_output_types",
    "make_initializable_iterator",
    "make_one_shot_iterator",
]
