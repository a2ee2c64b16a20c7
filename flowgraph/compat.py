"""TF1 compatibility: `tf.compat` (v1 is flowgraph itself), the v2-behaviour switches that TF1
scripts call first, and the `tensorflow` import aliases used by `flowgraph run`.

flowgraph is always in graph mode: there is no eager execution and no v2 behaviour to turn off,
so `disable_v2_behavior()` and `disable_eager_execution()` are correct no-ops, and their `enable_`
counterparts raise, naming what is unsupported. `enable_resource_variables()` is real: it makes
tf.Variable and get_variable build resource variables (flowgraph/ops/resource_variables.py).

`TENSORFLOW_MODULES` maps TensorFlow module paths to the flowgraph modules that provide them.
`install_tensorflow_aliases()` makes `import tensorflow`, `import tensorflow.compat.v1 as tf`,
`from tensorflow.compat import v1` and every path in the table resolve to flowgraph. Owners of
modules that stand in for TensorFlow paths add a row, e.g.
`"tensorflow.examples.tutorials.mnist.input_data": "flowgraph.examples.mnist.input_data"`.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import numbers
import os
import sys
import types

import numpy as np

import flowgraph as v1
from flowgraph.core.shapes import Dimension as _Dimension
from flowgraph.ops.resource_variables import (
    disable_resource_variables,
    enable_resource_variables,
    resource_variables_enabled,
)

__all__ = [
    "disable_control_flow_v2",
    "disable_eager_execution",
    "disable_resource_variables",
    "disable_tensor_equality",
    "disable_v2_behavior",
    "enable_control_flow_v2",
    "enable_eager_execution",
    "enable_resource_variables",
    "enable_v2_behavior",
    "executing_eagerly",
    "resource_variables_enabled",
]

# `import flowgraph.compat.v1 as tf` works like `import tensorflow.compat.v1 as tf`. An empty
# __path__ makes this module a package, so the import system looks up its submodule `v1` (found in
# sys.modules here, or by the tensorflow alias finder below) instead of refusing.
__path__: list[str] = []
sys.modules[__name__ + ".v1"] = v1

TENSORFLOW_MODULES: dict[str, str] = {
    "tensorflow": "flowgraph",
    "tensorflow.compat": "flowgraph.compat",
    "tensorflow.compat.v1": "flowgraph",
    "tensorflow.contrib": "flowgraph.contrib",
    "tensorflow.examples.tutorials.mnist.input_data": "flowgraph.examples.input_data",
    "tensorflow.examples.tutorials.mnist.mnist": "flowgraph.examples.mnist",
    "tensorflow.python.client.timeline": "flowgraph.client.timeline",
    "tensorflow.python.profiler.model_analyzer": "flowgraph.profiler.model_analyzer",
    "tensorflow.python.profiler.option_builder": "flowgraph.profiler.option_builder",
    "tensorflow.python.profiler.profiler": "flowgraph.profiler",
    "tensorflow.python.platform.app": "flowgraph.platform.app",
    "tensorflow.python.platform.flags": "flowgraph.platform.flags",
    "tensorflow.python.platform.gfile": "flowgraph.platform.gfile",
    "tensorflow.python.platform.tf_logging": "flowgraph.platform.tf_logging",
    "tensorflow.python.platform.test": "flowgraph.testing.test_case",
    "tensorflow.python.platform.googletest": "flowgraph.testing.test_case",
    "tensorflow.python.framework.test_util": "flowgraph.testing.test_util",
    "tensorflow.python.ops.gradient_checker": "flowgraph.testing.gradient_checker",
    "tensorflow.python.framework.graph_util": "flowgraph.framework.graph_util",
    "tensorflow.python.framework.function": "flowgraph.framework.function",
    "tensorflow.data": "flowgraph.data",
    "tensorflow.data.experimental": "flowgraph.data.experimental",
    "tensorflow.python.training.saver": "flowgraph.train.saver",
    "tensorflow.python.training.session_run_hook": "flowgraph.train.session_run_hook",
    "tensorflow.python.training.basic_session_run_hooks": (
        "flowgraph.train.basic_session_run_hooks"
    ),
    "tensorflow.python.training.checkpoint_utils": "flowgraph.train.checkpoint_utils",
    "tensorflow.python.training.monitored_session": "flowgraph.train.monitored_session",
    "tensorflow.python.training.session_manager": "flowgraph.train.session_manager",
    "tensorflow.python.training.supervisor": "flowgraph.train.supervisor",
    "tensorflow.python.training.checkpoint_management": "flowgraph.train.checkpoint_management",
    "tensorflow.python.saved_model.builder": "flowgraph.saved_model.builder",
    "tensorflow.python.saved_model.loader": "flowgraph.saved_model.loader",
    "tensorflow.python.saved_model.signature_def_utils": (
        "flowgraph.saved_model.signature_def_utils"
    ),
}


# -- the switches TF1 scripts call ---------------------------------------------------------------
def disable_v2_behavior():
    """No-op: flowgraph always behaves as TF1 graph mode, which is what this asks for."""


def disable_eager_execution():
    """No-op: flowgraph has no eager execution; ops always build a graph run by a Session."""


def disable_control_flow_v2():
    """No-op: flowgraph's control flow is TF1's (Switch/Merge/Enter/Exit/NextIteration)."""


def disable_tensor_equality():
    """No-op: Tensors already compare and hash by identity, as in TF1."""


def enable_v2_behavior():
    """Raises: TF2 behaviour (eager execution, resource variables, functions) is not provided."""
    raise NotImplementedError(
        "enable_v2_behavior(): flowgraph implements TF1 graph mode only; remove this call."
    )


def enable_eager_execution(config=None, device_policy=None, execution_mode=None):
    """Raises: eager execution is not provided; build a graph and run it in a Session."""
    raise NotImplementedError(
        "enable_eager_execution(): flowgraph implements TF1 graph mode only; build the graph "
        "and run it with tf.Session()."
    )


def enable_control_flow_v2():
    """Raises: functional (v2) control flow is not provided."""
    raise NotImplementedError("enable_control_flow_v2(): flowgraph has TF1 control flow only.")


def executing_eagerly() -> bool:
    """Always False: every op builds a graph."""
    return False


# -- tf.compat helpers ---------------------------------------------------------------------------
bytes_or_text_types = (bytes, str)
integral_types = (numbers.Integral, np.integer)
real_types = (numbers.Real, np.integer, np.floating)
complex_types = (numbers.Complex, np.number)


def as_bytes(bytes_or_text, encoding="utf-8") -> bytes:
    """`str` encoded with `encoding`; bytes pass through; anything else is a TypeError."""
    if isinstance(bytes_or_text, bytearray):
        return bytes(bytes_or_text)
    if isinstance(bytes_or_text, str):
        return bytes_or_text.encode(encoding)
    if isinstance(bytes_or_text, bytes):
        return bytes_or_text
    raise TypeError(f"Expected binary or unicode string, got {bytes_or_text!r}")


def as_text(bytes_or_text, encoding="utf-8") -> str:
    """bytes decoded with `encoding`; str passes through; anything else is a TypeError."""
    if isinstance(bytes_or_text, str):
        return bytes_or_text
    if isinstance(bytes_or_text, bytes):
        return bytes_or_text.decode(encoding)
    raise TypeError(f"Expected binary or unicode string, got {bytes_or_text!r}")


as_str = as_text


def as_str_any(value) -> str:
    """`as_str` for bytes, `str(value)` for everything else."""
    return as_str(value) if isinstance(value, bytes) else str(value)


def path_to_str(path):
    """A path-like object as a string; other values pass through unchanged."""
    return os.fspath(path) if isinstance(path, os.PathLike) else path


def dimension_value(dimension):
    """The int (or None) of a Dimension; plain values pass through."""
    return dimension.value if isinstance(dimension, _Dimension) else dimension


def dimension_at_index(shape, index):
    """Dimension `index` of `shape`; an unknown-rank shape gives an unknown Dimension."""
    from flowgraph.core.shapes import as_shape

    shape = as_shape(shape)
    if shape.ndims is None:
        return _Dimension(None)
    return shape.dims[index]


def forward_compatible(year, month, day) -> bool:
    """True for dates before TF 1.15's forward-compatibility horizon (2019-11-01), which
    flowgraph's ops follow."""
    return (year, month, day) < (2019, 11, 1)


