"""The rendezvous: where a Send leaves a tensor and the matching Recv picks it up (§3.2.2, §4.2).

Feeds and fetches use it too: the client sends feed values before a step and receives fetched
values after it. A value is delivered exactly once per key and step. Keys have TensorFlow's
format (core/rendezvous_keys.py). A worker keeps one rendezvous per step, keyed by the step id
(RendezvousMgr), created when the step starts and torn down when it ends.
"""

from __future__ import annotations

import threading

from flowgraph.core import errors
from flowgraph.core.dead_value import DEAD  # noqa: F401  (the runtime names it here too)


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

    def is_empty(self) -> bool:
        """Nothing sent and not taken, no receiver waiting, not aborted: as if new."""
        return not self._values and not self._waiters and self._error is None

    def abort(self, error: Exception):
        with self._lock:
            if self._error is None:
                self._error = error
            waiters = [cb for cbs in self._waiters.values() for cb in cbs]
            self._waiters.clear()
        for cb in waiters:
            cb(error, None, False)


class RendezvousMgr:
    """The rendezvous of every step running on a worker, by step id (TF's RendezvousMgr).
    `find` creates a step's rendezvous on first use (the first partition, or a RecvTensor that
    arrives before the step started); `cleanup` forgets it and fails what still waits there.
    The table needs no lock: dict get/setdefault/pop are atomic under the GIL, and a step's
    rendezvous is made once (setdefault keeps the first). `factory(step_id)` makes a step's
    rendezvous: a worker of a cluster makes ones that fetch remote tensors from their task."""

    def __init__(self, factory=None):
        self._table: dict[int, LocalRendezvous] = {}
        self._factory = factory
        self.local = factory is None  # every step's rendezvous is a LocalRendezvous

    def find(self, step_id: int) -> LocalRendezvous:
        rendezvous = self._table.get(step_id)
        if rendezvous is None:
            made = LocalRendezvous() if self._factory is None else self._factory(step_id)
            rendezvous = self._table.setdefault(step_id, made)
        return rendezvous

    def cleanup(self, step_id: int) -> None:
        rendezvous = self._table.pop(step_id, None)
        if rendezvous is not None and rendezvous._waiters:  # a receiver left waiting fails
            rendezvous.abort(errors.CancelledError(None, None, f"Step {step_id} has ended"))

    def cleanup_all(self, error: Exception) -> None:
        table, self._table = self._table, {}
        for rendezvous in table.values():
            rendezvous.abort(error)

    def __len__(self) -> int:
        return len(self._table)
