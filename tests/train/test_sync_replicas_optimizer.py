"""SyncReplicasOptimizer in one process: several replicas share one graph and one Session, each
with its own optimizer (so its own local step), its accumulators and token queue shared through
their shared_name, exactly as between-graph replicas share them on a parameter server. Threads
run the replicas; the chief's sync op runs in a thread the test joins (or the hook's queue
runner), so every step is deterministic and checked against the hand-computed averaged update.
"""

import threading

import numpy as np
import pytest

import flowgraph as tf

LR = 0.5
TARGETS = [
    np.array([1.0, 2.0], np.float32),
    np.array([3.0, -1.0], np.float32),
    np.array([0.0, 5.0], np.float32),
]


class Replicas:
    """`n` replicas of the model loss_i = 0.5 * |w - TARGETS[i]|^2 on one graph."""

    def __init__(self, n, replicas_to_aggregate, total_num_replicas=None, **kwargs):
        self.graph = tf.Graph()
        with self.graph.as_default():
            self.global_step = tf.train.get_or_create_global_step()
            self.w = tf.Variable([0.0, 0.0], name="w")
            self.opts, self.train_ops = [], []
            for i in range(n):
                loss = 0.5 * tf.reduce_sum(tf.square(self.w - TARGETS[i]))
                opt = tf.train.SyncReplicasOptimizer(
                    tf.train.GradientDescentOptimizer(LR),
                    replicas_to_aggregate=replicas_to_aggregate,
                    total_num_replicas=total_num_replicas,
                    **kwargs,
                )
                self.train_ops.append(opt.minimize(loss, global_step=self.global_step))
                self.opts.append(opt)
            self.chief = self.opts[0]
            self.sync_op = self.chief.get_chief_queue_runner().enqueue_ops[0]
            self.num_accumulated = self.chief._accumulator_list[0][0].num_accumulated()
            init = [tf.global_variables_initializer(), tf.local_variables_initializer()]
        self.sess = tf.Session(graph=self.graph)
        self.sess.run(init)
        self.sess.run(self.chief.chief_init_op)
        for opt in self.opts[1:]:
            self.sess.run(opt.local_step_init_op)

    def run_together(self, replicas, with_chief=True):
        """Runs the train ops of `replicas` (and one sync op) in threads; waits for all."""
        errors = []

        def run(op):
            try:
                self.sess.run(op)
            except Exception as e:  # noqa: BLE001 - reported by the test's assertion
                errors.append(e)

        ops = [self.train_ops[i] for i in replicas] + ([self.sync_op] if with_chief else [])
        threads = [threading.Thread(target=run, args=(op,)) for op in ops]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert not any(t.is_alive() for t in threads), "a replica is still blocked"
        assert not errors, errors

    def local_steps(self):
        return self.sess.run(self.graph.get_collection(tf.GraphKeys.LOCAL_VARIABLES))

    def values(self):
        return self.sess.run([self.w, self.global_step, self.num_accumulated])


def _step(w, replicas):
    """One synchronous update: w - LR * mean of the replicas' gradients (w - target)."""
    return w - LR * np.mean([w - TARGETS[i] for i in replicas], axis=0)


def test_graph_layout_is_tensorflows():
    r = Replicas(1, replicas_to_aggregate=1)
    ops = {op.name: op for op in r.graph.get_operations()}
    accum = ops["sync_replicas/conditional_accumulator"]
    assert accum.type == "ResourceConditionalAccumulator"
    assert accum.get_attr("shared_name") in (b"w:0/grad_accum", "w:0/grad_accum")
    assert ops["sync_token_q"].type == "FIFOQueueV2"
    assert ops["sync_replicas/ResourceAccumulatorApplyGradient"].inputs[1].name == (
        "sync_rep_local_step/read:0"
    )
    local = r.graph.get_collection(tf.GraphKeys.LOCAL_VARIABLES)
    assert [v.op.name for v in local] == ["sync_rep_local_step"]
    assert r.train_ops[0].op.type == "Assign"  # a Tensor, as in TF
    assert "sync_token_q_Dequeue" in [t.op.name for t in r.train_ops[0].op.inputs]


def test_replicas_apply_the_mean_of_their_gradients_each_step():
    r = Replicas(3, replicas_to_aggregate=3)
    w = np.zeros(2, np.float32)
    for step in range(1, 4):
        r.run_together([0, 1, 2])
        w = _step(w, [0, 1, 2])
        got_w, got_step, pending = r.values()
        np.testing.assert_allclose(got_w, w, rtol=1e-6)
        assert (got_step, pending) == (step, 0)
        # No initial tokens: every replica waits for the update and records its step.
        assert r.local_steps() == [step] * 3


