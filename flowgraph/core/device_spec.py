"""Device names in TensorFlow's form: /job:worker/replica:0/task:1/device:GPU:0 (whitepaper §3).

One value type serves the client (`tf.device`, `tf.DeviceSpec`) and the runtime (placement,
rendezvous keys). Any field may be unset (None), so a spec can be partial and merged.
"""

from __future__ import annotations

import dataclasses
import re

_FIELD_RE = re.compile(r"^(job|replica|task|device|cpu|gpu|CPU|GPU):?(.*)$")


@dataclasses.dataclass(frozen=True)
class DeviceSpec:
    """A possibly partial device name; str() gives the canonical form, parse() is its inverse."""

    job: str | None = None
    replica: int | None = None
    task: int | None = None
    device_type: str | None = None
    device_index: int | None = None

    @classmethod
    def from_string(cls, spec: str | None) -> DeviceSpec:
        return parse(spec)

    def to_string(self) -> str:
        parts = []
        if self.job is not None:
            parts.append(f"/job:{self.job}")
        if self.replica is not None:
            parts.append(f"/replica:{self.replica}")
        if self.task is not None:
            parts.append(f"/task:{self.task}")
        if self.device_type is not None:
            index = "*" if self.device_index is None else self.device_index
            parts.append(f"/device:{self.device_type}:{index}")
        return "".join(parts)

    __str__ = to_string

    def merge_from(self, other: DeviceSpec) -> DeviceSpec:
        """Fields set in `other` override ours (the inner `tf.device` scope wins)."""
        return DeviceSpec(
            *(
                o if o is not None else s
                for s, o in zip(dataclasses.astuple(self), dataclasses.astuple(other))
            )
        )

    def replace(self, **kwargs) -> DeviceSpec:
        return dataclasses.replace(self, **kwargs)

    def is_compatible_with(self, other: DeviceSpec) -> bool:
        """True if no field set in both specs differs."""
        return all(
            a is None or b is None or a == b
            for a, b in zip(dataclasses.astuple(self), dataclasses.astuple(other))
        )

    @property
    def is_fully_specified(self) -> bool:
        return None not in dataclasses.astuple(self)


def parse(spec: str | DeviceSpec | None) -> DeviceSpec:
    """Parses '/job:w/task:1/device:GPU:0', '/gpu:0', 'CPU:0', '' (empty spec)..."""
    if isinstance(spec, DeviceSpec):
        return spec
    if not spec:
        return DeviceSpec()
    job = replica = task = dtype = index = None
    for part in spec.split("/"):
        if not part:
            continue
        m = _FIELD_RE.match(part)
        if not m:
            raise ValueError(f"Unknown attribute: '{part}' in '{spec}'")
        key, value = m.groups()
        if key == "job":
            job = value
        elif key == "replica":
            replica = int(value)
        elif key == "task":
            task = int(value)
        else:
            if key == "device":
                dtype, _, value = value.partition(":")
            else:
                dtype = key
            dtype = dtype.upper()
            index = None if value in ("", "*") else int(value)
    return DeviceSpec(job, replica, task, dtype, index)
