"""tf.import_graph_def and Graph.as_graph_def: round trips, names, input_map, return_elements,
attr defaults, devices and colocation, control inputs, while-loop back edges, atomic failure."""

from __future__ import annotations

import random

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import errors
from flowgraph.core.protos import AttrValue, GraphDef, OpList
from flowgraph.core.tensor_util import make_tensor_proto


def _small_graph():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 3], name="x")
        w = tf.constant(np.arange(6, dtype=np.float32).reshape(3, 2), name="w")
        y = tf.matmul(x, w, name="y")
        one = tf.constant(1.0, name="one")
        with tf.control_dependencies([w.op]):
            z = tf.add(y, one, name="z")
    return g, x, z


def _run(graph, fetch, feeds):
    with tf.Session(graph=graph) as sess:
        return sess.run(fetch, feeds)


X = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
Z = X @ np.arange(6, dtype=np.float32).reshape(3, 2) + 1


def test_round_trip_gives_same_nodedefs_and_results():
    g, _, _ = _small_graph()
    gd = g.as_graph_def()
    g2 = tf.Graph()
    with g2.as_default():
        assert tf.import_graph_def(gd, name="") is None
    assert list(g2.as_graph_def().node) == list(gd.node)
    np.testing.assert_allclose(_run(g2, "z:0", {"x:0": X}), Z)
    z2 = g2.get_tensor_by_name("z:0")
    assert z2.shape.as_list() == [None, 2] and z2.dtype == tf.float32
    assert [op.name for op in z2.op.control_inputs] == ["w"]


def test_serialized_bytes_parse_back_and_import():
    g, _, _ = _small_graph()
    data = g.as_graph_def().SerializeToString()
    gd = GraphDef()
    gd.ParseFromString(data)
    assert gd == g.as_graph_def()
    g2 = tf.Graph()
    with g2.as_default():
        (z,) = tf.import_graph_def(data, return_elements=["z:0"])
    np.testing.assert_allclose(_run(g2, z, {"import/x:0": X}), Z)


def test_default_prefix_is_import_and_made_unique():
    g, _, _ = _small_graph()
    gd = g.as_graph_def()
    with tf.Graph().as_default() as g2:
        tf.import_graph_def(gd)
        tf.import_graph_def(gd)
        tf.import_graph_def(gd, name="model")
        with tf.name_scope("outer"):
            tf.import_graph_def(gd, name="m")
        names = {op.name for op in g2.get_operations()}
    assert {"import/z", "import_1/z", "model/z", "outer/m/z"} <= names
    assert g2.get_operation_by_name("import_1/z").inputs[0].name == "import_1/y:0"
    with g2.as_default():
        assert tf.constant(1, name="import").op.name == "import_2"


def test_empty_name_keeps_names_and_uniquifies_clashes():
    g, _, _ = _small_graph()
    with tf.Graph().as_default() as g2:
        tf.constant(5.0, name="w")
        tf.import_graph_def(g.as_graph_def(), name="")
        z = g2.get_operation_by_name("z")
        assert z.inputs[0].name == "y:0"
        assert [c.name for c in z.control_inputs] == ["w_1"]  # the imported w was renamed
        assert g2.get_operation_by_name("y").inputs[1].name == "w_1:0"  # references follow
        assert g2.get_operation_by_name("w").outputs[0].shape.ndims == 0
        assert tf.add(1, 2).op.name == "Add" and tf.constant(0.0, name="z").op.name == "z_1"
    np.testing.assert_allclose(_run(g2, "z:0", {"x:0": X}), Z)


def test_input_map_replaces_tensors_and_control_inputs():
    g, _, _ = _small_graph()
    gd = g.as_graph_def()
    with tf.Graph().as_default() as g2:
        feed = tf.constant(X, name="feed")
        gate = tf.no_op(name="gate")
        (z, y) = tf.import_graph_def(
            gd, input_map={"x": feed, "^w": gate}, return_elements=["z:0", "y"]
        )
        assert y.inputs[0] is feed
        assert gate in z.op.control_inputs
        np.testing.assert_allclose(tf.Session().run(z), Z)
        # The mapped placeholder is still imported (TF keeps mapped nodes).
        assert g2.get_operation_by_name("import/x").type == "Placeholder"


def test_input_map_converts_python_values_and_checks_keys():
    g, _, _ = _small_graph()
    gd = g.as_graph_def()
    with tf.Graph().as_default() as g2:
        (z,) = tf.import_graph_def(
            gd, input_map={"x:0": X.tolist()}, return_elements=["z:0"], name="m"
        )
        assert g2.get_operation_by_name("m/_inputs/Const").type == "Const"
        np.testing.assert_allclose(tf.Session().run(z), Z)
        with pytest.raises(ValueError, match=r"not found in graph_def: \[nope:0, q:1\]"):
            tf.import_graph_def(gd, input_map={"nope": X, "q:1": X})
        with pytest.raises(ValueError, match="non-empty `name`"):
            tf.import_graph_def(gd, input_map={"x:0": X}, name="")
        with pytest.raises(TypeError):
            tf.import_graph_def(gd, input_map=[("x:0", X)])


