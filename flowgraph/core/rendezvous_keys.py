"""Rendezvous keys (whitepaper §3.2.2): the one module that knows their format.

A `_Send` leaves a tensor under a key and the matching `_Recv` takes it by the same key. The
key is TensorFlow's (rendezvous.cc, CreateKey):

    src_device;src_incarnation;dst_device;tensor_name;frame_id:iter_id

`src_incarnation` is the source device's random 64-bit incarnation in 16 hex digits: it changes
when the process that owns the device restarts, so a stale producer can never satisfy a new
consumer. `frame_id:iter_id` is the tag of the Send/Recv's execution (runtime/frames.py): 0:0
outside loops, so every iteration of a loop that crosses devices has keys of its own.

Kernels build keys from their node's attrs (the prefix, once) and their own frame and
iteration (per execution); the worker parses them to find the source of a RecvTensor.
"""

from __future__ import annotations

from typing import NamedTuple

from flowgraph.core import errors


class ParsedKey(NamedTuple):
    src_device: str
    src_incarnation: int
    dst_device: str
    tensor_name: str
    frame_id: int
    iter_id: int


def key_prefix(src_device: str, src_incarnation: int, dst_device: str, tensor_name: str) -> str:
    """Everything of a key but its frame and iteration: fixed per Send/Recv node."""
    return f"{src_device};{src_incarnation & 0xFFFFFFFFFFFFFFFF:016x};{dst_device};{tensor_name}"


def with_frame(prefix: str, frame_id: int, iter_id: int) -> str:
    """The full key of one execution of a Send/Recv whose `key_prefix` is `prefix`."""
    return f"{prefix};{frame_id}:{iter_id}"


def make_key(
    src_device: str,
    src_incarnation: int,
    dst_device: str,
    tensor_name: str,
    frame_id: int = 0,
    iter_id: int = 0,
) -> str:
    return with_frame(
        key_prefix(src_device, src_incarnation, dst_device, tensor_name), frame_id, iter_id
    )


def parse_key(key: str) -> ParsedKey:
    """The parts of `key`; InvalidArgumentError naming it when it is not a rendezvous key."""
    parts = key.split(";")
    try:
        if len(parts) != 5:
            raise ValueError
        frame, _, it = parts[4].partition(":")
        return ParsedKey(parts[0], int(parts[1], 16), parts[2], parts[3], int(frame), int(it))
    except ValueError:
        raise errors.InvalidArgumentError(None, None, f"Invalid rendezvous key: {key!r}") from None
