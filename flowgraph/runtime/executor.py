"""The executor (whitepaper §3.1, §4.4): runs one device's graph by pending counts and a ready
queue, with and without control flow, in one dispatch loop.

Each node keeps the count of its inputs (data and control) not yet produced, per iteration of
the frame it runs in (frames.py); a graph without loops is the case of the root frame with one
iteration. Nodes whose count is zero wait in the ready queue, a heap of `iteration key | node
id` ordered by iteration then construction order, so ties break the way the graph was written
and forward temporaries die early (§4.1). Cheap kernels run inline in the scheduling thread;
when other work is ready or in flight, an expensive kernel waits for the scheduling thread to
run it (one at a time) or goes to the device's inter-op thread pool, so independent kernels
overlap (NumPy releases the GIL in large kernels) without a hand-off per kernel. BLAS
kernels are parallel inside (intra-op) and run inline, one at a time (kernels/base.py). Most
steps do not come here: an untraced step runs its plan's fixed schedule (schedule.py) unless
timing steps both ways showed that overlapping its expensive kernels on the pool is faster
(overlap.py).
Asynchronous kernels (Recv) receive a continuation and never park a thread (§5.3).

A value sits in its consumer's input slot until the consumer runs, then the slot is cleared so
NumPy can free the buffer. When a Run is traced, the same loop records every node's stats and
counts live bytes (tracing.py): a buffer is live from when its producer finished until its last
reader has run, inside loops as outside.
"""

from __future__ import annotations

import heapq
import queue
import threading
import time

import numpy as np

from flowgraph.core import errors, ieee
from flowgraph.core.dead_value import DEAD
from flowgraph.runtime.frames import FrameState, IterationState
from flowgraph.runtime.plan import (
    ASYNC,
    ENTER,
    EXIT,
    FORWARD,
    MERGE,
    NEXT,
    NOT_BUILT,
    RECV,
    SEND,
    TRIGGER,
    ExecutorPlan,
)
from flowgraph.runtime.schedule import Schedule
from flowgraph.runtime.step import Step, StepContext, node_error


def execute(plan: ExecutorPlan, step: Step) -> None:
    """Runs one step of `plan` to completion; raises the first kernel failure.

    An untraced step of a plan that has a fixed schedule runs it (schedule.py: compiled code,
    loops included), unless overlapping its expensive kernels on the pool is faster
    (overlap.py); every other step runs the dispatch loop. Floating-point exceptions follow
    IEEE (log(0) is -inf, 0/0 is nan) without NumPy warnings, as in TensorFlow; CheckNumerics
    is the op that turns them into errors."""
    schedule = plan.schedule
    if schedule is NOT_BUILT:
        schedule = plan.schedule = Schedule.build(plan)
    token = ieee.ignore()
    try:
        if schedule is None or step.stats is not None or not step.feeds_sent:
            _Execution(plan, step).run()
        elif not schedule.expensive or plan.device.thread_pool is None:
            schedule.run(plan, step, _fail_step, _resume)
        elif schedule.overlap is None:
            _Execution(plan, step).run()
        else:
            _run_faster_way(plan, step, schedule)
    finally:
        ieee.restore(token)


def _run_faster_way(plan: ExecutorPlan, step: Step, schedule: Schedule) -> None:
    """Runs a step whose expensive kernels the pool could overlap: on the dispatch loop, which
    overlaps them, or inline on the fixed schedule, whichever the plan's timings say is faster
    (overlap.py); this step's time goes into them."""
    choice = schedule.overlap
    pooled = choice.pooled()
    t0 = time.perf_counter()
    if pooled:
        _Execution(plan, step).run()
    else:
        schedule.run(plan, step, _fail_step, _resume)
    choice.record(pooled, time.perf_counter() - t0)


def _resume(plan: ExecutorPlan, step: Step, pending, inputs, ready, completions) -> None:
    """Takes over a step whose fixed schedule reached an async kernel that must wait
    (schedule.py): the loop starts from the schedule's pending counts, input slots and ready
    nodes, with that kernel in flight; its completion arrives on `completions`."""
    execution = _Execution(plan, step)
    execution.root_state.pending, execution.root_state.inputs = pending, inputs
    execution.ready = ready
    execution.completions, execution.inflight = completions, 1
    execution.run()


