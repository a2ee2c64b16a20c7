"""The distributed runtime's messages keep TensorFlow's field numbers and service names (§3.3).

A TensorFlow process and a flowgraph process can only talk if every field number of master.proto
and worker.proto matches, so each is checked against the numbers read from TensorFlow's files
(FORMATS.md), and a few encodings are checked byte for byte.
"""

import pytest

from flowgraph.core import errors
from flowgraph.core.protos import (
    CallableOptions,
    DeviceAttributes,
    NamedTensorProto,
    TensorConnection,
    error_codes_pb2,
    master_pb2,
    master_service_pb2,
    worker_pb2,
    worker_service_pb2,
)

FIELDS = {
    master_pb2.CreateSessionRequest: {"graph_def": 1, "config": 2, "target": 3},
    master_pb2.CreateSessionResponse: {"session_handle": 1, "graph_version": 2},
    master_pb2.ExtendSessionRequest: {
        "session_handle": 1,
        "graph_def": 2,
        "current_graph_version": 3,
    },
    master_pb2.ExtendSessionResponse: {"new_graph_version": 4},
    master_pb2.RunStepRequest: {
        "session_handle": 1,
        "feed": 2,
        "fetch": 3,
        "target": 4,
        "options": 5,
        "partial_run_handle": 6,
        "store_errors_in_response_body": 7,
        "request_id": 8,
    },
    master_pb2.RunStepResponse: {
        "tensor": 1,
        "metadata": 2,
        "status_code": 3,
        "status_error_message": 4,
    },
    master_pb2.PartialRunSetupRequest: {
        "session_handle": 1,
        "feed": 2,
        "fetch": 3,
        "target": 4,
        "request_id": 5,
    },
    master_pb2.PartialRunSetupResponse: {"partial_run_handle": 1},
    master_pb2.CloseSessionRequest: {"session_handle": 1},
    master_pb2.ResetRequest: {"container": 1, "device_filters": 2},
    master_pb2.ListDevicesRequest: {"session_handle": 1},
    master_pb2.ListDevicesResponse: {"local_device": 1, "remote_device": 2},
    master_pb2.MakeCallableRequest: {"session_handle": 1, "options": 2, "request_id": 3},
    master_pb2.MakeCallableResponse: {"handle": 1},
    master_pb2.RunCallableRequest: {"session_handle": 1, "handle": 2, "feed": 3, "request_id": 4},
    master_pb2.RunCallableResponse: {"fetch": 1, "metadata": 2},
    master_pb2.ReleaseCallableRequest: {"session_handle": 1, "handle": 2},
    worker_pb2.GetStatusResponse: {"device_attributes": 1},
    worker_pb2.CreateWorkerSessionRequest: {
        "session_handle": 1,
        "server_def": 2,
        "isolate_session_state": 3,
        "cluster_device_attributes": 4,
        "master_task": 5,
        "master_incarnation": 6,
    },
    worker_pb2.DeleteWorkerSessionRequest: {"session_handle": 1},
    worker_pb2.RegisterGraphRequest: {
        "session_handle": 1,
        "graph_def": 2,
        "has_control_flow": 3,
        "graph_options": 4,
        "debug_options": 5,
        "create_worker_session_called": 6,
        "collective_graph_key": 7,
    },
    worker_pb2.RegisterGraphResponse: {"graph_handle": 1},
    worker_pb2.DeregisterGraphRequest: {
        "graph_handle": 1,
        "session_handle": 2,
        "create_worker_session_called": 3,
    },
    worker_pb2.CleanupAllRequest: {"container": 1},
    worker_pb2.ExecutorOpts: {
        "record_costs": 1,
        "record_timeline": 3,
        "record_partition_graphs": 4,
        "report_tensor_allocations_upon_oom": 5,
    },
    worker_pb2.RunGraphRequest: {
        "graph_handle": 1,
        "step_id": 2,
        "send": 3,
        "recv_key": 4,
        "exec_opts": 5,
        "is_partial": 6,
        "is_last_partial_run": 7,
        "session_handle": 8,
        "store_errors_in_response_body": 9,
        "create_worker_session_called": 10,
        "request_id": 11,
    },
    worker_pb2.RunGraphResponse: {
        "recv": 1,
        "step_stats": 2,
        "cost_graph": 3,
        "partition_graph": 4,
        "status_code": 5,
        "status_error_message": 6,
    },
    worker_pb2.CleanupGraphRequest: {"step_id": 1},
    worker_pb2.RecvTensorRequest: {
        "step_id": 1,
        "rendezvous_key": 2,
        "dma_ok": 3,
        "client_locality": 4,
        "server_locality": 5,
        "transport_options": 6,
        "request_id": 7,
    },
    worker_pb2.RecvTensorResponse: {
        "tensor": 1,
        "is_dead": 2,
        "send_start_micros": 3,
        "transport_options": 4,
        "require_ack": 5,
    },
    worker_pb2.MarkRecvFinishedRequest: {"request_id": 1},
    NamedTensorProto: {"name": 1, "tensor": 2},
    DeviceAttributes: {
        "name": 1,
        "device_type": 2,
        "memory_limit": 4,
        "locality": 5,
        "incarnation": 6,
        "physical_device_desc": 7,
    },
    CallableOptions: {
        "feed": 1,
        "fetch": 2,
        "target": 3,
        "run_options": 4,
        "tensor_connection": 5,
        "feed_devices": 6,
        "fetch_devices": 7,
        "fetch_skip_sync": 8,
    },
    TensorConnection: {"from_tensor": 1, "to_tensor": 2},
}


