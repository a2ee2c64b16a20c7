"""A worker's rendezvous in a cluster (whitepaper §3.2.2, §3.3): sends stay local, and a Recv
whose source device belongs to another task pulls the tensor from that task's worker with
RecvTensor, through the worker cache (never through shared Python state), so the same code
runs whether the peer is in this process or behind gRPC.
"""

from __future__ import annotations

from flowgraph.core.dead_value import DEAD
from flowgraph.distributed import messages as m
from flowgraph.distributed.worker_cache import CallOptions, task_of
from flowgraph.runtime.rendezvous import LocalRendezvous


class RemoteRendezvous(LocalRendezvous):
    """One step's rendezvous on one worker. Keys whose source device starts with
    `local_prefix` ('/job:J/replica:0/task:T/device:') are this worker's and wait here; any
    other key is received from its source task's worker. `_calls` (guarded by `_lock`) holds
    the callbacks of remote receives still in flight and their CallOptions: `abort` fails them
    at once and cancels their calls (a transfer stops), and a reply that arrives after that is
    dropped."""

    def __init__(self, step_id: int, local_prefix: str, worker_cache):
        super().__init__()
        self._step_id = step_id
        self._local_prefix = local_prefix
        self._cache = worker_cache
        self._calls: dict[int, tuple] = {}  # guarded by _lock: call id -> (callback, options)

    def recv_async(self, key: str, callback):
        if key.startswith(self._local_prefix):
            super().recv_async(key, callback)
            return
        call_opts = CallOptions()
        with self._lock:
            error = self._error
            if error is None:
                call_id = id(callback)
                self._calls[call_id] = (callback, call_opts)
        if error is not None:
            callback(error, None, False)
            return

        def done(error, response):
            with self._lock:
                if self._calls.pop(call_id, None) is None:
                    return  # aborted meanwhile: the callback has had its error
            if error is not None:
                callback(error, None, False)
            elif response.is_dead:
                callback(None, DEAD, True)
            else:
                callback(None, response.tensor, False)

        try:
            worker = self._cache.get_worker(task_of(key.partition(";")[0]))
            worker.recv_tensor_async(m.RecvTensorRequest(self._step_id, key), done, call_opts)
        except Exception as e:  # noqa: BLE001  (an unknown task, a broken transport)
            done(e, None)

    def abort(self, error: Exception):
        super().abort(error)
        with self._lock:
            calls, self._calls = list(self._calls.values()), {}
        for callback, call_opts in calls:
            callback(error, None, False)
            call_opts.start_cancel(error)