def _cancelled_by_error():
    return errors.CancelledError(None, None, "Step was cancelled by an error in another node")


def _fail_step(plan: ExecutorPlan, step: Step, nid: int, e: BaseException) -> BaseException:
    """A kernel of node `nid` failed: the step is cancelled (an async kernel in flight must not
    keep it waiting) and the node's error is returned, to be raised."""
    error = node_error(plan.items[nid], plan.device.name, e)
    step.cancel(_cancelled_by_error())
    return error


_ROOT_FRAME = FrameState("", None, 0, 1, 0)  # the root frame of every step without loops
_PASSING = frozenset({FORWARD, ENTER, EXIT, NEXT})  # nodes whose output is their input
# An expensive kernel waits for this thread while nothing is in flight and at most this many
# nodes are ready (cheap ones, e.g. a loop's counter, run first); with more, it goes to the pool.
_DEFER_READY = 8
_GONE = object()  # a kernel's outputs that come later (async, pooled) or never (it failed)


class _Execution:
    """One step of one plan; all bookkeeping happens on the scheduling thread."""

    __slots__ = (
        "completions",
        "deferred",
        "error",
        "inflight",
        "items",
        "mem",
        "next_key",
        "plan",
        "ready",
        "root_state",
        "states",
        "step",
    )

    def __init__(self, plan: ExecutorPlan, step: Step):
        self.plan, self.step = plan, step
        self.items = plan.items
        if plan.has_control_flow:
            root = FrameState("", None, 0, 1, 0)
            self.root_state = root.iterations[0] = IterationState(root, 0, 0, plan)
        else:  # no frame state changes: the root frame is shared, its iteration is not
            self.root_state = IterationState(_ROOT_FRAME, 0, 0, plan)
        self.states: dict[int, IterationState] = {}  # key >> shift -> a loop iteration's state
        self.next_key = 1
        self.ready = plan.frame_roots[:]  # sorted, hence a valid heap
        self.root_state.outstanding_ops = len(self.ready)
        self.root_state.context = step  # the root frame's tag, 0:0, is the Step's constant
        self.completions = None  # made by the first pooled or async kernel
        self.inflight = 0
        self.deferred = None  # an expensive kernel this thread runs once nothing else is ready
        self.error = None
        stats = step.stats
        self.mem = stats.memory(plan.device.name) if stats is not None else None

    # -- the loop --------------------------------------------------------------------------
    def run(self):
        plan, step = self.plan, self.step
        items, kinds, simple, out_edges, in_base, in_end, clear, shift, mask = plan.tables
        root, states, ready = self.root_state, self.states, self.ready
        pop, push, perf = heapq.heappop, heapq.heappush, time.perf_counter
        pool = plan.device.thread_pool
        stats, mem = step.stats, self.mem
        device = plan.device.name
        while True:
            while ready and self.error is None:
                e = pop(ready)
                if e > mask:
                    st, nid = states[e >> shift], e & mask
                else:
                    st, nid = root, e
                item = items[nid]
                kind = kinds[nid]
                base, end = in_base[nid], in_end[nid]
                args = st.inputs[base:end]
                if end != base:
                    st.inputs[base:end] = clear[nid]
                ins = args if mem is not None else None
                t0 = perf() if stats is not None else 0.0
                if not kind and not st.dead[nid]:
                    if item.kind or item.step_arg:
                        out = self._call(st, nid, item, args, ins, pool)
                    else:
                        try:
                            out = item.compute(*args)
                        except BaseException as exc:  # noqa: BLE001 (fails the step, raised there)
                            self._fail(item, exc)
                            break
                elif kind in _PASSING and not st.dead[nid]:
                    out = args[0]  # Identity, Enter, Exit, NextIteration: no kernel call
                elif kind == MERGE and (out := _merge(args))[0] is not DEAD:
                    pass  # a live Merge's outputs go on as a kernel's do
                elif self._route(st, nid, item, kind, args):
                    continue
                else:  # a live Switch, _Send or _Recv, a dead _Send (it passes the deadness on)
                    out = self._call(st, nid, item, [DEAD] if st.dead[nid] else args, ins, pool)
                if out is _GONE:
                    if self.error is not None:
                        break
                    continue
                if simple[nid] and mem is None:  # _done's common case, inlined
                    pending, slots, key = st.pending, st.inputs, st.key
                    one = item.num_outputs == 1
                    pushed = -1
                    for dst, slot, port in out_edges[nid]:
                        if slot >= 0:
                            slots[slot] = out if one else out[port]
                        c = pending[dst] - 1
                        pending[dst] = c
                        if not c:
                            push(ready, key | dst)
                            pushed += 1
                    if key:  # the root iteration is never retired: no count to keep
                        st.outstanding_ops += pushed
                        if not st.outstanding_ops:
                            self._cleanup(st.frame, st.iter)
                else:
                    self._done(st, nid, _as_list(item, out), False)
                if stats is not None:
                    if mem is not None:
                        _release(mem, ins)
                    stats.record(device, item, t0, perf(), out, threading.get_ident())
            if self.deferred is not None:  # nothing else ready: run it here, as a completion
                deferred, self.deferred = self.deferred, None
                if self.error is None:
                    self._pooled(*deferred)
                else:
                    self.inflight -= 1
            if not self.inflight:
                break
            st, nid, out, exc, t0, t1, tid, ins = step.wait(self.completions)
            st = st or root  # None: a scheduled step's async kernel, finished after _resume
            self.inflight -= 1
            item = items[nid]
            if exc is not None:
                self._fail(item, exc)
            elif self.error is None:
                self._done(st, nid, _as_list(item, out), False)
                if stats is not None:
                    if mem is not None:
                        _release(mem, ins)
                    tid = tid or threading.get_ident()
                    stats.record(device, item, t0 or t1, t1 or perf(), out, tid)
        if self.error is not None:
            step.cancel(_cancelled_by_error())
            raise self.error

    def _call(self, st, nid, item, args, ins, pool):
        """Runs a kernel that takes the step, is async or may go to the pool: its outputs, or
        _GONE when they will arrive as a completion or the kernel failed (self.error)."""
        if item.step_arg:
            context = st.context
            if context is None:
                context = st.context = StepContext(self.step, st.frame.id, st.iter)
            args.insert(0, context)
        if item.kind:
            if self.completions is None:
                self.completions = queue.SimpleQueue()
            if item.kind == ASYNC:
                done = _Continuation(self, st, nid, ins)
                args.insert(1, done)
                try:
                    item.compute(*args)
                except BaseException as exc:  # noqa: BLE001 (the step's error, even Ctrl-C)
                    done.result = (None, exc)
                done.thread = 0  # from now on, a call of done() is a completion
                if done.result is None:
                    self.inflight += 1
                    return _GONE
                out, exc = done.result  # it finished within its call (a value was there)
                if exc is not None:
                    self._fail(item, exc)
                    return _GONE
                return out
            if pool is not None and (self.ready or self.inflight):
                # Other work is ready or in flight. A hand-off to a worker costs two thread
                # wake-ups (~25 us of CPU each on 2 shared cores, and the worker's caches), so
                # one expensive kernel at a time waits for this thread (TF's
                # "curr_expensive_node"), which runs it once nothing else is ready: when no
                # worker is idle, or when only a few cheap nodes (a loop's counter) are ready
                # and nothing is in flight. Others go to the pool. A function call (a step
                # kernel) may block on other nodes of the step: it always goes to the pool.
                if (
                    self.deferred is None
                    and not item.step_arg
                    and (
                        not pool.idle_workers()
                        or (not self.inflight and len(self.ready) <= _DEFER_READY)
                    )
                ):
                    self.deferred = (st, nid, args, ins)
                else:
                    pool.submit(self._pooled, st, nid, args, ins)
                self.inflight += 1
                return _GONE
        try:
            return item.compute(*args)
        except BaseException as exc:  # noqa: BLE001 (fails the step, re-raised there)
            self._fail(item, exc)
            return _GONE

    def _route(self, st, nid, item, kind, args) -> bool:
        """Handles a dead node or a control-flow primitive without a kernel call; False means
        the node still runs its kernel (a live Switch or kernel, a _Send or a _Recv)."""
        if kind == MERGE:
            outs = _merge(args)
            self._done(st, nid, outs, outs[0] is DEAD)
            out = outs
        elif st.dead[nid] and kind != SEND and kind != RECV and kind != TRIGGER:
            self._done(st, nid, [DEAD] * item.num_outputs, True)
            out = DEAD  # a dead node does not run: no stats
        elif kind == TRIGGER:
            out = None
            self._done(st, nid, [], False)
        else:
            return False
        stats = self.step.stats
        if stats is not None:
            _release(self.mem, args)
            if out is not DEAD:
                t = time.perf_counter()
                stats.record(self.plan.device.name, item, t, t, out, threading.get_ident())
        return True

    def _fail(self, item, e):
        if self.error is None:
            self.error = _fail_step(self.plan, self.step, item.id, e)

    def _pooled(self, st, nid, args, ins):
        t0 = time.perf_counter()
        token = ieee.ignore()
        try:
            out = self.items[nid].compute(*args)
        except BaseException as e:  # noqa: BLE001 (handed to the scheduling thread)
            self.completions.put((st, nid, None, e, 0.0, 0.0, 0, ins))
            return
        finally:
            ieee.restore(token)
        t1 = time.perf_counter()
        self.completions.put((st, nid, out, None, t0, t1, threading.get_ident(), ins))

    # -- propagation (TF's PropagateOutputs + NodeDone) ------------------------------------
    def _done(self, st, nid, outputs, is_dead):
        kind = self.plan.kind[nid]
        frame, it = st.frame, st.iter
        mem = self.mem
        if mem is not None:  # the producer's reference while its outputs are delivered
            for value in outputs:
                mem.allocate(value)
        if kind == RECV and outputs and outputs[0] is DEAD:
            is_dead = True
        if kind == ENTER:
            attrs = self.items[nid].node.attrs
            child = self._child_frame(st, attrs)
            if attrs["is_constant"]:
                child.inv_values.append((nid, outputs[0]))
                for state in list(child.iterations.values()):
                    self._activate(state, nid, outputs, is_dead)
            else:
                self._activate(child.iterations[0], nid, outputs, is_dead)
            child.num_pending_inputs -= 1
            if child.num_pending_inputs == 0:
                self._cleanup(child, 0)
        elif kind == EXIT:
            if is_dead:
                if it == frame.iteration_count:
                    frame.dead_exits.append(nid)
            else:
                parent = frame.parent.iterations[frame.parent_iter]
                self._activate(parent, nid, outputs, False)
        elif kind == NEXT:
            if not is_dead:
                if (
                    it == frame.iteration_count
                    and frame.num_outstanding_iterations == frame.max_parallel
                ):
                    frame.next_iter_roots.append((nid, outputs))
                else:
                    if it == frame.iteration_count:
                        self._increment_iteration(frame)
                    self._activate(frame.iterations[it + 1], nid, outputs, False)
        else:
            self._activate(st, nid, outputs, is_dead)
        if mem is not None:
            _release(mem, outputs)
        st.outstanding_ops -= 1
        if not st.outstanding_ops and st.key:
            self._cleanup(frame, it)

    def _new_iteration(self, frame: FrameState, k: int) -> IterationState:
        state = IterationState(frame, k, self.next_key << self.plan.shift, self.plan)
        self.states[self.next_key] = frame.iterations[k] = state
        self.next_key += 1
        return state

    def _child_frame(self, st, attrs) -> FrameState:
        frame, it = st.frame, st.iter
        name = attrs["frame_name"]
        child = frame.children.get((name, it))
        if child is None:
            parallel = attrs.get("parallel_iterations", 10)
            child = FrameState(name, frame, it, parallel, self.plan.enter_counts[name])
            self._new_iteration(child, 0)
            frame.children[(name, it)] = child
            st.outstanding_frames += 1
        return child

    def _activate(self, st, src, outputs, is_dead):
        """Delivers `src`'s outputs (or its deadness) to its consumers in iteration `st`."""
        pending, dead, inputs = st.pending, st.dead, st.inputs
        kind = self.plan.kind
        ready, push, key = self.ready, heapq.heappush, st.key
        mem = self.mem
        for dst, slot, port in self.plan.out_edges[src]:
            if slot >= 0:
                value = outputs[port] if not is_dead else DEAD
                live = value is not DEAD
            else:
                live = not is_dead
            if kind[dst] != MERGE:  # the common case, kept short
                if slot >= 0:
                    inputs[slot] = value
                    if mem is not None:
                        mem.allocate(value)
                if not live:
                    dead[dst] += 1
                n = pending[dst] - 1
                pending[dst] = n
                if not n:
                    st.outstanding_ops += 1
                    push(ready, key | dst)
                continue
            if slot < 0:  # a Merge's control edge
                pending[dst] -= 2
                count = pending[dst]
                fire = count == 0 or (count == 1 and dead[dst] == self.plan.num_data[dst])
            elif live:  # the Merge fires on its first live input (low bit of its count)
                count = pending[dst]
                if count & 1:
                    inputs[slot] = value
                    if mem is not None:
                        mem.allocate(value)
                    pending[dst] = count & ~1
                fire = count == 1
            else:  # dead only when all inputs are, or its loop's Enter is
                dead[dst] += 1
                dst_dead = dead[dst] == self.plan.num_data[dst] or kind[src] == ENTER
                fire = pending[dst] == 1 and dst_dead
                if fire:
                    pending[dst] = 0
            if fire:
                st.outstanding_ops += 1
                push(ready, key | dst)

    def _increment_iteration(self, frame: FrameState):
        frame.iteration_count += 1
        state = self._new_iteration(frame, frame.iteration_count)
        frame.num_outstanding_iterations += 1
        frame.dead_exits.clear()
        roots, frame.next_iter_roots = frame.next_iter_roots, []
        for nid, outputs in roots:
            self._activate(state, nid, outputs, False)
        for nid, value in frame.inv_values:
            self._activate(state, nid, [value], value is DEAD)

    def _iteration_done(self, frame, k) -> bool:
        state = frame.iterations.get(k)
        if state is None or state.outstanding_ops or state.outstanding_frames:
            return False
        return frame.num_pending_inputs == 0 if k == 0 else (k - 1) not in frame.iterations

    def _cleanup(self, frame: FrameState, it: int):
        """After a node of (frame, it) finished: retire finished iterations, start deferred
        ones, and when the frame is done, hand its dead exits to the parent and recurse."""
        if frame.parent is None:
            return
        k = it
        while k <= frame.iteration_count and self._iteration_done(frame, k):
            del self.states[frame.iterations.pop(k).key >> self.plan.shift]
            frame.num_outstanding_iterations -= 1
            k += 1
            if frame.next_iter_roots:
                self._increment_iteration(frame)
        if frame.num_pending_inputs == 0 and frame.num_outstanding_iterations == 0:
            parent, parent_iter = frame.parent, frame.parent_iter
            state = parent.iterations[parent_iter]
            for nid in frame.dead_exits:
                self._activate(state, nid, [DEAD], True)
            del parent.children[(frame.name, parent_iter)]
            state.outstanding_frames -= 1
            self._cleanup(parent, parent_iter)