# flowgraph's own fields, numbered from 1000 (clear of TensorFlow's): a TensorFlow peer skips
# them, and a request without them means what it means to TensorFlow.
OWN_FIELDS = {
    worker_pb2.RunGraphRequest: {"timeout_in_ms": 1000},
    worker_pb2.GetStatusResponse: {"raw_port": 1000},
}


@pytest.mark.parametrize("message", list(FIELDS), ids=lambda m: m.DESCRIPTOR.name)
def test_field_numbers_are_tensorflows(message):
    actual = {f.name: f.number for f in message.DESCRIPTOR.fields}
    own = OWN_FIELDS.get(message, {})
    assert all(number >= 1000 for number in own.values())
    assert actual == {**FIELDS[message], **own}


def test_encodings_byte_for_byte():
    # Tag = field number << 3 | wire type (0 varint, 2 length-delimited, 1 fixed64).
    assert worker_pb2.CleanupGraphRequest(step_id=5).SerializeToString() == b"\x08\x05"
    key = "/job:a/replica:0/task:0/device:CPU:0;1;/job:b/replica:0/task:0/device:CPU:0;x:0;0:0"
    request = worker_pb2.RecvTensorRequest(step_id=7, rendezvous_key=key)
    assert request.SerializeToString() == b"\x08\x07\x12" + bytes([len(key)]) + key.encode()
    device = DeviceAttributes(name="d", incarnation=2**64 - 1)
    assert device.SerializeToString() == b"\x0a\x01d\x31" + b"\xff" * 8
    response = master_pb2.ExtendSessionResponse(new_graph_version=3)
    assert response.SerializeToString() == b"\x20\x03"


def test_error_codes_are_the_op_error_codes():
    for name, number in error_codes_pb2.Code.items():
        if name.startswith("DO_NOT_USE"):
            continue
        assert getattr(errors, name) == number, name
    assert master_pb2.RunStepResponse.DESCRIPTOR.fields_by_name["status_code"].enum_type is (
        error_codes_pb2.Code.DESCRIPTOR
    )


MASTER_METHODS = [
    "CreateSession",
    "ExtendSession",
    "PartialRunSetup",
    "RunStep",
    "CloseSession",
    "ListDevices",
    "Reset",
    "MakeCallable",
    "RunCallable",
    "ReleaseCallable",
]
WORKER_METHODS = [
    "GetStatus",
    "CreateWorkerSession",
    "DeleteWorkerSession",
    "RegisterGraph",
    "DeregisterGraph",
    "RunGraph",
    "CleanupGraph",
    "CleanupAll",
    "RecvTensor",
    "MarkRecvFinished",
]


@pytest.mark.parametrize(
    ("module", "service", "methods"),
    [
        (master_service_pb2, "MasterService", MASTER_METHODS),
        (worker_service_pb2, "WorkerService", WORKER_METHODS),
    ],
)
def test_services_pair_each_method_with_its_messages(module, service, methods):
    descriptor = module.DESCRIPTOR.services_by_name[service]
    assert descriptor.full_name == f"flowgraph.grpc.{service}"
    assert [m.name for m in descriptor.methods] == methods
    for method in descriptor.methods:
        assert method.input_type.name == f"{method.name}Request"
        assert method.output_type.name == f"{method.name}Response"
