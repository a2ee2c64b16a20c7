"""Timelines of a step (whitepaper §9.2, the "EEG" view): a traced Run's StepStats as a Chrome
trace (the JSON Trace Event Format that chrome://tracing and Perfetto open).

Layout of the trace:

* one process per device ("<device> Compute"), one track per thread that ran its ops (the
  names come from `DeviceStepStats.thread_names`); ops that overlap on one thread without
  nesting (an async Recv waiting while the thread runs other ops) go to extra tracks of that
  thread, because a trace track must hold properly nested slices;
* with `show_dataflow`, flow arrows for data edges whose producer ran on another track, and one
  arrow from each `_Send` to the `_Recv` with the same rendezvous tensor name (the label's
  "@tensor_name" suffix), i.e. the transfer between devices;
* with `show_memory`, a "<device> Tensors" process with one object per output tensor (created
  when its producer starts, deleted after its last reader) and an "Allocators" process with one
  counter per allocator: bytes in use over time, replayed from the nodes' allocation records
  (or from the tensors' lifetimes when a trace has none).

Usage, as in TF1:
    run_metadata = tf.RunMetadata()
    sess.run(train_op, options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE),
             run_metadata=run_metadata)
    trace = timeline.Timeline(run_metadata.step_stats).generate_chrome_trace_format()
"""

from __future__ import annotations

import collections
import json
import re

__all__ = ["AllocationMaximum", "StepStatsAnalysis", "Timeline"]

AllocationMaximum = collections.namedtuple(
    "AllocationMaximum", ("timestamp", "num_bytes", "tensors")
)
AllocationMaximum.__doc__ = "The peak of one allocator: when, how many bytes, which tensors."
StepStatsAnalysis = collections.namedtuple(
    "StepStatsAnalysis", ("chrome_trace", "allocator_maximums")
)
StepStatsAnalysis.__doc__ = "A ChromeTraceFormatter and the allocator name -> AllocationMaximum."

_LABEL = re.compile(r"(.*?) = (.*?)\((.*?)\)(?: @(\S+))?$")
_OP_TIMES = ("schedule", "gpu", "all")


