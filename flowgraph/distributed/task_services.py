"""What one task of a cluster runs behind its gRPC port (whitepaper §3.3): a Worker over the
task's own devices, a Master that places over every task of the cluster, and the worker cache
joining them (its own worker in process, the others by gRPC), as TF's GrpcServer::Init does,
and, given the host its gRPC port is on, a listener there for large tensors (raw_transport.py).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import grpc

from flowgraph.core.protos import ClusterDef, ConfigProto, ServerDef
from flowgraph.distributed import grpc_master, grpc_service, grpc_worker, health, raw_sender
from flowgraph.distributed.master import Master
from flowgraph.distributed.worker import Worker
from flowgraph.runtime import blas, heap
from flowgraph.runtime import device as device_lib


class TaskServices:
    """The master, worker and worker cache of task `server_def` names, and their handlers."""

    def __init__(self, server_def: ServerDef, raw_host: str | None = None):
        config = server_def.default_session_config
        blas.configure()  # one BLAS thread: intra-op parallelism is the pools' (threadpool.py)
        heap.configure()  # large buffers reused, not faulted in afresh each step
        devices = device_lib.make_devices(
            server_def.job_name,
            server_def.task_index,
            dict(config.device_count),
            config.inter_op_parallelism_threads,
            config.intra_op_parallelism_threads,
        )
        self.task = grpc_worker.task_name(server_def.job_name, server_def.task_index)
        self.worker = Worker(self.task, devices)
        self.worker_cache = grpc_worker.GrpcWorkerCache(server_def.cluster, self.task, self.worker)
        self.health = health.HealthMonitor(self.worker_cache, self.task)
        self.worker.health = self.health  # it checks the masters of its sessions
        self.master = Master(self.worker_cache, self.task, self.health)
        # runs the blocking handlers (RunStep, RunGraph, ...); threads start when needed
        self._pool = ThreadPoolExecutor(grpc_service.HANDLER_THREADS, thread_name_prefix="rpc")
        self.raw_sender = None
        if raw_host is not None:
            self.raw_sender = raw_sender.RawSender(
                raw_host,
                lambda request, done: grpc_worker.recv_async(self.worker, request, done),
                self.task,
                grpc_worker.run_graph_call(self.worker),
                self._pool,
            )
        self.handlers: list[grpc.GenericRpcHandler] = [
            *grpc_worker.handlers(self.worker, self._pool, self.raw_sender),
            *grpc_master.handlers(self.master, self._pool),
        ]

    def close(self) -> None:
        self.health.close()
        self.worker.close()
        self.worker_cache.close()  # ends the health checks' calls in flight
        if self.raw_sender is not None:
            self.raw_sender.close()
        self._pool.shutdown(wait=False)
        self.health.join(timeout=10.0)  # a check in flight ends with the cache's channels


def server_def(
    cluster: ClusterDef, job: str, task: int, config: ConfigProto | None = None
) -> ServerDef:
    """The ServerDef of task job:task of `cluster`."""
    result = ServerDef(job_name=job, task_index=task, protocol="grpc")
    result.cluster.CopyFrom(cluster)
    if config is not None:
        result.default_session_config.CopyFrom(config)
    return result
