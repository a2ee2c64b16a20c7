"""tf.distribute.cluster_resolver (and tf.contrib.cluster_resolver): where the tasks of a cluster
are, which one this process is, and the master a Session should connect to.

    base.py       ClusterResolver (the interface), SimpleClusterResolver, UnionResolver
    tfconfig.py   TFConfigClusterResolver: the TF_CONFIG JSON Kubernetes operators and cloud
                  schedulers set
    slurm.py      SlurmClusterResolver: Slurm's SLURM_* variables, hostlist expansion
"""

from flowgraph.distribute.cluster_resolver.base import (
    ClusterResolver,
    SimpleClusterResolver,
    UnionResolver,
)
from flowgraph.distribute.cluster_resolver.slurm import SlurmClusterResolver
from flowgraph.distribute.cluster_resolver.tfconfig import TFConfigClusterResolver

UnionClusterResolver = UnionResolver  # tf.contrib.cluster_resolver's name for it

__all__ = [
    "ClusterResolver",
    "SimpleClusterResolver",
    "SlurmClusterResolver",
    "TFConfigClusterResolver",
    "UnionResolver",
]