def test_first_step_after_the_initial_tokens_is_wasted_as_in_tensorflow():
    """TF's own test: the initial tokens hold step 0, so the second batch's gradients are stale
    and dropped; after that, each batch is one update."""
    r = Replicas(2, replicas_to_aggregate=2)
    with r.graph.as_default():
        r.sess.run(r.chief.get_init_tokens_op())
    r.run_together([0, 1])  # uses the two initial tokens, then the chief updates
    w1 = _step(np.zeros(2, np.float32), [0, 1])
    np.testing.assert_allclose(r.values()[0], w1, rtol=1e-6)
    assert r.local_steps() == [0, 0]
    r.run_together([0, 1], with_chief=False)  # local step 0 < global step 1: dropped
    got_w, got_step, pending = r.values()
    np.testing.assert_allclose(got_w, w1, rtol=1e-6)
    assert (got_step, pending, r.local_steps()) == (1, 0, [1, 1])
    r.run_together([0, 1])  # the token queue is empty: the replicas wait for the update
    got_w, got_step, _ = r.values()
    np.testing.assert_allclose(got_w, _step(w1, [0, 1]), rtol=1e-6)
    assert (got_step, r.local_steps()) == (2, [2, 2])


def test_backup_worker_gradients_are_dropped():
    """replicas_to_aggregate=2 of 3: the update goes ahead on the two fastest replicas; the
    straggler's gradient carries an old local step and is dropped (whitepaper §7)."""
    r = Replicas(3, replicas_to_aggregate=2, total_num_replicas=3)
    assert r.chief._tokens_per_step == 3  # one for the straggler too
    w = np.zeros(2, np.float32)
    for step in range(1, 4):
        r.run_together([0, 1])
        w = _step(w, [0, 1])
        np.testing.assert_allclose(r.values()[0], w, rtol=1e-6)
        r.run_together([2], with_chief=False)  # the straggler, one step behind
        got_w, got_step, pending = r.values()
        np.testing.assert_allclose(got_w, w, rtol=1e-6)
        assert (got_step, pending, r.local_steps()[2]) == (step, 0, step)


def test_fewer_replicas_than_gradients_to_aggregate():
    """total_num_replicas < replicas_to_aggregate: one replica computes several batches per
    update, and needs that many initial tokens."""
    r = Replicas(1, replicas_to_aggregate=3, total_num_replicas=1)
    with pytest.raises(ValueError, match=r"Too few tokens .* 1 \(given\) vs 2 \(needed\)"):
        r.chief.get_init_tokens_op(1)
    with r.graph.as_default():
        r.sess.run(r.chief.get_init_tokens_op(2))
    done = threading.Thread(target=r.sess.run, args=(r.sync_op,))
    done.start()
    for _ in range(3):
        r.sess.run(r.train_ops[0])  # three batches at local step 0; the third waits
    done.join(timeout=30)
    got_w, got_step, pending = r.values()
    np.testing.assert_allclose(got_w, _step(np.zeros(2, np.float32), [0]), rtol=1e-6)
    assert (got_step, pending) == (1, 0)


def test_sparse_gradients_are_averaged_per_row():
    """IndexedSlices gradients go to a SparseConditionalAccumulator: each row's mean is over
    the replicas whose gradient had that row."""
    graph = tf.Graph()
    rows = [[0, 2], [2, 3]]
    with graph.as_default():
        step = tf.train.get_or_create_global_step()
        emb = tf.Variable(np.zeros((4, 3), np.float32), name="emb")
        opts, trains = [], []
        for i, ids in enumerate(rows):
            loss = (i + 1.0) * tf.reduce_sum(tf.gather(emb, ids))
            opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(1.0), 2)
            trains.append(opt.minimize(loss, global_step=step))
            opts.append(opt)
        assert opts[0]._accumulator_list[0][0].accumulator_ref.op.type == (
            "SparseConditionalAccumulator"
        )
        sync_op = opts[0].get_chief_queue_runner().enqueue_ops[0]
        init = [tf.global_variables_initializer(), tf.local_variables_initializer()]
    sess = tf.Session(graph=graph)
    sess.run(init)
    sess.run([opts[0].chief_init_op, opts[1].local_step_init_op, opts[0].get_init_tokens_op()])
    threads = [threading.Thread(target=sess.run, args=(op,)) for op in trains + [sync_op]]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    expected = np.zeros((4, 3), np.float32)
    expected[0] = -1.0  # only replica 0 (gradient 1)
    expected[2] = -1.5  # mean of 1 and 2
    expected[3] = -2.0  # only replica 1 (gradient 2)
    np.testing.assert_allclose(sess.run(emb), expected)
    assert sess.run(step) == 1


