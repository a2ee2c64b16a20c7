"""The hooks of basic_session_run_hooks.py (TF1's basic_session_run_hooks_test.py): each hook
in a MonitoredSession, and the errors TF raises for bad arguments."""

from __future__ import annotations

import glob
import logging
import os

import numpy as np
import pytest

import flowgraph as tf


def _counter_model():
    """A global step that the train op bumps by one, and a loss that follows it."""
    step = tf.train.get_or_create_global_step()
    train_op = tf.assign_add(step, 1)
    return step, train_op


def _run_until_stop(sess, train_op, limit=100):
    runs = 0
    while not sess.should_stop() and runs < limit:
        sess.run(train_op)
        runs += 1
    return runs


def test_stop_at_step_hook_last_step_and_num_steps():
    step, train_op = _counter_model()
    with tf.train.SingularMonitoredSession(hooks=[tf.train.StopAtStepHook(last_step=4)]) as sess:
        assert _run_until_stop(sess, train_op) == 4
        assert sess.raw_session().run(step) == 4
    set_10 = tf.assign(step, 10)
    init = tf.train.Scaffold(init_fn=lambda scaffold, sess: sess.run(set_10))
    hook = tf.train.StopAtStepHook(num_steps=3)
    with tf.train.SingularMonitoredSession(scaffold=init, hooks=[hook]) as sess:
        assert _run_until_stop(sess, train_op) == 3  # counted from step 10
        assert sess.raw_session().run(step) == 13


def test_stop_at_step_hook_errors():
    with pytest.raises(ValueError, match="One of num_steps or last_step must be specified"):
        tf.train.StopAtStepHook()
    with pytest.raises(ValueError, match="Only one of num_steps or last_step can be specified"):
        tf.train.StopAtStepHook(num_steps=1, last_step=2)
    with pytest.raises(RuntimeError, match="Global step should be created to use StopAtStepHook"):
        tf.train.StopAtStepHook(num_steps=1).begin()


class _Listener(tf.train.CheckpointSaverListener):
    def __init__(self, stop_after=None):
        self.calls = []
        self.stop_after = stop_after

    def begin(self):
        self.calls.append(("begin",))

    def before_save(self, session, global_step_value):
        self.calls.append(("before_save", global_step_value))

    def after_save(self, session, global_step_value):
        self.calls.append(("after_save", global_step_value))
        return self.stop_after is not None and global_step_value >= self.stop_after

    def end(self, session, global_step_value):
        self.calls.append(("end", global_step_value))


def test_checkpoint_saver_hook_saves_on_steps_and_calls_listeners(tmp_path):
    _step, train_op = _counter_model()
    v = tf.Variable(1.0, name="v")
    bump = tf.group(train_op, tf.assign_add(v, 1.0))
    listener = _Listener()
    saver = tf.train.Saver(max_to_keep=10)
    hook = tf.train.CheckpointSaverHook(
        str(tmp_path), save_steps=2, saver=saver, listeners=[listener], checkpoint_basename="m"
    )
    with tf.train.SingularMonitoredSession(hooks=[hook]) as sess:
        for _ in range(5):
            sess.run(bump)
    saved = [c[1] for c in listener.calls if c[0] == "after_save"]
    assert saved == [0, 2, 4, 5]
    assert listener.calls[0] == ("begin",) and listener.calls[-1] == ("end", 5)
    assert saver.last_checkpoints == [str(tmp_path / f"m-{s}") for s in (0, 2, 4, 5)]
    assert tf.train.load_variable(str(tmp_path / "m-2"), "v") == 3.0
    assert os.path.exists(tmp_path / "graph.pbtxt")


def test_checkpoint_listener_can_stop_training_and_saver_from_collection(tmp_path):
    _step, train_op = _counter_model()
    tf.add_to_collection(tf.GraphKeys.SAVERS, tf.train.Saver())
    listener = _Listener(stop_after=3)
    hook = tf.train.CheckpointSaverHook(str(tmp_path), save_steps=3, listeners=[listener])
    with tf.train.MonitoredSession(hooks=[hook]) as sess:
        assert _run_until_stop(sess, train_op) == 3
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("model.ckpt-3")