def test_input_map_dtype_mismatch_is_a_value_error():
    g, _, _ = _small_graph()
    with tf.Graph().as_default():
        wrong = tf.constant([[1, 2, 3]], name="wrong")  # int32
        with pytest.raises(ValueError, match="int32 from wrong:0 incompatible with expected float"):
            tf.import_graph_def(g.as_graph_def(), input_map={"x:0": wrong})


def test_return_elements_errors():
    g, _, _ = _small_graph()
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match="'missing:0' not found"):
            tf.import_graph_def(g.as_graph_def(), return_elements=["missing:0"])
        with pytest.raises(ValueError, match="'z:3' not found"):
            tf.import_graph_def(g.as_graph_def(), return_elements=["z:3"])
        with pytest.raises(TypeError):
            tf.import_graph_def(g.as_graph_def(), return_elements="z:0")


def _node(name, op, inputs=(), **attrs):
    nd = GraphDef().node.add()
    nd.name, nd.op = name, op
    nd.input.extend(inputs)
    for key, value in attrs.items():
        nd.attr[key].CopyFrom(value)
    return nd


def _graph_def(*nodes):
    gd = GraphDef()
    for nd in nodes:
        gd.node.add().CopyFrom(nd)
    return gd


def _const(name, value):
    return _node(
        name,
        "Const",
        value=AttrValue(tensor=make_tensor_proto(value)),
        dtype=AttrValue(type=tf.as_dtype(np.asarray(value).dtype).as_datatype_enum),
    )


def test_unknown_op_type_is_not_found_and_graph_is_unchanged():
    gd = _graph_def(_const("a", np.float32(1)), _node("b", "NoSuchOp", ["a"]))
    with tf.Graph().as_default() as g:
        tf.constant(0)
        with pytest.raises(errors.NotFoundError, match="NoSuchOp"):
            tf.import_graph_def(gd)
        assert [op.name for op in g.get_operations()] == ["Const"]


def test_missing_attrs_take_opdef_defaults():
    t = AttrValue(type=tf.float32.as_datatype_enum)
    gd = _graph_def(_const("a", np.ones((2, 2), np.float32)), _node("m", "MatMul", ["a", "a"], T=t))
    with tf.Graph().as_default():
        (m,) = tf.import_graph_def(gd, return_elements=["m"])
        assert m.get_attr("transpose_a") is False and m.get_attr("transpose_b") is False
        assert m.node_def.attr["transpose_a"].b is False and "transpose_a" in m.node_def.attr
        assert m.outputs[0].shape.as_list() == [2, 2]
        np.testing.assert_allclose(tf.Session().run(m.outputs[0]), np.full((2, 2), 2.0))


def test_attr_errors_and_producer_op_list():
    t = AttrValue(type=tf.float32.as_datatype_enum)
    gd = _graph_def(
        _const("a", np.ones((2, 2), np.float32)),
        _node("m", "MatMul", ["a", "a"], T=t, future_attr=AttrValue(i=0)),
    )
    with tf.Graph().as_default() as g:
        with pytest.raises(ValueError, match="attr 'future_attr' not in Op<name=MatMul>"):
            tf.import_graph_def(gd)
        assert g.get_operations() == []
        ops = OpList()
        op = ops.op.add(name="MatMul")
        op.attr.add(name="future_attr", type="int").default_value.i = 0
        (m,) = tf.import_graph_def(gd, producer_op_list=ops, return_elements=["m"])
        assert "future_attr" not in m.node_def.attr
    no_t = _graph_def(_const("a", np.ones((2, 2), np.float32)), _node("m", "MatMul", ["a", "a"]))
    with tf.Graph().as_default(), pytest.raises(ValueError, match="missing attr 'T'"):
        tf.import_graph_def(no_t)
    bad_t = _graph_def(
        _const("a", np.ones(2, np.bool_)),
        _node("m", "MatMul", ["a", "a"], T=AttrValue(type=tf.bool.as_datatype_enum)),
    )
    with tf.Graph().as_default(), pytest.raises(ValueError, match="'m'"):
        tf.import_graph_def(bad_t)


def test_bad_references_are_value_errors():
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match=r"Unknown input node '\^ghost'"):
            tf.import_graph_def(_graph_def(_node("n", "NoOp", ["^ghost"])))
        a = _const("a", np.float32(1))
        with pytest.raises(ValueError, match="not unique"):
            tf.import_graph_def(_graph_def(a, a))
        t = AttrValue(type=tf.float32.as_datatype_enum)
        with pytest.raises(ValueError, match="output 3"):
            tf.import_graph_def(_graph_def(a, _node("i", "Identity", ["a:3"], T=t)))
        cycle = _graph_def(_node("p", "Identity", ["q"], T=t), _node("q", "Identity", ["p"], T=t))
        with pytest.raises(ValueError, match="cycle"):
            tf.import_graph_def(cycle)
        assert tf.get_default_graph().get_operations() == []


