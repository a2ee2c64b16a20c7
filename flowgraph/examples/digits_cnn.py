"""A convolutional network on the bundled 8x8 digits, trained with Adam (the whitepaper's §6
"image classification" example, scaled to data shipped with flowgraph).

conv 3x3x32 (SAME) -> ReLU -> max-pool 2x2 -> conv 3x3x64 (SAME) -> ReLU -> max-pool 2x2 ->
dense 128 -> ReLU -> dropout -> dense 10. Training prints one progress line every
`--log_every` steps (step, loss, batch accuracy, examples/sec), evaluates on the held-out test
set at the end, and writes TensorBoard logs (loss and accuracy scalars, weight histograms, the
graph) to `--logdir`. The first logged step is traced (RunOptions FULL_TRACE): its RunMetadata
goes to the event file, so TensorBoard's graph shows compute time and memory per node, and its
Chrome trace to `<logdir>/timeline-<step>.json` (open it in chrome://tracing or Perfetto). Checkpoints go to `--checkpoint_dir` (default: the logdir) every
`--save_every` steps and at the end; run it again and it resumes from the latest one
(`--steps` is the total), and `predict_from_checkpoint` predicts from it without this code.

Run: python -m flowgraph.examples.digits_cnn --steps 600 --logdir logs/digits_cnn
     tensorboard --logdir logs/digits_cnn        (optional, if tensorboard is installed)
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

import flowgraph as tf
from flowgraph.client import timeline
from flowgraph.examples import input_data


def _conv_relu_pool(x, in_channels, out_channels, name):
    with tf.variable_scope(name):
        w = tf.get_variable(
            "weights",
            [3, 3, in_channels, out_channels],
            initializer=tf.truncated_normal_initializer(stddev=0.1, seed=1),
        )
        b = tf.get_variable("biases", [out_channels], initializer=tf.constant_initializer(0.1))
        conv = tf.nn.conv2d(x, w, strides=[1, 1, 1, 1], padding="SAME")
        relu = tf.nn.relu(tf.nn.bias_add(conv, b))
        tf.summary.histogram("filters", w)  # "weights" is taken by the variable
        return tf.nn.max_pool(relu, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="SAME")


def _dense(x, in_units, out_units, name):
    with tf.variable_scope(name):
        w = tf.get_variable(
            "weights",
            [in_units, out_units],
            initializer=tf.truncated_normal_initializer(stddev=0.1, seed=2),
        )
        b = tf.get_variable("biases", [out_units], initializer=tf.constant_initializer(0.1))
        return tf.matmul(x, w) + b


def build_model(learning_rate, x=None, y=None):
    """The graph: inputs (placeholders unless `x`, `y` are given, e.g. from an input queue),
    logits, loss, accuracy, train op and merged summaries."""
    x = tf.placeholder(tf.float32, [None, 64], name="x") if x is None else x
    y = tf.placeholder(tf.int64, [None], name="y") if y is None else y
    keep_prob = tf.placeholder_with_default(1.0, [], name="keep_prob")
    images = tf.reshape(x, [-1, 8, 8, 1])
    tf.summary.image("inputs", images, max_outputs=3)
    h1 = _conv_relu_pool(images, 1, 32, "conv1")  # 4x4x32
    h2 = _conv_relu_pool(h1, 32, 64, "conv2")  # 2x2x64
    flat = tf.reshape(h2, [-1, 2 * 2 * 64])
    fc = tf.nn.relu(_dense(flat, 256, 128, "fc1"))
    logits = _dense(tf.nn.dropout(fc, keep_prob=keep_prob, seed=3), 128, 10, "logits")
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    correct = tf.equal(tf.argmax(logits, 1, name="predictions"), y)
    accuracy = tf.reduce_mean(tf.cast(correct, tf.float32))
    global_step = tf.train.get_or_create_global_step()
    train_op = tf.train.AdamOptimizer(learning_rate).minimize(loss, global_step=global_step)
    tf.summary.scalar("loss", loss)
    tf.summary.scalar("accuracy", accuracy)
    return {
        "x": x,
        "y": y,
        "keep_prob": keep_prob,
        "loss": loss,
        "accuracy": accuracy,
        "train_op": train_op,
        "summaries": tf.summary.merge_all(),
    }


def _parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=600, help="training steps")
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--learning_rate", type=float, default=2e-3)
    parser.add_argument("--keep_prob", type=float, default=0.75, help="dropout keep probability")
    parser.add_argument("--log_every", type=int, default=100, help="steps between progress lines")
    parser.add_argument("--logdir", default="logs/digits_cnn", help="TensorBoard log directory")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpoint_dir", default=None, help="default: --logdir")
    parser.add_argument("--save_every", type=int, default=200, help="steps between checkpoints")
    return parser.parse_args(argv)


def main(argv=None):
    """Trains, prints progress and test accuracy; returns a dict of final metrics."""
    args = _parse(sys.argv[1:] if argv is None else argv)
    data = input_data.load_digits(seed=args.seed)
    tf.reset_default_graph()
    tf.set_random_seed(args.seed)
    model = build_model(args.learning_rate)
    writer = tf.summary.FileWriter(args.logdir, graph=tf.get_default_graph())
    losses = []
    saver = tf.train.Saver(max_to_keep=3)
    ckpt_dir = args.checkpoint_dir or args.logdir
    with tf.Session() as sess:
        start = _restore_or_init(sess, saver, ckpt_dir)
        t0 = t_last = time.perf_counter()
        seen = 0  # examples since the last progress line
        traced = False
        for step in range(start + 1, args.steps + 1):
            xs, ys = data.train.next_batch(args.batch_size)
            feed = {model["x"]: xs, model["y"]: ys, model["keep_prob"]: args.keep_prob}
            fetches = [model["train_op"], model["loss"], model["accuracy"]]
            log = step % args.log_every == 0 or step == args.steps
            if log:
                fetches.append(model["summaries"])
            if log and not traced:
                out = _traced_run(sess, fetches, feed, writer, step, args.logdir)
                traced = True
            else:
                out = sess.run(fetches, feed_dict=feed)
            losses.append(float(out[1]))
            seen += len(xs)
            if log:
                writer.add_summary(out[3], step)
                now = time.perf_counter()
                rate = seen / (now - t_last)
                t_last, seen = now, 0
                print(
                    f"step {step:5d}  loss {out[1]:.4f}  batch accuracy {out[2]:.3f}  "
                    f"{rate:8.0f} examples/sec",
                    flush=True,
                )
            if step % args.save_every == 0 or step == args.steps:
                saver.save(sess, os.path.join(ckpt_dir, "model.ckpt"), global_step=step)
        elapsed = time.perf_counter() - t0
        feed = {model["x"]: data.test.images, model["y"]: data.test.labels}
        test_loss, test_accuracy = sess.run([model["loss"], model["accuracy"]], feed_dict=feed)
    writer.close()
    print(
        f"test accuracy {test_accuracy:.4f} (loss {test_loss:.4f}) on "
        f"{data.test.num_examples} held-out digits after {args.steps} steps, "
        f"{elapsed:.1f} s"
    )
    return {
        "losses": np.array(losses),
        "test_accuracy": float(test_accuracy),
        "test_loss": float(test_loss),
        "seconds": elapsed,
        "start_step": start,
    }


def _traced_run(sess, fetches, feed, writer, step, logdir):
    """Runs one step with a full trace (whitepaper §9.2): its step stats go to TensorBoard
    (per-node compute time and memory in the graph dashboard) and to a Chrome trace file."""
    run_metadata = tf.RunMetadata()
    options = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
    out = sess.run(fetches, feed_dict=feed, options=options, run_metadata=run_metadata)
    writer.add_run_metadata(run_metadata, f"step{step}", global_step=step)
    trace = timeline.Timeline(run_metadata.step_stats).generate_chrome_trace_format(
        show_memory=True
    )
    with open(os.path.join(logdir, f"timeline-{step}.json"), "w") as f:
        f.write(trace)
    return out


def _restore_or_init(sess, saver, ckpt_dir) -> int:
    """Resumes from the latest checkpoint in `ckpt_dir` (returns its step), else initializes."""
    path = tf.train.latest_checkpoint(ckpt_dir)
    if path is None:
        sess.run(tf.global_variables_initializer())
        return 0
    saver.restore(sess, path)
    step = int(sess.run(tf.train.get_global_step()))
    print(f"resumed from {path} at step {step}", flush=True)
    return step


if __name__ == "__main__":
    main()
