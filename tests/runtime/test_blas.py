"""BLAS runs single-threaded once a Session exists: intra-op parallelism is the device pool's."""

import flowgraph as tf
from flowgraph.runtime import blas


def test_session_limits_blas_to_one_thread():
    tf.Session(config=tf.ConfigProto(intra_op_parallelism_threads=2)).close()
    assert blas.num_threads() and set(blas.num_threads()) == {1}
