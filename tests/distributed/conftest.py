"""A cluster of real server processes on free 127.0.0.1 ports (`flowgraph server ...`).

`grpc_cluster({"ps": 1, "worker": 2})` starts one process per task, waits until each answers
GetStatus (no sleeps: the call itself waits for the server to come up, within a deadline) and
kills every process when the test ends, however it ends.

The processes are forked from a launcher that has imported flowgraph once (a "zygote"): a task
(re)starts in ~0.1 s instead of the seconds a fresh interpreter spends importing flowgraph, so
the fault tests can kill and restart tasks many times. The launcher imports but runs nothing
(no gRPC channel or server, one thread: BLAS is single-threaded, as servers run it anyway), so
forking it is safe. The launcher dies with the test process and the tasks with the launcher
(PR_SET_PDEATHSIG), so a crashed pytest leaves nothing running.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S = 60.0  # the launcher's imports (~2 s, longer on a busy machine) and bind
EXIT_TIMEOUT_S = 10.0


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


# The launcher: dies with its parent (PR_SET_PDEATHSIG = 1, signal 9), imports flowgraph, then
# forks one task per line of JSON arguments on stdin and answers with the task's pid.
_LAUNCHER = r"""
import ctypes, json, os, signal, sys
libc = ctypes.CDLL(None)
libc.prctl(1, 9)
from flowgraph.cli import main
signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the tasks
for line in sys.stdin:
    args = json.loads(line)
    pid = os.fork()
    if pid == 0:
        libc.prctl(1, 9)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        code = 1
        try:
            code = main(args) or 0
        finally:
            os._exit(code)
    print(pid, flush=True)
"""


class Launcher:
    """The zygote process (see the module docstring): `start(args)` forks a task, its pid."""

    def __init__(self):
        env = dict(os.environ, PYTHONPATH=str(ROOT), OPENBLAS_NUM_THREADS="1")
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _LAUNCHER],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def start(self, args: list[str]) -> int:
        self._proc.stdin.write(json.dumps(args) + "\n")
        self._proc.stdin.flush()
        line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the task launcher exited with {self._proc.wait()}")
        return int(line)

    def close(self) -> None:
        self._proc.kill()
        self._proc.wait()


class Task:
    """A forked task process: killed with SIGKILL, its exit awaited through a pidfd."""

    def __init__(self, pid: int):
        self.pid = pid
        self._fd = os.pidfd_open(pid)

    def exited(self, timeout: float = 0.0) -> bool:
        return bool(select.select([self._fd], [], [], timeout)[0])

    def kill(self) -> None:
        try:
            signal.pidfd_send_signal(self._fd, signal.SIGKILL)
        except ProcessLookupError:
            pass  # it is gone already
        if not self.exited(EXIT_TIMEOUT_S):
            raise RuntimeError(f"task process {self.pid} did not exit after SIGKILL")
        os.close(self._fd)

    def stop(self) -> None:
        """SIGSTOP: the task hangs, its sockets stay open (a hung, not a dead, task)."""
        signal.pidfd_send_signal(self._fd, signal.SIGSTOP)

    def cont(self) -> None:
        """SIGCONT: a stopped task runs again."""
        signal.pidfd_send_signal(self._fd, signal.SIGCONT)


_launcher: Launcher | None = None


def launcher() -> Launcher:
    """This test process's launcher, started on first use, killed at exit."""
    global _launcher
    if _launcher is None:
        _launcher = Launcher()
    return _launcher


def pytest_sessionfinish(session, exitstatus):
    if _launcher is not None:
        _launcher.close()


class Cluster:
    """Running server processes by (job, task), their ClusterSpec dict and their targets."""

    def __init__(self, tasks: dict[str, int]):
        ports = iter(free_ports(sum(tasks.values())))
        self.spec = {
            job: [f"127.0.0.1:{next(ports)}" for _ in range(n)] for job, n in tasks.items()
        }
        self.procs: dict[tuple[str, int], Task] = {}

    def address(self, job: str, task: int = 0) -> str:
        return self.spec[job][task]

    def target(self, job: str, task: int = 0) -> str:
        return f"grpc://{self.address(job, task)}"

    def cluster_arg(self) -> str:
        return ",".join(f"{job}=" + ",".join(addrs) for job, addrs in self.spec.items())

    def start(self, job: str, task: int) -> None:
        """Starts task job:task (again, after `kill`); `wait_ready` waits until it serves."""
        args = ["server", "--cluster", self.cluster_arg(), "--job", job, "--task", str(task)]
        self.procs[job, task] = Task(launcher().start(args))

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
            if proc.exited():
                raise RuntimeError(f"task {job}:{task} exited") from None
            raise

    def restart(self, job: str, task: int) -> None:
        self.start(job, task)
        self.wait_ready(job, task)

    def kill(self, job: str, task: int) -> None:
        """SIGKILLs task job:task and waits until it is gone."""
        self.procs.pop((job, task)).kill()

    def stop(self, job: str, task: int) -> None:
        """SIGSTOPs task job:task: it hangs with its sockets open (`kill` ends it)."""
        self.procs[job, task].stop()

    def cont(self, job: str, task: int) -> None:
        """SIGCONTs task job:task after `stop`."""
        self.procs[job, task].cont()

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
