"""The generic gRPC adapter on loopback: TF's service paths, errors as statuses with their
class, node and message kept, and a server that survives any bad request."""

import threading
from concurrent import futures

import grpc
import numpy as np
import pytest

from flowgraph.core import errors
from flowgraph.core.protos import master_service_pb2, worker_pb2, worker_service_pb2
from flowgraph.distributed import grpc_server, grpc_service, io_loop, rpc_errors, tensor_stream

WORKER = worker_service_pb2.DESCRIPTOR.services_by_name["WorkerService"]
MASTER = master_service_pb2.DESCRIPTOR.services_by_name["MasterService"]
NAME = grpc_service.wire_names(WORKER)[0]
METHODS = grpc_service.methods_of(WORKER)


def test_services_keep_tensorflow_names():
    # TF's runtime serves and calls /tensorflow.WorkerService/...; its .proto declares the
    # package tensorflow.grpc, which generated stubs use.
    assert grpc_service.wire_names(WORKER) == (
        "tensorflow.WorkerService",
        "tensorflow.grpc.WorkerService",
    )
    assert grpc_service.wire_names(MASTER)[0] == "tensorflow.MasterService"
    assert set(grpc_service.methods_of(MASTER)) >= {
        "CreateSession",
        "ExtendSession",
        "PartialRunSetup",
        "RunStep",
        "CloseSession",
        "ListDevices",
        "Reset",
    }
    assert METHODS["RecvTensor"].response is worker_pb2.RecvTensorResponse
    assert grpc_service.snake_case("CreateWorkerSession") == "create_worker_session"
    assert grpc_service.snake_case("GetStatus") == "get_status"


class _Service:
    """Answers GetStatus; CleanupAll raises whatever `error` holds; RunGraph waits for
    `release`; RecvTensor streams `tensor`."""

    def __init__(self):
        self.error = None
        self.release = threading.Event()
        self.started = threading.Event()
        self.on_end = lambda: None
        self.tensor = np.arange(3 * 2**18 + 5, dtype=np.float32)

    def get_status(self, request, context):
        response = worker_pb2.GetStatusResponse()
        response.device_attributes.add(name="/job:w/replica:0/task:0/device:CPU:0")
        return response

    def cleanup_all(self, request, context):
        raise self.error

    def run_graph(self, request, context):
        context.add_callback(self.on_end)
        self.started.set()
        self.release.wait(30)
        return worker_pb2.RunGraphResponse()

    def recv(self, request, context):
        if request.step_id < 0:
            raise errors.AbortedError(None, None, "step aborted on /job:w/replica:0/task:0")
        return tensor_stream.encode(self.tensor, False)


@pytest.fixture
def served():
    service = _Service()
    pool = futures.ThreadPoolExecutor(8)
    server = grpc_server.AioServer("127.0.0.1:0")
    port = service.port = server.port
    unary = {
        "GetStatus": service.get_status,
        "CleanupAll": service.cleanup_all,
        "RunGraph": service.run_graph,
    }
    stream = {"RecvTensor": (worker_pb2.RecvTensorRequest, service.recv)}
    server.add(
        (
            grpc_service.handler(NAME, METHODS, unary, pool=pool),
            grpc_service.handler("flowgraph.Test", {}, {}, streaming=stream),
        )
    )
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=grpc_service.CHANNEL_OPTIONS)
    client = grpc_service.Client(channel, NAME, METHODS, "/job:w/replica:0/task:0")
    yield service, client, channel
    service.release.set()
    channel.close()
    server.stop()
    pool.shutdown()


def test_call_round_trips_under_tensorflow_path(served):
    _, client, channel = served
    response = client.call("GetStatus", worker_pb2.GetStatusRequest())
    assert response.device_attributes[0].name == "/job:w/replica:0/task:0/device:CPU:0"
    raw = channel.unary_unary("/tensorflow.WorkerService/GetStatus")
    assert worker_pb2.GetStatusResponse.FromString(raw(b"", timeout=10)) == response


@pytest.mark.parametrize(
    "error",
    [
        errors.NotFoundError(None, None, "Session handle 'x' not found"),
        errors.InvalidArgumentError(None, None, "[MatMul on /job:w/task:0] inner dims differ"),
        errors.UnavailableError(None, None, "task /job:ps/replica:0/task:0 is down"),
        errors.AbortedError(None, None, "step 3 aborted"),
        errors.OutOfRangeError(None, None, "queue closed"),
    ],
)
def test_op_errors_cross_with_class_message_and_node(served, error):
    service, client, _ = served
    error.node_name = "layer/MatMul"
    service.error = error
    with pytest.raises(type(error)) as info:
        client.call("CleanupAll", worker_pb2.CleanupAllRequest())
    assert info.value.message == error.message
    assert info.value.error_code == error.error_code
    assert info.value.node_name == "layer/MatMul"


