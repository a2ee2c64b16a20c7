"""tf.distribute as TF1 programs use it: cluster resolvers, which read a cluster's layout from
the scheduler that started the process (TF_CONFIG, Slurm) so that one program runs unchanged on
a laptop, under Kubernetes and under Slurm (whitepaper §3.3: a cluster is a set of tasks).

The distribution strategies of TF 2 (MirroredStrategy, ...) are not here: TF1 programs
replicate with replica_device_setter and SyncReplicasOptimizer (flowgraph/train/)."""

from flowgraph.distribute import cluster_resolver

__all__ = ["cluster_resolver"]
