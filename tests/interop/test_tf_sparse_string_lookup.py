"""A GraphDef that real TensorFlow builds with the sparse, segment, string and lookup ops
(tf.compat.v1 of TensorFlow 2.x in /opt/tfbench) imports here, initializes its tables and gives
TensorFlow's values for every fetch. TensorFlow runs as a subprocess; skipped without it."""

from __future__ import annotations

import json

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core.protos import GraphDef
from tests.helpers import TF_PYTHON, run_tf

MAKE = r"""
import sys, numpy as np
import tensorflow.compat.v1 as tf
tf.disable_v2_behavior()
out = sys.argv[1]
g = tf.Graph()
with g.as_default():
    where = [[0, 0], [0, 2], [1, 1], [2, 0], [2, 3]]
    st = tf.SparseTensor(where, [1.0, 2.0, 3.0, 4.0, 5.0], [3, 4])
    o = tf.SparseTensor([[0, 2], [1, 0]], [10.0, 20.0], [3, 4])
    d = tf.constant(np.arange(12, dtype=np.float32).reshape(4, 3))
    strs = tf.constant([b"Hello world", b"a,b  c", b""])
    fetch = {
        "to_dense": tf.sparse.to_dense(st),
        "matmul": tf.sparse.sparse_dense_matmul(st, d),
        "reduce_sum": tf.sparse.reduce_sum(st, 1),
        "concat": tf.sparse.concat(1, [st, o]).values,
        "softmax": tf.sparse.softmax(st).values,
        "add": tf.sparse.add(st, o).indices,
        "reshape": tf.sparse.reshape(st, [2, 6]).indices,
        "fill": tf.sparse.fill_empty_rows(
            tf.SparseTensor([[0, 1]], [3.0], [3, 2]), -1.0)[0].indices,
        "split": tf.sparse.split(sp_input=st, num_split=2, axis=1)[1].values,
        "segment_sum": tf.math.segment_sum(d, [0, 0, 1, 1]),
        "segment_mean": tf.math.segment_mean(d, [0, 1, 1, 1]),
        "unsorted_max": tf.math.unsorted_segment_max(d, [1, 0, 1, 0], 2),
        "unsorted_prod": tf.math.unsorted_segment_prod(d, [1, 0, 1, 0], 2),
        "sparse_segment_mean": tf.sparse.segment_mean(d, [0, 3, 2], [0, 0, 1]),
        "partition": tf.dynamic_partition(d, [1, 0, 1, 1], 2)[1],
        "bincount": tf.math.bincount([1, 1, 4]),
        "histogram": tf.histogram_fixed_width([0.5, 1.5, 9.0], [0.0, 10.0], nbins=4),
        "einsum": tf.einsum("ij,kj->ik", d, d),
        "split_str": tf.strings.split(strs).values,
        "string_split": tf.string_split(strs, delimiter=", ").values,
        "join": tf.strings.join([strs, strs], separator="|"),
        "substr": tf.strings.substr(strs, 0, 3),
        "as_string": tf.strings.as_string(d[0]),
        "to_number": tf.strings.to_number(["1.5", "-2"]),
        "hash": tf.strings.to_hash_bucket_fast(strs, 100),
        "regex": tf.strings.regex_replace(strs, "o", "0"),
        "reduce_join": tf.strings.reduce_join(strs, separator="+"),
        "length": tf.strings.length(strs),
        "upper": tf.strings.upper(strs),
        "strip": tf.strings.strip([b"  x "]),
        "base64": tf.io.encode_base64(strs),
        "fingerprint": tf.fingerprint(strs),
    }
    init = tf.lookup.KeyValueTensorInitializer(["a", "b"], [1, 2], value_dtype=tf.int64)
    table = tf.lookup.StaticHashTable(init, -1)
    fetch["lookup"] = table.lookup(tf.constant(["b", "z"]))
    names = {k: v.name for k, v in fetch.items()}
    with tf.Session() as s:
        s.run(tf.tables_initializer())
        vals = s.run(fetch)
    init_name = tf.tables_initializer().name
open(out + "/graph.pb", "wb").write(g.as_graph_def().SerializeToString())
np.savez(out + "/want.npz", **{k: np.asarray(v) for k, v in vals.items()})
import json
inits = [op.name for op in g.get_collection(tf.GraphKeys.TABLE_INITIALIZERS)]
json.dump({"names": names, "init": inits}, open(out + "/meta.json", "w"))
"""


@pytest.fixture(scope="module")
def tf_made(tmp_path_factory):
    if not TF_PYTHON.exists():
        pytest.skip(f"no real TensorFlow at {TF_PYTHON}")
    out = tmp_path_factory.mktemp("tf_made")
    script = out / "make.py"
    script.write_text(MAKE)
    run_tf(script, out)
    return out


def test_tensorflow_graph_imports_and_matches(tf_made):
    meta = json.loads((tf_made / "meta.json").read_text())
    want = np.load(tf_made / "want.npz", allow_pickle=True)
    graph_def = GraphDef()
    graph_def.ParseFromString((tf_made / "graph.pb").read_bytes())
    graph = tf.Graph()
    with graph.as_default():
        tf.import_graph_def(graph_def, name="")
        with tf.Session() as sess:
            sess.run([graph.get_operation_by_name(n) for n in meta["init"]])
            got = sess.run(meta["names"])
    for key, value in got.items():
        expected = want[key]
        if expected.dtype.kind in "fc":
            np.testing.assert_allclose(value, expected, rtol=1e-6, err_msg=key)
        else:
            np.testing.assert_array_equal(np.asarray(value), expected, err_msg=key)
