"""tf.train.Server: one task of a cluster, serving a master and a worker on one gRPC port
(whitepaper §3.3; TF's python/training/server_lib.py over its C++ GrpcServer).

This module turns what the user passed (a ServerDef, ClusterSpec, ClusterDef or dict, plus
job_name, task_index, protocol and config) into a ServerDef, TF's rules included: the job may be
left out when the cluster has one, the task when the job has one. `distributed/grpc_server.py`
runs the ServerDef.

Example:
    cluster = tf.train.ClusterSpec({"ps": ["127.0.0.1:2222"], "worker": ["127.0.0.1:2223"]})
    server = tf.train.Server(cluster, job_name="ps", task_index=0)
    server.join()
"""

from __future__ import annotations

from flowgraph.core.protos import ConfigProto, ServerDef
from flowgraph.distributed.grpc_server import GrpcServer
from flowgraph.train.cluster_spec import ClusterSpec


class Server:
    """An in-process server: `target` is what `tf.Session(target)` connects to."""

    def __init__(
        self,
        server_or_cluster_def,
        job_name: str | None = None,
        task_index: int | None = None,
        protocol: str | None = None,
        config: ConfigProto | None = None,
        start: bool = True,
    ):
        self._server_def = make_server_def(
            server_or_cluster_def, job_name, task_index, protocol, config
        )
        self._server = GrpcServer(self._server_def)
        if start:
            self.start()

    def start(self) -> None:
        """Starts serving; a second call does nothing."""
        self._server.start()

    def join(self) -> None:
        """Blocks until the server stops (it never does unless stopped from another thread)."""
        self._server.join()

    def stop(self) -> None:
        """Stops serving and releases the port (not in TF1's public API; tests use it)."""
        self._server.stop()

    @property
    def server_def(self) -> ServerDef:
        return self._server.server_def

    @property
    def target(self) -> str:
        """ "grpc://host:port" of this task, for tf.Session(target)."""
        return self._server.target

    @staticmethod
    def create_local_server(config: ConfigProto | None = None, start: bool = True) -> Server:
        """A one-task cluster on a free port of localhost, for tests and notebooks."""
        return Server({"localhost": ["localhost:0"]}, protocol="grpc", config=config, start=start)


def make_server_def(server_or_cluster_def, job_name, task_index, protocol, config) -> ServerDef:
    """The ServerDef of tf.train.Server's arguments (TF's server_lib._make_server_def)."""
    if isinstance(server_or_cluster_def, ServerDef):
        server_def = ServerDef()
        server_def.CopyFrom(server_or_cluster_def)
        if job_name is not None:
            server_def.job_name = job_name
        if task_index is not None:
            server_def.task_index = task_index
        if protocol is not None:
            server_def.protocol = protocol
        if config is not None:
            server_def.default_session_config.CopyFrom(config)
        return server_def
    cluster = ClusterSpec(server_or_cluster_def)
    if job_name is None:
        if len(cluster.jobs) != 1:
            raise ValueError("Must specify an explicit `job_name`.")
        job_name = cluster.jobs[0]
    if task_index is None:
        indices = cluster.task_indices(job_name)
        if len(indices) != 1:
            raise ValueError("Must specify an explicit `task_index`.")
        task_index = indices[0]
    server_def = ServerDef(job_name=job_name, task_index=task_index, protocol=protocol or "grpc")
    server_def.cluster.CopyFrom(cluster.as_cluster_def())
    if config is not None:
        server_def.default_session_config.CopyFrom(config)
    return server_def
