"""The executor's fixed schedule (whitepaper §3.1): a step of one frame and one iteration whose
kernels all run inline needs no pending counts and no ready queue.

The dispatch loop (executor.py) decides what runs next from pending counts, a ready queue and
input slots per iteration, because in general it cannot know the order in advance: a kernel
may go to the inter-op pool, an async kernel may finish at any time, loops create iterations.
When a plan has no control flow and no kernel would go to the pool (no pool, or no two expensive
kernels that could overlap on it), the loop's order is known
when the plan is built as long as every async kernel finishes within its call: it is the order
in which the loop would pop the nodes (a heap of node ids, each finished as it runs). That
order is computed once here, and a step runs the kernels in it, one after the other: the same
kernels in the same order with the same inputs, without the bookkeeping.

Async kernels (a feed's _Recv, a Recv from another device, a dequeue, an enqueue, a reader's
read) mostly do finish within their call: the feed is in the rendezvous, the queue has an
element or room. One that must wait (§5.3) hands the rest of the step to the dispatch loop:
the values the schedule made become the loop's input slots and pending counts (`_hand_off`),
and the loop runs the nodes not yet run while the kernel waits, then its continuation, exactly
as if the loop had run the step from its start in this order.

Values live in registers allocated once per plan: a value occupies a slot from when its
producer ran until its last reader ran (then the slot is cleared or reused by the reader's
outputs), so buffers die exactly when the loop's input slots would drop them (§4.1). Slot 0
holds the step, the context of kernels that take one.

Traced steps (StepStats, peak memory), partial runs (feeds that arrive later) and plans with
independent expensive kernels on a device with an inter-op pool run on the dispatch loop: it
alone keeps the accounting of memory and tracing, and the overlap of pooled kernels.
"""

from __future__ import annotations

import heapq
import operator
import queue
import threading

from flowgraph.runtime.plan import ASYNC, EXPENSIVE, ExecutorPlan

_MULTI = -1  # `out` of a node with several outputs: its slots are in Schedule.multi[nid]
_ASYNC = -2  # `out` of an async kernel: its slots are in Schedule.outs[nid]
_STEP = 0  # the slot holding the step (the root frame's kernel context)


class Schedule:
    """A plan's nodes in the dispatch loop's order with their registers, or unusable.

    `entries` are (node id, kernel, input getter, output slot, slots to clear): the getter
    returns the kernel's arguments from the registers; `out` is the output's slot, `_MULTI`,
    or `_ASYNC` for an async kernel (called with the step and its continuation first).
    `outs[nid]` are the slots of a node's outputs and `position[nid]` its place in `entries`:
    what a hand-off to the dispatch loop reads."""

    __slots__ = ("entries", "expensive", "multi", "num_slots", "outs", "position")

    def __init__(self, plan: ExecutorPlan, order: list[int]):
        self.expensive = _overlapping(plan, order)  # expensive kernels the pool could overlap
        self.multi: dict[int, tuple] = {}
        self.outs: list[tuple] = [()] * len(plan.items)
        self.position = [0] * len(plan.items)
        for pos, nid in enumerate(order):
            self.position[nid] = pos
        self.entries, self.num_slots = self._allocate(plan, order)

    @staticmethod
    def build(plan: ExecutorPlan) -> Schedule | None:
        """The plan's schedule, or None when its steps need the dispatch loop."""
        if plan.has_control_flow:
            return None
        order = _order(plan)
        return Schedule(plan, order) if order is not None else None

    def _allocate(self, plan: ExecutorPlan, order: list[int]):
        """Registers by a linear scan over `order`: a value's slot is freed by its last
        reader, and that reader's outputs take freed slots first."""
        uses: dict[tuple, int] = {}  # (producer, port) -> readers not yet run
        for item in plan.items:
            for src in item.node.inputs:
                uses[src] = uses.get(src, 0) + 1
        names = [item.node.name for item in plan.items]
        where: dict[tuple, int] = {}  # (producer name, port) -> slot
        free: list[int] = []
        top = 1  # slot 0 is the step's
        entries = []
        for nid in order:
            item = plan.items[nid]
            node = item.node
            args = [where[src] for src in node.inputs]
            if item.step_arg and item.kind != ASYNC:  # an async kernel gets the step in run()
                args.insert(0, _STEP)
            released = []
            for src in node.inputs:
                uses[src] -= 1
                if not uses[src]:
                    released.append(where.pop(src))
            free.extend(reversed(released))
            outs = []
            for port in range(item.num_outputs):
                if free:
                    slot = free.pop()
                else:
                    slot, top = top, top + 1
                outs.append(slot)
                if uses.get((names[nid], port)):
                    where[(names[nid], port)] = slot
            unread = [s for port, s in enumerate(outs) if not uses.get((names[nid], port))]
            kill = tuple(s for s in released if s not in outs) + tuple(unread)
            free.extend(reversed(unread))
            self.outs[nid] = tuple(outs)
            if item.kind == ASYNC:
                out = _ASYNC
            elif len(outs) == 1:
                out = outs[0]
            elif outs:
                out = _MULTI
                self.multi[nid] = tuple(outs)
            else:  # a kernel without outputs returns None into a free slot, cleared at once
                if free:
                    out = free.pop()
                else:
                    out, top = top, top + 1
                kill += (out,)
                free.append(out)
            entries.append((nid, item.compute, _getter(args), out, kill))
        return entries, top

    def run(self, plan: ExecutorPlan, step, fail, resume) -> None:
        """Runs one step; a kernel's failure is raised as `fail(plan, step, node id, error)`
        returns it (the executor's: the node's error, the step cancelled). An async kernel
        that must wait hands the step to the dispatch loop: `resume(plan, step, pending,
        inputs, ready, completions)` (the executor's) runs the rest."""
        values = [None] * self.num_slots
        values[_STEP] = step
        multi = self.multi
        nid = -1
        try:
            for nid, compute, get, out, kill in self.entries:
                if out >= 0:
                    values[out] = compute(*get(values))
                elif out == _MULTI:
                    for slot, value in zip(multi[nid], compute(*get(values))):
                        values[slot] = value
                else:
                    done = _Continuation(nid)
                    compute(step, done, *get(values))
                    done.thread = 0  # from now on, a call of done() is a completion
                    if done.result is None:
                        break  # it waits: the dispatch loop takes over, below
                    result, error = done.result
                    if error is not None:
                        raise error
                    slots = self.outs[nid]
                    if len(slots) == 1:
                        values[slots[0]] = result
                    else:  # none (an enqueue) or several (a dequeue of several components)
                        for slot, value in zip(slots, result or ()):
                            values[slot] = value
                if kill:
                    for slot in kill:
                        values[slot] = None
            else:
                return
        except BaseException as e:  # noqa: BLE001 (the step's error, even Ctrl-C)
            raise fail(plan, step, nid, e)
        resume(plan, step, *self._hand_off(plan, values, nid), done.completions)

    def _hand_off(self, plan: ExecutorPlan, values: list, waiting: int):
        """The dispatch loop's state when the async kernel of node `waiting` is in flight and
        the nodes before it in the schedule have run: the pending counts, the input slots
        (each filled from the register of its producer's output) and the ready nodes."""
        order = [entry[0] for entry in self.entries]
        pos = self.position[waiting]
        ran = bytearray(len(plan.items))
        for nid in order[: pos + 1]:
            ran[nid] = 1
        pending = plan.frame_pending[:]  # a plan without control flow: data + control inputs
        inputs = [None] * plan.num_inputs
        outs = self.outs
        for nid in order[:pos]:
            slots = outs[nid]
            for dst, slot, port in plan.out_edges[nid]:
                pending[dst] -= 1
                if slot >= 0 and not ran[dst]:
                    inputs[slot] = values[slots[port]]
        ready = [nid for nid in order[pos + 1 :] if not pending[nid]]
        heapq.heapify(ready)
        return pending, inputs, ready


