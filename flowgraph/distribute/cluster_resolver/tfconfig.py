"""TFConfigClusterResolver: the cluster from the TF_CONFIG environment variable, the JSON that
Kubernetes operators (tf-operator's TFJob), SageMaker and Cloud ML Engine set in each task:

    {"cluster": {"ps": ["ps-0.ps:2222"], "worker": ["worker-0.w:2222", "worker-1.w:2222"]},
     "task": {"type": "worker", "index": 1},
     "rpc_layer": "grpc",               (optional)
     "session_master": "grpc://..."}    (optional: overrides master())

The variable is read on every call, as in TensorFlow, so a test or launcher may change it.
"""

from __future__ import annotations

import json
import os

from flowgraph.distribute.cluster_resolver.base import ClusterResolver, format_master_url
from flowgraph.train.cluster_spec import ClusterSpec

__all__ = ["TFConfigClusterResolver"]

_TF_CONFIG_ENV = "TF_CONFIG"


def _load_tf_config() -> dict:
    return json.loads(os.environ.get(_TF_CONFIG_ENV, "{}"))


def _get_value_in_tfconfig(key, default=None):
    return _load_tf_config().get(key, default)


class TFConfigClusterResolver(ClusterResolver):
    """Reads TF_CONFIG; task_type, task_id and rpc_layer given here override its values.

    Example (TF_CONFIG as above):
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        server = tf.train.Server(resolver.cluster_spec(), job_name=resolver.task_type,
                                 task_index=resolver.task_id)
    """

    def __init__(self, task_type=None, task_id=None, rpc_layer=None, environment=None):
        self._task_type = task_type
        self._task_id = task_id
        self._rpc_layer = rpc_layer
        self._environment = environment

    @property
    def task_type(self):
        if self._task_type is not None:
            return str(self._task_type)
        task = _get_value_in_tfconfig("task", {})
        return str(task["type"]) if "type" in task else None

    @task_type.setter
    def task_type(self, task_type):
        self._task_type = task_type

    @property
    def task_id(self):
        if self._task_id is not None:
            return int(self._task_id)
        task = _get_value_in_tfconfig("task", {})
        return int(task["index"]) if "index" in task else None

    @task_id.setter
    def task_id(self, task_id):
        self._task_id = task_id

    @property
    def environment(self):
        return self._environment

    @property
    def rpc_layer(self):
        if self._rpc_layer is not None:
            return self._rpc_layer
        return _get_value_in_tfconfig("rpc_layer")

    @rpc_layer.setter
    def rpc_layer(self, rpc_layer):
        self._rpc_layer = rpc_layer

    def num_accelerators(self, task_type=None, task_id=None, config_proto=None) -> dict:
        """Counts the accelerators of this task (or the given one) through its master."""
        task_type = self.task_type if task_type is None else task_type
        task_id = self.task_id if task_id is None else task_id
        return super().num_accelerators(task_type, task_id, config_proto)

    def cluster_spec(self) -> ClusterSpec:
        """TF_CONFIG's "cluster" (an empty ClusterSpec without one)."""
        return ClusterSpec(_get_value_in_tfconfig("cluster", {}))

    def master(self, task_type=None, task_id=None, rpc_layer=None) -> str:
        """TF_CONFIG's session_master if set; '' for a cluster of one task (run in process);
        else the address of this task (or the given one) with the RPC layer as its scheme."""
        session_master = _get_value_in_tfconfig("session_master")
        if session_master is not None:
            return session_master
        cluster_spec = self.cluster_spec()
        jobs = cluster_spec.jobs
        if not jobs or (len(jobs) == 1 and len(cluster_spec.job_tasks(jobs[0])) == 1):
            return ""
        task_type = task_type if task_type is not None else self.task_type
        task_id = task_id if task_id is not None else self.task_id
        rpc_layer = rpc_layer if rpc_layer is not None else self.rpc_layer
        return format_master_url(cluster_spec.task_address(task_type, task_id), rpc_layer)
