"""Session.make_callable and _make_callable_from_options through the master's MakeCallable,
RunCallable and ReleaseCallable (TF's CallableOptions: feed, fetch, target, run_options,
tensor_connection): the signature is planned once, each call is one RunCallable, and the
callable is released when dropped."""

import gc

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core.protos import CallableOptions, RunMetadata, RunOptions
from flowgraph.distributed import grpc_service, messages, step_plan
from flowgraph.session import remote


class _Spy:
    """Counts the master's RPCs of a Session, forwarding each."""

    def __init__(self, master):
        self.master = master
        self.calls: dict[str, int] = {}

    def __getattr__(self, name):
        method = getattr(self.master, name)

        def counted(*args, **kwargs):
            self.calls[name] = self.calls.get(name, 0) + 1
            return method(*args, **kwargs)

        return counted


@pytest.fixture
def plans_built(monkeypatch):
    """The number of StepPlans (prune, place, partition, register) built so far."""
    built = []
    real = step_plan.StepPlan.__init__

    def counting(self, *args):
        built.append(1)
        real(self, *args)

    monkeypatch.setattr(step_plan.StepPlan, "__init__", counting)
    return built


@pytest.mark.parametrize("in_process", [True, False])
def test_a_callable_is_planned_once_and_run_by_run_callable(plans_built, in_process):
    """Each call is one RunCallable, or with a master of this process, one LocalRun that
    skips the requests (distributed/local_run.py)."""
    x = tf.placeholder(tf.float32, [2], name="x")
    y = tf.reduce_sum(x * 2.0)
    with tf.Session() as s:
        s._master = spy = _Spy(s._master)
        if not in_process:
            s._inproc_master = None  # as with a master in another process
        f = s.make_callable(y, [x])
        before = len(plans_built)
        for k in range(4):
            assert f(np.full(2, k, np.float32)) == 4.0 * k
        assert len(plans_built) == before  # MakeCallable planned it; calls only run it
        runs = {} if in_process else {"run_callable": 4}
        assert spy.calls == {"extend_session": 1, "make_callable": 1, **runs}
        assert len(s._master.master._callables) == 1
        del f
        gc.collect()
        assert spy.calls["release_callable"] == 1 and not s._master.master._callables


def test_run_options_at_call_time_run_as_a_plain_run():
    x = tf.placeholder(tf.float32, [], name="x")
    y = x + 1.0
    with tf.Session() as s:
        s._master = spy = _Spy(s._master)
        f = s.make_callable(y, [x], accept_options=True)
        meta, traced = tf.RunMetadata(), tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
        assert f(1.0, options=traced, run_metadata=meta) == 2.0
        assert spy.calls.get("run_step") == 1 and meta.step_stats.dev_stats


def test_callable_options_run_options_and_metadata():
    x = tf.placeholder(tf.float32, [], name="x")
    tf.square(x, name="y")
    options = CallableOptions(feed=["x:0"], fetch=["y:0"])
    options.run_options.CopyFrom(RunOptions(trace_level=RunOptions.FULL_TRACE))
    with tf.Session() as s:
        f = s._make_callable_from_options(options)
        meta = RunMetadata()
        assert f(np.float32(3.0), run_metadata=meta) == [9.0]
        assert any(n.node_name == "y" for d in meta.step_stats.dev_stats for n in d.node_stats)


def _connected(from_tensor, to_tensor, **kw):
    options = CallableOptions(**kw)
    options.tensor_connection.add(from_tensor=from_tensor, to_tensor=to_tensor)
    return options


def test_a_tensor_connection_feeds_a_tensor_from_another():
    x = tf.placeholder(tf.float32, [], name="x")
    tf.multiply(x, 2.0, name="y")
    tf.constant(5.0, name="five")
    tf.placeholder(tf.int32, [], name="n")
    with tf.Session() as s:
        f = s._make_callable_from_options(_connected("five:0", "x:0", fetch=["y:0"]))
        assert f() == [10.0]
        assert s.run("y:0", {"x:0": 1.0}) == 2.0  # the plain signature is untouched
        bad = {
            "already fed or connected": _connected("five:0", "x:0", feed=["x:0"], fetch=["y:0"]),
            "the types differ": _connected("five:0", "n:0", fetch=["n:0"]),
            "not in the graph": _connected("nope:0", "x:0", fetch=["y:0"]),
            "would make a cycle": _connected("y:0", "x:0", fetch=["y:0"]),
        }
        for message, options in bad.items():
            with pytest.raises(tf.errors.OpError, match=message):
                s._make_callable_from_options(options)


def test_a_tensor_connection_into_a_loop_and_its_gradient():
    x = tf.placeholder(tf.float32, [], name="x")
    _, y = tf.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * x), [0, tf.constant(1.0)])
    g = tf.gradients(y, x)[0]
    tf.constant(2.0, name="two")
    with tf.Session() as s:
        f = s._make_callable_from_options(_connected("two:0", "x:0", fetch=[y.name, g.name]))
        assert f() == [8.0, 12.0]  # x**3 and 3 x**2 at x = 2


def test_gpu_feed_devices_are_refused_by_name():
    x = tf.placeholder(tf.float32, [], name="x")
    tf.identity(x, name="y")
    options = CallableOptions(feed=["x:0"], fetch=["y:0"])
    options.feed_devices["x:0"] = "/job:localhost/replica:0/task:0/device:GPU:0"
    with tf.Session() as s, pytest.raises(tf.errors.InvalidArgumentError, match="feed_devices"):
        s._make_callable_from_options(options)


def test_callables_of_a_closed_session():
    x = tf.placeholder(tf.float32, [], name="x")
    y = x * 3.0
    s = tf.Session()
    f = s.make_callable(y, [x])
    assert f(2.0) == 6.0
    s.close()
    with pytest.raises(RuntimeError, match="closed Session"):
        s.make_callable(y, [x])
    with pytest.raises((tf.errors.OpError, RuntimeError)):
        f(2.0)
    del f
    gc.collect()  # releasing after close asks nothing of the master


def test_a_remote_callable_s_deadline_is_its_run_options(monkeypatch):
    master = remote.RemoteMaster("grpc://127.0.0.1:1")  # a lazy channel: nothing is dialled
    deadlines = []

    def call(name, proto, timeout=grpc_service.CONTROL_TIMEOUT_S):
        deadlines.append((name, timeout))
        return messages.MakeCallableResponse(handle=7) if name == "MakeCallable" else None

    monkeypatch.setattr(master, "_call", call)
    options = messages.CallableOptions(fetch=["y:0"], run_options=RunOptions(timeout_in_ms=2500))
    master.make_callable(messages.MakeCallableRequest("s", options))
    master.run_callable(messages.RunCallableRequest("s", 7, []))
    master.release_callable(messages.ReleaseCallableRequest("s", 7))
    master.run_callable(messages.RunCallableRequest("s", 7, []))
    master.close()
    margin = remote.STEP_MARGIN_S  # the master ends the step; the call waits for its answer
    assert deadlines[1] == ("RunCallable", 2.5 + margin)
    assert deadlines[3] == ("RunCallable", grpc_service.STEP_TIMEOUT_S + margin)  # the session's
