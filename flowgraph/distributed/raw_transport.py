"""RecvTensor's bytes over a plain TCP socket between flowgraph workers (issue 12, D1).

grpcio moves a large tensor at 600-970 MB/s on loopback (every chunk is a `bytes` that grpcio
makes and copies); a socket written from the array's own buffer (sendall of a memoryview) and
read into the preallocated result (recv_into) moves ~2400 MB/s. So a tensor of at least
MIN_BYTES between two flowgraph workers takes a socket, negotiated inside RecvTensor the way
TensorFlow's RDMA transports negotiate theirs, so that a TensorFlow peer never sees it:

  1. the receiver's streamed RecvTensor (grpc_worker.STREAM_RECV_PATH, flowgraph's own RPC)
     carries `transport_options` = Any(RawTensorTransport{}): an offer;
  2. a sender with a listener (each GrpcServer has one, bound to the host of its own gRPC
     address and nothing else) answers message 0, the header (dtype, shape), with
     `transport_options` = Any(RawTensorTransport{port, token}) and sends no chunks. Its RPC
     stays open until the transfer ends: a receiver that cancels the RPC drops the transfer,
     and a transfer that no receiver starts within IDLE_TIMEOUT_S fails the RPC;
  3. the receiver connects to `port` on the sender's host (idle connections are kept per
     peer), writes b"T" and the 16-byte token, reads an 8-byte little-endian length, then
     exactly that many bytes into the array the header describes.

Once a receiver knows a peer's port (every answer to an offer names it, with an empty token
when the bytes follow in the stream), it asks for each later tensor of that peer on a socket
too, whatever its size: a frame b"R" + length + RecvTensorRequest, answered when the step has
made the tensor with the header's length and the header, then the length and bytes as above
(or a failure's code and message). A gRPC call costs ~0.5-1 ms of CPU on each side, a socket
round trip a tenth of that, and a ps serving many workers spends most of its time there. A port
that cannot be connected to (the peer restarted on another one) sends the receiver back to gRPC,
which learns the new one.

No thread waits for a tensor: the sender's handler awaits the transfer on the I/O loop
(io_loop.py), whose selector also watches every idle connection for its next frame and every
receiver's connection for its answer; a pool thread runs only while bytes flow (reading a frame,
writing or reading an answer). Senders and receivers have separate pools, so a transfer's two
ends never wait for each other's threads.

Failures are errors of the step, never of the process: a length other than the header's is
DataLossError; a connection that closes early (the peer died or gave up) is UnavailableError
naming the peer; no progress for IDLE_TIMEOUT_S is DeadlineExceededError; a token the sender
no longer knows (its RPC ended) is AbortedError. Cancelling the receive (its CallOptions, as
the receiving step's rendezvous does when the step ends) shuts its socket down at once.
"""

from __future__ import annotations

import asyncio
import secrets
import socket
import struct
import threading
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from google.protobuf.message import DecodeError

from flowgraph.core import errors
from flowgraph.core.protos import worker_pb2
from flowgraph.core.protos.worker_pb2 import RawTensorTransport, RecvTensorResponse
from flowgraph.distributed import io_loop, tensor_stream
from flowgraph.distributed.worker_cache import CallOptions

MIN_BYTES = 512 << 10  # below this, gRPC's chunks cost less than a socket round trip more
IDLE_TIMEOUT_S = 60.0
TOKEN_BYTES = 16
IDLE_KEPT = 4  # idle connections a receiver keeps per peer
_LENGTH = struct.Struct("<Q")
_UNKNOWN_TOKEN = (1 << 64) - 1  # the length a sender answers a token it does not know with
_ERROR_BIT = 1 << 63  # set in the first word of a failed RecvTensor asked on the socket


# -- negotiation -----------------------------------------------------------------------------
def offer(request) -> None:
    """Offers the raw transport in a RecvTensorRequest proto."""
    request.transport_options.Pack(RawTensorTransport())


def offered(request) -> bool:
    return request.HasField("transport_options") and request.transport_options.Is(
        RawTensorTransport.DESCRIPTOR
    )


def accepted(header) -> RawTensorTransport | None:
    """The transfer a RecvTensorResponse header names; None if its bytes follow in the stream."""
    if not header.HasField("transport_options"):
        return None
    options = RawTensorTransport()
    if not header.transport_options.Unpack(options):
        return None
    return options


# -- the sender ------------------------------------------------------------------------------
SEND_THREADS = 32  # threads writing answers at once (each only while its bytes flow)


