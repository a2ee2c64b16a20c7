"""The queue kernels of I2 alone (issue 11): the trainer's QueueDequeueManyV2 on a
RandomShuffleQueue(1280, min_after_dequeue 256) of [64] float32 + int64, n=64, and a reader's
QueueEnqueueManyV2 of 64 elements, into a queue with room and into a full one (it parks; the
dequeue that makes room wakes it, on the trainer's thread). Every microsecond of these counts
1:1 against I2's step (the input threads share the GIL with the trainer).

Prints the CPU time per kernel call (thread_time; the load is printed with it), the kernels
called as the executor calls them, without a session: `PYTHONPATH=$PWD python
bench/queue_kernels.py` (N=20000 calls per case by default). For an A/B, run it against two
trees interleaved.
"""

from __future__ import annotations

import os
import time

import numpy as np

from flowgraph.core import dtypes
from flowgraph.core.cancellation import CancellationManager
from flowgraph.core.shapes import TensorShape
from flowgraph.kernels.cpu import data_flow, queue_kinds

TYPES = [dtypes.float32, dtypes.int64]


class _Ctx:
    """The parts of a kernel context the queue kernels read."""

    def __init__(self, op_type, input_types, output_types):
        self.state = None
        self.attrs = {"timeout_ms": -1}
        self.op_type = op_type
        self.input_types = input_types
        self.output_types = output_types


class _Step:
    def __init__(self):
        self.cancellation = CancellationManager()


def _case(n: int) -> dict:
    q = queue_kinds.RandomShuffleQueue(
        "q", TYPES, [TensorShape([64]), TensorShape([])], 1280, 256, 1, 0
    )
    deq_kernel = data_flow._dequeue_many_kernel(False)
    enq_kernel = data_flow._enqueue_kernel(True)
    deq_ctx = _Ctx("QueueDequeueManyV2", [dtypes.resource, dtypes.int32], TYPES)
    enq_ctx = _Ctx("QueueEnqueueManyV2", [dtypes.resource, *TYPES], [])
    x = np.random.default_rng(0).random((64, 64), dtype=np.float32)
    y = np.arange(64, dtype=np.int64)
    step, count = _Step(), np.int32(64)

    def done(value=None, error=None):  # the batch is dropped, as a step drops its fetches
        assert error is None, error

    def deq():
        deq_kernel(deq_ctx, step, done, q, count)

    def enq():
        enq_kernel(enq_ctx, step, done, q, x, y)

    clock = time.thread_time
    result = {}
    for full in (False, True):
        while q.size() < (1280 if full else 1024):
            enq()
        first = second = 0.0
        for _ in range(n):
            t0 = clock()
            (enq if full else deq)()
            t1 = clock()
            (deq if full else enq)()
            second += clock() - t1
            first += t1 - t0
        names = (
            ("enqueue_many parks", "dequeue_many + wake")
            if full
            else ("dequeue_many", "enqueue_many")
        )
        result[names[0]] = first / n * 1e6
        result[names[1]] = second / n * 1e6
    return result


def main() -> None:
    n = int(os.environ.get("N", "20000"))
    _case(1000)  # warm: compiled loops loaded, arrays grown
    load = os.getloadavg()[0]
    for name, us in _case(n).items():
        print(f"{name:22s} {us:6.2f} us CPU  (load {load:.2f})")


if __name__ == "__main__":
    main()