def test_variable_averages_are_applied_after_each_update():
    ema = tf.train.ExponentialMovingAverage(0.5)
    graph = tf.Graph()
    with graph.as_default():
        step = tf.train.get_or_create_global_step()
        w = tf.Variable([0.0, 0.0], name="w")
        opt = tf.train.SyncReplicasOptimizer(
            tf.train.GradientDescentOptimizer(LR),
            replicas_to_aggregate=1,
            variable_averages=ema,
            variables_to_average=[w],
        )
        train = opt.minimize(0.5 * tf.reduce_sum(tf.square(w - TARGETS[0])), global_step=step)
        sync_op = opt.get_chief_queue_runner().enqueue_ops[0]
        shadow = ema.average(w)
        init = [tf.global_variables_initializer(), tf.local_variables_initializer()]
    sess = tf.Session(graph=graph)
    sess.run(init)
    sess.run(opt.chief_init_op)
    chief = threading.Thread(target=sess.run, args=(sync_op,))
    chief.start()
    sess.run(train)
    chief.join(timeout=30)
    w1 = _step(np.zeros(2, np.float32), [0])
    np.testing.assert_allclose(sess.run(w), w1, rtol=1e-6)
    np.testing.assert_allclose(sess.run(shadow), 0.5 * w1, rtol=1e-6)


def test_hook_trains_a_chief_in_a_monitored_training_session():
    """The chief's hook initializes the local step and the accumulators, puts the initial
    token and starts the sync queue runner; run n >= 2 returns after update n - 1."""
    graph = tf.Graph()
    with graph.as_default():
        step = tf.train.get_or_create_global_step()
        w = tf.Variable([0.0, 0.0], name="w")
        opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(LR), 1)
        train = opt.minimize(0.5 * tf.reduce_sum(tf.square(w - TARGETS[1])), global_step=step)
        hook = opt.make_session_run_hook(is_chief=True)
        with tf.train.MonitoredTrainingSession(
            hooks=[hook], stop_grace_period_secs=0, save_summaries_steps=None
        ) as sess:
            for _ in range(5):
                sess.run(train)
            got_w, got_step = sess.run([w, step])
    expected = np.zeros(2, np.float32)
    for _ in range(4):
        expected = _step(expected, [1])
    assert got_step == 4
    np.testing.assert_allclose(got_w, expected, rtol=1e-6)


def test_errors_name_what_is_missing():
    with tf.Graph().as_default():
        step = tf.train.get_or_create_global_step()
        w = tf.Variable(1.0)
        opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1), 2)
        with pytest.raises(ValueError, match="after apply_gradients"):
            opt.get_chief_queue_runner()
        with pytest.raises(ValueError, match="after apply_gradients"):
            opt.get_init_tokens_op()
        with pytest.raises(ValueError, match="should be called before using the hook"):
            opt.make_session_run_hook(True).begin()
        with pytest.raises(ValueError, match="Global step is required"):
            opt.apply_gradients([(tf.constant(1.0), w)])
        with pytest.raises(ValueError, match="Must supply at least one variable"):
            opt.apply_gradients([], global_step=step)
        assert opt.compute_gradients(w * 3.0)[0][1] is w


def test_between_graph_replicas_on_an_in_process_cluster():
    """Two workers, each its own graph and Session against one ps task (state shared only
    through the ps's containers, as between processes); the chief's hook runs the sync op."""
    from flowgraph.distributed.local import InProcessCluster

    cluster_spec = tf.train.ClusterSpec({"ps": ["ps:1"], "worker": ["w0:1", "w1:1"]})
    cluster = InProcessCluster({"ps": 1, "worker": 2})
    workers = []
    try:
        for task in range(2):
            graph = tf.Graph()
            with graph.as_default():
                setter = tf.train.replica_device_setter(
                    worker_device=f"/job:worker/task:{task}", cluster=cluster_spec
                )
                with tf.device(setter):
                    step = tf.train.get_or_create_global_step()
                    w = tf.Variable([0.0, 0.0], name="w")
                    opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(LR), 2)
                    loss = 0.5 * tf.reduce_sum(tf.square(w - TARGETS[task]))
                    train = opt.minimize(loss, global_step=step)
                hook = opt.make_session_run_hook(is_chief=task == 0, num_tokens=0)
                hook.begin()
                init = tf.global_variables_initializer() if task == 0 else tf.no_op()
                local_init = tf.local_variables_initializer()
            assert opt._local_step.op.device == f"/job:worker/task:{task}"
            sess = tf.Session(cluster.target, graph=graph)
            sess.run([init, local_init])
            workers.append((sess, train, w, step, hook))
        coord = tf.train.Coordinator()
        for sess, _, _, _, hook in workers:
            hook.after_create_session(sess, coord)
        expected = np.zeros(2, np.float32)
        for k in range(1, 4):
            threads = [threading.Thread(target=s.run, args=(t,)) for s, t, *_ in workers]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=30)
            assert not any(t.is_alive() for t in threads)
            expected = _step(expected, [0, 1])
            for sess, _, w, step, _ in workers:  # both workers read the ps's variables
                got_w, got_step = sess.run([w, step])
                np.testing.assert_allclose(got_w, expected, rtol=1e-6)
                assert got_step == k
        coord.request_stop()
    finally:
        for sess, *_ in workers:
            sess.close()
        cluster.close()
