"""The executor for cyclic graphs (whitepaper §4.4): frames, iterations and dead tensors.

Like the MIT Tagged-Token machine, every value carries a tag (frame, iteration). A frame is one
activation of a loop, created by its first Enter and keyed by (frame name, parent frame,
parent iteration); each iteration of it has its own pending counts and input slots, so up to
`parallel_iterations` iterations run at once. Enter moves a value into iteration 0 of a child
frame (`is_constant` Enters are loop invariants, delivered to every iteration), NextIteration
into the next iteration, Exit into the parent frame. The untaken output of a Switch is DEAD;
a node with a dead input is dead and does not run, except Merge, which fires on its first live
input (dead only when all its inputs are dead, or its loop Enter is), and _Send, which carries
the deadness to other devices. Dead NextIteration values are dropped: that is how loops end.

Values are kept per iteration in each consumer's input slots (not the producer's), because an
edge may cross frames and iterations.
"""

from __future__ import annotations

import collections
import functools
import queue
import threading
import time
import zlib

import numpy as np

from flowgraph.core import errors
from flowgraph.runtime.executor import ASYNC, ExecutorPlan, Step, node_error
from flowgraph.runtime.rendezvous import DEAD

NORMAL, MERGE, ENTER, EXIT, NEXT, SWITCH, TRIGGER, SEND, RECV, FORWARD = range(10)
_FORWARDING = frozenset({"Identity", "LoopCond", "StopGradient", "Snapshot"})  # output = input
_KINDS = {
    "Merge": MERGE,
    "RefMerge": MERGE,
    "Enter": ENTER,
    "RefEnter": ENTER,
    "Exit": EXIT,
    "RefExit": EXIT,
    "NextIteration": NEXT,
    "RefNextIteration": NEXT,
    "Switch": SWITCH,
    "RefSwitch": SWITCH,
    "ControlTrigger": TRIGGER,
    "_Send": SEND,
    "_Recv": RECV,
}


class FramesPlan:
    """Static per-node facts for tagged execution, derived once from an ExecutorPlan."""

    def __init__(self, plan: ExecutorPlan):
        items = plan.items
        n = len(items)
        self.kind = [_KINDS.get(i.node.op, NORMAL) for i in items]
        for i in items:  # plain forwarders skip the kernel call (unless they read a reference)
            if i.node.op in _FORWARDING and isinstance(i.compute, functools.partial):
                self.kind[i.id] = FORWARD
        self.in_base = [0] * n  # first input slot of each node
        slot = 0
        for i in items:
            self.in_base[i.id] = slot
            slot += len(i.node.inputs)
        self.num_inputs = slot
        index = {i.node.name: i.id for i in items}
        # out_edges[src] = [(dst, dst input slot or -1 for a control edge, src output index)]
        self.out_edges = [[] for _ in range(n)]
        self.pending = [0] * n
        for i in items:
            node = i.node
            for k, (src, port) in enumerate(node.inputs):
                self.out_edges[index[src]].append((i.id, self.in_base[i.id] + k, port))
            for c in node.control:
                self.out_edges[index[c]].append((i.id, -1, 0))
            if self.kind[i.id] == MERGE:
                # Merge: control inputs count twice; the low bit is cleared by the first live input.
                self.pending[i.id] = (len(node.control) << 1) | 1
            else:
                self.pending[i.id] = len(node.inputs) + len(node.control)
        self.num_data_inputs = [len(i.node.inputs) for i in items]
        self.roots = [i for i in range(n) if self.pending[i] == 0]


class IterationState:
    """One iteration of one frame. It is done when outstanding_ops == 0, every child frame
    started in it is done, and the previous iteration is done (or, for iteration 0, every Enter
    of the frame has delivered). All fields are guarded by the scheduling thread (only it
    touches them)."""

    __slots__ = ("pending", "dead", "inputs", "outstanding_ops", "outstanding_frames")

    def __init__(self, fp: FramesPlan):
        self.pending = fp.pending[:]
        self.dead = [0] * len(fp.pending)
        self.inputs = [None] * fp.num_inputs
        self.outstanding_ops = 0
        self.outstanding_frames = 0


