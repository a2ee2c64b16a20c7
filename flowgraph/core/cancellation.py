"""Cancellation of a step (TensorFlow's CancellationManager): one per step, so that
`Session.close()`, an expired `RunOptions.timeout_in_ms` or a failing kernel ends every pending
asynchronous kernel of the step (a blocked _Recv, a dequeue from an empty queue) at once,
instead of leaving the step waiting for values that will never come.

Whoever waits on behalf of the step registers a callback under a token; `start_cancel(error)`
calls every registered callback once with the error, and a callback registered afterwards is
refused (`register_callback` returns False) so its owner fails at once. Kernels reach the
manager through their step context (`step.cancellation`).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable

from flowgraph.core import errors

_tokens = itertools.count()


class CancellationManager:
    """Registered callbacks and the cancelled flag of one step. Guarded by `_lock`; callbacks
    run outside it, in the thread that cancels."""

    __slots__ = ("_callbacks", "_error", "_lock")

    def __init__(self):
        self._lock = threading.Lock()
        self._callbacks: dict[int, Callable] = {}  # guarded by _lock
        self._error: errors.OpError | None = None  # guarded by _lock; set once

    @property
    def is_cancelled(self) -> bool:
        return self._error is not None

    @property
    def error(self) -> errors.OpError | None:
        """The error the step was cancelled with (None while it is not)."""
        return self._error

    def get_cancellation_token(self) -> int:
        return next(_tokens)  # unique in the process: atomic under the GIL

    def register_callback(self, token: int, callback: Callable[[errors.OpError], None]) -> bool:
        """Calls `callback(error)` when the step is cancelled; False (and no call) when it
        already is."""
        with self._lock:
            if self._error is not None:
                return False
            self._callbacks[token] = callback
            return True

    def deregister_callback(self, token: int) -> bool:
        """Forgets `token`'s callback; False when cancellation already took it (it has run or
        is running)."""
        with self._lock:
            return self._callbacks.pop(token, None) is not None

    def start_cancel(self, error: errors.OpError | None = None) -> bool:
        """Cancels the step with `error` (CancelledError by default); False if it already was."""
        if error is None:
            error = errors.CancelledError(None, None, "The step was cancelled")
        with self._lock:
            if self._error is not None:
                return False
            self._error = error
            callbacks, self._callbacks = list(self._callbacks.values()), {}
        for callback in callbacks:
            callback(error)
        return True

    def __len__(self) -> int:
        """Callbacks registered now (tests and debugging)."""
        with self._lock:
            return len(self._callbacks)
