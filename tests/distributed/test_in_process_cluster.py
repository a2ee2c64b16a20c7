"""Master and workers of several tasks in one process (issue 8): variables on ps, compute on
workers, loops and conds across tasks, errors naming the task; every result equal to the
same graph run by a local Session. Tensors cross tasks only through RecvTensor calls made
via the worker cache (counted here)."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.distributed.local import InProcessCluster

PS = "/job:ps/task:0"
W0, W1 = "/job:worker/task:0", "/job:worker/task:1"


@pytest.fixture
def cluster():
    c = InProcessCluster({"worker": 2, "ps": 1})
    recvs = []
    for worker in c.workers.values():  # count the RecvTensor calls each worker serves
        real = worker.recv_tensor_async

        def counted(req, done, *opts, real=real, task=worker.task):
            recvs.append((task, req.rendezvous_key))
            real(req, done, *opts)

        worker.recv_tensor_async = counted
    c.recvs = recvs
    yield c
    c.close()


def _both(build, fetch_steps=1, feed=None):
    """Runs `build(dev)` in a 3-task cluster (dev maps a role to a task) and locally, and
    returns both lists of fetched values (fetched `fetch_steps` times, after init)."""
    results = []
    for where in ("cluster", "local"):
        with tf.Graph().as_default():
            if where == "cluster":
                c = InProcessCluster({"worker": 2, "ps": 1})
                dev = {"ps": PS, "w0": W0, "w1": W1}
                target = c.target
            else:
                c, dev, target = None, {"ps": "", "w0": "", "w1": ""}, ""
            fetches = build(dev)
            with tf.Session(target) as s:
                s.run(tf.global_variables_initializer())
                results.append([s.run(fetches, feed) for _ in range(fetch_steps)])
            if c is not None:
                c.close()
    return results


def test_devices_of_every_task_are_listed(cluster):
    with tf.Session(cluster.target) as s:
        names = [d.name for d in s.list_devices()]
    assert names == [
        "/job:worker/replica:0/task:0/device:CPU:0",
        "/job:worker/replica:0/task:1/device:CPU:0",
        "/job:ps/replica:0/task:0/device:CPU:0",
    ]


def test_variables_on_ps_compute_on_workers(cluster):
    with tf.device(PS):
        w = tf.Variable([[1.0, 2.0], [3.0, 4.0]], name="w")
    x = tf.placeholder(tf.float32, [None, 2])
    with tf.device(W1):
        y = tf.matmul(x, w)
    with tf.device(W0):
        z = tf.reduce_sum(y) * 2.0
    with tf.Session(cluster.target) as s:
        s.run(w.initializer)
        got = s.run([y, z], {x: [[1.0, 1.0]]})
    np.testing.assert_allclose(got[0], [[4.0, 6.0]])
    assert got[1] == 20.0
    tasks = {task for task, _ in cluster.recvs}
    assert "/job:ps/replica:0/task:0" in tasks and "/job:worker/replica:0/task:1" in tasks
    ps = cluster.workers["/job:ps/replica:0/task:0"]
    assert any(d.resource_mgr.containers() for d in ps.devices)  # the variable lives there


def test_training_with_variables_on_ps_equals_local():
    def build(dev):
        tf.set_random_seed(3)
        x = tf.constant(np.linspace(-1, 1, 12, dtype=np.float32).reshape(6, 2))
        t = tf.constant(np.arange(6, dtype=np.float32).reshape(6, 1))
        with tf.device(dev["ps"]):
            w = tf.Variable(tf.random_normal([2, 1], seed=1), name="w")
            b = tf.Variable(0.5, name="b")
        with tf.device(dev["w1"]):
            loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - t))
        with tf.device(dev["w0"]):
            train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
        with tf.control_dependencies([train]):
            return tf.identity(loss)

    cluster_losses, local_losses = _both(build, fetch_steps=5)
    np.testing.assert_allclose(cluster_losses, local_losses, rtol=1e-6)
    assert cluster_losses[-1] < cluster_losses[0]


@pytest.mark.parametrize("parallel_iterations", [1, 8])
def test_loop_across_tasks_equals_local(parallel_iterations):
    def build(dev):
        with tf.device(dev["ps"]):
            v = tf.Variable(1.5, name="v")

        def body(i, acc):
            with tf.device(dev["w1"]):
                term = acc * 0.5 + v
            with tf.device(dev["w0"]):
                return i + 1, term + tf.cast(i, tf.float32)

        i0 = tf.constant(0)
        return tf.while_loop(
            lambda i, a: i < 30,
            body,
            [i0, tf.constant(0.0)],
            parallel_iterations=parallel_iterations,
        )

    in_cluster, local = _both(build)
    assert in_cluster == local


def test_cond_across_tasks_and_gradient_of_a_cross_task_loop_equal_local():
    def build(dev):
        with tf.device(dev["ps"]):
            x = tf.Variable(0.7, name="x")
        p = tf.placeholder(tf.bool, [])
        with tf.device(dev["w1"]):
            c = tf.cond(p, lambda: tf.sin(x), lambda: tf.cos(x))

        def body(i, acc):
            with tf.device(dev["w1"]):
                nxt = acc * x
            with tf.device(dev["w0"]):
                return i + 1, nxt + 0.1

        _, y = tf.while_loop(lambda i, a: i < 4, body, [tf.constant(0), tf.constant(1.0)])
        (g,) = tf.gradients(y, [x])
        return {"cond": c, "loop": y, "grad": g, "p": p}

    results = []
    for flag in (True, False):
        feed_builder = []

        def wrapped(dev, feed_builder=feed_builder):
            out = build(dev)
            feed_builder.append(out.pop("p"))
            return out

        for where in ("cluster", "local"):
            with tf.Graph().as_default():
                c = InProcessCluster({"worker": 2, "ps": 1}) if where == "cluster" else None
                dev = {"ps": PS, "w0": W0, "w1": W1} if c else {"ps": "", "w0": "", "w1": ""}
                fetches = wrapped(dev)
                with tf.Session(c.target if c else "") as s:
                    s.run(tf.global_variables_initializer())
                    results.append(s.run(fetches, {feed_builder[-1]: flag}))
                if c is not None:
                    c.close()
    for in_cluster, local in (results[0:2], results[2:4]):
        for k in ("cond", "loop", "grad"):
            np.testing.assert_allclose(in_cluster[k], local[k], rtol=1e-6)


def test_an_error_names_its_task_and_ends_every_task_s_step(cluster):
    x = tf.placeholder(tf.float32, [])
    with tf.device(W1):
        bad = tf.debugging.check_numerics(x / 0.0 * 0.0, "nan here")
    with tf.device(W0):
        out = bad + 1.0
    q = tf.FIFOQueue(1, tf.float32)
    with tf.device(PS):
        blocked = q.dequeue()  # would wait forever: the failure must cancel it
    with tf.Session(cluster.target) as s:
        with pytest.raises(tf.errors.InvalidArgumentError) as info:
            s.run([out, blocked], {x: 1.0})
        assert "/job:worker/replica:0/task:1" in str(info.value)
        assert "nan here" in str(info.value)
        assert s.run(x + 1.0, {x: 2.0}) == 3.0
    for worker in cluster.workers.values():
        assert len(worker.rendezvous_mgr) == 0 and not worker._steps


def test_close_cancels_a_step_blocked_on_another_task(cluster, monkeypatch):
    """close() while the dequeue waits on ps and worker:1 waits in a Recv from ps: the run
    fails with CancelledError. close() is called once the dequeue has parked on ps (its
    CancelHook armed with the ps step's cancellation manager), never before the step runs."""
    import threading

    from flowgraph.kernels.cpu import blocking

    ps = cluster.workers["/job:ps/replica:0/task:0"]
    parked = threading.Event()
    arm = blocking.CancelHook.arm

    def arm_and_signal(hook):
        arm(hook)
        if any(step.cancellation is hook._manager for step in list(ps._steps.values())):
            parked.set()

    monkeypatch.setattr(blocking.CancelHook, "arm", arm_and_signal)
    q = tf.FIFOQueue(1, tf.float32)
    with tf.device(PS):
        item = q.dequeue()
    with tf.device(W1):
        out = item * 2.0
    s = tf.Session(cluster.target)
    box = {}

    def run():
        try:
            s.run(out)
        except BaseException as e:  # noqa: BLE001 - the test asserts its type
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    assert parked.wait(60), "the dequeue never blocked on ps"
    s.close()
    t.join(60)
    assert not t.is_alive(), "close() left the step running"
    assert isinstance(box.get("error"), tf.errors.CancelledError), repr(box.get("error"))


def test_partial_run_across_tasks(cluster):
    a = tf.placeholder(tf.float32, [])
    b = tf.placeholder(tf.float32, [])
    with tf.device(W1):
        r1 = a * 2.0
    with tf.device(PS):
        r2 = r1 + b
    with tf.Session(cluster.target) as s:
        h = s.partial_run_setup([r1, r2], [a, b])
        assert s.partial_run(h, r1, {a: 3.0}) == 6.0
        assert s.partial_run(h, r2, {b: 1.0}) == 7.0
    for worker in cluster.workers.values():
        assert len(worker.rendezvous_mgr) == 0


@pytest.mark.parametrize("parallel_iterations", [1, 32])
def test_a_thousand_iterations_across_tasks_complete(cluster, parallel_iterations):
    """Every iteration sends to the other task and back (RecvTensor per iteration and key)."""

    def body(i, acc):
        with tf.device(W1):
            doubled = acc * 2.0
        with tf.device(W0):
            return i + 1, doubled - acc + 1.0  # acc + 1, computed across both tasks

    with tf.device(W0):
        _, total = tf.while_loop(
            lambda i, a: i < 1000,
            body,
            [tf.constant(0), tf.constant(0.0)],
            parallel_iterations=parallel_iterations,
        )
    with tf.Session(cluster.target) as s:
        assert s.run(total, options=tf.RunOptions(timeout_in_ms=60000)) == 1000.0
    assert len(cluster.recvs) >= 2000  # both directions, every iteration
