"""tf.train.Scaffold and tf.train.SessionManager (TF1's monitored_session_test.py ScaffoldTest
and session_manager_test.py): defaults from collections, initialize or restore, readiness."""

from __future__ import annotations

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import errors


def _model():
    v = tf.Variable([1.0, 2.0], name="v")
    step = tf.train.get_or_create_global_step()
    bump = tf.group(tf.assign_add(v, [1.0, 1.0]), tf.assign_add(step, 1))
    return v, step, bump


def test_scaffold_finalize_builds_tf_defaults_and_freezes_graph():
    _model()
    local = tf.Variable(3.0, name="local", collections=[tf.GraphKeys.LOCAL_VARIABLES])
    tf.summary.scalar("s", local)
    scaffold = tf.train.Scaffold()
    assert scaffold.init_op is None and scaffold.saver is None
    scaffold.finalize()
    graph = tf.get_default_graph()
    assert graph.finalized
    assert graph.get_collection(tf.GraphKeys.INIT_OP) == [scaffold.init_op]
    assert graph.get_collection(tf.GraphKeys.READY_OP) == [scaffold.ready_op]
    assert graph.get_collection(tf.GraphKeys.LOCAL_INIT_OP) == [scaffold.local_init_op]
    assert graph.get_collection(tf.GraphKeys.SUMMARY_OP) == [scaffold.summary_op]
    assert graph.get_collection(tf.GraphKeys.SAVERS) == [scaffold.saver]
    assert isinstance(scaffold.saver, tf.train.Saver)
    with tf.Session() as sess:
        names = sess.run(scaffold.ready_op)
        assert sorted(n.decode() for n in names) == ["global_step", "local", "v"]
        assert list(sess.run(scaffold.ready_for_local_init_op)) != []
        sess.run(scaffold.init_op)
        assert [n.decode() for n in sess.run(scaffold.ready_op)] == ["local"]
        assert sess.run(scaffold.ready_for_local_init_op).size == 0
        sess.run(scaffold.local_init_op)
        assert sess.run(scaffold.ready_op).size == 0
    # A second Scaffold of the same graph shares the collected ops.
    again = tf.train.Scaffold().finalize()
    assert again.init_op is scaffold.init_op and again.saver is scaffold.saver


def test_scaffold_keeps_given_pieces_and_copies_from_another():
    v, _, _ = _model()
    saver = tf.train.Saver([v])
    init = tf.variables_initializer([v], name="my_init")
    calls = []
    base = tf.train.Scaffold(init_op=init, saver=saver, init_fn=lambda s, sess: calls.append(s))
    copy = tf.train.Scaffold(copy_from_scaffold=base, init_feed_dict={})
    assert copy.init_op is init and copy.saver is saver and copy.init_feed_dict == {}
    copy.init_fn("sess")
    assert calls == [copy]
    with pytest.raises(TypeError, match="copy_from_scaffold is not a Scaffold instance"):
        tf.train.Scaffold(copy_from_scaffold=object())


def test_scaffold_get_or_default_rejects_two_items_in_collection():
    tf.add_to_collection(tf.GraphKeys.INIT_OP, tf.no_op())
    tf.add_to_collection(tf.GraphKeys.INIT_OP, tf.no_op())
    with pytest.raises(RuntimeError, match='More than one item in the collection "init_op"'):
        tf.train.Scaffold().finalize()


def test_prepare_session_initializes_then_restores(tmp_path):
    v, step, bump = _model()
    saver = tf.train.Saver()
    init = tf.global_variables_initializer()
    sm = tf.train.SessionManager(ready_op=tf.report_uninitialized_variables())
    sess = sm.prepare_session("", init_op=init, saver=saver, checkpoint_dir=str(tmp_path))
    np.testing.assert_allclose(sess.run(v), [1.0, 2.0])
    sess.run(bump)
    sess.run(bump)
    saver.save(sess, str(tmp_path / "model.ckpt"), global_step=step)
    sess.close()
    calls = []
    sess = sm.prepare_session(
        "",
        init_op=init,
        saver=saver,
        checkpoint_dir=str(tmp_path),
        init_fn=lambda s: calls.append(s),
    )
    assert calls == []  # restored: neither init_op nor init_fn runs
    np.testing.assert_allclose(sess.run(v), [3.0, 4.0])
    assert sess.run(step) == 2
    assert saver.last_checkpoints == [str(tmp_path / "model.ckpt-2")]
    sess.close()
    with pytest.raises(ValueError, match="Can not provide both checkpoint_dir"):
        sm.prepare_session(
            "", saver=saver, checkpoint_dir=str(tmp_path), checkpoint_filename_with_path="x"
        )


def test_prepare_session_errors_when_model_not_ready():
    v, _, _ = _model()
    sm = tf.train.SessionManager(ready_op=tf.report_uninitialized_variables())
    with pytest.raises(RuntimeError, match="no init_op or init_fn or local_init_op was given"):
        sm.prepare_session("")
    partial = tf.variables_initializer([v], name="partial")
    with pytest.raises(
        RuntimeError,
        match="Init operations did not make model ready.  Init op: partial, init fn: None, "
        "local_init_op: None, error: Variables not initialized: global_step",
    ):
        sm.prepare_session("", init_op=partial)


def test_local_init_op_waits_for_ready_for_local_init():
    v, _, _ = _model()
    local = tf.Variable(tf.zeros([2]), name="local", collections=[tf.GraphKeys.LOCAL_VARIABLES])
    with pytest.raises(ValueError, match="you must also pass a local_init_op"):
        tf.train.SessionManager(ready_for_local_init_op=tf.report_uninitialized_variables())
    sm = tf.train.SessionManager(
        local_init_op=tf.assign(local, v * 2.0).op,
        ready_op=tf.report_uninitialized_variables(),
        ready_for_local_init_op=tf.report_uninitialized_variables(tf.global_variables()),
        recovery_wait_secs=30,
    )
    with pytest.raises(RuntimeError, match="did not make model ready for local_init"):
        sm.prepare_session("", init_fn=lambda sess: None)
    sess = sm.prepare_session("", init_op=tf.global_variables_initializer())
    np.testing.assert_allclose(sess.run(local), [2.0, 4.0])
    # A worker's session is ready at once (shared state would come from the chief's task).
    sess.close()
    with pytest.raises(errors.DeadlineExceededError, match="not ready after waiting 0 secs"):
        sm.wait_for_session("", max_wait_secs=0)


def test_wait_for_session_returns_ready_session_and_recover_session(tmp_path):
    _, step, bump = _model()
    saver = tf.train.Saver()
    sm = tf.train.SessionManager(ready_op=tf.report_uninitialized_variables())
    sess, initialized = sm.recover_session("", saver=saver, checkpoint_dir=str(tmp_path))
    assert not initialized
    sess.run(tf.global_variables_initializer())
    sess.run(bump)
    saver.save(sess, str(tmp_path / "m"), global_step=step)
    sess.close()
    sess, initialized = sm.recover_session("", saver=saver, checkpoint_dir=str(tmp_path))
    assert initialized and sess.run(step) == 1
    sess.close()
    no_check = tf.train.SessionManager()  # no ready_op: every session is ready
    no_check.wait_for_session("", max_wait_secs=0).close()
