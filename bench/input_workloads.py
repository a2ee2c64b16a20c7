"""Input-pipeline workloads (issue 11; whitepaper §4.5, §4.6), written once over a `tf` module
like the rest of `workloads.py`, which appends them to its table.

I1  reads a TFRecord file of I1_RECORDS serialized tf.train.Examples (784 float32 "x" and an
    int64 "y" each) through the classic queue-runner pipeline: string_input_producer ->
    TFRecordReader.read -> parse_single_example -> tf.train.batch(128, num_threads=2). One step
    is one full pass (a fresh Session per pass, the file written once per build); the unit is
    microseconds per record (records/s = 1e6 / that).
I1d the same records and parse through `tf.data`: TFRecordDataset -> map(parse_single_example)
    -> batch(128), drained by a one-shot iterator (a fresh Session per pass).
I2  the digits CNN's training step (8x8x1 -> conv 3x3x32 -> pool -> conv 3x3x64 -> pool ->
    dense 128 -> dense 10, Adam, batch 64) with its input from a queue: TFRecord files of the
    bundled digits read by 2 reader threads (read_up_to -> parse_example -> shuffle_batch with
    enqueue_many). I2d takes its batches from tf.data (shuffle -> batch -> parse_example ->
    prefetch). I2f is the same step fed by feed_dict; I2/I2f and I2d/I2f are the overheads of
    queue and tf.data input
    (target <= 1.05: the step never waits on input).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time

import numpy as np
from workloads import DIGITS, Case, Target, Workload, session

I1_RECORDS = 20_000
I1_BATCH = 128
I2_BATCH = 64
I2_STEPS = 20  # training steps per measured step
# I2, I2d and I2f are measured interleaved (INPUT_GROUPS): a round is one measured step of
# each, and their ratios are taken round by round. Measured one after the other, 11 steps each,
# the ratio moved with the machine's load and with each process's heap: before runtime/heap.py,
# glibc's dynamic mmap threshold left some processes page-faulting ~450 times per CNN step.
I2_ROUNDS = 31


def _example(tf, x, y) -> bytes:
    ex = tf.train.Example()
    ex.features.feature["x"].float_list.value.extend(x.tolist())
    ex.features.feature["y"].int64_list.value.append(int(y))
    return ex.SerializeToString()


def _write(tf, path, xs, ys):
    with tf.python_io.TFRecordWriter(path) as w:
        for x, y in zip(xs, ys):
            w.write(_example(tf, x, y))


def _drain(tf, sess, fetch) -> int:
    coord = tf.train.Coordinator()
    threads = tf.train.start_queue_runners(sess, coord)
    n = 0
    try:
        while True:
            n += len(sess.run(fetch))
    except tf.errors.OutOfRangeError:
        pass
    finally:
        coord.request_stop()
        coord.join(threads)
    return n


def build_i1(tf) -> Case:
    tmp = tempfile.mkdtemp(prefix="fg_bench_i1_")
    path = os.path.join(tmp, "records.tfrecord")
    rng = np.random.RandomState(0)
    _write(tf, path, rng.rand(I1_RECORDS, 784).astype(np.float32), rng.randint(0, 10, I1_RECORDS))

    def step() -> float:
        g = tf.Graph()
        with g.as_default():
            files = tf.train.string_input_producer([path], num_epochs=1, shuffle=False)
            _, record = tf.TFRecordReader().read(files)
            parsed = tf.parse_single_example(
                record,
                {
                    "x": tf.FixedLenFeature([784], tf.float32),
                    "y": tf.FixedLenFeature([], tf.int64),
                },
            )
            xs, _ = tf.train.batch(
                [parsed["x"], parsed["y"]],
                I1_BATCH,
                num_threads=2,
                capacity=4 * I1_BATCH,
                allow_smaller_final_batch=True,
            )
            init = tf.local_variables_initializer()
        sess = session(tf, g)
        sess.run(init)
        t0 = time.perf_counter()
        n = _drain(tf, sess, xs)
        elapsed = time.perf_counter() - t0
        sess.close()
        if n != I1_RECORDS:
            raise RuntimeError(f"I1 read {n} records, expected {I1_RECORDS}")
        return elapsed

    return Case(step, lambda: shutil.rmtree(tmp, ignore_errors=True))


def build_i1d(tf) -> Case:
    """I1's records through tf.data instead of queue runners."""
    tmp = tempfile.mkdtemp(prefix="fg_bench_i1d_")
    path = os.path.join(tmp, "records.tfrecord")
    rng = np.random.RandomState(0)
    _write(tf, path, rng.rand(I1_RECORDS, 784).astype(np.float32), rng.randint(0, 10, I1_RECORDS))
    features = {
        "x": tf.FixedLenFeature([784], tf.float32),
        "y": tf.FixedLenFeature([], tf.int64),
    }

    def step() -> float:
        g = tf.Graph()
        with g.as_default():
            ds = tf.data.TFRecordDataset([path])
            ds = ds.map(lambda r: tf.parse_single_example(r, features)).batch(I1_BATCH)
            xs = tf.data.make_one_shot_iterator(ds).get_next()["x"]
        sess = session(tf, g)
        t0 = time.perf_counter()
        n = 0
        try:
            while True:
                n += len(sess.run(xs))
        except tf.errors.OutOfRangeError:
            pass
        elapsed = time.perf_counter() - t0
        sess.close()
        if n != I1_RECORDS:
            raise RuntimeError(f"I1d read {n} records, expected {I1_RECORDS}")
        return elapsed

    return Case(step, lambda: shutil.rmtree(tmp, ignore_errors=True))


