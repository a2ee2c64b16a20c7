"""Every `module.name` that flowgraph's code reads off a module of ours exists (issue 7, defect 5:
`tf.case(..., exclusive=True)` called a `reduce_sum` that `ops.math` does not define, an
AttributeError only that path reached). A static sweep finds such names on paths no test runs."""

import ast
import importlib
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1] / "flowgraph"


def _module_aliases(nodes: list) -> dict:
    """alias -> module, for every `from flowgraph... import m [as alias]` naming a module."""
    aliases = {}
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("flowgraph"):
            for a in node.names:
                try:
                    aliases[a.asname or a.name] = importlib.import_module(f"{node.module}.{a.name}")
                except ImportError:
                    continue  # a name inside a module, not a module
    return aliases


def test_attributes_read_off_our_modules_exist():
    missing = []
    for path in sorted(ROOT.rglob("*.py")):
        nodes = list(ast.walk(ast.parse(path.read_text())))  # walked once, read twice
        aliases = _module_aliases(nodes)
        for node in nodes:
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                module = aliases.get(node.value.id)
                if module is not None and not hasattr(module, node.attr):
                    rel = path.relative_to(ROOT.parent)
                    missing.append(f"{rel}:{node.lineno}: {node.value.id}.{node.attr}")
    assert not missing, "\n".join(missing)
