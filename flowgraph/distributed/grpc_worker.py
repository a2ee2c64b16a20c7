"""The WorkerService over gRPC (whitepaper §3.3): a servicer that forwards each RPC to a
`Worker`, a stub (`RemoteWorker`) with the Worker's methods for the master and peer workers,
and the worker cache that hands out stubs by task name (TF's grpc_worker_service /
grpc_remote_worker / grpc_worker_cache).

RecvTensor is served twice: TF's unary `/tensorflow.WorkerService/RecvTensor` for interop (and
for small tensors between flowgraph peers),
and `/flowgraph.WorkerStream/RecvTensor`, the same request answered as a stream of ~1 MiB chunks
(tensor_stream.py), which flowgraph peers use; on that stream a large tensor's bytes go by a
plain socket instead, when the receiver offers it (raw_transport.py).
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor

import grpc

from flowgraph.core import errors
from flowgraph.core.protos import ClusterDef, worker_pb2, worker_service_pb2
from flowgraph.distributed import grpc_service, raw_transport, tensor_stream
from flowgraph.distributed import messages as m
from flowgraph.distributed.worker_cache import CallOptions

SERVICE = worker_service_pb2.DESCRIPTOR.services_by_name["WorkerService"]
SERVICE_NAMES = grpc_service.wire_names(SERVICE)
SERVICE_NAME = SERVICE_NAMES[0]  # tensorflow.WorkerService: what TF's runtime calls
METHODS = grpc_service.methods_of(SERVICE)
logger = logging.getLogger(__name__)
_CLEANUP_TIMEOUT_S = 10.0
STREAM_SERVICE = "flowgraph.WorkerStream"  # flowgraph's own: not a TF service
STREAM_RECV_PATH = f"/{STREAM_SERVICE}/RecvTensor"
UNARY_RECV_BYTES = 64 << 10  # up to this size a tensor takes the unary RecvTensor


# -- server side -----------------------------------------------------------------------------
def handlers(worker, raw_sender=None) -> list[grpc.GenericRpcHandler]:
    """The grpcio handlers serving `worker` (a Worker) as WorkerService and WorkerStream;
    large tensors go by `raw_sender` (a RawSender) to receivers that offer it."""
    unary = {}
    for name in METHODS:
        method = getattr(worker, grpc_service.snake_case(name), None)
        if method is not None:
            unary[name] = _forward(method, getattr(m, f"{name}Request"))
    unary["RunGraph"] = _run_graph(worker)

    def recv_stream(request, context):
        response = recv_tensor(worker, request)
        options = None
        if raw_sender is not None and raw_transport.offered(request):
            if _large(response):
                return raw_sender.serve(response, context)
            options = raw_transport.RawTensorTransport(port=raw_sender.port)  # for next time
        return tensor_stream.encode(
            response.tensor, response.is_dead, response.send_start_micros, options
        )

    return [
        *(grpc_service.handler(name, METHODS, unary) for name in SERVICE_NAMES),
        grpc_service.handler(
            STREAM_SERVICE,
            {},
            {},
            streaming={"RecvTensor": (worker_pb2.RecvTensorRequest, recv_stream)},
        ),
    ]


def recv_tensor(worker, request) -> m.RecvTensorResponse:
    """`worker`'s answer to a RecvTensorRequest proto, once the step has made the tensor."""
    return worker.recv_tensor(grpc_service.from_wire(m.RecvTensorRequest, request))


def _large(response: m.RecvTensorResponse) -> bool:
    return tensor_stream.body_bytes(response.tensor) >= raw_transport.MIN_BYTES


def _forward(method, request_class):
    def impl(request, context):
        return method(grpc_service.from_wire(request_class, request)).to_proto()

    return impl


def _run_graph(worker):
    """RunGraph, cancelled when its caller cancels the RPC or goes away."""

    def impl(request, context):
        call_opts = CallOptions()
        context.add_callback(
            lambda: call_opts.start_cancel(
                errors.CancelledError(None, None, "RunGraph was cancelled by its caller")
            )
        )
        return worker.run_graph(
            grpc_service.from_wire(m.RunGraphRequest, request), call_opts
        ).to_proto()

    return impl


