"""tf.debugging / tf.assert_*: run-time assertions with TF 1.15's messages, and the static
checks that fail at graph construction (checked against TensorFlow's behaviour)."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import errors


def _run(op, feed=None):
    with tf.Session() as sess:
        sess.run(op, feed)


@pytest.mark.parametrize(
    "assert_fn, ok, bad, symbol",
    [
        (tf.assert_equal, [1.0, 1.0], [1.0, 2.0], "=="),
        (tf.assert_less, [0.0, 0.5], [1.0, 0.0], "<"),
        (tf.assert_less_equal, [1.0, 0.5], [1.0, 2.0], "<="),
        (tf.assert_greater, [2.0, 3.0], [1.0, 2.0], ">"),
        (tf.assert_greater_equal, [1.0, 3.0], [1.0, 0.0], ">="),
    ],
)
def test_binary_asserts_fail_the_step_with_tensorflows_message(assert_fn, ok, bad, symbol):
    x = tf.placeholder(tf.float32, [None])
    check = assert_fn(x, 1.0, message="custom", summarize=1)
    with tf.control_dependencies([check]):
        y = tf.identity(x)
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(y, {x: ok}), ok)
        with pytest.raises(errors.InvalidArgumentError) as e:
            sess.run(y, {x: bad})
    text = str(e.value)
    assert f"[custom] [Condition x {symbol} y did not hold element-wise:]" in text
    assert "[x (Placeholder:0) = ] [1...]" in text  # summarize=1


def test_assert_equal_of_constants_is_checked_at_construction():
    with pytest.raises(errors.InvalidArgumentError, match="Condition x == y") as e:
        tf.assert_equal([1, 2], [1, 3], message="msg")
    assert str(e.value).splitlines()[0] == "msg"
    assert "[1 2]" in str(e.value) and "[1 3]" in str(e.value)
    _run(tf.assert_equal([1, 2], [1, 2]))
    _run(tf.debugging.assert_equal(tf.constant(3), 3))


def test_sign_asserts_and_none_equal_and_near():
    x = tf.placeholder(tf.float32, [None])
    cases = [
        (tf.assert_positive(x), [1.0, 2.0], [1.0, 0.0], "x > 0"),
        (tf.assert_negative(x), [-1.0], [-1.0, 0.0], "x < 0"),
        (tf.assert_non_negative(x), [0.0, 2.0], [-1.0], "x >= 0"),
        (tf.assert_non_positive(x), [0.0, -2.0], [1.0], "x <= 0"),
        (tf.assert_none_equal(x, 2.0), [1.0, 3.0], [2.0], "x != y"),
        (tf.assert_near(x, 1.0, atol=0.1), [1.05, 0.95], [1.2], "not equal to tolerance"),
    ]
    with tf.Session() as sess:
        for check, ok, bad, words in cases:
            sess.run(check, {x: ok})
            with pytest.raises(errors.InvalidArgumentError, match=words):
                sess.run(check, {x: bad})


def test_rank_asserts_are_static_when_the_rank_is_known():
    m = tf.zeros([2, 3])
    assert tf.assert_rank(m, 2).type == "NoOp"
    assert tf.assert_rank_at_least(m, 1).type == "NoOp"
    assert tf.assert_rank_in(m, [1, 2]).type == "NoOp"
    with pytest.raises(
        ValueError, match=r"r\.  Tensor zeros:0 must have rank 3\.  Received rank 2"
    ):
        tf.assert_rank(m, 3, message="r")
    with pytest.raises(ValueError, match="must have rank at least 3"):
        tf.assert_rank_at_least(m, 3)
    with pytest.raises(ValueError, match=r"must have rank in \(1, 3\)"):
        tf.assert_rank_in(m, [1, 3])
    with pytest.raises(TypeError, match="must be of type"):
        tf.assert_rank(m, tf.constant(2, tf.int64))
    with pytest.raises(ValueError, match="Rank must be a scalar"):
        tf.assert_rank(m, [2])


def test_rank_asserts_at_run_time():
    u = tf.placeholder(tf.float32)
    rank2 = tf.assert_rank(u, 2)
    rank_in = tf.assert_rank_in(u, [0, 2])
    dynamic_rank = tf.placeholder(tf.int32)
    by_tensor = tf.assert_rank_at_least(u, dynamic_rank)
    with tf.Session() as sess:
        sess.run([rank2, rank_in], {u: np.zeros((1, 1))})
        with pytest.raises(errors.InvalidArgumentError, match="must have rank"):
            sess.run(rank2, {u: [1.0]})
        with pytest.raises(errors.InvalidArgumentError, match="must have rank in"):
            sess.run(rank_in, {u: [1.0]})
        sess.run(by_tensor, {u: [1.0], dynamic_rank: 1})
        with pytest.raises(errors.InvalidArgumentError, match="Rank must be a scalar"):
            sess.run(by_tensor, {u: [1.0], dynamic_rank: [1]})


def test_static_dtype_and_shape_checks():
    assert tf.assert_type(tf.zeros([2]), tf.float32).type == "NoOp"
    with pytest.raises(TypeError, match="t  zeros_1:0 must be of type <dtype: 'int32'>"):
        tf.assert_type(tf.zeros([2]), tf.int32, message="t")
    assert tf.assert_integer(tf.constant([1])).type == "NoOp"
    with pytest.raises(TypeError, match='Expected "x" to be integer type'):
        tf.assert_integer(tf.zeros([2]))
    scalar = tf.constant(3.0)
    assert tf.assert_scalar(scalar) is scalar
    with pytest.raises(ValueError, match="Expected scalar shape"):
        tf.assert_scalar(tf.zeros([2]))
    for bad in ("abc", b"abc", np.zeros(2), tf.zeros([2]), 3):
        with pytest.raises(TypeError, match="iterable"):
            tf.assert_proper_iterable(bad)
    tf.assert_proper_iterable([1, 2])
    assert tf.assert_same_float_dtype([tf.zeros([1], tf.float64)]) == tf.float64
    assert tf.assert_same_float_dtype() == tf.float32
    with pytest.raises(ValueError, match="must be of the same type"):
        tf.assert_same_float_dtype([tf.zeros([1]), tf.zeros([1], tf.float64)])
    with pytest.raises(ValueError, match="Expected floating point type"):
        tf.assert_same_float_dtype(None, tf.int32)


def test_monotonicity_and_numeric_predicates():
    assert tf.is_numeric_tensor(tf.zeros([1])) and tf.is_numeric_tensor(tf.zeros([1], tf.bfloat16))
    assert not tf.is_numeric_tensor(tf.constant("a")) and not tf.is_numeric_tensor(3)
    with tf.Session() as sess:
        got = sess.run(
            [
                tf.is_non_decreasing([1, 2, 2]),
                tf.is_strictly_increasing([1, 2, 2]),
                tf.is_strictly_increasing([[1, 3], [4, 5]]),
                tf.is_non_decreasing([5]),
                tf.debugging.is_strictly_increasing(tf.zeros([0])),
            ]
        )
    assert got == [True, False, True, True, True]
    with pytest.raises(TypeError, match="Expected x to be numeric"):
        tf.is_non_decreasing(["a"])


def test_check_numerics_helpers():
    x = tf.placeholder(tf.float32)
    y = tf.log(x)
    check = tf.add_check_numerics_ops()
    with tf.Session() as sess:
        sess.run(check, {x: 1.0})
        with pytest.raises(errors.InvalidArgumentError, match="Log:0 : Tensor had NaN"):
            sess.run([y, check], {x: -1.0})
    finite = tf.debugging.assert_all_finite(x, "bad input")
    with tf.Session() as sess, pytest.raises(errors.InvalidArgumentError, match="bad input"):
        sess.run(finite, {x: np.inf})
    assert tf.verify_tensor_all_finite(x=x, message="m").op.type == "CheckNumerics"
