"""tf.nest and tf.test exist with TF1's names and work."""

import numpy as np

import flowgraph as tf


def test_nest():
    s = {"b": (1, 2), "a": [3]}
    flat = tf.nest.flatten(s)
    assert flat == [3, 1, 2]
    assert tf.nest.pack_sequence_as(s, [30, 10, 20]) == {"a": [30], "b": (10, 20)}
    assert tf.nest.map_structure(lambda v: v * 2, [1, (2,)]) == [2, (4,)]


class _Example(tf.test.TestCase):
    def test_session_and_assertions(self):
        x = tf.constant([1.0, 2.0])
        with self.session() as sess:
            self.assertAllClose(sess.run(x * 2), [2.0, 4.0])
        self.assertAllEqual(self.evaluate(tf.constant([1, 2])), [1, 2])


def test_tf_test_case_runs_and_gradient_checker_is_exported():
    import io
    import unittest

    result = unittest.TextTestRunner(stream=io.StringIO()).run(
        unittest.defaultTestLoader.loadTestsFromTestCase(_Example)
    )
    assert result.wasSuccessful()
    assert tf.test.compute_gradient_error is not None and tf.test.is_gpu_available() in (
        True,
        False,
    )
    x = tf.constant(np.array([1.0, 2.0]))
    assert tf.test.compute_gradient_error(x, [2], x * x, [2]) < 1e-4
