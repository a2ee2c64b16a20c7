"""A traced Run's RunMetadata (whitepaper §9.2) holds what TensorFlow's does and what
TensorBoard's graph dashboard reads: per node its times, device, outputs (dtype, shape, bytes,
scalars included) and memory. The expected kinds of fields are those TF 2.x emits for the same
graph (checked with /opt/tfbench; the interop test below compares with it when installed)."""

from __future__ import annotations

import base64

import numpy as np

import flowgraph as tf
from flowgraph.runtime.tracing import peak_memory
from tests.helpers import needs_tf, run_tf

CPU = "/job:localhost/replica:0/task:0/device:CPU:0"
FULL_TRACE = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)

# The graph of the comparison, as source run by both flowgraph and TensorFlow.
GRAPH = """
a = tf.placeholder(tf.float32, [2, 3], name="a")
w = tf.Variable(tf.ones([3, 4]), name="w")
mm = tf.matmul(a, w, name="mm")
s = tf.reduce_sum(mm, name="s")
c = tf.constant(2.0, name="c")
r = tf.multiply(s, c, name="r")
"""


def _traced_step():
    g = tf.Graph()
    with g.as_default():
        scope = {"tf": tf}
        exec(GRAPH, scope)  # noqa: S102  (the same source runs in TensorFlow below)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            md = tf.RunMetadata()
            out = sess.run(
                scope["r"],
                {scope["a"]: np.arange(6, dtype=np.float32).reshape(2, 3)},
                options=FULL_TRACE,
                run_metadata=md,
            )
    assert out == 2 * 15 * 4
    return md


def _by_name(md):
    return {n.node_name: (d.device, n) for d in md.step_stats.dev_stats for n in d.node_stats}


def test_node_exec_stats_times_devices_and_labels():
    md = _traced_step()
    nodes = _by_name(md)
    assert {"w", "w/read", "mm", "s", "c", "r"} <= set(nodes)
    for device, n in nodes.values():
        assert device == CPU
        assert n.all_start_micros > 1.5e15  # wall clock, microseconds since the epoch
        assert n.op_start_rel_micros <= n.op_end_rel_micros <= n.all_end_rel_micros
        assert n.all_start_nanos // 1000 == n.all_start_micros
        assert n.all_end_rel_nanos >= n.op_end_rel_nanos > 0
        assert n.HasField("memory_stats")
    assert nodes["mm"][1].timeline_label == "mm = MatMul(_recv_a_0, w/read)"
    assert nodes["r"][1].timeline_label == "r = Mul(s, c)"
    dev = md.step_stats.dev_stats[0]
    assert dict(dev.thread_names)[nodes["mm"][1].thread_id]  # every thread id is named


def test_outputs_describe_dtype_shape_and_bytes_scalars_included():
    nodes = _by_name(_traced_step())

    def out(name):
        (o,) = nodes[name][1].output
        return o.tensor_description

    mm, s, c, w, read = out("mm"), out("s"), out("c"), out("w"), out("w/read")
    assert mm.dtype == tf.float32.as_datatype_enum
    assert [d.size for d in mm.shape.dim] == [2, 4]
    for scalar in (s, c):
        assert scalar.HasField("shape") and not scalar.shape.dim  # TensorBoard needs the shape
    assert mm.allocation_description.requested_bytes == 32
    assert mm.allocation_description.allocated_bytes == 32
    assert mm.allocation_description.allocator_name == "cpu"
    assert s.allocation_description.requested_bytes == 4
    # A variable and its read share one buffer: same address, nothing allocated by the read.
    assert [d.size for d in w.shape.dim] == [3, 4] and w.dtype == tf.float32.as_datatype_enum
    assert read.allocation_description.ptr == w.allocation_description.ptr != 0
    assert not read.allocation_description.allocated_bytes


def test_memory_per_node_total_bytes_and_records():
    md = _traced_step()
    nodes = _by_name(md)
    (used,) = nodes["mm"][1].memory
    assert used.allocator_name == "cpu"
    assert used.total_bytes == used.peak_bytes == 32
    records = [(r.alloc_bytes) for r in used.allocation_records]
    assert records == [32, -32]  # allocated by MatMul, released after Sum read it
    assert all(r.alloc_micros >= nodes["mm"][1].all_start_micros for r in used.allocation_records)
    # State that outlives the step is persistent memory, not a per-step allocation.
    assert nodes["w"][1].memory_stats.persistent_memory_size == 48
    assert nodes["c"][1].memory_stats.persistent_memory_size == 4
    assert not nodes["w"][1].memory and not nodes["c"][1].memory
    assert not nodes["w/read"][1].memory  # an alias allocates nothing
    # TensorBoard adds total_bytes per node: every node that allocated reports them.
    assert sum(m.total_bytes for _, n in nodes.values() for m in n.memory) == 32 + 4 + 4
    assert peak_memory(md) == {CPU: 32 + 4}  # mm is released after s, its reader, ran


