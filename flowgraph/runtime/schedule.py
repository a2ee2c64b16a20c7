"""The executor's fixed schedule (whitepaper §3.1): a step of one frame and one iteration whose
kernels all run inline needs no pending counts and no ready queue.

The dispatch loop (executor.py) decides what runs next from pending counts, a ready queue and
input slots per iteration, because in general it cannot know the order in advance: a kernel
may go to the inter-op pool, an async kernel may finish at any time, loops create iterations.
When a plan has no control flow, its only async kernels are the client's feeds (which are in
the step's rendezvous before it starts) and no kernel would go to the pool, the loop's order is
known when the plan is built: it is the order in which the loop would pop the nodes (a heap
of node ids, each finished as it runs). That order is computed once here, and a step runs the
kernels in it, one after the other: the same kernels in the same order with the same inputs,
without the bookkeeping.

Values live in registers allocated once per plan: a value occupies a slot from when its
producer ran until its last reader ran (then the slot is cleared or reused by the reader's
outputs), so buffers die exactly when the loop's input slots would drop them (§4.1). Slot 0
holds the step, the context of kernels that take one.

Traced steps (StepStats, peak memory), partial runs (feeds that arrive later) and plans with
expensive kernels on a device with an inter-op pool run on the dispatch loop: it alone keeps
the accounting of memory and tracing, and the overlap of pooled kernels.
"""

from __future__ import annotations

import heapq
import operator
import queue
import threading

from flowgraph.runtime.plan import ASYNC, EXPENSIVE, ExecutorPlan

_MULTI = -1  # `out` of a node with several outputs: its slots are in Schedule.multi[nid]
_STEP = 0  # the slot holding the step (the root frame's kernel context)


class Schedule:
    """A plan's nodes in the dispatch loop's order with their registers, or unusable.

    `entries` are (node id, kernel, input getter, output slot, slots to clear): the getter
    returns the kernel's arguments from the registers; `out` is the output's slot, `_MULTI`,
    or ~slot for an async kernel (a client feed's _Recv)."""

    __slots__ = ("entries", "expensive", "multi", "num_slots")

    def __init__(self, plan: ExecutorPlan, order: list[int]):
        self.expensive = any(item.kind == EXPENSIVE for item in plan.items)
        self.multi: dict[int, tuple] = {}
        self.entries, self.num_slots = self._allocate(plan, order)

    @staticmethod
    def build(plan: ExecutorPlan) -> Schedule | None:
        """The plan's schedule, or None when its steps need the dispatch loop."""
        if plan.has_control_flow:
            return None
        for item in plan.items:
            if item.kind == ASYNC and not (
                item.node.op == "_Recv" and item.node.attrs.get("client_terminated")
            ):
                return None  # a Recv from another device, a queue: it may wait on this step
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
            if item.step_arg:
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
            if item.kind == ASYNC:
                out = ~outs[0]
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

    def run(self, plan: ExecutorPlan, step, fail) -> None:
        """Runs one step; a kernel's failure is raised as `fail(plan, step, node id, error)`
        returns it (the executor's: the node's error, the step cancelled)."""
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
                    values[~out] = _receive(compute, get(values), step)
                if kill:
                    for slot in kill:
                        values[slot] = None
        except BaseException as e:  # noqa: BLE001 (the step's error, even Ctrl-C)
            raise fail(plan, step, nid, e)


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


def _getter(slots: list[int]):
    """A C callable: registers -> the kernel's arguments (a tuple or a list)."""
    if len(slots) > 1:
        return operator.itemgetter(*slots)
    if slots:
        return operator.itemgetter(slice(slots[0], slots[0] + 1))
    return operator.itemgetter(slice(0, 0))


def _receive(compute, args, step):
    """Calls an async kernel (a feed's _Recv) and returns its value: at once when it finishes
    within the call (the feed is already in the rendezvous), else when it calls back, within
    the step's deadline; a cancelled step fails it through its rendezvous."""
    box = []
    caller = threading.get_ident()

    def done(out=None, error=None):
        if threading.get_ident() == caller and not box:
            box.append((out, error))
        else:
            waiting.put((out, error))

    waiting = queue.SimpleQueue()
    compute(*args, done)
    if box:
        out, error = box[0]
    else:
        box.append(None)  # later calls, even from this thread, go to the queue
        out, error = step.wait(waiting)
    if error is not None:
        raise error
    return out
