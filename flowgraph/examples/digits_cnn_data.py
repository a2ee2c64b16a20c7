"""The digits CNN fed by `tf.data` (whitepaper §4.5 input nodes): the bundled 8x8 digits are
written as tf.train.Examples to TFRecord shards, then read back by a dataset pipeline whose
parse function lives in the graph's function library; one reinitializable iterator feeds the
model from the training shards and then from the test set. No feed_dict, no queue runners.

TFRecordDataset(shards, num_parallel_reads=2) -> map(parse_single_example) -> shuffle(seed)
-> repeat(epochs) -> batch -> prefetch -> Iterator.from_structure -> digits_cnn.build_model.

Run: python -m flowgraph.examples.digits_cnn_data --epochs 10 --data_dir /tmp/digits_records
"""

from __future__ import annotations

import sys
import time

import numpy as np

import flowgraph as tf
from flowgraph.examples import digits_cnn
from flowgraph.examples.digits_cnn_queue import FEATURES, digits_shards, parse_args


def parse(record):
    """One serialized tf.train.Example -> (image [64] float32, label int64)."""
    features = tf.parse_single_example(record, FEATURES)
    return features["image"], features["label"]


def train_dataset(paths, batch_size, num_epochs, seed=0, compression=""):
    """Shuffled batches of (images, labels) from the TFRecord shards, `num_epochs` passes."""
    ds = tf.data.TFRecordDataset(paths, compression_type=compression, num_parallel_reads=2)
    ds = ds.map(parse).shuffle(10 * batch_size, seed=seed).repeat(num_epochs)
    return ds.batch(batch_size).prefetch(2)


def main(argv=None):
    """Writes the shards, trains until the dataset ends, evaluates; returns final metrics."""
    args = parse_args(sys.argv[1:] if argv is None else argv, __doc__)
    data, paths = digits_shards(args)
    tf.reset_default_graph()
    tf.set_random_seed(args.seed)
    train = train_dataset(paths, args.batch_size, args.epochs, args.seed, args.compression)
    test = tf.data.Dataset.from_tensor_slices(
        (data.test.images.astype(np.float32), data.test.labels.astype(np.int64))
    ).batch(len(data.test.images))
    iterator = tf.data.Iterator.from_structure(train.output_types, train.output_shapes)
    images, labels = iterator.get_next()
    model = digits_cnn.build_model(args.learning_rate, x=images, y=labels)
    losses = []
    with tf.Session() as sess:
        sess.run([tf.global_variables_initializer(), iterator.make_initializer(train)])
        t0 = time.perf_counter()
        try:
            while True:
                _, loss, accuracy = sess.run([model["train_op"], model["loss"], model["accuracy"]])
                losses.append(float(loss))
                if len(losses) % args.log_every == 0:
                    print(
                        f"step {len(losses):5d}  loss {loss:.4f}  batch accuracy {accuracy:.3f}",
                        flush=True,
                    )
        except tf.errors.OutOfRangeError:
            print(f"input exhausted after {args.epochs} epochs", flush=True)
        elapsed = time.perf_counter() - t0
        sess.run(iterator.make_initializer(test))  # the same iterator, now over the test set
        test_loss, test_accuracy = sess.run([model["loss"], model["accuracy"]])
    print(
        f"test accuracy {test_accuracy:.4f} (loss {test_loss:.4f}) after {len(losses)} steps "
        f"fed by tf.data, {elapsed:.1f} s"
    )
    return {
        "losses": np.array(losses),
        "test_accuracy": float(test_accuracy),
        "steps": len(losses),
        "seconds": elapsed,
    }


if __name__ == "__main__":
    main()
