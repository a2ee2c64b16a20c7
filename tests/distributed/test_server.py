"""tf.train.Server in this process: TF's rules for job and task, the address it binds and
reports, its lifecycle, the `flowgraph server` command line, and tf.Session("grpc://...")
against it (Extend with replaced nodes, partial runs, reset) by RPC, although the server is in
this process (test_inprocess_master.py runs the same without the RPC)."""

import argparse

import numpy as np
import pytest

import flowgraph as tf
from flowgraph import cli
from flowgraph.train.server import make_server_def

RPC = tf.ConfigProto()
RPC.rpc_options.use_rpc_for_inprocess_master = True  # exercise the wire, not the shortcut


@pytest.fixture(scope="module")
def server():
    s = tf.train.Server.create_local_server()
    yield s
    s.stop()


def test_local_server_reports_the_port_it_bound(server):
    assert server.target.startswith("grpc://localhost:")
    port = int(server.target.rpartition(":")[2])
    assert port > 0
    assert server.server_def.cluster.job[0].tasks[0] == f"localhost:{port}"
    assert server.server_def.job_name == "localhost" and server.server_def.protocol == "grpc"
    server.start()  # a second start does nothing


def test_server_def_rules():
    cluster = {"ps": ["127.0.0.1:1"], "worker": ["127.0.0.1:2", "127.0.0.1:3"]}
    with pytest.raises(ValueError, match="explicit `job_name`"):
        make_server_def(cluster, None, None, None, None)
    with pytest.raises(ValueError, match="explicit `task_index`"):
        make_server_def(cluster, "worker", None, None, None)
    sd = make_server_def(cluster, "ps", None, None, tf.ConfigProto(allow_soft_placement=True))
    assert (sd.job_name, sd.task_index, sd.protocol) == ("ps", 0, "grpc")
    assert sd.default_session_config.allow_soft_placement
    again = make_server_def(sd, "worker", 1, None, None)
    assert (again.job_name, again.task_index) == ("worker", 1)
    assert tf.train.ClusterSpec(again.cluster).as_dict() == cluster


def test_bad_servers_raise_clear_errors():
    held = tf.train.Server({"w": ["127.0.0.1:0"]})
    address = held.server_def.cluster.job[0].tasks[0]
    try:
        with pytest.raises(tf.errors.UnimplementedError, match="protocol 'grpc\\+verbs'"):
            tf.train.Server({"w": [address]}, protocol="grpc+verbs")
        server_def = tf.train.ServerDef(job_name="x")
        server_def.cluster.CopyFrom(tf.train.ClusterSpec({"w": [address]}).as_cluster_def())
        with pytest.raises(tf.errors.InvalidArgumentError, match="Job 'x' was not defined"):
            tf.train.Server(server_def)
        with pytest.raises(tf.errors.UnknownError, match="Could not start gRPC server"):
            tf.train.Server({"w": [address]}, start=False)  # the port is taken (no reuseport)
    finally:
        held.stop()
    s = tf.train.Server({"w": ["127.0.0.1:0"]}, start=False)
    s.stop()
    with pytest.raises(tf.errors.FailedPreconditionError, match="stopped"):
        s.start()


def test_cli_cluster_argument():
    assert cli.parse_cluster("ps=127.0.0.1:2222,worker=127.0.0.1:2223,127.0.0.1:2224") == {
        "ps": ["127.0.0.1:2222"],
        "worker": ["127.0.0.1:2223", "127.0.0.1:2224"],
    }
    for bad in ("127.0.0.1:1", "ps=a:1,ps=b:2", "ps=", "=a:1"):
        with pytest.raises(argparse.ArgumentTypeError):
            cli.parse_cluster(bad)


def test_session_runs_extends_and_replaces_nodes(server):
    with tf.Graph().as_default():
        v = tf.Variable(1.0)
        inc = v.assign_add(1.0)
        read = tf.identity(v)
        with tf.Session(server.target, config=RPC) as sess:
            sess.run(v.initializer)
            assert sess.run(read) == 1.0
            read.op._add_control_input(inc.op)  # a replaced node, sent in ExtendSession
            assert sess.run(read) == 2.0
            double = read * 2.0  # a new node after a run
            assert sess.run(double) == 6.0
            devices = sess.list_devices()
    assert [d.name for d in devices] == ["/job:localhost/replica:0/task:0/device:CPU:0"]


def test_partial_run_and_feed_errors(server):
    with tf.Graph().as_default():
        a = tf.placeholder(tf.float32, [])
        b = tf.placeholder(tf.float32, [])
        c = a * 2.0
        d = c + b
        with tf.Session(server.target, config=RPC) as sess:
            h = sess.partial_run_setup([c, d], [a, b])
            assert sess.partial_run(h, c, {a: 3.0}) == 6.0
            assert sess.partial_run(h, d, {b: 1.0}) == 7.0
            with pytest.raises(tf.errors.InvalidArgumentError, match="must feed"):
                sess.run(d, {a: 1.0})
            np.testing.assert_array_equal(sess.run([c, d], {a: 1.0, b: 2.0}), [2.0, 4.0])


def test_state_outlives_sessions_until_reset(server):
    with tf.Graph().as_default():
        v = tf.Variable(5.0, name="kept")
        with tf.Session(server.target, config=RPC) as sess:
            sess.run(v.initializer)
        with tf.Session(server.target, config=RPC) as sess:
            assert sess.run(v) == 5.0
        tf.Session.reset(server.target)
        with (
            tf.Session(server.target, config=RPC) as sess,
            pytest.raises(tf.errors.FailedPreconditionError, match="uninitialized"),
        ):
            sess.run(v)
    with pytest.raises(TypeError, match="list of strings"):
        tf.Session.reset(server.target, containers="c")
    with pytest.raises(tf.errors.InvalidArgumentError, match="cluster target"):
        tf.Session.reset("")
