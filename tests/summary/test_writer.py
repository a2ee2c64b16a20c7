"""Event files: TFRecord framing and CRCs, FileWriter events read back, and the real-TF fixture
read by our reader (fixtures/tensorflow/README.md §3)."""

from __future__ import annotations

import io
import json
import os
import struct
import threading

import google_crc32c
import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import errors
from flowgraph.core.protos import GraphDef, MetaGraphDef, RunMetadata, SessionLog, Summary
from flowgraph.summary.records import encode_record, masked_crc32c, read_records, unmask_crc32c
from tests.helpers import TF_FIXTURES

EVENTS = TF_FIXTURES / "events"
FIXTURE = EVENTS / "events.out.tfevents.1700000000.fixture"


def test_crc32c_and_mask():
    assert google_crc32c.value(b"123456789") == 0xE3069283
    crc = google_crc32c.value(b"hello")
    m = masked_crc32c(b"hello")
    assert m == ((((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF)
    assert unmask_crc32c(m) == crc


def test_record_layout_and_round_trip():
    rec = encode_record(b"abc")
    assert len(rec) == 8 + 4 + 3 + 4
    assert struct.unpack("<Q", rec[:8])[0] == 3 and rec[12:15] == b"abc"
    assert struct.unpack("<I", rec[15:])[0] == masked_crc32c(b"abc")
    datas = [b"", b"x" * 1000, b"\x00\xff"]
    assert list(read_records(io.BytesIO(b"".join(map(encode_record, datas))))) == datas


@pytest.mark.parametrize("where", [3, 9, 13, 20])
def test_corruption_and_truncation_are_data_loss(where):
    good = encode_record(b"payload") + encode_record(b"more")
    bad = bytearray(good)
    bad[where] ^= 0x01
    with pytest.raises(errors.DataLossError, match="corrupted"):
        list(read_records(io.BytesIO(bytes(bad)), "f"))
    with pytest.raises(errors.DataLossError, match="truncated"):
        list(read_records(io.BytesIO(good[:where]), "f"))


@pytest.mark.skipif(not FIXTURE.is_file(), reason="no TF event fixture")
def test_reads_tensorflows_event_file():
    expected = json.loads((EVENTS / "expected.json").read_text())["events"]
    events = list(tf.summary.summary_iterator(str(FIXTURE)))
    assert events[0].file_version == "brain.Event:2"
    by_index = {e["index"]: e for e in expected}
    assert len(events) == max(by_index) + 1
    for i, want in by_index.items():
        assert events[i].step == want["step"]
        if want["kind"] == "graph_def":
            gd = GraphDef()
            gd.ParseFromString(events[i].graph_def)
            assert len(gd.node) == want["nodes"]
        elif want["kind"] == "meta_graph_def":
            mg = MetaGraphDef()
            mg.ParseFromString(events[i].meta_graph_def)
            assert len(mg.graph_def.node) == want["graph_nodes"]
        elif want["kind"] == "tagged_run_metadata":
            rm = RunMetadata()
            rm.ParseFromString(events[i].tagged_run_metadata.run_metadata)
            assert events[i].tagged_run_metadata.tag == want["tag"]
            assert [d.device for d in rm.step_stats.dev_stats] == want["devices"]
        elif want["kind"] == "scalar":
            assert events[i].summary.value[0].simple_value == want["value"]


def _events(writer):
    path = writer.event_file_path
    writer.close()
    return path, list(tf.summary.summary_iterator(path))


def test_file_writer_writes_graph_summaries_and_run_metadata(tmp_path):
    x = tf.placeholder(tf.float32, [None], name="x")
    tf.summary.scalar("mean", tf.reduce_mean(x))
    tf.summary.histogram("x", x)
    merged = tf.summary.merge_all()
    writer = tf.summary.FileWriter(
        str(tmp_path / "run"), tf.get_default_graph(), filename_suffix=".v1"
    )
    assert writer.get_logdir() == str(tmp_path / "run")
    with tf.Session() as sess:
        for step in range(3):
            writer.add_summary(sess.run(merged, {x: np.arange(step + 2, dtype=np.float32)}), step)
    meta = RunMetadata()
    meta.step_stats.dev_stats.add(device="/job:localhost/replica:0/task:0/device:CPU:0")
    writer.add_run_metadata(meta, "step_1", global_step=1)
    with pytest.raises(ValueError, match="already used"):
        writer.add_run_metadata(meta, "step_1")
    writer.add_session_log(SessionLog(status=SessionLog.START), 0)
    writer.flush()
    path, events = _events(writer)
    name = os.path.basename(path)
    assert name.startswith("events.out.tfevents.") and name.endswith(".v1")
    kinds = [e.WhichOneof("what") for e in events]
    assert kinds == ["file_version", "graph_def", "meta_graph_def"] + ["summary"] * 3 + [
        "tagged_run_metadata",
        "session_log",
    ]
    gd = GraphDef()
    gd.ParseFromString(events[1].graph_def)
    assert "x" in [n.name for n in gd.node] and "_output_shapes" in gd.node[0].attr
    means = [(e.step, e.summary.value[0].simple_value) for e in events[3:6]]
    assert means == [(0, 0.5), (1, 1.0), (2, 1.5)]
    assert [e.summary.value[1].histo.num for e in events[3:6]] == [2, 3, 4]
    assert all(e.wall_time > 0 for e in events)


def test_add_summary_proto_event_and_metadata_dedup(tmp_path):
    writer = tf.summary.FileWriter(tmp_path)
    s = Summary()
    s.value.add(tag="t", simple_value=2.0).metadata.plugin_data.plugin_name = "scalars"
    writer.add_summary(s, 1)
    writer.add_summary(s.SerializeToString(), 2)
    writer.add_event(tf.summary.Event(step=7, wall_time=1.0))
    with pytest.raises(TypeError):
        writer.add_summary(3.0)
    _, events = _events(writer)
    assert [e.step for e in events[1:]] == [1, 2, 7]
    assert events[1].summary.value[0].HasField("metadata")
    assert not events[2].summary.value[0].HasField("metadata")  # TensorBoard needs it once
    assert s.value[0].HasField("metadata")  # the caller's proto is untouched


def test_two_writers_same_second_do_not_clobber_and_reopen(tmp_path):
    a = tf.summary.FileWriter(tmp_path)
    b = tf.summary.FileWriter(tmp_path)
    assert a.event_file_path != b.event_file_path
    a.close()
    with pytest.raises(RuntimeError, match="closed"):
        a.add_event(tf.summary.Event())
    a.reopen()
    a.add_summary(Summary(), 1)
    a.close()
    b.close()
    assert len([f for f in os.listdir(tmp_path) if "tfevents" in f]) == 3


def _writer_threads() -> set:
    return {t for t in threading.enumerate() if t.name == "EventFileWriter"}


def test_unsupported_arguments_raise(tmp_path):
    before = _writer_threads()  # other tests' cached writers (FileWriterCache) stay open
    with pytest.raises(NotImplementedError, match="session"):
        tf.summary.FileWriter(tmp_path, session=object())
    with pytest.raises(TypeError):
        tf.summary.FileWriter(tmp_path, graph=42)
    # The failed constructor closed the writer it had opened: its thread has ended.
    assert _writer_threads() <= before


def test_file_writer_cache(tmp_path):
    w = tf.summary.FileWriterCache.get(tmp_path)
    assert tf.summary.FileWriterCache.get(tmp_path) is w
    tf.summary.FileWriterCache.clear()
    assert tf.summary.FileWriterCache.get(tmp_path) is not w
    tf.summary.FileWriterCache.clear()


def test_tensorboard_loads_our_scalars(tmp_path):
    ea = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    writer = tf.summary.FileWriter(tmp_path)
    x = tf.placeholder(tf.float32, [])
    s = tf.summary.scalar("loss", x)
    with tf.Session() as sess:
        for step, v in enumerate([3.0, 2.0, 1.0]):
            writer.add_summary(sess.run(s, {x: v}), step)
    writer.close()
    acc = ea.EventAccumulator(str(tmp_path))
    acc.Reload()
    assert [(e.step, e.value) for e in acc.Scalars("loss")] == [(0, 3.0), (1, 2.0), (2, 1.0)]
