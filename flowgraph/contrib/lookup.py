"""tf.contrib.lookup: the lookup tables of flowgraph/ops/lookup_ops.py under their TF1 contrib
names (HashTable, index_table_from_tensor, ...)."""

from flowgraph.ops.lookup_ops import LOOKUP_NAMESPACE

globals().update(LOOKUP_NAMESPACE)
__all__ = list(LOOKUP_NAMESPACE)
