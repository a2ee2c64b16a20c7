"""The queues' common cases skip the attempt machinery (kernels/cpu/queue_base.py): an enqueue
into a full queue that nothing else waits on parks without a serving pass, a dequeue that makes
room serves only the waiting enqueues, and an enqueue_many of the shapes that passed last time
is not checked again. These tests hold those paths to the general one's behaviour: order,
cancellation, close, and the shape checks."""

import numpy as np
import pytest

from flowgraph.core import dtypes, errors
from flowgraph.core.cancellation import CancellationManager
from flowgraph.core.shapes import TensorShape
from flowgraph.kernels.cpu import queue_kinds


class _Step:
    def __init__(self):
        self.cancellation = CancellationManager()


def _fifo(capacity=4):
    return queue_kinds.FIFOQueue("q", [dtypes.int64], [TensorShape([])], capacity)


def _push(q, step, values, box):
    batch = q.validate([np.array(values, np.int64)], batched=True)
    q.enqueue(step, batch, lambda *a: box.append(a))


def _take_many(q, n):
    box = []
    q.dequeue_many(None, n, lambda *a: box.append(a))
    ((out, *error),) = box
    assert not error
    return out.tolist()


def test_a_parked_enqueue_is_pushed_when_a_dequeue_makes_room():
    q, step, box = _fifo(), _Step(), []
    _push(q, step, [0, 1, 2, 3], box)
    _push(q, step, [4, 5], box)  # full: it parks, its cancellation hook armed
    assert box == [()] and len(step.cancellation) == 1 and q.size() == 4
    assert _take_many(q, 1) == [0]  # room for one: pushed in part, still waiting
    assert box == [()] and q.size() == 4
    assert _take_many(q, 3) == [1, 2, 3]
    assert box == [(), ()] and len(step.cancellation) == 0  # done, hook disarmed
    assert _take_many(q, 2) == [4, 5]


def test_a_parked_enqueue_fails_when_its_step_is_cancelled_or_the_queue_closes():
    q, step, box = _fifo(), _Step(), []
    _push(q, _Step(), [0, 1, 2, 3], [])
    _push(q, step, [4], box)
    step.cancellation.start_cancel()
    ((value, error),) = box
    assert value is None and isinstance(error, errors.CancelledError)
    assert q.size() == 4
    later = []
    _push(q, _Step(), [5], later)  # parks again: the cancelled one is gone
    q.close(_Step(), False, lambda *a: later.append(("closed", *a)))
    assert later == []  # the close waits behind the enqueue
    assert _take_many(q, 2) == [0, 1]
    assert later == [(), ("closed",)] and q.is_closed()
    assert _take_many(q, 3) == [2, 3, 5]


def test_shapes_that_passed_before_are_still_checked_when_they_differ():
    q = queue_kinds.FIFOQueue("q", [dtypes.float32] * 2, [TensorShape([2])] * 2, 10)
    ok = [np.zeros((3, 2), np.float32)] * 2
    assert q.validate(ok, batched=True)[0] is ok[0]
    assert q.validate(ok, batched=True)[0] is ok[0]
    with pytest.raises(errors.InvalidArgumentError, match=r"Expected \[batch_size,2\]"):
        q.validate([np.zeros((3, 4), np.float32), ok[1]], batched=True)
    with pytest.raises(errors.InvalidArgumentError, match="same size in the 0th"):
        q.validate([ok[0], np.zeros((2, 2), np.float32)], batched=True)
    with pytest.raises(errors.InvalidArgumentError, match=r"Expected \[batch_size,2\], got \[\]"):
        q.validate([np.float32(1), np.float32(2)], batched=True)
