"""The receiving end of the raw transport (raw_transport.py, whose docstring gives the
protocol): idle connections to one peer's listener, and one exchange per receive, which waits
for its answer on the I/O loop and reads it on a pool thread; cancelling the receive shuts its
socket down.
"""

from __future__ import annotations

import socket
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from flowgraph.core import errors
from flowgraph.core.protos.worker_pb2 import RawTensorTransport, RecvTensorResponse
from flowgraph.distributed import io_loop, tensor_stream
from flowgraph.distributed.raw_transport import (
    ERROR_BIT,
    IDLE_KEPT,
    IDLE_TIMEOUT_S,
    LENGTH,
    UNKNOWN_TOKEN,
    Closed,
    parse_error,
    read_exactly,
    read_into,
    shutdown,
)
from flowgraph.distributed.worker_cache import CallOptions


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
        frame = b"R" + LENGTH.pack(len(data)) + data
        what = request.rendezvous_key

        def answer(conn, word):
            if word & ERROR_BIT and word != UNKNOWN_TOKEN:
                raise parse_error(read_exactly(conn, word & ~ERROR_BIT))
            header = RecvTensorResponse.FromString(read_exactly(conn, word))
            array = tensor_stream.allocate(header)
            if array is None:
                return tensor_stream.carried(header), header
            self._fill(conn, LENGTH.unpack(read_exactly(conn, 8))[0], array, what)
            return array, header

        _Exchange(self, port, frame, what, call_opts, None, answer, done, fallback=True).start()

    def _fill(self, conn: socket.socket, length: int, array: np.ndarray, what: str) -> None:
        buffer = memoryview(array.reshape(-1).view(np.uint8))
        self._check(length, array, buffer, what)
        got = read_into(conn, buffer)
        if got < len(buffer):
            raise errors.UnavailableError(
                None,
                None,
                f"RecvTensor {what}: {self._peer} closed the connection after {got} of "
                f"{len(buffer)} bytes",
            )

    def _check(self, length: int, array: np.ndarray, buffer: memoryview, what: str) -> None:
        if length == UNKNOWN_TOKEN:
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
        if isinstance(e, Closed):
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
            self._fail(Closed())

    def _finish(self, timed_out: bool) -> None:
        conn = self.guard.conn
        try:
            if timed_out:
                raise TimeoutError
            try:
                word = LENGTH.unpack(read_exactly(conn, LENGTH.size))[0]
            except (ConnectionResetError, Closed):
                if not self.pooled or self.guard.error is not None:
                    raise Closed from None
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
                shutdown(conn)
        return conn

    def abort(self, error: errors.OpError) -> None:
        with self._lock:
            if self._finished or self.error is not None:
                return
            self.error = error
            shutdown(self.conn)

    def finish(self) -> bool:
        if self._call_opts is not None:
            self._call_opts.clear_cancel_callback()
        with self._lock:
            self._finished = True
            return self.error is None
