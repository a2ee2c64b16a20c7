"""What the digits-CNN examples fed from TFRecord shards (queue runners, tf.data) must both
show after two epochs: every record read, the loss falling, the test accuracy well above
chance, and the end of input announced."""

import numpy as np

import flowgraph as tf


def check_two_epochs(out: dict, data_dir, compression: str, printed: str) -> None:
    """`out` is the example's result, `data_dir` holds its shards, `printed` its stdout."""
    train_size = sum(
        1
        for path in sorted(data_dir.iterdir())
        for _ in tf.python_io.tf_record_iterator(str(path), compression or None)
    )
    assert out["steps"] == -(-2 * train_size // 64)  # every record of both epochs, last batch short
    losses = out["losses"]
    assert np.mean(losses[-5:]) < 0.7 * np.mean(losses[:5])
    assert out["test_accuracy"] > 0.5
    assert "input exhausted after 2 epochs" in printed