def test_views_count_once_and_peak_follows_lifetimes():
    """A Reshape view of a buffer is no new allocation; the step's peak is the largest set of
    buffers alive together (x and y coexist while y is computed from x)."""
    x = tf.placeholder(tf.float32, [1000])
    y = tf.reshape(x * 2.0, [10, 100], name="y")
    z = tf.reduce_sum(y * 3.0, name="z")
    with tf.Session() as sess:
        md = tf.RunMetadata()
        sess.run(z, {x: np.ones(1000, np.float32)}, options=FULL_TRACE, run_metadata=md)
    nodes = _by_name(md)
    assert not nodes["y"][1].memory
    (mul,) = nodes["mul"][1].memory
    assert mul.total_bytes == 4000
    assert peak_memory(md) == {CPU: 8000}


def test_while_loop_step_is_traced():
    i = tf.while_loop(lambda i: i < 5, lambda i: i + 1, [tf.constant(0)])
    with tf.Session() as sess:
        md = tf.RunMetadata()
        assert sess.run(i, options=FULL_TRACE, run_metadata=md) == 5
    adds = [n for _, n in _by_name(md).values() if n.node_name == "while/add"]
    assert adds and adds[0].output[0].tensor_description.HasField("shape")


def test_while_loop_counts_memory_like_any_step():
    """One executor loop: buffers made inside a loop are counted and released as outside it
    (each iteration's product lives until the next iteration's Mul has read it)."""
    x = tf.placeholder(tf.float32, [1000])
    _, y = tf.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * 2.0), [tf.constant(0), x])
    z = tf.reduce_sum(y, name="z")
    with tf.Session() as sess:
        md = tf.RunMetadata()
        out = sess.run(z, {x: np.ones(1000, np.float32)}, options=FULL_TRACE, run_metadata=md)
    assert out == 8000.0
    muls = [n for _, n in _by_name_all(md) if n.node_name == "while/mul"]
    assert len(muls) == 3
    for n in muls:
        (used,) = n.memory
        assert used.total_bytes == 4000
        assert [r.alloc_bytes for r in used.allocation_records] == [4000, -4000]
    # Two products coexist while the second is computed; the rest are 4-byte scalars.
    assert 8000 <= peak_memory(md)[CPU] < 8100


def _by_name_all(md):
    return [(d.device, n) for d in md.step_stats.dev_stats for n in d.node_stats]


def test_untraced_run_leaves_run_metadata_empty():
    c = tf.constant(1.0)
    with tf.Session() as sess:
        md = tf.RunMetadata()
        sess.run(c, run_metadata=md)
    assert not md.HasField("step_stats")


_TF_SCRIPT = """
import base64, numpy as np, tensorflow as tf1
tf = tf1.compat.v1
tf.disable_v2_behavior()
{graph}
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    md = tf.RunMetadata()
    opts = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
    sess.run(r, {{a: np.arange(6, dtype=np.float32).reshape(2, 3)}}, options=opts, run_metadata=md)
print(base64.b64encode(md.SerializeToString()).decode())
"""


def _kinds(md) -> dict:
    """node name -> the names of the NodeExecStats fields set, and of its outputs' and memory
    entries' fields."""
    out = {}
    for d in md.step_stats.dev_stats:
        for n in d.node_stats:
            outputs = [
                sorted(f.name for f, _ in o.tensor_description.ListFields()) for o in n.output
            ]
            allocs = [
                sorted(f.name for f, _ in o.tensor_description.allocation_description.ListFields())
                for o in n.output
            ]
            out[n.node_name] = {
                "fields": {f.name for f, _ in n.ListFields()},
                "outputs": outputs,
                "allocation": allocs,
                "memory": [{f.name for f, _ in m.ListFields()} for m in n.memory],
            }
    return out


@needs_tf
def test_run_metadata_fields_match_tensorflows_in_kind():
    """The same graph traced by TensorFlow: every field TF sets on these nodes, we set too
    (except the scheduling time, which this executor does not measure)."""
    got = run_tf("-c", _TF_SCRIPT.format(graph=GRAPH))
    md = tf.RunMetadata.FromString(base64.b64decode(got.stdout.strip().splitlines()[-1]))
    theirs, ours = _kinds(md), _kinds(_traced_step())
    for name in ("mm", "s", "r", "c", "w", "w/read"):
        t, o = theirs[name], ours[name]
        assert o["outputs"] == t["outputs"], name
        missing = t["fields"] - o["fields"] - {"scheduled_micros", "scheduled_nanos"}
        missing -= {"op_start_rel_micros", "op_start_rel_nanos"}  # TF's are often 0 too
        assert not missing, (name, missing)
        for theirs_alloc, ours_alloc in zip(t["allocation"], o["allocation"], strict=True):
            assert set(theirs_alloc) - {"ptr"} <= set(ours_alloc) | {"allocated_bytes"}, name
        if name != "r":  # TF forwards s's buffer to r; we allocate r's own
            assert len(o["memory"]) == len(t["memory"]), name
            for tm, om in zip(t["memory"], o["memory"]):
                assert tm <= om, name
