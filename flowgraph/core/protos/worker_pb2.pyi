from google.protobuf import any_pb2 as _any_pb2
from flowgraph.core.protos import config_pb2 as _config_pb2
from flowgraph.core.protos import cost_graph_pb2 as _cost_graph_pb2
from flowgraph.core.protos import device_attributes_pb2 as _device_attributes_pb2
from flowgraph.core.protos import error_codes_pb2 as _error_codes_pb2
from flowgraph.core.protos import graph_pb2 as _graph_pb2
from flowgraph.core.protos import named_tensor_pb2 as _named_tensor_pb2
from flowgraph.core.protos import step_stats_pb2 as _step_stats_pb2
from flowgraph.core.protos import tensor_pb2 as _tensor_pb2
from flowgraph.core.protos import tensorflow_server_pb2 as _tensorflow_server_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GetStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetStatusResponse(_message.Message):
    __slots__ = ("device_attributes", "raw_port")
    DEVICE_ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    RAW_PORT_FIELD_NUMBER: _ClassVar[int]
    device_attributes: _containers.RepeatedCompositeFieldContainer[_device_attributes_pb2.DeviceAttributes]
    raw_port: int
    def __init__(self, device_attributes: _Optional[_Iterable[_Union[_device_attributes_pb2.DeviceAttributes, _Mapping]]] = ..., raw_port: _Optional[int] = ...) -> None: ...

class CreateWorkerSessionRequest(_message.Message):
    __slots__ = ("session_handle", "server_def", "isolate_session_state", "cluster_device_attributes", "master_task", "master_incarnation")
    SESSION_HANDLE_FIELD_NUMBER: _ClassVar[int]
    SERVER_DEF_FIELD_NUMBER: _ClassVar[int]
    ISOLATE_SESSION_STATE_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_DEVICE_ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    MASTER_TASK_FIELD_NUMBER: _ClassVar[int]
    MASTER_INCARNATION_FIELD_NUMBER: _ClassVar[int]
    session_handle: str
    server_def: _tensorflow_server_pb2.ServerDef
    isolate_session_state: bool
    cluster_device_attributes: _containers.RepeatedCompositeFieldContainer[_device_attributes_pb2.DeviceAttributes]
    master_task: str
    master_incarnation: int
    def __init__(self, session_handle: _Optional[str] = ..., server_def: _Optional[_Union[_tensorflow_server_pb2.ServerDef, _Mapping]] = ..., isolate_session_state: _Optional[bool] = ..., cluster_device_attributes: _Optional[_Iterable[_Union[_device_attributes_pb2.DeviceAttributes, _Mapping]]] = ..., master_task: _Optional[str] = ..., master_incarnation: _Optional[int] = ...) -> None: ...

class CreateWorkerSessionResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DeleteWorkerSessionRequest(_message.Message):
    __slots__ = ("session_handle",)
    SESSION_HANDLE_FIELD_NUMBER: _ClassVar[int]
    session_handle: str
    def __init__(self, session_handle: _Optional[str] = ...) -> None: ...

class DeleteWorkerSessionResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RegisterGraphRequest(_message.Message):
    __slots__ = ("session_handle", "graph_def", "has_control_flow", "graph_options", "debug_options", "create_worker_session_called", "collective_graph_key")
    SESSION_HANDLE_FIELD_NUMBER: _ClassVar[int]
    GRAPH_DEF_FIELD_NUMBER: _ClassVar[int]
    HAS_CONTROL_FLOW_FIELD_NUMBER: _ClassVar[int]
    GRAPH_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    DEBUG_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    CREATE_WORKER_SESSION_CALLED_FIELD_NUMBER: _ClassVar[int]
    COLLECTIVE_GRAPH_KEY_FIELD_NUMBER: _ClassVar[int]
    session_handle: str
    graph_def: _graph_pb2.GraphDef
    has_control_flow: bool
    graph_options: _config_pb2.GraphOptions
    debug_options: _config_pb2.DebugOptions
    create_worker_session_called: bool
    collective_graph_key: int
    def __init__(self, session_handle: _Optional[str] = ..., graph_def: _Optional[_Union[_graph_pb2.GraphDef, _Mapping]] = ..., has_control_flow: _Optional[bool] = ..., graph_options: _Optional[_Union[_config_pb2.GraphOptions, _Mapping]] = ..., debug_options: _Optional[_Union[_config_pb2.DebugOptions, _Mapping]] = ..., create_worker_session_called: _Optional[bool] = ..., collective_graph_key: _Optional[int] = ...) -> None: ...

