"""Surviving failures with real processes (whitepaper §3.3, fault tolerance): a ps and two
workers train under MonitoredTrainingSession; a task is SIGKILLed between steps or mid-step
and restarted on the same port. The step in flight fails quickly with UnavailableError or
AbortedError naming the dead task (no hang), and a new MonitoredTrainingSession restores the
last checkpoint; the resumed run's variables equal a local reference run restored from the
same checkpoint and trained the same steps."""

import threading
import time

import numpy as np
import pytest

import flowgraph as tf
from flowgraph import errors

TRUE_W = np.array([[2.0], [-3.0], [0.5]], np.float32)
FAIL_WITHIN_S = 5.0


def _batch():
    """Every step's batch: a step that a recovering session reruns sees the same data."""
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((8, 3)).astype(np.float32)
    return xs, xs @ TRUE_W + 1.0


def _model(compute_device: str | None):
    """A linear model whose variables live on the ps; returns (x, y, train, step, [w, b])."""
    step = tf.train.get_or_create_global_step()
    w = tf.get_variable("w", [3, 1], initializer=tf.zeros_initializer())
    b = tf.get_variable("b", [], initializer=tf.zeros_initializer())
    with tf.device(compute_device):
        x = tf.placeholder(tf.float32, [None, 3])
        y = tf.placeholder(tf.float32, [None, 1])
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))
        train = tf.train.GradientDescentOptimizer(0.05).minimize(loss, global_step=step)
    return x, y, train, step, [w, b]


def _run_steps(sess, x, y, train, step, n: int) -> None:
    xs, ys = _batch()
    for _ in range(n):
        sess.run(train, {x: xs, y: ys})


class Trainer:
    """The chief's training graph on the cluster: variables on ps:0, compute on worker:1,
    the client's master on worker:0."""

    def __init__(self, cluster, ckpt_dir: str):
        self.cluster, self.ckpt_dir = cluster, ckpt_dir
        self.graph = tf.Graph()
        with self.graph.as_default(), tf.device("/job:ps/task:0"):
            self.ops = _model("/job:worker/task:1")

    def session(self):
        with self.graph.as_default():
            return tf.train.MonitoredTrainingSession(
                master=self.cluster.target("worker", 0),
                is_chief=True,
                checkpoint_dir=self.ckpt_dir,
                save_checkpoint_steps=3,
                save_checkpoint_secs=None,
                save_summaries_steps=None,
                save_summaries_secs=None,
                log_step_count_steps=None,
            )

    def run(self, sess, n: int) -> None:
        x, y, train, step, _ = self.ops
        _run_steps(sess, x, y, train, step, n)

    def values(self, sess):
        return sess.run([self.ops[3], *self.ops[4]])


def _reference(start, n: int):
    """A local run from `start` (step, w, b) trained n steps: step, w, b."""
    with tf.Graph().as_default():
        x, y, train, step, vs = _model(None)
        with tf.Session() as sess:
            for var, value in zip([step, *vs], start):
                var.load(value, sess)
            _run_steps(sess, x, y, train, step, n)
            return sess.run([step, *vs])


def _checkpointed(ckpt_dir: str):
    ckpt = tf.train.latest_checkpoint(ckpt_dir)
    return [tf.train.load_variable(ckpt, name) for name in ("global_step", "w", "b")]


def _assert_equal(got, want) -> None:
    assert got[0] == want[0]
    for g, w_ in zip(got[1:], want[1:]):
        np.testing.assert_allclose(g, w_, rtol=1e-6)


def _fails_fast(fn, dead: str) -> None:
    start = time.monotonic()
    with pytest.raises((errors.UnavailableError, errors.AbortedError)) as info:
        fn()
    assert time.monotonic() - start < FAIL_WITHIN_S, (time.monotonic() - start, info.value)
    assert dead in str(info.value), info.value


def _assert_resumed(trainer, sess, n: int) -> None:
    ckpt = tf.train.latest_checkpoint(trainer.ckpt_dir)
    restored = tf.train.load_variable(ckpt, "global_step")
    assert sess.run(trainer.ops[3]) == restored  # the new session restored the checkpoint
    trainer.run(sess, n)
    got = trainer.values(sess)
    want = _reference(ckpt, n)
    assert got[0] == want[0]
    for g, w_ in zip(got[1:], want[1:]):
        np.testing.assert_allclose(g, w_, rtol=1e-6)


@pytest.mark.parametrize("job,task", [("ps", 0), ("worker", 1)])
def test_kill_between_steps_and_resume(grpc_cluster, tmp_path, job, task):
    """Three kills after steps 4, 9 and 16: the next step fails fast on a surviving task's
    master; once the task is back the MonitoredTrainingSession recovers by itself (a new
    session restored from the last checkpoint) and trains on as a reference run would."""
    cluster = grpc_cluster({"ps": 1, "worker": 2})
    trainer = Trainer(cluster, str(tmp_path))
    dead = f"/job:{job}/replica:0/task:{task}"
    with trainer.session() as sess:
        for steps in (4, 5, 7):
            trainer.run(sess, steps)
            probe = tf.Session(cluster.target("worker", 0), graph=trainer.graph)
            before = trainer.values(probe)
            cluster.kill(job, task)
            _fails_fast(lambda: trainer.run(probe, 1), dead)
            probe.close()
            cluster.restart(job, task)
            restored = _checkpointed(trainer.ckpt_dir)
            # the MonitoredTrainingSession recovers when a run fails (the restarted task
            # lacks its variables or the step's graphs): a new session restores the last
            # checkpoint; otherwise training goes on from where it was
            trainer.run(sess, 2)
            got = trainer.values(sess)
            if job == "ps":
                assert got[0] == restored[0] + 2
            start = restored if got[0] == restored[0] + 2 else before
            want = _reference(start, 2)
            _assert_equal(got, want)


