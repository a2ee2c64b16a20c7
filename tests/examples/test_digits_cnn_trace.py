"""The README's main job records one traced step: its event file holds the step's RunMetadata
(what TensorBoard's graph dashboard shows as compute time and memory per node) and a Chrome
trace of it lies next to it."""

from __future__ import annotations

import json

import flowgraph as tf
from flowgraph.examples import digits_cnn


def test_digits_cnn_writes_one_traced_step(tmp_path):
    logdir = tmp_path / "logs"
    digits_cnn.main(["--steps", "6", "--log_every", "3", "--logdir", str(logdir)])
    (events_file,) = logdir.glob("events.out.tfevents.*")
    tagged = [
        e for e in tf.train.summary_iterator(str(events_file)) if e.HasField("tagged_run_metadata")
    ]
    assert [(e.step, e.tagged_run_metadata.tag) for e in tagged] == [(3, "step3")]
    md = tf.RunMetadata.FromString(tagged[0].tagged_run_metadata.run_metadata)
    graph_nodes = {n.name for n in tf.get_default_graph().as_graph_def().node}
    stats = {n.node_name: n for d in md.step_stats.dev_stats for n in d.node_stats}
    # Conv2D, BiasAdd and Relu run as one _FusedConv2D under the last one's name, as in TF
    assert "conv1/Relu" in stats and "conv1/Relu" in graph_nodes  # TensorBoard joins on names
    assert "conv1/Conv2D" not in stats
    conv = stats["conv1/Relu"]
    assert conv.all_end_rel_micros > 0
    (out,) = conv.output
    assert [d.size for d in out.tensor_description.shape.dim] == [64, 8, 8, 32]  # batch 64
    assert conv.memory[0].total_bytes == 64 * 8 * 8 * 32 * 4
    assert all(o.tensor_description.HasField("shape") for n in stats.values() for o in n.output)
    trace = json.loads((logdir / "timeline-3.json").read_text())
    assert any(e.get("args", {}).get("name") == "conv1/Relu" for e in trace["traceEvents"])
