"""Swapping (whitepaper §4.1, TensorFlow's Grappler memory optimizer): on a device with a memory of
its own (a GPU's), a forward activation that the backward pass reads is copied out to the host
after the forward pass and copied back just before its first gradient consumer, so the device
holds it only while it is used.

Which tensors: those a backward node marks with the `_swap_to_host` attr (a list of its input
indices, Grappler's manual annotation), and with the heuristics every forward tensor of at least
MIN_SWAP_BYTES (static shape) that the backward pass reads at least MIN_SWAP_GAP nodes after
the forward pass last read it. A swap is a pair of copies:
`swap_out_<tensor>` (`_CopyFromGpuToHost`) on the device's host CPU, reading the tensor across
devices as soon as it exists, and `swap_in_<tensor>` (`_CopyFromHostToGpu`) back on the device,
held by a control edge until the first backward reader's gradient input exists
(backward.Backward.trigger); every backward reader on that device reads the swapped-in copy.
The copies are real copies, so the device's allocator sees the tensor freed after the swap-out
and allocated again by the swap-in. Partitioning turns each cross-device edge into _Send/_Recv.

Which devices have a separate memory is pipeline.py's decision; a CPU device does not, unless
ConfigProto.experimental.separate_memory_devices declares it (how the tests exercise this on a
machine without a GPU).
"""

from __future__ import annotations

from flowgraph.core import dtypes, errors
from flowgraph.core.device_spec import parse
from flowgraph.kernels.base import find_kernel
from flowgraph.runtime.nodes import Node, make_node
from flowgraph.runtime.passes import rules, static_shapes
from flowgraph.runtime.passes.backward import Backward, fresh_name, place_before

SWAP_HINT = "_swap_to_host"
MIN_SWAP_BYTES = 1 << 20
# A tensor whose first backward reader comes within this many nodes (topological order) of its
# last forward use is not worth two copies: it would be swapped back in at once.
MIN_SWAP_GAP = 8
SWAP_OUT, SWAP_IN = "_CopyFromGpuToHost", "_CopyFromHostToGpu"


def host_of(device: str) -> str:
    """The CPU:0 of `device`'s task: where its swapped-out tensors live."""
    return parse(device).replace(device_type="CPU", device_index=0).to_string()


def swap(
    nodes: list[Node], scope: str, separate_memory, heuristics: bool, feed_shapes: dict
) -> list[Node]:
    """Returns `nodes` with the chosen tensors swapped out to host memory and back."""
    devices = {
        n.device
        for n in nodes
        if n.device and separate_memory(n.device) and host_of(n.device) != n.device
    }
    if not devices:
        return nodes
    bw = Backward(nodes, scope)
    chosen = _marked(bw, devices)
    if heuristics:
        chosen |= _long_lived(nodes, bw, devices, feed_shapes)
    chosen = {t for t in chosen if _copyable(bw.by_name[t[0]], t[1])}
    if not chosen:
        return nodes
    return _rewrite(nodes, bw, chosen)


def _swappable(bw: Backward, src: str, devices: set) -> bool:
    n = bw.by_name.get(src)
    return (
        n is not None
        and n.device in devices
        and not bw.is_target(src)
        and rules.is_pure(n, bw.by_name)  # a variable's buffer stays anyway
        and bw.movable(src)
    )


def _marked(bw: Backward, devices: set) -> set:
    out = set()
    for n in bw.order:
        if SWAP_HINT in n.attrs and bw.is_target(n.name):
            for i in n.attrs[SWAP_HINT]:
                if not 0 <= int(i) < len(n.inputs):
                    raise errors.InvalidArgumentError(
                        None, None, f"{SWAP_HINT} of '{n.name}' names input {i}; it has "
                        f"{len(n.inputs)}"
                    )  # fmt: skip
                src, port = n.inputs[int(i)]
                if _swappable(bw, src, devices):
                    out.add((src, port))
    return out


def _long_lived(nodes: list[Node], bw: Backward, devices: set, feed_shapes: dict) -> set:
    props = static_shapes.infer(nodes, feed_shapes)
    out = set()
    for n in bw.order:
        if not _swappable(bw, n.name, devices):
            continue
        readers = bw.readers.get(n.name, ())
        late = [r for r in readers if bw.uses(r) and r.device == n.device]
        if not late:
            continue
        last_use = max([bw.index[n.name]] + [bw.index[r.name] for r in readers if r not in late])
        if min(bw.index[r.name] for r in late) - last_use < MIN_SWAP_GAP:
            continue
        for r in late:
            for src, port in r.inputs:
                size = _bytes(props.shape(src, port), n.output_types[port])
                if src == n.name and size >= MIN_SWAP_BYTES:
                    out.add((src, port))
    return out


def _bytes(shape, dtype) -> int:
    if not shape.is_fully_defined():
        return 0
    return shape.num_elements() * dtypes.as_dtype(dtype).base_dtype.size


def _copyable(n: Node, port: int) -> bool:
    """Whether both copies have kernels for this tensor on its device and its host."""
    attrs = {"T": n.output_types[port].base_dtype}
    try:
        find_kernel(SWAP_OUT, "CPU", attrs)
        find_kernel(SWAP_IN, parse(n.device).device_type or "CPU", attrs)
    except errors.NotFoundError:
        return False
    return True


def _rewrite(nodes: list[Node], bw: Backward, chosen: set) -> list[Node]:
    taken = set(bw.by_name)
    swapped_in: dict[tuple, tuple] = {}
    after: dict[str, list[Node]] = {}
    before: dict[str, list[Node]] = {}
    for src, port in sorted(chosen):
        n = bw.by_name[src]
        readers = [
            r
            for r in bw.readers[src]
            if bw.uses(r) and r.device == n.device and (src, port) in r.inputs
        ]
        if not readers:
            continue
        first = min(readers, key=lambda r: bw.index[r.name])
        attrs = {"T": n.output_types[port].base_dtype}
        tag = src if port == 0 else f"{src}_{port}"
        out_name = fresh_name(f"swap_out_{tag}", taken)
        in_name = fresh_name(f"swap_in_{tag}", taken)
        out = make_node(out_name, SWAP_OUT, [(src, port)], (), host_of(n.device), attrs)
        trigger = bw.trigger(first, {src})
        back = make_node(in_name, SWAP_IN, [(out_name, 0)], trigger, n.device, attrs)
        after.setdefault(src, []).append(out)
        before.setdefault(first.name, []).append(back)
        swapped_in[(src, port)] = (in_name, 0)
    rewired = []
    for n in nodes:
        if bw.uses(n):
            inputs = tuple(
                swapped_in[t] if t in swapped_in and bw.by_name[t[0]].device == n.device else t
                for t in n.inputs
            )
            if inputs != n.inputs:
                n = n.replace(inputs=inputs)
        rewired.append(n)
        rewired.extend(after.get(n.name, ()))
    return place_before(rewired, before)
