"""The `tensorflow` / `tf.compat` aliases that let TF1 programs import their usual paths (the
layering of DESIGN.md is kept by tests/test_architecture.py)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

import flowgraph as tf
from flowgraph import compat


def test_compat_v1_is_flowgraph():
    from flowgraph.compat import v1
    from flowgraph.compat import v1 as v1b

    assert v1 is tf and v1b is tf and tf.compat.v1 is tf
    assert tf.compat.v1.placeholder is tf.placeholder


def test_v2_switches():
    assert tf.disable_v2_behavior() is None and tf.compat.v1.disable_eager_execution() is None
    assert tf.executing_eagerly() is False
    for fn in (tf.enable_v2_behavior, tf.enable_eager_execution, tf.enable_control_flow_v2):
        with pytest.raises(NotImplementedError, match="graph mode|TF1 control flow"):
            fn()


def test_compat_string_helpers():
    assert tf.compat.as_bytes("é") == "é".encode() and tf.compat.as_bytes(b"x") == b"x"
    assert tf.compat.as_text(b"\xc3\xa9") == "é" and tf.compat.as_str("a") == "a"
    assert tf.compat.as_str_any(3) == "3" and tf.compat.path_to_str(Path("a/b")) == "a/b"
    with pytest.raises(TypeError):
        tf.compat.as_bytes(3)
    with pytest.raises(TypeError):
        tf.compat.as_text(None)
    assert (
        tf.compat.dimension_value(tf.Dimension(4)) == 4 and tf.compat.dimension_value(None) is None
    )
    assert tf.compat.dimension_at_index(tf.TensorShape([2, None]), 1).value is None
    assert tf.compat.dimension_at_index(tf.TensorShape(None), 5).value is None
    assert tf.compat.forward_compatible(2019, 1, 1) and not tf.compat.forward_compatible(2021, 1, 1)


@pytest.fixture
def aliases():
    if "tensorflow" in sys.modules and sys.modules["tensorflow"] is not tf:
        pytest.skip("a real tensorflow is imported in this process")
    compat.install_tensorflow_aliases()
    yield
    compat.uninstall_tensorflow_aliases()


def test_tensorflow_paths_resolve_to_flowgraph(aliases, monkeypatch):
    import tensorflow
    from tensorflow.compat import v1
    from tensorflow.compat import v1 as v1b

    assert tensorflow is tf and v1 is tf and v1b is tf
    assert importlib.import_module("tensorflow.contrib") is tf.contrib
    monkeypatch.setitem(
        compat.TENSORFLOW_MODULES, "tensorflow.examples.tutorials.fake_data", "flowgraph.compat"
    )
    from tensorflow.examples.tutorials import fake_data

    assert fake_data is compat
    assert importlib.import_module("tensorflow.compat.v1.examples.tutorials.fake_data") is compat
    assert sys.modules["flowgraph"].__spec__.name == "flowgraph"  # aliasing leaves flowgraph intact
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("tensorflow.not_a_module")


def test_uninstall_removes_the_aliases(aliases):
    import tensorflow  # noqa: F401

    compat.uninstall_tensorflow_aliases()
    assert "tensorflow" not in sys.modules
    try:
        importlib.import_module("tensorflow")
    except ImportError:
        return
    assert sys.modules["tensorflow"] is not tf  # a real TensorFlow, not our alias
