"""The small model the profiler tests profile, shared so that the counts checked by hand in
test_profiler.py and the text compared with TensorFlow's in test_tf_text.py are of one graph."""

import flowgraph as tf


def mlp(batch=8):
    """x[b,16] -> MatMul w1[16,32] + b1 -> Relu -> MatMul w2[32,4] -> Square -> Mean; returns
    (graph, x, loss)."""
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [batch, 16], name="x")
        with tf.variable_scope("layer1"):
            w = tf.get_variable("w", [16, 32], initializer=tf.ones_initializer())
            b = tf.get_variable("b", [32], initializer=tf.zeros_initializer())
            h = tf.nn.relu(tf.matmul(x, w) + b)
        with tf.variable_scope("layer2"):
            w2 = tf.get_variable("w", [32, 4], initializer=tf.ones_initializer())
            y = tf.matmul(h, w2)
        loss = tf.reduce_mean(tf.square(y), name="loss")
    return g, x, loss