class ChromeTraceFormatter:
    """Accumulates Chrome trace events; `format_to_string` writes the JSON document.

    Each `emit_*` method writes one event phase of the Trace Event Format: "M" metadata
    (process and thread names), "X" complete slices, "N"/"O"/"D" object lifetimes, "s"/"t"
    flow arrows, and "C" counters."""

    def __init__(self):
        self._metadata = []
        self._events = []

    def _event(self, ph, category, name, pid, tid, timestamp):
        return {"ph": ph, "cat": category, "name": name, "pid": pid, "tid": tid, "ts": timestamp}

    def emit_pid(self, name, pid):
        """Names process `pid`."""
        self._metadata.append(
            {"name": "process_name", "ph": "M", "pid": pid, "args": {"name": name}}
        )

    def emit_tid(self, name, pid, tid):
        """Names track `tid` of process `pid`."""
        self._metadata.append(
            {"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}}
        )

    def emit_region(self, timestamp, duration, pid, tid, category, name, args):
        """A slice [timestamp, timestamp + duration) on a track."""
        event = self._event("X", category, name, pid, tid, timestamp)
        event["dur"] = duration
        event["args"] = args
        self._events.append(event)

    def emit_obj_create(self, category, name, timestamp, pid, tid, object_id):
        event = self._event("N", category, name, pid, tid, timestamp)
        event["id"] = object_id
        self._events.append(event)

    def emit_obj_delete(self, category, name, timestamp, pid, tid, object_id):
        event = self._event("D", category, name, pid, tid, timestamp)
        event["id"] = object_id
        self._events.append(event)

    def emit_obj_snapshot(self, category, name, timestamp, pid, tid, object_id, snapshot):
        event = self._event("O", category, name, pid, tid, timestamp)
        event["id"] = object_id
        event["args"] = {"snapshot": snapshot}
        self._events.append(event)

    def emit_flow_start(self, name, timestamp, pid, tid, flow_id):
        """The tail of an arrow, bound to the slice enclosing `timestamp` on (pid, tid)."""
        event = self._event("s", "DataFlow", name, pid, tid, timestamp)
        event["id"] = flow_id
        self._events.append(event)

    def emit_flow_end(self, name, timestamp, pid, tid, flow_id):
        """The head of an arrow, bound to the slice enclosing `timestamp` on (pid, tid)."""
        event = self._event("t", "DataFlow", name, pid, tid, timestamp)
        event["id"] = flow_id
        self._events.append(event)

    def emit_counter(self, category, name, pid, timestamp, counter, value):
        """One sample of a counter track."""
        event = self._event("C", category, name, pid, 0, timestamp)
        event["args"] = {counter: value}
        self._events.append(event)

    def emit_counters(self, category, name, pid, timestamp, counters):
        """One sample of several series of one counter track."""
        event = self._event("C", category, name, pid, 0, timestamp)
        event["args"] = dict(counters)
        self._events.append(event)

    def format_to_string(self, pretty=False):
        """The trace as a JSON document {"traceEvents": [...]}."""
        trace = {"traceEvents": self._metadata + self._events}
        return json.dumps(
            trace, indent=4 if pretty else None, separators=None if pretty else (",", ":")
        )


_ChromeTraceFormatter = ChromeTraceFormatter  # TF's private name, used by scripts that merge traces


def parse_label(label: str):
    """'n = Op(a, b:1) @key' -> ('n', 'Op', ['a', 'b:1'], 'key'); unknown labels give
    ('unknown', 'unknown', [], None)."""
    match = _LABEL.match(label)
    if match is None:
        return "unknown", "unknown", [], None
    name, op, inputs, key = match.groups()
    return name, op, [i for i in inputs.split(", ") if i], key


class _Tensor:
    """One output tensor's lifetime: created when its producer starts, alive until the last
    reader has finished."""

    def __init__(self, name, object_id, create_time, pid, allocator, num_bytes):
        self.name = name
        self.object_id = object_id
        self.create_time = create_time
        self.last_unref = create_time
        self.pid = pid
        self.allocator = allocator
        self.num_bytes = num_bytes

    def unref(self, timestamp):
        self.last_unref = max(self.last_unref, timestamp)


class Timeline:
    """Turns one step's StepStats into a Chrome trace. Not thread safe.

    Args:
      step_stats: the `StepStats` of a traced run (`RunMetadata.step_stats`).
      graph: optional; accepted for TF1 compatibility (the labels already name the inputs).
    """

    def __init__(self, step_stats, graph=None):
        self._step_stats = step_stats
        self._graph = graph
        self._trace = ChromeTraceFormatter()
        self._next_pid = 0
        self._next_flow = 0
        self._device_pids = {}
        self._tensor_pids = {}
        self._tracks = {}  # (device index, node index) -> tid of its track in its device's process
        self._tensors = {}  # tensor name -> _Tensor
        self._produced = {}  # tensor name -> (end time, pid, tid) of its producer
        self._sends = {}  # rendezvous tensor name -> (start, end, pid, tid) of the _Send
        self._maximums = {}

    # -- processes and tracks -------------------------------------------------------------
    def _alloc_pid(self):
        pid = self._next_pid
        self._next_pid += 1
        return pid

    def _allocate_pids(self):
        self._allocators_pid = self._alloc_pid()
        self._trace.emit_pid("Allocators", self._allocators_pid)
        for dev in self._step_stats.dev_stats:
            pid = self._alloc_pid()
            self._device_pids[dev.device] = pid
            self._trace.emit_pid(dev.device + " Compute", pid)
            tensors_pid = self._alloc_pid()
            self._tensor_pids[dev.device] = tensors_pid
            self._trace.emit_pid(dev.device + " Tensors", tensors_pid)

    def _assign_tracks(self):
        """Traces that name their threads (flowgraph's) get one track per thread; others
        (TensorFlow's thread ids are not meaningful) get TensorFlow's greedy lanes."""
        for d, dev in enumerate(self._step_stats.dev_stats):
            if dev.thread_names:
                self._thread_tracks(d, dev)
            else:
                self._greedy_lanes(d, dev)

    def _greedy_lanes(self, d, dev):
        """Each slice goes to the first lane whose last slice ended before it starts."""
        lanes = [0]
        for i, ns in enumerate(dev.node_stats):
            end = ns.all_start_micros + ns.all_end_rel_micros
            for lane, busy_until in enumerate(lanes):
                if ns.all_start_micros > busy_until:
                    break
            else:
                lane = len(lanes)
                lanes.append(0)
            lanes[lane] = end
            self._tracks[d, i] = lane

    def _thread_tracks(self, d, dev):
        """One track per thread; a slice that would overlap another on its thread without
        nesting in it moves to the thread's next track."""
        pid = self._device_pids[dev.device]
        by_thread = collections.defaultdict(list)
        for i, ns in enumerate(dev.node_stats):
            by_thread[ns.thread_id].append((i, ns))
        next_tid = 0
        for thread_id in sorted(by_thread):
            name = dev.thread_names.get(thread_id, f"thread {thread_id}")
            lanes = []  # per track: stack of end times of the open slices
            tids = []
            ordered = sorted(
                by_thread[thread_id],
                key=lambda e: (e[1].all_start_micros, -e[1].all_end_rel_micros),
            )
            for i, ns in ordered:
                start, end = ns.all_start_micros, ns.all_start_micros + ns.all_end_rel_micros
                for lane, stack in enumerate(lanes):
                    while stack and stack[-1] <= start:
                        stack.pop()
                    if not stack or stack[-1] >= end:
                        break
                else:
                    lane = len(lanes)
                    lanes.append([])
                    tids.append(next_tid)
                    label = name if lane == 0 else f"{name} (overlapping {lane})"
                    self._trace.emit_tid(label, pid, next_tid)
                    next_tid += 1
                lanes[lane].append(end)
                self._tracks[d, i] = tids[lane]

    # -- tensors, ops and arrows ----------------------------------------------------------
    def _analyze_tensors(self, show_memory):
        for d, dev in enumerate(self._step_stats.dev_stats):
            pid = self._device_pids[dev.device]
            tensors_pid = self._tensor_pids.get(dev.device)
            for i, ns in enumerate(dev.node_stats):
                tid = self._tracks[d, i]
                start, end = ns.all_start_micros, ns.all_start_micros + ns.all_end_rel_micros
                for index, output in enumerate(ns.output):
                    name = ns.node_name if index == 0 else f"{ns.node_name}:{index}"
                    alloc = output.tensor_description.allocation_description
                    tensor = _Tensor(
                        name,
                        len(self._tensors),
                        start,
                        tensors_pid,
                        alloc.allocator_name,
                        alloc.requested_bytes,
                    )
                    tensor.unref(end)
                    self._tensors[name] = tensor
                    self._produced[name] = (end, pid, tid)
                    if show_memory:
                        self._trace.emit_obj_create(
                            "Tensor", name, start, tensors_pid, tid, tensor.object_id
                        )
                        snapshot = {
                            "tensor_description": str(output.tensor_description).replace('"', "")
                        }
                        self._trace.emit_obj_snapshot(
                            "Tensor",
                            name,
                            max(end - 1, start),
                            tensors_pid,
                            tid,
                            tensor.object_id,
                            snapshot,
                        )

    def _find_tensor(self, name):
        name = name.removesuffix(":0")
        if name in self._tensors:
            return name
        # TensorFlow's own traces name a Recv's output "x/_12" and omit the Send/Recv nodes:
        # the data came from "x".
        cut = name.rfind("/_")
        if cut > 0 and name[:cut] in self._tensors:
            return name[:cut]
        return None

    def _arrow(self, name, src, dst_time, dst_pid, dst_tid):
        flow_id = self._next_flow
        self._next_flow += 1
        src_time, src_pid, src_tid = src
        self._trace.emit_flow_start(name, src_time, src_pid, src_tid, flow_id)
        self._trace.emit_flow_end(name, dst_time, dst_pid, dst_tid, flow_id)

    def _show_compute(self, show_dataflow):
        recvs = []
        for d, dev in enumerate(self._step_stats.dev_stats):
            pid = self._device_pids[dev.device]
            for i, ns in enumerate(dev.node_stats):
                tid = self._tracks[d, i]
                start, end = ns.all_start_micros, ns.all_start_micros + ns.all_end_rel_micros
                _, op, inputs, key = parse_label(ns.timeline_label)
                if ns.node_name == "RecvTensor":
                    op = "RecvTensor"
                args = {"name": ns.node_name, "op": op}
                for i, input_name in enumerate(inputs):
                    args[f"input{i}"] = input_name
                self._trace.emit_region(start, ns.all_end_rel_micros, pid, tid, "Op", op, args)
                if key is not None and op.endswith("Send"):
                    self._sends[key] = (start, end, pid, tid)
                elif key is not None and op.endswith("Recv"):
                    recvs.append((key, start, end, pid, tid))
                for input_name in inputs:
                    if input_name.startswith("^"):
                        continue
                    found = self._find_tensor(input_name)
                    if found is None:
                        continue  # pruned, or fed: nothing in this step produced it
                    tensor = self._tensors[found]
                    tensor.unref(end - 1)
                    src = self._produced[found]
                    if show_dataflow and (src[1], src[2]) != (pid, tid):
                        self._arrow(found, src, start, pid, tid)
        if show_dataflow:
            for key, start, end, pid, tid in recvs:
                send = self._sends.get(key)
                if send is None:
                    continue
                # The transfer: from the Send into the Recv. Each end lies strictly inside its
                # slice (a timestamp on a slice boundary would bind to the neighbouring slice).
                send_start, send_end, send_pid, send_tid = send
                tail = send_start + (send_end - send_start) // 2
                head = max(start, end - 1)
                self._arrow(key, (tail, send_pid, send_tid), head, pid, tid)

    # -- memory ---------------------------------------------------------------------------
    def _allocations(self):
        """allocator -> [(time, +-bytes, tensor name)]: from allocation records where the
        trace has them, else from the tensors' lifetimes."""
        out = collections.defaultdict(list)
        for dev in self._step_stats.dev_stats:
            for ns in dev.node_stats:
                for used in ns.memory:
                    for r in used.allocation_records:
                        out[used.allocator_name].append(
                            (r.alloc_micros, r.alloc_bytes, ns.node_name)
                        )
        if out:
            return out
        for tensor in self._tensors.values():
            out[tensor.allocator].append((tensor.create_time, tensor.num_bytes, tensor.name))
            out[tensor.allocator].append((tensor.last_unref, -tensor.num_bytes, tensor.name))
        return out

    def _compute_memory_usage(self):
        for tensor in self._tensors.values():
            self._trace.emit_obj_delete(
                "Tensor", tensor.name, tensor.last_unref, tensor.pid, 0, tensor.object_id
            )
        for allocator, events in sorted(self._allocations().items()):
            live, total = collections.Counter(), 0
            best = AllocationMaximum(timestamp=0, num_bytes=0, tensors=set())
            for timestamp, num_bytes, name in sorted(events, key=lambda e: (e[0], -e[1])):
                total += num_bytes
                live[name] += num_bytes
                if live[name] <= 0:
                    del live[name]
                if total > best.num_bytes:
                    best = AllocationMaximum(timestamp, total, set(live))
                self._trace.emit_counter(
                    "Memory", allocator, self._allocators_pid, timestamp, allocator, total
                )
            self._maximums[allocator] = best

    # -- entry points ---------------------------------------------------------------------
    def analyze_step_stats(self, show_dataflow=True, show_memory=True, op_time="schedule"):
        """Builds the trace once; returns StepStatsAnalysis(chrome_trace, allocator_maximums).

        `op_time` chooses which span an op's slice covers on devices with separate kernel
        streams (GPUs); on CPU devices the three choices ('schedule', 'gpu', 'all') agree."""
        if op_time not in _OP_TIMES:
            raise ValueError(f"op_time must be one of {_OP_TIMES}, got {op_time!r}")
        if self._next_pid:
            raise RuntimeError("Timeline.analyze_step_stats can be called once per Timeline")
        self._allocate_pids()
        self._assign_tracks()
        self._analyze_tensors(show_memory)
        self._show_compute(show_dataflow)
        if show_memory:
            self._compute_memory_usage()
        return StepStatsAnalysis(chrome_trace=self._trace, allocator_maximums=self._maximums)

    def generate_chrome_trace_format(
        self, show_dataflow=True, show_memory=False, op_time="schedule"
    ):
        """The step as a Chrome trace JSON string (open it in chrome://tracing or Perfetto)."""
        analysis = self.analyze_step_stats(show_dataflow, show_memory, op_time)
        return analysis.chrome_trace.format_to_string(pretty=True)