def test_nodes_in_any_order_import():
    g, _, _ = _small_graph()
    gd = g.as_graph_def()
    nodes = list(gd.node)
    random.Random(0).shuffle(nodes)
    shuffled = GraphDef(node=nodes)
    with tf.Graph().as_default() as g2:
        tf.import_graph_def(shuffled, name="")
    np.testing.assert_allclose(_run(g2, "z:0", {"x:0": X}), Z)


def test_devices_kept_merged_with_scope_and_colocation_reprefixed():
    g = tf.Graph()
    with g.as_default():
        with tf.device("/job:worker/task:1"):
            a = tf.constant(1.0, name="a")
        with tf.colocate_with(a):
            b = tf.identity(a, name="b")
        c = tf.identity(b, name="c")
    gd = g.as_graph_def()
    assert gd.node[1].attr["_class"].list.s == [b"loc:@a"]
    with tf.Graph().as_default() as g2, tf.device("/device:CPU:0"):
        tf.import_graph_def(gd, name="p")
    a2, b2, c2 = (g2.get_operation_by_name(f"p/{n}") for n in "abc")
    assert a2.device == "/job:worker/task:1/device:CPU:0"
    assert c2.device == "/device:CPU:0"
    assert b2.get_attr("_class") == ["loc:@p/a"]
    assert b2.device == a2.device
    assert c.op.device == ""


def test_while_loop_back_edges_are_patched():
    """A while loop written with NextIteration listed before its Merge (any order imports)."""
    i32 = AttrValue(type=tf.int32.as_datatype_enum)
    frame = AttrValue(s=b"loop")
    gd = _graph_def(
        _node("next", "NextIteration", ["add"], T=i32),
        _const("zero", np.int32(0)),
        _node("enter", "Enter", ["zero"], T=i32, frame_name=frame),
        _node("merge", "Merge", ["enter", "next"], T=i32, N=AttrValue(i=2)),
        _const("limit", np.int32(5)),
        _node(
            "limit_enter",
            "Enter",
            ["limit"],
            T=i32,
            frame_name=frame,
            is_constant=AttrValue(b=True),
        ),
        _node("less", "Less", ["merge", "limit_enter"], T=i32),
        _node("cond", "LoopCond", ["less"]),
        _node("switch", "Switch", ["merge", "cond"], T=i32),
        _node("body", "Identity", ["switch:1"], T=i32),
        _const("one", np.int32(1)),
        _node(
            "one_enter", "Enter", ["one"], T=i32, frame_name=frame, is_constant=AttrValue(b=True)
        ),
        _node("add", "AddV2", ["body", "one_enter"], T=i32),
        _node("exit", "Exit", ["switch"], T=i32),
    )
    with tf.Graph().as_default() as g:
        (out, merge) = tf.import_graph_def(gd, name="", return_elements=["exit:0", "merge"])
        assert [t.name for t in merge.inputs] == ["enter:0", "next:0"]
        assert merge.outputs[0].shape.ndims is None  # the back edge's shape was unknown
        assert merge in g.get_operation_by_name("next").outputs[0].consumers()
        exported = {n.name: n for n in g.as_graph_def().node}
        assert list(exported["merge"].input) == ["enter", "next"]
        assert tf.Session().run(out) == 5


def test_add_shapes_records_output_shapes_and_reimports():
    g, _, _ = _small_graph()
    gd = g.as_graph_def(add_shapes=True)
    shapes = {n.name: n.attr["_output_shapes"] for n in gd.node}
    assert [d.size for d in shapes["y"].list.shape[0].dim] == [-1, 2]
    with tf.Graph().as_default() as g2:
        tf.import_graph_def(gd, name="")
    assert g2.get_operation_by_name("y").get_attr("_output_shapes")[0].as_list() == [None, 2]


def test_from_version_exports_only_newer_ops():
    g, _, _ = _small_graph()
    n = g.version
    with g.as_default():
        tf.identity(g.get_tensor_by_name("z:0"), name="later")
    assert [nd.name for nd in g.as_graph_def(from_version=n).node] == ["later"]


def test_graph_util_alias_and_finalized_graph():
    assert tf.graph_util.import_graph_def is tf.import_graph_def
    g, _, _ = _small_graph()
    g2 = tf.Graph()
    g2.finalize()
    with g2.as_default(), pytest.raises(RuntimeError, match="finalized"):
        tf.import_graph_def(g.as_graph_def())
    with pytest.raises(TypeError):
        tf.import_graph_def("not a graph def")


def test_our_while_loop_round_trips():
    g = tf.Graph()
    with g.as_default():
        n = tf.placeholder(tf.int32, [], name="n")
        _i, acc = tf.while_loop(
            lambda i, a: i < n, lambda i, a: (i + 1, a * 2), [tf.constant(0), tf.constant(1)]
        )
        tf.identity(acc, name="result")
    gd = g.as_graph_def()
    with tf.Graph().as_default() as g2:
        tf.import_graph_def(gd, name="")
        assert list(g2.as_graph_def().node) == list(gd.node)
        with tf.Session() as sess:
            assert sess.run("result:0", {"n:0": 5}) == 32
            assert sess.run("result:0", {"n:0": 0}) == 1