class RegisterGraphResponse(_message.Message):
    __slots__ = ("graph_handle",)
    GRAPH_HANDLE_FIELD_NUMBER: _ClassVar[int]
    graph_handle: str
    def __init__(self, graph_handle: _Optional[str] = ...) -> None: ...

class DeregisterGraphRequest(_message.Message):
    __slots__ = ("graph_handle", "session_handle", "create_worker_session_called")
    GRAPH_HANDLE_FIELD_NUMBER: _ClassVar[int]
    SESSION_HANDLE_FIELD_NUMBER: _ClassVar[int]
    CREATE_WORKER_SESSION_CALLED_FIELD_NUMBER: _ClassVar[int]
    graph_handle: str
    session_handle: str
    create_worker_session_called: bool
    def __init__(self, graph_handle: _Optional[str] = ..., session_handle: _Optional[str] = ..., create_worker_session_called: _Optional[bool] = ...) -> None: ...

class DeregisterGraphResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CleanupAllRequest(_message.Message):
    __slots__ = ("container",)
    CONTAINER_FIELD_NUMBER: _ClassVar[int]
    container: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, container: _Optional[_Iterable[str]] = ...) -> None: ...

class CleanupAllResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ExecutorOpts(_message.Message):
    __slots__ = ("record_costs", "record_timeline", "record_partition_graphs", "report_tensor_allocations_upon_oom")
    RECORD_COSTS_FIELD_NUMBER: _ClassVar[int]
    RECORD_TIMELINE_FIELD_NUMBER: _ClassVar[int]
    RECORD_PARTITION_GRAPHS_FIELD_NUMBER: _ClassVar[int]
    REPORT_TENSOR_ALLOCATIONS_UPON_OOM_FIELD_NUMBER: _ClassVar[int]
    record_costs: bool
    record_timeline: bool
    record_partition_graphs: bool
    report_tensor_allocations_upon_oom: bool
    def __init__(self, record_costs: _Optional[bool] = ..., record_timeline: _Optional[bool] = ..., record_partition_graphs: _Optional[bool] = ..., report_tensor_allocations_upon_oom: _Optional[bool] = ...) -> None: ...

class RunGraphRequest(_message.Message):
    __slots__ = ("graph_handle", "step_id", "send", "recv_key", "exec_opts", "is_partial", "is_last_partial_run", "session_handle", "store_errors_in_response_body", "create_worker_session_called", "request_id", "timeout_in_ms")
    GRAPH_HANDLE_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    SEND_FIELD_NUMBER: _ClassVar[int]
    RECV_KEY_FIELD_NUMBER: _ClassVar[int]
    EXEC_OPTS_FIELD_NUMBER: _ClassVar[int]
    IS_PARTIAL_FIELD_NUMBER: _ClassVar[int]
    IS_LAST_PARTIAL_RUN_FIELD_NUMBER: _ClassVar[int]
    SESSION_HANDLE_FIELD_NUMBER: _ClassVar[int]
    STORE_ERRORS_IN_RESPONSE_BODY_FIELD_NUMBER: _ClassVar[int]
    CREATE_WORKER_SESSION_CALLED_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_IN_MS_FIELD_NUMBER: _ClassVar[int]
    graph_handle: str
    step_id: int
    send: _containers.RepeatedCompositeFieldContainer[_named_tensor_pb2.NamedTensorProto]
    recv_key: _containers.RepeatedScalarFieldContainer[str]
    exec_opts: ExecutorOpts
    is_partial: bool
    is_last_partial_run: bool
    session_handle: str
    store_errors_in_response_body: bool
    create_worker_session_called: bool
    request_id: int
    timeout_in_ms: int
    def __init__(self, graph_handle: _Optional[str] = ..., step_id: _Optional[int] = ..., send: _Optional[_Iterable[_Union[_named_tensor_pb2.NamedTensorProto, _Mapping]]] = ..., recv_key: _Optional[_Iterable[str]] = ..., exec_opts: _Optional[_Union[ExecutorOpts, _Mapping]] = ..., is_partial: _Optional[bool] = ..., is_last_partial_run: _Optional[bool] = ..., session_handle: _Optional[str] = ..., store_errors_in_response_body: _Optional[bool] = ..., create_worker_session_called: _Optional[bool] = ..., request_id: _Optional[int] = ..., timeout_in_ms: _Optional[int] = ...) -> None: ...

