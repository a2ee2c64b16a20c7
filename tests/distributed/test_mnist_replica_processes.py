"""examples/mnist_replica.py as TF1 users launch it (whitepaper §7, Figure 7): one ps and two
worker processes on 127.0.0.1, each `flowgraph run mnist_replica.py --job_name ... --task_index
... --ps_hosts ... --worker_hosts ... --sync_replicas`, training one model whose variables live
on the ps through a SyncReplicasOptimizer with a backup worker (`--replicas_to_aggregate=1`)."""

import os
import queue
import re
import subprocess
import sys
import threading

from conftest import ROOT, free_ports

SCRIPT = ROOT / "flowgraph/examples/mnist_replica.py"
TIMEOUT_S = 120.0
STEPS = 40
UNTRAINED = 180 * 2.303  # the cross entropy of the 180 validation digits, untrained: 180 ln 10


# The `flowgraph` command (flowgraph.cli.main), dying with its parent (PR_SET_PDEATHSIG = 1).
_FLOWGRAPH = (
    "import ctypes, sys; ctypes.CDLL(None).prctl(1, 9); "
    "from flowgraph.cli import main; sys.exit(main(sys.argv[1:]))"
)


class Task:
    """`flowgraph run mnist_replica.py FLAGS` in a process that dies with the test; its stdout
    lines are read on a thread, so that waiting for one is bounded."""

    def __init__(self, flags: list[str], stderr_path):
        self._stderr = stderr_path
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _FLOWGRAPH, "run", str(SCRIPT), *flags],
            env=dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1"),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr_path.open("w"),
            text=True,
        )
        self.lines: list[str] = []
        self._queue: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self._queue.put(line)
        self._queue.put(None)  # end of output

    def wait_for(self, pattern: str) -> str:
        """The first line matching `pattern`; fails if the task ends first or takes longer
        than TIMEOUT_S."""
        while True:
            line = self._queue.get(timeout=TIMEOUT_S)
            if line is None:
                raise AssertionError(f"exited before printing {pattern!r}: {self.log()}")
            self.lines.append(line)
            if re.search(pattern, line):
                return line

    def log(self) -> str:
        return "".join(self.lines[-5:]) + self._stderr.read_text()[-2000:]

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()


def test_one_ps_and_two_workers_train_under_flowgraph_run(tmp_path):
    ps, w0, w1 = (f"127.0.0.1:{p}" for p in free_ports(3))
    common = [f"--ps_hosts={ps}", f"--worker_hosts={w0},{w1}", f"--train_steps={STEPS}"]
    common += ["--batch_size=50", "--sync_replicas", "--replicas_to_aggregate=1"]
    common += ["--stop_grace_secs=0"]
    tasks = []
    try:
        tasks.append(Task(["--job_name=ps", "--task_index=0", *common], tmp_path / "ps"))
        chief = Task(["--job_name=worker", "--task_index=0", *common], tmp_path / "w0")
        tasks.append(chief)
        # worker 1 starts once the chief has initialized the model, so that it finds the model
        # ready at once (else it waits SessionManager's 30 s, as in TensorFlow)
        chief.wait_for(r"training step 1 done")
        worker = Task(["--job_name=worker", "--task_index=1", *common], tmp_path / "w1")
        tasks.append(worker)
        for task in (chief, worker):
            final = task.wait_for(r"After \d+ training step\(s\), validation cross entropy")
            assert task.proc.wait(timeout=TIMEOUT_S) == 0, task.log()
            steps = [
                re.search(r"global step: (\d+)", line) for line in task.lines if "done" in line
            ]
            assert steps and all(steps), task.log()
            step, xent = re.search(r"After (\d+) training step\(s\), .* = (\S+)", final).groups()
            assert int(step) >= STEPS - 1  # the global step fetched by the last run
            assert float(xent) < 0.5 * UNTRAINED
    finally:
        for task in tasks:
            task.kill()
