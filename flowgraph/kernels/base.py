"""Kernels: how an op runs on a kind of device (whitepaper §2 "Operations and Kernels", §5.4).

The kernel registry is the second of the three tables keyed by op type (OpDefs, kernels,
gradients; core/registry.py). A kernel is registered for (op type, device type, allowed dtypes)
as a function

    @register_kernel("Add", device="CPU")
    def add(ctx, x, y):            # ctx: the node's KernelContext; returns the output(s)
        return np.add(x, y)

A kernel returns its one output, a tuple of outputs, or None when the op has no outputs.
Flags say how the executor treats it: `expensive` kernels may run on the device's thread
pool beside other work (NumPy releases the GIL in large kernels); `intra_op` kernels are
expensive kernels that also split large inputs into shards on that same pool
(`kernels/sharding.py`; BLAS itself is single-threaded, runtime/blas.py); `step` kernels also
receive their step context (rendezvous, step-local containers, cancellation manager, and the
frame and iteration of the node being run) as their second argument; `async_` kernels receive
a `done(outputs)` continuation and must not block (§5.3).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Callable

from flowgraph.core import dtypes, errors, op_def, registry


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

    def summary(self) -> str:
        """Its device and dtypes, e.g. 'CPU T in {float32, float64}', for `describe`."""
        cons = "; ".join(
            f"{attr} in {{{', '.join(d.name for d in allowed)}}}"
            for attr, allowed in sorted(self.type_constraints.items())
        )
        return f"{self.device_type} {cons}".rstrip()


# (op type, device type, ((attr, DType), ...)) -> KernelDef. A kernel for T in {float32,
# float64} holds the keys (op, dev, (("T", float32),)) and (op, dev, (("T", float64),)); an
# unconstrained kernel holds (op, dev, ()). Two kernels never share a key.
_KERNELS = registry.Registry(
    "kernel",
    op_type_of=lambda key: key[0],
    summary=lambda key, kdef: kdef.summary(),
    key_text=lambda key: (
        f"for {key[0]!r} on {key[1]}" + "".join(f" {attr}={dtype.name}" for attr, dtype in key[2])
    ),
)
registry.machinery(__file__)
# A view of _KERNELS for find_kernel: (op type, device type) -> [(constraint attr names,
# {dtypes: KernelDef})], most specific first (more attrs, then registration order). The dtypes
# key is the DType itself for one attr (no tuple to build per lookup), a tuple for several.
_INDEX: dict[tuple[str, str], list[tuple[tuple[str, ...], dict]]] = {}


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
):
    """Decorator registering a kernel; `dtypes_` restricts attr `type_attr` (default 'T').
    A kernel with dtype constraints is chosen over an unconstrained one for the dtypes it
    names; AlreadyExistsError if another kernel claims one of its (op, device, dtypes) keys."""
    cons = dict(constraints or {})
    if dtypes_ is not None:
        cons[type_attr] = tuple(dtypes.as_dtype(d) for d in dtypes_)

    def decorate(fn):
        site = registry.caller_site()
        # An intra-op kernel may also overlap other kernels on the pool: its shards and the
        # other kernels share the pool's threads.
        expensive_ = expensive or intra_op
        kdef = KernelDef(op_type, device, fn, cons, expensive_, step, async_, site, intra_op)
        names = tuple(sorted(cons))
        keys = [
            (op_type, device, tuple(zip(names, types)))
            for types in itertools.product(*(cons[n] for n in names))
        ]
        for key in keys:
            if key in _KERNELS:
                _KERNELS.register(key, kdef, site)  # raises, naming both sites
        for key in keys:
            _KERNELS.register(key, kdef, site)
        _index(op_type, device, names, keys, kdef)
        return fn

    return decorate


def _index(op_type: str, device: str, names: tuple, keys: list, kdef: KernelDef) -> None:
    tables = _INDEX.setdefault((op_type, device), [])
    table = next((t for n, t in tables if n == names), None)
    if table is None:
        table = {}
        tables.append((names, table))
        tables.sort(key=lambda entry: len(entry[0]), reverse=True)  # stable among equals
    for _, _, cons in keys:
        types = tuple(dtype for _, dtype in cons)
        table[types[0] if len(types) == 1 else types] = kdef


def _lookup(op_type: str, device_type: str, attrs: dict) -> KernelDef | None:
    """The most specific kernel whose key the node's `attrs` form. A constraint attr that the
    node lacks rules out the kernels constrained on it."""
    for names, table in _INDEX.get((op_type, device_type), ()):
        types = []
        for name in names:
            value = attrs.get(name)
            if value is None:
                break
            if value.__class__ is not dtypes.DType:
                value = dtypes.as_dtype(value)
            types.append(value.base_dtype)
        else:
            kdef = table.get(types[0] if len(types) == 1 else tuple(types))
            if kdef is not None:
                return kdef
    return None


def find_kernel(op_type: str, device_type: str, attrs: dict) -> KernelDef:
    """The kernel for this op on this device whose dtype constraints admit `attrs` (the most
    specific one); NotFoundError listing what is registered."""
    kdef = _lookup(op_type, device_type, attrs)
    if kdef is not None:
        return kdef
    have: dict[str, set[str] | None] = {}  # device -> dtype names; None: a generic kernel
    for op, dev, cons in _KERNELS:
        if op == op_type and have.get(dev, ()) is not None:
            have[dev] = None if not cons else have.get(dev, set()) | {d.name for _, d in cons}
    registered = ", ".join(
        f"{dev}[{'all' if names is None else ','.join(sorted(names))}]"
        for dev, names in sorted(have.items())
    )
    types = ", ".join(f"{k}={v.name}" for k, v in attrs.items() if isinstance(v, dtypes.DType))
    raise errors.NotFoundError(
        None,
        None,
        f"No registered kernel for '{op_type}' on {device_type}"
        + (f" with {types}" if types else "")
        + f"; registered: {registered or 'none'}",
    )


def has_kernel(op_type: str, device_type: str, attrs: dict) -> bool:
    return _lookup(op_type, device_type, attrs) is not None


def registered_kernels() -> dict[tuple[str, str], list[KernelDef]]:
    """(op type, device type) -> its kernels, most specific first."""
    out: dict[tuple[str, str], list[KernelDef]] = {}
    for (op, dev, _), kdef in _KERNELS.items():
        kernels = out.setdefault((op, dev), [])
        if kdef not in kernels:
            kernels.append(kdef)
    for kernels in out.values():
        kernels.sort(key=lambda k: len(k.type_constraints), reverse=True)
    return out


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
        "attrs",
        "device",
        "input_types",
        "name",
        "node_def",
        "op_type",
        "output_types",
        "state",
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
        compute = functools.partial(_single_of_list, compute)
    if dtypes.resource in ctx.input_types or dtypes.resource in ctx.output_types:
        from flowgraph.kernels.resource_handles import bind_handles

        compute = bind_handles(compute, ctx, 2 if kdef.async_ else 1 if kdef.step else 0)
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
