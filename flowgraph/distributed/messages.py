"""The master's and worker's requests and responses (whitepaper §3.3): the messages of
TensorFlow's `master.proto` and `worker.proto`, with their field names, held in memory.

In one process nothing is serialized (TensorFlow's InMemoryRunStepRequest idea): tensors are
NumPy arrays, named tensors are `(name, array)` pairs, and fields that are protos in TensorFlow
and cheap to keep as such (GraphDef, ConfigProto, RunOptions, RunMetadata, StepStats,
CallableOptions, DeviceAttributes) are proto objects. `to_proto()` and `from_proto()` convert
at the wire only: the gRPC adapters call them, the in-process master and workers never do.

Each class lists its fields with their kind (`_KINDS`): "v" a scalar or a list of scalars,
"m" a proto message (or None), "ms" a list of proto messages, "t" one tensor, "ts" a list of
tensors, "nt" a list of (name, tensor) pairs, a `NamedTensorProto{name, tensor}` each; a Message
class (as kind) a nested message of that class, a list of them for a repeated field.
A field that is None or empty is left unset on the wire.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any, ClassVar

import numpy as np

from flowgraph.core import tensor_util


class Message:
    """Base of the in-memory messages: conversion to and from the wire protos."""

    __slots__ = ()
    _PROTO: ClassVar[str] = ""  # "module.Message" under flowgraph.core.protos
    _KINDS: ClassVar[dict[str, str]] = {}

    @classmethod
    def proto_class(cls):
        module, _, name = cls._PROTO.rpartition(".")
        return getattr(importlib.import_module(f"flowgraph.core.protos.{module}"), name)

    def to_proto(self):
        """The wire form: a `master.proto`/`worker.proto` message, tensors as TensorProtos."""
        proto = self.proto_class()()
        for field, kind in self._KINDS.items():
            _set_field(proto, field, kind, getattr(self, field))
        return proto

    @classmethod
    def from_proto(cls, proto) -> Message:
        """The in-memory form of a wire message: tensors as NumPy arrays."""
        return cls(**{f: _get_field(proto, f, k) for f, k in cls._KINDS.items()})


def _set_field(proto, field: str, kind: str, value: Any) -> None:
    if value is None:
        return
    if isinstance(kind, type):
        if isinstance(value, list):
            getattr(proto, field).extend(v.to_proto() for v in value)
        else:
            getattr(proto, field).CopyFrom(value.to_proto())
    elif kind == "v":
        if isinstance(value, (list, tuple)):
            getattr(proto, field).extend(value)
        else:
            setattr(proto, field, value)
    elif kind == "m":
        getattr(proto, field).CopyFrom(value)
    elif kind == "ms":
        getattr(proto, field).extend(value)
    elif kind == "t":
        getattr(proto, field).CopyFrom(tensor_util.make_tensor_proto(_array(value)))
    elif kind == "ts":
        getattr(proto, field).extend(tensor_util.make_tensor_proto(_array(v)) for v in value)
    elif kind == "nt":
        repeated = getattr(proto, field)
        for name, v in value:
            named = repeated.add(name=name)
            named.tensor.CopyFrom(tensor_util.make_tensor_proto(_array(v)))
    else:
        raise ValueError(f"unknown field kind {kind!r} of field {field!r}")


def _get_field(proto, field: str, kind: str) -> Any:
    value = getattr(proto, field)
    if isinstance(kind, type):
        if hasattr(value, "add"):
            return [kind.from_proto(v) for v in value]
        return kind.from_proto(value) if proto.HasField(field) else None
    if kind == "v":
        return list(value) if hasattr(value, "extend") else value
    if kind == "m":
        return value if proto.HasField(field) else None
    if kind == "ms":
        return list(value)
    if kind == "t":
        return tensor_util.make_ndarray(value) if proto.HasField(field) else None
    if kind == "ts":
        return [tensor_util.make_ndarray(t) for t in value]
    if kind == "nt":
        return [(named.name, tensor_util.make_ndarray(named.tensor)) for named in value]
    raise ValueError(f"unknown field kind {kind!r} of field {field!r}")


def _array(value) -> np.ndarray:
    return value if isinstance(value, np.ndarray) else np.asarray(value)


def _message(proto: str, **kinds):
    """Class decorator: a slotted dataclass of the fields `kinds`, converting to `proto`."""

    def wrap(cls):
        cls = dataclasses.dataclass(slots=True)(cls)
        cls._PROTO = proto
        cls._KINDS = kinds
        return cls

    return wrap


# -- nested messages ---------------------------------------------------------------------------
@_message(
    "device_attributes_pb2.DeviceAttributes",
    name="v",
    device_type="v",
    memory_limit="v",
    incarnation="v",
)
class DeviceAttributes(Message):
    name: str = ""
    device_type: str = ""
    memory_limit: int = 0
    incarnation: int = 0  # unsigned 64 bits on the wire


@_message(
    "config_pb2.CallableOptions",
    feed="v",
    fetch="v",
    target="v",
    run_options="m",
    tensor_connection="ms",
)
class CallableOptions(Message):
    feed: list = dataclasses.field(default_factory=list)
    fetch: list = dataclasses.field(default_factory=list)
    target: list = dataclasses.field(default_factory=list)
    run_options: Any = None  # RunOptions
    tensor_connection: list = dataclasses.field(default_factory=list)  # TensorConnection protos


@_message(
    "worker_pb2.ExecutorOpts",
    record_costs="v",
    record_timeline="v",
    record_partition_graphs="v",
)
class ExecutorOpts(Message):
    record_costs: bool = False
    record_timeline: bool = False
    record_partition_graphs: bool = False


# -- MasterService (master.proto) -------------------------------------------------------------
@_message("master_pb2.CreateSessionRequest", graph_def="m", config="m", target="v")
class CreateSessionRequest(Message):
    graph_def: Any = None  # GraphDef
    config: Any = None  # ConfigProto
    target: str = ""


@_message("master_pb2.CreateSessionResponse", session_handle="v", graph_version="v")
class CreateSessionResponse(Message):
    session_handle: str = ""
    graph_version: int = 0


@_message(
    "master_pb2.ExtendSessionRequest", session_handle="v", graph_def="m", current_graph_version="v"
)
class ExtendSessionRequest(Message):
    """`graph_def` holds the new nodes. `replace` (flowgraph's, not on TF's wire) holds nodes
    that supersede same-named ones: an op whose inputs changed after an earlier Extend."""

    session_handle: str = ""
    graph_def: Any = None
    current_graph_version: int = 0
    replace: Any = None  # GraphDef or None


@_message("master_pb2.ExtendSessionResponse", new_graph_version="v")
class ExtendSessionResponse(Message):
    new_graph_version: int = 0


@_message(
    "master_pb2.RunStepRequest",
    session_handle="v",
    feed="nt",
    fetch="v",
    target="v",
    options="m",
    partial_run_handle="v",
)
class RunStepRequest(Message):
    session_handle: str = ""
    feed: list = dataclasses.field(default_factory=list)  # [(tensor name, array)]
    fetch: list = dataclasses.field(default_factory=list)  # tensor names
    target: list = dataclasses.field(default_factory=list)  # node names
    options: Any = None  # RunOptions
    partial_run_handle: str = ""


@_message("master_pb2.RunStepResponse", tensor="nt", metadata="m")
class RunStepResponse(Message):
    tensor: list = dataclasses.field(default_factory=list)  # [(name, array)] in fetch order
    metadata: Any = None  # RunMetadata, when traced or partition graphs were asked for


@_message("master_pb2.PartialRunSetupRequest", session_handle="v", feed="v", fetch="v", target="v")
class PartialRunSetupRequest(Message):
    session_handle: str = ""
    feed: list = dataclasses.field(default_factory=list)  # tensor names
    fetch: list = dataclasses.field(default_factory=list)
    target: list = dataclasses.field(default_factory=list)


@_message("master_pb2.PartialRunSetupResponse", partial_run_handle="v")
class PartialRunSetupResponse(Message):
    partial_run_handle: str = ""


@_message("master_pb2.CloseSessionRequest", session_handle="v")
class CloseSessionRequest(Message):
    session_handle: str = ""


@_message("master_pb2.CloseSessionResponse")
class CloseSessionResponse(Message):
    pass


@_message("master_pb2.ResetRequest", container="v", device_filters="v")
class ResetRequest(Message):
    container: list = dataclasses.field(default_factory=list)
    device_filters: list = dataclasses.field(default_factory=list)


@_message("master_pb2.ResetResponse")
class ResetResponse(Message):
    pass


@_message("master_pb2.ListDevicesRequest", session_handle="v")
class ListDevicesRequest(Message):
    session_handle: str = ""


@_message(
    "master_pb2.ListDevicesResponse",
    local_device=DeviceAttributes,
    remote_device=DeviceAttributes,
)
class ListDevicesResponse(Message):
    local_device: list = dataclasses.field(default_factory=list)  # DeviceAttributes
    remote_device: list = dataclasses.field(default_factory=list)


@_message("master_pb2.MakeCallableRequest", session_handle="v", options=CallableOptions)
class MakeCallableRequest(Message):
    session_handle: str = ""
    options: Any = None  # CallableOptions: feed, fetch, target, run_options, tensor_connection


@_message("master_pb2.MakeCallableResponse", handle="v")
class MakeCallableResponse(Message):
    handle: int = 0


@_message("master_pb2.RunCallableRequest", session_handle="v", handle="v", feed="ts")
class RunCallableRequest(Message):
    session_handle: str = ""
    handle: int = 0
    feed: list = dataclasses.field(default_factory=list)  # arrays, in CallableOptions.feed order


@_message("master_pb2.RunCallableResponse", fetch="ts", metadata="m")
class RunCallableResponse(Message):
    fetch: list = dataclasses.field(default_factory=list)
    metadata: Any = None


@_message("master_pb2.ReleaseCallableRequest", session_handle="v", handle="v")
class ReleaseCallableRequest(Message):
    session_handle: str = ""
    handle: int = 0


@_message("master_pb2.ReleaseCallableResponse")
class ReleaseCallableResponse(Message):
    pass


# -- WorkerService (worker.proto) -------------------------------------------------------------
@_message("worker_pb2.GetStatusRequest")
class GetStatusRequest(Message):
    pass


@_message("worker_pb2.GetStatusResponse", device_attributes=DeviceAttributes)
class GetStatusResponse(Message):
    device_attributes: list = dataclasses.field(default_factory=list)  # DeviceAttributes


@_message(
    "worker_pb2.CreateWorkerSessionRequest",
    session_handle="v",
    server_def="m",
    isolate_session_state="v",
    master_task="v",
    master_incarnation="v",
)
class CreateWorkerSessionRequest(Message):
    session_handle: str = ""
    server_def: Any = None  # ServerDef; its default_session_config is the session's config
    isolate_session_state: bool = False
    master_task: str = ""  # the task of the session's master, whose health the worker checks
    master_incarnation: int = 0  # its first device's incarnation, as a signed int64


@_message("worker_pb2.CreateWorkerSessionResponse")
class CreateWorkerSessionResponse(Message):
    pass


@_message("worker_pb2.DeleteWorkerSessionRequest", session_handle="v")
class DeleteWorkerSessionRequest(Message):
    session_handle: str = ""


@_message("worker_pb2.DeleteWorkerSessionResponse")
class DeleteWorkerSessionResponse(Message):
    pass


@_message(
    "worker_pb2.RegisterGraphRequest",
    session_handle="v",
    create_worker_session_called="v",
    graph_def="m",
    graph_options="m",
)
class RegisterGraphRequest(Message):
    """In one process the partitions travel decoded (`nodes`, runtime Nodes, each with its
    device) beside a `graph_def` holding only the function library; on the wire the nodes
    are encoded into `graph_def` (TensorFlow's InMemory idea, for graphs)."""

    session_handle: str = ""
    create_worker_session_called: bool = True
    graph_def: Any = None  # GraphDef: this worker's partitions, every node with its device
    graph_options: Any = None  # GraphOptions
    nodes: Any = None  # in process only: the partitions' nodes, not yet in graph_def

    def to_proto(self):
        proto = Message.to_proto(self)
        if self.nodes is not None:
            proto.graph_def.node.extend(n.to_node_def() for n in self.nodes)
        return proto


@_message("worker_pb2.RegisterGraphResponse", graph_handle="v")
class RegisterGraphResponse(Message):
    graph_handle: str = ""


@_message(
    "worker_pb2.DeregisterGraphRequest",
    session_handle="v",
    create_worker_session_called="v",
    graph_handle="v",
)
class DeregisterGraphRequest(Message):
    session_handle: str = ""
    create_worker_session_called: bool = True
    graph_handle: str = ""


@_message("worker_pb2.DeregisterGraphResponse")
class DeregisterGraphResponse(Message):
    pass


@_message(
    "worker_pb2.RunGraphRequest",
    session_handle="v",
    create_worker_session_called="v",
    graph_handle="v",
    step_id="v",
    exec_opts=ExecutorOpts,
    send="nt",
    recv_key="v",
    is_partial="v",
    is_last_partial_run="v",
    timeout_in_ms="v",
)
class RunGraphRequest(Message):
    session_handle: str = ""
    create_worker_session_called: bool = True
    graph_handle: str = ""
    step_id: int = 0
    exec_opts: Any = None  # ExecutorOpts; None: no tracing
    send: list = dataclasses.field(default_factory=list)  # [(rendezvous key, array)]
    recv_key: list = dataclasses.field(default_factory=list)  # rendezvous keys to return
    is_partial: bool = False
    is_last_partial_run: bool = False
    timeout_in_ms: int = 0  # the step's deadline, which the worker enforces (0: none)


@_message("worker_pb2.RunGraphResponse", recv="nt", step_stats="m")
class RunGraphResponse(Message):
    recv: list = dataclasses.field(default_factory=list)  # [(rendezvous key, array)]
    step_stats: Any = None  # StepStats of this worker's devices, when traced


@_message("worker_pb2.CleanupGraphRequest", step_id="v")
class CleanupGraphRequest(Message):
    step_id: int = 0


@_message("worker_pb2.CleanupGraphResponse")
class CleanupGraphResponse(Message):
    pass


@_message("worker_pb2.CleanupAllRequest", container="v")
class CleanupAllRequest(Message):
    container: list = dataclasses.field(default_factory=list)


@_message("worker_pb2.CleanupAllResponse")
class CleanupAllResponse(Message):
    pass


@_message("worker_pb2.RecvTensorRequest", step_id="v", rendezvous_key="v", dma_ok="v")
class RecvTensorRequest(Message):
    step_id: int = 0
    rendezvous_key: str = ""
    dma_ok: bool = False


@_message("worker_pb2.RecvTensorResponse", tensor="t", is_dead="v", send_start_micros="v")
class RecvTensorResponse(Message):
    tensor: Any = None  # the array (None for a dead tensor)
    is_dead: bool = False
    send_start_micros: int = 0
