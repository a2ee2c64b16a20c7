"""A step that passes its deadline is ended by the master, and the client hears the master's
answer, not its own expired RPC: the RunStep call waits remote.STEP_MARGIN_S longer than the
step's deadline. Hearing its own expiry first, the client could run the next step while the
master's step still waited on the queue (and took the element that the next step enqueued)."""

import pytest

import flowgraph as tf


def test_the_client_hears_the_masters_deadline_error():
    server = tf.train.Server.create_local_server()
    rpc = tf.ConfigProto()
    rpc.rpc_options.use_rpc_for_inprocess_master = True
    try:
        with tf.Graph().as_default():
            q = tf.FIFOQueue(4, tf.float32)
            enqueue, dequeue, size = q.enqueue(7.0), q.dequeue(), q.size()
            with tf.Session(server.target, config=rpc) as sess:
                for _ in range(10):
                    with pytest.raises(tf.errors.DeadlineExceededError, match="the step"):
                        sess.run(dequeue, options=tf.RunOptions(timeout_in_ms=50))
                    sess.run(enqueue)
                    assert sess.run(size) == 1
                    assert sess.run(dequeue) == 7.0
    finally:
        server.stop()
