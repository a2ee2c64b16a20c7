"""The floors of the house (DESIGN.md, issue 8), kept by reading every module's imports.

- core/ stands on nothing of flowgraph's; opdefs/ on core/; kernels/ on core/ and opdefs/ (the
  services a kernel needs come through its context); runtime/ on kernels/ and below. A GraphDef
  is the only thing that crosses from client to runtime (the whitepaper's Session.Extend).
- distributed/ never imports client code (framework/, ops/, gradients/, session/, train/).
- Modules import each other without cycles: registration happens in each package's __init__,
  never through an import at the bottom of a module that its own imports import back.

Every import counts for the floors, including those inside functions; the cycle check reads
module-level imports, the ones that run while a module is being imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "flowgraph"

# layer -> the flowgraph packages it may import
ALLOWED = {
    "core": {"core"},
    "opdefs": {"core", "opdefs"},
    "kernels": {"core", "opdefs", "kernels"},
    "runtime": {"core", "opdefs", "kernels", "runtime"},
}
# layer -> the flowgraph packages it must not import ("" is a bare `import flowgraph`)
FORBIDDEN = {"distributed": {"", "framework", "ops", "gradients", "session", "train", "layers"}}

# Cycles that remain, each with its reason; a new cycle fails the test.
KNOWN_CYCLES = [
    # `import flowgraph.compat.v1 as tf` is the package itself (TF's compat.v1 alias).
    {"flowgraph", "flowgraph.compat"},
]


def _import_nodes(tree: ast.AST, module_level_only: bool):
    nodes = tree.body if module_level_only else ast.walk(tree)
    for node in nodes:
        if isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for a in node.names:
                yield node.lineno, f"{node.module}.{a.name}"


def _flowgraph_imports(path: Path):
    """(line, package under flowgraph) of every import of flowgraph in `path`."""
    for line, name in _import_nodes(ast.parse(path.read_text(), str(path)), False):
        parts = name.split(".")
        if parts[0] == "flowgraph":
            yield line, parts[1] if len(parts) > 1 else ""


@pytest.mark.parametrize("layer", sorted(ALLOWED) + sorted(FORBIDDEN))
def test_layer_never_imports_upward(layer):
    assert (PKG / layer).is_dir(), f"flowgraph/{layer} is gone: update the floors table"
    bad = [
        f"{path.relative_to(PKG.parent)}:{line} imports flowgraph.{pkg}"
        for path in sorted((PKG / layer).rglob("*.py"))
        for line, pkg in _flowgraph_imports(path)
        if (pkg not in ALLOWED[layer] if layer in ALLOWED else pkg in FORBIDDEN[layer])
    ]
    assert not bad, "\n".join(bad)


def test_the_floor_check_sees_imports_inside_functions(tmp_path):
    f = tmp_path / "k.py"
    f.write_text("import flowgraph\ndef f():\n    from flowgraph.runtime.step import Step\n")
    assert list(_flowgraph_imports(f)) == [(1, ""), (3, "runtime")]


def _module_graph(root: Path) -> dict[str, set[str]]:
    """module -> the flowgraph modules its module-level imports run. `from P import n` runs
    module P.n when n is a module, else P (whose __init__ ran first in either case)."""
    modules = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {}
    for name, path in modules.items():
        edges = set()
        for _, imported in _import_nodes(ast.parse(path.read_text(), str(path)), True):
            while imported and imported not in modules:
                imported = imported.rpartition(".")[0]
            if imported and imported != name:
                edges.add(imported)
        graph[name] = edges
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []
    for root, children in graph.items():
        if root in index:
            continue
        work = [(root, iter(sorted(children)))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = set()
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.add(w)
                    if w == v:
                        break
                if len(component) > 1:
                    out.append(component)
    return out


def test_no_new_import_cycles():
    cycles = [c for c in _cycles(_module_graph(PKG)) if c not in KNOWN_CYCLES]
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(sorted(c)) for c in cycles)


def test_the_cycle_check_finds_a_bottom_of_file_import(tmp_path):
    pkg = tmp_path / "flowgraph"
    (pkg / "opdefs").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "opdefs" / "__init__.py").write_text("from flowgraph.opdefs import a\n")
    (pkg / "opdefs" / "a.py").write_text("X = 1\nfrom flowgraph.opdefs import b  # registers\n")
    (pkg / "opdefs" / "b.py").write_text("from flowgraph.opdefs.a import X\n")
    assert _cycles(_module_graph(pkg)) == [{"flowgraph.opdefs.a", "flowgraph.opdefs.b"}]
