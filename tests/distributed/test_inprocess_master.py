"""A Session of the process that runs the server it targets calls that server's master
directly (TF's LocalMaster registry, distributed/local.py), with the same results as over RPC;
rpc_options.use_rpc_for_inprocess_master forces the RPC, and a stopped server is forgotten."""

import flowgraph as tf
from flowgraph.distributed import local
from flowgraph.distributed.master import Master
from flowgraph.session.remote import RemoteMaster


def _steps(target: str, config=None) -> tuple:
    with tf.Graph().as_default():
        v = tf.Variable(1.0)
        inc = v.assign_add(1.0)
        read = tf.identity(v)
        x = tf.placeholder(tf.float32, [])
        with tf.Session(target, config=config) as sess:
            sess.run(v.initializer)
            first = sess.run(read)
            read.op._add_control_input(inc.op)  # a replaced node, sent in ExtendSession
            second = sess.run(read)
            doubled = x * 2.0
            h = sess.partial_run_setup([doubled], [x])
            partial = sess.partial_run(h, doubled, {x: 4.0})
            fed = sess.run(x * 3.0, {x: 2.0})
            return type(sess._master), (first, second, fed, partial)


def test_a_session_calls_its_own_servers_master_directly():
    server = tf.train.Server.create_local_server()
    try:
        assert local.served_master(server.target) is server._server.services.master
        kind, direct = _steps(server.target)
        assert kind is Master
        rpc = tf.ConfigProto()
        rpc.rpc_options.use_rpc_for_inprocess_master = True
        kind, over_rpc = _steps(server.target, rpc)
        assert kind is RemoteMaster
        assert direct == over_rpc == (1.0, 2.0, 6.0, 8.0)
    finally:
        server.stop()
    assert local.served_master(server.target) is None
