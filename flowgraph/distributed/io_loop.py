"""The process's I/O event loop: one asyncio loop on a daemon thread that hosts every gRPC server
of the process (grpc.aio) and the waits of pending RecvTensors on both sides (issue 12).

A RecvTensor whose tensor is not produced yet must not hold a thread while it waits (TF's
handlers are asynchronous: the rendezvous calls back). A coroutine awaiting a future costs a
few hundred bytes, a thread ~8 MiB of stack and a slot of a bounded pool, and a step may have
thousands of pending receives, more than any pool. So the waits live here: a server handler
awaits a future that the rendezvous resolves (`resolver`), a receiver's socket waits for its
answer as a reader of this loop (raw_transport.py), and a streamed receive reads its messages
from a grpc.aio call. Blocking work (a step, a transfer's bytes) runs on thread pools; the loop
only dispatches.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
from collections.abc import Callable, Coroutine

_lock = threading.Lock()  # guards _loop and _pid
_loop: asyncio.AbstractEventLoop | None = None
_pid = 0  # the process that started _loop (a forked child has no thread running it)


def get() -> asyncio.AbstractEventLoop:
    """The loop, started on first use in this process (it runs until the process exits)."""
    global _loop, _pid
    with _lock:
        if _loop is None or _pid != os.getpid():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="io-loop", daemon=True).start()
            _loop, _pid = loop, os.getpid()
        return _loop


def run(coro: Coroutine, timeout: float | None = None):
    """Runs `coro` on the loop from another thread and returns its result (or raises)."""
    return asyncio.run_coroutine_threadsafe(coro, get()).result(timeout)


def spawn(coro: Coroutine) -> None:
    """Runs `coro` on the loop without waiting for it (it reports its own outcome)."""
    asyncio.run_coroutine_threadsafe(coro, get())


def call_soon(fn: Callable, *args) -> None:
    """Calls fn(*args) on the loop thread, from any thread."""
    get().call_soon_threadsafe(fn, *args)


def resolver(future: asyncio.Future) -> Callable:
    """A `done(error, value)` callback, safe from any thread, that resolves `future` (of the
    running loop) with the error or the value; once the future is cancelled (the call it
    serves ended) it does nothing."""
    loop = future.get_loop()

    def settle(error, value):
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def done(error, value):
        if loop.is_closed():
            return
        loop.call_soon_threadsafe(settle, error, value)

    return done


def when_readable(conn: socket.socket, wait_s: float | None, then) -> None:
    """Calls `then(timed_out)` on the loop, once, when `conn` is readable (data, its end, or a
    shutdown by a cancellation) or `wait_s` seconds have passed (None: no limit). The wait
    holds no thread: the loop's selector watches the socket."""
    loop = get()

    def arm():
        fd = conn.fileno()
        if fd < 0:  # closed meanwhile: the read that follows fails
            then(False)
            return
        state: list = [None]  # the timer, then True once fired

        def fire(timed_out: bool) -> None:
            if state[0] is True:
                return
            if state[0] is not None:
                state[0].cancel()
            state[0] = True
            loop.remove_reader(fd)
            then(timed_out)

        loop.add_reader(fd, fire, False)
        if wait_s is not None:
            state[0] = loop.call_later(wait_s, fire, True)

    loop.call_soon_threadsafe(arm)
