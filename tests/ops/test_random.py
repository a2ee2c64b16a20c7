"""Random ops: dtypes, shapes, ranges and moments (loose bounds, fixed seeds), TF1 seed rules,
reproducibility across Sessions and fresh numbers across runs."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import errors
from flowgraph.framework import random_seed

_FLOATS = [np.float16, np.float32, np.float64]


def _run(t, n=1):
    with tf.Session() as sess:
        return [sess.run(t) for _ in range(n)] if n > 1 else sess.run(t)


# -- seed rules ----------------------------------------------------------------------------------
def test_get_seed_rules():
    assert random_seed.get_seed(None) == (None, None)
    assert random_seed.get_seed(7) == (random_seed.DEFAULT_GRAPH_SEED, 7)
    tf.set_random_seed(5)
    assert tf.get_default_graph().seed == 5
    tf.constant(1.0)
    tf.constant(2.0)
    assert random_seed.get_seed(None) == (5, 0)  # TF 2.x: default seeds counted per graph
    assert random_seed.get_seed(None) == (5, 1)
    assert random_seed.get_seed(9) == (5, 9)
    previous = random_seed.use_op_seed_rule("tf1")
    try:
        assert random_seed.get_seed(None) == (5, 2)  # TF 1.x: the graph's last op id
        tf.constant(3.0)
        assert random_seed.get_seed(None) == (5, 3)
    finally:
        random_seed.use_op_seed_rule(previous)
    with pytest.raises(ValueError, match="op seed rule"):
        random_seed.use_op_seed_rule("tf3")
    assert random_seed.get_seed(2**31 - 1 + 4) == (5, 4)
    tf.set_random_seed(0)
    assert random_seed.get_seed(0) == (0, 2**31 - 1)  # (0, 0) would mean "nondeterministic"


def test_seed_attrs_on_ops():
    a = tf.random_uniform([2])
    rnd = a.op.inputs[0].op.inputs[0].op
    assert rnd.type == "RandomUniform"
    assert (rnd.get_attr("seed"), rnd.get_attr("seed2")) == (0, 0)
    b = tf.random_normal([2], seed=3)
    rnd = tf.get_default_graph().get_operation_by_name("random_normal/RandomStandardNormal")
    assert (rnd.get_attr("seed"), rnd.get_attr("seed2")) == (random_seed.DEFAULT_GRAPH_SEED, 3)
    assert b.name == "random_normal:0"


def test_graph_seed_gives_distinct_op_seeds_and_reproducible_sessions():
    tf.set_random_seed(1234)
    a = tf.random_uniform([5])
    b = tf.random_uniform([5])
    a1, a2 = _run(a, 2)
    with tf.Session() as sess:
        again = [sess.run(a), sess.run(a)]
        vb = sess.run(b)
    np.testing.assert_array_equal(again[0], a1)
    np.testing.assert_array_equal(again[1], a2)
    assert not np.array_equal(a1, a2)  # successive runs draw new numbers
    assert not np.array_equal(a1, vb)  # distinct ops get distinct seeds


def test_same_program_in_a_new_graph_repeats():
    def build():
        g = tf.Graph()
        with g.as_default():
            tf.set_random_seed(42)
            x = tf.random_normal([4])
            with tf.Session(graph=g) as sess:
                return sess.run(x)

    np.testing.assert_array_equal(build(), build())


def test_unseeded_ops_differ_between_sessions():
    x = tf.random_uniform([16])
    assert not np.array_equal(_run(x), _run(x))


def test_sequence_does_not_restart_with_another_fetch_signature():
    tf.set_random_seed(3)
    x = tf.random_uniform([4])
    y = x + 1.0
    with tf.Session() as sess:
        first = sess.run(x)
        second = sess.run([x, y])[0]
    with tf.Session() as sess:
        ref = [sess.run(x), sess.run(x)]
    np.testing.assert_array_equal(first, ref[0])
    np.testing.assert_array_equal(second, ref[1])


def test_set_random_seed_in_tf_random_namespace():
    tf.random.set_random_seed(11)
    assert tf.get_default_graph().seed == 11
    for name in (
        "uniform",
        "normal",
        "truncated_normal",
        "shuffle",
        "categorical",
        "multinomial",
        "gamma",
        "poisson",
        "get_seed",
    ):
        assert callable(getattr(tf.random, name)), name


# -- distributions -------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", _FLOATS)
def test_random_uniform_float(dtype):
    x = tf.random_uniform([200, 50], minval=-2, maxval=3, dtype=dtype, seed=1)
    assert x.dtype == tf.as_dtype(dtype) and x.shape.as_list() == [200, 50]
    v = _run(x)
    assert v.dtype == dtype and v.shape == (200, 50)
    assert v.min() >= -2 and v.max() < 3
    assert abs(v.astype(np.float64).mean() - 0.5) < 0.05
    assert abs(v.astype(np.float64).var() - 25 / 12) < 0.1


def test_random_uniform_default_range_and_tensor_bounds():
    lo = tf.constant(10.0)
    v = _run(tf.random_uniform([1000], lo, lo + 1.0, seed=2))
    assert v.min() >= 10 and v.max() < 11
    u = _run(tf.random_uniform([1000], seed=3))
    assert u.min() >= 0 and u.max() < 1


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_random_uniform_int(dtype):
    x = tf.random_uniform([5000], minval=-3, maxval=4, dtype=dtype, seed=4)
    assert x.op.type == "RandomUniformInt" and x.name == "random_uniform:0"
    v = _run(x)
    assert v.dtype == dtype
    assert set(np.unique(v)) == set(range(-3, 4))
    assert abs(v.mean()) < 0.15


def test_random_uniform_errors():
    with pytest.raises(ValueError, match="maxval"):
        tf.random_uniform([2], dtype=tf.int32)
    with pytest.raises(ValueError, match="Invalid dtype"):
        tf.random_uniform([2], dtype=tf.string)
    x = tf.random_uniform([3], minval=5, maxval=5, dtype=tf.int32)
    with tf.Session() as sess, pytest.raises(errors.InvalidArgumentError, match="minval < maxval"):
        sess.run(x)
    with pytest.raises(TypeError):
        tf.random_uniform([2.5])


@pytest.mark.parametrize("dtype", _FLOATS)
def test_random_normal(dtype):
    x = tf.random_normal([100, 100], mean=3.0, stddev=2.0, dtype=dtype, seed=5)
    v = _run(x).astype(np.float64)
    assert x.dtype == tf.as_dtype(dtype) and v.shape == (100, 100)
    assert abs(v.mean() - 3.0) < 0.1
    assert abs(v.std() - 2.0) < 0.1


@pytest.mark.parametrize("dtype", _FLOATS)
def test_truncated_normal(dtype):
    x = tf.truncated_normal([100, 100], mean=-1.0, stddev=0.5, dtype=dtype, seed=6)
    assert x.name == "truncated_normal:0"
    assert x.op.inputs[0].op.inputs[0].op.type == "TruncatedNormal"
    v = _run(x).astype(np.float64)
    assert v.min() >= -2.0 - 1e-3 and v.max() <= 0.0 + 1e-3  # within 2 stddevs of the mean
    assert abs(v.mean() + 1.0) < 0.03
    assert abs(v.std() - 0.5 * 0.8796) < 0.03  # std of a standard normal truncated at ±2


def test_shape_as_tensor_and_placeholder():
    s = tf.placeholder(tf.int32, [2])
    x = tf.random_uniform(s, seed=1)
    assert x.shape.ndims == 2 and x.shape.as_list() == [None, None]
    with tf.Session() as sess:
        assert sess.run(x, {s: [3, 4]}).shape == (3, 4)
    assert tf.random_normal(tf.TensorShape([2, 3])).shape.as_list() == [2, 3]
    assert tf.random_normal([]).shape.as_list() == []


def test_negative_shape_is_an_error():
    s = tf.placeholder(tf.int32, [1])
    x = tf.random_normal(s)
    with tf.Session() as sess, pytest.raises(errors.InvalidArgumentError):
        sess.run(x, {s: [-1]})


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.bool_])
def test_random_shuffle(dtype):
    value = (np.arange(40).reshape(20, 2) % 7).astype(dtype)
    x = tf.random_shuffle(value, seed=8)
    assert x.op.type == "RandomShuffle" and x.shape.as_list() == [20, 2]
    v1, v2 = _run(x, 2)
    assert v1.dtype == dtype
    rows = sorted(map(tuple, value.tolist()))
    assert sorted(map(tuple, v1.tolist())) == rows == sorted(map(tuple, v2.tolist()))
    assert not np.array_equal(v1, v2) or not np.array_equal(v1, value)


def test_random_shuffle_scalar_and_strings():
    assert _run(tf.random_shuffle(5)) == 5
    v = _run(tf.random_shuffle(["a", "b", "c"], seed=1))
    assert sorted(v.tolist()) == [b"a", b"b", b"c"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_multinomial_frequencies(dtype):
    probs = np.array([[0.1, 0.2, 0.7], [0.5, 0.5, 0.0]])
    with np.errstate(divide="ignore"):
        logits = (
            np.log(probs).astype(dtype)
            if dtype != np.int32
            else np.array([[0, 1, 2], [5, 5, -50]], dtype)
        )
    x = tf.multinomial(logits, 4000, seed=9)
    assert x.dtype == tf.int64 and x.shape.as_list() == [2, 4000]
    v = _run(x)
    assert v.dtype == np.int64 and v.shape == (2, 4000)
    if dtype != np.int32:
        freq = np.stack([np.bincount(row, minlength=3) / 4000 for row in v])
        np.testing.assert_allclose(freq, probs, atol=0.03)
        assert not np.any(v[1] == 2)  # probability 0 is never drawn
    else:
        assert set(np.unique(v[1])) <= {0, 1}


def test_categorical_and_output_dtype():
    x = tf.random.categorical([[0.0, 0.0]], 5, dtype=tf.int32, seed=1)
    assert x.dtype == tf.int32
    v = _run(x)
    assert v.dtype == np.int32 and v.shape == (1, 5) and set(v.ravel()) <= {0, 1}
    assert tf.multinomial([[0.0]], 3, output_dtype=tf.int32).dtype == tf.int32


def test_multinomial_errors():
    n = tf.placeholder(tf.int32, [])
    x = tf.multinomial([[0.0, 1.0]], n)
    assert x.shape.as_list() == [1, None]
    with tf.Session() as sess:
        assert sess.run(x, {n: 0}).shape == (1, 0)
        with pytest.raises(errors.InvalidArgumentError, match="nonnegative"):
            sess.run(x, {n: -1})
    with pytest.raises(errors.InvalidArgumentError):
        tf.multinomial([0.0, 1.0], 2)  # logits must be a matrix


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_random_gamma(dtype):
    x = tf.random_gamma([20000], [2.0, 5.0], beta=[1.0, 2.0], dtype=dtype, seed=10)
    assert x.shape.as_list() == [20000, 2] and x.dtype == tf.as_dtype(dtype)
    v = _run(x).astype(np.float64)
    assert v.min() > 0
    np.testing.assert_allclose(v.mean(axis=0), [2.0, 2.5], rtol=0.05)  # alpha / beta
    np.testing.assert_allclose(v.var(axis=0), [2.0, 1.25], rtol=0.1)  # alpha / beta**2


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64])
def test_random_poisson(dtype):
    x = tf.random_poisson([1.5, 10.0], [5000], dtype=dtype, seed=11)
    assert x.shape.as_list() == [5000, 2] and x.dtype == tf.as_dtype(dtype)
    v = _run(x)
    assert v.dtype == dtype and v.min() >= 0
    np.testing.assert_allclose(v.astype(np.float64).mean(axis=0), [1.5, 10.0], rtol=0.05)


def test_random_crop():
    value = np.arange(60).reshape(6, 10)
    crop = tf.random_crop(value, [2, 3], seed=1)
    assert crop.name == "random_crop:0" and crop.shape.as_list() == [2, 3]
    with tf.Session() as sess:
        crops = [sess.run(crop) for _ in range(20)]
        for c in crops:
            r, col = divmod(int(c[0, 0]), 10)  # every crop is a contiguous window of value
            np.testing.assert_array_equal(c, value[r : r + 2, col : col + 3])
        assert len({int(c[0, 0]) for c in crops}) > 1
        too_big = tf.random_crop(value, [7, 3])
        with pytest.raises(errors.InvalidArgumentError, match="value.shape >= size"):
            sess.run(too_big)


def test_philox4x32_known_answers():
    """Random123's known-answer vectors for Philox4x32-10 (counter words, key, outputs), the
    compiled loop of kernels/cpu/philox_loops.py against them, and a batch of counters at once."""
    from flowgraph.kernels.cpu.philox import philox4x32

    kat = [
        ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
        ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
        (
            (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
            (0xA4093822, 0x299F31D0),
            (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
        ),
    ]
    for counter, key, want in kat:
        got = philox4x32(np.array([counter], np.uint32), key)
        np.testing.assert_array_equal(got, np.array([want], np.uint32))
    counters = np.array([c for c, _, _ in kat[:2]] * 3, np.uint32)
    got = philox4x32(counters, (0, 0))
    np.testing.assert_array_equal(got[0::2], np.array([kat[0][2]] * 3, np.uint32))
    assert got.shape == (6, 4) and got.dtype == np.uint32


@pytest.mark.parametrize("dtype", [np.float16, tf.bfloat16.as_numpy_dtype, np.float32, np.float64])
@pytest.mark.parametrize("counter", [5 << 64, (1 << 64) - 7, (1 << 128) - 3])
def test_philox_uniform_equals_the_word_conversion(dtype, counter):
    """The compiled uniform loop (philox_loops.py) equals TF's bit surgery on the raw words
    (random_distributions.uniform) bit for bit, across 64- and 128-bit counter carries, for
    partial last blocks and for a run that starts at a later block (a shard)."""
    from flowgraph.kernels.cpu import random_distributions as dist
    from flowgraph.kernels.cpu.philox import PhiloxStream
    from flowgraph.kernels.cpu.random import _UNIFORM_BITS

    stream = PhiloxStream((0x12345678, 0x9ABCDEF0), counter)
    bits, loop_dtype = _UNIFORM_BITS[np.dtype(dtype)]
    per = 2 if dtype == np.float64 else 4
    for n in (0, 1, 3, 5, 1027):
        words = stream.blocks(np.arange(-(-n // per))).reshape(-1)
        want = dist.uniform(words, dtype)[:n]
        got = np.empty(n, loop_dtype)
        stream.uniform(got, bits)
        assert got.astype(dtype).tobytes() == want.tobytes(), n
        tail = np.empty(n - 3 * per if n > 3 * per else 0, loop_dtype)
        stream.uniform(tail, bits, first_block=3)
        assert tail.astype(dtype).tobytes() == want[3 * per :].tobytes(), n


def test_random_uniform_sharded_on_the_pool_is_the_same_stream():
    """A tensor large enough to be cut into runs of blocks on two threads draws the values of
    the unsharded stream: the reference converts the generator's raw words."""
    from flowgraph.kernels.cpu import random_distributions as dist
    from flowgraph.kernels.cpu.philox import GuardedPhilox
    from flowgraph.kernels.cpu.random import RESERVED_BLOCKS_PER_OUTPUT

    n = 300_001
    x = tf.random_uniform([n], seed=3)
    config = tf.ConfigProto(intra_op_parallelism_threads=2, inter_op_parallelism_threads=2)
    with tf.Session(config=config) as sess:
        first, second = sess.run(x), sess.run(x)
    (op,) = [op for op in x.graph.get_operations() if op.type == "RandomUniform"]
    generator = GuardedPhilox(op.get_attr("seed"), op.get_attr("seed2"))
    for got in (first, second):
        stream = generator.reserve_outputs(n, RESERVED_BLOCKS_PER_OUTPUT)
        words = stream.blocks(np.arange(-(-n // 4))).reshape(-1)
        np.testing.assert_array_equal(got, dist.uniform(words, np.float32)[:n])
