"""Where the executor runs expensive kernels (runtime/executor.py): one at a time on its own
thread while only cheap nodes are ready (no hand-off to the pool), on the pool's workers when
independent expensive kernels can overlap."""

import numpy as np
import pytest

import flowgraph as tf

FULL_TRACE = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)


def _threads(md, prefixes):
    """node name -> thread ids that ran it, for the nodes whose names start with a prefix."""
    seen = {}
    for dev in md.step_stats.dev_stats:
        for n in dev.node_stats:
            if n.node_name.startswith(prefixes):
                seen.setdefault(n.node_name, set()).add(n.thread_id)
    return seen


def _session():
    return tf.Session(config=tf.ConfigProto(inter_op_parallelism_threads=2))


def test_a_loop_of_one_matmul_runs_on_the_dispatch_thread():
    """W6b's shape: the MatMul of each iteration is ready beside the loop counter's cheap
    nodes only, so it runs on the thread that runs them, as the Add does."""
    rng = np.random.RandomState(0)
    w0 = rng.standard_normal((32, 32)).astype(np.float32) / 8
    x0 = rng.standard_normal((32, 32)).astype(np.float32)
    w = tf.Variable(w0)
    _, x = tf.while_loop(
        lambda i, x: i < 5, lambda i, x: (i + 1, tf.tanh(tf.matmul(x, w))), [0, tf.constant(x0)]
    )
    with _session() as sess:
        sess.run(tf.global_variables_initializer())
        md = tf.RunMetadata()
        got = sess.run(x, options=FULL_TRACE, run_metadata=md)
    want = x0
    for _ in range(5):
        want = np.tanh(want @ w0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    threads = _threads(md, ("while/MatMul", "while/add"))
    assert {"while/MatMul", "while/add"} <= set(threads), threads
    assert len(set.union(*threads.values())) == 1, threads


def test_independent_matmul_chains_still_overlap():
    """W3's shape: with several chains ready, some products go to the pool's workers."""
    rng = np.random.RandomState(1)
    w0 = rng.standard_normal((64, 64)).astype(np.float32) / 8
    xs0 = [rng.standard_normal((64, 64)).astype(np.float32) for _ in range(4)]
    w = tf.Variable(w0)
    ends = []
    for x0 in xs0:
        h = tf.identity(tf.Variable(x0))
        for _ in range(3):
            h = tf.matmul(h, w)
        ends.append(h)
    total = tf.add_n(ends)
    with _session() as sess:
        sess.run(tf.global_variables_initializer())
        md = tf.RunMetadata()
        got = sess.run(total, options=FULL_TRACE, run_metadata=md)
    want = sum(x0 @ w0 @ w0 @ w0 for x0 in xs0)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    threads = _threads(md, ("MatMul",))
    assert len(threads) == 12, threads
    assert len(set.union(*threads.values())) >= 2, threads


def test_a_failure_while_a_kernel_waits_for_the_thread_is_raised():
    """A cheap node fails while an expensive kernel is deferred: the step raises the failure
    (and does not wait for the deferred kernel's completion)."""
    a = tf.placeholder(tf.float32, [4, 4])
    bad = tf.placeholder(tf.int32, [None])
    product = tf.matmul(a, a)
    other = tf.matmul(a, a, transpose_a=True)  # independent: the step runs the dispatch loop
    broken = tf.reshape(bad, [3])  # fails for a feed of another size
    with _session() as sess:
        feed = {a: np.eye(4, dtype=np.float32), bad: np.arange(4, dtype=np.int32)}
        with pytest.raises(tf.errors.InvalidArgumentError, match="Reshape"):
            sess.run([product, other, broken], feed)
        out = sess.run(product, feed)
    np.testing.assert_array_equal(out, np.eye(4, dtype=np.float32))
