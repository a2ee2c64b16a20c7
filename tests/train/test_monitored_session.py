"""tf.train.MonitoredTrainingSession, MonitoredSession and SingularMonitoredSession (TF1's
monitored_session_test.py): a training loop that stops at a step, checkpoints, writes event
files, resumes after a restart and recovers from an aborted session."""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import errors


def _linear_model():
    """y = x w, trained by gradient descent with a global step and a loss summary."""
    x = tf.constant(np.ones((4, 3), np.float32))
    y = tf.constant(np.full((4, 1), 2.0, np.float32))
    w = tf.get_variable("w", [3, 1], initializer=tf.zeros_initializer())
    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
    tf.summary.scalar("loss", loss)
    step = tf.train.get_or_create_global_step()
    train_op = tf.train.GradientDescentOptimizer(0.05).minimize(loss, global_step=step)
    return w, loss, step, train_op


def _events(logdir):
    tf.summary.FileWriterCache.clear()  # flushes and closes the cached writers
    found = []
    for path in sorted(glob.glob(os.path.join(logdir, "events.out.tfevents.*"))):
        found.extend(tf.train.summary_iterator(path))
    return found


def _train(ckpt_dir, last_step, **kwargs):
    """One program run: builds the graph, trains until `last_step`; returns the steps run."""
    tf.reset_default_graph()
    _, _, step, train_op = _linear_model()
    hooks = [tf.train.StopAtStepHook(last_step=last_step)]
    seen = []
    with tf.train.MonitoredTrainingSession(checkpoint_dir=ckpt_dir, hooks=hooks, **kwargs) as sess:
        while not sess.should_stop():
            _, seen_step = sess.run([train_op, step])
            seen.append(int(seen_step))
    assert not tf.get_default_graph().finalized  # unfrozen again on close
    return seen


def test_training_stops_checkpoints_writes_events_and_resumes(tmp_path):
    ckpt = str(tmp_path)
    steps = _train(ckpt, 6, save_checkpoint_steps=4, save_summaries_steps=2, log_step_count_steps=3)
    assert steps == [1, 2, 3, 4, 5, 6]
    assert tf.train.latest_checkpoint(ckpt) == os.path.join(ckpt, "model.ckpt-6")
    state = tf.train.get_checkpoint_state(ckpt)
    assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == [
        "model.ckpt-0",
        "model.ckpt-4",
        "model.ckpt-6",
    ]
    assert os.path.exists(os.path.join(ckpt, "graph.pbtxt"))
    assert os.path.exists(os.path.join(ckpt, "model.ckpt-6.meta"))
    events = _events(ckpt)
    loss_steps = [e.step for e in events for v in e.summary.value if v.tag == "loss"]
    assert loss_steps == [1, 3, 5]
    rate_steps = [e.step for e in events for v in e.summary.value if v.tag == "global_step/sec"]
    assert rate_steps == [4]  # timer starts at step 1, fires 3 steps later
    assert all(
        v.simple_value > 0 for e in events for v in e.summary.value if v.tag == "global_step/sec"
    )
    logs = [(e.step, e.session_log.status) for e in events if e.HasField("session_log")]
    checkpoint = tf.SessionLog.CHECKPOINT
    assert logs == [(0, checkpoint), (1, tf.SessionLog.START), (4, checkpoint), (6, checkpoint)]
    assert any(e.HasField("graph_def") for e in events)
    assert any(e.HasField("meta_graph_def") for e in events)

    # A restarted program resumes from model.ckpt-6, with the trained weights.
    value_at_6 = tf.train.load_variable(ckpt, "w")
    tf.reset_default_graph()
    w, _, step, _ = _linear_model()
    with tf.train.SingularMonitoredSession(checkpoint_dir=ckpt) as sess:
        assert sess.run(step) == 6
        np.testing.assert_allclose(sess.run(w), value_at_6)
    assert _train(ckpt, 9, save_checkpoint_steps=4, log_step_count_steps=0) == [7, 8, 9]
    assert tf.train.latest_checkpoint(ckpt) == os.path.join(ckpt, "model.ckpt-9")


