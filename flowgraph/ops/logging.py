"""Checking and printing values inside the graph: tf.Assert, tf.Print, tf.check_numerics
(TF1's logging_ops and numerics). Each is an op, so it runs where and when the graph does."""

from __future__ import annotations

from flowgraph.framework.apply_op import apply_op
from flowgraph.framework.convert import convert_to_tensor
from flowgraph.ops.array import name_scope

__all__ = ["Assert", "Print", "check_numerics", "verify_tensor_all_finite"]


def Assert(condition, data, summarize=None, name=None):
    """An op that fails with InvalidArgumentError "assertion failed: [data...]" when `condition`
    is False; the first `summarize` (default 3) entries of each data tensor are shown.

    Example: with tf.control_dependencies([tf.Assert(x > 0, ["x must be positive", x])]): ...
    """
    with name_scope(name, "Assert", [condition] + list(data)):
        tensors = [convert_to_tensor(d) for d in data]
        condition = convert_to_tensor(condition, name="Condition")
        return apply_op("Assert", [condition, tensors], name="Assert", summarize=summarize)


def Print(input_, data, message=None, first_n=None, summarize=None, name=None):
    """Returns `input_`, and when it runs writes `message` followed by each data tensor's
    summary to stderr (only the first `first_n` times if first_n >= 0)."""
    tensors = [convert_to_tensor(d) for d in data]
    return apply_op(
        "Print", [input_, tensors], name=name, message=message, first_n=first_n, summarize=summarize
    ).outputs[0]


def check_numerics(tensor, message, name=None):
    """Returns `tensor`; fails with InvalidArgumentError naming `message` if it has NaN or Inf."""
    return apply_op("CheckNumerics", [tensor], name=name, message=message).outputs[0]


def verify_tensor_all_finite(t, msg, name=None):
    """check_numerics under a 'VerifyFinite' scope (TF1's numerics.verify_tensor_all_finite)."""
    with name_scope(name, "VerifyFinite", [t]):
        t = convert_to_tensor(t, name="t")
        return check_numerics(t, message=msg)
