"""Resource handles as values (whitepaper §4.7; TensorFlow's ResourceHandleProto).

A stateful object (a variable, a queue, a table, a reader, an iterator) lives in a container
of the device that owns it. What flows along a resource edge is not the object but its name:
(device, container, name, type). The consuming kernel resolves the handle in its own device's
containers, so a handle means the same in every process and can cross a wire, and a kernel
given a handle of another device fails instead of reaching into memory it does not own.
"""

from __future__ import annotations

from flowgraph.core.protos import ResourceHandleProto


class ResourceHandle:
    """The value of a DT_RESOURCE tensor. Immutable; equal when all four fields are."""

    __slots__ = ("container", "device", "maybe_type_name", "name")

    def __init__(self, device: str, container: str, name: str, maybe_type_name: str = ""):
        self.device = device  # full name of the device that owns the resource
        self.container = container
        self.name = name
        self.maybe_type_name = maybe_type_name  # the resource's class, for messages

    def _key(self) -> tuple:
        return (self.device, self.container, self.name, self.maybe_type_name)

    def __eq__(self, other) -> bool:
        return isinstance(other, ResourceHandle) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"ResourceHandle(device={self.device!r}, container={self.container!r}, "
            f"name={self.name!r}, type={self.maybe_type_name!r})"
        )

    def to_proto(self) -> ResourceHandleProto:
        return ResourceHandleProto(
            device=self.device,
            container=self.container,
            name=self.name,
            maybe_type_name=self.maybe_type_name,
        )

    @classmethod
    def from_proto(cls, proto: ResourceHandleProto) -> ResourceHandle:
        return cls(proto.device, proto.container, proto.name, proto.maybe_type_name)
