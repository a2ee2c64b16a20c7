"""End to end: a TF1-style training script (flags, app.run, logging, gfile, FileWriter, softmax
regression with GradientDescentOptimizer) runs unchanged under `flowgraph run`."""

from __future__ import annotations

from tests.helpers import run_flowgraph

SCRIPT = '''"""Softmax regression on synthetic data, written the way TF1's mnist_softmax.py is."""
import numpy as np
import tensorflow as tf

flags = tf.app.flags
flags.DEFINE_string("log_dir", "/tmp/logs", "Where the summaries go.")
flags.DEFINE_integer("max_steps", 200, "Training steps.")
flags.DEFINE_float("learning_rate", 0.5, "Learning rate.")
flags.DEFINE_boolean("fake_data", True, "Use synthetic data.")
FLAGS = flags.FLAGS


def synthetic(n, rng):
    centers = np.eye(3, 4, dtype=np.float32) * 3.0
    labels = rng.randint(0, 3, size=n)
    x = centers[labels] + rng.normal(size=(n, 4)).astype(np.float32) * 0.5
    return x, np.eye(3, dtype=np.float32)[labels]


def main(argv):
    tf.logging.set_verbosity(tf.logging.INFO)
    if tf.gfile.Exists(FLAGS.log_dir):
        tf.gfile.DeleteRecursively(FLAGS.log_dir)
    tf.gfile.MakeDirs(FLAGS.log_dir)
    rng = np.random.RandomState(0)
    train_x, train_y = synthetic(600, rng)
    test_x, test_y = synthetic(300, rng)

    x = tf.placeholder(tf.float32, [None, 4])
    y_ = tf.placeholder(tf.float32, [None, 3])
    W = tf.Variable(tf.zeros([4, 3]))
    b = tf.Variable(tf.zeros([3]))
    y = tf.matmul(x, W) + b
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=y_, logits=y))
    tf.summary.scalar("loss", loss)
    train_step = tf.train.GradientDescentOptimizer(FLAGS.learning_rate).minimize(loss)
    correct = tf.equal(tf.argmax(y, 1), tf.argmax(y_, 1))
    accuracy = tf.reduce_mean(tf.cast(correct, tf.float32))
    merged = tf.summary.merge_all()

    with tf.Session() as sess:
        writer = tf.summary.FileWriter(FLAGS.log_dir, sess.graph)
        sess.run(tf.global_variables_initializer())
        for step in range(FLAGS.max_steps):
            idx = rng.randint(0, 600, size=100)
            summary, _ = sess.run([merged, train_step], {x: train_x[idx], y_: train_y[idx]})
            writer.add_summary(summary, step)
            tf.logging.log_every_n(tf.logging.INFO, "step %d", 50, step)
        writer.close()
        acc = sess.run(accuracy, {x: test_x, y_: test_y})
    print("accuracy %.3f" % acc)
    print("argv", argv[1:])
    print("events", len(tf.gfile.Glob(FLAGS.log_dir + "/events.out.tfevents*")))
    return 0 if acc > 0.9 else 3


if __name__ == "__main__":
    tf.app.run()
'''


def test_tf1_training_script_runs_under_flowgraph_run(tmp_path):
    script = tmp_path / "softmax.py"
    script.write_text(SCRIPT)
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    (log_dir / "stale.txt").write_text("removed by the script")
    proc = run_flowgraph(
        "run", str(script), f"--log_dir={log_dir}", "--max_steps", "60", "extra_arg"
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    accuracy = float(next(l for l in lines if l.startswith("accuracy")).split()[1])
    assert accuracy > 0.9
    assert "argv ['extra_arg']" in lines and "events 1" in lines
    assert "INFO:tensorflow:step 0" in proc.stderr and "INFO:tensorflow:step 50" in proc.stderr
    assert not (log_dir / "stale.txt").exists()
    (event_file,) = log_dir.glob("events.out.tfevents*")
    assert event_file.stat().st_size > 0


def test_bad_flag_fails_the_script(tmp_path):
    script = tmp_path / "softmax.py"
    script.write_text(SCRIPT)
    proc = run_flowgraph("run", str(script), "--max_steps=many")
    assert proc.returncode == 1
    assert "FATAL Flags parsing error" in proc.stderr and "--max_steps=many" in proc.stderr
