"""The helper ops of gradient graphs against NumPy, with their error cases."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import errors
from flowgraph.gradients.util import build
from flowgraph.testing.op_test import check_op


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_broadcast_gradient_args(dtype):
    s0, s1 = np.array([2, 1, 3], dtype), np.array([4, 1], dtype)
    check_op(
        lambda a, b: list(build("BroadcastGradientArgs", a, b)),
        [s0, s1],
        lambda a, b: [np.array([1], dtype), np.array([0, 2], dtype)],
    )
    with pytest.raises(errors.InvalidArgumentError, match="Incompatible shapes"):
        check_op(
            lambda a, b: list(build("BroadcastGradientArgs", a, b)),
            [np.array([2, 3], dtype), np.array([4], dtype)],
            lambda a, b: [a, b],
        )


@pytest.mark.parametrize(
    "s0, s1, r0, r1",
    [([1, 1], [1, 1], [0, 1], [0, 1]), ([], [2, 3], [0, 1], []), ([5, 1], [5, 7], [1], [])],
)
def test_broadcast_gradient_args_ones_and_ranks(s0, s1, r0, r1):
    """Both sides sum over an axis of size 1 in both; a missing leading axis counts as 1."""
    a, b = np.array(s0, np.int32), np.array(s1, np.int32)
    check_op(
        lambda x, y: list(build("BroadcastGradientArgs", x, y)),
        [a, b],
        lambda x, y: [np.array(r0, np.int32), np.array(r1, np.int32)],
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.complex64])
def test_unsorted_segment_sum(dtype):
    data = (np.arange(6).reshape(3, 2) + 1).astype(dtype)
    ids = np.array([2, 0, 2], np.int32)

    def reference(d, i):
        out = np.zeros((4, 2), dtype)
        np.add.at(out, i, d)
        return out

    check_op(lambda d, i: build("UnsortedSegmentSum", d, i, 4), [data, ids], reference)
    with pytest.raises(errors.InvalidArgumentError, match="out of range"):
        check_op(lambda d, i: build("UnsortedSegmentSum", d, i, 2), [data, ids], reference)


def test_dynamic_stitch_and_invert_permutation():
    check_op(
        lambda a, b: build("DynamicStitch", [tf.constant([0, 2]), tf.constant([1])], [a, b]),
        [np.array([1.0, 3.0]), np.array([2.0])],
        lambda a, b: np.array([1.0, 2.0, 3.0]),
    )
    check_op(
        lambda p: build("InvertPermutation", p),
        [np.array([2, 0, 1], np.int32)],
        lambda p: np.argsort(p).astype(np.int32),
    )
    with pytest.raises(errors.InvalidArgumentError, match="not a permutation"):
        check_op(lambda p: build("InvertPermutation", p), [np.array([0, 0], np.int32)], lambda p: p)


@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_strided_slice_grad(dtype):
    dy = np.array([[1, 2]], dtype)

    def reference(d):
        out = np.zeros((3, 2), dtype)
        out[1:2] = d
        return out

    check_op(lambda d: build("StridedSliceGrad", [3, 2], [1], [2], [1], d), [dy], reference)
