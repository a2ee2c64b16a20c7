"""The floors of the house (issue 8): core/ and opdefs/ stand on nothing of flowgraph's above
them, kernels/ on core/ and opdefs/ only (the services it needs come through its context), and
runtime/ on kernels/ and below. Every import counts, including those inside functions."""

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "flowgraph"

ALLOWED = {
    "core": {"core"},
    "opdefs": {"core", "opdefs"},
    "kernels": {"core", "opdefs", "kernels"},
    "runtime": {"core", "opdefs", "kernels", "runtime"},
}


def _flowgraph_imports(path: Path):
    """(line, package under flowgraph) of every import of flowgraph in `path`."""
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
            if node.module == "flowgraph":
                names = [f"flowgraph.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "flowgraph":
                yield node.lineno, parts[1] if len(parts) > 1 else ""


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layer_never_imports_upward(layer):
    bad = [
        f"{path.relative_to(PKG.parent)}:{line} imports flowgraph.{pkg}"
        for path in sorted((PKG / layer).rglob("*.py"))
        for line, pkg in _flowgraph_imports(path)
        if pkg not in ALLOWED[layer]
    ]
    assert not bad, "\n".join(bad)


def test_the_check_sees_imports_inside_functions(tmp_path):
    f = tmp_path / "k.py"
    f.write_text("def f():\n    from flowgraph.runtime.executor import Step\n")
    assert list(_flowgraph_imports(f)) == [(2, "runtime")]