def test_training_session_defaults_are_tf_1_15s(tmp_path):
    tf.reset_default_graph()
    _linear_model()
    sess = tf.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path))
    kinds = {type(h).__name__: h for h in sess._hooks}
    assert sorted(kinds) == ["CheckpointSaverHook", "StepCounterHook", "SummarySaverHook"]
    assert kinds["CheckpointSaverHook"]._timer._every_secs == 600
    assert kinds["CheckpointSaverHook"]._timer._every_steps is None
    assert kinds["SummarySaverHook"]._timer._every_steps == 100
    assert kinds["StepCounterHook"]._timer._every_steps == 100
    sess.close()
    with pytest.raises(RuntimeError, match="Session is already closed"):
        sess.close()
    # No directory: no saving hooks; a worker gets only its own hooks.
    plain = tf.train.MonitoredTrainingSession(chief_only_hooks=[tf.train.FeedFnHook(dict)])
    assert [type(h).__name__ for h in plain._hooks] == ["FeedFnHook"]
    plain.close()
    tf.reset_default_graph()  # a model without variables is ready at once
    tf.constant(1.0)
    worker = tf.train.MonitoredTrainingSession(
        is_chief=False, checkpoint_dir=str(tmp_path), chief_only_hooks=[tf.train.FeedFnHook(dict)]
    )
    assert worker._hooks == []
    worker.close()


def test_worker_session_waits_for_chief_and_times_out():
    tf.reset_default_graph()
    _linear_model()
    creator = tf.train.WorkerSessionCreator(max_wait_secs=0)
    # A fresh local session has uninitialized variables: nobody will initialize them.
    with pytest.raises(errors.DeadlineExceededError, match="Session was not ready"):
        tf.train.MonitoredSession(session_creator=creator)
    assert not tf.get_default_graph().finalized


class _AbortOnce(tf.train.SessionRunHook):
    """Raises AbortedError from the run at `at_step`, once (a preempted parameter server)."""

    def __init__(self, at_step):
        self.at_step = at_step
        self.created = 0
        self.fired = False

    def begin(self):
        self._step = tf.train.get_global_step()

    def after_create_session(self, session, coord):
        self.created += 1

    def before_run(self, run_context):
        if not self.fired and run_context.session.run(self._step) == self.at_step:
            self.fired = True
            raise errors.AbortedError(None, None, "parameter server restarted")


def test_monitored_session_recovers_from_aborted_error_from_last_checkpoint(tmp_path):
    ckpt = str(tmp_path)
    tf.reset_default_graph()
    _, _, step, train_op = _linear_model()
    abort = _AbortOnce(at_step=5)
    hooks = [tf.train.StopAtStepHook(last_step=7), abort]
    seen = []
    with tf.train.MonitoredTrainingSession(
        checkpoint_dir=ckpt, hooks=hooks, save_checkpoint_steps=3, save_summaries_steps=None
    ) as sess:
        while not sess.should_stop():
            seen.append(int(sess.run([train_op, step])[1]))
    # Steps 4 and 5 were lost with the session; the new one restored model.ckpt-3.
    assert seen == [1, 2, 3, 4, 5, 4, 5, 6, 7]
    assert abort.created == 2


def test_singular_monitored_session_does_not_recover():
    tf.reset_default_graph()
    _, _, _, train_op = _linear_model()
    sess = tf.train.SingularMonitoredSession(hooks=[_AbortOnce(at_step=0)])
    with pytest.raises(errors.AbortedError), sess:
        sess.run(train_op)
    assert not tf.get_default_graph().finalized


def test_context_manager_ends_cleanly_on_out_of_range_and_calls_end_hooks():
    tf.reset_default_graph()
    queue = tf.FIFOQueue(2, tf.float32)
    fill = queue.enqueue_many([[1.0, 2.0]])
    close = queue.close()
    item = queue.dequeue()
    step = tf.train.get_or_create_global_step()
    final = tf.train.FinalOpsHook(step)
    got = []
    with tf.train.MonitoredSession(hooks=[final]) as sess:
        sess.run([fill, close])
        while not sess.should_stop():
            got.append(sess.run(item))
    assert got == [1.0, 2.0]
    assert final.final_ops_values == 0
    assert sess.should_stop() and sess._is_closed()


