"""GrpcServer: one task of a cluster serving its master and worker services on one port
(whitepaper §3.3; TF's distributed_runtime/rpc/grpc_server_lib).

It binds exactly the address its own cluster entry names (or ServerDef.port on that host), so
tests on 127.0.0.1 open nothing on other interfaces. Port 0 picks a free port, and the cluster
this server reports (`server_def`) then names the port it got.

The port is a grpc.aio server on the process's I/O loop (io_loop.py), as TF's handlers are
asynchronous: a RecvTensor waiting for its tensor is a coroutine, not a thread, so a step may
have any number of receives pending at a task, and a RunGraph (on a pool thread) never waits
for a thread that a waiting RecvTensor holds.
"""

from __future__ import annotations

import threading

import grpc

from flowgraph.core import errors
from flowgraph.core.protos import ServerDef
from flowgraph.distributed import grpc_service, io_loop, local, task_services


class AioServer:
    """A grpc.aio server on the I/O loop, driven from any thread: bound at once to `address`
    (host:port, port 0 for a free one: `port` names it), serving the handlers `add`ed before
    `start`. Raises UnknownError if it cannot bind."""

    def __init__(self, address: str):
        self._grpc, self.port = io_loop.run(self._make(address))

    @staticmethod
    async def _make(address: str):
        server = grpc.aio.server(options=grpc_service.SERVER_OPTIONS)
        try:
            port = server.add_insecure_port(address)
        except RuntimeError as e:
            raise errors.UnknownError(
                None, None, f"Could not start gRPC server: cannot bind {address}: {e}"
            ) from None
        return server, port

    def add(self, handlers) -> None:
        self._grpc.add_generic_rpc_handlers(tuple(handlers))

    def start(self) -> None:
        io_loop.run(self._grpc.start())

    def wait(self) -> None:
        io_loop.run(self._grpc.wait_for_termination())

    def stop(self) -> None:
        """Stops at once: calls in flight are cancelled."""
        io_loop.run(self._grpc.stop(None))


class GrpcServer:
    """Serves the task `server_def` names; see the module docstring."""

    def __init__(self, server_def: ServerDef):
        if server_def.protocol not in ("", "grpc"):
            raise errors.UnimplementedError(
                None, None, f"Server protocol {server_def.protocol!r} is not supported: use 'grpc'"
            )
        self._server_def = ServerDef()
        self._server_def.CopyFrom(server_def)
        host, port = _split_address(_task_address(server_def))
        if server_def.port:
            port = server_def.port
        self._grpc = AioServer(f"{host}:{port}")
        self._address = f"{host}:{self._grpc.port}"
        _set_task_address(self._server_def, self._address)
        self.services = task_services.TaskServices(self._server_def, raw_host=host)
        self._grpc.add(self.services.handlers)
        self._lock = threading.Lock()  # guards _state
        self._state = "new"  # new -> started -> stopped

    @property
    def server_def(self) -> ServerDef:
        return self._server_def

    @property
    def target(self) -> str:
        return f"grpc://{self._address}"

    def start(self) -> None:
        with self._lock:
            if self._state == "stopped":
                raise errors.FailedPreconditionError(None, None, "Server has been stopped")
            if self._state == "new":
                self._grpc.start()
                self._state = "started"
                local.serve(self.target, self.services.master)  # for Sessions of this process

    def join(self) -> None:
        self._grpc.wait()

    def stop(self) -> None:
        """Stops serving at once (calls in flight are cancelled) and closes the services."""
        with self._lock:
            if self._state == "stopped":
                return
            self._state = "stopped"
        local.stop_serving(self.target, self.services.master)
        self._grpc.stop()
        self.services.close()


def _task_address(server_def: ServerDef) -> str:
    for job in server_def.cluster.job:
        if job.name == server_def.job_name:
            if server_def.task_index in job.tasks:
                return job.tasks[server_def.task_index]
            raise errors.InvalidArgumentError(
                None,
                None,
                f"Task {server_def.task_index} was not defined in job {job.name!r} of the "
                f"cluster {sorted((j.name, sorted(j.tasks)) for j in server_def.cluster.job)}",
            )
    jobs = sorted(job.name for job in server_def.cluster.job)
    raise errors.InvalidArgumentError(
        None, None, f"Job {server_def.job_name!r} was not defined in the cluster (jobs: {jobs})"
    )


def _set_task_address(server_def: ServerDef, address: str) -> None:
    for job in server_def.cluster.job:
        if job.name == server_def.job_name:
            job.tasks[server_def.task_index] = address


def _split_address(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise errors.InvalidArgumentError(
            None, None, f"Task address {address!r} is not of the form host:port"
        )
    return host, int(port)
