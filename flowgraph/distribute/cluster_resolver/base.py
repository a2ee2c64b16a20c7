"""The ClusterResolver interface and the two resolvers made from other values: one given a
ClusterSpec, and the union of several resolvers (TF 1.15's cluster_resolver.py).

A resolver answers four questions: the cluster (`cluster_spec()`, read afresh on each call
because a scheduler may move tasks), this process's task (`task_type`, `task_id`), the master a
client Session connects to (`master()`, "grpc://host:port" or "" for in-process), and the
accelerators per task (`num_accelerators()`).
"""

from __future__ import annotations

import abc
import collections

from flowgraph.framework.graph import Graph
from flowgraph.session.session import Session
from flowgraph.train.cluster_spec import ClusterSpec

__all__ = ["ClusterResolver", "SimpleClusterResolver", "UnionResolver", "format_master_url"]


def format_master_url(master: str, rpc_layer: str | None = None) -> str:
    """'host:port' with the RPC layer as its scheme: ('h:1', 'grpc') -> 'grpc://h:1'."""
    return f"{rpc_layer}://{master}" if rpc_layer else master


def get_accelerator_devices(master: str, config_proto=None) -> list:
    """The devices of the cluster behind `master`, as a Session there lists them."""
    with Graph().as_default(), Session(master, config=config_proto) as sess:
        return sess.list_devices()


def _on_task(device_name: str, task_type, task_id) -> bool:
    if task_type is None or task_id is None:
        return True
    return f"/job:{task_type}" in device_name and f"/task:{task_id}" in device_name


class ClusterResolver(abc.ABC):
    """Where a cluster's tasks are. Subclasses implement `cluster_spec` and `master`; they set
    `_task_type`, `_task_id` and `_rpc_layer` (or override the properties) where known."""

    @abc.abstractmethod
    def cluster_spec(self) -> ClusterSpec:
        """The cluster as it is now (resolvers read their source on every call)."""

    @abc.abstractmethod
    def master(self, task_type=None, task_id=None, rpc_layer=None) -> str:
        """The target a TF1 Session connects to (`task_type`/`task_id` pick another task)."""

    def num_accelerators(self, task_type=None, task_id=None, config_proto=None) -> dict:
        """{device type: count} of the non-CPU devices of the master's task (or of the given
        task), found by listing the devices through a Session."""
        devices = get_accelerator_devices(self.master(task_type, task_id), config_proto)
        mapping = collections.defaultdict(int)
        for device in devices:
            if device.device_type not in ("CPU", "XLA_CPU") and _on_task(
                device.name, task_type, task_id
            ):
                mapping[device.device_type] += 1
        return mapping

    @property
    def environment(self) -> str:
        """'google' inside Google's environment, '' everywhere else."""
        return ""

    @property
    def task_type(self):
        """This process's job name ('worker', 'ps', 'chief', 'evaluator'), or None."""
        return getattr(self, "_task_type", None)

    @task_type.setter
    def task_type(self, task_type):
        self._task_type = task_type

    @property
    def task_id(self):
        """This process's index within its job, or None."""
        return getattr(self, "_task_id", None)

    @task_id.setter
    def task_id(self, task_id):
        self._task_id = task_id

    @property
    def rpc_layer(self):
        """The protocol between servers ('grpc'), or None."""
        return getattr(self, "_rpc_layer", None)

    @rpc_layer.setter
    def rpc_layer(self, rpc_layer):
        self._rpc_layer = rpc_layer


