"""CPU kernels for summary ops: each returns one serialized `Summary` proto (whitepaper §9.1).

Histograms use TensorFlow's fixed bucket edges (`histogram_bucket_limits`) and its encoding,
which collapses each run of empty buckets into one, so that TensorBoard shows our histograms
exactly as TF's. Images are encoded as PNG by `png.encode_png` (zlib only).
"""

from __future__ import annotations

import sys

import numpy as np
from google.protobuf.message import DecodeError

from flowgraph.core import errors
from flowgraph.core.protos import HistogramProto, Summary, SummaryMetadata
from flowgraph.core.tensor_util import make_tensor_proto
from flowgraph.kernels.base import register_kernel
from flowgraph.kernels.cpu.png import encode_png

_DBL_MAX = sys.float_info.max


def _default_bucket_limits() -> np.ndarray:
    """TF's histogram edges: 0, then +-1e-12 * 1.1**k below 1e20, then +-DBL_MAX.

    The edges are built by repeated multiplication (not powers) so that every double equals
    TensorFlow's `InitDefaultBucketsInner` bit for bit.
    """
    positive = []
    v = 1.0e-12
    while v < 1.0e20:
        positive.append(v)
        v *= 1.1
    positive.append(_DBL_MAX)
    pos = np.array(positive)
    return np.concatenate([-pos[::-1], [0.0], pos])


_BUCKET_LIMITS = _default_bucket_limits()


def histogram_bucket_limits() -> np.ndarray:
    """A copy of TensorFlow's default histogram bucket edges (right edges, ascending)."""
    return _BUCKET_LIMITS.copy()


def histogram_proto(values: np.ndarray) -> HistogramProto:
    """TF's HistogramProto of `values`: bucket i counts values v with limit[i-1] <= v < limit[i].

    Sums accumulate left to right in double, as TF's `Histogram::Add` does (np.cumsum is a
    sequential sum; np.sum's pairwise order would differ in the last bits). Each run of empty
    buckets becomes one entry whose limit is the run's last edge.
    """
    flat = np.asarray(values, dtype=np.float64).reshape(-1)
    proto = HistogramProto()
    counts = np.bincount(
        np.searchsorted(_BUCKET_LIMITS, flat, side="right"), minlength=len(_BUCKET_LIMITS)
    )
    if flat.size:
        proto.min = float(flat.min())
        proto.max = float(flat.max())
        proto.sum = float(np.cumsum(flat)[-1])
        proto.sum_squares = float(np.cumsum(flat * flat)[-1])
    else:  # TF's empty histogram: min DBL_MAX, max -DBL_MAX
        proto.min = _DBL_MAX
        proto.max = -_DBL_MAX
    proto.num = float(flat.size)
    nonzero = counts > 0
    # An entry ends at every non-empty bucket and at the last bucket of every empty run.
    next_nonzero = np.append(nonzero[1:], True)
    keep = nonzero | next_nonzero
    proto.bucket_limit.extend(_BUCKET_LIMITS[keep].tolist())
    proto.bucket.extend(counts[keep].astype(np.float64).tolist())
    return proto


def _text(value) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _serialized(summary: Summary) -> np.ndarray:
    return np.array(summary.SerializeToString(), dtype=object)


@register_kernel("ScalarSummary")
def scalar_summary(ctx, tags, values):
    if np.shape(tags) != np.shape(values):
        raise errors.InvalidArgumentError(
            None,
            None,
            f"tags and values not the same shape: {list(np.shape(tags))} != "
            f"{list(np.shape(values))}",
        )
    summary = Summary()
    for tag, value in zip(np.asarray(tags).reshape(-1), np.asarray(values).reshape(-1)):
        summary.value.add(tag=_text(tag), simple_value=float(value))
    return _serialized(summary)


@register_kernel("HistogramSummary")
def histogram_summary(ctx, tag, values):
    if np.ndim(tag) != 0:
        raise errors.InvalidArgumentError(
            None, None, f"tags must be scalar, got shape {list(np.shape(tag))}"
        )
    flat = np.asarray(values, dtype=np.float64)
    if not np.isfinite(flat).all():
        what = "Nan" if np.isnan(flat).any() else "Infinity"
        raise errors.InvalidArgumentError(
            None, None, f"{what} in summary histogram for: {_text(tag[()])}"
        )
    summary = Summary()
    summary.value.add(tag=_text(tag[()]), histo=histogram_proto(flat))
    return _serialized(summary)


