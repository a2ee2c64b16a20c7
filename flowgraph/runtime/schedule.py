"""The executor's fixed schedule (whitepaper §3.1, §4.4): a step whose kernels all run inline
and whose order is known in advance needs no pending counts and no ready queue.

The dispatch loop (executor.py) decides what runs next from pending counts, a ready queue and
input slots per iteration, because in general it cannot know the order in advance: a kernel
may go to the inter-op pool, an async kernel may finish at any time. When no kernel would go
to the pool, the order is known when the plan is built as long as every async kernel finishes
within its call: it is the order in which the loop would pop the nodes (a heap of node ids,
each finished as it runs), per iteration of each loop (loop_blocks.py). That order is compiled
once here into a Python function (step_code.py), and a step calls it: the same kernels in the
same order with the same inputs, without the bookkeeping; loops run as `while` loops,
conditionals as `if`s.

Async kernels (a feed's _Recv, a Recv from another device, a dequeue, an enqueue, a reader's
read) mostly do finish within their call: the feed is in the rendezvous, the queue has an
element or room. In a plan without control flow, one that must wait (§5.3) hands the rest of
the step to the dispatch loop: the values the step function made (its locals) become the
loop's input slots and pending counts (`_hand_off`), and the loop runs the nodes not yet run
while the kernel waits, then its continuation, exactly as if the loop had run the step from
its start in this order. A plan with frames keeps such kernels on the dispatch loop, but for
the client's feeds, which the schedule waits for.

Values live in registers (the function's locals): a value occupies one from when its producer
ran until its last reader ran (then it is cleared or reused by the reader's outputs), so
buffers die exactly when the loop's input slots would drop them (§4.1).

Traced steps (StepStats, peak memory) and partial runs (feeds that arrive later) run on the
dispatch loop: it alone keeps the accounting of memory and tracing; so do plans with loops that
are not well formed (loop_blocks.py). Plans with expensive kernels that the device's inter-op
pool could overlap (in a plan with loops: any) run on the dispatch loop, which overlaps them,
or on the schedule, whichever is faster (overlap.py).
"""

from __future__ import annotations

import heapq
import queue
import threading

from flowgraph.core import errors
from flowgraph.runtime import loop_blocks
from flowgraph.runtime.overlap import OverlapChoice
from flowgraph.runtime.plan import ASYNC, EXPENSIVE, ExecutorPlan
from flowgraph.runtime.step_code import CHECK, StepCode, Unsupported