# -- client side -----------------------------------------------------------------------------
class RemoteWorker:
    """A peer's Worker over gRPC: the WorkerInterface, each call with its deadline."""

    def __init__(self, task: str, address: str, pool: ThreadPoolExecutor):
        self.task = task
        self._address = address
        self._client = self._connect()
        self._pool = pool  # runs the streams of recv_tensor_async
        self._raw = raw_transport.RawReceiver(address.rpartition(":")[0].strip("[]"), task)
        self._raw_port: int | None = None  # the peer's socket transport, once it named it
        self._sizes: dict[str, int] = {}  # edge -> bytes it carried last (dict ops are atomic)

    def _connect(self) -> grpc_service.Client:
        channel = grpc.insecure_channel(self._address, options=grpc_service.CHANNEL_OPTIONS)
        return grpc_service.Client(channel, SERVICE_NAME, METHODS, self.task)

    def reconnect(self) -> None:
        """Calls from now on go over a new channel; the old one closes, which ends every call
        still waiting on it (on a hung peer, which neither answers nor closes its sockets)."""
        old, self._client = self._client, self._connect()
        old.close()

    def close(self) -> None:
        self._client.close()
        self._raw.close()

    def _call(self, name: str, req, timeout: float = grpc_service.CONTROL_TIMEOUT_S):
        response = self._client.call(name, req.to_proto(), timeout)
        return getattr(m, f"{name}Response").from_proto(response)

    def get_status(self, req: m.GetStatusRequest | None = None) -> m.GetStatusResponse:
        return self._call("GetStatus", req or m.GetStatusRequest())

    def start_get_status(self, timeout: float):
        """Starts GetStatus with deadline `timeout` and no retry (a health check: a task that
        cannot be reached now is unreachable); returns the function that waits for it."""
        future = self._client.call_future("GetStatus", worker_pb2.GetStatusRequest(), timeout)
        return lambda: m.GetStatusResponse.from_proto(self._client.result("GetStatus", future))

    def create_worker_session(self, req):
        return self._call("CreateWorkerSession", req)

    def delete_worker_session(self, req):
        return self._send("DeleteWorkerSession", req)

    def register_graph(self, req):
        return self._call("RegisterGraph", req)

    def deregister_graph(self, req):
        return self._send("DeregisterGraph", req)

    def cleanup_graph(self, req):
        return self._send("CleanupGraph", req)

    def _send(self, name: str, req):
        """Sent, not waited for (TF's master cleans up asynchronously too): a step or session
        that ended because this peer died must not wait for, or report, the peer's cleanup."""
        future = self._client.call_future(name, req.to_proto(), _CLEANUP_TIMEOUT_S)
        future.add_done_callback(lambda f: self._log_failure(name, f))
        return getattr(m, f"{name}Response")()

    def _log_failure(self, name: str, future: grpc.Future) -> None:
        if not future.cancelled() and future.exception() is not None:
            logger.debug("%s to %s failed: %s", name, self.task, future.exception())

    def cleanup_all(self, req):
        return self._call("CleanupAll", req)

    def run_graph(self, req: m.RunGraphRequest, call_opts: CallOptions | None = None):
        """Runs the step's graph on the peer: a blocking call in the caller's thread (a gRPC
        future costs a thread start per call, ~0.3 ms of a 2 ms step). Cancelling `call_opts`
        sends the peer CleanupGraph for the step, which cancels it there and so ends this
        call with its CancelledError (a peer that is gone ends it with UnavailableError). A
        call the peer never saw (it was restarting) is sent again once it is reachable."""
        timeout_ms = call_opts.timeout_ms if call_opts is not None else 0
        timeout = timeout_ms / 1000 if timeout_ms else grpc_service.STEP_TIMEOUT_S
        if call_opts is not None:
            cleanup = m.CleanupGraphRequest(step_id=req.step_id)
            call_opts.set_cancel_callback(lambda error: self.cleanup_graph(cleanup))
            if call_opts.error is not None:
                raise call_opts.error  # cancelled before it was sent (the peer was told)
        try:
            response = self._client.call("RunGraph", req.to_proto(), timeout)
            return m.RunGraphResponse.from_proto(response)
        finally:
            if call_opts is not None:
                call_opts.clear_cancel_callback()

    def recv_tensor(
        self, req: m.RecvTensorRequest, call_opts: CallOptions | None = None, raw: bool = True
    ) -> m.RecvTensorResponse:
        """The tensor streamed from the peer (it waits until the step made it): in chunks,
        or, if `raw` and the peer takes the offer, over a socket (raw_transport.py).
        Cancelling `call_opts` ends the call at once."""
        request = req.to_proto()
        port = self._raw_port
        got = self._raw.recv(port, request, call_opts) if raw and port is not None else None
        if got is None:
            if port is not None:
                self._raw_port = None  # gone or elsewhere: gRPC finds out, and the new port
            got = self._recv_by_grpc(req, request, call_opts, raw)
        array, header = got
        self._sizes[_edge(req.rendezvous_key)] = array.nbytes if array is not None else 0
        return m.RecvTensorResponse(array, header.is_dead, header.send_start_micros)

    def _recv_by_grpc(self, req, request, call_opts, raw: bool):
        """The streamed RecvTensor; with `raw`, it offers the socket transport and learns the
        peer's port from the answer."""
        if raw:
            raw_transport.offer(request)

        def fill_raw(header, array) -> bool:
            options = raw_transport.accepted(header)
            if options is None:
                return False
            self._raw_port = options.port
            if options.token:
                self._raw.receive(options, array, call_opts, req.rendezvous_key)
            return bool(options.token)

        messages = self._client.stream(
            STREAM_RECV_PATH, request, grpc_service.STEP_TIMEOUT_S, call_opts
        )
        try:
            return tensor_stream.decode(messages, fill_raw)
        finally:
            messages.close()  # cancels the call if a socket carried the bytes
            if call_opts is not None:
                call_opts.clear_cancel_callback()

    def recv_tensor_async(
        self, req: m.RecvTensorRequest, done, call_opts: CallOptions | None = None
    ) -> None:
        """From a peer whose socket transport is known, every tensor comes that way (on a pool
        thread). Otherwise a tensor that was small the last time this edge carried it comes
        by TF's unary RecvTensor, answered on gRPC's own thread (a stream costs ~0.5 ms more
        per call); one seen large, or never seen, by the chunked stream (or a socket) on a
        pool thread. Cancelling `call_opts` (the receiving step ended) ends the call."""
        size = self._sizes.get(_edge(req.rendezvous_key))
        if self._raw_port is None and size is not None and size <= UNARY_RECV_BYTES:
            future = self._client.call_future(
                "RecvTensor", req.to_proto(), grpc_service.STEP_TIMEOUT_S
            )
            if call_opts is not None:
                call_opts.set_cancel_callback(lambda error: future.cancel())
            future.add_done_callback(lambda f: self._unary_done(req, f, done))
            return

        def receive():
            try:
                response = self.recv_tensor(req, call_opts)
            except Exception as e:  # noqa: BLE001  (done reports every failure)
                done(e, None)
            else:
                done(None, response)

        self._pool.submit(receive)

    def _unary_done(self, req: m.RecvTensorRequest, future: grpc.Future, done) -> None:
        try:
            response = m.RecvTensorResponse.from_proto(self._client.result("RecvTensor", future))
        except Exception as e:  # noqa: BLE001  (done reports every failure)
            done(e, None)
            return
        nbytes = response.tensor.nbytes if response.tensor is not None else 0
        self._sizes[_edge(req.rendezvous_key)] = nbytes
        done(None, response)


