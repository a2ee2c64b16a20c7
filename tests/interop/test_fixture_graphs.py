"""GraphDefs exported by real TensorFlow import and run here with TensorFlow's results
(fixtures/tensorflow/README.md §1, followed step by step: one Session per case, steps in order).

A case whose op types are not all registered yet is skipped, naming the missing types.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core.op_def import registered_ops
from flowgraph.kernels.base import registered_kernels
from tests.helpers import TF_FIXTURES

GRAPHS = TF_FIXTURES / "graphs"

if not (GRAPHS / "cases.json").is_file():
    pytest.skip(f"TensorFlow fixtures not found under {GRAPHS}", allow_module_level=True)

CASES = json.loads((GRAPHS / "cases.json").read_text())


def _missing(case: dict) -> list[str]:
    """Op types of the case that lack an OpDef or a CPU kernel (Const/NoOp-like ops included)."""
    ops, kernels = registered_ops(), {op for op, dev in registered_kernels() if dev == "CPU"}
    return sorted(t for t in case["op_types"] if t not in ops or t not in kernels)


def _steps(case: dict) -> list[dict]:
    if "steps" in case:
        return case["steps"]
    return [{k: case[k] for k in ("feeds", "fetches", "targets") if k in case}]


def _check(name: str, got, want: np.ndarray, rtol: float, atol: float):
    got = np.asarray(got)
    assert got.dtype == want.dtype, f"{name}: dtype {got.dtype}, TensorFlow gives {want.dtype}"
    assert got.shape == want.shape, f"{name}: shape {got.shape}, TensorFlow gives {want.shape}"
    if want.dtype.kind in "fc":
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=name)
    else:
        np.testing.assert_array_equal(got, want, err_msg=name)


@pytest.mark.parametrize("case_name", sorted(CASES))
def test_fixture_graph(case_name):
    case = CASES[case_name]
    missing = _missing(case)
    if missing:
        pytest.skip(f"op types without OpDef or CPU kernel yet: {', '.join(missing)}")
    gd = tf.GraphDef()
    gd.ParseFromString((GRAPHS / case["pb"]).read_bytes())
    npz = np.load(GRAPHS / case["npz"])
    g = tf.Graph()
    with g.as_default():
        tf.import_graph_def(gd, name="")
    assert len(g.get_operations()) == len(gd.node)
    with tf.Session(graph=g) as sess:
        for i, step in enumerate(_steps(case)):
            fetches = list(step.get("fetches", {}))
            targets = list(step.get("targets", []))
            feeds = {name: npz[key] for name, key in step.get("feeds", {}).items()}
            out = sess.run(fetches + targets, feed_dict=feeds)
            for name, got in zip(fetches, out):
                _check(
                    f"{case_name} step {i} {name}",
                    got,
                    npz[step["fetches"][name]],
                    case["rtol"],
                    case["atol"],
                )
            assert out[len(fetches) :] == [None] * len(targets)


def test_imported_graph_reexports_the_same_nodes():
    """Every fixture GraphDef (whose ops are registered) survives import -> as_graph_def."""
    checked = 0
    for case in CASES.values():
        if _missing(case):
            continue
        gd = tf.GraphDef()
        gd.ParseFromString((GRAPHS / case["pb"]).read_bytes())
        g = tf.Graph()
        with g.as_default():
            tf.import_graph_def(gd, name="")
        out = {n.name: n for n in g.as_graph_def().node}
        for node in gd.node:
            mine = out[node.name]
            assert (mine.op, list(mine.input), mine.device) == (
                node.op,
                list(node.input),
                node.device,
            )
            for key, value in node.attr.items():
                if key in mine.attr:
                    assert mine.attr[key] == value or key == "value", (case["pb"], node.name, key)
        checked += 1
    if not checked:
        pytest.skip("no fixture case has all its op types registered yet")
