"""A cluster of real server processes on free 127.0.0.1 ports (`flowgraph server ...`).

`grpc_cluster({"ps": 1, "worker": 2})` starts one process per task, waits until each answers
GetStatus (no sleeps: the call itself waits for the server to come up, within a deadline) and
kills every process when the test ends, however it ends. The children also die with the test
process (PR_SET_PDEATHSIG), so a crashed pytest leaves nothing running.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S = 60.0  # process start (imports ~2 s, longer on a busy machine) and bind


def free_ports(n: int) -> list[int]:
    """n distinct ports that were free on 127.0.0.1 a moment ago."""
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


# `flowgraph server ARGS`, dying with its parent (PR_SET_PDEATHSIG = 1, kept across exec).
_LAUNCH = (
    "import ctypes, sys; ctypes.CDLL(None).prctl(1, 9); "
    "from flowgraph.cli import main; sys.exit(main(sys.argv[1:]))"
)


class Cluster:
    """Running server processes by (job, task), their ClusterSpec dict and their targets."""

    def __init__(self, tasks: dict[str, int]):
        ports = iter(free_ports(sum(tasks.values())))
        self.spec = {
            job: [f"127.0.0.1:{next(ports)}" for _ in range(n)] for job, n in tasks.items()
        }
        self.procs: dict[tuple[str, int], subprocess.Popen] = {}

    def address(self, job: str, task: int = 0) -> str:
        return self.spec[job][task]

    def target(self, job: str, task: int = 0) -> str:
        return f"grpc://{self.address(job, task)}"

    def cluster_arg(self) -> str:
        return ",".join(f"{job}=" + ",".join(addrs) for job, addrs in self.spec.items())

    def start(self, job: str, task: int) -> None:
        """Starts task job:task (again, after `kill`) and waits until it serves."""
        cmd = [sys.executable, "-c", _LAUNCH, "server", "--cluster", self.cluster_arg()]
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.procs[job, task] = subprocess.Popen(
            [*cmd, "--job", job, "--task", str(task)],
            env=env,
            stdin=subprocess.DEVNULL,
        )

    def start_all(self) -> None:
        for job, addrs in self.spec.items():
            for task in range(len(addrs)):
                self.start(job, task)
        for job, task in list(self.procs):
            self.wait_ready(job, task)

    def wait_ready(self, job: str, task: int) -> None:
        from flowgraph.distributed import grpc_worker

        proc = self.procs[job, task]
        try:
            grpc_worker.wait_until_serving(self.address(job, task), timeout=READY_TIMEOUT_S)
        except Exception:
            if proc.poll() is not None:
                raise RuntimeError(f"task {job}:{task} exited with {proc.returncode}") from None
            raise

    def kill(self, job: str, task: int) -> None:
        """SIGKILLs task job:task and reaps it."""
        proc = self.procs.pop((job, task))
        proc.kill()
        proc.wait()

    def close(self) -> None:
        for key in list(self.procs):
            self.kill(*key)


@pytest.fixture
def grpc_cluster():
    """grpc_cluster({"ps": 1, "worker": 2}) -> a started Cluster; every process is killed after."""
    started = []

    def make(tasks: dict[str, int]) -> Cluster:
        c = Cluster(tasks)
        started.append(c)
        c.start_all()
        return c

    yield make
    for c in started:
        c.close()


def _shared(tasks: dict[str, int]):
    c = Cluster(tasks)
    try:
        c.start_all()
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def ps_worker_cluster():
    """One ps and two workers shared by a module's tests that leave every task running."""
    yield from _shared({"ps": 1, "worker": 2})


@pytest.fixture(scope="module")
def ps_worker_pair():
    """One ps and one worker (two processes) shared by a module's tests."""
    yield from _shared({"ps": 1, "worker": 1})
