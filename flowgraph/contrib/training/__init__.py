"""tf.contrib.training: the ps placement strategies of replica_device_setter (owned by
flowgraph/train/device_setter.py)."""

from flowgraph.train.device_setter import (
    GreedyLoadBalancingStrategy,
    RandomStrategy,
    byte_size_load_fn,
)

__all__ = ["GreedyLoadBalancingStrategy", "RandomStrategy", "byte_size_load_fn"]
