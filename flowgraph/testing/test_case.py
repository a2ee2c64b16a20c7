"""tf.test: TF1's testing helpers for user test suites (TestCase, main, gradient checks)."""

from __future__ import annotations

import contextlib
import unittest

import numpy as np

from flowgraph.framework.graph import Graph


class TestCase(unittest.TestCase):
    """unittest.TestCase with a fresh graph per test and TF1's session and array assertions."""

    def setUp(self):
        super().setUp()
        self._graph = Graph()
        self._graph_ctx = self._graph.as_default()
        self._graph_ctx.__enter__()

    def tearDown(self):
        self._graph_ctx.__exit__(None, None, None)
        super().tearDown()

    def get_temp_dir(self) -> str:
        import tempfile

        return tempfile.mkdtemp()

    @contextlib.contextmanager
    def session(self, graph=None, config=None):
        from flowgraph.session.session import Session

        with Session(graph=graph or self._graph, config=config) as sess:
            yield sess

    cached_session = session

    def evaluate(self, tensors):
        with self.session() as sess:
            return sess.run(tensors)

    def assertAllClose(self, a, b, rtol=1e-6, atol=1e-6, msg=None):
        np.testing.assert_allclose(
            np.asarray(a), np.asarray(b), rtol=rtol, atol=atol, err_msg=msg or ""
        )

    def assertAllEqual(self, a, b, msg=None):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=msg or "")

    def assertShapeEqual(self, np_array, tensor, msg=None):
        self.assertEqual(list(np.shape(np_array)), tensor.shape.as_list(), msg)


def main(argv=None):
    """Runs the tests of the calling module (tf.test.main)."""
    unittest.main(argv=argv)


def is_gpu_available(cuda_only=False, min_cuda_compute_capability=None) -> bool:
    from flowgraph.runtime import device

    return "GPU" in device.available_device_types()


def gpu_device_name() -> str:
    return "/device:GPU:0" if is_gpu_available() else ""
