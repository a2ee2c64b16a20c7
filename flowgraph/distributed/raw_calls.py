"""RunGraph between flowgraph tasks over the raw transport's sockets (raw_transport.py), not
gRPC (D2, issue 12).

A unary gRPC call costs ~0.5 ms of CPU on each side and ~0.6 ms of latency on loopback, most of
it grpc.aio's machinery and the hand-offs between its poller, the I/O loop and the handler
thread; the same request and answer on a kept socket cost a tenth of that. A step whose graph
runs on another task pays one RunGraph, so a master whose peer is a flowgraph task (its GetStatus
answer names its listener's port) sends it there by socket:

  frame   b"G" + length + task name length (2 bytes, little-endian) + task name + the
          serialized RunGraphRequest;
  answer  length + the serialized RunGraphResponse, or a failure (raw_transport.error_answer),
          or NOT_HERE when the listener serves another task (a port reused after a restart):
          the request did not run, and the caller sends it by gRPC.

The listener reads the frame on the task's handler pool (the threads gRPC's RunGraph runs on),
and while the step runs the I/O loop watches the connection: a caller that goes away cancels the
step, as a cancelled gRPC call does. The caller waits in its own thread (it would block on the
gRPC call just the same). What gRPC's channel did besides carry bytes is kept: a connection that
cannot be made sends the call to gRPC (a peer restarted on another port, or down: gRPC then
reports it, or retries once it is back); a kept connection found closed is replaced once; a
peer that answers nothing for KEEPALIVE_S is asked GetStatus, and one that does not answer
that within KEEPALIVE_TIMEOUT_S fails the call (gRPC's keepalive: a hung peer closes no socket);
`InFlight.abort` ends every call waiting on a peer (the worker cache's reconnect of a hung
task, its close).
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable

from flowgraph.core import errors
from flowgraph.distributed import io_loop
from flowgraph.distributed.grpc_service import CallContext
from flowgraph.distributed.raw_transport import (
    ERROR_BIT,
    IDLE_TIMEOUT_S,
    LENGTH,
    Closed,
    error_answer,
    parse_error,
    read_exactly,
    shutdown,
)

CALL = b"G"
NOT_HERE = (1 << 64) - 2  # the answer of a listener of another task
KEEPALIVE_S = 10.0  # gRPC's keepalive_time_ms and keepalive_timeout_ms (grpc_service.py)
KEEPALIVE_TIMEOUT_S = 5.0
_NAME = struct.Struct("<H")
RPC = "RunGraph"


# -- the listener's side -----------------------------------------------------------------------
def serve(conn: socket.socket, task: str, impl, next_frame, drop) -> None:
    """Answers the call frame waiting on `conn` (on a handler pool thread): `impl(request
    bytes, CallContext) -> response bytes` runs it; then `next_frame(conn)` waits for the
    connection's next frame, or `drop(conn)` closes a connection that failed."""
    try:
        read_exactly(conn, len(CALL))
        payload = read_exactly(conn, LENGTH.unpack(read_exactly(conn, LENGTH.size))[0])
        (name_length,) = _NAME.unpack_from(payload)
        start = _NAME.size
        if payload[start : start + name_length].decode(errors="replace") != task:
            conn.sendall(LENGTH.pack(NOT_HERE))
            next_frame(conn)
            return
        request = payload[start + name_length :]
    except (OSError, Closed, struct.error):
        drop(conn)  # the caller went, or is not a flowgraph caller
        return
    context = CallContext()
    running = [True]
    io_loop.when_readable(conn, None, lambda timed_out: _caller_gone(conn, running, context))
    try:
        response = impl(request, context)
        answer = LENGTH.pack(len(response)) + response
    except Exception as e:  # noqa: BLE001  (the caller gets every failure)
        answer = error_answer(e, RPC)
    finally:
        running[0] = False
    try:
        conn.settimeout(IDLE_TIMEOUT_S)
        conn.sendall(answer)
        conn.settimeout(None)
    except OSError:  # (after the watch: it may still watch the socket, which must stay open)
        io_loop.call_soon(_unwatch, conn, drop)
        return
    finally:
        context.end()
    next_frame(conn)  # (replaces the watch of `_caller_gone` if that has not fired)


def _unwatch(conn: socket.socket, drop) -> None:
    """On the loop: stops watching `conn`, then `drop(conn)`."""
    if conn.fileno() >= 0:
        io_loop.get().remove_reader(conn.fileno())
    drop(conn)


