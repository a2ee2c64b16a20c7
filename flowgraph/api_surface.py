"""What a TF1 program may name that flowgraph has not built: such a name raises
NotImplementedError naming it, never AttributeError.

A TF1 program that reaches a missing API should learn that the API is missing from flowgraph,
not that it misspelt it. `tf1_api.txt` lists TensorFlow 1.x's public names per module;
`install()` gives `flowgraph` and each of its tf.* namespaces a module `__getattr__` (PEP 562),
which Python calls only for names the module lacks: a listed name raises NotImplementedError,
anything else the usual AttributeError (so `hasattr` and `getattr(m, x, default)` keep working
for names TensorFlow itself does not have). Every public name of `tf.contrib` counts as listed:
all of it was TensorFlow 1.x API.
"""

from __future__ import annotations

import importlib.util
import types
from pathlib import Path

_LISTING = Path(__file__).with_name("tf1_api.txt")


def tf1_names() -> dict[str, frozenset]:
    """{module path ("" for tf itself, "nn", "train.queue_runner", ...): its public names}."""
    table = {}
    for line in _LISTING.read_text().splitlines():
        if line and not line.startswith("#"):
            path, _, names = line.partition(":")
            table["" if path == "." else path] = frozenset(names.split())
    return table


def _submodules(table, path: str) -> frozenset:
    prefix = f"{path}." if path else ""
    return frozenset(
        p[len(prefix) :].split(".")[0] for p in table if p.startswith(prefix) and p != path
    )


def not_built(qualified: str) -> NotImplementedError:
    return NotImplementedError(
        f"{qualified} is TensorFlow 1.x API that flowgraph does not provide yet"
    )


def _make_getattr(module, path: str, listed: frozenset, everything: bool):
    qualified = "tf" + (f".{path}" if path else "")
    package = getattr(module, "__path__", None) is not None

    def __getattr__(name: str):
        if name.startswith("_"):
            raise AttributeError(f"module {qualified!r} has no attribute {name!r}")
        if package and importlib.util.find_spec(f"{module.__name__}.{name}") is not None:
            return importlib.import_module(f"{module.__name__}.{name}")  # not imported yet
        if everything or name in listed:
            raise not_built(f"{qualified}.{name}")
        raise AttributeError(f"module {qualified!r} has no attribute {name!r}")

    return __getattr__


def install(root: types.ModuleType) -> None:
    """Gives `root` (flowgraph) and every tf.* module below it that TF 1.x has the
    NotImplementedError `__getattr__`; a missing TF1 submodule raises it when reached."""
    table = tf1_names()
    for path in sorted(table, key=len):
        module = _existing(root, path)
        if module is not None:
            listed = table[path] | _submodules(table, path)
            _install(module, path, listed, everything=False)
    contrib = _existing(root, "contrib")
    if contrib is not None:
        _install_everywhere(contrib, "contrib")


def _existing(root, path: str):
    """The module at `path` below root if flowgraph has it (without calling __getattr__)."""
    module = root
    for part in filter(None, path.split(".")):
        module = vars(module).get(part)
        if not isinstance(module, types.ModuleType):
            return None
    return module


def _install(module, path: str, listed: frozenset, everything: bool) -> None:
    if "__getattr__" not in vars(module):
        module.__getattr__ = _make_getattr(module, path, listed, everything)


def _install_everywhere(module, path: str, depth: int = 0) -> None:
    """tf.contrib and its namespaces (tf.contrib.rnn, ...): all their names were TF1 API. The
    modules a contrib package is made of (seq2seq/decoder.py, ...) are not namespaces."""
    _install(module, path, frozenset(), everything=True)
    for name, value in list(vars(module).items()):
        if name.startswith("_") or not isinstance(value, types.ModuleType):
            continue
        if depth == 0 and value.__name__.startswith("flowgraph.contrib."):
            _install_everywhere(value, f"{path}.{name}", depth + 1)
