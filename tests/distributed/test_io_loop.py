"""The I/O loop's waits (io_loop.py): a socket watched for its answer, with or without a
limit, and a future resolved from another thread, or left alone once its call has ended."""

import asyncio
import queue
import socket
import threading

import pytest

from flowgraph.core import errors
from flowgraph.distributed import io_loop


def test_when_readable_reports_data_a_shutdown_or_the_limit_once():
    got: queue.Queue = queue.Queue()
    a, b = socket.socketpair()
    with a, b:
        io_loop.when_readable(a, None, got.put)
        b.sendall(b"x")
        assert got.get(timeout=30) is False
        assert a.recv(1) == b"x"
        io_loop.when_readable(a, 0.01, got.put)  # nothing comes: the limit passes
        assert got.get(timeout=30) is True
        io_loop.when_readable(a, 3600, got.put)
        b.shutdown(socket.SHUT_WR)  # (a cancelled receive shuts its socket down)
        assert got.get(timeout=30) is False
        assert a.recv(1) == b""
    io_loop.run(asyncio.sleep(0))  # every callback has run by now: each fired once
    assert got.empty()


def test_resolver_settles_from_any_thread_and_ignores_an_ended_call():
    async def waits(done_by):
        future = asyncio.get_running_loop().create_future()
        done = io_loop.resolver(future)
        threading.Thread(target=done_by, args=(done,)).start()
        return await future

    assert io_loop.run(waits(lambda done: done(None, 42)), timeout=30) == 42
    error = errors.AbortedError(None, None, "step aborted")
    with pytest.raises(errors.AbortedError, match="step aborted"):
        io_loop.run(waits(lambda done: done(error, None)), timeout=30)

    async def cancelled():
        future = asyncio.get_running_loop().create_future()
        done = io_loop.resolver(future)
        future.cancel()  # the call ended (its caller cancelled it)
        done(None, 1)  # the tensor comes later: nothing happens
        await asyncio.sleep(0)
        return future.cancelled()

    assert io_loop.run(cancelled(), timeout=30)