def _digits_cnn_train(tf, images, labels):
    """The digits CNN on [batch, 64] float32 images and int64 labels; returns the train op."""
    h = tf.reshape(images, [-1, 8, 8, 1])
    c_in = 1
    for i, c_out in enumerate((32, 64)):
        w = tf.Variable(tf.truncated_normal([3, 3, c_in, c_out], stddev=0.1, seed=i + 1))
        b = tf.Variable(tf.constant(0.1, shape=[c_out]))
        h = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(h, w, [1, 1, 1, 1], "SAME"), b))
        h = tf.nn.max_pool(h, [1, 2, 2, 1], [1, 2, 2, 1], "SAME")
        c_in = c_out
    h = tf.reshape(h, [-1, 2 * 2 * 64])
    for i, (n_in, n_out) in enumerate(((256, 128), (128, 10))):
        w = tf.Variable(tf.truncated_normal([n_in, n_out], stddev=0.1, seed=10 + i))
        b = tf.Variable(tf.constant(0.1, shape=[n_out]))
        h = tf.nn.bias_add(tf.matmul(h, w), b)
        if i == 0:
            h = tf.nn.relu(h)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=h))
    return tf.train.AdamOptimizer(1e-3).minimize(loss)


def _digits():
    data = np.load(DIGITS)
    return (data["images"].reshape(len(data["images"]), -1) / 16.0).astype(np.float32), data[
        "labels"
    ].astype(np.int64)


def _train_steps(sess, train) -> Case:
    def step() -> float:
        t0 = time.perf_counter()
        for _ in range(I2_STEPS):
            sess.run(train)
        return time.perf_counter() - t0

    return step


def build_i2(tf) -> Case:
    """The CNN step with its batch from a shuffle queue filled by 2 reader threads."""
    tmp = tempfile.mkdtemp(prefix="fg_bench_i2_")
    xs, ys = _digits()
    paths = []
    for shard in range(2):
        paths.append(os.path.join(tmp, f"digits-{shard}.tfrecord"))
        _write(tf, paths[-1], xs[shard::2], ys[shard::2])
    g = tf.Graph()
    with g.as_default():
        tf.set_random_seed(0)
        files = tf.train.string_input_producer(paths, shuffle=True)
        batches = []
        for _ in range(2):  # two readers, each with its own queue-runner thread
            _, records = tf.TFRecordReader().read_up_to(files, I2_BATCH)
            parsed = tf.parse_example(
                records,
                {
                    "x": tf.FixedLenFeature([64], tf.float32),
                    "y": tf.FixedLenFeature([], tf.int64),
                },
            )
            batches.append([parsed["x"], parsed["y"]])
        images, labels = tf.train.shuffle_batch_join(
            batches,
            I2_BATCH,
            capacity=20 * I2_BATCH,
            min_after_dequeue=4 * I2_BATCH,
            enqueue_many=True,
            seed=1,
        )
        train = _digits_cnn_train(tf, images, labels)
        init = tf.global_variables_initializer()
    sess = session(tf, g)
    sess.run(init)
    coord = tf.train.Coordinator()
    threads = tf.train.start_queue_runners(sess, coord)

    def close():
        coord.request_stop()
        sess.close()
        coord.join(threads, ignore_live_threads=True)
        shutil.rmtree(tmp, ignore_errors=True)

    train_steps = _train_steps(sess, train)

    def step() -> float:
        try:
            return train_steps()
        except tf.errors.OutOfRangeError:
            coord.raise_requested_exception()  # a reader thread's error closed the queue
            raise

    return Case(step, close)


