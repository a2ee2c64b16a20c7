"""tf.summary ops: each builds a node whose output is a serialized Summary proto (§9.1).

Summaries are ordinary graph nodes: run them (usually through `merge_all()`) and hand the bytes
to `FileWriter.add_summary`. Names follow TF1's `summary_scope`: the op is named after the
(uniquified) scope, and the tag is that scope, prefixed by `family` when one is given.
"""

from __future__ import annotations

import contextlib
import logging
import re

import numpy as np

from flowgraph.core import dtypes
from flowgraph.core.protos import SummaryMetadata
from flowgraph.framework import convert
from flowgraph.framework.apply_op import apply_op
from flowgraph.framework.graph import GraphKeys, get_default_graph
from flowgraph.framework.scopes import name_scope

__all__ = ["histogram", "image", "merge", "merge_all", "scalar", "tensor_summary", "text"]

_log = logging.getLogger(__name__)
_INVALID_TAG_CHARACTERS = re.compile(r"[^-/\w\.]")
# ImageSummary's colour for non-finite pixels (opaque red), TF's default `bad_color`.
_BAD_COLOR = np.array([255, 0, 0, 255], dtype=np.uint8)


def _clean_tag(name):
    """`name` with characters TensorBoard rejects replaced by '_' and leading '/' dropped."""
    if name is None:
        return None
    new_name = _INVALID_TAG_CHARACTERS.sub("_", name).lstrip("/")
    if new_name != name:
        _log.info("Summary name %s is illegal; using %s instead.", name, new_name)
    return new_name


@contextlib.contextmanager
def _summary_scope(name, family=None, values=None):
    """Yields (tag, scope) for a summary op named `name` in optional `family` (TF1's rule)."""
    name = _clean_tag(name)
    family = _clean_tag(family)
    base = name if family is None else f"{family}/{name}"
    with name_scope(base, values=values) as scope:
        tag = scope.rstrip("/") if family is None else f"{family}/{scope.rstrip('/')}"
        yield tag, scope


def _collect(summary, collections):
    keys = [GraphKeys.SUMMARIES] if collections is None else list(collections)
    for key in keys:
        summary.graph.add_to_collection(key, summary)


def scalar(name, tensor, collections=None, family=None):
    """A Summary with one `simple_value`: the value of the scalar real `tensor`.

    Example:
      tf.summary.scalar("loss", loss)   # tag "loss" (prefixed by the enclosing name scopes)
    """
    with _summary_scope(name, family, values=[tensor]) as (tag, scope):
        summary = apply_op("ScalarSummary", [tag, tensor], name=scope).outputs[0]
    _collect(summary, collections)
    return summary


def histogram(name, values, collections=None, family=None):
    """A Summary with the histogram of `values` in TensorFlow's bucketing (NaN/Inf fail at run
    time).

    Example:
      tf.summary.histogram("weights", w)
    """
    with _summary_scope(name, family, values=[values]) as (tag, scope):
        summary = apply_op("HistogramSummary", [tag, values], name=scope).outputs[0]
    _collect(summary, collections)
    return summary


def image(name, tensor, max_outputs=3, collections=None, family=None):
    """A Summary with up to `max_outputs` PNG images from `tensor` [batch, height, width, 1|3|4].

    uint8 images are written as is; float images are rescaled per image into [0, 255] (see the
    ImageSummary kernel). Tags are `<tag>/image/<i>`, or `<tag>/image` when max_outputs == 1.
    """
    with _summary_scope(name, family, values=[tensor]) as (tag, scope):
        summary = apply_op(
            "ImageSummary", [tag, tensor], name=scope, max_images=max_outputs, bad_color=_BAD_COLOR
        ).outputs[0]
    _collect(summary, collections)
    return summary


def tensor_summary(
    name,
    tensor,
    summary_description=None,
    collections=None,
    summary_metadata=None,
    family=None,
    display_name=None,
):
    """A Summary holding `tensor` itself as a TensorProto, with plugin metadata."""
    if summary_metadata is None:
        summary_metadata = SummaryMetadata()
    if summary_description is not None:
        summary_metadata.summary_description = summary_description
    if display_name is not None:
        summary_metadata.display_name = display_name
    serialized = summary_metadata.SerializeToString()
    with _summary_scope(name, family, values=[tensor]) as (tag, scope):
        summary = apply_op(
            "TensorSummaryV2", [tag, tensor, np.array(serialized, dtype=object)], name=scope
        ).outputs[0]
    _collect(summary, collections)
    return summary


def text(name, tensor, collections=None):
    """A Summary of a string tensor for TensorBoard's text dashboard (Markdown is rendered)."""
    tensor = convert.convert_to_tensor(tensor)
    if tensor.dtype.base_dtype != dtypes.string:
        raise ValueError(f"Expected tensor {tensor.name} to have dtype string, got {tensor.dtype}")
    metadata = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="text"))
    return tensor_summary(name, tensor, summary_metadata=metadata, collections=collections)


def merge(inputs, collections=None, name=None):
    """One Summary holding every value of `inputs` (duplicate tags fail at run time)."""
    inputs = list(inputs)
    with name_scope(name, "Merge", inputs):
        summary = apply_op("MergeSummary", [inputs], name=name).outputs[0]
    if collections:
        _collect(summary, collections)
    return summary


def merge_all(key=GraphKeys.SUMMARIES, scope=None, name=None):
    """`merge` of every summary in collection `key` (filtered by `scope`); None if there is none."""
    summaries = get_default_graph().get_collection(key, scope=scope)
    if not summaries:
        return None
    return merge(summaries, name=name)
