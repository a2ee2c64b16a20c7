"""tf.data GraphDefs cross both ways with real TensorFlow (run as a subprocess of /opt/tfbench,
skipped where absent): a dataset pipeline built by TensorFlow, with its functions in the
GraphDef's library, imports and runs here to TensorFlow's values, and ours runs in TensorFlow
to our values."""

import inspect

import numpy as np
import pytest

import flowgraph as tf
from tests.helpers import needs_tf, run_tf

pytestmark = needs_tf


def build(tf, np):
    """One program, run by both: `tf` is TensorFlow's compat.v1 or flowgraph."""
    x = np.arange(24, dtype=np.float32).reshape(12, 2)
    scale = tf.constant(3.0)
    D = tf.data.Dataset
    a = D.from_tensor_slices({"x": x, "i": np.arange(12)})
    a = a.map(lambda d: (d["x"] * scale, d["i"] * 2), num_parallel_calls=2)
    a = a.filter(lambda v, i: i % 3 > 0).skip(1).take(6).batch(4).repeat(2)
    b = D.range(1, 5).interleave(lambda v: D.from_tensors(v).repeat(v), cycle_length=2)
    b = b.padded_batch(2, padded_shapes=[]).unbatch().batch(3, drop_remainder=True)
    c = D.zip((D.range(3), D.range(10, 20).flat_map(lambda v: D.range(v, v + 2))))
    out = []
    for ds in (a, b, c):
        it = tf.data.make_initializable_iterator(ds)
        out.append((it.initializer, tf.nest.flatten(it.get_next())))
    return out


def run(tf, out, sess):
    values = []
    for init, fetches in out:
        sess.run(init)
        while True:
            try:
                values.extend(sess.run(fetches))
            except tf.errors.OutOfRangeError:
                break
    return values


PIPELINE = inspect.getsource(build)
RUN = inspect.getsource(run)


def test_tensorflow_pipeline_imports_and_runs_here(tmp_path):
    script = (
        "import sys, numpy as np\nimport tensorflow.compat.v1 as tf\ntf.disable_v2_behavior()\n"
        + PIPELINE
        + RUN
        + "out = build(tf, np)\n"
        "meta = [(i.name, [f.name for f in fs]) for i, fs in out]\n"
        "open(sys.argv[1] + '/g.pb', 'wb').write(tf.get_default_graph().as_graph_def()"
        ".SerializeToString())\n"
        "with tf.Session() as s:\n"
        "    vals = run(tf, out, s)\n"
        "np.savez(sys.argv[1] + '/v.npz', *vals)\n"
        "open(sys.argv[1] + '/meta.txt', 'w').write(repr(meta))\n"
    )
    run_tf("-c", script, tmp_path)
    gd = tf.GraphDef.FromString((tmp_path / "g.pb").read_bytes())
    assert gd.library.function  # TF stored the map/filter/interleave functions there
    meta = eval((tmp_path / "meta.txt").read_text())
    tf.import_graph_def(gd, name="")
    g = tf.get_default_graph()
    out = [(g.get_operation_by_name(i), [g.get_tensor_by_name(f) for f in fs]) for i, fs in meta]
    with tf.Session() as sess:
        got = run(tf, out, sess)
    want = np.load(tmp_path / "v.npz")
    want = [want[f"arr_{i}"] for i in range(len(want.files))]
    assert len(got) == len(want)
    for g_, w in zip(got, want):
        np.testing.assert_array_equal(g_, w)
        assert np.asarray(g_).dtype == w.dtype


def test_our_pipeline_runs_in_tensorflow(tmp_path):
    out = build(tf, np)
    meta = [(i.name, [f.name for f in fs]) for i, fs in out]
    (tmp_path / "g.pb").write_bytes(tf.get_default_graph().as_graph_def().SerializeToString())
    with tf.Session() as sess:
        mine = run(tf, out, sess)
    script = (
        "import sys, numpy as np\nimport tensorflow.compat.v1 as tf\ntf.disable_v2_behavior()\n"
        + RUN
        + "gd = tf.GraphDef.FromString(open(sys.argv[1] + '/g.pb', 'rb').read())\n"
        "tf.import_graph_def(gd, name='')\ng = tf.get_default_graph()\n"
        f"meta = {meta!r}\n"
        "out = [(g.get_operation_by_name(i), [g.get_tensor_by_name(f) for f in fs])"
        " for i, fs in meta]\n"
        "with tf.Session() as s:\n"
        "    vals = run(tf, out, s)\n"
        "np.savez(sys.argv[1] + '/v.npz', *vals)\n"
    )
    run_tf("-c", script, tmp_path)
    theirs = np.load(tmp_path / "v.npz")
    theirs = [theirs[f"arr_{i}"] for i in range(len(theirs.files))]
    assert len(theirs) == len(mine)
    for m, t in zip(mine, theirs):
        np.testing.assert_array_equal(m, t)


def test_tensorflow_reads_our_dataset_cache(tmp_path):
    prefix = str(tmp_path / "cache")
    ds = tf.data.Dataset.range(4).map(lambda v: (v * 3, tf.cast(v, tf.float32) + 0.5))
    nxt = ds.cache(prefix).make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        mine = [sess.run(nxt) for _ in range(4)]
        with pytest.raises(tf.errors.OutOfRangeError):
            sess.run(nxt)
    script = (
        "import sys\nimport tensorflow.compat.v1 as tf\ntf.disable_v2_behavior()\n"
        "ds = tf.data.Dataset.range(0).map(lambda v: (v, tf.cast(v, tf.float32)))\n"
        "n = tf.data.make_one_shot_iterator(ds.cache(sys.argv[1])).get_next()\n"
        "out = []\n"
        "with tf.Session() as s:\n"
        "    try:\n"
        "        while True: out.append(tuple(float(x) for x in s.run(n)))\n"
        "    except tf.errors.OutOfRangeError: pass\n"
        "print(out)\n"
    )
    theirs = eval(run_tf("-c", script, prefix).stdout.strip().splitlines()[-1])
    assert theirs == [(float(a), float(b)) for a, b in mine]