def _blocked_step(queue_task: str, after_task: str):
    """A step that tells `mark` it started, then waits on an empty queue on `queue_task`;
    its value goes on to `after_task` (that task waits in a Recv from the queue's)."""
    with tf.device("/job:worker/task:0"):
        mark = tf.FIFOQueue(10, tf.float32, shapes=[[]], shared_name="mark")
        started = mark.enqueue(1.0)
    with tf.device(queue_task):
        blocked = tf.FIFOQueue(10, tf.float32, shapes=[[]], shared_name="blocked")
        with tf.control_dependencies([started]):
            value = blocked.dequeue()
    with tf.device(after_task):
        out = value + 1.0
    return mark.dequeue(), out


def test_kill_mid_step_fails_the_step_on_surviving_tasks(grpc_cluster):
    """Four kills while a step waits on the killed task: the step fails within 5 s on the
    master with UnavailableError or AbortedError naming it (the survivor's Recv is
    cancelled), and once the task is back the master runs steps again."""
    cluster = grpc_cluster({"ps": 1, "worker": 2})
    ps, w1 = "/job:ps/task:0", "/job:worker/task:1"
    for job, task, (queue_task, after_task) in [
        ("ps", 0, (ps, w1)),
        ("worker", 1, (w1, ps)),
        ("ps", 0, (ps, w1)),
        ("worker", 1, (w1, ps)),
    ]:
        with tf.Graph().as_default():
            wait_started, out = _blocked_step(queue_task, after_task)
            step_sess = tf.Session(cluster.target("worker", 0))
            test_sess = tf.Session(cluster.target("worker", 0))
            outcome: list = []

            def step():
                try:
                    step_sess.run(out)
                except errors.OpError as e:
                    outcome.append((time.monotonic(), e))

            thread = threading.Thread(target=step)
            thread.start()
            test_sess.run(wait_started)  # the step is in flight: it enqueued its mark
            killed_at = time.monotonic()
            cluster.kill(job, task)
            thread.join(timeout=30)
            assert not thread.is_alive()
            failed_at, error = outcome[0]
            assert isinstance(error, (errors.UnavailableError, errors.AbortedError)), error
            assert f"/job:{job}/replica:0/task:{task}" in str(error), error
            assert failed_at - killed_at < FAIL_WITHIN_S
            cluster.restart(job, task)
            assert test_sess.run(tf.constant(2.0) * 3.0) == 6.0
            step_sess.close()
            test_sess.close()


def test_killing_the_clients_master_fails_its_step_and_training_resumes(grpc_cluster, tmp_path):
    """The client's master is worker:0's, which is SIGKILLed while a step waits there: the
    client's run fails within 5 s with UnavailableError naming the master's address. Once
    worker:0 is back, the MonitoredTrainingSession (whose session died with the master) makes a
    new one, restored from the last checkpoint, and trains on as a reference run would."""
    cluster = grpc_cluster({"ps": 1, "worker": 2})
    trainer = Trainer(cluster, str(tmp_path))
    with trainer.session() as sess:
        trainer.run(sess, 4)
        with tf.Graph().as_default():
            with tf.device("/job:worker/task:0"):
                mark = tf.FIFOQueue(1, tf.float32, shapes=[[]], shared_name="mark")
                blocked = tf.FIFOQueue(1, tf.float32, shapes=[[]], shared_name="blocked")
                with tf.control_dependencies([mark.enqueue(1.0)]):
                    value = blocked.dequeue()
            step_sess = tf.Session(cluster.target("worker", 0))
            watcher = tf.Session(cluster.target("worker", 0))
            outcome: list = []

            def step():
                try:
                    step_sess.run(value)
                except errors.OpError as e:
                    outcome.append((time.monotonic(), e))

            thread = threading.Thread(target=step)
            thread.start()
            watcher.run(mark.dequeue())  # the step is in flight on the master's task
            killed_at = time.monotonic()
            cluster.kill("worker", 0)
            thread.join(timeout=30)
            assert not thread.is_alive()
            failed_at, error = outcome[0]
            assert isinstance(error, errors.UnavailableError), error
            assert cluster.address("worker", 0) in str(error), error
            assert failed_at - killed_at < FAIL_WITHIN_S
        cluster.restart("worker", 0)
        restored = _checkpointed(trainer.ckpt_dir)
        trainer.run(sess, 2)
        got = trainer.values(sess)
        assert got[0] == restored[0] + 2
        _assert_equal(got, _reference(restored, 2))
