"""Distributed benchmarks (issue 12): D1 RecvTensor throughput between two processes against a
raw TCP socket copy in the same run, and D2 the per-step overhead of the gRPC master against
a local Session. Prints one table; timings are never asserted (see bench/README.md).

Usage: python bench/distributed.py [--only D1,D2] [--quick]
"""

from __future__ import annotations

import argparse
import os
import queue
import socket
import statistics
import subprocess
import sys
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(BENCH_DIR)
sys.path.insert(0, REPO_ROOT)

import numpy as np

from flowgraph.core.rendezvous_keys import make_key

D1_BYTES = 64 << 20  # a 64 MiB float32 tensor
D1_KEY = make_key(
    "/job:sender/replica:0/task:0/device:CPU:0",
    1,
    "/job:receiver/replica:0/task:0/device:CPU:0",
    "x:0",
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- D1: the sending process ------------------------------------------------------------------
def serve_sender(grpc_port: int, raw_port: int, steps: int) -> None:
    """The sending worker: serves a Worker whose rendezvous holds the 64 MiB tensor for steps
    1..steps, and sends it `steps` times over a raw socket to whoever connects to raw_port."""
    from flowgraph.core.protos import ClusterDef
    from flowgraph.distributed import grpc_server, task_services

    value = np.random.default_rng(0).standard_normal(D1_BYTES // 4).astype(np.float32)
    cluster = ClusterDef()
    cluster.job.add(name="sender").tasks[0] = f"127.0.0.1:{grpc_port}"
    cluster.job.add(name="receiver").tasks[0] = f"127.0.0.1:{_free_port()}"
    server_def = task_services.server_def(cluster, "sender", 0)
    server = grpc_server.GrpcServer(server_def)
    worker = server.services.worker
    for step in range(1, steps + 1):
        worker.rendezvous_mgr.find(step).send(D1_KEY, value)
    server.start()
    with socket.create_server(("127.0.0.1", raw_port)) as listener:
        conn, _ = listener.accept()
        with conn:
            view = memoryview(value.view(np.uint8))
            for _ in range(steps):
                conn.recv(1)  # the receiver is ready for the next copy
                conn.sendall(view)
    print("sender done", flush=True)
    server.join()


def d1(steps: int) -> dict:
    """MB/s of RecvTensor (gRPC stream) and of a raw socket copy, between two processes."""
    from flowgraph.distributed import grpc_worker
    from flowgraph.distributed import messages as m

    grpc_port, raw_port = _free_port(), _free_port()
    sender = subprocess.Popen(
        [sys.executable, __file__, "--serve-sender", str(grpc_port), str(raw_port), str(steps)],
        env=dict(os.environ, PYTHONPATH=REPO_ROOT),
    )
    try:
        address = f"127.0.0.1:{grpc_port}"
        grpc_worker.wait_until_serving(address, timeout=120)
        cache = grpc_worker.GrpcWorkerCache(_two_task_cluster(address))
        peer = cache.get_worker("/job:sender/replica:0/task:0")
        grpc_times = []
        for step in range(1, steps + 1):
            t0 = time.perf_counter()
            response = _recv(peer, m.RecvTensorRequest(step, D1_KEY))
            grpc_times.append(time.perf_counter() - t0)
            assert response.tensor.nbytes == D1_BYTES
        cache.close()
        raw_times = _raw_copies(raw_port, steps)
    finally:
        sender.kill()
        sender.wait()
    mb = D1_BYTES / 1e6
    grpc_mbs, raw_mbs = mb / statistics.median(grpc_times), mb / statistics.median(raw_times)
    return {"grpc MB/s": grpc_mbs, "raw socket MB/s": raw_mbs, "grpc/raw": grpc_mbs / raw_mbs}


def _recv(peer, request):
    """A RecvTensor the way a worker's rendezvous makes it (recv_tensor_async, answered on
    the transport's own threads), waited for here."""
    got = queue.Queue()
    peer.recv_tensor_async(request, lambda error, response: got.put((error, response)))
    error, response = got.get()
    if error is not None:
        raise error
    return response


def _two_task_cluster(sender_address: str):
    from flowgraph.core.protos import ClusterDef

    cluster = ClusterDef()
    cluster.job.add(name="sender").tasks[0] = sender_address
    return cluster


def _raw_copies(port: int, steps: int) -> list[float]:
    """Receives `steps` copies of the tensor into one preallocated buffer (recv_into)."""
    buffer = np.empty(D1_BYTES, dtype=np.uint8)
    view = memoryview(buffer)
    times = []
    conn = socket.create_connection(("127.0.0.1", port), timeout=60)  # listens once serving
    with conn:
        for _ in range(steps):
            t0 = time.perf_counter()
            conn.sendall(b"r")
            got = 0
            while got < D1_BYTES:
                got += conn.recv_into(view[got:])
            times.append(time.perf_counter() - t0)
    return times


# -- D2: per-step overhead of the gRPC master -------------------------------------------------
def d2(steps: int) -> dict:
    """ms per trivial step (a feed, an add, a fetch): in a local Session; through the master of
    server process 0 with the add on its own worker (one in-process RunGraph); and with the add
    on server process 1 (RunGraph by RPC to task 1, which receives the feed from task 0 by
    RecvTensor)."""
    import flowgraph as tf
    from flowgraph.distributed import grpc_worker

    addresses = [f"127.0.0.1:{_free_port()}" for _ in range(2)]
    cluster = "worker=" + ",".join(addresses)
    servers = [
        subprocess.Popen(
            [sys.executable, "-m", "flowgraph", "server", "--cluster", cluster]
            + ["--job", "worker", "--task", str(i)],
            env=dict(os.environ, PYTHONPATH=REPO_ROOT),
        )
        for i in range(2)
    ]
    try:
        for address in addresses:
            grpc_worker.wait_until_serving(address, timeout=120)
        target = f"grpc://{addresses[0]}"
        runs = (("local", "", None), ("grpc", target, 0), ("grpc 2 tasks", target, 1))
        times = {name: _step_ms(tf, target, task, steps) for name, target, task in runs}
    finally:
        for server in servers:
            server.kill()
            server.wait()
    return times


def _step_ms(tf, target: str, task, steps: int) -> float:
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [4])
        with tf.device(None if task is None else f"/job:worker/task:{task}"):
            y = x + 1.0
        with tf.Session(target) as sess:
            feed = {x: np.ones(4, np.float32)}
            for _ in range(20):  # warm-up: Extend, registration, caches
                sess.run(y, feed)
            samples = []
            for _ in range(steps):
                t0 = time.perf_counter()
                sess.run(y, feed)
                samples.append(time.perf_counter() - t0)
    return statistics.median(samples) * 1e3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="D1,D2")
    parser.add_argument("--quick", action="store_true", help="few steps (the smoke test)")
    parser.add_argument("--serve-sender", nargs=3, type=int, help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.serve_sender:
        serve_sender(*opts.serve_sender)
        return 0
    only = set(opts.only.split(","))
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    if "D1" in only:
        r = d1(steps=2 if opts.quick else 8)
        print(
            f"D1 RecvTensor 64 MiB float32: gRPC stream {r['grpc MB/s']:.0f} MB/s, raw socket "
            f"{r['raw socket MB/s']:.0f} MB/s, ratio {r['grpc/raw']:.2f} (target >= 1000 MB/s: "
            f"{'met' if r['grpc MB/s'] >= 1000 else 'not met'})"
        )
    if "D2" in only:
        r = d2(steps=50 if opts.quick else 500)
        for name in ("grpc", "grpc 2 tasks"):
            overhead = r[name] - r["local"]
            print(
                f"D2 trivial step, {name}: {r[name]:.3f} ms against {r['local']:.3f} ms in a "
                f"local Session, overhead {overhead:.3f} ms (target <= 2 ms: "
                f"{'met' if overhead <= 2 else 'not met'})"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