def _order(plan: ExecutorPlan) -> list[int] | None:
    """The order in which the dispatch loop runs a step of `plan` when every kernel finishes
    as it is called: pop the smallest ready node id, run it, push the consumers it readied.
    None when some node never becomes ready (a cycle): the loop reports what it can run."""
    pending = plan.pending[:]
    ready = plan.roots[:]
    heapq.heapify(ready)
    order = []
    while ready:
        nid = heapq.heappop(ready)
        order.append(nid)
        for dst in plan.items[nid].out_edges:
            pending[dst] -= 1
            if not pending[dst]:
                heapq.heappush(ready, dst)
    return order if len(order) == len(plan.items) else None


def _overlapping(plan: ExecutorPlan, order: list[int]) -> bool:
    """Whether two expensive kernels of the plan may run at the same time: neither comes after
    the other. Where they all form one chain (P2's forward and gradient MatMuls) the inter-op
    pool can overlap nothing, and the fixed schedule runs them inline: P2 took 15.7 instead of
    18.9 ms of CPU for 50 steps (load 7 on 2 cores)."""
    earlier = 0  # the expensive kernels before this node in `order` (topological), as bits
    count = 0
    above = [0] * len(plan.items)  # the expensive kernels upstream of each node, as bits
    for nid in order:
        item = plan.items[nid]
        mine = above[nid]
        if item.kind == EXPENSIVE:
            if mine != earlier:
                return True  # an earlier expensive kernel is not upstream of this one
            bit = 1 << count
            count += 1
            earlier |= bit
            mine |= bit
        if mine:
            for dst in item.out_edges:
                above[dst] |= mine
    return False


def _getter(slots: list[int]):
    """A C callable: registers -> the kernel's arguments (a tuple or a list)."""
    if len(slots) > 1:
        return operator.itemgetter(*slots)
    if slots:
        return operator.itemgetter(slice(slots[0], slots[0] + 1))
    return operator.itemgetter(slice(0, 0))


class _Continuation:
    """An async kernel's `done(out=None, error=None)` in a scheduled step. Called within the
    kernel's call on the step's thread (the feed was there, the queue had an element), it
    leaves the result for the schedule to go on with; called later, or from another thread,
    it queues a completion for the dispatch loop that took the step over (its iteration
    state is the loop's root one, None here: the loop fills it in)."""

    __slots__ = ("completions", "nid", "result", "thread")

    def __init__(self, nid: int):
        self.nid = nid
        self.thread = threading.get_ident()
        self.result = None
        self.completions = queue.SimpleQueue()

    def __call__(self, out=None, error=None):
        if self.thread and threading.get_ident() == self.thread:
            self.thread = 0
            self.result = (out, error)
            return
        self.completions.put((None, self.nid, out, error, 0.0, 0.0, 0, None))
