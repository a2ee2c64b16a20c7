"""tf.profiler (whitepaper §9.2): parameters, float operations (TF's registered counts, checked
here against hand-computed numbers), time and memory of traced steps, by scope, graph and op
type, with ProfileOptionBuilder's filters and outputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from profiler_models import mlp

import flowgraph as tf
from flowgraph.profiler import flops
from tests.helpers import run_flowgraph

PO = tf.profiler.ProfileOptionBuilder
FULL_TRACE = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
QUIET = {"output": "none"}


# Hand-computed: a MatMul [m,k]x[k,n] costs 2*k*m*n; AddV2/Square one per output element;
# Mean one per input element (sum, then one division per output).
MLP_FLOPS = {
    "layer1/MatMul": 2 * 16 * 8 * 32,
    "layer1/add": 8 * 32,
    "layer2/MatMul": 2 * 32 * 8 * 4,
    "Square": 8 * 4,
    "loss": 8 * 4,
}


def _flat(node):
    yield node
    for c in node.children:
        yield from _flat(c)


def test_float_operations_by_scope_equal_hand_computed_counts():
    g, _, _ = mlp()
    out = tf.profiler.profile(g, cmd="scope", options=PO.float_operation() | QUIET)
    got = {n.name: n.float_ops for n in _flat(out) if n.float_ops}
    assert got == MLP_FLOPS
    assert out.total_float_ops == sum(MLP_FLOPS.values()) == 10560
    assert out.name == "_TFProfRoot"


def test_float_operations_by_op_type():
    g, _, _ = mlp()
    out = tf.profiler.profile(g, cmd="op", options=PO.float_operation() | QUIET)
    rows = []
    node = out
    while node.children:  # the op view chains its rows, largest first
        node = node.children[0]
        rows.append((node.name, node.float_ops, sorted(n.name for n in node.graph_nodes)))
    assert rows == [
        ("MatMul", 8192 + 2048, ["layer1/MatMul", "layer2/MatMul"]),
        ("AddV2", 256, ["layer1/add"]),
        ("Mean", 32, ["loss"]),
        ("Square", 32, ["Square"]),
    ]
    assert out.total_float_ops == 10560 == out.children[0].total_float_ops


def test_convolution_and_pooling_flops():
    g = tf.Graph()
    with g.as_default():
        image = tf.placeholder(tf.float32, [2, 8, 8, 3])
        kernel = tf.ones([3, 3, 3, 4])
        conv = tf.nn.conv2d(image, kernel, [1, 1, 1, 1], "SAME", name="conv")
        pool = tf.nn.max_pool(conv, [1, 2, 2, 1], [1, 2, 2, 1], "VALID", name="pool")
        tf.nn.bias_add(pool, tf.ones([4]), name="bias")
        tf.reduce_sum(pool, axis=[1, 2], name="sum")
    out = tf.profiler.profile(g, cmd="scope", options=PO.float_operation() | QUIET)
    got = {n.name: n.float_ops for n in _flat(out) if n.float_ops}
    assert got == {
        "conv": 2 * (2 * 8 * 8 * 4) * 3 * 3 * 3,  # per output: 3x3x3 multiply-adds
        "pool": 4 * (2 * 4 * 4 * 4),  # a 2x2 window per output
        "bias": 2 * 4 * 4 * 4,
        "sum": 2 * 4 * 4 * 4 - 2 * 4,  # additions: inputs minus outputs
    }


def test_registered_statistics_are_extensible():
    @flops.RegisterStatistics("Cumsum", "flops")
    def _cumsum(graph, node):
        shape = flops.tensor_shape_from_node_def_name(graph, node.name)
        return flops.OpStats("flops", shape.num_elements())

    g = tf.Graph()
    with g.as_default():
        tf.cumsum(tf.ones([5, 3]), name="cs")
    out = tf.profiler.profile(g, cmd="op", options=PO.float_operation() | QUIET)
    assert out.total_float_ops == 15
    total = flops.OpStats("flops", 2)
    total += flops.OpStats("flops", 3)
    assert total.value == 5


def test_trainable_parameters_by_scope():
    g, _, _ = mlp()
    with g.as_default():
        tf.Variable(0, trainable=False, name="counter")
    out = tf.profiler.profile(g)  # default: trainable_variables_parameter, by scope
    tree = {n.name: (n.parameters, n.total_parameters) for n in _flat(out)}
    assert tree == {
        "_TFProfRoot": (0, 672),
        "layer1": (0, 16 * 32 + 32),
        "layer1/b": (32, 32),
        "layer1/w": (512, 512),
        "layer2": (0, 128),
        "layer2/w": (128, 128),
    }


def _traced(batch=8):
    g, x, loss = mlp(batch=None)
    with g.as_default(), tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        md = tf.RunMetadata()
        sess.run(loss, {x: np.ones((batch, 16), np.float32)}, options=FULL_TRACE, run_metadata=md)
    return g, md


def test_unknown_shapes_are_completed_from_the_traced_step():
    g, md = _traced()
    without = tf.profiler.profile(g, cmd="scope", options=PO.float_operation() | QUIET)
    with_run = tf.profiler.profile(
        g, run_meta=md, cmd="scope", options=PO.float_operation() | QUIET
    )
    assert without.total_float_ops < with_run.total_float_ops == sum(MLP_FLOPS.values())
    assert g.get_tensor_by_name("x:0").shape.as_list() == [None, 16]  # the graph is untouched


def test_time_and_memory_by_scope_and_op():
    g, md = _traced()
    opts = PO(PO.time_and_memory(min_micros=0, min_bytes=0)).build() | QUIET
    out = tf.profiler.profile(g, run_meta=md, cmd="scope", options=opts)
    nodes = {n.name: n for n in _flat(out)}
    mm = nodes["layer1/MatMul"]
    assert mm.requested_bytes == 8 * 32 * 4 and mm.exec_micros > 0 and mm.run_count == 1
    assert mm.cpu_exec_micros == mm.exec_micros and mm.accelerator_exec_micros == 0
    assert mm.output_bytes == 8 * 32 * 4
    assert list(mm.devices) == ["/job:localhost/replica:0/task:0/device:cpu:0"]  # as TF: lower
    assert [d.size for d in mm.shapes[0].dim] == [8, 32]
    assert [d.size for d in mm.input_shapes[1].dim] == [16, 32]
    layer1 = nodes["layer1"]
    kids = [n for n in _flat(layer1) if n is not layer1]
    assert layer1.total_exec_micros == sum(n.exec_micros for n in kids)
    assert layer1.total_requested_bytes == sum(n.requested_bytes for n in kids) >= 3 * 1024
    by_op = tf.profiler.profile(g, run_meta=md, cmd="op", options=opts)
    first = by_op.children[0]
    assert by_op.total_exec_micros == out.total_exec_micros
    assert first.exec_micros == max(n.exec_micros for n in _flat(by_op) if n is not by_op)


def test_graph_view_has_inputs_as_children():
    g, md = _traced()
    opts = PO(PO.time_and_memory(min_micros=0, min_bytes=0)).build() | QUIET
    out = tf.profiler.profile(g, run_meta=md, cmd="graph", options=opts)
    nodes = {n.name: n for n in _flat(out)}
    assert [c.name for c in nodes["loss"].children] == ["Square"] or "Square" in [
        c.name for c in nodes["loss"].children
    ]
    # Every op once, under the root, and (as in TensorFlow) the nodes only the runtime ran.
    assert set(nodes) == {op.name for op in g.get_operations()} | {
        "_TFProfRoot",
        "_recv_x_0",
        "_send_loss_0",
    }


def test_options_filter_order_and_depth():
    g, md = _traced()
    base = PO(PO.time_and_memory(min_micros=0, min_bytes=0))
    # The root is at depth 1 (TensorFlow's count): depth 1 is the root alone.
    root_only = tf.profiler.profile(g, run_meta=md, options=base.with_max_depth(1).build() | QUIET)
    assert not root_only.children
    shallow = tf.profiler.profile(g, run_meta=md, options=base.with_max_depth(2).build() | QUIET)
    assert {len(n.name.split("/")) for n in _flat(shallow) if n is not shallow} == {1}
    only = base.with_max_depth(100).with_node_names(show_name_regexes=["layer2/.*"]).build()
    shown = tf.profiler.profile(g, run_meta=md, options=only | QUIET)
    # As TF prints it: layer2/w is shown, so its ops stay its children.
    assert {c.name for c in shown.children} == {"layer2/MatMul", "layer2/w"}
    (w,) = [c for c in shown.children if c.name == "layer2/w"]
    assert {n.name for n in _flat(w) if n is not w} == {
        "layer2/w/read",
        "layer2/w/Assign",
        "layer2/w/Initializer",
        "layer2/w/Initializer/ones",
    }
    hidden = PO(PO.float_operation()).with_node_names(hide_name_regexes=[".*MatMul"]).build()
    out = tf.profiler.profile(g, run_meta=md, options=hidden | QUIET)
    assert out.total_float_ops == 8 * 32 + 32 + 32
    by_name = PO(PO.float_operation()).order_by("name").build()
    names = [c.name for c in tf.profiler.profile(g, options=by_name | QUIET).children]
    assert names == sorted(names)
    with pytest.raises(ValueError, match="order_by"):
        PO().order_by("colour")
    with pytest.raises(ValueError, match="Unknown profile options"):
        tf.profiler.profile(g, options={"max_dpeth": 3})
    with pytest.raises(ValueError, match="cmd must be one of"):
        tf.profiler.profile(g, cmd="lines", options=PO.float_operation())


def test_text_report_to_stdout_and_file(tmp_path, capsys):
    g, md = _traced()
    tf.profiler.profile(g, run_meta=md, cmd="op", options=PO.float_operation())
    text = capsys.readouterr().out
    assert "node name | # float_ops" in text
    assert "MatMul" in text and "10.24k float_ops (100.00%, 96.97%)" in text
    path = tmp_path / "scope.txt"
    opts = PO(PO.trainable_variables_parameter()).with_file_output(str(path)).build()
    tf.profiler.profile(g, options=opts)
    report = path.read_text()
    assert "_TFProfRoot (--/672 params)" in report
    assert "    layer1/w (16x32, 512/512 params)" in report
    timeline_path = tmp_path / "trace.json"
    opts = PO(PO.time_and_memory()).with_timeline_output(str(timeline_path)).build()
    with pytest.raises(ValueError, match="with_step"):
        tf.profiler.profile(g, run_meta=md, cmd="graph", options=opts)
    opts["step"] = 0  # run_meta is step 0; TensorFlow names the file <outfile>_<step>
    tf.profiler.profile(g, run_meta=md, cmd="graph", options=opts)
    assert '"traceEvents"' in (tmp_path / "trace.json_0").read_text()
    with pytest.raises(NotImplementedError, match="op view has no timeline"):
        tf.profiler.profile(g, run_meta=md, cmd="op", options=opts)


def test_profiler_averages_steps():
    g, x, loss = mlp()
    profiler = tf.profiler.Profiler(g)
    with g.as_default(), tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for step in range(3):
            md = tf.RunMetadata()
            feed = {x: np.ones((8, 16), np.float32)}
            sess.run(loss, feed, options=FULL_TRACE, run_metadata=md)
            profiler.add_step(step, md)
    opts = PO(PO.time_and_memory(min_micros=0, min_bytes=0)).build() | QUIET
    mean = {n.name: n for n in _flat(profiler.profile_name_scope(opts))}
    per_step = [
        {n.name: n for n in _flat(profiler.profile_name_scope(opts | {"step": s}))}
        for s in range(3)
    ]
    runs = [s["layer1/MatMul"].exec_micros for s in per_step]
    assert mean["layer1/MatMul"].exec_micros == sum(runs) // 3
    assert mean["layer1/MatMul"].requested_bytes == 1024
    ops = profiler.profile_operations(PO.float_operation() | QUIET)
    assert ops.total_float_ops == sum(MLP_FLOPS.values())
    assert "ExpensiveOperationChecker" in profiler.advise().checkers


def test_tensorflow_module_paths_under_flowgraph_run(tmp_path):
    """A TF1 program's profiling imports, run unchanged by `flowgraph run`."""
    script = tmp_path / "prof.py"
    script.write_text(
        "import json\n"
        "import tensorflow.compat.v1 as tf\n"
        "from tensorflow.python.client import timeline\n"
        "from tensorflow.python.profiler import model_analyzer, option_builder, profiler\n"
        "from tensorflow.python.training.basic_session_run_hooks import ProfilerHook\n"
        "a = tf.matmul(tf.ones([4, 5]), tf.ones([5, 6]))\n"
        "md = tf.RunMetadata()\n"
        "with tf.Session() as s:\n"
        "    s.run(a, options=tf.RunOptions(trace_level=3), run_metadata=md)\n"
        "trace = timeline.Timeline(md.step_stats).generate_chrome_trace_format(True, True)\n"
        "print('EVENTS', len(json.loads(trace)['traceEvents']) > 0)\n"
        "opts = option_builder.ProfileOptionBuilder.float_operation()\n"
        "print('FLOPS', model_analyzer.profile(tf.get_default_graph(), cmd='op',\n"
        "      options=opts).total_float_ops)\n"
        "p = profiler.Profiler(tf.get_default_graph())\n"
        "p.add_step(0, md)\n"
        "print('ADVICE', sorted(p.advise(model_analyzer.ALL_ADVICE).checkers))\n"
        "print('HOOK', ProfilerHook is tf.train.ProfilerHook)\n"
    )
    got = run_flowgraph("run", str(script), cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    assert "EVENTS True" in got.stdout and "FLOPS 240" in got.stdout
    assert "HOOK True" in got.stdout
    checkers = "['AcceleratorUtilizationChecker', 'ExpensiveOperationChecker', 'OperationChecker']"
    assert f"ADVICE {checkers}" in got.stdout


def test_write_op_log(tmp_path):
    g = tf.Graph()
    with g.as_default():
        w = tf.get_variable("w", [3, 2], initializer=tf.ones_initializer())
        tf.matmul(tf.ones([4, 3]), w, name="mm")  # OP_LOG_LINE
    line = next(
        i
        for i, t in enumerate(Path(__file__).read_text().splitlines(), 1)
        if t.endswith("# OP_LOG_LINE")
    )
    extra = tf.profiler.OpLogProto()
    extra.log_entries.add(name="mm", types=["my_type"])
    tf.profiler.write_op_log(g, str(tmp_path), op_log=extra)
    log = tf.profiler.OpLogProto.FromString((tmp_path / "tfprof_log").read_bytes())
    entries = {e.name: e for e in log.log_entries}
    assert set(entries) == {op.name for op in g.get_operations()}  # add_trace: every op
    assert entries["mm"].float_ops == 2 * 3 * 4 * 2 and list(entries["mm"].types) == ["my_type"]
    assert list(entries["w"].types) == ["_trainable_variables"]
    last = entries["mm"].code_def.traces[-1]  # the innermost call: this test's line
    assert log.id_to_string[last.file_id] == __file__ and last.lineno == line
    assert log.id_to_string[last.function_id] == "test_write_op_log"
    assert log.id_to_string[last.line_id].startswith("tf.matmul(tf.ones")
    tf.profiler.write_op_log(g, str(tmp_path), add_trace=False)
    log = tf.profiler.OpLogProto.FromString((tmp_path / "tfprof_log").read_bytes())
    assert {e.name for e in log.log_entries} == {"mm", "w"} and not log.id_to_string