class _Continuation:
    """An async kernel's `done(out=None, error=None)`. Called within the kernel's own call on
    the scheduling thread (a Recv whose value was there, a dequeue from a non-empty queue), it
    leaves the result for the loop to use at once; called later, or from another thread, it
    queues a completion. Only the scheduling thread reads and clears `thread`, so a call from
    another thread always queues."""

    __slots__ = ("execution", "ins", "nid", "result", "st", "t0", "thread")

    def __init__(self, execution, st, nid, ins):
        self.execution, self.st, self.nid, self.ins = execution, st, nid, ins
        self.thread = threading.get_ident()  # the scheduling thread, while the kernel is called
        self.result = None
        self.t0 = time.perf_counter()

    def __call__(self, out=None, error=None):
        if self.thread and threading.get_ident() == self.thread:
            self.thread = 0
            self.result = (out, error)
            return
        completion = (self.st, self.nid, out, error, self.t0, time.perf_counter(), 0, self.ins)
        self.execution.completions.put(completion)


def _as_list(item, out) -> list:
    n = item.num_outputs
    if n == 1:
        return [out]
    return list(out) if n else []


def _merge(args) -> list:
    """A Merge's outputs: its first live input and that input's index, or both dead."""
    for i, x in enumerate(args):
        if x is not DEAD and x is not None:
            return [x, np.int32(i)]
    return [DEAD, DEAD]


def _release(mem, values):
    """A reader of `values` has run: their buffers lose one reference (tracing.MemoryTracker)."""
    if values:
        for value in values:
            mem.free(value)
