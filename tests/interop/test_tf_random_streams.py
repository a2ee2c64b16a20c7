"""Seeded random ops give TensorFlow's own numbers, bit for bit.

tf_random/streams.npz holds what real TensorFlow printed for each program of tf_random/cases.py
(two consecutive runs in one Session: the second checks that each call reserves as many Philox
blocks as TF's kernel does); the shared fixture set (../shared/fixtures/tensorflow/random) is
checked as well where its programs can be rebuilt from its README.
"""

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import flowgraph as tf
from tests.helpers import TF_FIXTURES
from tests.interop.tf_random.cases import CASES, case, run

_HERE = Path(__file__).resolve().parent
_STREAMS = np.load(_HERE / "tf_random" / "streams.npz")
_SHARED = TF_FIXTURES / "random"
# Ops whose kernels follow TF's streams so far (dropout and the initializers build on them);
# poisson still draws from NumPy.
_EXACT = {
    "uniform",
    "normal",
    "truncated_normal",
    "dropout",
    "initializer",
    "normal_variable",
    "shuffle",
    "multinomial",
    "gamma",
    "poisson",
}


def _bits(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    return a.view(np.uint16) if a.dtype == ml_dtypes.bfloat16 else a


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_stream_matches_tensorflow(case):
    if case["op"] not in _EXACT:
        pytest.skip("kernel does not follow TF's stream yet")
    got = run(tf, case)
    for i, value in enumerate(got):
        want = _STREAMS[f"{case['name']}_run{i + 1}"]
        assert _bits(value).dtype == want.dtype
        np.testing.assert_array_equal(_bits(value), want, err_msg=f"run {i + 1}")


# The shared fixtures' programs, rebuilt from their README and cases.json.
_SHARED_CASES = [
    case("uniform_f32_g1_o7", "uniform", 1, shape=[3, 5], seed=7),
    case("normal_f32", "normal", 5, shape=[2, 7], mean=1.0, stddev=2.0, seed=11),
    case("normal_f64", "normal", 5, shape=[9], dtype="float64", seed=12),
    case("normal_f16", "normal", 5, shape=[6], dtype="float16", seed=13),
    case("random_normal_var_default_seed", "normal_variable", 777, var=True, shape=[3, 4]),
    case("truncated_normal_f32", "truncated_normal", 9, shape=[4, 6], stddev=0.5, seed=2),
    case("dropout", "dropout", 777, shape=[4, 8], keep_prob=0.7),
    case("shuffle", "shuffle", 3, shape=[12], seed=4),
    case(
        "glorot_uniform_var",
        "initializer",
        777,
        var=True,
        shape=[5, 3],
        init="glorot_uniform_initializer",
    ),
    case(
        "xavier_like_truncated",
        "initializer",
        123,
        var=True,
        shape=[6],
        init="truncated_normal_initializer",
        args={"stddev": 0.1},
    ),
]


@pytest.mark.skipif(not _SHARED.is_dir(), reason="shared TensorFlow fixtures absent")
@pytest.mark.parametrize("case", _SHARED_CASES, ids=[c["name"] for c in _SHARED_CASES])
def test_shared_fixture_streams(case):
    want = np.load(_SHARED / "streams.npz")
    for i, value in enumerate(run(tf, case)):
        np.testing.assert_array_equal(value, want[f"{case['name']}_run{i + 1}"])


def _two_runs(make, graph_seed=4):
    with tf.Graph().as_default():
        tf.set_random_seed(graph_seed)
        t = make()
        with tf.Session() as sess:
            return [sess.run(t).tolist() for _ in range(2)]


def _f64(values):
    return tf.constant(values, tf.float64)


def test_poisson_rates_and_dtypes_match_tensorflow():
    """Values printed by TF 2.x (tf.compat.v1) for the same programs: negative and zero rates,
    both algorithms (Knuth below 10, Hormann's rejection above), half/int64 rates, odd sizes."""
    rate = [-1.0, 0.0, 3.5, 12.0, 250.0]
    got = _two_runs(lambda: tf.random_poisson(_f64(rate), [3], dtype=tf.int32, seed=31))
    assert got == [
        [[0, 0, 4, 18, 222], [0, 0, 3, 8, 243], [0, 0, 4, 8, 265]],
        [[0, 0, 2, 13, 241], [0, 0, 4, 6, 242], [0, 0, 3, 10, 244]],
    ]
    rate = [[2.0], [30.0]]
    got = _two_runs(
        lambda: tf.random_poisson(tf.constant(rate, tf.float16), [1, 3], dtype=tf.float16, seed=32)
    )
    assert got == [
        [[[[0.0], [37.0]], [[3.0], [24.0]], [[2.0], [27.0]]]],
        [[[[3.0], [37.0]], [[1.0], [34.0]], [[0.0], [24.0]]]],
    ]
    got = _two_runs(
        lambda: tf.random_poisson(tf.constant([4, 17], tf.int64), [5], dtype=tf.float32, seed=33)
    )
    assert got[0] == [[3.0, 20.0], [4.0, 19.0], [4.0, 21.0], [2.0, 21.0], [1.0, 16.0]]
    assert got[1] == [[3.0, 18.0], [2.0, 13.0], [4.0, 19.0], [2.0, 11.0], [1.0, 17.0]]


def test_poisson_infinite_and_nan_rates():
    """TF: +inf gives the output type's infinity (0 for integers), -inf gives 0; a NaN rate
    would loop forever in TF's kernel, so it is an error here."""
    got = _two_runs(lambda: tf.random_poisson([np.inf, 1.0], [2], seed=34))
    assert [row[0] for row in got[0]] == [np.inf, np.inf]
    with tf.Graph().as_default():
        t = tf.random_poisson([np.inf, -np.inf, 2.0], [2], dtype=tf.int64, seed=34)
        with tf.Session() as sess:
            assert sess.run(t)[:, :2].tolist() == [[0, 0], [0, 0]]
    with tf.Graph().as_default():
        t = tf.random_poisson([np.nan], [2], seed=1)
        with tf.Session() as sess, pytest.raises(tf.errors.InvalidArgumentError, match="NaN"):
            sess.run(t)