class FrameState:
    """One activation of a loop. It is done when every Enter has delivered
    (num_pending_inputs == 0) and no iteration is outstanding."""

    __slots__ = (
        "name",
        "id",
        "parent",
        "parent_iter",
        "max_parallel",
        "iterations",
        "iteration_count",
        "num_outstanding_iterations",
        "num_pending_inputs",
        "inv_values",
        "next_iter_roots",
        "dead_exits",
        "children",
    )

    def __init__(self, name, parent, parent_iter, max_parallel, num_enters, fp):
        self.name = name
        key = f"{parent.id if parent else 0};{parent_iter};{name}"
        self.id = zlib.crc32(key.encode()) if parent else 0
        self.parent = parent
        self.parent_iter = parent_iter
        self.max_parallel = max(1, max_parallel)
        self.iterations = {0: IterationState(fp)}
        self.iteration_count = 0
        self.num_outstanding_iterations = 1
        self.num_pending_inputs = num_enters
        self.inv_values = []  # (enter node id, value): loop invariants for every iteration
        self.next_iter_roots = []  # (node id, value) deferred by the parallel_iterations limit
        self.dead_exits = []  # Exit node ids that got a dead value in the latest iteration
        self.children = {}  # (enter frame name, iteration) -> FrameState


def _enter_counts(plan: ExecutorPlan) -> dict:
    """Number of Enter nodes per frame name: a frame's iteration 0 waits for all of them."""
    counts = collections.Counter()
    for item in plan.items:
        if _KINDS.get(item.node.op) == ENTER:
            counts[item.node.attrs["frame_name"]] += 1
    return counts


def execute_frames(plan: ExecutorPlan, step: Step) -> None:
    fp = getattr(plan, "_frames_plan", None)
    if fp is None:
        fp = plan._frames_plan = FramesPlan(plan)
        plan._enter_counts = _enter_counts(plan)
    _TaggedExecution(plan, fp, step).run()


