"""Kernels: how an op runs on a kind of device (whitepaper §2 "Operations and Kernels", §5.4).

The kernel registry is the second of the three tables keyed by op type (OpDefs, kernels,
gradients). A kernel is registered for (op type, device type, allowed dtypes) as a function

    @register_kernel("Add", device="CPU")
    def add(ctx, x, y):            # ctx: the node's KernelContext; returns the output(s)
        return np.add(x, y)

A kernel returns its one output, a tuple of outputs, or None when the op has no outputs.
Flags say how the executor treats it: `expensive` kernels may run on the device's thread
pool beside other work (NumPy releases the GIL in large kernels); `intra_op` kernels are
expensive kernels that also split large inputs into shards on that same pool
(`kernels/sharding.py`; BLAS itself is single-threaded, runtime/blas.py); `step` kernels also receive their step context (rendezvous, step-local containers,
cancellation manager, and the frame and iteration of the node being run) as their second
argument; `async_` kernels receive a `done(outputs)` continuation and must not block
(§5.3).
"""

from __future__ import annotations

import dataclasses
import functools
import traceback
from typing import Callable

from flowgraph.core import dtypes, errors, op_def


@dataclasses.dataclass(frozen=True)
class KernelDef:
    op_type: str
    device_type: str
    fn: Callable
    type_constraints: dict  # attr name -> tuple of allowed DTypes
    expensive: bool = False
    step: bool = False
    async_: bool = False
    site: str = ""
    intra_op: bool = False

    def matches(self, attrs: dict) -> bool:
        for attr, allowed in self.type_constraints.items():
            value = attrs.get(attr)
            if value is not None and dtypes.as_dtype(value).base_dtype not in allowed:
                return False
        return True


_KERNELS: dict[tuple[str, str], list[KernelDef]] = {}


def register_kernel(
    op_type: str,
    device: str = "CPU",
    dtypes_=None,
    *,
    type_attr: str = "T",
    constraints: dict | None = None,
    expensive: bool = False,
    step: bool = False,
    async_: bool = False,
    intra_op: bool = False,
    first: bool = False,
):
    """Decorator registering a kernel; `dtypes_` restricts attr `type_attr` (default 'T').
    `first` puts it before the op's earlier kernels (a dtype-specific one ahead of a generic)."""
    cons = dict(constraints or {})
    if dtypes_ is not None:
        cons[type_attr] = tuple(dtypes.as_dtype(d) for d in dtypes_)

    def decorate(fn):
        site = traceback.format_stack(limit=2)[0].strip().splitlines()[0]
        # An intra-op kernel may also overlap other kernels on the pool: its shards and the
        # other kernels share the pool's threads.
        expensive_ = expensive or intra_op
        kdef = KernelDef(op_type, device, fn, cons, expensive_, step, async_, site, intra_op)
        kernels = _KERNELS.setdefault((op_type, device), [])
        kernels.insert(0, kdef) if first else kernels.append(kdef)
        return fn

    return decorate


def _constrained_types(kernels) -> str:
    """The dtype names the kernels' type constraints allow, for a "no kernel" message."""
    names = {d.name for k in kernels for c in k.type_constraints.values() for d in c}
    return ",".join(sorted(names))


def find_kernel(op_type: str, device_type: str, attrs: dict) -> KernelDef:
    """The first kernel for this op on this device whose dtype constraints admit `attrs`."""
    for kdef in _KERNELS.get((op_type, device_type), ()):
        if kdef.matches(attrs):
            return kdef
    have = ", ".join(
        f"{dev}[{_constrained_types(ks) or 'all'}]"
        for (op, dev), ks in sorted(_KERNELS.items())
        if op == op_type
    )
    types = ", ".join(f"{k}={v.name}" for k, v in attrs.items() if isinstance(v, dtypes.DType))
    raise errors.NotFoundError(
        None,
        None,
        f"No registered kernel for '{op_type}' on {device_type}"
        + (f" with {types}" if types else "")
        + f"; registered: {have or 'none'}",
    )


def has_kernel(op_type: str, device_type: str, attrs: dict) -> bool:
    return any(k.matches(attrs) for k in _KERNELS.get((op_type, device_type), ()))


def registered_kernels() -> dict:
    return {k: list(v) for k, v in _KERNELS.items()}


# The function-call protocol between runtime/function.py and the _Arg/_Retval kernels: a call's
# step-local `resources` hold its argument values and the list its results are written to.
ARGS = "__function_args"
RETS = "__function_rets"


def library_of(device):
    """The function library of `device` (a FunctionLibrary, runtime/function.py): kernels that
    apply functions (datasets, PartitionedCall) reach it through their context's device."""
    lib = getattr(device, "functions", None)
    if lib is None:
        raise errors.FailedPreconditionError(
            None, None, f"Device {device.name} has no function library"
        )
    return lib


class KernelContext:
    """What a kernel knows about its node, fixed when the execution plan is built: the name, op
    type, decoded attrs, device (with its resource containers) and the types of its inputs and
    outputs. Stateful kernels keep their state here (e.g. a random generator)."""

    __slots__ = (
        "name",
        "op_type",
        "attrs",
        "device",
        "input_types",
        "output_types",
        "state",
        "node_def",
    )

    def __init__(self, name, op_type, attrs, device, input_types, output_types, node_def=None):
        self.name = name
        self.op_type = op_type
        self.attrs = attrs
        self.device = device
        self.input_types = input_types
        self.output_types = output_types
        self.state = None
        self.node_def = node_def

    def attr(self, name, default=None):
        return self.attrs.get(name, default)

    @property
    def resources(self):
        return self.device.resource_mgr

    def error(self, cls, message: str) -> errors.OpError:
        return cls(None, None, message)


def bind(kdef: KernelDef, ctx: KernelContext) -> Callable:
    """The callable the executor invokes: the kernel with its context bound.

    The executor stores a one-output node's result as the value itself, but a kernel of an op
    whose outputs form a list (Unpack with num=1, Split with num_split=1, IdentityN of one
    tensor) returns a 1-tuple: such kernels are wrapped to unpack it."""
    compute = functools.partial(kdef.fn, ctx)
    if len(ctx.output_types) == 1 and not kdef.async_ and _has_list_output(ctx.op_type):
        return functools.partial(_single_of_list, compute)
    return compute


def _has_list_output(op_type: str) -> bool:
    try:
        outputs = op_def.get_op_def(op_type).outputs
    except errors.NotFoundError:
        return False
    return any(a.number_attr or a.type_list_attr for a in outputs)


def _single_of_list(compute: Callable, *args):
    out = compute(*args)
    return out[0] if isinstance(out, (tuple, list)) and len(out) == 1 else out
