"""tf.train.replica_device_setter: the device function of between-graph data parallelism
(whitepaper §7, Figure 7): variables and other state go to parameter-server tasks, chosen
round-robin or by a load-balancing strategy, and every other op to the worker's device.

Example:
    with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        w = tf.Variable(...)    # /job:ps/task:0
        b = tf.Variable(...)    # /job:ps/task:1
        y = tf.matmul(x, w)     # /job:worker
"""

from __future__ import annotations

import hashlib

import numpy as np

from flowgraph.core import device_spec
from flowgraph.core.shapes import TensorShape
from flowgraph.platform import tf_logging
from flowgraph.train.cluster_spec import ClusterSpec

# The ops that hold state a parameter server keeps (TensorFlow's STANDARD_PS_OPS).
STANDARD_PS_OPS = (
    "Variable",
    "VariableV2",
    "AutoReloadVariable",
    "MutableHashTable",
    "MutableHashTableV2",
    "MutableHashTableOfTensors",
    "MutableHashTableOfTensorsV2",
    "MutableDenseHashTable",
    "MutableDenseHashTableV2",
    "VarHandleOp",
    "BoostedTreesEnsembleResourceHandleOp",
    "BoostedTreesQuantileStreamResourceHandleOp",
    "ResourceConditionalAccumulator",
    "DecisionTreeResource",
)


class _RoundRobinStrategy:
    """Task 0, 1, ..., n-1, 0, ... for successive ps ops."""

    def __init__(self, num_tasks: int):
        self._num_tasks = num_tasks
        self._next = 0

    def __call__(self, unused_op) -> int:
        task = self._next
        self._next = (self._next + 1) % self._num_tasks
        return task


class GreedyLoadBalancingStrategy:
    """Each ps op goes to the task with the least load so far; `load_fn(op)` is its load
    (tf.contrib.training.GreedyLoadBalancingStrategy, e.g. with byte_size_load_fn)."""

    def __init__(self, num_tasks: int, load_fn):
        self._num_tasks = num_tasks
        self._load_fn = load_fn
        self._ps_loads = np.zeros(num_tasks)

    def __call__(self, op) -> int:
        task = int(np.argmin(self._ps_loads))
        self._ps_loads[task] += self._load_fn(op)
        return task


class RandomStrategy:
    """A task from the MD5 of the op's name and a seed: the same op name always lands on the
    same task, run after run (tf.contrib.training.RandomStrategy)."""

    def __init__(self, num_ps_tasks: int, seed: int = 0):
        self._num_ps_tasks = num_ps_tasks
        self._seed = seed

    def __call__(self, op) -> int:
        digest = hashlib.md5(f"{op.name}_{self._seed}".encode()).hexdigest()
        return int(int(digest, 16) % self._num_ps_tasks)


def byte_size_load_fn(op) -> int:
    """The bytes of the single output of `op` (a variable's size), for the greedy strategy.

    A resource variable counts the bytes of the value its handle names (TensorFlow 1.15
    counted 1 byte for any resource handle, which left greedy placement of resource variables
    unbalanced).
    """
    if len(op.outputs) != 1:
        raise ValueError(f"Op {op} must have a single output")
    output = op.outputs[0]
    shape, dtype = output.get_shape(), output.dtype.base_dtype
    if op.type == "VarHandleOp":
        shape, dtype = TensorShape(op.get_attr("shape")), op.get_attr("dtype")
    elif not shape.is_fully_defined():  # a variable's declared shape
        shape = TensorShape(op.get_attr("shape"))
    shape.assert_is_fully_defined()
    return shape.num_elements() * dtype.size


class _ReplicaDeviceChooser:
    def __init__(self, ps_device, worker_device, merge_devices, ps_ops, ps_strategy):
        self._ps_device = ps_device
        self._worker_device = worker_device
        self._merge_devices = merge_devices
        self._ps_ops = set(ps_ops)
        self._ps_strategy = ps_strategy

    def device_function(self, op) -> str:
        """The device of `op`: a ps task for ps ops, the worker device otherwise; fields the
        op already has (from an inner tf.device) win when merging."""
        if not self._merge_devices and op.device:
            return op.device
        current = device_spec.parse(op.device or "")
        if self._ps_device and op.type in self._ps_ops:
            ps = device_spec.parse(self._ps_device)
            if ps.job and (not current.job or current.job == ps.job):
                ps = ps.replace(task=self._ps_strategy(op))
            return ps.merge_from(current).to_string()
        return device_spec.parse(self._worker_device or "").merge_from(current).to_string()


def replica_device_setter(
    ps_tasks=0,
    ps_device="/job:ps",
    worker_device="/job:worker",
    merge_devices=True,
    cluster=None,
    ps_ops=None,
    ps_strategy=None,
):
    """A device function for `tf.device` placing state on ps tasks and the rest on the worker;
    None (no placement) when there are no ps tasks. With `cluster`, the number of ps tasks is
    the size of ps_device's job in it.
    """
    if cluster is not None:
        jobs = (cluster if isinstance(cluster, ClusterSpec) else ClusterSpec(cluster)).as_dict()
        ps_job = device_spec.parse(ps_device).job
        if ps_job not in jobs or jobs[ps_job] is None:
            return None
        ps_tasks = len(jobs[ps_job])
    if ps_tasks == 0:
        return None
    if ps_ops is None:
        ps_ops = list(STANDARD_PS_OPS)
    if not merge_devices:
        tf_logging.warning(
            "DEPRECATION: It is recommended to set merge_devices=true in replica_device_setter"
        )
    if ps_strategy is None:
        ps_strategy = _RoundRobinStrategy(ps_tasks)
    if not callable(ps_strategy):
        raise TypeError("ps_strategy must be callable")
    chooser = _ReplicaDeviceChooser(ps_device, worker_device, merge_devices, ps_ops, ps_strategy)
    return chooser.device_function