class RunGraphResponse(_message.Message):
    __slots__ = ("recv", "step_stats", "cost_graph", "partition_graph", "status_code", "status_error_message")
    RECV_FIELD_NUMBER: _ClassVar[int]
    STEP_STATS_FIELD_NUMBER: _ClassVar[int]
    COST_GRAPH_FIELD_NUMBER: _ClassVar[int]
    PARTITION_GRAPH_FIELD_NUMBER: _ClassVar[int]
    STATUS_CODE_FIELD_NUMBER: _ClassVar[int]
    STATUS_ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    recv: _containers.RepeatedCompositeFieldContainer[_named_tensor_pb2.NamedTensorProto]
    step_stats: _step_stats_pb2.StepStats
    cost_graph: _cost_graph_pb2.CostGraphDef
    partition_graph: _containers.RepeatedCompositeFieldContainer[_graph_pb2.GraphDef]
    status_code: _error_codes_pb2.Code
    status_error_message: str
    def __init__(self, recv: _Optional[_Iterable[_Union[_named_tensor_pb2.NamedTensorProto, _Mapping]]] = ..., step_stats: _Optional[_Union[_step_stats_pb2.StepStats, _Mapping]] = ..., cost_graph: _Optional[_Union[_cost_graph_pb2.CostGraphDef, _Mapping]] = ..., partition_graph: _Optional[_Iterable[_Union[_graph_pb2.GraphDef, _Mapping]]] = ..., status_code: _Optional[_Union[_error_codes_pb2.Code, str]] = ..., status_error_message: _Optional[str] = ...) -> None: ...

class CleanupGraphRequest(_message.Message):
    __slots__ = ("step_id",)
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    step_id: int
    def __init__(self, step_id: _Optional[int] = ...) -> None: ...

class CleanupGraphResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RecvTensorRequest(_message.Message):
    __slots__ = ("step_id", "rendezvous_key", "dma_ok", "client_locality", "server_locality", "transport_options", "request_id")
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    RENDEZVOUS_KEY_FIELD_NUMBER: _ClassVar[int]
    DMA_OK_FIELD_NUMBER: _ClassVar[int]
    CLIENT_LOCALITY_FIELD_NUMBER: _ClassVar[int]
    SERVER_LOCALITY_FIELD_NUMBER: _ClassVar[int]
    TRANSPORT_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    step_id: int
    rendezvous_key: str
    dma_ok: bool
    client_locality: _device_attributes_pb2.DeviceLocality
    server_locality: _device_attributes_pb2.DeviceLocality
    transport_options: _any_pb2.Any
    request_id: int
    def __init__(self, step_id: _Optional[int] = ..., rendezvous_key: _Optional[str] = ..., dma_ok: _Optional[bool] = ..., client_locality: _Optional[_Union[_device_attributes_pb2.DeviceLocality, _Mapping]] = ..., server_locality: _Optional[_Union[_device_attributes_pb2.DeviceLocality, _Mapping]] = ..., transport_options: _Optional[_Union[_any_pb2.Any, _Mapping]] = ..., request_id: _Optional[int] = ...) -> None: ...

class RecvTensorResponse(_message.Message):
    __slots__ = ("tensor", "is_dead", "send_start_micros", "transport_options", "require_ack")
    TENSOR_FIELD_NUMBER: _ClassVar[int]
    IS_DEAD_FIELD_NUMBER: _ClassVar[int]
    SEND_START_MICROS_FIELD_NUMBER: _ClassVar[int]
    TRANSPORT_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    REQUIRE_ACK_FIELD_NUMBER: _ClassVar[int]
    tensor: _tensor_pb2.TensorProto
    is_dead: bool
    send_start_micros: int
    transport_options: _any_pb2.Any
    require_ack: bool
    def __init__(self, tensor: _Optional[_Union[_tensor_pb2.TensorProto, _Mapping]] = ..., is_dead: _Optional[bool] = ..., send_start_micros: _Optional[int] = ..., transport_options: _Optional[_Union[_any_pb2.Any, _Mapping]] = ..., require_ack: _Optional[bool] = ...) -> None: ...

class RawTensorTransport(_message.Message):
    __slots__ = ("port", "token")
    PORT_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    port: int
    token: bytes
    def __init__(self, port: _Optional[int] = ..., token: _Optional[bytes] = ...) -> None: ...

class MarkRecvFinishedRequest(_message.Message):
    __slots__ = ("request_id",)
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    def __init__(self, request_id: _Optional[int] = ...) -> None: ...

class MarkRecvFinishedResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
