"""tf.profiler's text, byte for byte as TensorFlow prints it. The expected reports were recorded
with TensorFlow 2.x's tf.compat.v1.profiler (the tfprof of TF 1.15) on the same graphs, built
and not run, so parameters and float operations are all they show:
`tf.profiler.profile(g, cmd=..., options=ProfileOptionBuilder(...).with_file_output(path))`, and
for STDOUT what `profile` printed with the default stdout output."""

from __future__ import annotations

import pytest
from profiler_models import mlp

import flowgraph as tf

PO = tf.profiler.ProfileOptionBuilder

SCOPE_DOC = (
    "scope: The nodes in the model graph are organized by their names, which is hierarchical "
    "like filesystem.\n"
)
OP_DOC = (
    "op: The nodes are operation kernel type, such as MatMul, Conv2D. Graph nodes belonging to "
    "the same type are aggregated together.\n"
)
PARAMS_DOC = "param: Number of parameters (in the Variable).\n"
FLOPS_DOC = (
    "flops: Number of float operations. Note: Please read the implementation for the math "
    "behind it.\n"
)


def _doc(view, column):
    return "\nDoc:\n" + view + column + "\nProfile:\n"


CASES = {
    "params_scope": (
        "scope",
        PO.trainable_variables_parameter(),
        _doc(SCOPE_DOC, PARAMS_DOC) + "node name | # parameters\n"
        "_TFProfRoot (--/672 params)\n"
        "  layer1 (--/544 params)\n"
        "    layer1/b (32, 32/32 params)\n"
        "    layer1/w (16x32, 512/512 params)\n"
        "  layer2 (--/128 params)\n"
        "    layer2/w (32x4, 128/128 params)\n",
    ),
    # max_depth counts the root as depth 1; a scope is no trainable variable, so none shows.
    "params_depth_1": (
        "scope",
        PO(PO.trainable_variables_parameter()).with_max_depth(1).build(),
        _doc(SCOPE_DOC, PARAMS_DOC) + "node name | # parameters\n_TFProfRoot (--/0 params)\n",
    ),
    "flops_scope": (
        "scope",
        PO.float_operation(),
        _doc(SCOPE_DOC, FLOPS_DOC) + "node name | # float_ops\n"
        "_TFProfRoot (--/10.56k flops)\n"
        "  layer1/MatMul (8.19k/8.19k flops)\n"
        "  layer2/MatMul (2.05k/2.05k flops)\n"
        "  layer1/add (256/256 flops)\n"
        "  Square (32/32 flops)\n"
        "  loss (32/32 flops)\n",
    ),
    # TensorFlow documents the graph view with the scope view's text.
    "flops_graph": (
        "graph",
        PO.float_operation(),
        _doc(SCOPE_DOC, FLOPS_DOC) + "node name | # float_ops\n"
        "_TFProfRoot (--/10.56k flops)\n"
        "  loss (32/10.56k flops)\n"
        "    Square (32/10.53k flops)\n"
        "      layer2/MatMul (2.05k/10.50k flops)\n"
        "        layer1/add (256/8.45k flops)\n"
        "          layer1/MatMul (8.19k/8.19k flops)\n",
    ),
    "flops_op": (
        "op",
        PO.float_operation(),
        _doc(OP_DOC, FLOPS_DOC) + "node name | # float_ops\n"
        "MatMul                   10.24k float_ops (100.00%, 96.97%)\n"
        "AddV2                      256 float_ops (3.03%, 2.42%)\n"
        "Mean                        32 float_ops (0.61%, 0.30%)\n"
        "Square                      32 float_ops (0.30%, 0.30%)\n",
    ),
    "params_op": (
        "op",
        PO.trainable_variables_parameter(),
        _doc(OP_DOC, PARAMS_DOC) + "node name | # parameters\n"
        "VariableV2                672 params (100.00%, 100.00%)\n",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_file_report_is_tensorflows_text(case, tmp_path):
    cmd, options, expected = CASES[case]
    path = tmp_path / "report.txt"
    options = PO(options).with_file_output(str(path)).build()
    tf.profiler.profile(mlp()[0], cmd=cmd, options=options)
    assert path.read_text() == expected


def _options(lines):
    return "".join(f"-{k:<27}{v}\n" for k, v in lines)


def _option_lines(min_float_ops, order_by, account, select):
    return (
        [("max_depth", 10000)]
        + [(k, 0) for k in ("min_bytes", "min_peak_bytes", "min_residual_bytes")]
        + [(k, 0) for k in ("min_output_bytes", "min_micros", "min_accelerator_micros")]
        + [("min_cpu_micros", 0), ("min_params", 0), ("min_float_ops", min_float_ops)]
        + [("min_occurrence", 0), ("step", -1), ("order_by", order_by)]
        + [("account_type_regexes", account), ("start_name_regexes", ".*")]
        + [("trim_name_regexes", ""), ("show_name_regexes", ".*"), ("hide_name_regexes", "")]
        + [("account_displayed_op_only", "true"), ("select", select), ("output", "stdout:")]
    )


BANNERS = (
    "\n=========================Options=============================\n",
    "\n==================Model Analysis Report======================\n",
    "\n======================End of Report==========================\n",
)
# A scalar variable counts 1 parameter, shown with shape "1"; the glorot initializer's
# arithmetic is counted like any op.
STDOUT = (
    BANNERS[0]
    + _options(_option_lines(0, "name", "_trainable_variables", "params"))
    + BANNERS[1]
    + _doc(SCOPE_DOC, PARAMS_DOC)
    + "node name | # parameters\n"
    "_TFProfRoot (--/13 params)\n"
    "  a (--/13 params)\n"
    "    a/s (1, 1/1 params)\n"
    "    a/v (3x4, 12/12 params)\n"
    + BANNERS[2]
    + BANNERS[0]
    + _options(_option_lines(1, "float_ops", ".*", "float_ops"))
    + BANNERS[1]
    + _doc(OP_DOC, FLOPS_DOC)
    + "node name | # float_ops\n"
    "MatMul                   48 float_ops (100.00%, 63.16%)\n"
    "AddV2                     13 float_ops (36.84%, 17.11%)\n"
    "Mul                       13 float_ops (19.74%, 17.11%)\n"
    "Sub                          2 float_ops (2.63%, 2.63%)\n" + BANNERS[2]
)


def test_stdout_report_is_tensorflows_text(capsys):
    g = tf.Graph()
    with g.as_default():
        with tf.variable_scope("a"):
            v = tf.get_variable("v", [3, 4])
            tf.get_variable("s", [])
        tf.matmul(tf.ones([2, 3]), v, name="mm")
    tf.profiler.profile(g, cmd="scope", options=PO.trainable_variables_parameter())
    tf.profiler.profile(g, cmd="op", options=PO.float_operation())
    assert capsys.readouterr().out == STDOUT
