"""Whether steps overlap their expensive kernels on the pool or run inline (runtime/overlap.py):
the trial's decisions on given step times, the same values either way, and the thread settings
a Session is given."""

from __future__ import annotations

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.framework.function import Defun
from flowgraph.runtime import overlap
from flowgraph.runtime.overlap import OverlapChoice
from tests.helpers import local_plans


def _trial(choice, inline_s, pooled_s):
    """Runs one trial on `choice` with these step times; returns the ways it asked for."""
    ways = []
    while choice.chosen is None:
        pooled = choice.pooled()
        ways.append(pooled)
        choice.record(pooled, pooled_s if pooled else inline_s)
    return ways


@pytest.mark.parametrize(
    "inline_s,pooled_s,chosen",
    [(1.0, 2.0, False), (2.0, 1.0, True), (1.0, 0.95, False)],  # the pool must save 10%
)
def test_a_trial_alternates_and_keeps_the_faster_way(inline_s, pooled_s, chosen):
    choice = OverlapChoice()
    ways = _trial(choice, inline_s, pooled_s)
    assert ways == [True, False] * (overlap.TRIAL_PAIRS + 1)  # the pool first
    assert choice.chosen is chosen
    assert choice.pooled() is chosen
    assert choice.reference == (pooled_s if chosen else inline_s)


def test_the_trial_skips_the_first_pair_and_compares_pairs():
    """The load changes during the trial: each pooled step is 0.8x the inline one beside it,
    although the pooled steps' median (2.0) is above the inline one (1.5)."""
    choice = OverlapChoice()
    times = {True: [9.0, 0.8, 0.8, 2.4, 3.2], False: [0.1, 1.0, 1.0, 3.0, 4.0]}
    while choice.chosen is None:
        pooled = choice.pooled()
        choice.record(pooled, times[pooled].pop(0))
    assert choice.chosen is True and choice.reference == 1.6


def test_a_drifting_step_time_starts_a_new_trial():
    choice = OverlapChoice()
    _trial(choice, 1.0, 3.0)
    for _ in range(20):
        choice.record(False, 1.1)  # within the band: nothing changes
    assert choice.chosen is False
    choice.record(True, 50.0)  # a step of the other way (a concurrent trial's) is ignored
    assert choice.chosen is False
    for _ in range(20):
        choice.record(False, 10.0)  # the inputs grew: inline steps take 10x longer
        if choice.chosen is None:
            break
    assert choice.chosen is None
    _trial(choice, 10.0, 4.0)
    assert choice.chosen is True and choice.interval == overlap.FIRST_RETRY  # it changed


def test_a_confirmed_choice_is_tried_again_less_and_less_often():
    choice = OverlapChoice()
    intervals = []
    for _ in range(3):
        _trial(choice, 1.0, 2.0)
        intervals.append(choice.interval)
        for _ in range(choice.interval):
            assert choice.chosen is False
            choice.record(False, 1.0)
        assert choice.chosen is None  # retried after `interval` steps
    first = overlap.FIRST_RETRY
    assert intervals == [first, 2 * first, 4 * first]


def _two_chains():
    """Two independent matmul chains (the pool can overlap them) and an Adam step on them."""
    g = tf.Graph()
    with g.as_default():
        rng = np.random.RandomState(0)
        x = tf.placeholder(tf.float32, [None, 16], name="x")
        ws = [tf.Variable(rng.standard_normal((16, 16)).astype(np.float32) / 4) for _ in range(2)]
        ends = []
        for w in ws:
            h = x
            for _ in range(3):
                h = tf.tanh(tf.matmul(h, w))
            ends.append(h)
        loss = tf.reduce_mean(tf.square(ends[0] - ends[1]))
        train = tf.train.AdamOptimizer(0.01).minimize(loss)
        init = tf.global_variables_initializer()
    return g, x, init, [train, loss, ends[0]]


def _steps(config, steps=12):
    g, x, init, fetches = _two_chains()
    rng = np.random.RandomState(1)
    with tf.Session(graph=g, config=config) as sess:
        sess.run(init)
        return [
            sess.run(fetches, {x: rng.rand(8, 16).astype(np.float32)})[1:] for _ in range(steps)
        ]


def test_the_same_values_during_the_trial_inline_pooled_and_on_one_thread(runs, monkeypatch):
    """Training steps during the trial (alternating ways), with the pool or inline chosen, and
    on one thread: every step's loss and output are the same."""
    pooled = tf.ConfigProto(inter_op_parallelism_threads=2)
    trial_steps = 2 * (overlap.TRIAL_PAIRS + 1)
    trial = _steps(pooled, trial_steps)
    assert runs == {"schedule": 1 + trial_steps // 2, "loop": trial_steps // 2}  # init: inline
    ways = {}
    for way in (True, False):
        monkeypatch.setattr(OverlapChoice, "pooled", lambda self, way=way: way)
        runs.update(schedule=0, loop=0)
        ways[way] = _steps(pooled)
        assert runs == ({"schedule": 1, "loop": 12} if way else {"schedule": 13, "loop": 0})
    one_thread = _steps(tf.ConfigProto(inter_op_parallelism_threads=1))
    for got in (ways[True], ways[False], one_thread):
        for a, b in zip(trial, got):  # the trial's steps, then the others' first ones
            np.testing.assert_allclose(a[0], b[0], rtol=1e-6)
            np.testing.assert_allclose(a[1], b[1], rtol=1e-6, atol=1e-7)
        for a, b in zip(ways[False], got, strict=True):
            np.testing.assert_allclose(a[0], b[0], rtol=1e-6)
            np.testing.assert_allclose(a[1], b[1], rtol=1e-6, atol=1e-7)


def test_explicit_thread_settings_are_honoured(runs):
    """inter_op 1: no inter-op pool, every step inline (no trial); intra_op sets how many
    threads work on one kernel, inter_op how many the device's pool has."""
    _steps(tf.ConfigProto(inter_op_parallelism_threads=1), steps=3)
    assert runs == {"schedule": 4, "loop": 0}
    g = tf.Graph()
    with g.as_default():
        tf.constant(1.0)
    config = tf.ConfigProto(inter_op_parallelism_threads=3, intra_op_parallelism_threads=1)
    with tf.Session(graph=g, config=config) as sess:
        sess.run(g.get_operations()[0].outputs[0])
        (plan,) = local_plans(sess)
        pool = plan.device.thread_pool
        assert (pool.num_threads, pool.intra_op_threads) == (3, 1)
        assert pool.num_shards(10**6, 10**6) == 1  # one thread per kernel: never sharded


def test_plans_that_call_functions_keep_the_pool(runs):
    """A function call may wait for other nodes of its step: no trial, every step pooled."""
    g = tf.Graph()
    with g.as_default():
        a = tf.placeholder(tf.float32, [2, 2])

        @Defun(tf.float32)
        def double(x):
            return x * 2.0

        fetches = [double(tf.matmul(a, a)), tf.matmul(a, a, transpose_a=True)]
    ones = np.ones((2, 2), np.float32)
    with tf.Session(graph=g, config=tf.ConfigProto(inter_op_parallelism_threads=2)) as sess:
        for _ in range(3):
            got = sess.run(fetches, {a: ones})
        (plan,) = [p for p in local_plans(sess) if p.schedule]
        assert plan.schedule.expensive and plan.schedule.overlap is None
    assert runs == {"schedule": 0, "loop": 3}
    np.testing.assert_array_equal(got[0], np.full((2, 2), 4.0))
