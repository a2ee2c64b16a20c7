"""A task's restart and a hung task, seen by one master session (whitepaper §3.3, fault
tolerance): the session that ran steps on a task before it was SIGKILLed and restarted stays
usable (the master registers its graphs there again and reports the restart once, as
AbortedError naming the task), and a task that hangs (SIGSTOP: its sockets stay open, so no RPC
fails) is found by the master's health checks, which fail the step waiting on it."""

import threading
import time

import pytest

import flowgraph as tf
from flowgraph import errors

PS, W1 = "/job:ps/task:0", "/job:worker/task:1"
FAIL_WITHIN_S = 5.0


def _config(period_ms: int) -> tf.ConfigProto:
    config = tf.ConfigProto()
    config.experimental.health_check_period_ms = period_ms
    return config


def _restart_reported_once(sess, fetch, task: str, checked_gap: bool = False) -> None:
    """The next step that runs on `task` fails once with AbortedError naming its restart.

    `checked_gap`: the master's health check may have found the task down between its kill
    and its restart; a step that runs before the restarted task answers the next check gets
    that verdict (UnavailableError naming the task) instead, and a later one the restart."""
    end = time.monotonic() + FAIL_WITHIN_S
    tick = threading.Event()
    while checked_gap:
        try:
            sess.run(fetch)
        except errors.UnavailableError as e:
            assert f"Task {task} is unreachable" in e.message and time.monotonic() < end
            tick.wait(0.01)
        except errors.AbortedError as e:
            assert f"{task} was restarted" in e.message
            return
        else:
            pytest.fail(f"the restart of {task} was not reported")
    with pytest.raises(errors.AbortedError, match=f"{task} was restarted"):
        sess.run(fetch)


@pytest.mark.parametrize("period_ms", [-1, 200], ids=["unchecked", "checked"])
def test_the_session_is_usable_after_a_task_restarts(grpc_cluster, period_ms):
    """Unchecked, the restart shows as the task's unknown graph handle in the next step;
    checked, the health check may find it first. Either way the next step that runs there
    fails once with AbortedError, then the session registers its graphs again."""
    cluster = grpc_cluster({"ps": 1, "worker": 2})
    with tf.Graph().as_default():
        with tf.device(PS):
            v = tf.Variable(1.0)
            on_ps = v + 0.0
        with tf.device(W1):
            y = v * 2.0
        local = tf.constant(2.0) * 3.0  # on worker:0, the master's task
        with tf.Session(cluster.target("worker", 0), config=_config(period_ms)) as sess:
            sess.run(v.initializer)
            assert sess.run([y, on_ps, local]) == [2.0, 1.0, 6.0]

            cluster.kill("worker", 1)  # it holds no state: only its graphs are gone
            cluster.restart("worker", 1)
            assert sess.run(local) == 6.0  # steps that do not run there are not told
            _restart_reported_once(sess, y, "/job:worker/replica:0/task:1")
            assert sess.run(y) == 2.0

            cluster.kill("ps", 0)  # its variable goes with it
            with pytest.raises(errors.UnavailableError, match="/job:ps/replica:0/task:0"):
                sess.run(y)
            cluster.restart("ps", 0)
            _restart_reported_once(sess, on_ps, "/job:ps/replica:0/task:0")
            with pytest.raises(errors.FailedPreconditionError, match="uninitialized"):
                sess.run(y)
            sess.run(v.initializer)
            assert sess.run([y, on_ps]) == [2.0, 1.0]


