"""Writes newer_attrs.pb/.npz with real TensorFlow 2.x (run by /opt/tfbench/bin/python, in this
folder): gradients TF builds with ConcatOffset, TopKV2 with Tk/index_type int64, GatherNd and
ScatterNd with bad_indices_policy, FusedBatchNormV3 and its gradient, and their values."""

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1
tf1.disable_v2_behavior()
g = tf1.Graph()
with g.as_default():
    a = tf1.placeholder(tf.float32, [2, 3], name="a")
    b = tf1.placeholder(tf.float32, [2, 4], name="b")
    c = tf.concat([a, b], 1, name="c")
    vals, _ = tf.math.top_k(c * c, k=3, name="topk")
    idx = tf.math.top_k(c, k=tf.constant(2, tf.int64), index_type=tf.int64, name="topk64")[1]
    loss = tf.reduce_sum(vals * tf.constant([1.0, 2.0, 3.0]), name="loss")
    ga, gb = tf1.gradients(loss, [a, b], name="grads")
    x = tf1.placeholder(tf.float32, [1, 2, 2, 3], name="x")
    y, mean, var = tf1.nn.fused_batch_norm(x, tf.ones([3]), tf.zeros([3]), name="bn")
    gx = tf1.gradients(tf.reduce_sum(y * y), [x], name="bngrads")[0]
    p = tf1.placeholder(tf.float32, [3, 3], name="p")
    gn = tf.gather_nd(p, [[0, 1], [2, 2]], name="gnd")
    gp = tf1.gradients(tf.reduce_sum(gn * 3.0), [p], name="gndgrads")[0]
feeds = {
    "a:0": np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5,
    "b:0": np.linspace(-3, 3, 8, dtype=np.float32).reshape(2, 4),
    "x:0": np.arange(12, dtype=np.float32).reshape(1, 2, 2, 3) / 5.0,
    "p:0": np.arange(9, dtype=np.float32).reshape(3, 3),
}
fetch = {"vals": vals, "idx": idx, "ga": ga, "gb": gb, "y": y, "gx": gx, "gn": gn, "gp": gp}
with tf1.Session(graph=g) as s:
    out = s.run(fetch, {g.get_tensor_by_name(k): v for k, v in feeds.items()})
ops = sorted({n.op for n in g.as_graph_def().node})
print(ops)
with open("newer_attrs.pb", "wb") as f:
    f.write(g.as_graph_def().SerializeToString())
np.savez(
    "newer_attrs.npz",
    **{f"feed_{k.split(':')[0]}": v for k, v in feeds.items()},
    **{f"want_{k}": v for k, v in out.items()},
    **{f"name_{k}": np.array(t.name) for k, t in fetch.items()},
)
