"""Waiting without a thread (whitepaper §5.3): how an async kernel that must wait (a dequeue from
an empty queue, an enqueue into a full one, a barrier's take) learns that its step was cancelled.

A blocked kernel parks no thread: it leaves a continuation with the resource it waits on and
returns. If its step ends first (RunOptions.timeout_in_ms, Session.close, another kernel's
failure), the continuation must be withdrawn from the resource and called with the step's
error, or a later producer would hand a value to a step that no longer exists.

`CancelHook` is the one place that knows how a step announces its cancellation: it registers
with the step's cancellation manager (core/cancellation.py), which `Session.close()`, the step's
deadline and a failing kernel trigger.
"""

from __future__ import annotations

from collections.abc import Callable

from flowgraph.core import errors


class CancelHook:
    """Calls `on_cancel(error)` at most once, if the step is cancelled before `disarm()`."""

    __slots__ = ("_manager", "_on_cancel", "_token")

    def __init__(self, step, on_cancel: Callable[[errors.OpError], None]):
        self._manager = step.cancellation
        self._token = self._manager.get_cancellation_token()
        self._on_cancel = on_cancel

    def arm(self) -> None:
        """Starts watching; fires at once if the step is already cancelled."""
        if not self._manager.register_callback(self._token, self._on_cancel):
            self._on_cancel(self._manager.error)

    def disarm(self) -> None:
        """The wait ended normally: the hook will not fire (safe before or after `arm`); if
        the step was cancelled meanwhile, the hook fired or is firing."""
        self._manager.deregister_callback(self._token)
