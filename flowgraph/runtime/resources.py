"""Containers of long-lived stateful objects (whitepaper §4.7): variables, queues, readers.

A ResourceMgr belongs to one device and outlives steps: state written in one `run` is visible to
the next. Resources live in named containers (default 'localhost'); `cleanup(container)` drops
one container, which is how a Session's state is reset without touching another's.

Per-step resources (TensorArrays, the stacks of while-loop gradients) live in the same device
containers, in a container named after their step (TF's ScopedStepContainer): a handle to one
is a value like any other, resolved on its device, and the step drops the container when it
ends on its worker.
"""

from __future__ import annotations

import threading

from flowgraph.core import errors
from flowgraph.kernels.variable_state import VariableState  # noqa: F401  (re-exported)

DEFAULT_CONTAINER = "localhost"
_EMPTY: dict = {}


class ResourceMgr:
    """name -> resource maps, one per container. Guarded by `_lock`. `_names` maps each
    resource's id to its (container, name, resource): what a handle to it says
    (core/resource_handle.py); the resource is kept there so its id cannot be reused."""

    def __init__(self):
        self._lock = threading.Lock()
        self._containers: dict[str, dict[str, object]] = {}  # guarded by _lock
        self._names: dict[int, tuple] = {}  # guarded by _lock

    def lookup_or_create(self, container: str, name: str, factory):
        container = container or DEFAULT_CONTAINER
        with self._lock:
            c = self._containers.setdefault(container, {})
            res = c.get(name)
            if res is None:
                res = c[name] = factory()
                self._names[id(res)] = (container, name, res)
            return res

    def find(self, container: str, name: str):
        """The resource, or None: the lock-free lookup of a kernel resolving a handle (dict
        gets are atomic)."""
        return self._containers.get(container or DEFAULT_CONTAINER, _EMPTY).get(name)

    def name_of(self, resource) -> tuple[str, str] | None:
        """(container, name) of a resource held here; None for anything else."""
        entry = self._names.get(id(resource))
        return (entry[0], entry[1]) if entry is not None and entry[2] is resource else None

    def lookup(self, container: str, name: str):
        container = container or DEFAULT_CONTAINER
        with self._lock:
            res = self._containers.get(container, {}).get(name)
        if res is None:
            raise errors.NotFoundError(None, None, f"Resource {container}/{name} does not exist.")
        return res

    def create(self, container: str, name: str, resource):
        container = container or DEFAULT_CONTAINER
        with self._lock:
            c = self._containers.setdefault(container, {})
            if name in c:
                raise errors.AlreadyExistsError(
                    None, None, f"Resource {container}/{name} already exists."
                )
            c[name] = resource
            self._names[id(resource)] = (container, name, resource)

    def delete(self, container: str, name: str):
        container = container or DEFAULT_CONTAINER
        with self._lock:
            res = self._containers.get(container, {}).pop(name, None)
            if res is None:
                raise errors.NotFoundError(
                    None, None, f"Resource {container}/{name} does not exist."
                )
            self._names.pop(id(res), None)
        _tell_dropped((res,))

    def cleanup(self, container: str):
        with self._lock:
            dropped = self._containers.pop(container or DEFAULT_CONTAINER, None) or {}
            for res in dropped.values():
                self._names.pop(id(res), None)
        _tell_dropped(dropped.values())

    def clear(self):
        with self._lock:
            dropped = [res for c in self._containers.values() for res in c.values()]
            self._containers.clear()
            self._names.clear()
        _tell_dropped(dropped)

    def containers(self) -> list[str]:
        with self._lock:
            return list(self._containers)


def _tell_dropped(resources) -> None:
    """Tells the resources that have a `dropped` method (queues: threads may wait on them
    outside any step) that their container dropped them."""
    for res in resources:
        dropped = getattr(res, "dropped", None)
        if dropped is not None:
            dropped()


class StepContainer:
    """The container of one step's per-step resources on every device of a worker (TF's
    ScopedStepContainer). Kernels create resources through it, which records the device's
    ResourceMgr; `cleanup()`, when the step ends, drops the container from each of them.
    `_mgrs` is written by concurrent partitions with atomic dict stores only."""

    __slots__ = ("_mgrs", "name")

    def __init__(self, name: str):
        self.name = name  # "__per_step_<step id>", as in TF
        self._mgrs: dict[int, ResourceMgr] = {}

    def create(self, mgr: ResourceMgr, name: str, resource) -> None:
        """Adds `resource` under `name` in this step's container of `mgr`'s device."""
        self._mgrs[id(mgr)] = mgr
        mgr.create(self.name, name, resource)

    def cleanup(self) -> None:
        for mgr in list(self._mgrs.values()):
            mgr.cleanup(self.name)
        self._mgrs.clear()
