"""Smoke test of bench/: the harness runs end to end and its table logic holds, so it cannot rot.

Timings are never asserted (they belong to `python bench/run.py`, not to unit tests); what is
checked is that each requested workload yields a row with a number for flowgraph and NumPy, that
the TF column says n/a without TensorFlow, and that a failing workload becomes a row, not a crash.
"""

import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(REPO, "bench")


@pytest.fixture(scope="module")
def bench_modules():
    sys.path.insert(0, BENCH)
    try:
        import harness
        import run
        import workloads

        yield harness, run, workloads
    finally:
        sys.path.remove(BENCH)
        for name in ("harness", "run", "workloads", "floors", "tf_side"):
            sys.modules.pop(name, None)  # generic names: leave no trace for other tests


def _rows(stdout: str) -> dict[str, list[str]]:
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("id "))
    rows = {}
    for line in lines[start + 2 :]:
        if not line.strip():
            break
        cells = line.split("  ")
        cells = [c.strip() for c in cells if c.strip()]
        rows[cells[0]] = cells
    return rows


def test_quick_run_prints_a_row_per_workload():
    proc = subprocess.run(
        [
            sys.executable,
            os.path.join(BENCH, "run.py"),
            "--quick",
            "--no-tf",
            "--only",
            "W1,W2,W8a",
        ],
        capture_output=True,
        check=False,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    rows = _rows(proc.stdout)
    assert list(rows) == ["W1", "W2", "W8a"]
    # id, workload, unit, flowgraph, TF, NumPy, fg/TF, fg/NumPy, target, met
    for key in ("W1", "W2"):
        cells = rows[key]
        assert float(cells[3]) > 0 and float(cells[5]) > 0, cells
        assert cells[4] == "n/a" and cells[6] == "-"
    assert float(rows["W8a"][3]) > 0 and rows["W8a"][5] == "n/a"
    assert rows["W2"][-2] == "<= 2 us" and rows["W2"][-1] in ("yes", "no")
    assert rows["W1"][-1] == "n/a"  # a ratio target cannot be judged without TF
    assert "TensorFlow: not run" in proc.stdout


def test_unknown_workload_is_a_usage_error():
    proc = subprocess.run(
        [sys.executable, os.path.join(BENCH, "run.py"), "--no-tf", "--only", "W99"],
        capture_output=True,
        check=False,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "W99" in proc.stderr


def test_failing_workload_becomes_an_error_row(bench_modules):
    harness, run, workloads = bench_modules
    w1 = workloads.BY_KEY["W1"]

    def broken():
        raise NotImplementedError("no kernel for this")

    result = harness.measure(w1, broken, quick=True)
    assert result.median_s is None and result.error.startswith("NotImplementedError")
    (row,) = run.table_rows(["W1"], {"W1": result}, {}, {}, "n/a")
    assert row[3] == "NotImplementedError" and row[-1] == "no"


def test_targets_and_units(bench_modules):
    harness, run, workloads = bench_modules
    w2, w4, w7 = (workloads.BY_KEY[k] for k in ("W2", "W4", "W7"))
    # W2 is per op: 1.5 ms for the 1000-add chain is 1.5 us/op, within its 2 us target.
    fg = harness.Result("W2", median_s=1.5e-3)
    assert run.per_unit(w2, fg) == pytest.approx(1.5)
    assert run.verdict(w2, 1.5, None) == "yes" and run.verdict(w2, 2.5, None) == "no"
    # ratio targets compare with TF: W4 allows 1.0x, W7 too.
    assert run.verdict(w4, 9.9, 10.0) == "yes" and run.verdict(w4, 10.2, 10.0) == "no"
    assert run.per_unit(w7, harness.Result("W7", median_s=0.25)) == pytest.approx(250.0)


def test_missing_tf_interpreter_leaves_the_tf_column_na():
    proc = subprocess.run(
        [sys.executable, os.path.join(BENCH, "run.py"), "--quick", "--only", "W1"],
        capture_output=True,
        check=False,
        text=True,
        timeout=60,
        env=dict(os.environ, FLOWGRAPH_BENCH_TF_PYTHON="/nonexistent/python"),
    )
    assert proc.returncode == 0, proc.stderr
    assert "failed: FileNotFoundError" in proc.stdout
    assert _rows(proc.stdout)["W1"][4] == "n/a"


@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_floors_compute_what_the_graphs_compute(bench_modules, model):
    """The NumPy floor of W4/W5 is the same math as the graph: from the same weights, one SGD
    step gives the same loss and the same update (lr=1 so that updates are not lost in rounding)."""
    import numpy as np

    import flowgraph as tf

    sys.path.insert(0, BENCH)
    try:
        import floors
    finally:
        sys.path.remove(BENCH)
    _, _, workloads = bench_modules
    build, make_params, sgd_step, shape = {
        "mlp": (workloads.mlp_loss, floors.mlp_params, floors.mlp_sgd_step, (8, 784)),
        "cnn": (workloads.cnn_loss, floors.cnn_params, floors.cnn_sgd_step, (4, 28, 28, 1)),
    }[model]
    params = make_params()
    before = [p.copy() for layer in params for p in layer]
    xs, ys = workloads.batch(shape, seed=3)
    with tf.Graph().as_default():
        x, labels, loss = build(tf)
        train = tf.train.GradientDescentOptimizer(1.0).minimize(loss)
        variables = tf.trainable_variables()
        with tf.Session() as sess:
            # load() runs each initializer with its value fed, so the truncated normals (4 s of
            # the CNN's 3136x1024 weights) are never drawn.
            for v, p in zip(variables, before, strict=True):
                v.load(p, sess)
            graph_loss, _ = sess.run([loss, train], {x: xs, labels: ys})
            graph_after = sess.run(variables)
    floor_loss = sgd_step(params, xs, ys, 1.0)
    np.testing.assert_allclose(graph_loss, floor_loss, rtol=1e-5)
    floor_after = [p for layer in params for p in layer]
    for b, g, f in zip(before, graph_after, floor_after, strict=True):
        scale = np.abs(b - f).max()
        np.testing.assert_allclose(b - g, b - f, rtol=1e-3, atol=1e-4 * scale)


def test_interleaved_steps_take_turns_and_pair_by_round(bench_modules):
    harness, _run, workloads = bench_modules
    calls, closed = [], []

    def case(key, seconds, fail_at=None):
        def step():
            calls.append(key)
            if len(calls) == fail_at:
                raise ValueError("broken step")
            return seconds

        return workloads.Case(step, lambda: closed.append(key))

    group = [workloads.BY_KEY[k] for k in ("I2", "I2d", "I2f")]
    makes = [lambda: case("a", 2.0), lambda: case("b", 3.0, fail_at=4), lambda: case("c", 1.0)]
    a, b, c = harness.measure_interleaved(group, makes, quick=True)
    # quick: 1 warm-up round + 2 measured; the order rotates by one each round; b's step
    # fails in the first measured round and sits out the rest, the others go on.
    assert calls == ["a", "b", "c", "b", "c", "a", "c", "a"]
    assert sorted(closed) == ["a", "b", "c"]
    assert b.error.startswith("ValueError") and a.samples == [2.0, 2.0]
    assert harness.paired_ratios(a, c) == [2.0, 2.0] and harness.paired_ratios(a, b) == []
    assert (a.key, b.key, c.key) == ("I2", "I2d", "I2f")


def test_interleaved_groups_are_measured_together(bench_modules):
    harness, run, _workloads = bench_modules
    assert run.measured_together(["W1", "I2f", "W2", "I2"]) == [["W1"], ["I2", "I2f"], ["W2"]]
    fg = {
        "I2": harness.Result("I2", 0.05, [0.05, 0.06, 0.07]),
        "I2f": harness.Result("I2f", 0.05, [0.05, 0.05, 0.07]),
    }
    (line,) = run.same_peer_ratios(["I2", "I2f"], (fg, {}, {}))
    assert "I2/I2f = 1.000 [1.000..1.100] over 3 rounds" in line and "yes" in line
