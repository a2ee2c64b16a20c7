"""Shape inference evaluates small constant subgraphs, as TensorFlow's shape refiner does
(issue 7 defect 22: `tf.slice` sizes computed by tensors kept TF's static shape)."""

import numpy as np

import flowgraph as tf
from flowgraph.framework.constant_eval import evaluated_value
from flowgraph.framework.convert import constant_value


def test_slice_sizes_computed_from_constants_are_known():
    x = tf.zeros([4, 5, 3])
    y = tf.slice(x, [0, 0, 0], [tf.constant(1) + 0, 2, -1])
    assert y.shape.as_list() == [1, 2, 3]  # TF: [1, 2, 3]


def test_picked_dimensions_of_a_partial_shape():
    x = tf.placeholder(tf.float32, [None, None, 5])
    assert tf.reshape(x, [-1, tf.shape(x)[2]]).shape.as_list() == [None, 5]
    assert tf.reshape(x, tf.shape(x)[1:]).shape.as_list() == [None, 5]
    assert tf.zeros([tf.constant(2) * 3, 4]).shape.as_list() == [6, 4]


def test_values_depending_on_feeds_or_state_stay_unknown():
    p = tf.placeholder(tf.int32, [])
    v = tf.Variable(2)
    r = tf.random_uniform([], 0, 10, tf.int32)
    for t in (p + 1, v + 1, r + 1, tf.shape(tf.placeholder(tf.float32, [None]))[0] * 2):
        assert evaluated_value(t) is None
    assert tf.zeros(tf.stack([p, 3])).shape.as_list() == [None, 3]


def test_evaluated_value_runs_the_cpu_kernels():
    t = tf.maximum(tf.constant([1, 7]) * 2, 5) // 3
    np.testing.assert_array_equal(evaluated_value(t), [1, 4])
    assert evaluated_value(tf.constant(1.0) / 0.0) == np.inf
    # Python's constant_value stays as narrow as TensorFlow's: wrappers build TF's graphs.
    assert constant_value(t) is None
