"""Restores a trained model from its MetaGraph alone and predicts: no model code is imported
(whitepaper §3.3: the graph and the variables' values both outlive the training process).

`tf.train.import_meta_graph` rebuilds the graph saved next to the checkpoint (`.meta`), the
Saver it carries restores the variables, and the input and prediction tensors are found by
name ("x:0", "predictions:0").

Run after the main job:
    python -m flowgraph.examples.digits_cnn --steps 300
    python -m flowgraph.examples.predict_from_checkpoint --checkpoint_dir logs/digits_cnn
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import flowgraph as tf
from flowgraph.examples import input_data


def main(argv=None):
    """Predicts the held-out digits with the latest checkpoint; returns predictions and accuracy."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint_dir", default="logs/digits_cnn")
    parser.add_argument("--seed", type=int, default=0, help="the data split digits_cnn used")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    path = tf.train.latest_checkpoint(args.checkpoint_dir)
    if path is None:
        raise SystemExit(
            f"no checkpoint in {args.checkpoint_dir}: run python -m flowgraph.examples.digits_cnn"
        )
    data = input_data.load_digits(seed=args.seed)
    graph = tf.Graph()
    with graph.as_default():
        saver = tf.train.import_meta_graph(path + ".meta")
        x = graph.get_tensor_by_name("x:0")
        predictions = graph.get_tensor_by_name("predictions:0")
        with tf.Session(graph=graph) as sess:
            saver.restore(sess, path)
            step = sess.run(graph.get_tensor_by_name("global_step:0"))
            predicted = sess.run(predictions, {x: data.test.images})
    accuracy = float(np.mean(predicted == data.test.labels))
    print(
        f"restored {path} (step {step}) from its MetaGraph: test accuracy {accuracy:.4f} on "
        f"{data.test.num_examples} digits; first predictions {predicted[:10].tolist()}"
    )
    return {"predictions": predicted, "accuracy": accuracy, "checkpoint": path, "step": int(step)}


if __name__ == "__main__":
    main()
