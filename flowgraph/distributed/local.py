"""Masters and workers in one process (whitepaper §3, §3.3): what a local Session runs on, and
in-process clusters of several tasks for tests.

A local Session gets its own master and one worker, task /job:localhost/replica:0/task:0, whose
devices are made from the session's ConfigProto (as TensorFlow's DirectSession makes its
own). An in-process cluster has one worker per task of a cluster spec, each with its own
devices and containers, talking to each other only through the worker cache; a Session
reaches its master by the target `inproc://<n>` (`InProcessCluster.target`).

A gRPC server of this process lists its master here under its target (grpc://host:port), and
a Session of this process with that target calls the master directly instead of by RPC to
itself, as TensorFlow's LocalMaster registry does (ConfigProto.rpc_options
.use_rpc_for_inprocess_master forces the RPC): in between-graph training each worker's client
talks to its own task's master, and a loopback RPC per step cost it ~1 ms of CPU.
"""

from __future__ import annotations

import itertools
import weakref

from flowgraph.core import errors
from flowgraph.core.protos import ConfigProto
from flowgraph.distributed.master import Master
from flowgraph.distributed.worker import Worker
from flowgraph.distributed.worker_cache import LocalWorkerCache
from flowgraph.runtime import blas, heap
from flowgraph.runtime import device as device_lib

LOCAL_TASK = "/job:localhost/replica:0/task:0"
_clusters: weakref.WeakValueDictionary = weakref.WeakValueDictionary()  # target -> cluster
_ids = itertools.count(1)
_served: dict[str, Master] = {}  # grpc://host:port -> the master a server of ours serves there


class InProcessCluster:
    """Workers for tasks {job: count} (jobs in the order given), each with the devices
    `config` asks for, and a master on `master_task` (the first task by default)."""

    def __init__(self, jobs: dict, config: ConfigProto | None = None, master_task: str = ""):
        config = config if config is not None else ConfigProto()
        blas.configure()  # one BLAS thread: intra-op parallelism is the pools' (threadpool.py)
        heap.configure()  # large buffers reused, not faulted in afresh each step
        self.workers: dict[str, Worker] = {}
        for job, count in jobs.items():
            for task in range(count):
                devices = device_lib.make_devices(
                    job,
                    task,
                    dict(config.device_count),
                    config.inter_op_parallelism_threads,
                    config.intra_op_parallelism_threads,
                )
                name = f"/job:{job}/replica:0/task:{task}"
                self.workers[name] = Worker(name, devices)
        self.worker_cache = LocalWorkerCache(self.workers)
        self.master = Master(self.worker_cache, master_task or next(iter(self.workers)))
        self.target = f"inproc://{next(_ids)}"
        _clusters[self.target] = self

    def close(self) -> None:
        _clusters.pop(self.target, None)
        for worker in self.workers.values():
            worker.close()


def local_cluster(config: ConfigProto | None = None) -> InProcessCluster:
    """A local Session's master and its one worker."""
    return InProcessCluster({"localhost": 1}, config)


def master_for(target: str) -> Master:
    """The master of the in-process cluster named by `target` (inproc://<n>)."""
    cluster = _clusters.get(target)
    if cluster is None:
        raise errors.UnavailableError(
            None, None, f"No in-process cluster {target!r} (closed, or never made)"
        )
    return cluster.master


def serve(target: str, master: Master) -> None:
    """Lists the master a gRPC server of this process started serving at `target`."""
    _served[target] = master


def stop_serving(target: str, master: Master) -> None:
    if _served.get(target) is master:
        del _served[target]


def served_master(target: str, config: ConfigProto | None = None) -> Master | None:
    """The master a server of this process serves at `target`, unless `config` asks for RPC."""
    if config is not None and config.rpc_options.use_rpc_for_inprocess_master:
        return None
    return _served.get(target)