def test_queue_runners_are_started_and_stopped_by_the_coordinator():
    tf.reset_default_graph()
    queue = tf.FIFOQueue(10, tf.int32)
    counter = tf.Variable(0, name="counter")
    enqueue = queue.enqueue(tf.assign_add(counter, 1) + 0)  # + 0: a copy, not the variable
    tf.train.add_queue_runner(tf.train.QueueRunner(queue, [enqueue]))
    item = queue.dequeue()
    with tf.train.MonitoredSession() as sess:
        got = [int(sess.run(item)) for _ in range(5)]
        coord = sess._coordinated_creator.coord
    assert got == [1, 2, 3, 4, 5]
    assert coord.should_stop() and coord.joined


def test_run_step_fn_runs_with_and_without_hooks_and_request_stop():
    tf.reset_default_graph()
    c = tf.placeholder(tf.float32)
    v = c + 4.0
    w = c + 0.5
    tf.train.get_or_create_global_step()
    calls = []

    class Count(tf.train.SessionRunHook):
        def before_run(self, run_context):
            calls.append(run_context.original_args.fetches)

    def step_fn(step_context):
        a = step_context.session.run(v, feed_dict={c: 0.5})
        if a <= 4.5:
            step_context.request_stop()
        return step_context.run_with_hooks(w, feed_dict={c: 0.1})

    def bad(ctx):
        return None

    with tf.train.MonitoredSession(hooks=[Count()]) as sess:
        with pytest.raises(ValueError, match="`step_fn` may either have one `step_context`"):
            sess.run_step_fn(bad)
        while not sess.should_stop():
            sess.run_step_fn(step_fn)  # StopIteration ends the `with` block cleanly
    assert calls == []  # the stop came before run_with_hooks


def test_should_stop_after_hook_request_and_run_after_stop_raises():
    tf.reset_default_graph()
    _, _, _, train_op = _linear_model()
    sess = tf.train.MonitoredSession(hooks=[tf.train.StopAtStepHook(num_steps=1)])
    sess.run(train_op)
    assert sess.should_stop()
    with pytest.raises(RuntimeError, match="Run called even after should_stop requested"):
        sess.run(train_op)
    sess.close()


def test_non_local_master_is_a_clear_error_and_leaves_graph_editable():
    tf.reset_default_graph()
    _linear_model()
    with pytest.raises(errors.OpError, match="not-a-master"):
        tf.train.MonitoredTrainingSession(master="not-a-master")
    assert not tf.get_default_graph().finalized


def test_unavailable_error_from_a_step_recreates_session_and_restores(tmp_path):
    """A step's op fails with UnavailableError (a lost parameter server): the step is retried
    in a new session restored from model.ckpt-2; SingularMonitoredSession would raise."""
    tf.reset_default_graph()
    calls = {"n": 0}

    def flaky(step_value):
        calls["n"] += 1
        if calls["n"] == 4:  # the fourth step: the global step is 3
            raise errors.UnavailableError(None, None, "/job:ps/task:0 is unreachable")
        return step_value

    step = tf.train.get_or_create_global_step()
    v = tf.Variable(0.0, name="v")
    checked = tf.py_func(flaky, [step], tf.int64)
    with tf.control_dependencies([checked]):
        train_op = tf.group(tf.assign_add(step, 1), tf.assign_add(v, 1.0))
    created = _AbortOnce(at_step=-1)  # never aborts; counts sessions
    with tf.train.MonitoredTrainingSession(
        checkpoint_dir=str(tmp_path),
        hooks=[tf.train.StopAtStepHook(last_step=5), created],
        save_checkpoint_steps=2,
        save_summaries_steps=None,
        log_step_count_steps=None,
    ) as sess:
        while not sess.should_stop():
            sess.run(train_op)
    assert created.created == 2
    # Runs: steps 0->1, 1->2 (saved), 2->3, the failed one at 3; the new session restored
    # model.ckpt-2 (step 3 is lost), then 2->3, 3->4, 4->5.
    assert calls["n"] == 7
    assert tf.train.load_variable(str(tmp_path), "global_step") == 5
    assert tf.train.load_variable(str(tmp_path), "v") == 5.0
