"""Step statistics (whitepaper §9.2): per-node start/end times, threads, outputs and memory,
collected only when a Run asks for a trace (RunOptions.trace_level), returned as StepStats.

What each NodeExecStats holds, as TensorFlow fills it (TensorBoard's graph dashboard and
`timeline.py` read these fields):

* times: `all_start_micros` (wall clock) and the op's span relative to it, in micros and nanos;
* `thread_id`: a small number per device and thread (names in `DeviceStepStats.thread_names`);
* `timeline_label`: "name = Op(input, input:1, ^control)", the one place a trace names a node's
  inputs (a _Send or _Recv adds " @tensor_name", its rendezvous key's tensor name);
* one `output` per output slot: dtype, shape (empty dims for a scalar) and an
  `allocation_description` (bytes, allocator, buffer address; `allocated_bytes` only when the
  node allocated the buffer in this step);
* `memory`: one AllocatorMemoryUsed when the node allocated buffers in this step: their bytes
  (`total_bytes`, `peak_bytes`), what is still live when it ends (`live_bytes`), the device's
  bytes in use then (`allocator_bytes_in_use`), and `allocation_records`: +bytes when allocated,
  -bytes when the last reader released the buffer (the executor's MemoryTracker tells);
* `memory_stats.persistent_memory_size`: bytes of state outliving the step (constants, variables).

An output that aliases a buffer already seen in the step (Identity, Reshape, a variable read) is
not a new allocation; neither is a received tensor (its producer or the client allocated it).
"""

from __future__ import annotations

import threading
import time
import weakref

import numpy as np

from flowgraph.core import dtypes
from flowgraph.core.protos import StepStats
from flowgraph.kernels.variable_state import VariableState

ALLOCATOR_NAME = "cpu"  # TensorFlow's name for its CPU allocator
# Ops whose outputs are state that outlives the step: counted as persistent memory.
PERSISTENT_OPS = frozenset({"Const", "HostConst", "VariableV2", "Variable"})
# Ops that hand over a buffer allocated elsewhere (the client or another device).
RECEIVING_OPS = frozenset({"_Recv", "_HostRecv", "Placeholder", "PlaceholderWithDefault"})


def _root(array):
    """The array owning the memory behind `array` (a view's base chain ends there); a NumPy
    scalar is its own root."""
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


def _address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


class MemoryTracker:
    """Bytes of live buffers on one device during one step, and their peak (§4.1). A buffer
    counts from when its producer finished until its last reader has run; views and aliases of
    a buffer (Identity, Reshape) count once. The executor calls allocate/free per output slot.

    `on_release(root, when)` is called when a buffer stops being live, so the collector can
    add the deallocation to its producer's allocation records."""

    def __init__(self, on_release=None):
        self.live = 0
        self.peak = 0
        self.active = False  # True once the executor reported any buffer (see StepStatsCollector)
        self._counted: dict[int, list] = {}  # id(root) -> [root, slots referencing it]
        self._on_release = on_release

    def allocate(self, value):
        if not isinstance(value, (np.ndarray, np.generic)) or not value.nbytes:
            return
        self.active = True
        root = _root(value)
        entry = self._counted.get(id(root))
        if entry is not None:
            entry[1] += 1
            return
        self._counted[id(root)] = [root, 1]
        self.live += root.nbytes
        self.peak = max(self.peak, self.live)

    def free(self, value):
        if not isinstance(value, (np.ndarray, np.generic)) or not value.nbytes:
            return
        root = _root(value)
        entry = self._counted.get(id(root))
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] <= 0:
            del self._counted[id(root)]
            self.live -= root.nbytes
            if self._on_release is not None:
                self._on_release(root, time.perf_counter())

    def is_live(self, root) -> bool:
        return id(root) in self._counted


