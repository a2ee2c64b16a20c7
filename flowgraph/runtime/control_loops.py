"""Loops that span devices (whitepaper §4.4; TensorFlow's graph_partition.cc AddControlFlow).

A device's executor learns that a loop iterates only from the loop's own Merge/Switch/
NextIteration nodes, and those live on one device. So that the nodes of a loop on another
device run once per iteration, with the right (frame, iteration) tag, partitioning gives each
such device a *control loop*: a dummy value entering the frame, a Merge of it and of its
NextIteration, and a Switch of the Merge on the loop's LoopCond, whose value is sent from the
device that owns the loop (the frame's leader broadcasts its predicate). The control loop's
Merge runs once per iteration; every _Recv of the frame on that device gets a control edge
from it, so it too runs once per iteration (and the matching _Send runs once per iteration on
its side, live or dead). Nested frames stack their control loops: an inner control loop's
Enter takes the outer control loop's Merge. The frame completes on each device when its
control loop's Switch sends nothing more to NextIteration.

Before that, as TensorFlow does, control-flow nodes of loops move next to their data: a Switch
and an Exit to the device of their input, an Enter (unless it forwards a reference) and a
NextIteration to the device of their first data consumer, so a loop variable's Enter, Merge,
Switch, Exit and NextIteration share a device and its edges stay local.
"""

from __future__ import annotations

import collections

import numpy as np

from flowgraph.core import dtypes, errors
from flowgraph.runtime.nodes import Node, make_node

_ENTER = frozenset({"Enter", "RefEnter"})
_EXIT = frozenset({"Exit", "RefExit"})
_SWITCH = frozenset({"Switch", "RefSwitch"})
_NEXT = frozenset({"NextIteration", "RefNextIteration"})


class FrameInfo:
    """The frame (loop name, "" for the root) of every node, and each frame's parent; as
    TF's BuildControlFlowInfo: an Enter is in its child frame, an Exit's outputs in the parent."""

    def __init__(self, nodes: list[Node]):
        self.frame: dict[str, str] = {}
        self.parent: dict[str, str] = {}
        self.loop_cond: dict[str, str] = {}  # frame -> its LoopCond node
        self.parallel: dict[str, int] = {}  # frame -> parallel_iterations of its Enters
        consumers = collections.defaultdict(list)
        by_name = {n.name: n for n in nodes}
        for n in nodes:
            for src, _ in n.inputs:
                consumers[src].append(n.name)
            for c in n.control:
                consumers[c].append(n.name)
        queue = collections.deque()
        for n in nodes:
            if not n.inputs and not n.control:
                self.frame[n.name] = ""
                queue.append(n)
        while queue:
            n = queue.popleft()
            out = self.output_frame(n)
            for name in consumers[n.name]:
                if name in self.frame:
                    continue
                dst = by_name[name]
                if dst.op in _ENTER:
                    child = dst.attrs["frame_name"]
                    self.frame[name] = child
                    self.parent.setdefault(child, out)
                    self.parallel.setdefault(child, dst.attrs.get("parallel_iterations", 10))
                else:
                    self.frame[name] = out
                queue.append(dst)
        for n in nodes:
            if n.op == "LoopCond":
                self.loop_cond[self.frame.get(n.name, "")] = n.name

    def output_frame(self, node: Node) -> str:
        """The frame of `node`'s outputs: the parent frame for an Exit."""
        f = self.frame.get(node.name, "")
        return self.parent.get(f, "") if node.op in _EXIT else f

    def input_frame(self, node: Node) -> str:
        """The frame `node`'s inputs come from: the parent frame for an Enter."""
        f = self.frame.get(node.name, "")
        return self.parent.get(f, "") if node.op in _ENTER else f