def test_bugs_and_bad_requests_get_statuses_and_the_server_keeps_serving(served):
    service, client, channel = served
    service.error = KeyError("graph handle 'g9'")
    with pytest.raises(errors.InternalError, match="CleanupAll failed: KeyError: .*g9"):
        client.call("CleanupAll", worker_pb2.CleanupAllRequest())
    garbage = channel.unary_unary("/tensorflow.WorkerService/CleanupAll")
    with pytest.raises(grpc.RpcError) as info:
        garbage(b"\xff\xff\xff", timeout=10)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "malformed CleanupAllRequest" in info.value.details()
    with pytest.raises(errors.UnimplementedError):
        client.call("DeregisterGraph", worker_pb2.DeregisterGraphRequest())  # not served
    assert client.call("GetStatus", worker_pb2.GetStatusRequest()).device_attributes


def test_deadline_and_cancellation_name_the_peer(served):
    _, client, _ = served
    with pytest.raises(errors.DeadlineExceededError, match="RunGraph to /job:w/.* deadline"):
        client.call("RunGraph", worker_pb2.RunGraphRequest(), timeout=0.2)
    future = client.call_future("RunGraph", worker_pb2.RunGraphRequest(), timeout=30)
    future.cancel()
    with pytest.raises(errors.CancelledError, match="RunGraph to /job:w/.* cancelled"):
        client.result("RunGraph", future)


def test_unreachable_peer_is_unavailable_naming_it():
    port = grpc_service_free_port()
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        client = grpc_service.Client(channel, NAME, METHODS, "/job:ps/replica:0/task:0")
        with pytest.raises(errors.UnavailableError, match="GetStatus to /job:ps/replica:0/task:0"):
            client.call("GetStatus", worker_pb2.GetStatusRequest(), timeout=20)


def grpc_service_free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _streamed(client: grpc_service.StreamClient, request) -> list[bytes]:
    """The messages of the test stream, read on the I/O loop as RemoteWorker reads them."""

    async def read():
        path = "/flowgraph.Test/RecvTensor"
        call, message = await client.start(path, request, 30)
        messages = []
        while message is not None:
            messages.append(message)
            message = await client.read(call, path)
        return messages

    return io_loop.run(read())


def test_stream_reassembles_and_errors_cross(served):
    service, client, _ = served
    streams = grpc_service.StreamClient(f"127.0.0.1:{service.port}", client.peer)
    request = worker_pb2.RecvTensorRequest(step_id=1, rendezvous_key="k")
    array, _ = tensor_stream.decode(_streamed(streams, request))
    np.testing.assert_array_equal(array, service.tensor)
    request.step_id = -1
    with pytest.raises(errors.AbortedError, match="step aborted on /job:w"):
        _streamed(streams, request)
    streams.close()


def test_blocking_handlers_see_the_end_of_their_call(served):
    """A blocking handler's add_callback runs when its caller cancels the call (RunGraph
    cancels its step that way), not only when it returns."""
    service, client, _ = served
    ended = threading.Event()
    service.on_end = ended.set
    future = client.call_future("RunGraph", worker_pb2.RunGraphRequest(), timeout=30)
    assert service.started.wait(30)
    future.cancel()
    assert ended.wait(30)


def test_status_codes_are_tensorflow_codes():
    for code in range(1, 17):
        assert rpc_errors.status_code(code).value[0] == code


class _RpcError(grpc.RpcError):
    def __init__(self, code, details, metadata=()):
        self._code, self._details, self._metadata = code, details, metadata

    def code(self):
        return self._code

    def details(self):
        return self._details

    def trailing_metadata(self):
        return self._metadata


def test_a_connection_that_broke_mid_call_is_unavailable():
    """gRPC words a peer that died mid-call either way; both are UnavailableError (as in
    TF's FromGrpcStatus), and a server's own UNKNOWN status stays UnknownError."""
    task = "/job:worker/replica:0/task:0"
    for details in ("Stream removed", "Socket closed"):
        code = (
            grpc.StatusCode.UNKNOWN if details == "Stream removed" else grpc.StatusCode.UNAVAILABLE
        )
        error = rpc_errors.from_rpc_error(_RpcError(code, details), "RunStep", task)
        assert isinstance(error, errors.UnavailableError), error
        assert task in error.message and details in error.message
    server = ((rpc_errors.ORIGIN_KEY, "server"),)
    error = rpc_errors.from_rpc_error(
        _RpcError(grpc.StatusCode.UNKNOWN, "Stream removed", server), "RunStep", task
    )
    assert type(error) is errors.UnknownError