def build_i2d(tf) -> Case:
    """The CNN step with its batch from tf.data: the same shards, shuffled, batched (parsed
    per batch with parse_example) and prefetched in the background."""
    tmp = tempfile.mkdtemp(prefix="fg_bench_i2d_")
    xs, ys = _digits()
    paths = []
    for shard in range(2):
        paths.append(os.path.join(tmp, f"digits-{shard}.tfrecord"))
        _write(tf, paths[-1], xs[shard::2], ys[shard::2])
    features = {"x": tf.FixedLenFeature([64], tf.float32), "y": tf.FixedLenFeature([], tf.int64)}
    g = tf.Graph()
    with g.as_default():
        tf.set_random_seed(0)
        ds = tf.data.TFRecordDataset(paths).shuffle(4 * I2_BATCH, seed=1).repeat()
        ds = ds.batch(I2_BATCH).map(lambda r: tf.parse_example(r, features)).prefetch(2)
        batch = tf.data.make_one_shot_iterator(ds).get_next()
        train = _digits_cnn_train(tf, batch["x"], batch["y"])
        init = tf.global_variables_initializer()
    sess = session(tf, g)
    sess.run(init)

    def close():
        sess.close()
        shutil.rmtree(tmp, ignore_errors=True)

    return Case(_train_steps(sess, train), close)


def build_i2f(tf) -> Case:
    """The same CNN step with its batch fed by feed_dict (a fixed batch of the digits)."""
    xs, ys = _digits()
    g = tf.Graph()
    with g.as_default():
        tf.set_random_seed(0)
        images = tf.placeholder(tf.float32, [None, 64])
        labels = tf.placeholder(tf.int64, [None])
        train = _digits_cnn_train(tf, images, labels)
        init = tf.global_variables_initializer()
    sess = session(tf, g)
    sess.run(init)
    feed = {images: xs[:I2_BATCH], labels: ys[:I2_BATCH]}

    def step() -> float:
        t0 = time.perf_counter()
        for _ in range(I2_STEPS):
            sess.run(train, feed_dict=feed)
        return time.perf_counter() - t0

    return Case(step, sess.close)


INPUT_WORKLOADS = [
    Workload(
        "I1",
        "TFRecord->parse->batch 128 (QR)",
        "us/record",
        I1_RECORDS,
        Target(ratio=2.0),
        build_i1,
        5,
    ),
    Workload(
        "I1d",
        "TFRecord->parse->batch 128 (tf.data)",
        "us/record",
        I1_RECORDS,
        Target(ratio=2.0),
        build_i1d,
        5,
    ),
    Workload(
        "I2",
        "digits CNN step, queue input",
        "ms/step",
        I2_STEPS,
        Target(ratio=2.0),
        build_i2,
        I2_ROUNDS,
        2,
    ),
    Workload(
        "I2d",
        "digits CNN step, tf.data input",
        "ms/step",
        I2_STEPS,
        Target(ratio=2.0),
        build_i2d,
        I2_ROUNDS,
        2,
    ),
    Workload(
        "I2f",
        "digits CNN step, feed_dict",
        "ms/step",
        I2_STEPS,
        Target(ratio=2.0),
        build_i2f,
        I2_ROUNDS,
        2,
    ),
]
# measured together, their steps taking turns (harness.measure_interleaved)
INPUT_GROUPS = [("I2", "I2d", "I2f")]
