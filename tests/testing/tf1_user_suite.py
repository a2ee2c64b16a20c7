"""A TF1 user's own test file, written for TensorFlow 1.15 (not collected by our suite: its
name matches no test pattern). test_test_case.py runs it under `flowgraph run`."""

import numpy as np
import tensorflow as tf
from tensorflow.python.framework import test_util
from tensorflow.python.ops import gradient_checker
from tensorflow.python.platform import test


class SquareTest(tf.test.TestCase):
    def testSquareWithTestSession(self):
        with self.test_session():
            x = tf.constant([1.0, 2.0, 3.0])
            self.assertAllClose(tf.square(x).eval(), [1.0, 4.0, 9.0])

    @test_util.run_deprecated_v1
    def testSessionOnCpu(self):
        with self.session(use_gpu=False) as sess:
            y = tf.constant(2.0) * 3.0
            self.assertEqual(sess.run(y), 6.0)
            self.assertIn("CPU", y.device)

    def testCachedSessionIsReused(self):
        with self.cached_session() as a, self.cached_session() as b:
            self.assertIs(a, b)

    @test_util.run_in_graph_and_eager_modes
    def testEvaluateVariables(self):
        v = tf.Variable([1.0, 2.0])
        self.evaluate(tf.global_variables_initializer())
        self.evaluate(v.assign_add([1.0, 1.0]))
        self.assertAllEqual(self.evaluate(v), [2.0, 3.0])

    @test_util.run_v1_only("uses placeholders")
    def testOpErrors(self):
        p = tf.placeholder(tf.float32)
        with self.cached_session():
            with self.assertRaisesOpError("must feed a value for placeholder"):
                p.eval()
            with self.assertRaisesWithPredicateMatch(ValueError, lambda e: "shape" in str(e)):
                p.eval(feed_dict={p: [[1.0], [2.0, 3.0]]})

    def testNearness(self):
        self.assertArrayNear([1.0, 2.0], [1.0, 2.0 + 1e-7], 1e-6)
        self.assertNDArrayNear(np.ones((2, 2)), np.ones((2, 2)) + 1e-8, 1e-6)
        a = np.float16([1.0, 2.0])
        self.assertAllCloseAccordingToType(a, a + np.float16(1e-3))

    def testGradient(self):
        with self.cached_session():
            x = tf.constant([1.0, 2.0], dtype=tf.float64)
            y = x * x
            err = tf.test.compute_gradient_error(x, [2], y, [2])
            err2 = gradient_checker.compute_gradient_error(x, [2], y, [2])
        self.assertLess(max(err, err2), 1e-6)

    def testResetDefaultGraphAndSeeds(self):
        tf.constant(1.0)
        self.assertEqual(tf.get_default_graph().seed, 87654321)  # TF's test graph seed
        tf.reset_default_graph()
        self.assertEqual(tf.get_default_graph().get_operations(), [])
        with self.cached_session() as sess:
            self.assertIs(sess.graph, tf.get_default_graph())

    def testGpuQueries(self):
        self.assertIsInstance(tf.test.is_gpu_available(), bool)
        self.assertIsInstance(test.is_gpu_available(cuda_only=True), bool)


if __name__ == "__main__":
    test.main()
