"""Every test starts with a fresh default graph and no default session. The `runs` fixture of
the executor tests counts which path ran each step (fixed schedule or dispatch loop)."""

import pytest

from flowgraph.framework import default_graph
from flowgraph.runtime import executor
from flowgraph.runtime.schedule import Schedule
from flowgraph.session import default_session


@pytest.fixture(autouse=True)
def _fresh_default_graph():
    default_graph._stack.clear()
    default_graph.reset()
    default_session._stack.clear()
    yield
    default_graph._stack.clear()
    default_session._stack.clear()


@pytest.fixture
def runs(monkeypatch):
    """Counts the steps that ran the fixed schedule and those that ran the dispatch loop."""
    counts = {"schedule": 0, "loop": 0}
    schedule_run, loop_run = Schedule.run, executor._Execution.run

    def on_schedule(self, *args):
        counts["schedule"] += 1
        return schedule_run(self, *args)

    def on_loop(self):
        counts["loop"] += 1
        return loop_run(self)

    monkeypatch.setattr(Schedule, "run", on_schedule)
    monkeypatch.setattr(executor._Execution, "run", on_loop)
    return counts