# -- `import tensorflow` -> flowgraph ------------------------------------------------------------
class _AliasFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves TensorFlow module paths from `TENSORFLOW_MODULES`. A path that is only a prefix
    of rows (`tensorflow.examples`) becomes the same flowgraph package if there is one, else an
    empty package; `tensorflow.compat.v1.x` resolves like `tensorflow.x`."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "tensorflow" and not fullname.startswith("tensorflow."):
            return None
        if _resolve(fullname) is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        return types.ModuleType(spec.name)  # replaced in exec_module; keeps flowgraph's __spec__

    def exec_module(self, module):
        sys.modules[module.__name__] = _resolve(module.__name__)


def _resolve(fullname: str):
    """The module that stands in for TensorFlow module `fullname`, or None."""
    if fullname.startswith("tensorflow.compat.v1."):
        fullname = "tensorflow." + fullname[len("tensorflow.compat.v1.") :]
    target = TENSORFLOW_MODULES.get(fullname)
    if target is not None:
        return importlib.import_module(target)
    if not any(row.startswith(fullname + ".") for row in TENSORFLOW_MODULES):
        return None
    try:
        return importlib.import_module("flowgraph" + fullname[len("tensorflow") :])
    except ImportError:
        pass
    package = types.ModuleType(fullname, f"Stands in for the TensorFlow package {fullname}.")
    package.__path__ = []
    return package


_FINDER = _AliasFinder()


def install_tensorflow_aliases():
    """Makes `import tensorflow...` resolve to flowgraph in this process (used by `flowgraph run`).

    Raises RuntimeError if a real TensorFlow was already imported: the two would be mixed.
    """
    loaded = sys.modules.get("tensorflow")
    if loaded is not None and loaded is not v1:
        raise RuntimeError("A real `tensorflow` module is already imported in this process.")
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)


def uninstall_tensorflow_aliases():
    """Undoes `install_tensorflow_aliases` (the alias modules already imported are dropped)."""
    if _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)
    for name in [n for n in sys.modules if n == "tensorflow" or n.startswith("tensorflow.")]:
        del sys.modules[name]
