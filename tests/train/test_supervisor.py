"""tf.train.Supervisor (TF1's supervisor_test.py): managed_session initializes or restores from
logdir, runs the chief's checkpoint, summary and steps/sec threads, and stops together."""

from __future__ import annotations

import glob
import os
import threading

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import errors


def _model():
    step = tf.train.get_or_create_global_step()
    v = tf.Variable(0.0, name="v")
    train_op = tf.group(tf.assign_add(step, 1), tf.assign_add(v, 0.5))
    tf.summary.scalar("v_value", v)
    return step, v, train_op


class _SignalSaver(tf.train.Saver):
    """A Saver that tells the test when the checkpoint thread saved."""

    saved = None

    def save(self, *args, **kwargs):
        path = super().save(*args, **kwargs)
        self.saved.set()
        return path


class _SignalWriter(tf.summary.FileWriter):
    """A FileWriter that tells the test when the services wrote a summary of `tag`."""

    def __init__(self, logdir, tags):
        super().__init__(logdir)
        self.seen = {tag: threading.Event() for tag in tags}

    def add_summary(self, summary, global_step=None):
        super().add_summary(summary, global_step)
        parsed = tf.Summary()
        if isinstance(summary, bytes):
            parsed.ParseFromString(summary)
        else:
            parsed.CopyFrom(summary)
        for value in parsed.value:
            if value.tag in self.seen:
                self.seen[value.tag].set()


def _events(logdir):
    found = []
    for path in sorted(glob.glob(os.path.join(logdir, "events.out.tfevents.*"))):
        found.extend(tf.train.summary_iterator(path))
    return found


def test_managed_session_services_write_checkpoint_summaries_and_resume(tmp_path):
    logdir = str(tmp_path)
    step, v, train_op = _model()
    saver = _SignalSaver()
    saver.saved = threading.Event()
    writer = _SignalWriter(logdir, ["v_value", "global_step/sec"])
    sv = tf.train.Supervisor(
        logdir=logdir,
        saver=saver,
        summary_writer=writer,
        save_model_secs=3600,
        save_summaries_secs=3600,
    )
    assert tf.get_default_graph().finalized
    assert sv.is_chief and sv.saver is saver and sv.global_step is step
    assert sv.save_path == os.path.join(logdir, "model.ckpt")
    with sv.managed_session() as sess:
        # Each service runs once at start, then every hour.
        assert saver.saved.wait(30) and all(e.wait(30) for e in writer.seen.values())
        for _ in range(4):
            sess.run(train_op)
        sv.summary_computed(sess, sess.run(sv.summary_op))
        sv.saver.save(sess, sv.save_path, global_step=sv.global_step)
    assert sv.should_stop()
    assert tf.train.latest_checkpoint(logdir) == os.path.join(logdir, "model.ckpt-4")
    events = _events(logdir)
    logs = [e.session_log.status for e in events if e.HasField("session_log")]
    assert logs[0] == tf.SessionLog.START and logs[-1] == tf.SessionLog.STOP
    assert tf.SessionLog.CHECKPOINT in logs
    v_at_4 = [e.summary.value[0].simple_value for e in events if e.step == 4 and e.summary.value]
    assert v_at_4 == [2.0]
    assert any(e.HasField("graph_def") for e in events)
    assert os.path.exists(os.path.join(logdir, "graph.pbtxt"))

    # A restarted chief restores model.ckpt-4 instead of initializing.
    tf.reset_default_graph()
    step, v, _ = _model()
    sv = tf.train.Supervisor(logdir=logdir, save_model_secs=0, save_summaries_secs=0)
    with sv.managed_session() as sess:
        assert sess.run(step) == 4 and sess.run(v) == 2.0


def test_managed_session_reraises_errors_and_ends_cleanly_on_out_of_range(tmp_path):
    step, _, train_op = _model()
    sv = tf.train.Supervisor(logdir=None)
    with pytest.raises(ValueError, match="boom"), sv.managed_session() as sess:
        sess.run(train_op)
        raise ValueError("boom")
    assert sv.should_stop()
    with sv.managed_session() as sess:  # a new session: initialized again
        assert sess.run(step) == 0
        raise errors.OutOfRangeError(None, None, "input exhausted")


def test_supervisor_pieces_from_collections_and_disabled_ones():
    step, v, _ = _model()
    init = tf.variables_initializer([step, v], name="custom_init")
    tf.add_to_collection(tf.GraphKeys.INIT_OP, init)
    sv = tf.train.Supervisor(summary_op=None, saver=None)
    assert sv.init_op is init and sv.summary_op is None and sv.saver is None
    assert sv.summary_writer is None and sv.ready_for_local_init_op is None
    assert tf.get_collection(tf.GraphKeys.READY_OP) == [sv.ready_op]
    with pytest.raises(RuntimeError, match="Writing a summary requires a summary writer"):
        sv.summary_computed(None, b"")
    sess = sv.prepare_or_wait_for_session(start_standard_services=False)
    assert sess.run(step) == 0
    assert sv.start_standard_services(sess) is None  # no logdir: a warning, no threads
    sv.stop()
    sess.close()


def test_supervisor_loop_runs_target_until_stop():
    _model()
    sv = tf.train.Supervisor(logdir=None)
    ran = threading.Event()
    with sv.managed_session():
        looper = sv.loop(3600, ran.set)
        assert ran.wait(30)
    assert not looper.is_alive()


def test_non_chief_supervisor_checks_devices_and_waits_for_the_chief():
    with tf.device("/cpu:0"):
        _model()
    sv = tf.train.Supervisor(is_chief=False, recovery_wait_secs=0.01)
    with pytest.raises(RuntimeError, match="Only chief supervisor can start standard services"):
        sv.start_standard_services(None)
    with pytest.raises(errors.DeadlineExceededError, match="Session was not ready"):
        sv.prepare_or_wait_for_session(max_wait_secs=0)
    tf.reset_default_graph()
    tf.Variable(np.zeros(2), name="no_device")
    with pytest.raises(ValueError, match="all Variables must have their device set"):
        tf.train.Supervisor(is_chief=False)
