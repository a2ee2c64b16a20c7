"""SecondOrStepTimer: decides when a periodic training-loop hook fires, every N seconds or
every N global steps (TF1's basic_session_run_hooks.SecondOrStepTimer). Counting global steps
rather than calls to run makes a restarted or shared training loop keep the same schedule.
"""

from __future__ import annotations

import time

__all__ = ["SecondOrStepTimer"]


class SecondOrStepTimer:
    """Triggers at most once every `every_secs` seconds or every `every_steps` steps."""

    def __init__(self, every_secs=None, every_steps=None):
        self.reset()
        self._every_secs = every_secs
        self._every_steps = every_steps
        if every_secs is None and every_steps is None:
            raise ValueError("Either every_secs or every_steps should be provided.")
        if every_secs is not None and every_steps is not None:
            raise ValueError("Can not provide both every_secs and every_steps.")

    def reset(self):
        self._last_triggered_step = None
        self._last_triggered_time = None

    def should_trigger_for_step(self, step) -> bool:
        """True on the first call, then once `every_secs` passed or `every_steps` went by
        since the last trigger (never twice for one step)."""
        if self._last_triggered_step is None:
            return True
        if self._last_triggered_step == step:
            return False
        if self._every_secs is not None and time.time() >= (
            self._last_triggered_time + self._every_secs
        ):
            return True
        return self._every_steps is not None and step >= (
            self._last_triggered_step + self._every_steps
        )

    def update_last_triggered_step(self, step):
        """Records a trigger at `step`; returns (seconds, steps) since the last one (None,
        None the first time)."""
        now = time.time()
        if self._last_triggered_time is None:
            elapsed = (None, None)
        else:
            elapsed = (now - self._last_triggered_time, step - self._last_triggered_step)
        self._last_triggered_time = now
        self._last_triggered_step = step
        return elapsed

    def last_triggered_step(self):
        return self._last_triggered_step