def test_a_hung_task_fails_the_step_through_the_health_checks(grpc_cluster):
    """The step waits on an empty queue on the ps, and worker:1 waits in a Recv from it; the
    ps is stopped (no socket closes, no RPC fails): the master's health check finds it
    unreachable and the step fails within 5 s with UnavailableError naming it; so does a step
    all on the ps (one RunGraph, ended by closing the channel to the hung task)."""
    cluster = grpc_cluster({"ps": 1, "worker": 2})
    with tf.Graph().as_default():
        with tf.device("/job:worker/task:0"):
            mark = tf.FIFOQueue(10, tf.float32, shapes=[[]], shared_name="mark")
            started = mark.enqueue(1.0)
        with tf.device(PS):
            blocked = tf.FIFOQueue(10, tf.float32, shapes=[[]], shared_name="blocked")
            with tf.control_dependencies([started]):
                value = blocked.dequeue()
        with tf.device(W1):
            out = value + 1.0
        with tf.device(PS):
            warm = tf.random_uniform([])  # not folded: it crosses from the ps to worker:1
        with tf.device(W1):
            warm = warm + 1.0
        with tf.device(PS):
            alone = tf.random_uniform([]) + 1.0  # a step all on the ps
        target = cluster.target("worker", 0)
        with (
            tf.Session(target, config=_config(200)) as sess,
            tf.Session(target, config=_config(-1)) as watcher,
        ):
            # every channel of the step is connected: stopping the ps then fails no RPC
            assert 1.0 <= sess.run(warm) < 2.0
            assert 1.0 <= sess.run(alone) < 2.0  # planned and registered before the stop
            outcome: list = []

            def step():
                try:
                    sess.run(out)
                except errors.OpError as e:
                    outcome.append((time.monotonic(), e))

            thread = threading.Thread(target=step)
            thread.start()
            watcher.run(mark.dequeue())  # the step is in flight: it enqueued its mark
            cluster.stop("ps", 0)
            stopped_at = time.monotonic()
            thread.join(timeout=30)
            assert not thread.is_alive()
            failed_at, error = outcome[0]
            assert isinstance(error, errors.UnavailableError), error
            assert "/job:ps/replica:0/task:0 is unreachable" in str(error), error
            assert failed_at - stopped_at < FAIL_WITHIN_S
            started_at = time.monotonic()
            with pytest.raises(errors.UnavailableError, match="task:0 is unreachable"):
                sess.run(alone)
            assert time.monotonic() - started_at < FAIL_WITHIN_S

            cluster.kill("ps", 0)
            cluster.restart("ps", 0)
            with tf.device(PS):
                alive = tf.constant(1.0) + 1.0
            _restart_reported_once(sess, alive, "/job:ps/replica:0/task:0")
            assert sess.run(alive) == 2.0


def test_a_task_back_with_other_devices_is_placed_again():
    """worker:1 (a server in this process) has two CPUs, and a variable pinned to its CPU:1;
    it restarts with one CPU: after the restart is reported, the session places what was on
    the lost device again (soft placement: worker:1's CPU:0) and runs there."""
    from conftest import free_ports

    spec = tf.train.ClusterSpec({"worker": [f"127.0.0.1:{p}" for p in free_ports(2)]})

    def serve(task: int, cpus: int):
        config = tf.ConfigProto(device_count={"CPU": cpus})
        return tf.train.Server(spec, job_name="worker", task_index=task, config=config)

    servers = [serve(0, 1), serve(1, 2)]
    try:
        with tf.Graph().as_default():
            with tf.device("/job:worker/task:1/device:CPU:1"):
                v = tf.Variable(1.0)
                y = v * 2.0
            config = _config(-1)
            config.allow_soft_placement = True
            with tf.Session(servers[0].target, config=config) as sess:
                sess.run(v.initializer)
                assert sess.run(y) == 2.0
                servers[1]._server.stop()
                servers[1] = serve(1, 1)
                _restart_reported_once(sess, y, "/job:worker/replica:0/task:1")
                sess.run(v.initializer)
                metadata = tf.RunMetadata()
                options = tf.RunOptions(output_partition_graphs=True)
                assert sess.run(y, options=options, run_metadata=metadata) == 2.0
                devices = {n.device for g in metadata.partition_graphs for n in g.node}
                assert "/job:worker/replica:0/task:1/device:CPU:0" in devices
                assert not any(d.endswith("task:1/device:CPU:1") for d in devices)
    finally:
        for server in servers:
            server._server.stop()


@pytest.mark.parametrize("period_ms", [-1, 200], ids=["unchecked", "checked"])
def test_a_restarted_task_that_hangs_fails_the_step_in_bounded_time(grpc_cluster, period_ms):
    """The ps restarts, the session learns it (AbortedError) and drops its plans, then the ps
    hangs: the next step registers its graph there again, and that registration no longer
    waits the 60 s of a control RPC: a health check ends it with UnavailableError naming the
    ps (before: CancelledError 'Channel closed'), or, unchecked, the step's deadline does."""
    cluster = grpc_cluster({"ps": 1, "worker": 1})
    deadline_ms = 2000
    with tf.Graph().as_default():
        with tf.device(PS):
            alone = tf.random_uniform([]) + 1.0
        with tf.Session(cluster.target("worker", 0), config=_config(period_ms)) as sess:
            sess.run(alone)
            cluster.kill("ps", 0)
            cluster.restart("ps", 0)
            _restart_reported_once(sess, alone, "/job:ps/replica:0/task:0", period_ms > 0)
            cluster.stop("ps", 0)
            started_at = time.monotonic()
            if period_ms > 0:
                with pytest.raises(errors.UnavailableError, match="task:0 is unreachable"):
                    sess.run(alone)
                assert time.monotonic() - started_at < FAIL_WITHIN_S
            else:
                expected = "RegisterGraph to /job:ps/replica:0/task:0 passed its deadline"
                with pytest.raises(errors.DeadlineExceededError, match=expected):
                    sess.run(alone, options=tf.RunOptions(timeout_in_ms=deadline_ms))
                assert time.monotonic() - started_at < deadline_ms / 1000 + FAIL_WITHIN_S
