"""Waiting without a thread (whitepaper §5.3): how an async kernel that must wait (a dequeue from
an empty queue, an enqueue into a full one, a barrier's take) learns that its step was cancelled.

A blocked kernel parks no thread: it leaves a continuation with the resource it waits on and
returns. If its step ends first (RunOptions.timeout_in_ms, Session.close, another kernel's
failure), the continuation must be withdrawn from the resource and called with the step's
error, or a later producer would hand a value to a step that no longer exists.

`CancelHook` is the one place that knows how a step announces its cancellation. Today the step
aborts its rendezvous on every such end (runtime/executor.py, runtime/direct.py), so the hook
waits on a private rendezvous key: an abort calls it with the error, and `disarm` satisfies the
key once the wait ended normally. When the per-step cancellation manager arrives (issue 8), only
this class changes.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from flowgraph.core import errors

_ids = itertools.count()


class CancelHook:
    """Calls `on_cancel(error)` at most once, if the step is cancelled before `disarm()`."""

    __slots__ = ("_key", "_on_cancel", "_rendezvous")

    def __init__(self, step, on_cancel: Callable[[errors.OpError], None]):
        self._rendezvous = step.rendezvous
        self._key = f"__blocked_kernel;{next(_ids)}"
        self._on_cancel = on_cancel

    def arm(self) -> None:
        """Starts watching; fires at once if the step is already cancelled."""
        self._rendezvous.recv_async(self._key, self._fire)

    def disarm(self) -> None:
        """The wait ended normally: the hook will not fire (safe before or after `arm`)."""
        try:
            self._rendezvous.send(self._key, None)
        except errors.OpError:  # the step was aborted meanwhile; the hook fired or will not
            pass

    def _fire(self, error, value, is_dead) -> None:
        if error is not None:
            self._on_cancel(error)