class _TaggedExecution:
    """One step of a cyclic graph; all bookkeeping happens on the scheduling thread."""

    def __init__(self, plan: ExecutorPlan, fp: FramesPlan, step: Step):
        self.plan, self.fp, self.step = plan, fp, step
        self.items = plan.items
        self.root = FrameState("", None, 0, 1, 0, fp)
        self.ready = collections.deque()
        self.completions = queue.SimpleQueue()
        self.inflight = 0
        self.error = None
        it0 = self.root.iterations[0]
        for nid in fp.roots:
            it0.outstanding_ops += 1
            self.ready.append((self.root, 0, nid, False))

    # -- the loop --------------------------------------------------------------------------
    def run(self):
        pool = self.plan.device.thread_pool
        items, ready, fp, step = self.items, self.ready, self.fp, self.step
        fkind, in_base, ndata = fp.kind, fp.in_base, fp.num_data_inputs
        popleft = ready.popleft
        stats = step.stats
        while True:
            while ready and self.error is None:
                frame, it, nid, dead = popleft()
                item = items[nid]
                kind = fkind[nid]
                state = frame.iterations[it]
                base = in_base[nid]
                args = state.inputs[base : base + ndata[nid]]
                if (kind or dead) and self._route(frame, it, nid, item, kind, dead, args):
                    continue
                if kind == SEND and dead:
                    args = [DEAD]
                if item.step_arg:
                    step.frame_iter = (frame.id, it)
                    args.insert(0, step)
                if item.kind == ASYNC:
                    self.inflight += 1
                    args.insert(1, self._continuation(frame, it, nid))
                    try:
                        item.compute(*args)
                    except BaseException as e:
                        self.completions.put((frame, it, nid, None, e))
                    continue
                if item.kind and pool is not None and (ready or self.inflight):
                    self.inflight += 1
                    pool.submit(self._pooled, frame, it, nid, args)
                    continue
                t0 = time.perf_counter() if stats is not None else 0.0
                try:
                    out = item.compute(*args)
                except BaseException as e:
                    self._fail(item, e)
                    break
                if stats is not None:
                    stats.record(
                        self.plan.device.name,
                        item,
                        t0,
                        time.perf_counter(),
                        out,
                        threading.get_ident(),
                    )
                n = item.num_outputs
                outs = [out] if n == 1 else list(out) if n else []
                if kind == NORMAL or kind == SWITCH:  # _done's common case, inlined
                    self._activate(frame, it, nid, outs, False)
                    state.outstanding_ops -= 1
                    if not state.outstanding_ops and frame.parent is not None:
                        self._cleanup(frame, it, decrement=False)
                else:
                    self._done(frame, it, nid, outs, False)
            if not self.inflight:
                break
            frame, it, nid, out, exc = self.step.wait(self.completions)
            self.inflight -= 1
            if exc is not None:
                self._fail(self.items[nid], exc)
            elif self.error is None:
                self._done(frame, it, nid, self._as_list(self.items[nid], out), False)
        if self.error is not None:
            self.step.rendezvous.abort(
                errors.CancelledError(None, None, "Step was cancelled by an error in another node")
            )
            raise self.error

    def _route(self, frame, it, nid, item, kind, dead, args) -> bool:
        """Handles a dead node or a control-flow primitive without a kernel call; False means
        the node still runs its kernel (a live Switch, _Send or _Recv, or a dead _Send)."""
        if dead and kind not in (TRIGGER, SEND):
            self._done(frame, it, nid, [DEAD] * item.num_outputs, True)
        elif kind == MERGE:
            self._done(frame, it, nid, list(self._merge(args)), False)
        elif kind in (ENTER, EXIT, NEXT, FORWARD):
            self._done(frame, it, nid, [args[0]], False)
        elif kind == TRIGGER:
            self._done(frame, it, nid, [], False)
        else:
            return False
        return True

    def _fail(self, item, e):
        if self.error is None:
            self.error = node_error(item, self.plan.device.name, e)
            self.step.cancelled = True
            self.step.rendezvous.abort(
                errors.CancelledError(None, None, "Step was cancelled by an error in another node")
            )

    @staticmethod
    def _as_list(item, out):
        n = item.num_outputs
        if n == 1:
            return [out]
        return list(out) if n else []

    @staticmethod
    def _merge(args):
        for i, x in enumerate(args):
            if x is not DEAD and x is not None:
                return x, i
        return DEAD, DEAD

    def _pooled(self, frame, it, nid, args):
        t0 = time.perf_counter()
        try:
            with np.errstate(all="ignore"):
                out = self.items[nid].compute(*args)
        except BaseException as e:  # handed to the scheduling thread
            self.completions.put((frame, it, nid, None, e))
            return
        if self.step.stats is not None:
            self.step.stats.record(
                self.plan.device.name,
                self.items[nid],
                t0,
                time.perf_counter(),
                out,
                threading.get_ident(),
            )
        self.completions.put((frame, it, nid, out, None))

    def _continuation(self, frame, it, nid):
        def done(out=None, error=None):
            self.completions.put((frame, it, nid, out, error))

        return done

    # -- propagation (TF's PropagateOutputs + NodeDone) ------------------------------------
    def _done(self, frame, it, nid, outputs, is_dead):
        kind = self.fp.kind[nid]
        is_dead = is_dead or (kind == RECV and outputs and outputs[0] is DEAD)
        if kind == ENTER:
            attrs = self.items[nid].node.attrs
            child = self._child_frame(frame, it, attrs)
            if attrs["is_constant"]:
                child.inv_values.append((nid, outputs[0]))
                for k in list(child.iterations):
                    self._activate(child, k, nid, outputs, is_dead)
            else:
                self._activate(child, 0, nid, outputs, is_dead)
            child.num_pending_inputs -= 1
            if child.num_pending_inputs == 0:
                self._cleanup(child, 0, decrement=False)
        elif kind == EXIT:
            if is_dead:
                if it == frame.iteration_count:
                    frame.dead_exits.append(nid)
            else:
                self._activate(frame.parent, frame.parent_iter, nid, outputs, False)
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
                    self._activate(frame, it + 1, nid, outputs, False)
        else:
            self._activate(frame, it, nid, outputs, is_dead)
        state = frame.iterations[it]
        state.outstanding_ops -= 1
        if not state.outstanding_ops and frame.parent is not None:
            self._cleanup(frame, it, decrement=False)

    def _child_frame(self, frame, it, attrs) -> FrameState:
        key = (attrs["frame_name"], it)
        child = frame.children.get(key)
        if child is None:
            name = attrs["frame_name"]
            child = FrameState(
                name,
                frame,
                it,
                attrs.get("parallel_iterations", 10),
                self.plan._enter_counts[name],
                self.fp,
            )
            frame.children[key] = child
            frame.iterations[it].outstanding_frames += 1
        return child

    def _activate(self, frame, it, src, outputs, is_dead):
        """Delivers `src`'s outputs (or its deadness) to its consumers in (frame, it)."""
        state = frame.iterations[it]
        pending, dead, inputs = state.pending, state.dead, state.inputs
        kind = self.fp.kind
        append = self.ready.append
        for dst, slot, port in self.fp.out_edges[src]:
            if slot >= 0:
                value = outputs[port] if not is_dead else DEAD
                live = value is not DEAD
            else:
                live = not is_dead
            if kind[dst] != MERGE:  # the common case, kept short
                if slot >= 0:
                    inputs[slot] = value
                if not live:
                    dead[dst] += 1
                n = pending[dst] - 1
                pending[dst] = n
                if not n:
                    state.outstanding_ops += 1
                    append((frame, it, dst, dead[dst] > 0))
                continue
            if slot < 0:  # a Merge's control edge
                pending[dst] -= 2
                count = pending[dst]
                dst_dead = dead[dst] == self.fp.num_data_inputs[dst]
                ready = count == 0 or (count == 1 and dst_dead)
            elif live:  # the Merge fires on its first live input (low bit of its count)
                count = pending[dst]
                if count & 1:
                    inputs[slot] = value
                    pending[dst] = count & ~1
                ready = count == 1
                dst_dead = False
            else:  # dead only when all inputs are, or its loop's Enter is
                dead[dst] += 1
                dst_dead = dead[dst] == self.fp.num_data_inputs[dst] or kind[src] == ENTER
                ready = pending[dst] == 1 and dst_dead
                if ready:
                    pending[dst] = 0
            if ready:
                state.outstanding_ops += 1
                append((frame, it, dst, dst_dead))

    def _increment_iteration(self, frame: FrameState):
        frame.iteration_count += 1
        k = frame.iteration_count
        frame.iterations[k] = IterationState(self.fp)
        frame.num_outstanding_iterations += 1
        frame.dead_exits.clear()
        roots, frame.next_iter_roots = frame.next_iter_roots, []
        for nid, outputs in roots:
            self._activate(frame, k, nid, outputs, False)
        for nid, value in frame.inv_values:
            self._activate(frame, k, nid, [value], value is DEAD)

    def _iteration_done(self, frame, k) -> bool:
        state = frame.iterations.get(k)
        if state is None or state.outstanding_ops or state.outstanding_frames:
            return False
        return frame.num_pending_inputs == 0 if k == 0 else (k - 1) not in frame.iterations

    def _cleanup(self, frame: FrameState, it: int, decrement: bool):
        """After a node of (frame, it) finished: retire finished iterations, start deferred
        ones, and when the frame is done, hand its dead exits to the parent and recurse."""
        if decrement:
            frame.iterations[it].outstanding_ops -= 1
        if frame.parent is None:
            return
        k = it
        while k <= frame.iteration_count and self._iteration_done(frame, k):
            del frame.iterations[k]
            frame.num_outstanding_iterations -= 1
            k += 1
            if frame.next_iter_roots:
                self._increment_iteration(frame)
        if frame.num_pending_inputs == 0 and frame.num_outstanding_iterations == 0:
            parent, parent_iter = frame.parent, frame.parent_iter
            for nid in frame.dead_exits:
                self._activate(parent, parent_iter, nid, [DEAD], True)
            del parent.children[(frame.name, parent_iter)]
            parent.iterations[parent_iter].outstanding_frames -= 1
            self._cleanup(parent, parent_iter, decrement=False)
