"""Compiled fusion (whitepaper §10): which element-wise ops a fused kernel can compute, and the
numba source of one fused loop.

A cluster of element-wise nodes becomes one loop that reads each input element once, computes
every member in registers and writes only the cluster's outputs: one pass over memory instead of
one pass (and one temporary) per op, and one kernel call instead of one per op. Each member is a
row of `ELEMENTWISE`: an expression over its inputs `{0}`, `{1}`, ... in which `{T}` is the
constructor of its output type. Every result is converted to the member's dtype, so float32
arithmetic rounds after each op as the unfused kernels do (numba would otherwise widen ints).

The loop is specialized on the *broadcast pattern*: values whose inputs all have one element are
computed once before the loop ("scalars"); the others are indexed by the loop, either over one
flat index (every full-size input has the output's shape) or over one index per dimension of the
output with size-1 dimensions read at stride 0 (NumPy's `broadcast_to` views). Outputs of
different shapes get one loop each, over the members they need. Sources are cached
by their text, which names the ops, dtypes, pattern and rank, and compiled once per process; the
compiled code is also cached on disk by numba (`$XDG_CACHE_HOME/flowgraph/fusion`), as for the
loops of kernels/cpu/loops.py.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import os
import sys
import threading

import numpy as np

_F = frozenset(np.dtype(t) for t in (np.float32, np.float64))
_N = _F | frozenset(np.dtype(t) for t in (np.int32, np.int64))
_B = frozenset({np.dtype(np.bool_)})
_NB = _N | _B


@dataclasses.dataclass(frozen=True)
class Row:
    """How one op is computed inside a fused loop.

    `shape_rule`: how the output shape follows from the inputs' (and which shapes the op
    rejects): "broadcast" (NumPy's rule), "same" (equal shapes, as ReluGrad and AddN require)
    or "bias" (BiasAdd: a vector as long as the last dimension of a value of rank >= 2)."""

    template: str
    dtypes: frozenset  # the input dtypes it accepts
    shape_rule: str = "broadcast"


def _maximum(cmp: str) -> str:
    # NumPy's maximum/minimum (the unfused kernels): a NaN on either side wins
    return "{0} if ({0} " + cmp + " {1} or {0} != {0}) else {1}"


ELEMENTWISE = {
    "Add": Row("{0} + {1}", _N),
    "AddV2": Row("{0} + {1}", _N),
    "Sub": Row("{0} - {1}", _N),
    "Mul": Row("{0} * {1}", _N),
    "RealDiv": Row("{0} / {1}", _F),
    "Div": Row("{0} / {1}", _F),
    "Maximum": Row(_maximum(">"), _N),
    "Minimum": Row(_maximum("<"), _N),
    "SquaredDifference": Row("({0} - {1}) * ({0} - {1})", _N),
    "Pow": Row("np.power({0}, {1})", _F),
    "Neg": Row("-{0}", _N),
    "Abs": Row("abs({0})", _N),
    "Square": Row("{0} * {0}", _N),
    "Sign": Row("np.sign({0})", _N),
    "Sqrt": Row("np.sqrt({0})", _F),
    "Rsqrt": Row("{T}(1) / np.sqrt({0})", _F),
    "Reciprocal": Row("{T}(1) / {0}", _F),
    "Inv": Row("{T}(1) / {0}", _F),
    "Exp": Row("np.exp({0})", _F),
    "Expm1": Row("np.expm1({0})", _F),
    "Log": Row("np.log({0})", _F),
    "Log1p": Row("np.log1p({0})", _F),
    "Tanh": Row("np.tanh({0})", _F),
    "Sin": Row("np.sin({0})", _F),
    "Cos": Row("np.cos({0})", _F),
    "Floor": Row("np.floor({0})", _F),
    "Ceil": Row("np.ceil({0})", _F),
    "Sigmoid": Row("{T}(1) / ({T}(1) + np.exp(-{0}))", _F),
    "Relu": Row("{T}(0) if {0} < 0 else {0}", _N),  # TF's x < 0 ? 0 : x (NaN passes)
    # gradient ops: ReluGrad(dy, x) multiplies by the 0/1 mask as its kernel does (NaN stays)
    "ReluGrad": Row("{0} * ({1} > 0)", _N, "same"),
    "AddN": Row("", _N, "same"),  # {0} + {1} + ... in order, as its kernel adds
    "BiasAdd": Row("{0} + {1}", _N, "bias"),
    "TanhGrad": Row("{1} * ({T}(1) - {0} * {0})", _F),
    "SigmoidGrad": Row("{1} * ({0} * ({T}(1) - {0}))", _F),
    "Less": Row("{0} < {1}", _N),
    "LessEqual": Row("{0} <= {1}", _N),
    "Greater": Row("{0} > {1}", _N),
    "GreaterEqual": Row("{0} >= {1}", _N),
    "Equal": Row("{0} == {1}", _NB),
    "NotEqual": Row("{0} != {1}", _NB),
    "LogicalAnd": Row("{0} and {1}", _B),
    "LogicalOr": Row("{0} or {1}", _B),
    "LogicalNot": Row("not {0}", _B),
    "SelectV2": Row("{1} if {0} else {2}", _NB),
    "Cast": Row("{0}", _NB),
}

# The variable updates a cluster may end in (runtime/passes/fusion.py folds them): how each
# combines the value with the variable's old one when the loop writes its buffer in place.
ASSIGN_OPS = {"Assign": None, "AssignAdd": "+", "AssignSub": "-"}

# The reductions a cluster may end in: how an element joins the accumulator `{0}`.
REDUCTIONS = {
    "Sum": "{0} + {1}",
    "Mean": "{0} + {1}",
    "Prod": "{0} * {1}",
    "Max": _maximum(">"),
    "Min": _maximum("<"),
}
_INDEX = frozenset(np.dtype(t) for t in (np.int32, np.int64))
# Accumulators of a whole reduction in a flat loop: independent chains, so that the additions
# (or comparisons) overlap instead of waiting for each other (2-3x on 1M float32 elements);
# no reassociation of anything else, as fastmath would allow.
LANES = 8


def fusable(op: str, input_dtypes, output_dtypes, attrs=None) -> bool:
    """Whether a node of `op` with these (NumPy) dtypes and attrs can be a member of a loop."""
    if op in REDUCTIONS:
        ins = [np.dtype(d) for d in input_dtypes]
        return ins[0] in _N and ins[1] in _INDEX and np.dtype(output_dtypes[0]) == ins[0]
    row = ELEMENTWISE.get(op)
    if row is None or len(output_dtypes) != 1:
        return False
    ins = [np.dtype(d) for d in input_dtypes]
    out = np.dtype(output_dtypes[0])
    if op == "Cast":  # float -> int and anything -> bool round differently in numba: left out
        return ins[0] in _NB and out in _N and not (ins[0] in _F and out not in _F)
    if op == "SelectV2":
        return ins[0] in _B and all(d in _NB for d in ins[1:])
    if op == "BiasAdd" and (attrs or {}).get("data_format", "NHWC") not in ("NHWC", b"NHWC"):
        return False
    return all(d in row.dtypes for d in ins) and out in _NB


@dataclasses.dataclass(frozen=True)
class Sink:
    """Where one output of a loop goes (`generate`).

    By default into its own parameter `o<k>`, element by element. `alias`: into input
    parameter `a<alias>` instead (a variable's buffer that the loop also reads at the same
    index: one parameter, so that LLVM sees no possible overlap). `combine` "+" / "-": stored
    as `old + value` / `old - value` (AssignAdd/AssignSub in place). `reduce`: a row of
    `REDUCTIONS`; the value is accumulated in dtype `acc` into `o<k>`, which has only the loop
    dimensions `kept` (none: one accumulator, kept in registers) and starts at the reduction's
    identity."""

    alias: int | None = None
    combine: str | None = None
    reduce: str | None = None
    kept: tuple = ()
    acc: np.dtype | None = None


PLAIN = Sink()


@dataclasses.dataclass(frozen=True)
class Member:
    """One member of a fused program: its op, the value ids it reads and its output dtype.

    Value ids 0 .. num_args-1 are the fused node's inputs, num_args + j the output of member j."""

    op: str
    args: tuple
    dtype: np.dtype


def expression(member: Member, names: list) -> str:
    """The numba expression of `member` over the variables `names` of its inputs."""
    if member.op == "AddN":
        text = " + ".join(names)
    else:
        text = ELEMENTWISE[member.op].template.format(*names, T=_constructor(member.dtype))
    if member.dtype == np.bool_:
        return text
    return f"{_constructor(member.dtype)}({text})"


def _constructor(dtype: np.dtype) -> str:
    return f"np.{np.dtype(dtype).name}" if dtype != np.bool_ else "np.bool_"


def generate(num_args: int, members, args, used, outputs, scalar, ndim: int, sinks=None) -> str:
    """The source of `fused(lo, hi, d1, ..., a<v> ..., o<k> ...)`: one loop computing `outputs`.

    `args` are the input value ids it reads (its parameters, in order), `used` the indices of
    the members it computes (in order: the cone of its outputs). `scalar[v]` says value v has
    one element (read as `a[0]`, computed before the loop); the others are indexed by `ndim`
    loop indices (i0 over rows lo..hi, i1 .. over d1 ..). Scalar outputs are written as `o[0]`.
    `sinks[k]` (a `Sink`) says where output k goes.

    The arrays are first sliced to rows lo..hi so that i0 counts from 0: numba then knows every
    index is non-negative, drops its negative-index wraparound and LLVM vectorizes the loop
    (about 6x faster on a flat float32 loop than indexing from lo). An accumulator that keeps
    dimension 0 is sliced too; one that reduces it takes rows lo..hi."""
    sinks = sinks or [PLAIN] * len(outputs)
    dims = [f"d{k}" for k in range(1, ndim)]
    params = ["lo", "hi", *dims] + [f"a{v}" for v in args]
    params += [f"o{k}" for k, sink in enumerate(sinks) if sink.alias is None]
    head, body, tail = [f"def fused({', '.join(params)}):"], [], []
    lanes = False  # a whole reduction accumulated in LANES chains
    index = ", ".join(f"i{k}" for k in range(ndim))

    def name(v):
        return f"x{v}" if v < num_args else f"v{v}"

    for v in args:
        (head if scalar[v] else body).append(f"x{v} = a{v}[{'0' if scalar[v] else index}]")
    for j in used:
        m, v = members[j], num_args + j
        line = f"v{v} = {expression(m, [name(a) for a in m.args])}"
        (head if scalar[v] else body).append(line)
    sliced = [f"a{v}" for v in args if not scalar[v]]
    for k, (v, sink) in enumerate(zip(outputs, sinks)):
        target = f"o{k}" if sink.alias is None else f"a{sink.alias}"
        if sink.reduce is not None:
            acc = _constructor(sink.acc)
            if scalar[v] or sink.kept:
                at = f"o{k}[{', '.join(f'i{d}' for d in sink.kept) if not scalar[v] else '0'}]"
                if not scalar[v] and 0 in sink.kept:
                    sliced.append(f"o{k}")
            elif ndim == 1:  # a whole reduction of a flat loop: LANES accumulators
                at, lanes = f"r{k}[u]", True
                head.append(f"r{k} = np.full({LANES}, o{k}[0])")
                tail.append(f"o{k}[0] = {_tree(REDUCTIONS[sink.reduce], k, 0, LANES)}")
            else:  # a whole reduction: one accumulator in a register
                at = f"r{k}"
                head.append(f"r{k} = o{k}[0]")
                tail.append(f"o{k}[0] = r{k}")
            step = REDUCTIONS[sink.reduce].format(at, f"{acc}({name(v)})")
            (head if scalar[v] else body).append(f"{at} = {acc}({step})")
            continue
        at = f"{target}[{'0' if scalar[v] else index}]"
        value = name(v)
        if sink.combine is not None:
            value = f"{_constructor(members[v - num_args].dtype)}({at} {sink.combine} {value})"
        (head if scalar[v] else body).append(f"{at} = {value}")
        if sink.alias is None and not scalar[v]:
            sliced.append(f"o{k}")
    if body:  # the rows lo..hi of every loop-indexed array, so that i0 counts from 0
        head += [f"{a} = {a}[lo:hi]" for a in sliced]
    lines = head[:1] + ["    " + s for s in head[1:]]
    if body and lanes:
        # LANES independent chains: i0 = j + u, u unrolled, then the rows left in lane 0
        lines += ["    n = hi - lo", f"    m = n - n % {LANES}"]
        lines += [f"    for j in range(0, m, {LANES}):", f"        for u in range({LANES}):"]
        lines += ["            i0 = j + u"] + ["            " + s for s in body]
        lines += ["    u = 0", "    for i0 in range(m, n):"] + ["        " + s for s in body]
    elif body:
        indent = "    "
        for k in range(ndim):
            extent = "hi - lo" if k == 0 else f"d{k}"
            lines.append(f"{indent}for i{k} in range({extent}):")
            indent += "    "
        lines += [indent + s for s in body]
    return "\n".join(lines + ["    " + s for s in tail] + ["    return 0", ""])


def _tree(template: str, k: int, lo: int, hi: int) -> str:
    """Lanes lo..hi of accumulator r<k> combined pairwise."""
    if hi - lo == 1:
        return f"r{k}[{lo}]"
    mid = (lo + hi) // 2
    return "(" + template.format(_tree(template, k, lo, mid), _tree(template, k, mid, hi)) + ")"


_lock = threading.Lock()
_compiled: dict[str, object] = {}


def compile_source(source: str):
    """The numba dispatcher of `source` (a `fused` function), compiled once per process."""
    fn = _compiled.get(source)
    if fn is None:
        with _lock:
            fn = _compiled.get(source)
            if fn is None:
                fn = _compiled[source] = _compile(source)
    return fn


def _compile(source: str):
    import numba

    text = "import numpy as np\n\n\n" + source
    path = _cache_file(text)
    if path is not None:  # a module file, so that numba can cache the machine code on disk
        # importable by name: numba's cache rebuilds the function's globals from its module
        name = "flowgraph_" + os.path.basename(path)[:-3]
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return numba.njit(nogil=True, error_model="numpy", cache=True)(module.fused)
    scope: dict = {}
    exec(compile(text, "<fused>", "exec"), scope)  # noqa: S102  (our generated source)
    return numba.njit(nogil=True, error_model="numpy")(scope["fused"])


def _cache_file(text: str) -> str | None:
    """`text` written once to the cache directory (atomically: processes may race)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    directory = os.path.join(base, "flowgraph", "fusion")
    path = os.path.join(directory, f"fused_{hashlib.sha1(text.encode()).hexdigest()}.py")
    try:
        if not os.path.exists(path):
            os.makedirs(directory, exist_ok=True)
            tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
            with open(tmp, "w") as f:
                f.write(text)
            os.replace(tmp, path)
    except OSError:
        return None
    return path
