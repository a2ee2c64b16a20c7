"""Generic gRPC adapters built from a service descriptor: a server-side handler that parses each
request, calls a plain Python function and serializes its answer, and a client that does the
reverse with a deadline on every call (STYLE.md 10: transports contain no logic).

Names stay TensorFlow's: our protos are in package `flowgraph` (so a real TensorFlow can share
the process), but the services are served under `/tensorflow.<Service>/<Method>`, the paths real
TensorFlow processes serve and call, and `/tensorflow.grpc.<Service>/<Method>`, the ones its
.proto files declare. Handlers take and return `bytes` (identity (de)serializers), so
a malformed request is answered with INVALID_ARGUMENT instead of failing inside grpcio, and any
exception becomes a status: a bad request never crashes a server.

Servers are grpc.aio servers (grpc_server.py): a handler that blocks (a RunGraph runs its step)
runs on a thread pool, one that waits (a RecvTensor waits for its tensor) is a coroutine on the
I/O loop and holds no thread. Clients call unary RPCs over synchronous channels (a blocking
call in the caller's thread is the cheapest), and server streams over grpc.aio channels
(StreamClient), whose waits hold no thread either.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from concurrent.futures import Executor
from dataclasses import dataclass

import grpc
from google.protobuf import message as pb_message
from google.protobuf import message_factory
from google.protobuf.descriptor import ServiceDescriptor

from flowgraph.core import errors
from flowgraph.distributed import io_loop, rpc_errors

logger = logging.getLogger(__name__)

# Messages of any size: a RunStep may fetch a large tensor (protobuf's own 2 GiB limit stays).
_UNLIMITED = (("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1))
# Clients ping an idle connection every 10 s and give up on a peer silent for 5 s more, so a
# task that hangs (not only one that dies, which closes its sockets) fails the calls to it.
CHANNEL_OPTIONS = (
    *_UNLIMITED,
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    # A restarted task is reachable again within a second, not after a minute of backoff.
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.min_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 500),
)
SERVER_OPTIONS = (
    *_UNLIMITED,
    ("grpc.so_reuseport", 0),  # a second server on a task's port fails instead of sharing it
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_recv_ping_interval_without_data_ms", 5_000),
    ("grpc.http2.max_ping_strikes", 0),
)
# Deadlines: control RPCs answer at once; a step may legitimately wait long (on a queue), so
# its RPCs get RunOptions.timeout_in_ms or ConfigProto.operation_timeout_in_ms when set.
CONTROL_TIMEOUT_S = 60.0
STEP_TIMEOUT_S = 24 * 3600.0
# A call that found no connection waits this long for one (a task restarting, or back and the
# channel still backing off, <= 500 ms + 20% jitter) and is retried once; a task down for
# longer fails the call with UnavailableError.
RECONNECT_TIMEOUT_S = 1.0

Message = pb_message.Message
UnaryImpl = Callable[[Message, "CallContext"], Message]
AsyncUnaryImpl = Callable[[Message, grpc.aio.ServicerContext], Awaitable[Message]]
StreamImpl = Callable[[Message, grpc.aio.ServicerContext], AsyncIterator[bytes] | Iterator[bytes]]
# Threads for blocking handlers (a RunGraph holds one while its step runs; a RecvTensor waits
# on the I/O loop and holds none), so a task needs as many as steps may run at once.
HANDLER_THREADS = 64


@dataclass(frozen=True)
class Method:
    """One RPC of a service: its name and the message classes it takes and returns."""

    name: str
    request: type[Message]
    response: type[Message]


def methods_of(service: ServiceDescriptor) -> dict[str, Method]:
    """{"RunStep": Method(...)} for every method the descriptor declares."""
    return {
        m.name: Method(
            m.name,
            message_factory.GetMessageClass(m.input_type),
            message_factory.GetMessageClass(m.output_type),
        )
        for m in service.methods
    }


def wire_names(service: ServiceDescriptor) -> tuple[str, ...]:
    """The names a service is served under: first `tensorflow.X`, the path TensorFlow's own
    runtime serves and calls (its hand-written grpc_*_service_impl.cc), then `tensorflow.grpc.X`,
    the path its master_service.proto / worker_service.proto declare (generated stubs use it).
    Our descriptors are `flowgraph.grpc.X`; names outside that package are served as they are."""
    name = service.full_name
    if not name.startswith("flowgraph.grpc."):
        return (name,)
    short = name[len("flowgraph.grpc.") :]
    return (f"tensorflow.{short}", f"tensorflow.grpc.{short}")


def snake_case(name: str) -> str:
    """ "RunStep" -> "run_step": the in-process method that implements an RPC."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


class CallContext:
    """What a blocking handler sees of its call (a grpc.aio server runs it on a pool thread):
    `add_callback(fn)` runs fn when the call ends, however it ends (answered, failed,
    cancelled by its caller, past its deadline), at once if it has ended already, as grpcio's
    synchronous ServicerContext.add_callback does. `_lock` guards `_callbacks`."""

    def __init__(self):
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] | None = []

    def add_callback(self, fn: Callable[[], None]) -> None:
        with self._lock:
            if self._callbacks is not None:
                self._callbacks.append(fn)
                return
        fn()

    def end(self) -> None:
        with self._lock:
            callbacks, self._callbacks = self._callbacks or [], None
        for fn in callbacks:
            fn()


