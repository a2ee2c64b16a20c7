"""A TF1 training program under MonitoredTrainingSession, run twice (the second run resumes
from the first one's checkpoint); prints JSON describing what it left on disk.

Run as `python program.py tf|flowgraph DIR`: "tf" imports real TensorFlow (tf.compat.v1),
"flowgraph" imports flowgraph. expected.json is what real TensorFlow 2.x's tf.compat.v1
printed (`/opt/tfbench/bin/python program.py tf /tmp/x`).
"""

import glob
import json
import os
import sys

import numpy as np

if sys.argv[1] == "tf":
    import tensorflow.compat.v1 as tf

    tf.disable_v2_behavior()
else:
    import flowgraph as tf


def _model():
    x = tf.constant(np.ones((4, 3), np.float32))
    y = tf.constant(np.full((4, 1), 2.0, np.float32))
    w = tf.get_variable("w", [3, 1], initializer=tf.zeros_initializer())
    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
    tf.summary.scalar("loss", loss)
    step = tf.train.get_or_create_global_step()
    return step, tf.train.GradientDescentOptimizer(0.05).minimize(loss, global_step=step)


def _run(ckpt_dir, last_step):
    tf.reset_default_graph()
    step, train = _model()
    seen = []
    hooks = [tf.train.StopAtStepHook(last_step=last_step)]
    with tf.train.MonitoredTrainingSession(
        checkpoint_dir=ckpt_dir,
        hooks=hooks,
        save_checkpoint_steps=4,
        save_summaries_steps=2,
        log_step_count_steps=3,
    ) as sess:
        while not sess.should_stop():
            seen.append(int(sess.run([train, step])[1]))
    return seen


def _event_kinds(ckpt_dir):
    out = []
    for path in sorted(glob.glob(os.path.join(ckpt_dir, "events*"))):
        for e in tf.train.summary_iterator(path):
            kind = e.WhichOneof("what")
            if kind == "summary":
                detail = [v.tag for v in e.summary.value]
            elif kind == "session_log":
                detail = int(e.session_log.status)
            else:
                detail = None
            out.append([int(e.step), kind, detail])
    return out


def main():
    ckpt_dir = sys.argv[2]
    first = _run(ckpt_dir, 6)
    second = _run(ckpt_dir, 9)
    tf.summary.FileWriterCache.clear()
    state = tf.train.get_checkpoint_state(ckpt_dir)
    files = sorted(f for f in os.listdir(ckpt_dir) if not f.startswith("events"))
    result = {
        "first_run_steps": first,
        "second_run_steps": second,
        "checkpoints": [os.path.basename(p) for p in state.all_model_checkpoint_paths],
        "files": files,
        "events": _event_kinds(ckpt_dir),
        "w": np.round(tf.train.load_variable(ckpt_dir, "w"), 5).ravel().tolist(),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
