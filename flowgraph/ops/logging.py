"""Checking and printing values inside the graph: tf.Assert, tf.Print, tf.print,
tf.check_numerics (TF1's logging_ops and numerics). Each is an op, so it runs where and when the
graph does."""

from __future__ import annotations

import os
import pprint
import random
import sys

from flowgraph.core import dtypes
from flowgraph.framework import nest
from flowgraph.framework.apply_op import apply_op
from flowgraph.framework.convert import convert_to_tensor
from flowgraph.framework.operation import Tensor
from flowgraph.framework.sparse_tensor import SparseTensor
from flowgraph.ops.array import name_scope
from flowgraph.ops.string_ops import string_format
from flowgraph.platform import tf_logging

__all__ = ["Assert", "Print", "check_numerics", "print", "timestamp", "verify_tensor_all_finite"]


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


def verify_tensor_all_finite(t=None, msg=None, name=None, x=None, message=None):
    """check_numerics under a 'VerifyFinite' scope (TF1's numerics.verify_tensor_all_finite;
    `x` and `message` are TF 1.15's newer names of `t` and `msg`)."""
    if (t is None) == (x is None) or (msg is None) == (message is None):
        raise ValueError("Give exactly one of t and x, and exactly one of msg and message")
    t, msg = (t if x is None else x), (msg if message is None else message)
    with name_scope(name, "VerifyFinite", [t]):
        t = convert_to_tensor(t, name="t")
        return check_numerics(t, message=msg)


def _output_stream(stream) -> str:
    """tf.print's stream argument as PrintV2's output_stream attr."""
    if isinstance(stream, str) and stream.startswith("file://"):
        return stream
    table = (
        (sys.stdout, "stdout"),
        (sys.stderr, "stderr"),
        (tf_logging.INFO, "log(info)"),
        (tf_logging.info, "log(info)"),
        (tf_logging.WARN, "log(warning)"),
        (tf_logging.warning, "log(warning)"),
        (tf_logging.warn, "log(warning)"),
        (tf_logging.ERROR, "log(error)"),
        (tf_logging.error, "log(error)"),
    )
    for known, attr in table:
        if stream is known:
            return attr
    raise ValueError(
        f"Unsupported output stream or logging level {stream}. Supported streams are "
        "sys.stdout, sys.stderr, tf.logging.info, tf.logging.warning, tf.logging.error. File "
        "needs to be in the form of 'file://<filepath>'."
    )


def _placeholder(text: str) -> str:
    """ "{}" unless the non-tensor text contains it; then "{}" and digits, as TF picks them."""
    placeholder, rng = "{}", random.Random(5)
    while placeholder in text:
        placeholder += str(rng.randint(0, 9))
    return placeholder


def print(*inputs, **kwargs):
    """An op that prints `inputs` (tensors, Python values and nested structures of both) when it
    runs, like Python's print: `sep` between inputs, `end` after, each tensor summarized to its
    first and last `summarize` entries per dimension. `output_stream`: sys.stderr (default),
    sys.stdout, tf.logging.info/warning/error, or "file://<path>" (appended).

    Example: with tf.control_dependencies([tf.print("step", step, "loss", loss)]): ...
    """
    output_stream = kwargs.pop("output_stream", sys.stderr)
    name = kwargs.pop("name", None)
    summarize = kwargs.pop("summarize", 3)
    sep = kwargs.pop("sep", " ")
    end = kwargs.pop("end", os.linesep)
    if kwargs:
        raise ValueError(f"Unrecognized keyword arguments for tf.print: {kwargs}")
    stream = _output_stream(output_stream)
    first = inputs[0] if len(inputs) == 1 else None
    if isinstance(first, Tensor) and first.shape.ndims == 0 and first.dtype == dtypes.string:
        text = first
    else:
        text = string_format(
            *_template(inputs, sep),
            summarize=summarize,
            name=None if name is None else f"{name}_format",
        )
    return apply_op("PrintV2", [text], name=name, output_stream=stream, end=end)


def _template(inputs, sep):
    """(template, tensors, placeholder) of tf.print's inputs: Python strings print as they are,
    structures as pprint shows them with each tensor's place marked."""
    is_tensor = lambda x: isinstance(x, (Tensor, SparseTensor))
    free = nest.map_structure(lambda x: "" if is_tensor(x) else x, list(inputs))
    placeholder = _placeholder(" ".join(pprint.pformat(x) for x in free))
    templates, tensors = [], []
    for value in inputs:
        marks = []
        for x in nest.flatten(value):
            if isinstance(x, SparseTensor):
                tensors += [x.indices, x.values, x.dense_shape]
                p = placeholder
                marks.append(f"SparseTensor(indices={p}, values={p}, shape={p})")
            elif is_tensor(x):
                tensors.append(x)
                marks.append(placeholder)
            else:
                marks.append(x)
        if isinstance(value, str):
            templates.append(value)
        else:
            templates.append(pprint.pformat(nest.pack_sequence_as(value, marks)))
    template = sep.join(templates).replace(f"'{placeholder}'", placeholder)
    return template, tensors, placeholder


def timestamp(name=None):
    """A float64 scalar: the time, in seconds since the epoch, when the op runs."""
    return apply_op("Timestamp", [], name=name).outputs[0]
