"""D3 (issue 12): asynchronous between-graph data-parallel training (whitepaper §7, Figure 7
top) of an MLP whose variables live on one ps task, with 1, 2 and 4 worker processes, each a
tf.train.Server plus its own client Session, as mnist_replica.py runs them.

What is measured, never guessed:
- steps/s per worker and in total, over one window of wall time that every worker runs in;
- the CPU seconds per step of the ps process and of each worker process (/proc, over the same
  window), which bound what more cores could give: the ps serves every worker under one GIL;
- the fraction of a step spent in RPC, twice: from the client (the step's wall time against the
  same step in a local Session, measured here beforehand) and from StepStats of traced steps
  (the step's wall time against the time some kernel ran on the worker or the ps; a _Recv
  waiting for its tensor does not count as a kernel running).

The projection for a machine with a core per process: a worker runs a step every L seconds
(L: the step time measured with one worker), and the ps serves at most 1/P steps a second
(P: its CPU seconds per step), so N workers give min(N / L, 1 / P) steps/s.

The processes coordinate by lines on their stdin/stdout (serving, ready, go, done): no sleeps.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np

BATCH, INPUTS, HIDDEN, CLASSES = 100, 784, 100, 10  # mnist_replica's sizes


def model(tf, device_setter=None):
    """The MLP's train op and loss on synthetic in-graph data (labels from a fixed linear
    teacher, so the loss falls): no feeds, so RunStep carries no tensors."""
    teacher = np.random.default_rng(1).standard_normal((INPUTS, CLASSES)).astype(np.float32)
    with tf.device(device_setter):
        step = tf.train.get_or_create_global_step()
        w1 = tf.get_variable("w1", [INPUTS, HIDDEN], initializer=tf.glorot_uniform_initializer())
        b1 = tf.get_variable("b1", [HIDDEN], initializer=tf.zeros_initializer())
        w2 = tf.get_variable("w2", [HIDDEN, CLASSES], initializer=tf.glorot_uniform_initializer())
        b2 = tf.get_variable("b2", [CLASSES], initializer=tf.zeros_initializer())
        x = tf.random_uniform([BATCH, INPUTS], -1.0, 1.0)
        labels = tf.argmax(tf.matmul(x, tf.constant(teacher)), axis=1)
        logits = tf.matmul(tf.nn.relu(tf.matmul(x, w1) + b1), w2) + b2
        loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
        train = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
    return train, loss


def _cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds of process `pid`, all its threads (/proc/pid/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- one worker process -----------------------------------------------------------------------
def serve_worker(cluster_json: str, task: int, seconds: float, traced: int) -> None:
    """Worker `task`: serves its task, then on the parent's lines: `init` (the chief
    initializes the variables), `go` (warm-up steps, `warm`), `run` (steps for `seconds`,
    then its timings as JSON), `trace` (`traced` traced steps, then their StepStats summary),
    `close` (its session, `closed`), `quit`."""
    import flowgraph as tf

    spec = tf.train.ClusterSpec(json.loads(cluster_json))
    server = tf.train.Server(spec, job_name="worker", task_index=task)
    graph = tf.Graph()
    with graph.as_default():
        setter = tf.train.replica_device_setter(
            cluster=spec, worker_device=f"/job:worker/task:{task}"
        )
        train, loss = model(tf, setter)
        init = tf.global_variables_initializer()
    _say("serving")
    sess = None
    for line in sys.stdin:
        command = line.strip()
        if sess is None:
            sess = tf.Session(server.target, graph=graph)
        if command == "init":
            sess.run(init)
            _say("initialized")
        elif command == "go":
            for _ in range(10):
                sess.run(train)
            _say("warm")
        elif command == "run":
            _say(json.dumps(_timed_steps(sess, train, loss, seconds)))
        elif command == "trace":
            _say(json.dumps(_traced_steps(tf, sess, train, traced)))
        elif command == "close":  # every worker closes before any server stops
            sess.close()
            _say("closed")
        elif command == "quit":
            break
    server.stop()


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _timed_steps(sess, train, loss, seconds: float) -> dict:
    cpu0, t0 = _cpu_seconds(os.getpid()), time.perf_counter()
    end, samples = t0 + seconds, []
    first_loss = sess.run(loss)
    while True:
        s0 = time.perf_counter()
        sess.run(train)
        s1 = time.perf_counter()
        samples.append(s1 - s0)
        if s1 >= end:
            break
    last_loss = sess.run(loss)
    wall = time.perf_counter() - t0
    return {
        "steps": len(samples),
        "wall": wall,
        "step_median": float(np.median(samples)),
        "cpu": _cpu_seconds(os.getpid()) - cpu0,
        "loss": [float(first_loss), float(last_loss)],
    }


def _traced_steps(tf, sess, train, count: int) -> dict:
    """Medians over traced steps of the step's wall time at the client and of the time some
    kernel other than a _Send/_Recv ran on any device (StepStats; the processes share one
    clock): the rest of the step is RPC and the runtime around it."""
    options = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
    walls, computes = [], []
    for _ in range(count):
        metadata = tf.RunMetadata()
        t0 = time.perf_counter()
        sess.run(train, options=options, run_metadata=metadata)
        walls.append(time.perf_counter() - t0)
        computes.append(
            _covered(
                (n.all_start_micros, n.all_start_micros + n.all_end_rel_micros)
                for dev in metadata.step_stats.dev_stats
                for n in dev.node_stats
                if not n.timeline_label.split(" = ", 1)[-1].startswith(("_Send(", "_Recv("))
            )
            / 1e6
        )
    return {"traced_wall": float(np.median(walls)), "traced_compute": float(np.median(computes))}


def _covered(intervals) -> int:
    """Microseconds covered by the union of (start, end) intervals (kernels run together)."""
    total, reach = 0, None
    for start, end in sorted(intervals):
        if reach is None or start > reach:
            total, reach = total + end - start, end
        elif end > reach:
            total, reach = total + end - reach, end
    return total


# -- the driver -------------------------------------------------------------------------------
def local_step_seconds(steps: int) -> float:
    """The same step in a local Session: its compute (and local runtime) time."""
    import flowgraph as tf

    with tf.Graph().as_default():
        train, _ = model(tf)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            for _ in range(10):
                sess.run(train)
            samples = []
            for _ in range(steps):
                t0 = time.perf_counter()
                sess.run(train)
                samples.append(time.perf_counter() - t0)
    return float(np.median(samples))


class _Proc:
    """A child process spoken to by lines."""

    def __init__(self, args, env):
        self.popen = subprocess.Popen(
            args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
        )

    def tell(self, line: str) -> None:
        self.popen.stdin.write(line + "\n")
        self.popen.stdin.flush()

    def expect(self, what: str | None = None) -> str:
        line = self.popen.stdout.readline().strip()
        if not line or (what is not None and line != what):
            raise RuntimeError(f"D3 process {self.popen.args[-4:]} said {line!r}, not {what!r}")
        return line

    def kill(self) -> None:
        self.popen.kill()
        self.popen.wait()


def run_cluster(script: str, workers: int, seconds: float, traced: int, free_port) -> dict:
    """One cluster of 1 ps and `workers` worker processes: their timings and CPU seconds."""
    from flowgraph.distributed import grpc_worker

    repo = os.path.dirname(os.path.dirname(os.path.abspath(script)))
    env = dict(os.environ, PYTHONPATH=repo)
    spec = {
        "ps": [f"127.0.0.1:{free_port()}"],
        "worker": [f"127.0.0.1:{free_port()}" for _ in range(workers)],
    }
    cluster = f"ps={spec['ps'][0]},worker={','.join(spec['worker'])}"
    ps = subprocess.Popen(
        [sys.executable, "-m", "flowgraph", "server", "--cluster", cluster]
        + ["--job", "ps", "--task", "0"],
        env=env,
    )
    procs: list[_Proc] = []
    try:
        for task in range(workers):
            args = [sys.executable, script, "--d3-worker", json.dumps(spec), str(task)]
            procs.append(_Proc(args + [str(seconds), str(traced)], env))
        grpc_worker.wait_until_serving(spec["ps"][0], timeout=120)
        for p in procs:
            p.expect("serving")
        procs[0].tell("init")
        procs[0].expect("initialized")
        _all(procs, "go", "warm")
        cpu0 = _cpu_seconds(ps.pid)
        results = [json.loads(r) for r in _all(procs, "run")]
        ps_cpu = _cpu_seconds(ps.pid) - cpu0
        for r, trace in zip(results, _all(procs, "trace")):
            r.update(json.loads(trace))
        _all(procs, "close", "closed")
        for p in procs:
            p.tell("quit")
    finally:
        for p in procs:
            p.kill()
        ps.kill()
        ps.wait()
    return {"workers": results, "ps_cpu": ps_cpu}


def _all(procs: list[_Proc], command: str, answer: str | None = None) -> list[str]:
    for p in procs:
        p.tell(command)
    return [p.expect(answer) for p in procs]


def d3(script: str, counts: tuple, seconds: float, traced: int, free_port) -> list[str]:
    """The D3 table's lines."""
    local = local_step_seconds(20 if seconds < 2 else 100)
    rows, one = [], None
    title = (
        f"D3 async data-parallel MLP {INPUTS}-{HIDDEN}-{CLASSES}, batch {BATCH}, SGD, variables "
        f"on 1 ps; local Session step {local * 1e3:.2f} ms"
    )
    header = (
        f"{'workers':>7} {'steps/s/worker':>14} {'total':>7} {'step ms':>8} {'RPC% client':>11} "
        f"{'non-kernel% trace':>17} {'worker cpu ms':>13} {'ps cpu ms':>9} {'loss':>13}"
    )
    lines = [title, header]
    for n in counts:
        r = run_cluster(script, n, seconds, traced, free_port)
        ws = r["workers"]
        rates = [w["steps"] / w["wall"] for w in ws]
        steps = sum(w["steps"] for w in ws)
        step = float(np.median([w["step_median"] for w in ws]))
        ps_cpu = r["ps_cpu"] / steps
        worker_cpu = float(np.median([w["cpu"] / w["steps"] for w in ws]))
        trace = float(np.median([1 - w["traced_compute"] / w["traced_wall"] for w in ws]))
        loss = f"{ws[0]['loss'][0]:.2f}->{ws[0]['loss'][1]:.2f}"
        rows.append((n, sum(rates), step, ps_cpu))
        if n == 1:
            one = (step, ps_cpu)
        lines.append(
            f"{n:>7} {np.mean(rates):>14.1f} {sum(rates):>7.1f} {step * 1e3:>8.2f} "
            f"{max(step - local, 0) / step:>11.0%} {trace:>17.0%} {worker_cpu * 1e3:>13.2f} "
            f"{ps_cpu * 1e3:>9.2f} {loss:>13}"
        )
    if one is not None:
        latency, ps_cpu = one
        lines.append(
            f"D3 projected with a core per process (from 1 worker: step {latency * 1e3:.2f} ms, "
            f"ps {ps_cpu * 1e3:.2f} CPU ms/step; the ps saturates at "
            f"{latency / ps_cpu:.1f} workers):"
        )
        for n in (1, 2, 4, 8, 16):
            total = min(n / latency, 1 / ps_cpu)
            measured = next((f"{t:.1f}" for k, t, _, _ in rows if k == n), "-")
            lines.append(
                f"{n:>7} workers: {total:>7.1f} steps/s total, {total / n:>6.1f} per worker "
                f"(measured here on {os.cpu_count()} cores: {measured})"
            )
    return lines
