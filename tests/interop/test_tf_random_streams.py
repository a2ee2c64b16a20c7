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
from tests.interop.tf_random.cases import CASES, case, run

_HERE = Path(__file__).resolve().parent
_STREAMS = np.load(_HERE / "tf_random" / "streams.npz")
_SHARED = _HERE.parents[1].parent / "shared" / "fixtures" / "tensorflow" / "random"
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
