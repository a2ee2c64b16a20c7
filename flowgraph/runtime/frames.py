"""Frames and iterations (whitepaper §4.4): the tags every value carries in the executor.

Like the MIT Tagged-Token machine, every value carries a tag (frame, iteration). A frame is one
activation of a loop, created by its first Enter and keyed by (frame name, parent frame,
parent iteration); each iteration of it has its own pending counts and input slots, so up to
`parallel_iterations` iterations run at once. Enter moves a value into iteration 0 of a child
frame (`is_constant` Enters are loop invariants, delivered to every iteration), NextIteration
into the next iteration, Exit into the parent frame. The untaken output of a Switch is DEAD;
a node with a dead input is dead and does not run, except Merge, which fires on its first live
input (dead only when all its inputs are dead, or its loop Enter is), and _Send/_Recv, which
carry the deadness to other devices. Dead NextIteration values are dropped: that is how loops
end. A graph without loops is the case of one frame (the root) with one iteration.

Frame ids are what _Send/_Recv put in their rendezvous keys: 0 for the root frame, a hash of
(parent frame id, parent iteration, frame name) for the others, so the partitions of one loop
on different devices name the same activation alike.
"""

from __future__ import annotations

import zlib


def frame_id(parent_id: int, parent_iter: int, name: str) -> int:
    """The id of the activation of loop `name` started in iteration `parent_iter` of frame
    `parent_id` (0: the root frame), as _Send/_Recv put it in their keys."""
    return zlib.crc32(f"{parent_id};{parent_iter};{name}".encode())


class IterationState:
    """One iteration of one frame. It is done when outstanding_ops == 0, every child frame
    started in it is done, and the previous iteration is done (or, for iteration 0, every Enter
    of the frame has delivered). Only the scheduling thread touches it.

    `key` is the iteration's number in the step shifted into the high bits of a ready-queue
    entry (0 for the root iteration, so a graph without loops queues plain node ids)."""

    __slots__ = (
        "context",
        "dead",
        "frame",
        "inputs",
        "iter",
        "key",
        "outstanding_frames",
        "outstanding_ops",
        "pending",
    )

    def __init__(self, frame, it: int, key: int, plan):
        self.frame = frame
        self.iter = it
        self.key = key
        self.pending = plan.frame_pending[:]
        self.dead = [0] * len(plan.frame_pending)
        self.inputs = [None] * plan.num_inputs
        self.outstanding_ops = 0
        self.outstanding_frames = 0
        self.context = None  # the StepContext of the step kernels run in this iteration


class FrameState:
    """One activation of a loop. It is done when every Enter has delivered
    (num_pending_inputs == 0) and no iteration is outstanding."""

    __slots__ = (
        "children",
        "dead_exits",
        "id",
        "inv_values",
        "iteration_count",
        "iterations",
        "max_parallel",
        "name",
        "next_iter_roots",
        "num_outstanding_iterations",
        "num_pending_inputs",
        "parent",
        "parent_iter",
    )

    def __init__(self, name, parent, parent_iter, max_parallel, num_enters):
        self.name = name
        self.id = frame_id(parent.id, parent_iter, name) if parent else 0
        self.parent = parent
        self.parent_iter = parent_iter
        self.max_parallel = max(1, max_parallel)
        self.iterations: dict[int, IterationState] = {}
        self.iteration_count = 0
        self.num_outstanding_iterations = 1
        self.num_pending_inputs = num_enters
        self.inv_values = []  # (enter node id, value): loop invariants for every iteration
        self.next_iter_roots = []  # (node id, outputs) deferred by the parallel_iterations limit
        self.dead_exits = []  # Exit node ids that got a dead value in the latest iteration
        self.children = {}  # (enter frame name, iteration) -> FrameState
