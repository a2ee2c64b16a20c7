"""The rendezvous: where a Send leaves a tensor and the matching Recv picks it up (§3.2.2, §4.2).

Feeds and fetches use it too: the client sends feed values before a step and receives fetched
values after it. A value is delivered exactly once per key and step.
"""

from __future__ import annotations

import threading

from flowgraph.core import errors


class _Dead:
    """The value of a dead tensor: the untaken output of a Switch, and all that depends on it
    (whitepaper §4.4). Dead values travel through Send/Recv so deadness crosses devices."""

    __slots__ = ()

    def __repr__(self):
        return "DEAD"


DEAD = _Dead()


def rendezvous_key(
    src_device: str,
    src_incarnation: int,
    dst_device: str,
    tensor_name: str,
    frame_iter: tuple[int, int] = (0, 0),
) -> str:
    """The one place a key is built. Matching needs only dst, tensor name and frame/iteration;
    src helps debugging; the incarnation changes when the source task restarts, so a stale
    producer can never satisfy a new consumer."""
    frame, iteration = frame_iter
    return f"{src_device};{src_incarnation:016x};{dst_device};{tensor_name};{frame}:{iteration}"


class LocalRendezvous:
    """One step's table key -> value, or key -> waiting callbacks. Guarded by `_lock`.

    `recv_async` never blocks: the callback runs when the value arrives (in the sender's thread)
    or at once if it is already there. `abort` fails every current and future receiver."""

    def __init__(self):
        self._lock = threading.Lock()
        self._values: dict[str, tuple] = {}  # guarded by _lock: key -> (value, is_dead)
        self._waiters: dict[str, list] = {}  # guarded by _lock: key -> callbacks
        self._error: Exception | None = None  # guarded by _lock

    def send(self, key: str, value, is_dead: bool = False):
        with self._lock:
            if self._error is not None:
                raise self._error
            waiters = self._waiters.pop(key, None)
            if not waiters:
                if key in self._values:
                    raise errors.InternalError(None, None, f"Send of an already sent tensor: {key}")
                self._values[key] = (value, is_dead)
                return
            callback = waiters.pop(0)
            if waiters:
                self._waiters[key] = waiters
        callback(None, value, is_dead)

    def recv_async(self, key: str, callback):
        """callback(error, value, is_dead)."""
        with self._lock:
            if self._error is not None:
                error = self._error
            elif key in self._values:
                value, is_dead = self._values.pop(key)
                error = None
            else:
                self._waiters.setdefault(key, []).append(callback)
                return
        callback(error, None if error else value, False if error else is_dead)

    def recv(self, key: str, timeout: float | None = None):
        """Blocking receive, for clients (fetch results) and tests; returns (value, is_dead)."""
        done = threading.Event()
        box = []

        def cb(error, value, is_dead):
            box.append((error, value, is_dead))
            done.set()

        self.recv_async(key, cb)
        if not done.wait(timeout):
            raise errors.DeadlineExceededError(None, None, f"Timed out waiting for {key}")
        error, value, is_dead = box[0]
        if error is not None:
            raise error
        return value, is_dead

    def try_take(self, key: str):
        """Takes a value that is already there (None if absent); the client's fast fetch path."""
        with self._lock:
            return self._values.pop(key, None)

    def abort(self, error: Exception):
        with self._lock:
            if self._error is None:
                self._error = error
            waiters = [cb for cbs in self._waiters.values() for cb in cbs]
            self._waiters.clear()
        for cb in waiters:
            cb(error, None, False)