class Schedule:
    """A plan's nodes in the dispatch loop's order, compiled into one step function
    (step_code.py), or unusable.

    `order` is the root block's order: node ids and loops (loop_blocks.Block); `registers`
    counts the root block's registers."""

    __slots__ = (
        "code",
        "direct",
        "expensive",
        "index",
        "line_nodes",
        "loc",
        "order",
        "overlap",
        "registers",
        "run_step",
        "source",
    )

    def __init__(self, plan: ExecutorPlan, root: loop_blocks.Block):
        self.order = root.order
        if plan.has_control_flow:
            self.expensive = any(item.kind == EXPENSIVE for item in plan.items)
        else:  # expensive kernels the pool could overlap
            self.expensive = _overlapping(plan, root.order)
        # Whether the pool pays is measured (overlap.py), except for plans that call functions:
        # a call may wait for other nodes of its step, so it always goes to the pool.
        calls = any(item.kind == EXPENSIVE and item.step_arg for item in plan.items)
        self.overlap = OverlapChoice() if self.expensive and not calls else None
        if plan.has_control_flow:
            start = _receive
        else:
            start = _Start(_last_async(plan, root.order))
        code = StepCode(plan, root, start)
        self.run_step, self.line_nodes, self.loc = code.run, code.line_nodes, code.loc
        self.direct, self.index = code.direct, code.index
        self.code = self.run_step.__code__
        self.registers = code.registers
        self.source = code.source  # the step function, for reading (and tests)

    @staticmethod
    def build(plan: ExecutorPlan) -> Schedule | None:
        """The plan's schedule, or None when its steps need the dispatch loop."""
        for item in plan.items:
            if plan.has_control_flow and item.kind == ASYNC and not _is_feed(item):
                return None  # a Recv from another device, a queue in a plan with frames
        root = loop_blocks.build(plan)
        if root is None:
            return None
        try:
            return Schedule(plan, root)
        except Unsupported:
            return None

    def run(self, plan: ExecutorPlan, step, fail, resume) -> None:
        """Runs one step; a kernel's failure is raised as `fail(plan, step, node id, error)`
        returns it (the executor's: the node's error, the step cancelled). A loop's own
        errors (cancelled, past the deadline) are raised as they are, the step cancelled. An
        async kernel that must wait hands the step to the dispatch loop: `resume(plan, step,
        pending, inputs, ready, completions)` (the executor's) runs the rest."""
        try:
            self.run_step(step)
            return
        except _Waiting as waiting:
            done = waiting.done
            frame = self._traceback(waiting).tb_frame
            state = self._hand_off(plan, frame.f_globals | frame.f_locals, done.nid)
        except BaseException as e:  # the step's error, even Ctrl-C
            nid = self._failed_node(e)
            if nid in self.direct:
                e = self._kernel_error(plan, nid, e)
            if nid >= 0:
                raise fail(plan, step, nid, e)
            step.cancel(e if isinstance(e, errors.OpError) else _cancelled())
            raise
        resume(plan, step, *state, done.completions)

    def _hand_off(self, plan: ExecutorPlan, names: dict, waiting: int):
        """The dispatch loop's state when the async kernel of node `waiting` is in flight and
        the nodes before it in the schedule have run (a plan without control flow): the
        pending counts, the input slots (each filled from the name of its producer's output in
        the step function, `names`: its locals and globals) and the ready nodes."""
        order = self.order
        pos = order.index(waiting)
        ran = bytearray(len(plan.items))
        for nid in order[: pos + 1]:
            ran[nid] = 1
        pending = plan.frame_pending[:]  # a plan without control flow: data + control inputs
        inputs = [None] * plan.num_inputs
        for nid in order[:pos]:
            for dst, slot, port in plan.out_edges[nid]:
                pending[dst] -= 1
                if slot >= 0 and not ran[dst]:
                    inputs[slot] = names[self.loc[(nid, port)]]
        ready = [nid for nid in order[pos + 1 :] if not pending[nid]]
        heapq.heapify(ready)
        return pending, inputs, ready

    def _traceback(self, e: BaseException):
        """The step function's entry in the traceback of `e`, or None."""
        tb, found = e.__traceback__, None
        while tb is not None:
            if tb.tb_frame.f_code is self.code:
                found = tb
            tb = tb.tb_next
        return found

    def _kernel_error(self, plan: ExecutorPlan, nid: int, e: BaseException) -> BaseException:
        """The error of node `nid`'s kernel on the inputs whose `direct` call raised `e` (the
        kernel's own message, as on the dispatch loop); `e` if the kernel does not fail."""
        frame = self._traceback(e).tb_frame
        names = frame.f_globals | frame.f_locals
        node = plan.items[nid].node
        args = [names[self.loc[(self.index[src], port)]] for src, port in node.inputs]
        try:
            plan.items[nid].compute(*args)
        except Exception as error:  # noqa: BLE001 (the kernel's error, raised by the caller)
            return error
        return e

    def _failed_node(self, e: BaseException) -> int:
        """The node whose line of the step function raised `e` (CHECK if none did)."""
        tb = self._traceback(e)
        return self.line_nodes[tb.tb_lineno - 1] if tb is not None else CHECK


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


def _is_feed(item) -> bool:
    return item.node.op == "_Recv" and bool(item.node.attrs.get("client_terminated"))


def _cancelled():
    return errors.CancelledError(None, None, "The step was cancelled")


class _Waiting(Exception):  # not an error: the step goes on in the dispatch loop
    """An async kernel of a plan without control flow must wait: the dispatch loop takes the
    step over (Schedule.run)."""

    def __init__(self, done: _Continuation):
        super().__init__(done.nid)
        self.done = done


def _last_async(plan: ExecutorPlan, order: list[int]) -> frozenset:
    """The async nodes after which the schedule runs only nodes downstream of them: while one
    of these waits, the dispatch loop would have nothing else to run."""
    out = []
    for pos, nid in enumerate(order):
        if plan.items[nid].kind != ASYNC:
            continue
        below, todo = {nid}, [nid]
        while todo:
            for dst in plan.items[todo.pop()].out_edges:
                if dst not in below:
                    below.add(dst)
                    todo.append(dst)
        if all(later in below for later in order[pos + 1 :]):
            out.append(nid)
    return frozenset(out)


class _Start:
    """Calls an async kernel of a plan without control flow: its outputs when it finishes
    within its call (a feed or a queue element was there), else _Waiting; a kernel of
    `in_place` is waited for here instead (the step's deadline and cancellation end the wait
    as they end the dispatch loop's): nothing else could run meanwhile, and a queue runner's
    enqueue that waits for room each step (bench I2) skips the hand-off and the loop."""

    __slots__ = ("in_place",)

    def __init__(self, in_place: frozenset):
        self.in_place = in_place

    def __call__(self, compute, nid, step, *args):
        done = _Continuation(nid)
        compute(step, done, *args)
        done.thread = 0  # from now on, a call of done() is a completion
        if done.result is not None:
            result, error = done.result
        elif nid in self.in_place:
            result, error = step.wait(done.completions)[2:4]
        else:
            raise _Waiting(done)
        if error is not None:
            raise error
        return result


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


def _receive(compute, nid, step, *args):
    """Calls a feed's _Recv in a plan with frames and returns its value: at once when it finishes
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
    compute(step, done, *args)
    if box:
        out, error = box[0]
    else:
        box.append(None)  # later calls, even from this thread, go to the queue
        out, error = step.wait(waiting)
    if error is not None:
        raise error
    return out