def _float_images_to_uint8(images: np.ndarray, bad_color: np.ndarray) -> np.ndarray:
    """TF1's per-image rescaling of float images into uint8.

    Finite pixels (all channels finite) are mapped by value * scale + offset and truncated:
    all-non-negative images by 255 / max, others by 127 / max|v| around 128. Non-finite pixels
    become `bad_color`. Extremes below 1e-6 give scale 0, as in TF.
    """
    x = images.astype(np.float32)
    finite = np.isfinite(x).all(axis=-1, keepdims=True)
    masked = np.where(finite, x, np.nan)
    axes = (1, 2, 3)
    with np.errstate(invalid="ignore", all="ignore"):
        lo = np.nan_to_num(np.nanmin(masked, axis=axes, keepdims=True), nan=0.0)
        hi = np.nan_to_num(np.nanmax(masked, axis=axes, keepdims=True), nan=0.0)
    signed = lo < 0
    bound = np.where(signed, np.maximum(np.abs(lo), np.abs(hi)), hi)
    numerator = np.where(signed, np.float32(127.0), np.float32(255.0))
    scale = np.where(bound < 1e-6, np.float32(0.0), numerator / np.where(bound == 0, 1, bound))
    offset = np.where(signed, np.float32(128.0), np.float32(0.0))
    with np.errstate(invalid="ignore"):
        scaled = np.where(finite, x, 0) * scale.astype(np.float32) + offset.astype(np.float32)
    out = scaled.astype(np.uint8)
    return np.where(finite, out, bad_color.astype(np.uint8))


@register_kernel("ImageSummary")
def image_summary(ctx, tag, tensor):
    if np.ndim(tag) != 0:
        raise errors.InvalidArgumentError(
            None, None, f"Tag must be a scalar, got shape {list(np.shape(tag))}"
        )
    if tensor.ndim != 4 or tensor.shape[3] not in (1, 3, 4):
        raise errors.InvalidArgumentError(
            None, None, f"Tensor must be 4-D with last dim 1, 3, or 4, not {list(tensor.shape)}"
        )
    batch, height, width, depth = tensor.shape
    if height == 0 or width == 0 or height * width * depth >= 2**29:
        raise errors.InvalidArgumentError(
            None, None, f"image of {height}x{width}x{depth} is empty or too large to encode"
        )
    max_images = ctx.attrs["max_images"]
    bad_color = np.asarray(ctx.attrs["bad_color"]).reshape(-1)
    if tensor.dtype == np.uint8:
        pixels = tensor
    else:
        if bad_color.size < depth:
            raise errors.InvalidArgumentError(
                None, None, f"bad_color has {bad_color.size} channels; the images have {depth}"
            )
        pixels = _float_images_to_uint8(tensor[:max_images], bad_color[:depth])
    base_tag = _text(tag[()])
    summary = Summary()
    for i in range(min(max_images, batch)):
        # The tag depends on how many images were requested, not on how many there are (TF's rule).
        name = f"{base_tag}/image/{i}" if max_images > 1 else f"{base_tag}/image"
        image = Summary.Image(
            height=height, width=width, colorspace=depth, encoded_image_string=encode_png(pixels[i])
        )
        summary.value.add(tag=name, image=image)
    return _serialized(summary)


@register_kernel("MergeSummary")
def merge_summary(ctx, *inputs):
    merged = Summary()
    seen = set()
    for t in inputs:
        for serialized in np.asarray(t).reshape(-1):
            summary = Summary()
            try:
                summary.ParseFromString(bytes(serialized))
            except DecodeError:
                raise errors.InvalidArgumentError(
                    None, None, "Could not parse one of the summary inputs"
                ) from None
            for value in summary.value:
                if value.tag in seen:
                    raise errors.InvalidArgumentError(
                        None, None, f"Duplicate tag {value.tag} found in summary inputs"
                    )
                seen.add(value.tag)
                merged.value.add().CopyFrom(value)
    return _serialized(merged)


@register_kernel("TensorSummaryV2")
def tensor_summary_v2(ctx, tag, tensor, serialized_summary_metadata):
    if np.ndim(tag) != 0:
        raise errors.InvalidArgumentError(
            None, None, f"tag must be a scalar, got shape {list(np.shape(tag))}"
        )
    metadata = SummaryMetadata()
    metadata.ParseFromString(bytes(np.asarray(serialized_summary_metadata)[()]))
    summary = Summary()
    value = summary.value.add(tag=_text(tag[()]), metadata=metadata)
    value.tensor.CopyFrom(make_tensor_proto(tensor))
    return _serialized(summary)
