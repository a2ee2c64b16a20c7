"""The benchmark workloads, each written once as a TF1 program over a `tf` module argument.

One function builds the program for both peers: flowgraph passes `import flowgraph as tf`,
TensorFlow passes `tensorflow.compat.v1` after `disable_v2_behavior()`. Both sides therefore
time the same graph, the same feeds and the same Session settings. This module imports only the
standard library and NumPy because it also runs inside the TensorFlow virtual environment.

A workload's `build(tf)` returns a `Case`: `step()` runs the workload once and returns the
seconds of the part being measured (a `sess.run` loop, or only the graph-construction call of a
construction workload), `close()` releases its Session. The harness takes the median over steps.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

# Both peers get the same thread settings: inter-op and intra-op pools as large as the machine,
# which is TensorFlow's default and flowgraph's default inter-op size (NumPy's BLAS uses all cores).
THREADS = os.cpu_count() or 1

MLP_SIZES = (784, 1024, 1024, 10)
MLP_BATCH = 256
CNN_BATCH = 64
LEARNING_RATE = 0.01
# The bundled digits (flowgraph/examples/data), read by the input and program workloads.
DIGITS = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    "flowgraph",
    "examples",
    "data",
    "digits.npz",
)


@dataclass
class Case:
    """One prepared workload: `step()` returns the measured seconds of one execution."""

    step: Callable[[], float]
    close: Callable[[], None] = lambda: None


@dataclass(frozen=True)
class Target:
    """What a workload must reach: `ratio` bounds flowgraph/TF; `per_unit_us` bounds our time."""

    ratio: float | None = None
    per_unit_us: float | None = None

    def describe(self) -> str:
        if self.ratio is not None:
            return f"<= {self.ratio:g}x TF"
        return f"<= {self.per_unit_us:g} us"


@dataclass(frozen=True)
class Workload:
    """A named program: `units` is how many of `unit` one step measures (time is divided by it)."""

    key: str
    title: str
    unit: str
    units: int
    target: Target
    build: Callable[..., Case]
    reps: int
    warmup: int = 1


def session(tf, graph, jit: bool = False):
    """A Session with the shared thread settings (the same ConfigProto fields on both peers);
    `jit` also sets global_jit_level=ON_1."""
    config = tf.ConfigProto(
        inter_op_parallelism_threads=THREADS, intra_op_parallelism_threads=THREADS
    )
    if jit:
        config.graph_options.optimizer_options.global_jit_level = tf.OptimizerOptions.ON_1
    return tf.Session(graph=graph, config=config)


def timed_runs(sess, fetches, feed=None, inner: int = 1) -> Case:
    """A Case whose step is `inner` consecutive `sess.run(fetches, feed)` calls."""
    run = sess.run

    def step() -> float:
        t0 = time.perf_counter()
        for _ in range(inner):
            run(fetches, feed_dict=feed)
        return time.perf_counter() - t0

    return Case(step, sess.close)


def initialized_session(tf, graph):
    """A Session on `graph` whose variables are initialized (untimed)."""
    with graph.as_default():
        init = tf.global_variables_initializer()
    sess = session(tf, graph)
    sess.run(init)
    return sess


# -- W1, W2: per-run and per-op overhead ------------------------------------------------------
W1_INNER = 200


def build_w1(tf) -> Case:
    """`sess.run` of one add of two scalar constants, W1_INNER runs per step."""
    g = tf.Graph()
    with g.as_default():
        total = tf.add(tf.constant(1.0), tf.constant(2.0))
    return timed_runs(session(tf, g), total, inner=W1_INNER)


W2_CHAIN = 1000


def build_w2(tf, jit: bool = False) -> Case:
    """x = a; then W2_CHAIN times x = x + b, with scalars a and b fed on every run; `jit` sets
    global_jit_level=ON_1 (compiled fusion, W2j)."""
    g = tf.Graph()
    with g.as_default():
        a = tf.placeholder(tf.float32, [], name="a")
        b = tf.placeholder(tf.float32, [], name="b")
        x = a
        for _ in range(W2_CHAIN):
            x = tf.add(x, b)
    sess = session(tf, g, jit)
    return timed_runs(sess, x, feed={a: 1.0, b: 0.5})


# -- W3, W7: BLAS-bound graphs ----------------------------------------------------------------
W3_CHAINS, W3_LENGTH, W3_N = 8, 10, 256


def build_w3(tf) -> Case:
    """W3_CHAINS independent chains of W3_LENGTH 256x256 matmuls (each from its own variable,
    all by one shared weight), summed by one AddN: independent work for the inter-op pool.
    Variables, not constants, so that no constant folding can precompute the chains."""
    g = tf.Graph()
    with g.as_default():
        w = tf.Variable(tf.random_normal([W3_N, W3_N], stddev=W3_N**-0.5, seed=1), name="w")
        ends = []
        for c in range(W3_CHAINS):
            x = tf.Variable(tf.random_normal([W3_N, W3_N], seed=10 + c), name=f"x{c}")
            h = tf.identity(x)
            for _ in range(W3_LENGTH):
                h = tf.matmul(h, w)
            ends.append(h)
        total = tf.add_n(ends)
    return timed_runs(initialized_session(tf, g), total)


W7_N = 2048


def build_w7(tf) -> Case:
    """One 2048x2048 float32 matmul of two variables, its product fetched."""
    g = tf.Graph()
    with g.as_default():
        a = tf.Variable(tf.random_normal([W7_N, W7_N], seed=1), name="a")
        b = tf.Variable(tf.random_normal([W7_N, W7_N], seed=2), name="b")
        product = tf.matmul(a, b)
    return timed_runs(initialized_session(tf, g), product)


# -- The models of W4, W5 and W8 --------------------------------------------------------------
def dense(tf, h, n_in, n_out, seed, name):
    """h @ weights + biases (bias_add), weights truncated-normal with stddev 1/sqrt(n_in)."""
    with tf.name_scope(name):
        init = tf.truncated_normal([n_in, n_out], stddev=n_in**-0.5, seed=seed)
        w = tf.Variable(init, name="weights")
        b = tf.Variable(tf.zeros([n_out]), name="biases")
        return tf.nn.bias_add(tf.matmul(h, w), b)


def mlp_loss(tf):
    """The MLP of W4/W8: x[?, 784] -> dense 1024 ReLU -> dense 1024 ReLU -> dense 10 logits;
    loss = mean sparse softmax cross-entropy with int64 labels. Returns (x, labels, loss)."""
    x = tf.placeholder(tf.float32, [None, MLP_SIZES[0]], name="x")
    labels = tf.placeholder(tf.int64, [None], name="labels")
    h = x
    last = len(MLP_SIZES) - 2
    for i, (n_in, n_out) in enumerate(itertools.pairwise(MLP_SIZES)):
        h = dense(tf, h, n_in, n_out, seed=i + 1, name=f"layer{i}")
        if i < last:
            h = tf.nn.relu(h)
    xent = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=h)
    return x, labels, tf.reduce_mean(xent, name="loss")


def cnn_loss(tf):
    """The LeNet-like CNN of W5 on NHWC 28x28x1: conv 5x5x32 SAME + bias + ReLU, 2x2/2 max pool,
    conv 5x5x64 SAME + bias + ReLU, pool, dense 3136->1024 ReLU, dense 1024->10, mean sparse
    softmax cross-entropy. Returns (x, labels, loss)."""
    x = tf.placeholder(tf.float32, [None, 28, 28, 1], name="x")
    labels = tf.placeholder(tf.int64, [None], name="labels")

    def conv_relu_pool(h, c_in, c_out, seed, name):
        with tf.name_scope(name):
            init = tf.truncated_normal([5, 5, c_in, c_out], stddev=(25 * c_in) ** -0.5, seed=seed)
            w = tf.Variable(init, name="weights")
            b = tf.Variable(tf.constant(0.1, shape=[c_out]), name="biases")
            h = tf.nn.conv2d(h, w, strides=[1, 1, 1, 1], padding="SAME")
            h = tf.nn.relu(tf.nn.bias_add(h, b))
            return tf.nn.max_pool(h, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="SAME")

    h = conv_relu_pool(x, 1, 32, seed=1, name="conv1")
    h = conv_relu_pool(h, 32, 64, seed=2, name="conv2")
    h = tf.reshape(h, [-1, 7 * 7 * 64])
    h = tf.nn.relu(dense(tf, h, 7 * 7 * 64, 1024, seed=3, name="fc1"))
    logits = dense(tf, h, 1024, 10, seed=4, name="fc2")
    xent = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    return x, labels, tf.reduce_mean(xent, name="loss")


def batch(shape, seed: int):
    """A fixed random input batch and int64 labels in [0, 10) (the same on both peers)."""
    rng = np.random.RandomState(seed)
    return rng.rand(*shape).astype(np.float32), rng.randint(0, 10, size=shape[0]).astype(np.int64)


def sgd_case(tf, model, shape) -> Case:
    """One `GradientDescentOptimizer(LEARNING_RATE).minimize(loss)` step per run, batch fed."""
    g = tf.Graph()
    with g.as_default():
        x, labels, loss = model(tf)
        train = tf.train.GradientDescentOptimizer(LEARNING_RATE).minimize(loss)
    xs, ys = batch(shape, seed=0)
    return timed_runs(initialized_session(tf, g), train, feed={x: xs, labels: ys})


def build_w4(tf) -> Case:
    return sgd_case(tf, mlp_loss, (MLP_BATCH, MLP_SIZES[0]))


def build_w5(tf) -> Case:
    return sgd_case(tf, cnn_loss, (CNN_BATCH, 28, 28, 1))


# -- W8: graph construction -------------------------------------------------------------------
def construction_case(tf, timed: Callable, untimed: Callable | None = None) -> Case:
    """Each step builds in a fresh Graph: `untimed(tf)` first, then `timed(tf, prior)` timed."""

    def step() -> float:
        g = tf.Graph()
        with g.as_default():
            prior = untimed(tf) if untimed is not None else None
            t0 = time.perf_counter()
            timed(tf, prior)
            return time.perf_counter() - t0

    return Case(step)


def _build_mlp_forward(tf, _prior):
    """W8a's measured part: the MLP loss graph plus its variables' initializer op."""
    mlp_loss(tf)
    tf.global_variables_initializer()


def build_w8a(tf) -> Case:
    return construction_case(tf, _build_mlp_forward)


def build_w8b(tf) -> Case:
    """tf.gradients of the MLP loss with respect to all trainable variables."""
    return construction_case(
        tf, lambda tf, loss: tf.gradients(loss, tf.trainable_variables()), _mlp_only_loss
    )


def build_w8c(tf) -> Case:
    """GradientDescentOptimizer(...).minimize of the MLP loss (gradients + update ops)."""
    return construction_case(
        tf,
        lambda tf, loss: tf.train.GradientDescentOptimizer(LEARNING_RATE).minimize(loss),
        _mlp_only_loss,
    )


def _mlp_only_loss(tf):
    return mlp_loss(tf)[2]


# -- W6: control flow -------------------------------------------------------------------------
W6A_ITERS = 10_000


def build_w6a(tf) -> Case:
    """while_loop(i < 10000, i + 1) from an int32 0, defaults otherwise (parallel_iterations=10)."""
    g = tf.Graph()
    with g.as_default():
        n = tf.while_loop(lambda i: i < W6A_ITERS, lambda i: i + 1, [tf.constant(0)])
    return timed_runs(session(tf, g), n)


W6B_ITERS, W6B_N = 100, 256


def build_w6b(tf) -> Case:
    """while_loop of W6B_ITERS iterations of x = tanh(x @ w), 256x256 float32 variables."""
    g = tf.Graph()
    with g.as_default():
        w = tf.Variable(tf.random_normal([W6B_N, W6B_N], stddev=W6B_N**-0.5, seed=1), name="w")
        x0 = tf.Variable(tf.random_normal([W6B_N, W6B_N], seed=2), name="x0")

        def body(i, x):
            return i + 1, tf.tanh(tf.matmul(x, w))

        _, x = tf.while_loop(lambda i, x: i < W6B_ITERS, body, [tf.constant(0), tf.identity(x0)])
    return timed_runs(initialized_session(tf, g), x)


# -- C1, C2: checkpoints (issue 10) ------------------------------------------------------------
CKPT_TENSORS = 64
CKPT_SHAPE = (1024, 1024)  # 4 MiB of float32 each: 256 MiB in all
CKPT_MIB = CKPT_TENSORS * 4
# In memory (tmpfs) where there is one, so that the disk's writeback does not decide the ratios;
# FLOWGRAPH_BENCH_CKPT_DIR picks another directory (a real disk, for example).
CKPT_DIR = os.environ.get("FLOWGRAPH_BENCH_CKPT_DIR") or (
    "/dev/shm" if os.path.isdir("/dev/shm") else None
)


def _checkpoint_case(tf, restore: bool) -> Case:
    """A Saver over 64 float32 variables of 4 MiB; a step is one save (C1) or restore (C2) of
    the whole 256 MiB, without the MetaGraph and the state file (untimed parts of a real save)."""
    g = tf.Graph()
    with g.as_default():
        variables = [
            tf.Variable(tf.fill(list(CKPT_SHAPE), float(i)), name=f"v{i}")
            for i in range(CKPT_TENSORS)
        ]
        saver = tf.train.Saver(variables)
    sess = initialized_session(tf, g)
    directory = tempfile.mkdtemp(prefix="flowgraph_bench_ckpt_", dir=CKPT_DIR)
    prefix = os.path.join(directory, "model")

    def save():
        saver.save(sess, prefix, write_meta_graph=False, write_state=False)

    if restore:
        save()
    run = (lambda: saver.restore(sess, prefix)) if restore else save

    def step() -> float:
        t0 = time.perf_counter()
        run()
        return time.perf_counter() - t0

    def close():
        sess.close()
        shutil.rmtree(directory, ignore_errors=True)

    return Case(step, close)


def build_c1(tf) -> Case:
    return _checkpoint_case(tf, restore=False)


def build_c2(tf) -> Case:
    return _checkpoint_case(tf, restore=True)


def vs_tf(ratio: float) -> Target:
    return Target(ratio=ratio)


def at_most_us(us: float) -> Target:
    return Target(per_unit_us=us)


# id, title, unit, units per step, target, build, measured steps (after `warmup` steps).
# Step counts keep the full run near a minute per peer on 2 cores while giving stable medians.
WORKLOADS = [
    Workload("W1", "run: add of 2 scalar consts", "us/run", W1_INNER, vs_tf(0.5), build_w1, 25),
    Workload("W2", "1000 fed scalar adds", "us/op", W2_CHAIN, at_most_us(2.0), build_w2, 25),
    Workload("W3", "8 chains x 10 matmul 256", "ms/run", 1, vs_tf(1.0), build_w3, 25, 2),
    Workload("W7", "matmul 2048x2048 f32", "ms/run", 1, vs_tf(1.0), build_w7, 11, 2),
    Workload("W8a", "build MLP forward graph", "ms", 1, vs_tf(1.0), build_w8a, 25, 2),
    Workload("W4", "MLP SGD step, batch 256", "ms/step", 1, vs_tf(1.0), build_w4, 25, 3),
    Workload("W5", "CNN SGD step, batch 64", "ms/step", 1, vs_tf(1.3), build_w5, 15, 3),
    Workload("W8b", "build tf.gradients(MLP)", "ms", 1, vs_tf(1.0), build_w8b, 25, 2),
    Workload("W8c", "build GD.minimize(MLP)", "ms", 1, vs_tf(1.0), build_w8c, 25, 2),
    Workload("W6a", "while_loop 10k x (i+1)", "us/iter", W6A_ITERS, at_most_us(10), build_w6a, 9),
    Workload("W6b", "while_loop 100 x tanh(x@W)", "ms/run", 1, vs_tf(1.0), build_w6b, 15, 2),
    # >= 0.8x TF's MB/s is <= 1.25x TF's time; the NumPy floor is np.save / np.load per array
    Workload("C1", "save 256 MiB, 64 tensors", "ms/save", 1, vs_tf(1.25), build_c1, 7, 1),
    Workload("C2", "restore 256 MiB, 64 tensors", "ms/restore", 1, vs_tf(1.25), build_c2, 7, 1),
]
# issue 11's input workloads (I1, I2) and issue 9's whole programs (P1, P2); those modules
# import this one, so they come last.
from fusion_workloads import FUSION_WORKLOADS
from input_workloads import INPUT_GROUPS, INPUT_WORKLOADS
from pass_workloads import PASS_WORKLOADS
from program_workloads import PROGRAM_WORKLOADS

WORKLOADS += PASS_WORKLOADS + FUSION_WORKLOADS + PROGRAM_WORKLOADS + INPUT_WORKLOADS
# Ratios of two workloads on one peer, printed below the table: (workload, reference, bound on
# workload/reference, what the ratio says). W2j is flowgraph's fused W2 against TF's plain W2.
SAME_PEER_RATIOS = [
    ("F1", "F1u", 0.5, "Adam update: fused / unfused"),
    ("F2", "F2u", 1.0, "mean squared difference: fused / unfused"),
    ("I2", "I2f", 1.05, "CNN step: queue input / feed_dict"),
    ("I2d", "I2f", 1.05, "CNN step: tf.data input / feed_dict"),
]
# Workloads whose ratio is the result: measured in one process with their steps taking turns
# (harness.measure_interleaved), the ratio taken round by round.
INTERLEAVED = INPUT_GROUPS
BY_KEY = {w.key: w for w in WORKLOADS}