def handler(
    service_name: str,
    methods: dict[str, Method],
    unary: dict[str, UnaryImpl],
    streaming: dict[str, tuple[type[Message], StreamImpl]] | None = None,
    pool: Executor | None = None,
    async_unary: dict[str, AsyncUnaryImpl] | None = None,
) -> grpc.GenericRpcHandler:
    """A grpc.aio handler serving, for each RPC named: `unary[name](request, CallContext) ->
    response`, a blocking function run on `pool`; `async_unary[name](request, context) ->
    response`, a coroutine run on the loop (it must not block); `streaming[name] = (request
    class, impl)`, where impl(request, context) yields (or async-yields) the serialized
    messages of a server stream on the loop. Other RPCs get UNIMPLEMENTED from grpcio."""
    table = {}
    for name, impl in unary.items():
        behavior = _unary_behavior(f"{service_name}/{name}", methods[name].request, impl, pool)
        table[name] = grpc.unary_unary_rpc_method_handler(behavior)
    for name, impl in (async_unary or {}).items():
        behavior = _async_behavior(f"{service_name}/{name}", methods[name].request, impl)
        table[name] = grpc.unary_unary_rpc_method_handler(behavior)
    for name, (request_class, impl) in (streaming or {}).items():
        table[name] = grpc.unary_stream_rpc_method_handler(
            _stream_behavior(f"{service_name}/{name}", request_class, impl)
        )
    return grpc.method_handlers_generic_handler(service_name, table)


def from_wire(message_class, proto):
    """The in-memory message (distributed/messages.py) of a parsed request. A value that
    cannot be decoded (a tensor whose bytes do not fill its shape, an unknown dtype) is the
    caller's error: INVALID_ARGUMENT, not a failure of the server."""
    try:
        return message_class.from_proto(proto)
    except (ValueError, TypeError, KeyError) as e:
        raise errors.InvalidArgumentError(
            None, None, f"malformed {proto.DESCRIPTOR.name}: {type(e).__name__}: {e}"
        ) from None


def _parse(request_class: type[Message], data: bytes, rpc: str) -> Message:
    try:
        return request_class.FromString(data)
    except pb_message.DecodeError as e:
        raise errors.InvalidArgumentError(
            None, None, f"{rpc}: malformed {request_class.DESCRIPTOR.name}: {e}"
        ) from None


async def _abort(context: grpc.aio.ServicerContext, error: Exception, rpc: str) -> None:
    """Ends the call with `error` as its status (every failure becomes a status: the server
    keeps serving); never returns."""
    if not isinstance(error, errors.OpError):
        logger.error("%s raised", rpc, exc_info=error)
    await context.abort(*rpc_errors.status(error, rpc))


def bytes_call(rpc: str, request_class: type[Message], impl: UnaryImpl):
    """`impl` on the wire's bytes: (request bytes, CallContext) -> response bytes, a
    malformed request InvalidArgumentError (for gRPC and for raw_calls.py)."""

    def call(data: bytes, call_context: CallContext) -> bytes:
        return impl(_parse(request_class, data, rpc), call_context).SerializeToString()

    return call


def _unary_behavior(rpc: str, request_class: type[Message], impl: UnaryImpl, pool):
    call = bytes_call(rpc, request_class, impl)

    async def behavior(data: bytes, context: grpc.aio.ServicerContext) -> bytes:
        call_context = CallContext()
        try:
            return await asyncio.get_running_loop().run_in_executor(pool, call, data, call_context)
        except Exception as e:  # noqa: BLE001  (every failure becomes a status)
            await _abort(context, e, rpc)
        finally:
            call_context.end()

    return behavior


def _async_behavior(rpc: str, request_class: type[Message], impl: AsyncUnaryImpl):
    async def behavior(data: bytes, context: grpc.aio.ServicerContext) -> bytes:
        try:
            response = await impl(_parse(request_class, data, rpc), context)
            return response if isinstance(response, bytes) else response.SerializeToString()
        except Exception as e:  # noqa: BLE001  (every failure becomes a status)
            await _abort(context, e, rpc)

    return behavior


