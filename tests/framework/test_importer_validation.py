"""import_graph_def refuses malformed GraphDefs as TensorFlow does (issue 7, defect 9): the error
is an InvalidArgumentError (also a ValueError, the class TF's Python import raises) naming the
node, and nothing of the failed import stays in the graph."""

from __future__ import annotations

import pytest

import flowgraph as tf
from flowgraph.core import errors
from flowgraph.core.protos import GraphDef
from flowgraph.core.protos.types_pb2 import DataType


def _graph_def() -> GraphDef:
    g = tf.Graph()
    with g.as_default():
        c = tf.constant([1.0, 2.0], name="c")
        tf.add(c, 1.0, name="d")
    return g.as_graph_def()


def _node(gd: GraphDef, name: str):
    return next(n for n in gd.node if n.name == name)


def _refused(gd: GraphDef, match: str):
    g = tf.Graph()
    with g.as_default(), pytest.raises(errors.InvalidArgumentError, match=match):
        tf.import_graph_def(gd, name="")
    assert g.get_operations() == []


def test_a_valid_graph_def_imports_and_runs():
    g = tf.Graph()
    with g.as_default():
        tf.import_graph_def(_graph_def(), name="")
        with tf.Session() as sess:
            assert sess.run("d:0").tolist() == [2.0, 3.0]


def test_const_dtype_attr_must_match_its_value():
    gd = _graph_def()
    _node(gd, "c").attr["dtype"].type = DataType.DT_DOUBLE
    _refused(gd, r"Type mismatch between value \(float32\) and dtype \(float64\) of Const node 'c'")
    gd = _graph_def()
    del gd.node[-1]  # only the Consts: nothing downstream to notice the mismatch
    _node(gd, "c").attr["value"].tensor.dtype = DataType.DT_DOUBLE
    _node(gd, "c").attr["value"].tensor.tensor_content = b"\0" * 16
    _refused(gd, r"value \(float64\) and dtype \(float32\) of Const node 'c'")


@pytest.mark.parametrize(
    "node, attr, setter, message",
    [
        ("d", "T", lambda av: setattr(av, "i", 1), "type 'int' when 'type' expected"),
        ("d", "T", lambda av: setattr(av, "s", b"float"), "type 'string' when 'type' expected"),
        ("c", "value", lambda av: setattr(av, "i", 3), "type 'int' when 'tensor' expected"),
        ("c", "dtype", lambda av: av.list.type.append(1), "'list\\(type\\)' when 'type' expected"),
    ],
)
def test_attr_values_must_be_of_the_declared_kind(node, attr, setter, message):
    gd = _graph_def()
    av = _node(gd, node).attr[attr]
    av.Clear()
    setter(av)
    _refused(gd, f"{message}\n\t for attr '{attr}'\n\t; NodeDef: {{{{node {node}}}}}")


def test_control_inputs_come_after_data_inputs():
    gd = _graph_def()
    d = _node(gd, "d")
    inputs = list(d.input)
    del d.input[:]
    d.input.extend(["^c", *inputs])
    _refused(gd, "Node 'd': Control dependencies must come after regular dependencies")
    d.input[:] = [*inputs, "^c"]
    g = tf.Graph()
    with g.as_default():
        tf.import_graph_def(gd, name="")
        assert [op.name for op in g.get_operation_by_name("d").control_inputs] == ["c"]


def test_empty_lists_fit_every_list_attr():
    g = tf.Graph()
    with g.as_default():
        tf.nn.avg_pool(tf.zeros([1, 4, 4, 1]), [1, 2, 2, 1], [1, 2, 2, 1], "VALID", name="p")
    gd = g.as_graph_def()
    with tf.Graph().as_default():
        tf.import_graph_def(gd, name="")  # lists of ints, strings, types and shapes all check out
