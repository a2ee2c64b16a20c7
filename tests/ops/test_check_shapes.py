"""tf.debugging.assert_shapes against TF 1.15's rules: named sizes shared between tensors,
explicit sizes, any-size symbols, a leading `...`, scalars as [1]; static failures are
ValueErrors at construction with TF's messages, the rest Asserts that fail the step."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import errors

assert_shapes = tf.debugging.assert_shapes


def _run(op):
    with tf.Session() as s:
        s.run(op)


def _fed(value, shape):
    return tf.placeholder_with_default(np.zeros(value, np.float32), shape)


def test_static_shapes_that_hold_give_a_no_op():
    x, y, b = tf.zeros([10, 3]), tf.zeros([10, 7]), tf.zeros([3])
    op = assert_shapes([(x, ("N", "Q")), (y, ("N", "D")), (b, ("Q",)), (tf.constant(1.0), ())])
    assert op.type == "NoOp"
    assert assert_shapes({tf.zeros([2, 10, 3]): (..., "N", 3), b: ("*", 3)}).type == "NoOp"
    assert assert_shapes([(b, None), (tf.zeros([2, 2]), (".", 2))]).type == "NoOp"
    _run(op)


@pytest.mark.parametrize(
    "shapes, message, expected",
    [
        (
            lambda: [(tf.zeros([10, 3]), ("N", "D")), (tf.zeros([10, 7]), ("N", "D"))],
            None,
            (
                ".  Specified by tensor zeros:0 dimension 1.  Tensor zeros_1:0 dimension 1 must "
                "have size 3.  Received size 7, shape (10, 7)"
            ),
        ),
        (
            lambda: [(tf.zeros([10, 3]), (10, 4))],
            "E",
            (
                "E.  Specified explicitly.  Tensor zeros:0 dimension 1 must have size 4.  Received "
                "size 3, shape (10, 3)"
            ),
        ),
        (
            lambda: [(tf.zeros([10, 3]), ("N",))],
            None,
            ".  Tensor zeros:0 must have rank in (0, 1).  Received rank 2, shape (10, 3)",
        ),
        (
            lambda: [(tf.zeros([2, 10, 3]), ("N", ..., 3))],
            None,
            (
                ".  Tensor zeros:0 specified shape index 1.  Symbol `...` or `*` for a variable "
                "number of unspecified dimensions is only allowed as the first entry"
            ),
        ),
        (lambda: [(tf.zeros([3]), 3)], None, "Specified shape must be an iterable"),
    ],
)
def test_static_violations_are_value_errors(shapes, message, expected):
    with pytest.raises(ValueError) as info:
        assert_shapes(shapes(), message=message)
    assert expected in str(info.value)


def test_run_time_sizes_and_ranks_are_asserted():
    good = assert_shapes([(_fed((4, 3), [None, 3]), ("N", 3)), (tf.zeros([4]), ("N",))])
    bad = assert_shapes([(tf.zeros([4]), ("N",)), (_fed((5, 3), [None, 3]), ("N", 3))])
    unknown_ok = assert_shapes([(_fed((4, 3), None), ("N", 3)), (tf.zeros([4]), ("N",))])
    unknown_rank = assert_shapes([(_fed((4, 3, 1), None), ("N", 3))])
    unknown_size = assert_shapes([(_fed((4, 2), None), ("N", 3))], message="sizes")
    _run([good, unknown_ok])
    with pytest.raises(
        errors.InvalidArgumentError, match=r"Specified by tensor zeros_1:0 dimension 0.*\[5 3\]"
    ):
        _run(bad)
    with pytest.raises(errors.InvalidArgumentError, match="must have rank"):
        _run(unknown_rank)
    with pytest.raises(errors.InvalidArgumentError, match=r"sizes.*Specified explicitly"):
        _run(unknown_size)


def test_a_scalar_is_one_dimension_of_size_one():
    _run(assert_shapes([(tf.zeros([1]), ()), (tf.constant(2.0), (1,))]))
    with pytest.raises(ValueError, match="must have size 1"):
        assert_shapes([(tf.constant(2.0), ("N",)), (tf.zeros([3]), ("N",))])


def test_incompatible_shapes_fail_in_the_comparison_op_as_in_tf():
    """assert_equal builds its Equal before the static check, so shapes that cannot
    broadcast fail in Equal's shape function (TF's ValueError), not in NumPy."""
    with pytest.raises(ValueError, match="assert_equal/Equal"):
        tf.assert_equal(tf.constant([1, 2]), tf.constant([1, 2, 3]))