def test_checkpoint_saver_hook_errors(tmp_path):
    with pytest.raises(ValueError, match="Can not provide both every_secs and every_steps"):
        tf.train.CheckpointSaverHook(str(tmp_path), save_secs=1, save_steps=1)
    with pytest.raises(ValueError, match="Either every_secs or every_steps should be provided"):
        tf.train.CheckpointSaverHook(str(tmp_path))
    with pytest.raises(ValueError, match="You cannot provide both saver and scaffold"):
        tf.train.CheckpointSaverHook(
            str(tmp_path), save_steps=1, saver=object(), scaffold=tf.train.Scaffold()
        )
    _counter_model()
    hook = tf.train.CheckpointSaverHook(str(tmp_path), save_steps=1)
    with pytest.raises(RuntimeError, match="No items in collection savers"):
        hook._get_saver()  # a Scaffold would have added the default Saver
    tf.add_to_collection(tf.GraphKeys.SAVERS, tf.train.Saver())
    tf.add_to_collection(tf.GraphKeys.SAVERS, tf.train.Saver())
    with pytest.raises(RuntimeError, match="More than one item in collection savers"):
        hook._get_saver()


def _events(logdir):
    tf.summary.FileWriterCache.clear()
    return [
        e for p in glob.glob(os.path.join(logdir, "events*")) for e in tf.train.summary_iterator(p)
    ]


def test_summary_saver_hook_writes_every_n_steps(tmp_path):
    from flowgraph.train import training_util

    step = tf.train.get_or_create_global_step()
    tf.summary.scalar("step_value", tf.cast(step, tf.float32) * 2.0)
    summary_op = tf.summary.merge_all()
    # Orders the hooks' reads of the step before the update (unordered, the update may win).
    reads = [summary_op, training_util._get_or_create_global_step_read()]
    with tf.control_dependencies(reads):
        train_op = tf.assign_add(step, 1)
    writer = tf.summary.FileWriter(str(tmp_path))
    hook = tf.train.SummarySaverHook(save_steps=3, summary_writer=writer, summary_op=summary_op)
    with tf.train.MonitoredSession(hooks=[hook]) as sess:
        for _ in range(7):
            sess.run(train_op)
    writer.close()
    events = [e for e in _events(str(tmp_path)) if e.summary.value]
    # The summary runs with the train op; it is stamped with the step after the run.
    assert [(e.step, e.summary.value[0].simple_value) for e in events] == [
        (1, 0.0),
        (4, 6.0),
        (7, 12.0),
    ]


def test_summary_saver_hook_errors(tmp_path):
    with pytest.raises(ValueError, match="Exactly one of scaffold or summary_op must be provided"):
        tf.train.SummarySaverHook(save_steps=1, output_dir=str(tmp_path))
    with pytest.raises(ValueError, match="Exactly one of scaffold or summary_op must be provided"):
        tf.train.SummarySaverHook(save_steps=1, scaffold=tf.train.Scaffold(), summary_op=1)
    with pytest.raises(ValueError, match="Can not provide both every_secs and every_steps"):
        tf.train.SummarySaverHook(save_steps=1, save_secs=1, summary_op=1)
    hook = tf.train.SummarySaverHook(save_steps=1, summary_op=tf.constant(""))
    with pytest.raises(RuntimeError, match="Global step should be created to use SummarySaverHook"):
        hook.begin()


def test_step_counter_hook_writes_steps_per_sec_and_warns_on_stuck_step(tmp_path, caplog):
    step, train_op = _counter_model()
    with pytest.raises(ValueError, match="exactly one of every_n_steps and every_n_secs"):
        tf.train.StepCounterHook(every_n_steps=None)
    with pytest.raises(ValueError, match="exactly one of every_n_steps and every_n_secs"):
        tf.train.StepCounterHook(every_n_steps=1, every_n_secs=1)
    hook = tf.train.StepCounterHook(every_n_steps=2, output_dir=str(tmp_path))
    caplog.set_level(logging.INFO, logger="tensorflow")
    with tf.train.MonitoredSession(hooks=[hook]) as sess:
        for _ in range(5):
            sess.run(train_op)
        sess.run(step)  # the global step does not move: a warning
    rates = [(e.step, v.tag) for e in _events(str(tmp_path)) for v in e.summary.value]
    assert rates == [(3, "global_step/sec"), (5, "global_step/sec")]
    messages = [r.getMessage() for r in caplog.records]
    assert sum(m.startswith("global_step/sec: ") for m in messages) == 2
    assert any(
        "It seems that global step (tf.train.get_global_step) has not" in m for m in messages
    )


