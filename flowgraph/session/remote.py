"""The client side of tf.Session("grpc://host:port") (whitepaper §3.3): `RemoteMaster` has the
Master's methods, each one MasterService RPC to that task (TF's grpc_remote_master), so the
Session code is the same for a local, an in-process and a remote master.

Every call has a deadline: control RPCs CONTROL_TIMEOUT_S, a step RunOptions.timeout_in_ms,
else ConfigProto.operation_timeout_in_ms, else STEP_TIMEOUT_S (a step may wait on a queue).
The master enforces a step's deadline itself and answers once the step has ended on every task;
the RPC waits STEP_MARGIN_S longer, so the client hears that answer, after the step, rather
than its own expired call, which only a master that stopped answering causes.
"""

from __future__ import annotations

import grpc

from flowgraph.core import errors
from flowgraph.core.protos import ConfigProto
from flowgraph.distributed import grpc_master, grpc_service, local
from flowgraph.distributed import messages as m

SCHEME = "grpc://"
STEP_MARGIN_S = 5.0  # how much longer than a step's deadline its RunStep/RunCallable call waits


class RemoteMaster:
    """The Master of the task at `target` ("grpc://host:port")."""

    def __init__(self, target: str, config: ConfigProto | None = None):
        address = target.removeprefix(SCHEME)
        self._channel = grpc.insecure_channel(address, options=grpc_service.CHANNEL_OPTIONS)
        self._client = grpc_service.Client(
            self._channel, grpc_master.SERVICE_NAME, grpc_master.METHODS, target
        )
        timeout_ms = config.operation_timeout_in_ms if config is not None else 0
        self._step_timeout = timeout_ms / 1000 if timeout_ms > 0 else grpc_service.STEP_TIMEOUT_S
        self._callable_timeouts: dict[int, float] = {}  # a callable's run_options.timeout_in_ms

    def _call(self, name: str, proto, timeout: float = grpc_service.CONTROL_TIMEOUT_S):
        response = self._client.call(name, proto, timeout)
        return getattr(m, f"{name}Response").from_proto(response)

    def create_session(self, req: m.CreateSessionRequest) -> m.CreateSessionResponse:
        return self._call("CreateSession", req.to_proto())

    def extend_session(self, req: m.ExtendSessionRequest) -> m.ExtendSessionResponse:
        proto = req.to_proto()
        if req.replace is not None and len(req.replace.node):
            grpc_master.with_replace(proto, req.replace)
        return self._call("ExtendSession", proto)

    def run_step(self, req: m.RunStepRequest) -> m.RunStepResponse:
        timeout = self._step_timeout
        if req.options is not None and req.options.timeout_in_ms > 0:
            timeout = req.options.timeout_in_ms / 1000
        return self._call("RunStep", req.to_proto(), timeout + STEP_MARGIN_S)

    def partial_run_setup(self, req: m.PartialRunSetupRequest) -> m.PartialRunSetupResponse:
        return self._call("PartialRunSetup", req.to_proto())

    def close_session(self, req: m.CloseSessionRequest) -> m.CloseSessionResponse:
        try:
            return self._call("CloseSession", req.to_proto())
        finally:
            self.close()

    def list_devices(self, req: m.ListDevicesRequest) -> m.ListDevicesResponse:
        return self._call("ListDevices", req.to_proto())

    def reset(self, req: m.ResetRequest) -> m.ResetResponse:
        return self._call("Reset", req.to_proto())

    def make_callable(self, req: m.MakeCallableRequest) -> m.MakeCallableResponse:
        resp = self._call("MakeCallable", req.to_proto())
        run_options = req.options.run_options if req.options is not None else None
        if run_options is not None and run_options.timeout_in_ms > 0:
            self._callable_timeouts[resp.handle] = run_options.timeout_in_ms / 1000
        return resp

    def run_callable(self, req: m.RunCallableRequest) -> m.RunCallableResponse:
        """A step's deadline: its callable's RunOptions, as RunStep's are its request's."""
        timeout = self._callable_timeouts.get(req.handle, self._step_timeout)
        return self._call("RunCallable", req.to_proto(), timeout + STEP_MARGIN_S)

    def release_callable(self, req: m.ReleaseCallableRequest) -> m.ReleaseCallableResponse:
        self._callable_timeouts.pop(req.handle, None)
        return self._call("ReleaseCallable", req.to_proto())

    def close(self) -> None:
        """Closes the channel (the session, if any, is closed by close_session)."""
        self._channel.close()


def reset(target: str, containers=None, config: ConfigProto | None = None) -> None:
    """tf.Session.reset: closes every session of the master at `target` and clears the named
    resource containers (all variables and queues of the default one if None) on every task,
    so that their state does not outlive this call."""
    if isinstance(containers, str):
        raise TypeError("containers must be a list of strings, not a string")
    request = m.ResetRequest(container=list(containers or []))
    if target.startswith(SCHEME):
        master = RemoteMaster(target, config)
        try:
            master.reset(request)
        finally:
            master.close()
    elif target.startswith("inproc://"):
        local.master_for(target).reset(request)
    else:
        raise errors.InvalidArgumentError(
            None, None, f"Session.reset needs a cluster target (grpc://host:port), got {target!r}"
        )
