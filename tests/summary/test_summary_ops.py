"""Summary ops against TensorFlow's own output (fixtures/tensorflow/events, README §3) and NumPy
references: histogram bucketing bit for bit, scalar values, PNG images, names, tags, errors."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
from png_reader import decode_png

import flowgraph as tf
from flowgraph.core import errors
from flowgraph.core.protos import Summary
from flowgraph.kernels.cpu.summary import histogram_bucket_limits, histogram_proto
from tests.helpers import TF_FIXTURES

EVENTS = TF_FIXTURES / "events"
needs_fixture = pytest.mark.skipif(
    not (EVENTS / "expected.json").is_file(), reason="no TF event fixture"
)


def _expected(kind):
    return [
        e for e in json.loads((EVENTS / "expected.json").read_text())["events"] if e["kind"] == kind
    ]


def _run_summary(summary_tensor, feed=None) -> Summary:
    with tf.Session() as sess:
        out = sess.run(summary_tensor, feed_dict=feed)
    assert isinstance(out, bytes)
    parsed = Summary()
    parsed.ParseFromString(out)
    return parsed


# -- histograms ------------------------------------------------------------------------------------
def test_bucket_limits_are_tensorflows():
    limits = histogram_bucket_limits()
    assert limits[0] == -sys.float_info.max and limits[-1] == sys.float_info.max
    assert np.all(np.diff(limits) > 0)
    mid = len(limits) // 2
    assert limits[mid] == 0.0 and limits[mid + 1] == 1e-12 and limits[mid - 1] == -1e-12
    np.testing.assert_array_equal(limits[:mid], -limits[mid + 1 :][::-1])
    assert limits[mid + 2] == 1e-12 * 1.1  # grows by 10% per bucket


@needs_fixture
@pytest.mark.parametrize("case", ["summaries/weights", "summaries/values"])
def test_histogram_matches_tensorflow_bit_for_bit(case):
    (want,) = [e for e in _expected("histogram") if e["tag"] == case]
    values = np.array(want["inputs"], dtype=np.float32)
    with tf.name_scope("summaries"):
        h = tf.summary.histogram(case.split("/")[1], tf.constant(values))
    (value,) = _run_summary(h).value
    assert value.tag == case
    got = value.histo
    assert (got.min, got.max, got.num) == (want["min"], want["max"], want["count"])
    assert (got.sum, got.sum_squares) == (want["sum"], want["sum_squares"])
    assert list(got.bucket_limit) == want["bucket_limit"]
    assert list(got.bucket) == want["bucket"]


def test_histogram_reference_counts():
    rng = np.random.RandomState(0)
    values = np.concatenate([rng.randn(500) * 10, [0.0, 0.0, 1e-12, -1e-12, 3e25]])
    proto = histogram_proto(values)
    limits = histogram_bucket_limits()
    # Reference: a bucket i holds limits[i-1] <= v < limits[i] (a value on an edge goes right).
    full = np.array(
        [
            np.sum((values < hi) & (values >= lo))
            for lo, hi in zip(np.r_[-np.inf, limits[:-1]], limits)
        ]
    )
    assert sum(proto.bucket) == len(values)
    # Every reported entry ends at a non-empty bucket's edge or closes a run of empty buckets.
    reported = dict(zip(proto.bucket_limit, proto.bucket))
    for i in np.flatnonzero(full):
        assert reported[limits[i]] == full[i]
    assert proto.bucket_limit[-1] == sys.float_info.max
    assert proto.min == values.min() and proto.max == values.max()


def test_histogram_of_empty_tensor_and_int_dtype():
    (value,) = _run_summary(tf.summary.histogram("e", tf.zeros([0]))).value
    assert value.histo.num == 0 and value.histo.min == sys.float_info.max
    assert list(value.histo.bucket) == [0.0] and list(value.histo.bucket_limit) == [
        sys.float_info.max
    ]
    (value,) = _run_summary(tf.summary.histogram("i", tf.constant([1, 2, 2], tf.int32))).value
    assert value.histo.sum == 5.0 and value.histo.num == 3


@pytest.mark.parametrize("bad, word", [(np.nan, "Nan"), (np.inf, "Infinity")])
def test_histogram_rejects_non_finite(bad, word):
    x = tf.placeholder(tf.float32, [None])
    h = tf.summary.histogram("w", x)
    with (
        tf.Session() as sess,
        pytest.raises(errors.InvalidArgumentError, match=f"{word} in summary histogram for: w"),
    ):
        sess.run(h, {x: np.array([1.0, bad], np.float32)})


# -- scalars ---------------------------------------------------------------------------------------
@needs_fixture
def test_scalar_is_tensorflows_float32_value():
    wants = _expected("scalar")
    x = tf.placeholder(tf.float32, [])
    with tf.name_scope("summaries"):
        s = tf.summary.scalar("loss", x)
    for want in wants:
        (value,) = _run_summary(s, {x: np.float32(want["value"])}).value
        assert (value.tag, value.simple_value) == (want["tag"], want["value"])


@pytest.mark.parametrize(
    "dtype", [tf.float16, tf.float32, tf.float64, tf.int32, tf.int64, tf.uint8]
)
def test_scalar_dtypes(dtype):
    s = tf.summary.scalar("v", tf.constant(3, dtype))
    (value,) = _run_summary(s).value
    assert value.simple_value == 3.0


def test_scalar_names_tags_family_and_collections():
    x = tf.constant(1.0)
    with tf.name_scope("train"):
        a = tf.summary.scalar("loss", x)
        b = tf.summary.scalar("loss", x)
        c = tf.summary.scalar("bad name!", x, family="fam", collections=["mine"])
    assert (a.op.name, b.op.name, c.op.name) == (
        "train/loss",
        "train/loss_1",
        "train/fam/bad_name_",
    )
    tags = [v.tag for s in (a, b, c) for v in _run_summary(s).value]
    assert tags == ["train/loss", "train/loss_1", "fam/train/fam/bad_name_"]
    assert tf.get_collection(tf.GraphKeys.SUMMARIES) == [a, b]
    assert tf.get_collection("mine") == [c]


def test_scalar_rejects_non_scalar_value():
    s = tf.summary.scalar("v", tf.placeholder(tf.float32, None, name="p"))
    with (
        tf.Session() as sess,
        pytest.raises(errors.InvalidArgumentError, match="not the same shape"),
    ):
        sess.run(s, {"p:0": np.zeros(2, np.float32)})
    with pytest.raises(ValueError):
        tf.summary.scalar("w", tf.zeros([3]))


# -- merge -----------------------------------------------------------------------------------------
def test_merge_all_and_duplicate_tags():
    assert tf.summary.merge_all() is None
    x = tf.constant([1.0, 2.0])
    tf.summary.scalar("a", x[0])
    tf.summary.histogram("h", x)
    merged = tf.summary.merge_all()
    assert merged.op.name == "Merge/MergeSummary" and merged.op.type == "MergeSummary"
    assert [v.tag for v in _run_summary(merged).value] == ["a", "h"]
    assert tf.summary.scalar("a", x[1], collections=[]).op.name == "a_1"  # scopes keep tags unique
    dup = tf.summary.merge([merged, merged])
    with tf.Session() as sess, pytest.raises(errors.InvalidArgumentError, match="Duplicate tag a"):
        sess.run(dup)


# -- images ----------------------------------------------------------------------------------------
@needs_fixture
def test_tensorflow_png_decodes_to_its_pixels():
    event = next(
        e
        for e in tf.summary.summary_iterator(str(EVENTS / "events.out.tfevents.1700000000.fixture"))
        if e.summary.value and e.summary.value[0].HasField("image")
    )
    for value, want in zip(event.summary.value, _expected("image")):
        assert value.tag == want["tag"] and value.image.colorspace == want["colorspace"]
        np.testing.assert_array_equal(
            decode_png(value.image.encoded_image_string), np.array(want["pixels"])
        )


@needs_fixture
def test_uint8_images_like_tensorflow():
    wants = _expected("image")
    pixels = np.array([w["pixels"] for w in wants], dtype=np.uint8)
    with tf.name_scope("summaries"):
        s = tf.summary.image("pic", tf.constant(pixels))
    values = _run_summary(s).value
    assert [v.tag for v in values] == [w["tag"] for w in wants]
    for v, want, img in zip(values, wants, pixels):
        assert (v.image.height, v.image.width, v.image.colorspace) == (
            want["height"],
            want["width"],
            3,
        )
        np.testing.assert_array_equal(decode_png(v.image.encoded_image_string), img)


def _float_reference(img, bad=(255, 0, 0, 255)):
    """TF1's float image rescaling, one image at a time."""
    finite = np.isfinite(img).all(axis=-1)
    vals = img[finite]
    lo, hi = (vals.min(), vals.max()) if vals.size else (0.0, 0.0)
    if lo < 0:
        m = max(abs(lo), abs(hi))
        scale, offset = (0.0 if m < 1e-6 else np.float32(127.0) / np.float32(m)), 128.0
    else:
        scale, offset = (0.0 if hi < 1e-6 else np.float32(255.0) / np.float32(hi)), 0.0
    out = (np.where(np.isfinite(img), img, 0) * np.float32(scale) + np.float32(offset)).astype(
        np.uint8
    )
    out[~finite] = np.array(bad[: img.shape[-1]], np.uint8)
    return out


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("channels", [1, 3, 4])
def test_float_images_are_rescaled_per_image(dtype, channels):
    rng = np.random.RandomState(channels)
    images = rng.rand(3, 3, 4, channels).astype(dtype)
    images[1] -= 0.5  # a signed image: centred on 128
    images[2, 0, 0, 0] = np.nan  # a bad pixel: red
    s = tf.summary.image("img", tf.constant(images), max_outputs=2)
    values = _run_summary(s).value
    assert [v.tag for v in values] == ["img/image/0", "img/image/1"]
    for v, img in zip(values, images):
        assert v.image.colorspace == channels
        np.testing.assert_array_equal(
            decode_png(v.image.encoded_image_string), _float_reference(img.astype(np.float32))
        )
    one = _run_summary(tf.summary.image("one", tf.constant(images), max_outputs=1)).value
    assert [v.tag for v in one] == ["one/image"]
    bad = _run_summary(tf.summary.image("bad", tf.constant(images[2:]), max_outputs=1)).value[0]
    np.testing.assert_array_equal(
        decode_png(bad.image.encoded_image_string), _float_reference(images[2].astype(np.float32))
    )


def test_image_rejects_bad_shapes():
    with pytest.raises(ValueError):
        tf.summary.image("x", tf.zeros([2, 2, 3]))
    x = tf.placeholder(tf.uint8, [None, None, None, None])
    s = tf.summary.image("x", x)
    with (
        tf.Session() as sess,
        pytest.raises(errors.InvalidArgumentError, match="last dim 1, 3, or 4"),
    ):
        sess.run(s, {x: np.zeros((1, 2, 2, 2), np.uint8)})
    with pytest.raises(TypeError):
        tf.summary.image("i", tf.zeros([1, 2, 2, 1], tf.int32))


# -- text ------------------------------------------------------------------------------------------
def test_text_summary():
    s = tf.summary.text("notes", tf.constant(["**hello**", "world"]))
    (value,) = _run_summary(s).value
    assert value.tag == "notes" and value.metadata.plugin_data.plugin_name == "text"
    assert list(value.tensor.string_val) == [b"**hello**", b"world"]
    with pytest.raises(ValueError, match="dtype string"):
        tf.summary.text("n", tf.constant(1.0))