def _edge(rendezvous_key: str) -> str:
    """The key without its frame and iteration: the same edge in every step and iteration."""
    return rendezvous_key.rpartition(";")[0]


def task_name(job: str, task: int) -> str:
    return f"/job:{job}/replica:0/task:{task}"


class GrpcWorkerCache:
    """Task name -> worker for every task of a cluster: this process's own Worker for the
    local task (no RPC to itself, as in TF), a RemoteWorker (one channel, made on first use)
    for the others. The local task is listed first: the master places there first."""

    def __init__(self, cluster: ClusterDef, local_task: str | None = None, local_worker=None):
        self._addresses = {
            task_name(job.name, i): job.tasks[i] for job in cluster.job for i in sorted(job.tasks)
        }
        self._local_task = local_task
        self._local_worker = local_worker
        self._lock = threading.Lock()  # guards _stubs
        self._stubs: dict[str, RemoteWorker] = {}
        # each RecvTensor waiting on a socket holds one (threads start only when needed)
        self._pool = ThreadPoolExecutor(256, thread_name_prefix="recv-tensor")
        if local_worker is not None:
            local_worker.worker_cache = self

    def list_workers(self) -> list[str]:
        tasks = sorted(self._addresses, key=_task_order)
        if self._local_task in self._addresses:
            tasks.remove(self._local_task)
            tasks.insert(0, self._local_task)
        return tasks

    def address(self, task: str) -> str:
        return self._addresses[task]

    def get_worker(self, task: str):
        if task == self._local_task and self._local_worker is not None:
            return self._local_worker
        with self._lock:
            stub = self._stubs.get(task)
            if stub is None:
                if task not in self._addresses:
                    raise errors.UnavailableError(
                        None,
                        None,
                        f"No worker for task {task}; this cluster has {', '.join(self._addresses)}",
                    )
                stub = RemoteWorker(task, self._addresses[task], self._pool)
                self._stubs[task] = stub
        return stub

    def reconnect(self, task: str) -> None:
        """Ends the calls waiting on `task` (a health check found it hung): see
        RemoteWorker.reconnect."""
        with self._lock:
            stub = self._stubs.get(task)
        if stub is not None:
            stub.reconnect()

    def close(self) -> None:
        with self._lock:
            stubs, self._stubs = list(self._stubs.values()), {}
        for stub in stubs:
            stub.close()
        self._pool.shutdown(wait=False, cancel_futures=True)


def _task_order(task: str):
    job, _, index = task.rpartition("/task:")
    return job, int(index)


def wait_until_serving(address: str, timeout: float) -> m.GetStatusResponse:
    """Waits (no polling: the call waits for the server) until the task at `address` answers
    GetStatus; raises DeadlineExceededError after `timeout` seconds."""
    with grpc.insecure_channel(address, options=grpc_service.CHANNEL_OPTIONS) as channel:
        client = grpc_service.Client(channel, SERVICE_NAME, METHODS, address)
        response = client.call(
            "GetStatus", worker_pb2.GetStatusRequest(), timeout, wait_for_ready=True
        )
    return m.GetStatusResponse.from_proto(response)