def colocate(nodes: list[Node], info: FrameInfo) -> list[Node]:
    """TF's OptimizeControlFlowColocation for the nodes of loops."""
    first_consumer = {}
    for n in nodes:
        for src, _ in n.inputs:
            first_consumer.setdefault(src, n.name)
    device = {n.name: n.device for n in nodes}
    for ops, follow_input in ((_SWITCH, True), (_EXIT, True), (_ENTER | _NEXT, False)):
        for n in nodes:
            if n.op not in ops or not info.frame.get(n.name, ""):
                continue
            if follow_input and n.inputs:
                device[n.name] = device[n.inputs[0][0]]
            elif not follow_input and not n.input_types[0].is_ref_dtype:
                dst = first_consumer.get(n.name)
                if dst is not None:
                    device[n.name] = device[dst]
    return [n.replace(device=device[n.name]) if device[n.name] != n.device else n for n in nodes]


class ControlLoops:
    """Adds the control loops a partitioned graph needs; `recv_control(src, dst_device)` names
    the control input a _Recv of `src`'s value on `dst_device` must get."""

    def __init__(self, nodes: list[Node]):
        self.info = info = FrameInfo(nodes)
        self.nodes = nodes = colocate(nodes, info) if info.loop_cond else nodes
        self.loops: dict[tuple[str, str], str] = {}  # (frame, device) -> control Merge
        self._added: list[Node] = []
        if not info.loop_cond:
            return
        device = {n.name: n.device for n in nodes}
        by_name = {n.name: n for n in nodes}
        for n in nodes:
            srcs = [s for s, _ in n.inputs] + list(n.control)
            for src in srcs:
                if device[src] == n.device:
                    continue
                f = info.output_frame(by_name[src])
                if f and f == info.input_frame(n):
                    self._ensure(f, n.device)
            f = info.frame.get(n.name, "")
            # A device holding nodes of a frame that it does not lead iterates with it too
            # (an Enter whose invariant value is sent to the leader each iteration).
            if f and f in info.loop_cond and n.device != device[info.loop_cond[f]]:
                self._ensure(f, n.device)
        self.nodes = nodes + self._added

    def recv_control(self, src: Node, dst_device: str) -> tuple:
        f = self.info.output_frame(src)
        return (self.loops[(f, dst_device)],) if f and (f, dst_device) in self.loops else ()

    def _ensure(self, frame: str, dev: str) -> str:
        merge = self.loops.get((frame, dev))
        if merge is not None:
            return merge
        cond = self.info.loop_cond.get(frame)
        if cond is None:
            raise errors.InvalidArgumentError(
                None, None, f"A cross-device loop must have a pivot predicate: {frame}"
            )
        outer = self.info.parent.get(frame, "")
        k = len(self.loops)
        name = f"_cloop{k}/{frame}"
        if outer:
            source = self._ensure(outer, dev)
        else:
            source = f"{name}/const"
            self._add(
                make_node(
                    source,
                    "Const",
                    device=dev,
                    attrs={"value": np.zeros([0], np.float32), "dtype": dtypes.float32},
                )
            )
        f32 = {"T": dtypes.float32}
        enter, merge, switch, nxt = (f"{name}/{s}" for s in ("enter", "merge", "switch", "next"))
        parallel = self.info.parallel.get(frame, 10)
        self._add(
            make_node(
                enter,
                "Enter",
                [(source, 0)],
                device=dev,
                attrs=f32 | {"frame_name": frame, "parallel_iterations": parallel},
            )
        )
        self._add(
            make_node(merge, "Merge", [(enter, 0), (nxt, 0)], device=dev, attrs=f32 | {"N": 2})
        )
        self._add(make_node(switch, "Switch", [(merge, 0), (cond, 0)], device=dev, attrs=f32))
        self._add(make_node(nxt, "NextIteration", [(switch, 1)], device=dev, attrs=f32))
        self.loops[(frame, dev)] = merge
        self.info.frame.update({enter: frame, merge: frame, switch: frame, nxt: frame})
        return merge

    def _add(self, node: Node):
        self._added.append(node)