class StepStatsCollector:
    """Collects NodeExecStats per device. Guarded by `_lock` (partitions and pool threads record
    concurrently). Buffers seen in the step are held weakly, so a freed buffer's id that NumPy
    reuses for a new array is not mistaken for an alias."""

    def __init__(self, devices):
        self._lock = threading.Lock()
        self._stats = StepStats()
        self._by_device = {}
        for d in devices:
            dev = self._stats.dev_stats.add(device=d.name)
            self._by_device[d.name] = dev
        # perf_counter is monotonic; anchor it to the epoch once for wall-clock times.
        self._epoch_offset = time.time() - time.perf_counter()
        self._memory = {d.name: MemoryTracker(self._released) for d in devices}
        self._seen = weakref.WeakValueDictionary()  # id(root) -> root, buffers seen this step
        self._records = {}  # id(root) -> (AllocatorMemoryUsed of its producer, bytes)
        self._allocations = 0  # allocation ids handed out
        self._threads: dict[tuple, int] = {}  # (device, thread ident) -> small thread id
        self._labels: dict[int, str] = {}  # id(node) -> timeline label

    def memory(self, device_name: str) -> MemoryTracker:
        return self._memory[device_name]

    def _micros(self, t: float) -> int:
        return int((t + self._epoch_offset) * 1e6)

    def _thread(self, dev, device_name: str, ident: int) -> int:
        key = (device_name, ident)
        tid = self._threads.get(key)
        if tid is None:
            tid = sum(1 for d, _ in self._threads if d == device_name)
            self._threads[key] = tid
            dev.thread_names[tid] = next(
                (t.name for t in threading.enumerate() if t.ident == ident), f"thread-{ident}"
            )
        return tid

    def _label(self, node) -> str:
        label = self._labels.get(id(node))
        if label is None:
            inputs = [s if p == 0 else f"{s}:{p}" for s, p in node.inputs]
            inputs += ["^" + c for c in node.control]
            label = f"{node.name} = {node.op}({', '.join(inputs)})"
            if node.op in ("_Send", "_Recv") and "tensor_name" in node.attrs:
                # The rendezvous key's tensor name pairs a Send with its Recv (timeline arrows).
                label += f" @{node.attrs['tensor_name']}"
            self._labels[id(node)] = label
        return label

    def record(self, device_name: str, item, t0: float, t1: float, out, thread_id: int):
        """Adds the stats of one node execution that ran from t0 to t1 (perf_counter)."""
        start_ns = int((t0 + self._epoch_offset) * 1e9)
        dur_ns = max(int((t1 - t0) * 1e9), 0)
        node = item.node
        outputs = out if item.num_outputs != 1 else (out,)
        with self._lock:
            dev = self._by_device[device_name]
            ns = dev.node_stats.add()
            ns.node_name = node.name
            ns.all_start_micros = start_ns // 1000
            ns.op_start_rel_micros = 0
            ns.op_end_rel_micros = ns.all_end_rel_micros = dur_ns // 1000
            ns.all_start_nanos = start_ns
            ns.op_start_rel_nanos = 0
            ns.op_end_rel_nanos = ns.all_end_rel_nanos = dur_ns
            ns.thread_id = self._thread(dev, device_name, thread_id)
            ns.timeline_label = self._label(node)
            ns.memory_stats.SetInParent()
            if item.num_outputs:
                self._outputs(ns, node, outputs or (), device_name, t0, t1)

    def _outputs(self, ns, node, outputs, device_name: str, t0: float, t1: float):
        persistent = node.op in PERSISTENT_OPS
        received = node.op in RECEIVING_OPS
        mem = self._memory[device_name]
        used = None
        for slot, value in enumerate(outputs):
            o = ns.output.add(slot=slot)
            desc = o.tensor_description
            desc.shape.SetInParent()  # a scalar's shape is present with no dims
            obj = value.value if isinstance(value, VariableState) else value
            arr = np.asarray(obj) if isinstance(obj, np.generic) else obj
            declared = node.output_types[slot] if slot < len(node.output_types) else None
            if not isinstance(arr, np.ndarray):
                if declared is not None:
                    desc.dtype = declared.base_dtype.as_datatype_enum
                continue
            try:
                desc.dtype = dtypes.as_dtype(arr.dtype).as_datatype_enum
            except (TypeError, ValueError, KeyError):
                if declared is not None:
                    desc.dtype = declared.base_dtype.as_datatype_enum
            for d in arr.shape:
                desc.shape.dim.add(size=d)
            alloc = desc.allocation_description
            alloc.requested_bytes = arr.nbytes
            alloc.allocator_name = ALLOCATOR_NAME
            if obj is arr:
                alloc.ptr = _address(arr)
            root = _root(obj)
            if isinstance(root, np.ndarray):  # NumPy scalars are immutable, each one new
                if self._seen.get(id(root)) is root:
                    continue  # an alias of a buffer this step already has
                self._seen[id(root)] = root
            if persistent:
                ns.memory_stats.persistent_memory_size += arr.nbytes
                continue
            if received or not arr.nbytes:
                continue
            if used is None:
                used = ns.memory.add(allocator_name=ALLOCATOR_NAME)
            used.total_bytes += root.nbytes
            used.peak_bytes += root.nbytes
            alloc.allocated_bytes = root.nbytes
            self._allocations += 1
            alloc.allocation_id = self._allocations
            alloc.has_single_reference = True
            # The kernel allocates its outputs while it runs, so they coexist with its inputs.
            used.allocation_records.add(alloc_micros=self._micros(t0), alloc_bytes=root.nbytes)
            self._records[id(root)] = (used, root.nbytes)
            if mem.active and not mem.is_live(root):
                # No reader: the executor released it before this record was written.
                used.allocation_records.add(alloc_micros=self._micros(t1), alloc_bytes=-root.nbytes)
            else:
                used.live_bytes += root.nbytes
        if used is not None:
            used.allocator_bytes_in_use = mem.live

    def _released(self, root, when: float):
        """MemoryTracker's callback: the last reader of `root` ran."""
        with self._lock:
            got = self._records.pop(id(root), None)
            if got is not None:
                used, nbytes = got
                used.allocation_records.add(alloc_micros=self._micros(when), alloc_bytes=-nbytes)

    def peak_bytes(self) -> dict:
        return {name: m.peak for name, m in self._memory.items()}

    def finish(self) -> StepStats:
        with self._lock:
            return self._stats


def peak_memory(run_metadata) -> dict:
    """The step's peak bytes allocated per device, replaying every node's allocation records
    in time order (allocations before releases at the same microsecond), as tfprof does."""
    out = {}
    for dev in run_metadata.step_stats.dev_stats:
        events = sorted(
            (r.alloc_micros, -r.alloc_bytes)
            for n in dev.node_stats
            for m in n.memory
            for r in m.allocation_records
        )
        live = peak = 0
        for _, neg_bytes in events:
            live -= neg_bytes
            peak = max(peak, live)
        out[dev.device] = peak
    return out
