"""The Graph (whitepaper §2): default graphs, naming, scopes, lookups, collections, GraphDef."""

from __future__ import annotations

import pytest

import flowgraph as tf


def test_default_graph_stack_and_reset():
    g0 = tf.get_default_graph()
    assert tf.get_default_graph() is g0
    g1 = tf.Graph()
    with g1.as_default() as entered:
        assert entered is g1 and tf.get_default_graph() is g1
        assert tf.constant(1.0).graph is g1
        with pytest.raises(AssertionError, match="nested graphs"):
            tf.reset_default_graph()
    assert tf.get_default_graph() is g0
    tf.reset_default_graph()
    assert tf.get_default_graph() is not g0


def test_finalize_forbids_new_ops():
    g = tf.Graph()
    with g.as_default():
        tf.constant(1)
    g.finalize()
    assert g.finalized
    with g.as_default(), pytest.raises(RuntimeError, match="finalized"):
        tf.constant(2)
    assert len(g.get_operations()) == 1


def test_auto_names_follow_tf():
    with tf.Graph().as_default():
        a = tf.constant(1.0)
        assert a.name == "Const:0" and tf.constant(2.0).name == "Const_1:0"
        assert tf.add(a, a).name == "Add:0" and tf.add(a, a).name == "Add_1:0"
        assert (
            tf.add(a, a, name="sum").name == "sum:0" and tf.add(a, a, name="sum").name == "sum_1:0"
        )
        assert tf.constant(0, name="add").op.name == "add_2"  # names are unique ignoring case
        with tf.name_scope("scope") as scope:
            assert scope == "scope/"
            assert tf.add(a, a).op.name == "scope/Add"
            with tf.name_scope("inner") as inner:
                assert inner == "scope/inner/"
        with tf.name_scope("scope") as scope:
            assert scope == "scope_1/"  # a second scope of the same name is made unique
        with tf.name_scope("scope/"):  # a trailing "/" re-enters the scope exactly
            assert tf.add(a, a).op.name == "scope/Add_1"
        with tf.name_scope("outer"):
            with tf.name_scope(None):
                assert tf.add(a, a).op.name == "Add_3"  # Add, Add_1 and add_2 exist
            with tf.name_scope(""):
                assert tf.add(a, a).op.name == "Add_4"
        with tf.name_scope(None, default_name="default") as scope:
            assert scope == "default/"
        with (
            pytest.raises(ValueError, match="At least one of name"),
            tf.name_scope(None, None, values=[a]),
        ):
            pass
        with pytest.raises(ValueError, match="not a valid scope name"), tf.name_scope("bad name!"):
            pass


def test_name_scope_follows_the_graph_of_values():
    g = tf.Graph()
    with g.as_default():
        a = tf.constant(1.0)
    with tf.name_scope("s", values=[a]):
        assert tf.get_default_graph() is not g
        assert g.get_name_scope() == "s"


def test_lookups():
    g = tf.Graph()
    with g.as_default():
        a = tf.constant(1.0, name="a")
        b = tf.identity(a, name="b")
    assert g.get_operation_by_name("b") is b.op
    assert g.get_tensor_by_name("a:0") is a
    assert g.as_graph_element("b") is b.op and g.as_graph_element(b) is b
    assert [op.name for op in g.get_operations()] == ["a", "b"]
    with pytest.raises(KeyError, match="'c'"):
        g.get_operation_by_name("c")
    with pytest.raises(ValueError, match="to refer to a Tensor"):
        g.get_operation_by_name("a:0")
    with pytest.raises(ValueError, match="refers to an Operation"):
        g.get_tensor_by_name("a")
    with pytest.raises(KeyError, match="only has 1 outputs"):
        g.get_tensor_by_name("a:1")
    with pytest.raises(TypeError):
        g.get_tensor_by_name(3)
    with pytest.raises(ValueError, match="not an element of this graph"):
        tf.Graph().as_graph_element(a)


