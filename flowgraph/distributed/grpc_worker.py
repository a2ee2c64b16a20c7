"""The WorkerService over gRPC (whitepaper §3.3): a servicer that forwards each RPC to a
`Worker`, a stub (`RemoteWorker`) with the Worker's methods for the master and peer workers,
and the worker cache that hands out stubs by task name (TF's grpc_worker_service /
grpc_remote_worker / grpc_worker_cache).

RecvTensor is served twice: TF's unary `/tensorflow.WorkerService/RecvTensor` for interop (and
for small tensors between flowgraph peers),
and `/flowgraph.WorkerStream/RecvTensor`, the same request answered as a stream of ~1 MiB chunks
(tensor_stream.py), which flowgraph peers use; on that stream a large tensor's bytes go by a
plain socket instead, when the receiver offers it (raw_transport.py).

As in TF, RecvTensor is asynchronous on both sides: a handler awaits the rendezvous on the I/O
loop (io_loop.py), and a receive in flight is a gRPC callback, a grpc.aio stream or a socket
the loop watches, so no thread waits for a tensor however many receives a step has pending.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import ThreadPoolExecutor

import grpc

from flowgraph.core import errors
from flowgraph.core.protos import ClusterDef, worker_pb2, worker_service_pb2
from flowgraph.distributed import (
    grpc_service,
    health,
    io_loop,
    raw_calls,
    raw_receiver,
    raw_transport,
    tensor_stream,
)
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
RECV_THREADS = 32  # socket transfers a task reads at once


# -- server side -----------------------------------------------------------------------------
def handlers(worker, pool, raw_sender=None) -> list[grpc.GenericRpcHandler]:
    """The grpcio handlers serving `worker` (a Worker) as WorkerService and WorkerStream, the
    blocking methods on `pool`'s threads; large tensors go by `raw_sender` (a RawSender) to
    receivers that offer it. RecvTensor waits on the I/O loop, holding no thread. So does
    GetStatus, which never blocks: a health check's answer waits for no pool thread (a thread
    hand-off less on a loaded machine, where live tasks missed the check's deadline)."""
    unary = {}
    for name in METHODS:
        method = getattr(worker, grpc_service.snake_case(name), None)
        if method is not None and name not in ("RecvTensor", "GetStatus"):
            unary[name] = _forward(method, getattr(m, f"{name}Request"))
    unary["RunGraph"] = _run_graph(worker)

    async def get_status(request, context):
        status = worker.get_status(m.GetStatusRequest()).to_proto()
        if raw_sender is not None:
            status.raw_port = raw_sender.port  # flowgraph peers run graphs here by socket
        return status

    async def recv_unary(request, context):
        response = await recv(worker, request)
        if tensor_stream.body_bytes(response.tensor) <= UNARY_RECV_BYTES:
            return response.to_proto()
        # (a large one, as a TensorFlow peer asks for it: serialized off the loop)
        return await asyncio.get_running_loop().run_in_executor(
            pool, lambda: response.to_proto().SerializeToString()
        )

    async def recv_stream(request, context):
        response = await recv(worker, request)
        options = None
        if raw_sender is not None and raw_transport.offered(request):
            if _large(response):
                async for message in raw_sender.serve(response):
                    yield message
                return
            options = raw_transport.RawTensorTransport(port=raw_sender.port)  # for next time
        for message in tensor_stream.encode(
            response.tensor, response.is_dead, response.send_start_micros, options
        ):
            yield message

    return [
        *(
            grpc_service.handler(
                name,
                METHODS,
                unary,
                pool=pool,
                async_unary={"RecvTensor": recv_unary, "GetStatus": get_status},
            )
            for name in SERVICE_NAMES
        ),
        grpc_service.handler(
            STREAM_SERVICE,
            {},
            {},
            streaming={"RecvTensor": (worker_pb2.RecvTensorRequest, recv_stream)},
        ),
    ]


async def recv(worker, request) -> m.RecvTensorResponse:
    """`worker`'s answer to a RecvTensorRequest proto, once the step has made the tensor: a
    future of the I/O loop that the step's rendezvous resolves. A call that ends meanwhile
    (cancelled, past its deadline) cancels the future; its step's cleanup drops the wait."""
    future = asyncio.get_running_loop().create_future()
    recv_async(worker, request, io_loop.resolver(future))
    return await future


def recv_async(worker, request, done) -> None:
    """`done(error, m.RecvTensorResponse)` once `worker` has the tensor a RecvTensorRequest
    proto asks for (at once for a malformed request)."""
    try:
        req = grpc_service.from_wire(m.RecvTensorRequest, request)
    except errors.OpError as e:
        done(e, None)
        return
    worker.recv_tensor_async(req, done)


