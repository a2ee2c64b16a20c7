"""The one registry abstraction (core/registry.py) behind op definitions, kernels, gradients and
device types: duplicates name both sites, and `describe` says where an op's pieces live."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import flowgraph as tf
from flowgraph import cli
from flowgraph.core import dtypes, errors, op_def, registry
from flowgraph.kernels import base
from flowgraph.profiler import flops
from flowgraph.runtime import device

ROOT = Path(__file__).resolve().parents[2]
HERE = "tests/core/test_registry.py"


def _line(site: str) -> int:
    return int(site.rsplit(":", 1)[1])


def test_a_duplicate_names_both_sites():
    reg = registry.Registry("widget")
    reg.register("a", 1)
    first = reg.site("a")
    with pytest.raises(errors.AlreadyExistsError) as info:
        reg.register("a", 2)
    message = str(info.value)
    assert message.startswith("widget 'a' already registered at " + first)
    assert message.count(HERE) == 2 and first.startswith(HERE)
    again = message.split("again at ")[1].rstrip(")")
    assert _line(again) == _line(first) + 3
    assert reg.get("a") == 1 and "a" in reg and "b" not in reg and len(reg) == 1


def _empty(monkeypatch, reg: registry.Registry) -> None:
    """Empties `reg` for the duration of a test."""
    monkeypatch.setattr(reg, "_entries", {})
    monkeypatch.setattr(reg, "_sites", {})


@pytest.fixture
def fresh_kernels(monkeypatch):
    _empty(monkeypatch, base._KERNELS)
    monkeypatch.setattr(base, "_INDEX", {})


def test_kernels_are_keyed_by_op_device_and_dtype(fresh_kernels):
    base.register_kernel("K", dtypes_=[np.float32, np.float64])(lambda ctx, x: "float")
    base.register_kernel("K")(lambda ctx, x: "any")
    base.register_kernel("K", device="GPU", dtypes_=[np.float32])(lambda ctx, x: "gpu")
    pick = {
        t: base.find_kernel("K", "CPU", {"T": t}).fn(None, None)
        for t in (dtypes.float32, dtypes.float64_ref, dtypes.int32)
    }
    assert pick == {dtypes.float32: "float", dtypes.float64_ref: "float", dtypes.int32: "any"}
    assert base.find_kernel("K", "GPU", {"T": dtypes.float32}).fn(None, None) == "gpu"
    assert base.has_kernel("K", "CPU", {}) and not base.has_kernel("K", "GPU", {})
    with pytest.raises(errors.NotFoundError) as info:
        base.find_kernel("K", "GPU", {"T": dtypes.int32})
    assert str(info.value) == (
        "No registered kernel for 'K' on GPU with T=int32; registered: CPU[all], GPU[float32]"
    )
    assert [k.summary() for k in base.registered_kernels()[("K", "CPU")]] == [
        "CPU T in {float32, float64}",
        "CPU",
    ]


def test_a_duplicate_kernel_raises_naming_both_sites(fresh_kernels):
    base.register_kernel("K", dtypes_=[np.float32, np.int32])(lambda ctx, x: x)
    base.register_kernel("K", dtypes_=[np.float64])(lambda ctx, x: x)  # no overlap: fine
    with pytest.raises(errors.AlreadyExistsError) as info:
        base.register_kernel("K", dtypes_=[np.int64, np.int32])(lambda ctx, x: x)
    message = str(info.value)
    assert message.startswith("kernel for 'K' on CPU T=int32 already registered at " + HERE)
    assert message.count(HERE) == 2  # sites skip register_kernel's frames (machinery)
    # Nothing of the refused kernel was registered, not even its int64 key.
    assert not base.has_kernel("K", "CPU", {"T": dtypes.int64})


def test_a_kernel_constrained_on_two_attrs_beats_one_on_one(fresh_kernels):
    base.register_kernel("C", constraints={"SrcT": [dtypes.int32]})(lambda ctx: "src")
    base.register_kernel("C", constraints={"SrcT": [dtypes.int32], "DstT": [dtypes.bool_]})(
        lambda ctx: "both"
    )
    both = {"SrcT": dtypes.int32, "DstT": dtypes.bool_}
    assert base.find_kernel("C", "CPU", both).fn(None) == "both"
    assert base.find_kernel("C", "CPU", {**both, "DstT": dtypes.int8}).fn(None) == "src"


def test_a_duplicate_op_raises_naming_both_sites(monkeypatch):
    _empty(monkeypatch, op_def._OPS)
    op_def.register_op(op_def.OpDef("Dup"))
    with pytest.raises(errors.AlreadyExistsError) as info:
        op_def.register_op(op_def.OpDef("Dup"))
    assert str(info.value).count(HERE) == 2
    assert op_def.get_op_def("Dup").name == "Dup"


def test_a_duplicate_device_type_names_where_cpu_was_registered():
    with pytest.raises(errors.AlreadyExistsError) as info:
        device.register_device_type("CPU", device.CPUDevice)
    assert "flowgraph/runtime/device.py:" in str(info.value) and HERE in str(info.value)


def test_duplicate_gradients_are_refused_with_a_key_error_as_in_tf1():
    tf.RegisterGradient("TestRegistryGradOp")(lambda op, g: g)
    with pytest.raises(errors.AlreadyExistsError, match="gradient 'TestRegistryGradOp'"):
        tf.NotDifferentiable("TestRegistryGradOp")
    try:  # the TF1 idiom for re-running a notebook cell
        tf.RegisterGradient("TestRegistryGradOp")(lambda op, g: g)
    except KeyError as e:
        assert str(e).startswith("gradient 'TestRegistryGradOp' already registered at " + HERE)


def test_duplicate_statistics_are_refused():
    with pytest.raises(KeyError, match="'flops' of 'MatMul' already registered at flowgraph/"):
        flops.RegisterStatistics("MatMul", "flops")(lambda graph, node: None)


def test_every_kernel_is_for_a_registered_op_and_dtypes_it_admits():
    """A kernel for a dtype that its op's OpDef refuses can never run: dead code, like a kernel
    shadowed by another."""
    ops = op_def.registered_ops()
    dead = []
    for (op_type, dev, cons), kdef in base._KERNELS.items():
        if op_type not in ops:
            dead.append(f"{kdef.site}: no op {op_type!r}")
            continue
        for attr, dtype in cons:
            a = ops[op_type].attrs.get(attr)
            if a is None or (a.allowed is not None and dtype not in a.allowed):
                dead.append(f"{kdef.site}: {op_type} on {dev} with {attr}={dtype.name}")
    assert not dead, "\n".join(dead)


def test_describe_says_where_an_op_lives():
    entries = registry.describe("MatMul")
    assert [e.what for e in entries] == ["op", "kernel", "kernel", "gradient", "statistic"]
    where = {e.summary: e.site for e in entries}
    assert where["CPU T in {bfloat16}"].startswith("flowgraph/kernels/cpu/bfloat16.py:")
    assert entries[0].site.startswith("flowgraph/opdefs/linalg.py:")
    assert entries[-2].site.startswith("flowgraph/gradients/linalg.py:")
    assert entries[-1].site.startswith("flowgraph/profiler/flops.py:")
    for e in entries:  # each site is a real line that registers MatMul, or a table of them
        path, line = e.site.rsplit(":", 1)
        text = (ROOT / path).read_text().splitlines()[int(line) - 1]
        assert "register" in text or "MatMul" in text, e


@pytest.mark.parametrize(
    "op_type, name, whats",
    [
        ("TensorArrayReadV3", "TensorArrayReadV3", ("op", "gradient")),
        ("TensorArraySplitV3", "TensorArraySplitV3", ("op", "gradient")),
        ("Conv2DBackpropFilter", "Conv2D", ("op",)),
        ("Conv3DBackpropInputV2", "Conv3D", ("op",)),
        ("DepthwiseConv2dNative", "DepthwiseConv2dNative", ("op",)),
    ],
)
def test_describe_names_the_line_that_calls_a_registration_helper(op_type, name, whats):
    """Modules that register through their own helpers (register_conv, TensorArray's _writer and
    _reader_grad) declare themselves machinery: the site is the line naming the op (its family),
    not the helper's body."""
    for e in registry.describe(op_type):
        if e.what in whats:
            path, line = e.site.rsplit(":", 1)
            call = (ROOT / path).read_text().splitlines()[int(line) - 1 : int(line) + 1]
            assert name in " ".join(call), e  # the call's first line, or its first argument's


def test_describe_an_unknown_op():
    assert registry.describe("NoSuchOp") == []
    with pytest.raises(errors.NotFoundError, match="'NoSuchOp'"):
        registry.format_description("NoSuchOp")


def test_cli_describe(capsys):
    assert cli.main(["describe", "Add", "NoSuchOp"]) == 1
    out, err = capsys.readouterr()
    assert out.splitlines()[0] == "Add" and "flowgraph/kernels/cpu/math.py:" in out
    assert "NoSuchOp" in err
