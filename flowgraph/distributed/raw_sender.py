"""The sending end of the raw transport (raw_transport.py, whose docstring gives the
protocol): a task's listener, which serves the transfers its streamed RecvTensors offered and
the RecvTensors its receivers ask on their connections, each answer written by a pool thread
only while its bytes flow, and the RunGraphs its masters send (raw_calls.py), each run on the
task's handler pool.
"""

from __future__ import annotations

import asyncio
import secrets
import socket
import threading
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor

from flowgraph.core import errors
from flowgraph.core.protos.worker_pb2 import RawTensorTransport
from flowgraph.distributed import io_loop, raw_calls, tensor_stream
from flowgraph.distributed.raw_transport import (
    IDLE_TIMEOUT_S,
    LENGTH,
    TOKEN_BYTES,
    UNKNOWN_TOKEN,
    Closed,
    error_answer,
    parse_request,
    read_exactly,
    send_bytes,
    shutdown,
)

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

    def __init__(self, host: str, recv_tensor_async, task: str = "", run_graph=None, pool=None):
        # (RecvTensorRequest proto, done(error, m.RecvTensorResponse)) -> None, never blocks
        self._recv_tensor_async = recv_tensor_async
        # RunGraphs sent here: run_graph(request bytes, CallContext) -> response bytes, on
        # `pool` (the blocking gRPC handlers' threads); task: the task this listener serves
        self._task = task
        self._run_graph = run_graph
        self._call_pool = pool
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
        thread (`_dispatch`)."""
        io_loop.when_readable(conn, None, lambda timed_out: self._dispatch(conn))

    def _dispatch(self, conn: socket.socket) -> None:
        """On the loop, `conn` readable: a RunGraph (its first byte, peeked, says so) runs on
        the handler pool; any other frame (or the connection's end) is read on the sender's
        pool (`_serve_frame`)."""
        try:
            kind = conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            self._watch(conn)  # (nothing there after all)
            return
        except OSError:
            kind = b""
        if kind != raw_calls.CALL or self._run_graph is None:
            self._submit(conn, None)
            return
        try:
            self._call_pool.submit(
                raw_calls.serve, conn, self._task, self._run_graph, self._watch, self._close_conn
            )
        except RuntimeError:  # shut down: the task is stopping
            self._close_conn(conn)

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
            kind = read_exactly(conn, 1)
            if kind == b"T":
                self._send_transfer(conn, read_exactly(conn, TOKEN_BYTES))
                self._watch(conn)
            elif kind == b"R":
                self._request(conn, read_exactly(conn, LENGTH.unpack(read_exactly(conn, 8))[0]))
            else:
                self._close_conn(conn)  # not a flowgraph receiver
        except (OSError, Closed):
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
            request = parse_request(data)
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
            conn.sendall(LENGTH.pack(UNKNOWN_TOKEN))
            return
        conn.settimeout(IDLE_TIMEOUT_S)
        try:
            send_bytes(conn, transfer.data)
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
                conn.sendall(error_answer(error, "RecvTensor"))
            else:
                head = header.SerializeToString()
                conn.sendall(LENGTH.pack(len(head)) + head)
                if data is not None:
                    send_bytes(conn, data)
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
        shutdown(self._listener)  # (close alone does not wake a thread blocked in accept)
        self._listener.close()
        for conn in conns:
            shutdown(conn)  # (its watch or its thread sees the end and closes it)
        for transfer in pending:
            transfer.finish(errors.CancelledError(None, None, "The server is stopping"))
        self._pool.shutdown(wait=False)
