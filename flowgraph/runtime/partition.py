"""Graph partitioning (whitepaper §3.2.2): one subgraph per device; every edge that crosses
devices becomes a `_Send` on the source device and a `_Recv` on the destination.

One Send/Recv pair serves each (tensor, destination device), however many consumers the tensor
has there. A control edge that crosses devices is carried by a dummy scalar sent after the
source node finished. All cross-device communication is thus inside Send/Recv, so the runtime
of one device needs to know nothing about the others. A loop whose nodes span devices gets a
control loop on each device that does not lead it (control_loops.py); a _Recv inside a loop
frame runs once per iteration, on a control edge from its device's control loop.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from flowgraph.core import dtypes
from flowgraph.runtime.control_loops import ControlLoops
from flowgraph.runtime.nodes import Node, make_node


@dataclasses.dataclass(frozen=True)
class PartitionOptions:
    incarnation: dict  # device name -> its incarnation (random per process start)
    # Send float32 tensors as truncated bfloat16 and widen them on receipt (§5.5); lossy.
    compress_float32: bool = False


def _edge_attrs(src_dev, dst_dev, tensor_name, dtype, opts):
    return {
        "tensor_name": tensor_name,
        "send_device": src_dev,
        "recv_device": dst_dev,
        "send_device_incarnation": opts.incarnation[src_dev],
        "client_terminated": False,
    } | ({"T": dtype} if dtype is not None else {})


def _cast(name: str, value: tuple, src_type, dst_type, device: str) -> Node:
    """A Cast added by the partitioner; `Truncate` drops mantissa bits instead of rounding."""
    attrs = {"SrcT": src_type, "DstT": dst_type, "Truncate": True}
    return make_node(name, "Cast", inputs=[value], device=device, attrs=attrs)


def _client_terminated(n: Node) -> bool:
    """A feed's or fetch's node: values the client gives or gets cross exactly, uncompressed."""
    return n.op in ("_Send", "_Recv") and bool(n.attrs.get("client_terminated"))


def partition(nodes: list[Node], opts: PartitionOptions) -> dict[str, list[Node]]:
    """Returns device name -> its nodes (graph order kept), with Send/Recv pairs added."""
    loops = None
    if len({n.device for n in nodes}) > 1:
        loops = ControlLoops(nodes)
        nodes = loops.nodes
    device_of = {n.name: n.device for n in nodes}
    parts: dict[str, list[Node]] = {}
    recvs: dict[tuple, str] = {}  # (src, port, dst device, compressed) -> received name
    counter = [0]

    def add(dev, node):
        parts.setdefault(dev, []).append(node)

    def cross(src, port, dtype, dst_dev, control=False, exact=False) -> str:
        compress = not (control or exact) and opts.compress_float32
        compress = compress and dtype.base_dtype == dtypes.float32
        key = (src, port if not control else "ctrl", dst_dev, compress)
        if key in recvs:
            return recvs[key]
        counter[0] += 1
        src_dev = device_of[src]
        tensor_name = f"edge_{counter[0]}_{src}" + ("" if control else f"_{port}")
        if control:  # a dummy value carries the "src has finished" fact
            dummy = make_node(
                f"{src}/_ctrl_const_{counter[0]}",
                "Const",
                control=[src],
                device=src_dev,
                attrs={"value": np.zeros((), np.float32), "dtype": dtypes.float32},
            )
            add(src_dev, dummy)
            sent, dtype = (dummy.name, 0), dtypes.float32
        else:
            sent = (src, port)
        wire = dtype.base_dtype
        if compress:
            wire = dtypes.bfloat16
            narrow = _cast(f"{src}/_compress_{counter[0]}", sent, dtypes.float32, wire, src_dev)
            add(src_dev, narrow)
            sent = (narrow.name, 0)
        attrs = _edge_attrs(src_dev, dst_dev, tensor_name, None, opts)
        add(
            src_dev,
            make_node(
                f"{src}/_send_{counter[0]}",
                "_Send",
                inputs=[sent],
                device=src_dev,
                attrs=attrs | {"T": wire},
            ),
        )
        recv = make_node(
            f"{src}/_recv_{counter[0]}",
            "_Recv",
            control=loops.recv_control(by_name[src], dst_dev) if loops is not None else (),
            device=dst_dev,
            attrs=attrs | {"tensor_type": wire},
        )
        add(dst_dev, recv)
        received = recv.name
        if compress:
            widen = _cast(
                f"{src}/_decompress_{counter[0]}", (received, 0), wire, dtype.base_dtype, dst_dev
            )
            add(dst_dev, widen)
            received = widen.name
        recvs[key] = received
        return received

    by_name = {n.name: n for n in nodes}
    for n in nodes:
        dev = n.device
        inputs, control, changed = [], [], False
        for src, port in n.inputs:
            if device_of[src] != dev:
                dtype = by_name[src].output_types[port]
                inputs.append(
                    (
                        cross(
                            src,
                            port,
                            dtype,
                            dev,
                            exact=_client_terminated(n) or _client_terminated(by_name[src]),
                        ),
                        0,
                    )
                )
                changed = True
            else:
                inputs.append((src, port))
        for c in n.control:
            if device_of[c] != dev:
                control.append(cross(c, 0, None, dev, control=True))
                changed = True
            else:
                control.append(c)
        add(dev, n.replace(inputs=tuple(inputs), control=tuple(control)) if changed else n)
    return parts
