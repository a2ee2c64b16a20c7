"""The digits CNN fed by the classic input pipeline (whitepaper §4.5 input nodes, §4.6 queues):
the bundled 8x8 digits are written as tf.train.Examples to TFRecord shards with TFRecordWriter,
then read back by two TFRecordReaders whose queue runners parse them and fill a shuffle queue,
from which the training step dequeues its batches. No feed_dict: the step never waits on input
as long as reading is cheaper than training.

string_input_producer(shards, num_epochs) -> 2 x TFRecordReader.read -> parse_single_example
-> shuffle_batch_join(batch, min_after_dequeue) -> digits_cnn.build_model(x, y) -> Adam.

Run: python -m flowgraph.examples.digits_cnn_queue --epochs 10 --data_dir /tmp/digits_records
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

import flowgraph as tf
from flowgraph.examples import digits_cnn, input_data

FEATURES = {
    "image": tf.FixedLenFeature([64], tf.float32),
    "label": tf.FixedLenFeature([], tf.int64),
}


def write_shards(images, labels, data_dir, shards=2, compression=""):
    """Writes (image, label) pairs as tf.train.Examples into `shards` TFRecord files."""
    os.makedirs(data_dir, exist_ok=True)
    options = tf.python_io.TFRecordOptions(compression)
    paths = []
    for s in range(shards):
        path = os.path.join(data_dir, f"digits-{s:05d}-of-{shards:05d}.tfrecord")
        with tf.python_io.TFRecordWriter(path, options) as writer:
            for image, label in zip(images[s::shards], labels[s::shards]):
                example = tf.train.Example(
                    features=tf.train.Features(
                        feature={
                            "image": tf.train.Feature(float_list=tf.train.FloatList(value=image)),
                            "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label])),
                        }
                    )
                )
                writer.write(example.SerializeToString())
        paths.append(path)
    return paths


def input_pipeline(paths, batch_size, num_epochs, readers=2, seed=0, compression=""):
    """Batches of (images [batch, 64], labels [batch]) read from `paths` by `readers` readers."""
    files = tf.train.string_input_producer(paths, num_epochs=num_epochs, seed=seed)
    options = tf.python_io.TFRecordOptions(compression)
    examples = []
    for _ in range(readers):  # one queue-runner thread per reader
        _, record = tf.TFRecordReader(options=options).read(files)
        parsed = tf.parse_single_example(record, FEATURES)
        examples.append([parsed["image"], parsed["label"]])
    return tf.train.shuffle_batch_join(
        examples,
        batch_size,
        capacity=10 * batch_size,
        min_after_dequeue=4 * batch_size,
        seed=seed,
        allow_smaller_final_batch=True,
    )


def parse_args(argv, doc: str):
    """The flags of the digits CNN read from TFRecord shards (this example and digits_cnn_data);
    `doc` is the calling module's docstring, whose first line describes it in --help."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=10, help="passes over the training shards")
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--learning_rate", type=float, default=2e-3)
    parser.add_argument("--data_dir", default=None, help="where the TFRecord shards go")
    parser.add_argument("--compression", default="", choices=["", "GZIP", "ZLIB"])
    parser.add_argument("--log_every", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def digits_shards(args):
    """The bundled digits and the paths of the TFRecord shards of their training set, written
    under `args.data_dir` (a new temporary directory when it is None)."""
    data = input_data.load_digits(seed=args.seed)
    data_dir = args.data_dir or tempfile.mkdtemp(prefix="digits_records_")
    labels = data.train.labels.astype(np.int64)
    return data, write_shards(data.train.images, labels, data_dir, compression=args.compression)


def main(argv=None):
    """Writes the shards, trains until the input runs out, evaluates; returns final metrics."""
    args = parse_args(sys.argv[1:] if argv is None else argv, __doc__)
    data, paths = digits_shards(args)
    tf.reset_default_graph()
    tf.set_random_seed(args.seed)
    images, labels = input_pipeline(
        paths, args.batch_size, args.epochs, seed=args.seed, compression=args.compression
    )
    model = digits_cnn.build_model(args.learning_rate, x=images, y=labels)
    losses = []
    with tf.Session() as sess:
        sess.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(sess, coord)
        t0 = time.perf_counter()
        try:
            while not coord.should_stop():
                _, loss, accuracy = sess.run([model["train_op"], model["loss"], model["accuracy"]])
                losses.append(float(loss))
                if len(losses) % args.log_every == 0:
                    print(
                        f"step {len(losses):5d}  loss {loss:.4f}  batch accuracy {accuracy:.3f}",
                        flush=True,
                    )
        except tf.errors.OutOfRangeError:
            print(f"input exhausted after {args.epochs} epochs", flush=True)
        finally:
            coord.request_stop()
        coord.join(threads)
        elapsed = time.perf_counter() - t0
        # The dequeued batch tensors can be fed like placeholders: evaluate on the test set.
        feed = {images: data.test.images, labels: data.test.labels.astype(np.int64)}
        test_loss, test_accuracy = sess.run([model["loss"], model["accuracy"]], feed)
    print(
        f"test accuracy {test_accuracy:.4f} (loss {test_loss:.4f}) after {len(losses)} steps "
        f"fed by queue runners, {elapsed:.1f} s"
    )
    return {
        "losses": np.array(losses),
        "test_accuracy": float(test_accuracy),
        "steps": len(losses),
        "seconds": elapsed,
    }


if __name__ == "__main__":
    main()
