"""Recv scheduling (whitepaper §5.2) under TF's `GraphOptions.enable_recv_scheduling`: cross-device
receives wait, by a control edge, until just before the cost model's ALAP time of their users."""

import threading

import numpy as np

import flowgraph as tf

CPU1 = "/job:localhost/replica:0/task:0/device:CPU:1"
STAGES = 4


def _config(scheduled: bool) -> tf.ConfigProto:
    config = tf.ConfigProto(device_count={"CPU": 2}, operation_timeout_in_ms=20000)
    config.graph_options.enable_recv_scheduling = scheduled
    return config


def _model_parallel(elements: int = 100_000):
    """CPU:0 makes STAGES tensors at once; CPU:1 uses one per stage of a chain."""
    with tf.device("/cpu:0"):
        sent = [tf.random_uniform([elements], seed=i) * float(i + 1) for i in range(STAGES)]
    with tf.device("/cpu:1"):
        h = tf.zeros([elements])
        for i, x in enumerate(sent):
            h = tf.add(h, x, name=f"s{i}_use")
            for j in range(3):
                h = tf.tanh(tf.multiply(h, 0.5, name=f"s{i}_mul{j}"), name=f"s{i}_tanh{j}")
        return tf.reduce_sum(h)


def _stage(name: str) -> int:
    """The stage of a node of CPU:1's chain, named s<stage>_..."""
    return int(name[1 : name.index("_")])


def _traced(config, fetch):
    md = tf.RunMetadata()
    opts = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE, output_partition_graphs=True)
    with tf.Session(config=config) as s:
        value = s.run(fetch, options=opts, run_metadata=md)
    return value, md


def _recvs(md) -> dict:
    """Name -> NodeDef of the cross-device _Recv nodes on CPU:1."""
    return {
        n.name: n
        for g in md.partition_graphs
        for n in g.node
        if n.op == "_Recv" and n.device == CPU1 and not n.attr["client_terminated"].b
    }


def _users(md, recv: str) -> list:
    return [n.name for g in md.partition_graphs for n in g.node if any(i == recv for i in n.input)]


def test_receives_wait_for_the_stage_before_their_use():
    out = _model_parallel()
    plain, _ = _traced(_config(False), out)
    value, md = _traced(_config(True), out)
    assert value == plain  # same seeds, same result
    recvs = _recvs(md)
    assert len(recvs) == STAGES
    waiting = {}
    for name, node in recvs.items():
        (user,) = _users(md, name)
        stage = _stage(user)
        controls = [i[1:] for i in node.input if i.startswith("^")]
        if stage == 0:
            continue  # the first stage's input is needed at once
        assert len(controls) == 1
        waiting[stage] = controls[0]
    assert len(waiting) >= STAGES - 2  # the later stages' receives all wait
    for stage, after in waiting.items():
        assert _stage(after) < stage  # CPU:1's own work of an earlier stage, never a later one


def test_received_tensors_no_longer_pile_up_on_the_receiving_device():
    out = _model_parallel()
    _, md = _traced(_config(True), out)
    stats = {ns.node_name: ns for d in md.step_stats.dev_stats for ns in d.node_stats}
    spans = []
    for name in _recvs(md):
        users = _users(md, name)
        start = stats[name].all_start_micros + stats[name].all_end_rel_micros
        end = max(stats[u].all_start_micros + stats[u].all_end_rel_micros for u in users)
        spans.append((start, end))
    most = max(sum(s <= t < e for s, e in spans) for t, _ in spans)
    assert most <= 2  # at most the tensor in use and the next one, not all STAGES at once


def test_off_by_default():
    out = _model_parallel(1000)
    _, md = _traced(tf.ConfigProto(device_count={"CPU": 2}), out)
    assert all(not any(i.startswith("^") for i in n.input) for n in _recvs(md).values())


def test_a_receive_never_waits_for_a_node_that_needs_its_value():
    with tf.device("/cpu:0"):
        x = tf.random_uniform([50_000], seed=1)  # arrives early
        w = tf.random_uniform([50_000], seed=2)
        for _ in range(12):
            w = tf.sin(w)  # arrives late, so CPU:1's y has much slack
    with tf.device("/cpu:1"):
        y = tf.add(x, 1.0, name="y")
        z = tf.tanh(tf.tanh(y), name="after_y")  # finishes long before y's ALAP time
        total = tf.reduce_sum(tf.add(z, w, name="total"))
    plain, _ = _traced(_config(False), total)
    value, md = _traced(_config(True), total)  # a cycle would stop at the 20 s deadline
    np.testing.assert_allclose(value, plain, rtol=1e-6)
    controls = {
        name: [i[1:] for i in node.input if i.startswith("^")] for name, node in _recvs(md).items()
    }
    x_recv = next(name for name in controls if _users(md, name) == ["y"])
    needs_x = {"y", "Tanh", "after_y", "total"}  # these finish before y's due time, yet
    assert not needs_x.intersection(controls[x_recv])  # waiting for them would be a cycle
    assert ["after_y"] in controls.values()  # w's receive waits for them instead


def test_partial_runs_never_wait_for_a_later_feed():
    with tf.device("/cpu:0"):
        big = tf.random_uniform([50_000], seed=3)
    with tf.device("/cpu:1"):
        f = tf.placeholder(tf.float32, [50_000])
        work = f
        for k in range(8):
            work = tf.tanh(work + 1.0, name=f"fed_work{k}")
        first = tf.reduce_sum(big, name="first")  # needs only the received tensor
        second = tf.reduce_sum(work)
    with tf.Session(config=_config(True)) as s:
        h = s.partial_run_setup([first, second], [f])
        fetched = []
        # before f is fed: big's receive must not wait for it (a thread, so a wait fails)
        thread = threading.Thread(target=lambda: fetched.append(s.partial_run(h, first)))
        thread.start()
        thread.join(60)
        waited = thread.is_alive()
        s.partial_run(h, second, feed_dict={f: np.zeros(50_000, np.float32)})  # frees a waiter
        thread.join()
    assert not waited, "the receive waited for a feed given later"
    got = fetched[0]
    with tf.Session(config=_config(False)) as s:
        assert got == s.run(first)
