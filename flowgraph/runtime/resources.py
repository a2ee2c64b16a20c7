"""Containers of long-lived stateful objects (whitepaper §4.7): variables, queues, readers.

A ResourceMgr belongs to one device and outlives steps: state written in one `run` is visible to
the next. Resources live in named containers (default 'localhost'); `cleanup(container)` drops
one container, which is how a Session's state is reset without touching another's.
"""

from __future__ import annotations

import threading

from flowgraph.core import errors
from flowgraph.kernels.variable_state import VariableState  # noqa: F401  (re-exported)

DEFAULT_CONTAINER = "localhost"


class ResourceMgr:
    """name -> resource maps, one per container. Guarded by `_lock`."""

    def __init__(self):
        self._lock = threading.Lock()
        self._containers: dict[str, dict[str, object]] = {}  # guarded by _lock

    def lookup_or_create(self, container: str, name: str, factory):
        container = container or DEFAULT_CONTAINER
        with self._lock:
            c = self._containers.setdefault(container, {})
            res = c.get(name)
            if res is None:
                res = c[name] = factory()
            return res

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

    def delete(self, container: str, name: str):
        container = container or DEFAULT_CONTAINER
        with self._lock:
            if self._containers.get(container, {}).pop(name, None) is None:
                raise errors.NotFoundError(
                    None, None, f"Resource {container}/{name} does not exist."
                )

    def cleanup(self, container: str):
        with self._lock:
            self._containers.pop(container or DEFAULT_CONTAINER, None)

    def clear(self):
        with self._lock:
            self._containers.clear()

    def containers(self) -> list[str]:
        with self._lock:
            return list(self._containers)
