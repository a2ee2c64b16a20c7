"""Devices (whitepaper §3): a named place where kernels run, with its resource containers and
its one thread pool (runtime/threadpool.py), which runs independent kernels (inter-op) and the
shards of large ones (intra-op). New device types register a factory; the CPU is built in. The
bytes of live tensors per device are counted per step, when a Run is traced (runtime/tracing.py).
"""

from __future__ import annotations

import os
import threading

from flowgraph.core import registry
from flowgraph.core.device_spec import DeviceSpec, parse
from flowgraph.runtime.resources import ResourceMgr
from flowgraph.runtime.threadpool import DevicePool


class Device:
    """One device of one task. `name` is the full form, e.g.
    /job:localhost/replica:0/task:0/device:CPU:0."""

    device_type = "CPU"

    def __init__(self, spec: DeviceSpec, inter_op_threads: int, intra_op_threads: int = 0):
        self.spec = spec
        self.name = spec.to_string()
        # Random and nonzero: rendezvous keys name it, so a restarted process's sends never
        # satisfy receivers that expect the previous one's (TF's device incarnation: 64 random
        # bits, kept signed as the int64 `send_device_incarnation` attr holds them).
        self.incarnation = int.from_bytes(os.urandom(8), "little", signed=True) or 1
        self.resource_mgr = ResourceMgr()
        self.functions = None  # the FunctionLibrary of the runtime that owns the device
        self.inter_op_threads = inter_op_threads
        self.intra_op_threads = intra_op_threads if intra_op_threads > 0 else inter_op_threads
        self._pool = None
        self._pool_lock = threading.Lock()

    @property
    def pool(self) -> DevicePool:
        """The device's pool: max(inter-op, intra-op) threads, started on first use."""
        if self._pool is None:
            with self._pool_lock:
                if self._pool is None:
                    self._pool = DevicePool(
                        max(self.inter_op_threads, self.intra_op_threads, 1),
                        max(self.intra_op_threads, 1),
                        name=f"{self.spec.device_type}{self.spec.device_index}",
                    )
        return self._pool

    @property
    def thread_pool(self) -> DevicePool | None:
        """The pool for expensive kernels (inter-op); None when one inter-op thread is
        configured (every kernel then runs in the executor's thread, sharded or not)."""
        return self.pool if self.inter_op_threads > 1 else None

    def close(self):
        if self._pool is not None:
            self._pool.close()
        self.resource_mgr.clear()

    def __repr__(self):
        return f"<Device {self.name}>"


class CPUDevice(Device):
    device_type = "CPU"


# device type -> Device subclass; a class may define `available()` (e.g. a GPU is present).
_DEVICE_TYPES = registry.Registry("device type")
registry.machinery(__file__)


def register_device_type(device_type: str, cls: type):
    """Adds a device type; AlreadyExistsError naming both sites if it exists."""
    _DEVICE_TYPES.register(device_type, cls)


register_device_type("CPU", CPUDevice)


def available_device_types() -> list[str]:
    return [t for t, cls in _DEVICE_TYPES.items() if getattr(cls, "available", lambda: True)()]


def make_devices(
    job: str, task: int, device_count: dict, inter_op_threads: int = 0, intra_op_threads: int = 0
) -> list[Device]:
    """The devices of one task: `device_count` maps type -> count (CPU defaults to 1). Thread
    counts of 0 mean one per core, as in TensorFlow."""
    cores = os.cpu_count() or 1
    threads = inter_op_threads if inter_op_threads > 0 else cores
    intra = intra_op_threads if intra_op_threads > 0 else cores
    counts = {"CPU": 1}
    counts.update({k.upper(): v for k, v in device_count.items()})
    devices = []
    for dtype in available_device_types():
        for i in range(counts.get(dtype, 1 if dtype != "CPU" else counts["CPU"])):
            spec = DeviceSpec(job, 0, task, dtype, i)
            devices.append(_DEVICE_TYPES.get(dtype)(spec, threads, intra))
    return devices


def full_name(spec: str | DeviceSpec, job="localhost", task=0) -> str:
    """Fills the job/replica/task of a partial spec with the local task's."""
    s = parse(spec)
    return DeviceSpec(
        s.job or job,
        0 if s.replica is None else s.replica,
        task if s.task is None else s.task,
        s.device_type,
        s.device_index,
    ).to_string()
