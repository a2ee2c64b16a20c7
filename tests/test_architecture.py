"""The one-way import rule (DESIGN.md): the runtime side receives GraphDefs only, so runtime/,
kernels/, opdefs/ and core/ never import client code (framework/, ops/, session/, gradients/)."""

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "flowgraph"
CLIENT = (
    "flowgraph.framework",
    "flowgraph.ops",
    "flowgraph.session",
    "flowgraph.gradients",
    "flowgraph.train",
    "flowgraph.layers",
)
SERVER_SIDE = ["runtime", "kernels", "opdefs", "core", "distributed"]


def _imports(path: Path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module


@pytest.mark.parametrize("package", SERVER_SIDE)
def test_server_side_never_imports_client_code(package):
    root = PKG / package
    if not root.exists():
        pytest.skip(f"flowgraph/{package} does not exist yet")
    offenders = [
        f"{path.relative_to(PKG)} imports {name}"
        for path in sorted(root.rglob("*.py"))
        for name in _imports(path)
        if name.startswith(CLIENT) or name == "flowgraph"
    ]
    assert not offenders, "\n".join(offenders)


def test_core_imports_nothing_else_of_ours():
    offenders = [
        f"{path.relative_to(PKG)} imports {name}"
        for path in sorted((PKG / "core").rglob("*.py"))
        for name in _imports(path)
        if name.startswith("flowgraph.") and not name.startswith("flowgraph.core")
    ]
    assert not offenders, "\n".join(offenders)