def _large(response: m.RecvTensorResponse) -> bool:
    return tensor_stream.body_bytes(response.tensor) >= raw_transport.MIN_BYTES


def _forward(method, request_class):
    def impl(request, context):
        return method(grpc_service.from_wire(request_class, request)).to_proto()

    return impl


def run_graph_call(worker):
    """RunGraph on bytes, as the raw transport's listener serves it (raw_calls.py)."""
    return grpc_service.bytes_call(
        f"{SERVICE_NAME}/RunGraph", worker_pb2.RunGraphRequest, _run_graph(worker)
    )


def _run_graph(worker):
    """RunGraph, cancelled when its caller cancels the RPC or goes away while it runs. Not
    once it has returned: the call's end comes after that too, and a partial run's step
    outlives its first call (cancelling it then failed every partial run across tasks)."""

    def impl(request, context):
        call_opts = CallOptions()
        running = [True]

        def cancel() -> None:
            if running[0]:
                error = errors.CancelledError(None, None, "RunGraph was cancelled by its caller")
                call_opts.start_cancel(error)

        context.add_callback(cancel)
        try:
            response = worker.run_graph(
                grpc_service.from_wire(m.RunGraphRequest, request), call_opts
            )
        finally:
            running[0] = False
        return response.to_proto()

    return impl


