"""Distributed benchmarks (issue 12): D1 RecvTensor throughput between two processes against a
raw TCP socket copy in the same run, D2 the per-step overhead of the gRPC master against a
local Session, and D3 asynchronous data-parallel training with 1, 2 and 4 worker processes
(bench/dist_training.py). Prints tables; timings are never asserted (see bench/README.md).

Usage: python bench/distributed.py [--only D1,D2,D3] [--quick]
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
from concurrent import futures

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(BENCH_DIR)
sys.path.insert(0, REPO_ROOT)

import numpy as np
from dist_training import d3, serve_worker

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
def serve_sender(grpc_port: int, floor_port: int, raw_port: int, steps: int) -> None:
    """The sending worker: serves a Worker whose rendezvous holds the 64 MiB tensor for steps
    1..steps; serves gRPC's floor (the same bytes as prebuilt 1 MiB chunks, no tensor, no
    copy) on floor_port; sends the bytes over a raw socket to whoever connects to raw_port,
    once per request byte."""
    import grpc

    from flowgraph.core.protos import ClusterDef
    from flowgraph.distributed import grpc_server, task_services
    from flowgraph.distributed.tensor_stream import CHUNK_BYTES

    value = np.random.default_rng(0).standard_normal(D1_BYTES // 4).astype(np.float32)
    cluster = ClusterDef()
    cluster.job.add(name="sender").tasks[0] = f"127.0.0.1:{grpc_port}"
    cluster.job.add(name="receiver").tasks[0] = f"127.0.0.1:{_free_port()}"
    server = grpc_server.GrpcServer(task_services.server_def(cluster, "sender", 0))
    for step in range(1, steps + 1):
        server.services.worker.rendezvous_mgr.find(step).send(D1_KEY, value)
    raw = value.view(np.uint8)
    chunks = [raw[i : i + CHUNK_BYTES].tobytes() for i in range(0, D1_BYTES, CHUNK_BYTES)]
    floor = grpc.server(futures.ThreadPoolExecutor(4))
    handler = grpc.unary_stream_rpc_method_handler(lambda request, context: iter(chunks))
    floor.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("Floor", {"S": handler}),))
    floor.add_insecure_port(f"127.0.0.1:{floor_port}")
    floor.start()
    with socket.create_server(("127.0.0.1", raw_port)) as listener:
        server.start()  # last: the receiver takes a serving worker as "all three are ready"
        conn, _ = listener.accept()
        with conn:
            while conn.recv(1):  # the receiver is ready for the next copy
                conn.sendall(memoryview(raw))
    server.join()


def d1(steps: int) -> dict:
    """MB/s of RecvTensor (by socket, raw_transport.py, as flowgraph peers take it; and by
    the chunked gRPC stream), of gRPC's floor and of a raw socket copy, between two
    processes, taken in turn step by step (the sender holds the tensor for 2 * steps)."""
    import grpc

    from flowgraph.distributed import grpc_worker
    from flowgraph.distributed import messages as m

    ports = [_free_port() for _ in range(3)]
    sender = subprocess.Popen(
        [sys.executable, __file__, "--serve-sender", *map(str, ports), str(2 * steps)],
        env=dict(os.environ, PYTHONPATH=REPO_ROOT),
    )
    times: dict[str, list] = {"recv": [], "grpc": [], "floor": [], "raw": []}
    buffer = np.empty(D1_BYTES, dtype=np.uint8)
    try:
        address = f"127.0.0.1:{ports[0]}"
        grpc_worker.wait_until_serving(address, timeout=120)
        cache = grpc_worker.GrpcWorkerCache(_two_task_cluster(address))
        peer = cache.get_worker("/job:sender/replica:0/task:0")
        floor = grpc.insecure_channel(f"127.0.0.1:{ports[1]}").unary_stream("/Floor/S")
        conn = socket.create_connection(("127.0.0.1", ports[2]), timeout=60)
        for step in range(1, steps + 1):
            tr = time.perf_counter()
            received = _recv(peer, m.RecvTensorRequest(step, D1_KEY))
            t0 = time.perf_counter()
            response = peer.recv_tensor(m.RecvTensorRequest(steps + step, D1_KEY), raw=False)
            t1 = time.perf_counter()
            offset = 0
            for chunk in floor(b"", timeout=60):
                buffer[offset : offset + len(chunk)] = np.frombuffer(chunk, np.uint8)
                offset += len(chunk)
            t2 = time.perf_counter()
            _raw_copy(conn, buffer)
            t3 = time.perf_counter()
            assert received.tensor.nbytes == response.tensor.nbytes == offset == D1_BYTES
            laps = (("recv", t0 - tr), ("grpc", t1 - t0), ("floor", t2 - t1), ("raw", t3 - t2))
            for name, t in laps:
                times[name].append(t)
        conn.close()
        cache.close()
    finally:
        sender.kill()
        sender.wait()
    return {name: D1_BYTES / 1e6 / statistics.median(ts) for name, ts in times.items()}


def _raw_copy(conn: socket.socket, buffer: np.ndarray) -> None:
    """One copy of the tensor's bytes over the raw socket into `buffer` (recv_into)."""
    view = memoryview(buffer)
    conn.sendall(b"r")
    got = 0
    while got < D1_BYTES:
        got += conn.recv_into(view[got:])


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


# -- D2: per-step overhead of the gRPC master -------------------------------------------------
def d2(steps: int) -> dict:
    """ms per trivial step (a feed, an add, a fetch): in a local Session; through the master of
    server process 0 with the add on its own worker (one in-process RunGraph); and with the add
    on server process 1 (one RunGraph to task 1, by socket (raw_calls.py), the feed in its
    request and the fetch in its response: master_session.py)."""
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
    parser.add_argument("--only", default="D1,D2,D3")
    parser.add_argument("--quick", action="store_true", help="few steps (the smoke test)")
    parser.add_argument("--serve-sender", nargs=4, type=int, help=argparse.SUPPRESS)
    parser.add_argument("--d3-worker", nargs=4, help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.serve_sender:
        serve_sender(*opts.serve_sender)
        return 0
    if opts.d3_worker:
        cluster, task, seconds, traced = opts.d3_worker
        serve_worker(cluster, int(task), float(seconds), int(traced))
        return 0
    only = set(opts.only.split(","))
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    if "D1" in only:
        r = d1(steps=2 if opts.quick else 8)
        print(
            f"D1 RecvTensor 64 MiB float32: {r['recv']:.0f} MB/s (socket transport), gRPC "
            f"stream {r['grpc']:.0f} MB/s, gRPC floor (prebuilt chunks) {r['floor']:.0f} MB/s, "
            f"raw socket {r['raw']:.0f} MB/s; RecvTensor/raw {r['recv'] / r['raw']:.2f} "
            f"(target >= 1000 MB/s: {'met' if r['recv'] >= 1000 else 'not met'})"
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
    if "D3" in only:
        counts = (1, 2) if opts.quick else (1, 2, 4)
        seconds, traced = (0.5, 3) if opts.quick else (8.0, 20)
        for line in d3(__file__, counts, seconds, traced, _free_port):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
