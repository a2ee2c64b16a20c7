"""Between-graph data parallelism over real processes (whitepaper §7, Figure 7 top): two
worker clients, each with its own graph built under replica_device_setter and its own Session
to its worker's master, train one linear model whose variables live on two ps tasks,
asynchronously; both see every update, and the model converges."""

import threading

import numpy as np

import flowgraph as tf

TRUE_W = np.array([[2.0], [-3.0], [0.5]], np.float32)
STEPS = 60


def _worker_graph(spec, task: int):
    """Worker `task`'s own graph (between-graph replication): its train op and feeds."""
    graph = tf.Graph()
    with graph.as_default():
        setter = tf.train.replica_device_setter(
            cluster=spec, worker_device=f"/job:worker/task:{task}"
        )
        with tf.device(setter):
            step = tf.train.get_or_create_global_step()
            w = tf.get_variable("w", [3, 1], initializer=tf.zeros_initializer())
            b = tf.get_variable("b", [], initializer=tf.zeros_initializer())
            x = tf.placeholder(tf.float32, [None, 3])
            y = tf.placeholder(tf.float32, [None, 1])
            loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))
            train = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
    assert {w.device, b.device} == {"/job:ps/task:0", "/job:ps/task:1"}
    return graph, train, x, y


def _train(sess, train, x, y, task: int, errors: list) -> None:
    try:
        rng = np.random.default_rng(task)
        for _ in range(STEPS):
            xs = rng.standard_normal((16, 3)).astype(np.float32)
            sess.run(train, {x: xs, y: xs @ TRUE_W + 1.0})
    except Exception as e:  # noqa: BLE001  (reported by the test thread)
        errors.append(e)


def test_two_workers_train_one_model_on_two_ps_tasks(grpc_cluster):
    cluster = grpc_cluster({"ps": 2, "worker": 2})
    spec = tf.train.ClusterSpec(cluster.spec)
    with tf.Graph().as_default():  # the chief initializes the variables on the ps tasks
        with tf.device(tf.train.replica_device_setter(cluster=spec)):
            tf.train.get_or_create_global_step()
            tf.get_variable("w", [3, 1], initializer=tf.zeros_initializer())
            tf.get_variable("b", [], initializer=tf.zeros_initializer())
        with tf.Session(cluster.target("worker", 0)) as sess:
            sess.run(tf.global_variables_initializer())
    errors: list = []
    workers, sessions = [], []
    for task in (0, 1):  # graphs are built here; the threads only run steps
        graph, train, x, y = _worker_graph(spec, task)
        sess = tf.Session(cluster.target("worker", task), graph=graph)
        sessions.append(sess)
        workers.append(threading.Thread(target=_train, args=(sess, train, x, y, task, errors)))
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join(timeout=240)
    for sess in sessions:
        sess.close()
    assert not errors, errors
    assert not any(thread.is_alive() for thread in workers)
    with tf.Graph().as_default():
        with tf.device(tf.train.replica_device_setter(cluster=spec)):
            step = tf.train.get_or_create_global_step()
            w = tf.get_variable("w", [3, 1])
            b = tf.get_variable("b", [])
        with tf.Session(cluster.target("worker", 1)) as sess:
            final_step, final_w, final_b = sess.run([step, w, b])
    assert final_step == 2 * STEPS  # every update of both workers reached the ps
    np.testing.assert_allclose(final_w, TRUE_W, atol=0.05)
    np.testing.assert_allclose(final_b, 1.0, atol=0.05)