def test_collections():
    g = tf.Graph()
    with g.as_default():
        a = tf.constant(1.0, name="layer/a")
        b = tf.constant(2.0, name="other/b")
        tf.add_to_collection("mine", a)
        tf.add_to_collections(["mine", "yours", "mine"], b)  # a name repeated adds once
        assert tf.get_collection("mine") == [a, b]
        assert tf.get_collection("mine", scope="layer") == [a]
        assert tf.get_collection("absent") == []
        ref = tf.get_collection_ref("yours")
        ref.append(a)
        assert g.get_collection("yours") == [b, a]
        copy = tf.get_collection("yours")
        copy.clear()
        assert g.get_collection("yours") == [b, a]
    assert set(g.get_all_collection_keys()) == {"mine", "yours"}
    g.clear_collection("mine")
    assert g.get_collection("mine") == []
    assert tf.GraphKeys.GLOBAL_VARIABLES == "variables"
    assert tf.GraphKeys.TRAINABLE_VARIABLES == "trainable_variables"


def test_control_dependencies_nest_clear_and_skip_dominated_inputs():
    with tf.Graph().as_default():
        a = tf.constant(1.0, name="a")
        b = tf.constant(2.0, name="b")
        with tf.control_dependencies([a]), tf.control_dependencies([b.op]):
            c = tf.constant(3.0, name="c")
            assert [op.name for op in c.op.control_inputs] == ["a", "b"]  # outer first, like TF
            d = tf.identity(c)  # c was created inside both blocks: no extra control inputs
            assert d.op.control_inputs == []
            e = tf.identity(a)  # a data input is not repeated as a control input
            assert [op.name for op in e.op.control_inputs] == ["b"]
            with tf.control_dependencies(None):
                f = tf.constant(4.0)
                assert f.op.control_inputs == []
                with tf.control_dependencies([c]):
                    assert [op.name for op in tf.constant(5.0).op.control_inputs] == ["c"]
            # f was made outside the blocks' view (TF swaps in an empty stack): not dominated
            assert [op.name for op in tf.identity(f).op.control_inputs] == ["a", "b"]
        assert tf.constant(6.0).op.control_inputs == []
        with pytest.raises(TypeError), tf.control_dependencies([3]):
            pass


def test_device_scopes_merge_and_functions():
    with tf.Graph().as_default():
        with tf.device("/job:worker/task:1"):
            assert tf.constant(1).op.device == "/job:worker/task:1"
            with tf.device("/device:GPU:0"):
                assert tf.constant(1).op.device == "/job:worker/task:1/device:GPU:0"
            with tf.device("/job:ps"):
                assert tf.constant(1).op.device == "/job:ps/task:1"
            with tf.device(None):
                assert tf.constant(1).op.device == ""
            with tf.device("/cpu:0"):
                assert tf.constant(1).op.device == "/job:worker/task:1/device:CPU:0"
        with tf.device(lambda op: "/device:CPU:0" if op.type == "Const" else "/device:GPU:1"):
            c = tf.constant(1.0)
            assert c.op.device == "/device:CPU:0"
            assert tf.identity(c).op.device == "/device:GPU:1"
        assert tf.constant(2).op.device == ""
        assert tf.constant(2).op.node_def.device == ""


def test_colocate_with():
    with tf.Graph().as_default():
        with tf.device("/job:ps/task:0"):
            a = tf.constant(1.0, name="a")
        with tf.device("/job:worker"):
            with tf.colocate_with(a):
                b = tf.identity(a, name="b")
            with tf.colocate_with(a.op), tf.colocate_with(b, ignore_existing=True):
                c = tf.identity(b, name="c")
        assert b.op.get_attr("_class") == ["loc:@a"]
        assert list(b.op.node_def.attr["_class"].list.s) == [b"loc:@a"]
        assert b.op.device == "/job:ps/task:0"
        assert c.op.colocation_groups() == [b"loc:@a"]  # b is in a's group
        with pytest.raises(ValueError, match="ignore_existing"), tf.colocate_with(None):
            pass


def test_as_graph_def_lists_nodes_in_creation_order():
    g = tf.Graph()
    with g.as_default():
        a = tf.constant(1.0, name="a")
        with tf.control_dependencies([a]):
            tf.identity(tf.constant(2.0, name="b"), name="c")
    gd = g.as_graph_def()
    assert [n.name for n in gd.node] == ["a", "b", "c"]
    assert list(gd.node[1].input) == ["^a"] and list(gd.node[2].input) == ["b"]
    assert gd.node[2].attr["T"].type == tf.float32.as_datatype_enum
    assert gd.versions.producer == g.graph_def_versions.producer
    assert g.version == 3
