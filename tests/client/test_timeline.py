"""Chrome traces of a step (whitepaper §9.2): `timeline.Timeline(step_stats)` as in TF1, checked
on TensorFlow's own RunMetadata (the same events TF's timeline makes) and on flowgraph's traces
(one process per device, one track per thread, arrows for Send/Recv, memory counters)."""

from __future__ import annotations

import collections
import json

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.client import timeline
from flowgraph.core.protos import RunMetadata, StepStats
from tests.helpers import TF_FIXTURES, run_flowgraph

FULL_TRACE = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)


def _events(trace_json: str) -> list[dict]:
    return json.loads(trace_json)["traceEvents"]


@pytest.mark.skipif(not (TF_FIXTURES / "timeline.json").is_file(), reason="TF fixtures absent")
def test_tensorflows_run_metadata_gives_tensorflows_trace():
    md = RunMetadata.FromString((TF_FIXTURES / "timeline_run_metadata.pb").read_bytes())
    want = _events((TF_FIXTURES / "timeline.json").read_text())
    got = _events(timeline.Timeline(md.step_stats).generate_chrome_trace_format())

    def key(e):
        return json.dumps(e, sort_keys=True)

    assert sorted(map(key, got)) == sorted(map(key, want))


def _two_device_step():
    g = tf.Graph()
    with g.as_default():
        with tf.device("/cpu:0"):
            a = tf.placeholder(tf.float32, [64, 64], name="a")
            b = tf.matmul(a, a, name="b")
        with tf.device("/cpu:1"):
            c = tf.reduce_sum(b * 2.0, name="c")
        with tf.device("/cpu:0"):
            d = tf.add(c, 1.0, name="d")
        with tf.Session(config=tf.ConfigProto(device_count={"CPU": 2})) as sess:
            md = tf.RunMetadata()
            sess.run(d, {a: np.ones((64, 64), np.float32)}, options=FULL_TRACE, run_metadata=md)
    return md


def _slices(events):
    return [e for e in events if e["ph"] == "X"]


def _enclosing(events, flow):
    """The slice a flow event binds to: the innermost slice of its track that holds its
    timestamp (slices are half-open, [ts, ts + dur))."""
    holding = [
        e
        for e in _slices(events)
        if (e["pid"], e["tid"]) == (flow["pid"], flow["tid"])
        and e["ts"] <= flow["ts"] < e["ts"] + max(e["dur"], 1)
    ]
    return max(holding, key=lambda e: (e["ts"], -e["dur"]))


def test_trace_has_a_process_per_device_and_a_track_per_thread():
    md = _two_device_step()
    events = _events(timeline.Timeline(md.step_stats).generate_chrome_trace_format())
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    for dev in md.step_stats.dev_stats:
        assert dev.device + " Compute" in names.values()
    threads = {(e["pid"], e["tid"]) for e in events if e.get("name") == "thread_name"}
    assert threads == {(e["pid"], e["tid"]) for e in _slices(events)}
    ops = {e["args"]["name"]: e for e in _slices(events)}
    assert {"b", "mul", "c"} <= set(ops)
    assert ops["b"]["args"] == {
        "name": "b",
        "op": "MatMul",
        "input0": "_recv_a_0",
        "input1": "_recv_a_0",
    }
    assert ops["b"]["pid"] != ops["c"]["pid"]  # placed on different devices
    assert all(e["dur"] >= 0 and e["cat"] == "Op" for e in _slices(events))


def test_send_recv_pairs_are_joined_by_flow_arrows():
    md = _two_device_step()
    events = _events(timeline.Timeline(md.step_stats).generate_chrome_trace_format())
    flows = collections.defaultdict(dict)
    for e in events:
        if e["ph"] in "st":
            flows[e["id"]][e["ph"]] = e
    pairs = {f["s"]["name"]: f for f in flows.values()}
    # b goes from CPU:0 to CPU:1, c comes back to CPU:0 (for d).
    transfers = [f for name, f in pairs.items() if name.startswith("edge_")]
    assert len(transfers) == 2
    for f in transfers:
        src, dst = _enclosing(events, f["s"]), _enclosing(events, f["t"])
        assert src["name"] == "_Send" and dst["name"] == "_Recv"
        assert src["pid"] != dst["pid"]
    no_arrows = _events(
        timeline.Timeline(md.step_stats).generate_chrome_trace_format(show_dataflow=False)
    )
    assert not [e for e in no_arrows if e["ph"] in "st"]


def test_memory_counters_and_tensor_objects():
    md = _two_device_step()
    analysis = timeline.Timeline(md.step_stats).analyze_step_stats(show_memory=True)
    events = _events(analysis.chrome_trace.format_to_string())
    counters = [e for e in events if e["ph"] == "C"]
    assert counters and all(e["args"]["cpu"] >= 0 for e in counters)
    assert counters[-1]["args"]["cpu"] == 0  # everything allocated in the step was released
    peak = analysis.allocator_maximums["cpu"]
    assert peak.num_bytes == max(e["args"]["cpu"] for e in counters) >= 64 * 64 * 4
    assert "b" in peak.tensors or "mul" in peak.tensors
    created = {e["name"] for e in events if e["ph"] == "N"}
    deleted = {e["name"] for e in events if e["ph"] == "D"}
    assert "b" in created and created == deleted
    snap = next(e for e in events if e["ph"] == "O" and e["name"] == "b")
    assert "DT_FLOAT" in snap["args"]["snapshot"]["tensor_description"]


def test_overlapping_slices_of_one_thread_get_their_own_track():
    """A Recv waiting on thread 0 while the thread runs other ops: slices that overlap without
    nesting cannot share a track."""
    stats = StepStats()
    dev = stats.dev_stats.add(device="/job:localhost/replica:0/task:0/device:CPU:0")
    dev.thread_names[0] = "worker"
    for name, start, dur in [("recv", 100, 50), ("x", 110, 10), ("y", 140, 20)]:
        dev.node_stats.add(
            node_name=name,
            all_start_micros=start,
            all_end_rel_micros=dur,
            timeline_label=f"{name} = Op()",
        )
    events = _events(timeline.Timeline(stats).generate_chrome_trace_format())
    tid = {e["args"]["name"]: e["tid"] for e in _slices(events)}
    assert tid["recv"] == tid["x"] != tid["y"]  # x nests in recv; y sticks out of it
    names = {e["tid"]: e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    assert names[tid["recv"]] == "worker" and names[tid["y"]].startswith("worker")


def test_bad_op_time_is_refused():
    with pytest.raises(ValueError, match="op_time"):
        timeline.Timeline(StepStats()).generate_chrome_trace_format(op_time="wall")


def test_tensorflow_module_path_under_flowgraph_run(tmp_path):
    script = tmp_path / "trace.py"
    out = tmp_path / "timeline.json"
    script.write_text(
        "import tensorflow as tf\n"
        "from tensorflow.python.client import timeline\n"
        "p = tf.placeholder(tf.float32, [2])\n"
        "x = p * 3.0  # a constant product would be folded to a Const, as in TF\n"
        "md = tf.RunMetadata()\n"
        "with tf.Session() as s:\n"
        "    s.run(x, {p: [1.0, 2.0]},\n"
        "          options=tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE), run_metadata=md)\n"
        "tl = timeline.Timeline(md.step_stats)\n"
        f"open({str(out)!r}, 'w').write(tl.generate_chrome_trace_format(show_memory=True))\n"
    )
    proc = run_flowgraph("run", str(script))
    assert proc.returncode == 0, proc.stderr
    ops = {e["args"]["op"] for e in _events(out.read_text()) if e["ph"] == "X"}
    assert "Mul" in ops