def _caller_gone(conn: socket.socket, running: list, context) -> None:
    """On the loop: `conn` turned readable while its call ran. The caller sends nothing while
    it waits, so this is its end (it went away, or gave the call up): the call ends, as a
    cancelled gRPC call does, which cancels its step."""
    if not running[0]:
        return  # answered: the connection's next frame, which `next_frame` serves
    try:
        gone = conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        gone = False
    except OSError:
        gone = True
    if gone:
        context.end()


# -- the caller's side -------------------------------------------------------------------------
class InFlight:
    """The calls one process has waiting on one peer: `abort(error)` shuts their sockets down
    (or only those of the calls made with `key`), which ends each with `error`. `_lock`
    guards `_conns` (socket -> [key, error or None])."""

    def __init__(self):
        self._lock = threading.Lock()
        self._conns: dict[socket.socket, list] = {}

    def add(self, conn: socket.socket, key=None) -> None:
        with self._lock:
            self._conns[conn] = [key, None]

    def remove(self, conn: socket.socket) -> errors.OpError | None:
        """Forgets `conn`; the error it was aborted with, if it was."""
        with self._lock:
            return self._conns.pop(conn, [None, None])[1]

    def abort(self, error: errors.OpError, key=None) -> None:
        with self._lock:
            conns = [
                conn
                for conn, entry in self._conns.items()
                if entry[1] is None and (key is None or entry[0] is key)
            ]
            for conn in conns:
                self._conns[conn][1] = error
        for conn in conns:
            shutdown(conn)


def call(
    receiver,
    in_flight: InFlight,
    port: int,
    task: str,
    request: bytes,
    timeout: float,
    alive: Callable[[], bool],
    key=None,
) -> bytes | None:
    """The serialized RunGraphResponse of `request` run by `task` at `port` (on `receiver`'s
    host, over its kept connections), or None if it never ran there (no connection could be
    made, or the listener serves another task): the caller sends it by gRPC. Waits at most
    `timeout` seconds (DeadlineExceededError), asking `alive()` when the peer is silent for
    KEEPALIVE_S; raises the failure the peer answered, or UnavailableError naming `task`.
    `in_flight.abort(error, key)` ends it with `error`."""
    name = task.encode()
    body = _NAME.pack(len(name)) + name + request
    frame = CALL + LENGTH.pack(len(body)) + body
    deadline = time.monotonic() + timeout
    for pooled in (True, False):
        try:
            conn, reused = receiver._connection(port, pooled)
        except errors.UnavailableError:
            return None
        in_flight.add(conn, key)
        word = None
        try:
            try:
                conn.settimeout(IDLE_TIMEOUT_S)
                conn.sendall(frame)
                _wait(conn, deadline, alive, task)
                conn.settimeout(IDLE_TIMEOUT_S)
                word = LENGTH.unpack(read_exactly(conn, LENGTH.size))[0]
                if word == NOT_HERE:
                    result = None
                elif word & ERROR_BIT:
                    result = parse_error(read_exactly(conn, word & ~ERROR_BIT))
                else:
                    result = read_exactly(conn, word)
            finally:
                aborted = in_flight.remove(conn)
        except BaseException as e:
            conn.close()
            if aborted is not None:
                raise aborted from None
            if not isinstance(e, (OSError, Closed)):
                raise
            if isinstance(e, TimeoutError) and word is None:
                raise errors.DeadlineExceededError(
                    None, None, f"{RPC} to {task} passed its deadline"
                ) from None
            if reused and word is None:
                continue  # closed while it was kept: the peer restarted, or closed it idle
            raise errors.UnavailableError(
                None, None, f"{RPC} to {task} failed: {_reason(e)}"
            ) from None
        receiver._release(port, conn)
        if isinstance(result, errors.OpError):
            raise result
        return result
    return None  # (not reached: a new connection is never `reused`)


def _wait(conn: socket.socket, deadline: float, alive, task: str) -> None:
    """Until `conn` has the answer's first byte (or its end); TimeoutError at the deadline,
    UnavailableError if the peer is silent and `alive()` says it is hung."""
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        conn.settimeout(min(remaining, KEEPALIVE_S))
        try:
            conn.recv(1, socket.MSG_PEEK)
            return
        except TimeoutError:
            if deadline - time.monotonic() > 0 and not alive():
                raise errors.UnavailableError(
                    None,
                    None,
                    f"{RPC} to {task} failed: it did not answer a keepalive check within "
                    f"{KEEPALIVE_TIMEOUT_S} s",
                ) from None


def _reason(e: BaseException) -> str:
    return "Socket closed" if isinstance(e, Closed) else str(e) or type(e).__name__