class SimpleClusterResolver(ClusterResolver):
    """A resolver that returns what it was given.

    Example:
        cluster = tf.train.ClusterSpec({"worker": ["w0:2222", "w1:2222"]})
        resolver = SimpleClusterResolver(cluster, task_type="worker", task_id=0,
                                         rpc_layer="grpc")
        resolver.master("worker", 1)  # 'grpc://w1:2222'
    """

    def __init__(
        self,
        cluster_spec,
        master="",
        task_type=None,
        task_id=None,
        environment="",
        num_accelerators=None,
        rpc_layer=None,
    ):
        if not isinstance(cluster_spec, ClusterSpec):
            raise TypeError("cluster_spec must be a `tf.train.ClusterSpec`.")
        if not isinstance(master, str):
            raise TypeError("master must be a string.")
        self._cluster_spec = cluster_spec
        self._master = master
        self._task_type = task_type
        self._task_id = task_id
        self._environment = environment
        self._num_accelerators = num_accelerators
        self._rpc_layer = rpc_layer

    def cluster_spec(self) -> ClusterSpec:
        return self._cluster_spec

    def master(self, task_type=None, task_id=None, rpc_layer=None) -> str:
        """The given master, or the address of task (`task_type`, `task_id`) when both given."""
        if task_type is not None and task_id is not None:
            master = self.cluster_spec().task_address(task_type, task_id)
        else:
            master = self._master
        return format_master_url(master, rpc_layer=rpc_layer or self._rpc_layer)

    @property
    def environment(self) -> str:
        return self._environment

    def num_accelerators(self, task_type=None, task_id=None, config_proto=None) -> dict:
        """The count given to the constructor ({} if none): nothing is detected."""
        del task_type, task_id, config_proto
        return {} if self._num_accelerators is None else self._num_accelerators


class UnionResolver(ClusterResolver):
    """The union of several resolvers' clusters; everything else comes from the first one
    unless `rpc_layer`, `task_type` or `task_id` is given.

    A job in several clusters gets the concatenation of their task lists when every one of
    them is a list, else the union of their {index: address} dicts (a list counts as indices
    0..n-1), where an index given twice is a KeyError.

    Example:
        resolver = UnionResolver(SimpleClusterResolver(gpu_spec, num_accelerators={"GPU": 1}),
                                 TFConfigClusterResolver())
    """

    def __init__(self, *args, **kwargs):
        self._rpc_layer = kwargs.pop("rpc_layer", None)
        self._task_type = kwargs.pop("task_type", None)
        self._task_id = kwargs.pop("task_id", None)
        if kwargs:
            raise ValueError(f"Unexpected kwargs provided {kwargs!r}")
        if not args:
            raise ValueError("At least one ClusterResolver is required.")
        for resolver in args:
            if not isinstance(resolver, ClusterResolver):
                raise TypeError("All arguments must be a sub-class of `ClusterResolver.`")
        self._cluster_resolvers = args

    def cluster_spec(self) -> ClusterSpec:
        """The merged cluster (see the class docstring)."""
        dicts = [r.cluster_spec().as_dict() for r in self._cluster_resolvers]
        merged: dict = {}
        for cluster in dicts:
            for job, tasks in cluster.items():
                if isinstance(tasks, dict):
                    merged[job] = {}  # one dict makes the whole job a dict
                elif job not in merged:
                    merged[job] = []
        for cluster in dicts:
            for job, tasks in cluster.items():
                if isinstance(merged[job], list):
                    merged[job].extend(tasks)
                    continue
                task_dict = dict(enumerate(tasks)) if isinstance(tasks, list) else dict(tasks)
                duplicates = set(task_dict) & set(merged[job])
                if duplicates:
                    raise KeyError(
                        f"Duplicate keys detected when merging two ClusterSpecs: {duplicates!r}"
                    )
                merged[job].update(task_dict)
        return ClusterSpec(merged)

    def master(self, task_type=None, task_id=None, rpc_layer=None) -> str:
        """The first resolver's master, or the merged cluster's address of the given task."""
        if task_type is not None and task_id is not None:
            master = self.cluster_spec().task_address(task_type, task_id)
            return format_master_url(master, rpc_layer or self._rpc_layer)
        return self._cluster_resolvers[0].master(rpc_layer=rpc_layer)

    @property
    def task_type(self):
        return self._task_type or self._cluster_resolvers[0].task_type

    @task_type.setter
    def task_type(self, task_type):
        self._task_type = task_type

    @property
    def task_id(self):
        return self._task_id or self._cluster_resolvers[0].task_id

    @task_id.setter
    def task_id(self, task_id):
        self._task_id = task_id

    @property
    def environment(self) -> str:
        return self._cluster_resolvers[0].environment

    def num_accelerators(self, task_type=None, task_id=None, config_proto=None) -> dict:
        return self._cluster_resolvers[0].num_accelerators(task_type, task_id, config_proto)

    @property
    def rpc_layer(self):
        return self._rpc_layer or self._cluster_resolvers[0].rpc_layer

    @rpc_layer.setter
    def rpc_layer(self, rpc_layer):
        self._rpc_layer = rpc_layer