# -- client side -----------------------------------------------------------------------------
class RemoteWorker:
    """A peer's Worker over gRPC: the WorkerInterface, each call with its deadline."""

    def __init__(self, task: str, address: str, pool: ThreadPoolExecutor):
        self.task = task
        self._address = address
        self._client = self._connect()
        self._streams = grpc_service.StreamClient(address, task)
        host = address.rpartition(":")[0].strip("[]")
        self._raw = raw_receiver.RawReceiver(host, task, pool)  # pool: its transfers
        self._raw_port: int | None = None  # the peer's socket transport, once it named it
        self._calls = raw_calls.InFlight()  # RunGraphs waiting on the peer's socket
        self._sizes: dict[str, int] = {}  # edge -> bytes it carried last (dict ops are atomic)

    def _connect(self) -> grpc_service.Client:
        channel = grpc.insecure_channel(self._address, options=grpc_service.CHANNEL_OPTIONS)
        return grpc_service.Client(channel, SERVICE_NAME, METHODS, self.task)

    def reconnect(self) -> None:
        """Calls from now on go over a new channel; the old one closes, which ends every call
        still waiting on it (on a hung peer, which neither answers nor closes its sockets), as
        do the RunGraphs waiting on its socket."""
        self._calls.abort(
            errors.UnavailableError(None, None, f"RunGraph to {self.task} failed: it hung")
        )
        old, self._client = self._client, self._connect()
        old.close()
        old_streams, self._streams = (
            self._streams,
            grpc_service.StreamClient(self._address, self.task),
        )
        old_streams.close()

    def close(self) -> None:
        self._calls.abort(errors.CancelledError(None, None, "The worker cache was closed"))
        self._client.close()
        self._streams.close()
        self._raw.close()

    def _call(self, name: str, req, timeout: float = grpc_service.CONTROL_TIMEOUT_S):
        response = self._client.call(name, req.to_proto(), timeout)
        return getattr(m, f"{name}Response").from_proto(response)

    def get_status(self, req: m.GetStatusRequest | None = None) -> m.GetStatusResponse:
        status = self._client.call("GetStatus", worker_pb2.GetStatusRequest())
        return self._status(status)

    def start_get_status(self, timeout: float):
        """Starts GetStatus with deadline `timeout` and no retry (a health check: a task that
        cannot be reached now is unreachable); returns the function that waits for it."""
        future = self._client.call_future("GetStatus", worker_pb2.GetStatusRequest(), timeout)
        return lambda: self._status(self._client.result("GetStatus", future))

    def _status(self, status: worker_pb2.GetStatusResponse) -> m.GetStatusResponse:
        """The answer of GetStatus, whose raw_port (a flowgraph peer's socket listener; that
        of the process answering, so a restarted peer's new one) calls go to from now on."""
        if status.raw_port:
            self._raw_port = status.raw_port
        return m.GetStatusResponse.from_proto(status)

    def _alive(self) -> bool:
        """Whether the peer answers GetStatus in raw_calls.KEEPALIVE_TIMEOUT_S (a RunGraph
        waiting on its socket asks when the peer has been silent for a while). gRPC reports
        a stopped task as either: DeadlineExceeded over a connection it had, Unavailable over
        a new one (its handshake is never answered)."""
        try:
            self.start_get_status(raw_calls.KEEPALIVE_TIMEOUT_S)()
        except (errors.DeadlineExceededError, errors.UnavailableError):
            return False
        except errors.OpError:
            pass  # it answered, with a failure
        return True

    def create_worker_session(self, req):
        return self._call("CreateWorkerSession", req)

    def delete_worker_session(self, req):
        return self._send("DeleteWorkerSession", req)

    def register_graph(self, req, timeout: float | None = None):
        """`timeout`: the deadline of the step that registers it (else a control RPC's)."""
        return self._call("RegisterGraph", req, timeout or grpc_service.CONTROL_TIMEOUT_S)

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
        future costs a thread start per call, ~0.3 ms of a 2 ms step), by socket to a
        flowgraph peer (raw_calls.py; by gRPC when that fails to connect), which waits
        `call_opts.timeout_ms` (none: STEP_TIMEOUT_S). Cancelling `call_opts` sends the peer
        CleanupGraph for the step (`_cancel_step`), which cancels it there and so ends this
        call, which then raises the cancellation's error. A call the peer never saw (it was
        restarting) is sent again once it is reachable."""
        timeout_ms = call_opts.timeout_ms if call_opts is not None else 0
        timeout = timeout_ms / 1000 if timeout_ms else grpc_service.STEP_TIMEOUT_S
        if call_opts is None:
            return self._run_graph(req.to_proto(), timeout)
        in_flight = [True]
        call_opts.set_cancel_callback(lambda error: self._cancel_step(req.step_id, in_flight))
        try:
            if call_opts.error is not None:
                raise call_opts.error  # cancelled before it was sent (the peer was told)
            return self._run_graph(req.to_proto(), timeout, in_flight)
        except errors.OpError:
            if call_opts.error is not None:  # how the call ended is the cancellation's doing
                raise call_opts.error from None
            raise
        finally:
            in_flight[0] = False
            call_opts.clear_cancel_callback()

    def _run_graph(self, request: worker_pb2.RunGraphRequest, timeout: float, key=None):
        """By socket if the peer's listener is known (`key`: what `_calls.abort` ends it
        by), else, or if that refuses, by gRPC."""
        port = self._raw_port
        if port is not None:
            data = request.SerializeToString()
            response = raw_calls.call(
                self._raw, self._calls, port, self.task, data, timeout, self._alive, key
            )
            if response is not None:
                return m.RunGraphResponse.from_proto(
                    worker_pb2.RunGraphResponse.FromString(response)
                )
            if self._raw_port == port:
                self._raw_port = None  # gone or elsewhere: its GetStatus names the new one
        return m.RunGraphResponse.from_proto(self._client.call("RunGraph", request, timeout))

    def _cancel_step(self, step_id: int, in_flight: list) -> None:
        """Cancels step `step_id` on the peer (CleanupGraph), which ends its RunGraph. A peer
        that does not answer within a health check's deadline is hung (stopped, cut off: its
        sockets stay open): the calls waiting on it end (`reconnect`) if that RunGraph still
        waits, so a cancelled step never waits for a hung task. A RunGraph on a socket to a
        peer that could not be told at all ends too (gRPC's call would fail by itself, but a
        stopped task's kernel keeps the socket open)."""
        request = m.CleanupGraphRequest(step_id=step_id).to_proto()
        future = self._client.call_future("CleanupGraph", request, health.MIN_DEADLINE_S)

        def answered(future: grpc.Future) -> None:
            error = None if future.cancelled() else future.exception()
            if error is None or not in_flight[0]:
                return
            if getattr(error, "code", lambda: None)() == grpc.StatusCode.DEADLINE_EXCEEDED:
                logger.info("%s did not answer CleanupGraph: ending its calls", self.task)
                # (not in gRPC's callback thread: closing a channel there could deadlock)
                threading.Thread(target=self.reconnect, name="reconnect", daemon=True).start()
            else:
                untold = f"RunGraph to {self.task} failed: CleanupGraph could not reach it"
                self._calls.abort(errors.UnavailableError(None, None, untold), in_flight)

        future.add_done_callback(answered)

    def recv_tensor(
        self, req: m.RecvTensorRequest, call_opts: CallOptions | None = None, raw: bool = True
    ) -> m.RecvTensorResponse:
        """The blocking form of `recv_tensor_async` (for tools and tests), always streamed:
        with `raw` (and the peer taking the offer) its bytes come by socket."""
        got: list = []
        ready = threading.Event()
        self._receive(
            req, lambda error, resp: (got.append((error, resp)), ready.set()), call_opts, raw
        )
        ready.wait()
        error, response = got[0]
        if error is not None:
            raise error
        return response

    def recv_tensor_async(
        self, req: m.RecvTensorRequest, done, call_opts: CallOptions | None = None
    ) -> None:
        """`done(error, response)` once the peer's step has made the tensor; no thread waits
        for it. From a peer whose socket transport is known, every tensor comes that way
        (raw_transport.py). Otherwise a tensor that was small the last time this edge carried
        it comes by TF's unary RecvTensor (a stream costs ~0.5 ms more per call); one seen
        large, or never seen, by the chunked stream, which offers the socket transport.
        Cancelling `call_opts` (the receiving step ended) ends the call."""
        size = self._sizes.get(_edge(req.rendezvous_key))
        if self._raw_port is None and size is not None and size <= UNARY_RECV_BYTES:
            future = self._client.call_future(
                "RecvTensor", req.to_proto(), grpc_service.STEP_TIMEOUT_S
            )
            if call_opts is not None:
                call_opts.set_cancel_callback(lambda error: future.cancel())
            future.add_done_callback(lambda f: self._unary_done(req, f, done))
            return
        self._receive(req, done, call_opts, raw=True)

    def _receive(self, req, done, call_opts, raw: bool) -> None:
        """By socket if `raw` and the peer's port is known (by gRPC if that port is gone),
        else by the stream; `done` gets the RecvTensorResponse."""

        def finish(error, got) -> None:
            if error is not None:
                done(error, None)
                return
            array, header = got
            self._sizes[_edge(req.rendezvous_key)] = array.nbytes if array is not None else 0
            done(None, m.RecvTensorResponse(array, header.is_dead, header.send_start_micros))

        def by_socket(error, got) -> None:
            if error is None and got is None:  # gone or elsewhere: gRPC learns the new port
                self._raw_port = None
                io_loop.spawn(self._by_stream(req, call_opts, raw, finish))
            else:
                finish(error, got)

        port = self._raw_port
        if raw and port is not None:
            self._raw.recv_async(port, req.to_proto(), call_opts, by_socket)
        else:
            io_loop.spawn(self._by_stream(req, call_opts, raw, finish))

    async def _by_stream(self, req, call_opts, raw: bool, done) -> None:
        try:
            got = await self._stream(req, call_opts, raw)
        except Exception as e:  # noqa: BLE001  (done reports every failure)
            done(e, None)
        else:
            done(None, got)

    async def _stream(self, req, call_opts, raw: bool):
        """(array or None, header) of the streamed RecvTensor, on the I/O loop; with `raw`, it
        offers the socket transport, learns the peer's port from the answer, and if the
        peer sends the bytes that way, receives them on a transfer thread."""
        request = req.to_proto()
        if raw:
            raw_transport.offer(request)
        call, first = await self._streams.start(
            STREAM_RECV_PATH, request, grpc_service.STEP_TIMEOUT_S, call_opts
        )
        try:
            header = tensor_stream.parse_header(first)
            array = tensor_stream.allocate(header)
            if array is None:
                return tensor_stream.carried(header), header
            options = raw_transport.accepted(header)
            if options is not None:
                self._raw_port = options.port
            if options is not None and options.token:
                received = asyncio.get_running_loop().create_future()
                what = req.rendezvous_key
                resolve = io_loop.resolver(received)
                self._raw.receive_async(options, array, call_opts, what, resolve)
                await received
                return array, header
            chunks = tensor_stream.Chunks(array)
            while (
                chunk := await self._streams.read(call, STREAM_RECV_PATH, call_opts)
            ) is not None:
                chunks.add(chunk)
            chunks.finish()
            return array, header
        finally:
            call.cancel()  # (nothing to cancel once the call has ended)
            if call_opts is not None:
                call_opts.clear_cancel_callback()

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
        # reads the bytes of socket transfers, each only while they flow (threads start when
        # needed); receives waiting for their tensor wait on the I/O loop
        self._pool = ThreadPoolExecutor(RECV_THREADS, thread_name_prefix="recv-tensor")
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
    GetStatus; raises DeadlineExceededError after `timeout` seconds. The call goes over a
    connection of its own: gRPC shares connections between channels of the same address and
    options, and one to a process just killed (a task being restarted) can still look alive to
    this process for a moment under load, failing the call ("Stream removed") instead of
    waiting for the new process."""
    options = (*grpc_service.CHANNEL_OPTIONS, ("grpc.use_local_subchannel_pool", 1))
    with grpc.insecure_channel(address, options=options) as channel:
        client = grpc_service.Client(channel, SERVICE_NAME, METHODS, address)
        response = client.call(
            "GetStatus", worker_pb2.GetStatusRequest(), timeout, wait_for_ready=True
        )
    return m.GetStatusResponse.from_proto(response)