def test_logging_tensor_hook_every_n_iter_formatter_and_at_end(caplog):
    _step, train_op = _counter_model()
    x = tf.placeholder(tf.int64, [], name="x")
    twice = tf.identity(tf.cast(x, tf.float32) * 2.0, name="twice")
    caplog.set_level(logging.INFO, logger="tensorflow")
    hooks = [
        tf.train.LoggingTensorHook({"t": twice, "s": x}, every_n_iter=2),
        tf.train.LoggingTensorHook(
            ["global_step"], at_end=True, formatter=lambda v: f"end {v['global_step']}"
        ),
    ]
    with tf.train.MonitoredSession(hooks=hooks) as sess:
        for i in range(5):
            sess.run(train_op, {x: i})
    lines = [r.getMessage() for r in caplog.records if r.name == "tensorflow"]
    logged = [line for line in lines if line.startswith(("s = ", "end "))]
    assert logged[0] == "s = 0, t = 0.0"  # tags sorted; the first log has no elapsed time
    assert logged[1].startswith("s = 2, t = 4.0 (") and logged[1].endswith(" sec)")
    assert logged[2].startswith("s = 4, t = 8.0 (")
    assert logged[3] == "end 5"
    assert len(logged) == 4


def test_logging_tensor_hook_errors():
    with pytest.raises(ValueError, match="either at_end and/or exactly one of every_n_iter"):
        tf.train.LoggingTensorHook(["x"])
    with pytest.raises(ValueError, match="either at_end and/or exactly one of every_n_iter"):
        tf.train.LoggingTensorHook(["x"], every_n_iter=1, every_n_secs=1)
    with pytest.raises(ValueError, match="invalid every_n_iter=0"):
        tf.train.LoggingTensorHook(["x"], every_n_iter=0)
    tf.split(tf.constant([1.0, 2.0]), 2, name="pair")
    with pytest.raises(ValueError, match="Name pair is ambiguous"):
        tf.train.LoggingTensorHook(["pair"], every_n_iter=1).begin()
    other = tf.Graph()
    with other.as_default():
        foreign = tf.constant(1.0)
    with pytest.raises(ValueError, match="should have graph attribute that is equal"):
        tf.train.LoggingTensorHook([foreign], every_n_iter=1).begin()


def test_nan_tensor_hook_fails_or_stops(caplog):
    loss = tf.placeholder(tf.float32, [])
    hook = tf.train.NanTensorHook(loss)
    with tf.train.MonitoredSession(hooks=[hook]) as sess:
        sess.run(loss, {loss: 1.0})
        with pytest.raises(tf.train.NanLossDuringTrainingError, match="NaN loss during training"):
            sess.run(loss, {loss: np.nan})
    caplog.set_level(logging.WARNING, logger="tensorflow")
    with tf.train.MonitoredSession(hooks=[tf.train.NanTensorHook(loss, False)]) as sess:
        sess.run(loss, {loss: np.nan})
        assert sess.should_stop()
    assert "Model diverged with loss = NaN." in [r.getMessage() for r in caplog.records]


def test_feed_fn_final_ops_and_global_step_waiter_hooks():
    _step, train_op = _counter_model()
    x = tf.placeholder(tf.float32, [])
    total = tf.Variable(0.0, name="total")
    add = tf.group(train_op, tf.assign_add(total, x))
    feeds = iter([1.0, 2.0, 3.0])
    final = tf.train.FinalOpsHook({"total": total * 10.0, "x": x}, {x: -1.0})
    hooks = [
        tf.train.FeedFnHook(lambda: {x: next(feeds)}),
        final,
        tf.train.GlobalStepWaiterHook(wait_until_step=0),
    ]
    with tf.train.MonitoredSession(hooks=hooks) as sess:
        for _ in range(3):
            sess.run(add)
        with pytest.raises(RuntimeError, match="Same tensor is fed by a SessionRunHook and user"):
            sess.run(add, {x: 5.0})
    assert final.final_ops_values == {"total": 60.0, "x": -1.0}


def test_global_step_waiter_starts_once_step_is_reached():
    step, train_op = _counter_model()
    waiter = tf.train.GlobalStepWaiterHook(wait_until_step=2)
    set_2 = tf.assign(step, 2)
    init = tf.train.Scaffold(init_fn=lambda scaffold, sess: sess.run(set_2))
    creator = tf.train.ChiefSessionCreator(scaffold=init)
    with tf.train.MonitoredSession(session_creator=creator, hooks=[waiter]) as sess:
        sess.run(train_op)
        assert waiter._worker_is_started
    hook = tf.train.GlobalStepWaiterHook(1)
    tf.reset_default_graph()
    with pytest.raises(RuntimeError, match="Global step should be created to use _GlobalStep"):
        hook.begin()
