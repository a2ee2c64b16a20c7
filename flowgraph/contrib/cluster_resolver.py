"""tf.contrib.cluster_resolver: TF 1.x's first home of the cluster resolvers, where the union
resolver was called UnionClusterResolver; the classes are tf.distribute.cluster_resolver's."""

from flowgraph.distribute.cluster_resolver import (
    ClusterResolver,
    SimpleClusterResolver,
    SlurmClusterResolver,
    TFConfigClusterResolver,
    UnionClusterResolver,
)

__all__ = [
    "ClusterResolver",
    "SimpleClusterResolver",
    "SlurmClusterResolver",
    "TFConfigClusterResolver",
    "UnionClusterResolver",
]