def _stream_behavior(rpc: str, request_class: type[Message], impl: StreamImpl):
    async def behavior(data: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[bytes]:
        try:
            messages = impl(_parse(request_class, data, rpc), context)
            if hasattr(messages, "__aiter__"):
                async for message in messages:
                    yield message
            else:
                for message in messages:
                    yield message
        except Exception as e:  # noqa: BLE001  (every failure becomes a status)
            await _abort(context, e, rpc)

    return behavior


class Client:
    """Calls the RPCs of one service on one peer; every call has a deadline, and a failed
    call raises the OpError of its status, naming `peer` when the peer could not be reached."""

    def __init__(self, channel: grpc.Channel, service_name: str, methods: dict[str, Method], peer):
        self._channel = channel
        self._service = service_name
        self._methods = methods
        self.peer = peer
        self._unary = {
            name: channel.unary_unary(f"/{service_name}/{name}", _serialize, None)
            for name in methods
        }

    def call(
        self,
        name: str,
        request: Message,
        timeout: float = CONTROL_TIMEOUT_S,
        wait_for_ready: bool = False,
    ) -> Message:
        """Sends `request` to RPC `name`; returns its response, or raises its OpError. A call
        that never reached the peer is retried once if a connection opens within
        RECONNECT_TIMEOUT_S (the request was not delivered, so retrying is safe)."""
        call = self._unary[name]
        try:
            try:
                data = call(request, timeout=timeout, wait_for_ready=wait_for_ready)
            except grpc.RpcError as e:
                if not (_never_connected(e) and self._reconnected()):
                    raise
                data = call(request, timeout=timeout, wait_for_ready=wait_for_ready)
        except grpc.RpcError as e:
            raise self.error(name, e) from None
        return self._methods[name].response.FromString(data)

    def _reconnected(self) -> bool:
        try:
            grpc.channel_ready_future(self._channel).result(timeout=RECONNECT_TIMEOUT_S)
        except grpc.FutureTimeoutError:
            return False
        return True

    def close(self) -> None:
        """Closes the channel: calls still in flight on it end (CANCELLED)."""
        self._channel.close()

    def call_future(self, name: str, request: Message, timeout: float) -> grpc.Future:
        """Starts RPC `name`; `result(name, future)` waits for it (cancel() cancels it)."""
        return self._unary[name].future(request, timeout=timeout)

    def result(self, name: str, future: grpc.Future) -> Message:
        try:
            data = future.result()
        except grpc.FutureCancelledError:
            raise errors.CancelledError(
                None, None, f"{self._service}/{name} to {self.peer} was cancelled"
            ) from None
        except grpc.RpcError as e:
            raise self.error(name, e) from None
        return self._methods[name].response.FromString(data)

    def error(self, name: str, e: grpc.RpcError) -> errors.OpError:
        return rpc_errors.from_rpc_error(e, f"{self._service}/{name}", self.peer)


class StreamClient:
    """Server-streaming calls to one peer over a grpc.aio channel on the I/O loop, so that a
    stream waiting for its first message (a RecvTensor waiting for its tensor) holds no
    thread. Its coroutines run on the loop, which makes the channel on first use."""

    def __init__(self, address: str, peer):
        self._address = address
        self.peer = peer
        self._channel: grpc.aio.Channel | None = None  # touched on the loop only

    def _open(self) -> grpc.aio.Channel:
        if self._channel is None:
            self._channel = grpc.aio.insecure_channel(self._address, options=CHANNEL_OPTIONS)
        return self._channel

    async def start(self, path: str, request: Message, timeout: float, call_opts=None):
        """Starts the server-streaming RPC at `path` ("/Service/Method"); returns the call
        and its first message (None if the stream ended without one). Like `Client.call`, a
        stream that never reached the peer is retried once if a connection opens within
        RECONNECT_TIMEOUT_S (a peer back from a restart). Cancelling `call_opts` (a
        CallOptions) cancels the call, which then raises the cancellation's error."""
        for retry in (False, True):
            call = self._open().unary_stream(path, _serialize, None)(request, timeout=timeout)
            if call_opts is not None:
                call_opts.set_cancel_callback(lambda error, c=call: io_loop.call_soon(c.cancel))
            try:
                return call, await self.read(call, path, call_opts)
            except errors.OpError as e:
                if retry or not (getattr(e, "never_connected", False) and await self._ready()):
                    raise
        raise AssertionError("unreachable")

    async def read(self, call, path: str, call_opts=None) -> bytes | None:
        """The next message of `call` (None at its end), or its failure's OpError."""
        try:
            message = await call.read()
        except asyncio.CancelledError:
            if call_opts is not None and call_opts.error is not None:
                raise call_opts.error from None
            raise
        except grpc.RpcError as e:
            if call_opts is not None and call_opts.error is not None:
                raise call_opts.error from None
            error = rpc_errors.from_rpc_error(e, path.lstrip("/"), self.peer)
            error.never_connected = _never_connected(e)
            raise error from None
        return None if message is grpc.aio.EOF else message

    async def _ready(self) -> bool:
        try:
            await asyncio.wait_for(self._open().channel_ready(), RECONNECT_TIMEOUT_S)
        except asyncio.TimeoutError:
            return False
        return True

    def close(self) -> None:
        """Closes the channel (from any thread): calls still in flight on it end."""
        io_loop.spawn(self._close())

    async def _close(self) -> None:
        channel, self._channel = self._channel, None
        if channel is not None:
            await channel.close()


def _never_connected(e: grpc.RpcError) -> bool:
    """True for a call gRPC failed before any connection (so the peer never saw it); not for
    a status the peer answered (a master reporting that it could not reach a worker)."""
    if e.code() != grpc.StatusCode.UNAVAILABLE or "failed to connect" not in (e.details() or ""):
        return False
    return (rpc_errors.ORIGIN_KEY, "server") not in tuple(e.trailing_metadata() or ())


def _serialize(message: Message) -> bytes:
    return message.SerializeToString()
