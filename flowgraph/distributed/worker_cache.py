"""The worker cache (whitepaper §3.3): task name -> the interface to that task's worker.

The master reaches every worker, and a worker reaches its peers (RecvTensor), only through a
WorkerInterface found here, so the transport is replaceable: the in-process cache hands out the
Worker objects themselves; a gRPC cache hands out stubs with the same methods, whose adapters
call `to_proto()`/`from_proto()` of the messages (messages.py). Task names are TensorFlow's:
/job:worker/replica:0/task:1.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Protocol

from flowgraph.core import errors
from flowgraph.core.device_spec import parse
from flowgraph.distributed import messages as m


class CallOptions:
    """One call's deadline and its cancellation (TensorFlow's CallOptions). The caller may
    cancel a call in flight; the callee registers what cancelling does (for RunGraph: cancel
    the step). Over gRPC the deadline is the RPC's and cancelling cancels the RPC."""

    __slots__ = ("_callback", "_error", "timeout_ms")

    def __init__(self, timeout_ms: int = 0):
        self.timeout_ms = timeout_ms
        self._callback: Callable | None = None
        self._error: errors.OpError | None = None

    def set_cancel_callback(self, callback: Callable[[errors.OpError], None]) -> None:
        """`callback(error)` runs on cancellation, at once if the call is already cancelled."""
        self._callback = callback
        if self._error is not None:
            callback(self._error)

    def clear_cancel_callback(self) -> None:
        self._callback = None

    def start_cancel(self, error: errors.OpError) -> None:
        if self._error is None:
            self._error = error
        callback = self._callback
        if callback is not None:
            callback(error)

    @property
    def error(self) -> errors.OpError | None:
        """The cancellation's error, None while the call is not cancelled."""
        return self._error


RecvDone = Callable[[errors.OpError | None, m.RecvTensorResponse | None], None]


class WorkerInterface(Protocol):
    """What the master and peer workers call (TensorFlow's WorkerInterface)."""

    def get_status(self, req: m.GetStatusRequest) -> m.GetStatusResponse: ...

    def create_worker_session(
        self, req: m.CreateWorkerSessionRequest
    ) -> m.CreateWorkerSessionResponse: ...

    def delete_worker_session(
        self, req: m.DeleteWorkerSessionRequest
    ) -> m.DeleteWorkerSessionResponse: ...

    def register_graph(
        self, req: m.RegisterGraphRequest, timeout: float | None = None
    ) -> m.RegisterGraphResponse: ...

    def deregister_graph(self, req: m.DeregisterGraphRequest) -> m.DeregisterGraphResponse: ...

    def run_graph(
        self, req: m.RunGraphRequest, call_opts: CallOptions | None = None
    ) -> m.RunGraphResponse: ...

    def cleanup_graph(self, req: m.CleanupGraphRequest) -> m.CleanupGraphResponse: ...

    def cleanup_all(self, req: m.CleanupAllRequest) -> m.CleanupAllResponse: ...

    def recv_tensor_async(self, req: m.RecvTensorRequest, done: RecvDone) -> None:
        """Calls `done(error, response)` when the tensor is there; never blocks the caller."""


class WorkerCache(Protocol):
    def list_workers(self) -> list[str]: ...

    def get_worker(self, task: str) -> WorkerInterface: ...


class LocalWorkerCache:
    """The in-process cache: the workers of this process by task name, in the order given
    (the master places on the first task's devices first)."""

    def __init__(self, workers: dict):
        self._workers = dict(workers)
        for worker in self._workers.values():
            worker.worker_cache = self

    def list_workers(self) -> list[str]:
        return list(self._workers)

    def get_worker(self, task: str) -> WorkerInterface:
        worker = self._workers.get(task)
        if worker is None:
            raise errors.UnavailableError(
                None,
                None,
                f"No worker for task {task}; this cluster has {', '.join(self._workers)}",
            )
        return worker

    def __len__(self) -> int:
        return len(self._workers)


def task_of(device_name: str) -> str:
    """'/job:w/replica:0/task:1/device:CPU:0' -> '/job:w/replica:0/task:1'."""
    return device_name.partition("/device:")[0]


@dataclasses.dataclass(frozen=True)
class DeviceInfo:
    """A device as the master sees it: what placement and partitioning need."""

    name: str
    device_type: str
    incarnation: int  # signed 64 bits, as the _Send/_Recv attr holds it
    spec: object  # DeviceSpec

    @classmethod
    def from_attributes(cls, a: m.DeviceAttributes) -> DeviceInfo:
        return cls(a.name, a.device_type, signed64(a.incarnation), parse(a.name))


def signed64(incarnation: int) -> int:
    """A device incarnation (unsigned 64 bits on the wire) as the int64 that the _Send/_Recv
    attr and CreateWorkerSessionRequest hold."""
    incarnation %= 1 << 64
    return incarnation - (1 << 64) if incarnation >= 1 << 63 else incarnation
