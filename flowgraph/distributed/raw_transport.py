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

Failures are errors of the step, never of the process: a length other than the header's is
DataLossError; a connection that closes early (the peer died or gave up) is UnavailableError
naming the peer; no progress for IDLE_TIMEOUT_S is DeadlineExceededError; a token the sender
no longer knows (its RPC ended) is AbortedError. Cancelling the receive (its CallOptions, as
the receiving step's rendezvous does when the step ends) shuts its socket down at once.
"""

from __future__ import annotations

import secrets
import socket
import struct
import threading
from collections.abc import Iterator

import numpy as np
from google.protobuf.message import DecodeError

from flowgraph.core import errors
from flowgraph.core.protos import worker_pb2
from flowgraph.core.protos.worker_pb2 import RawTensorTransport, RecvTensorResponse
from flowgraph.distributed import tensor_stream
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
class _Transfer:
    """One tensor's bytes waiting for their receiver; `done` is set once sent or dropped."""

    __slots__ = ("data", "done", "error")

    def __init__(self, data: memoryview):
        self.data = data
        self.done = threading.Event()
        self.error: errors.OpError | None = None

    def finish(self, error: errors.OpError | None) -> None:
        self.error = error
        self.done.set()


class RawSender:
    """A task's listener: serves the transfers its RecvTensor handlers offered (`serve`).
    `_lock` guards `_pending`, `_conns` and `_closed`."""

    def __init__(self, host: str, recv_tensor):
        self._recv_tensor = recv_tensor  # RecvTensorRequest proto -> m.RecvTensorResponse
        self._listener = socket.create_server((host, 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._pending: dict[bytes, _Transfer] = {}
        self._conns: set[socket.socket] = set()
        self._closed = False
        threading.Thread(target=self._accept, name="raw-accept", daemon=True).start()

    def serve(self, response, context) -> Iterator[bytes]:
        """The streamed RecvTensor of `response` (an m.RecvTensorResponse of a raw tensor of
        at least MIN_BYTES) whose bytes go by socket: yields the header, then waits for the
        transfer (steps 2 and 3 of the module docstring)."""
        header, data = tensor_stream.split(
            response.tensor, response.is_dead, response.send_start_micros
        )
        token = secrets.token_bytes(TOKEN_BYTES)
        transfer = _Transfer(data)
        with self._lock:
            self._pending[token] = transfer
        context.add_callback(lambda: self._drop(token))
        header.transport_options.Pack(RawTensorTransport(port=self.port, token=token))
        try:
            yield header.SerializeToString()
            if not transfer.done.wait(IDLE_TIMEOUT_S) and self._drop(token):
                raise errors.DeadlineExceededError(
                    None, None, f"RecvTensor: no receiver took the tensor in {IDLE_TIMEOUT_S} s"
                )
            transfer.done.wait()  # started: the socket's own timeout bounds it
        finally:
            self._drop(token)
        if transfer.error is not None:
            raise transfer.error

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
            threading.Thread(
                target=self._serve_connection, args=(conn,), name="raw-send", daemon=True
            ).start()

    def _serve_connection(self, conn: socket.socket) -> None:
        """Answers each frame the receiver writes: a token (b"T") with its transfer, a
        RecvTensorRequest (b"R") with the tensor once the step has made it."""
        try:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            while True:
                kind = _read_exactly(conn, 1)
                if kind == b"T":
                    self._send_transfer(conn, _read_exactly(conn, TOKEN_BYTES))
                elif kind == b"R":
                    self._answer(
                        conn, _read_exactly(conn, _LENGTH.unpack(_read_exactly(conn, 8))[0])
                    )
                else:
                    return  # not a flowgraph receiver
        except (OSError, _Closed):
            return  # the receiver went (or closed its idle connection)
        finally:
            with self._lock:
                self._conns.discard(conn)
            conn.close()

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

    def _answer(self, conn: socket.socket, request: bytes) -> None:
        """A RecvTensor asked on the socket: the header's length and the header (a
        RecvTensorResponse, as message 0 of the stream), then the raw bytes as for a transfer;
        or, for a failure, its length with ERROR_BIT set, then its code and message."""
        try:
            response = self._recv_tensor(_parse_request(request))
            header, data = tensor_stream.split(
                response.tensor, response.is_dead, response.send_start_micros
            )
        except Exception as e:  # noqa: BLE001  (the receiver gets every failure)
            if not isinstance(e, errors.OpError):
                e = errors.InternalError(None, None, f"RecvTensor failed: {type(e).__name__}: {e}")
            payload = struct.pack("<i", e.error_code) + (e.message or "").encode()
            conn.sendall(_LENGTH.pack(_ERROR_BIT | len(payload)) + payload)
            return
        head = header.SerializeToString()
        conn.settimeout(IDLE_TIMEOUT_S)
        conn.sendall(_LENGTH.pack(len(head)) + head)
        if data is not None:
            _send_bytes(conn, data)
        conn.settimeout(None)

    def close(self) -> None:
        """Stops listening, ends open connections and fails transfers still pending."""
        with self._lock:
            self._closed = True
            conns, self._conns = list(self._conns), set()
            pending, self._pending = list(self._pending.values()), {}
        _shutdown(self._listener)  # (close alone does not wake a thread blocked in accept)
        self._listener.close()
        for conn in conns:
            _shutdown(conn)
        for transfer in pending:
            transfer.finish(errors.CancelledError(None, None, "The server is stopping"))


def _send_bytes(conn: socket.socket, data: memoryview) -> None:
    """Step 3, sender's side: the length, then the bytes straight from the array's buffer."""
    conn.sendall(_LENGTH.pack(len(data)))
    conn.sendall(data)


# -- the receiver ----------------------------------------------------------------------------
class RawReceiver:
    """The raw path from one peer: its host, and idle connections to its listener (those to
    an older port, a restarted peer's, are closed). `_lock` guards `_idle`."""

    def __init__(self, host: str, peer: str):
        self._host = host
        self._peer = peer
        self._lock = threading.Lock()
        self._idle: list[tuple[int, socket.socket]] = []

    def receive(
        self,
        options: RawTensorTransport,
        array: np.ndarray,
        call_opts: CallOptions | None,
        what: str,
    ) -> None:
        """Fills `array` with the bytes of transfer `options` (`what` names the tensor in
        errors)."""
        frame = b"T" + options.token
        self._exchange(
            options.port,
            frame,
            what,
            call_opts,
            IDLE_TIMEOUT_S,
            lambda conn, length: self._fill(conn, length, array, what),
        )

    def recv(self, port: int, request, call_opts: CallOptions | None):
        """RecvTensor `request` (a proto) asked on the socket to `port`: (array or None if
        dead, header); None if `port` cannot be connected to (the peer restarted elsewhere,
        or is down: the caller asks by gRPC). It waits as long as the step takes."""
        data = request.SerializeToString()
        frame = b"R" + _LENGTH.pack(len(data)) + data
        what = request.rendezvous_key

        def answer(conn, word):
            conn.settimeout(IDLE_TIMEOUT_S)
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

        return self._exchange(port, frame, what, call_opts, None, answer, fallback=True)

    def _exchange(self, port, frame, what, call_opts, wait_s, answer, fallback=False):
        """Writes `frame` on a connection to `port`, reads the 8-byte word that answers it
        (waiting up to `wait_s`, None: as long as it takes) and returns `answer(conn, word)`.
        A pooled connection that turns out closed is replaced once. With `fallback`, a port
        that cannot be connected to returns None instead of raising."""
        try:
            conn, pooled = self._connection(port)
        except errors.UnavailableError:
            if fallback:
                return None
            raise
        guard = _Guard(conn, call_opts)
        try:
            conn.settimeout(wait_s)
            try:
                word = self._request(conn, frame)
            except _Closed:
                if not pooled:
                    raise
                conn.close()  # the peer closed it while it was idle: try a new one
                conn = guard.replace(self._reconnect(port, fallback))
                conn.settimeout(wait_s)
                word = self._request(conn, frame)
            result = answer(conn, word)
        except _Gone:
            guard.finish()
            return None
        except BaseException as e:  # noqa: BLE001  (re-raised, as an OpError if it is one)
            guard.finish()
            guard.conn.close()
            if guard.error is not None:  # cancelled: the shutdown caused this
                raise guard.error from None
            raise self._error(e, what) from None
        if not guard.finish():
            conn.close()
            raise guard.error
        self._release(port, conn)
        return result

    def _reconnect(self, port: int, fallback: bool) -> socket.socket:
        """A new connection to `port`; _Gone (with `fallback`) if there is no listener."""
        try:
            return self._connection(port, pooled=False)[0]
        except errors.UnavailableError:
            if fallback:
                raise _Gone from None
            raise

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

    def _request(self, conn: socket.socket, frame: bytes) -> int:
        """Writes `frame`, returns the 8-byte word the sender answers; _Closed if it closed."""
        try:
            conn.sendall(frame)
            return _LENGTH.unpack(_read_exactly(conn, _LENGTH.size))[0]
        except (BrokenPipeError, ConnectionResetError):
            raise _Closed from None

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


class _Closed(Exception):
    """The sender closed the connection before it answered."""


class _Gone(Exception):
    """No listener on the port any more: the peer restarted elsewhere, or is down."""


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