class _Transfer:
    """One tensor's bytes waiting for their receiver; `finish(error)` (once: sent, failed or
    dropped) calls `on_done(error)`."""

    __slots__ = ("data", "on_done")

    def __init__(self, data: memoryview, on_done):
        self.data = data
        self.on_done = on_done

    def finish(self, error: errors.OpError | None) -> None:
        self.on_done(error)


class RawSender:
    """A task's listener: serves the transfers its RecvTensor handlers offered (`serve`) and
    the RecvTensors asked on its connections. `_lock` guards `_pending`, `_conns` and
    `_closed`."""

    def __init__(self, host: str, recv_tensor_async):
        # (RecvTensorRequest proto, done(error, m.RecvTensorResponse)) -> None, never blocks
        self._recv_tensor_async = recv_tensor_async
        self._listener = socket.create_server((host, 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._pending: dict[bytes, _Transfer] = {}
        self._conns: set[socket.socket] = set()
        self._closed = False
        self._pool = ThreadPoolExecutor(SEND_THREADS, thread_name_prefix="raw-send")
        threading.Thread(target=self._accept, name="raw-accept", daemon=True).start()

    async def serve(self, response) -> AsyncIterator[bytes]:
        """The streamed RecvTensor of `response` (an m.RecvTensorResponse of a raw tensor of
        at least MIN_BYTES) whose bytes go by socket: yields the header, then waits (on the
        loop) for the transfer (steps 2 and 3 of the module docstring). A call that ends
        first (its receiver cancelled it) drops the transfer."""
        header, data = tensor_stream.split(
            response.tensor, response.is_dead, response.send_start_micros
        )
        token = secrets.token_bytes(TOKEN_BYTES)
        done = asyncio.get_running_loop().create_future()
        resolve = io_loop.resolver(done)
        transfer = _Transfer(data, lambda error: resolve(None, error))
        with self._lock:
            self._pending[token] = transfer
        header.transport_options.Pack(RawTensorTransport(port=self.port, token=token))
        try:
            yield header.SerializeToString()
            try:
                error = await asyncio.wait_for(asyncio.shield(done), IDLE_TIMEOUT_S)
            except asyncio.TimeoutError:
                if self._drop(token):
                    raise errors.DeadlineExceededError(
                        None, None, f"RecvTensor: no receiver took the tensor in {IDLE_TIMEOUT_S} s"
                    ) from None
                error = await done  # started: the socket's own timeout bounds it
        finally:
            self._drop(token)
        if error is not None:
            raise error

    def _drop(self, token: bytes) -> bool:
        """Drops a transfer no receiver has started; False if there is none (started, done)."""
        with self._lock:
            transfer = self._pending.pop(token, None)
        if transfer is None:
            return False
        transfer.finish(errors.AbortedError(None, None, "RecvTensor ended before its transfer"))
        return True

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:  # closed
                return
            with self._lock:
                if self._closed:
                    conn.close()
                    return
                self._conns.add(conn)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._watch(conn)

    def _watch(self, conn: socket.socket) -> None:
        """Waits, on the loop, for the receiver's next frame on `conn`, then reads it on a pool
        thread (`_serve_frame`)."""
        io_loop.when_readable(conn, None, lambda timed_out: self._submit(conn, None))

    def _submit(self, conn: socket.socket, answer) -> None:
        """Runs `_serve_frame(conn)`, or `_answer(conn, *answer)`, on the pool."""
        try:
            if answer is None:
                self._pool.submit(self._serve_frame, conn)
            else:
                self._pool.submit(self._answer, conn, *answer)
        except RuntimeError:  # shut down: the sender is closing
            self._close_conn(conn)

    def _serve_frame(self, conn: socket.socket) -> None:
        """Reads one frame: a token (b"T"), answered with its transfer; a RecvTensorRequest
        (b"R"), answered when the step has made the tensor."""
        try:
            kind = _read_exactly(conn, 1)
            if kind == b"T":
                self._send_transfer(conn, _read_exactly(conn, TOKEN_BYTES))
                self._watch(conn)
            elif kind == b"R":
                self._request(conn, _read_exactly(conn, _LENGTH.unpack(_read_exactly(conn, 8))[0]))
            else:
                self._close_conn(conn)  # not a flowgraph receiver
        except (OSError, _Closed):
            self._close_conn(conn)  # the receiver went (or closed its idle connection)

    def _request(self, conn: socket.socket, data: bytes) -> None:
        """Asks the worker for the tensor; the answer is written at once if it is there (the
        callback ran in this thread), else by a pool thread when the step makes it."""
        thread = threading.get_ident()
        inline: list = [True]  # [still in recv_tensor_async, the answer if it came here]

        def done(error, response):
            if inline[0] and threading.get_ident() == thread:
                inline.append((error, response))
            else:
                self._submit(conn, (error, response))

        try:
            request = _parse_request(data)
        except errors.OpError as e:
            done(e, None)
        else:
            self._recv_tensor_async(request, done)
        inline[0] = False
        if len(inline) > 1:
            self._answer(conn, *inline[1])

    def _send_transfer(self, conn: socket.socket, token: bytes) -> None:
        with self._lock:
            transfer = self._pending.pop(token, None)
        if transfer is None:
            conn.sendall(_LENGTH.pack(_UNKNOWN_TOKEN))
            return
        conn.settimeout(IDLE_TIMEOUT_S)
        try:
            _send_bytes(conn, transfer.data)
        except OSError as e:
            transfer.finish(errors.UnavailableError(None, None, f"RecvTensor transfer failed: {e}"))
            raise
        conn.settimeout(None)
        transfer.finish(None)

    def _answer(self, conn: socket.socket, error, response) -> None:
        """A RecvTensor asked on the socket: the header's length and the header (a
        RecvTensorResponse, as message 0 of the stream), then the raw bytes as for a transfer;
        or, for a failure, its length with ERROR_BIT set, then its code and message. Then
        the connection waits for its next frame."""
        try:
            if error is None:
                try:
                    header, data = tensor_stream.split(
                        response.tensor, response.is_dead, response.send_start_micros
                    )
                except Exception as e:  # noqa: BLE001  (the receiver gets every failure)
                    error = e
            conn.settimeout(IDLE_TIMEOUT_S)
            if error is not None:
                if not isinstance(error, errors.OpError):
                    error = errors.InternalError(
                        None, None, f"RecvTensor failed: {type(error).__name__}: {error}"
                    )
                payload = struct.pack("<i", error.error_code) + (error.message or "").encode()
                conn.sendall(_LENGTH.pack(_ERROR_BIT | len(payload)) + payload)
            else:
                head = header.SerializeToString()
                conn.sendall(_LENGTH.pack(len(head)) + head)
                if data is not None:
                    _send_bytes(conn, data)
            conn.settimeout(None)
        except OSError:
            self._close_conn(conn)
            return
        self._watch(conn)

    def _close_conn(self, conn: socket.socket) -> None:
        with self._lock:
            self._conns.discard(conn)
        conn.close()

    def close(self) -> None:
        """Stops listening, ends open connections and fails transfers still pending."""
        with self._lock:
            self._closed = True
            conns, self._conns = list(self._conns), set()
            pending, self._pending = list(self._pending.values()), {}
        _shutdown(self._listener)  # (close alone does not wake a thread blocked in accept)
        self._listener.close()
        for conn in conns:
            _shutdown(conn)  # (its watch or its thread sees the end and closes it)
        for transfer in pending:
            transfer.finish(errors.CancelledError(None, None, "The server is stopping"))
        self._pool.shutdown(wait=False)


def _send_bytes(conn: socket.socket, data: memoryview) -> None:
    """Step 3, sender's side: the length, then the bytes straight from the array's buffer."""
    conn.sendall(_LENGTH.pack(len(data)))
    conn.sendall(data)


# -- the receiver ----------------------------------------------------------------------------
class RawReceiver:
    """The raw path from one peer: its host, and idle connections to its listener (those to
    an older port, a restarted peer's, are closed). Answers are awaited on the I/O loop and
    read on `pool`'s threads. `_lock` guards `_idle`."""

    def __init__(self, host: str, peer: str, pool: ThreadPoolExecutor):
        self._host = host
        self._peer = peer
        self._pool = pool
        self._lock = threading.Lock()
        self._idle: list[tuple[int, socket.socket]] = []

    def receive_async(
        self,
        options: RawTensorTransport,
        array: np.ndarray,
        call_opts: CallOptions | None,
        what: str,
        done,
    ) -> None:
        """Fills `array` with the bytes of transfer `options`, then calls `done(error, None)`
        (`what` names the tensor in errors)."""
        _Exchange(
            self,
            options.port,
            b"T" + options.token,
            what,
            call_opts,
            IDLE_TIMEOUT_S,
            lambda conn, length: self._fill(conn, length, array, what),
            done,
        ).start()

    def recv_async(self, port: int, request, call_opts: CallOptions | None, done) -> None:
        """RecvTensor `request` (a proto) asked on the socket to `port`: `done(None, (array or
        None if dead, header))`, or `done(error, None)`; `done(None, None)` if `port` cannot be
        connected to (the peer restarted elsewhere, or is down: the caller asks by gRPC). It
        waits as long as the step takes, holding no thread."""
        data = request.SerializeToString()
        frame = b"R" + _LENGTH.pack(len(data)) + data
        what = request.rendezvous_key

        def answer(conn, word):
            if word & _ERROR_BIT and word != _UNKNOWN_TOKEN:
                payload = _read_exactly(conn, word & ~_ERROR_BIT)
                code = int.from_bytes(payload[:4], "little", signed=True)
                error_class = errors.exception_type_from_error_code(code)
                raise error_class(None, None, payload[4:].decode(errors="replace"))
            header = RecvTensorResponse.FromString(_read_exactly(conn, word))
            array = tensor_stream.allocate(header)
            if array is None:
                return tensor_stream.carried(header), header
            self._fill(conn, _LENGTH.unpack(_read_exactly(conn, 8))[0], array, what)
            return array, header

        _Exchange(self, port, frame, what, call_opts, None, answer, done, fallback=True).start()

    def _fill(self, conn: socket.socket, length: int, array: np.ndarray, what: str) -> None:
        buffer = memoryview(array.reshape(-1).view(np.uint8))
        self._check(length, array, buffer, what)
        got = _read_into(conn, buffer)
        if got < len(buffer):
            raise errors.UnavailableError(
                None,
                None,
                f"RecvTensor {what}: {self._peer} closed the connection after {got} of "
                f"{len(buffer)} bytes",
            )

    def _check(self, length: int, array: np.ndarray, buffer: memoryview, what: str) -> None:
        if length == _UNKNOWN_TOKEN:
            raise errors.AbortedError(
                None, None, f"RecvTensor {what}: {self._peer} no longer has the tensor"
            )
        if length != len(buffer):
            raise errors.DataLossError(
                None,
                None,
                f"RecvTensor {what}: {self._peer} announced {length} bytes for a tensor of "
                f"{len(buffer)} bytes ({array.dtype}{list(array.shape)})",
            )

    def _error(self, e: BaseException, what: str) -> BaseException:
        """The OpError a failed receive raises (other exceptions, a Ctrl-C, stay as they are)."""
        if isinstance(e, _Closed):
            return errors.UnavailableError(
                None, None, f"RecvTensor {what}: {self._peer} closed the connection"
            )
        if isinstance(e, TimeoutError):
            return errors.DeadlineExceededError(
                None, None, f"RecvTensor {what}: {self._peer} sent nothing for {IDLE_TIMEOUT_S} s"
            )
        if isinstance(e, OSError):
            return errors.UnavailableError(
                None, None, f"RecvTensor {what} from {self._peer} failed: {e}"
            )
        return e

    def _connection(self, port: int, pooled: bool = True) -> tuple[socket.socket, bool]:
        """An idle connection to `port` (and True), or a new one (and False)."""
        stale = []
        conn = None
        with self._lock:
            while self._idle and pooled:
                idle_port, idle = self._idle.pop()
                if idle_port == port:
                    conn = idle
                    break
                stale.append(idle)
        for idle in stale:
            idle.close()
        if conn is not None:
            return conn, True
        try:
            conn = socket.create_connection((self._host, port), timeout=IDLE_TIMEOUT_S)
        except OSError as e:
            raise errors.UnavailableError(
                None,
                None,
                f"RecvTensor: cannot connect to {self._peer} at {self._host}:{port}: {e}",
            ) from None
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn, False

    def _release(self, port: int, conn: socket.socket) -> None:
        with self._lock:
            if len(self._idle) < IDLE_KEPT:
                self._idle.append((port, conn))
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for _, conn in idle:
            conn.close()


class _Exchange:
    """One request on a connection to `port`: writes `frame` (in the caller's thread: a few
    bytes), waits on the loop until the answer starts (up to `wait_s`; None: as long as the
    step takes), then on a pool thread reads the 8-byte word that answers it and calls
    `done(None, answer(conn, word))`, or `done(error, None)`. A pooled connection that turns
    out closed is replaced once. With `fallback`, a port that cannot be connected to calls
    `done(None, None)` instead of failing."""

    def __init__(
        self, receiver, port, frame, what, call_opts, wait_s, answer, done, fallback=False
    ):
        self.receiver, self.port, self.frame, self.what = receiver, port, frame, what
        self.call_opts, self.wait_s, self.answer, self.done = call_opts, wait_s, answer, done
        self.fallback = fallback
        self.guard: _Guard | None = None
        self.pooled = False

    def start(self) -> None:
        try:
            conn, self.pooled = self.receiver._connection(self.port)
        except errors.UnavailableError as e:
            self.done(None, None) if self.fallback else self.done(e, None)
            return
        self.guard = _Guard(conn, self.call_opts)
        self._send(conn)

    def _send(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(IDLE_TIMEOUT_S)
            conn.sendall(self.frame)
        except (BrokenPipeError, ConnectionResetError):
            pass  # closed while idle: the read finds out, and retries on a new connection
        except OSError as e:
            self._fail(e)
            return
        io_loop.when_readable(conn, self.wait_s, self._readable)

    def _readable(self, timed_out: bool) -> None:
        try:
            self.receiver._pool.submit(self._finish, timed_out)
        except RuntimeError:  # shut down: the worker cache is closing
            self.guard.abort(errors.CancelledError(None, None, "The worker cache was closed"))
            self._fail(_Closed())

    def _finish(self, timed_out: bool) -> None:
        conn = self.guard.conn
        try:
            if timed_out:
                raise TimeoutError
            try:
                word = _LENGTH.unpack(_read_exactly(conn, _LENGTH.size))[0]
            except (ConnectionResetError, _Closed):
                if not self.pooled or self.guard.error is not None:
                    raise _Closed from None
                self._retry(conn)  # the peer closed it while it was idle: try a new one
                return
            result = self.answer(conn, word)
        except BaseException as e:  # noqa: BLE001  (reported, as an OpError if it is one)
            self._fail(e)
            return
        if not self.guard.finish():
            conn.close()
            self.done(self.guard.error, None)
            return
        self.receiver._release(self.port, conn)
        self.done(None, result)

    def _retry(self, old: socket.socket) -> None:
        old.close()
        self.pooled = False
        try:
            conn = self.receiver._connection(self.port, pooled=False)[0]
        except errors.UnavailableError as e:
            self.guard.finish()
            self.done(None, None) if self.fallback else self.done(e, None)
            return
        self._send(self.guard.replace(conn))

    def _fail(self, e: BaseException) -> None:
        self.guard.finish()
        self.guard.conn.close()
        if self.guard.error is not None:  # cancelled: the shutdown caused this
            self.done(self.guard.error, None)
        else:
            self.done(self.receiver._error(e, self.what), None)


class _Closed(Exception):
    """The sender closed the connection before it answered."""


class _Guard:
    """Cancels one receive: `abort` (CallOptions' callback) shuts the socket down unless the
    receive has finished; `finish` returns False if it was aborted first. `_lock` guards
    `_finished` and `error`."""

    def __init__(self, conn: socket.socket, call_opts: CallOptions | None):
        self.conn = conn
        self.error: errors.OpError | None = None
        self._finished = False
        self._lock = threading.Lock()
        self._call_opts = call_opts
        if call_opts is not None:
            call_opts.set_cancel_callback(self.abort)

    def replace(self, conn: socket.socket) -> socket.socket:
        """Guards `conn` instead (a retry's new connection)."""
        with self._lock:
            self.conn = conn
            if self.error is not None:
                _shutdown(conn)
        return conn

    def abort(self, error: errors.OpError) -> None:
        with self._lock:
            if self._finished or self.error is not None:
                return
            self.error = error
            _shutdown(self.conn)

    def finish(self) -> bool:
        if self._call_opts is not None:
            self._call_opts.clear_cancel_callback()
        with self._lock:
            self._finished = True
            return self.error is None


def _read_into(conn: socket.socket, view: memoryview) -> int:
    """Reads until `view` is full or the peer closes; the number of bytes read."""
    got = 0
    while got < len(view):
        n = conn.recv_into(view[got:])
        if n == 0:
            break
        got += n
    return got


def _read_exactly(conn: socket.socket, n: int) -> bytes:
    """`n` bytes from `conn`; _Closed if it closes first."""
    buffer = bytearray(n)
    if _read_into(conn, memoryview(buffer)) < n:
        raise _Closed
    return bytes(buffer)


def _parse_request(data: bytes):
    try:
        request = worker_pb2.RecvTensorRequest.FromString(data)
    except DecodeError as e:
        raise errors.InvalidArgumentError(
            None, None, f"RecvTensor: malformed RecvTensorRequest: {e}"
        ) from None
    return request


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # not connected (any more)
