"""The digits CNN trained from TFRecord shards through queue runners (§4.5, §4.6)."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.examples import digits_cnn_queue


@pytest.mark.parametrize("compression", ["", "GZIP"])
def test_queue_fed_cnn_learns_and_consumes_every_epoch(tmp_path, capsys, compression):
    out = digits_cnn_queue.main(
        [
            "--epochs",
            "2",
            "--batch_size",
            "64",
            "--log_every",
            "1000",
            "--data_dir",
            str(tmp_path),
            "--compression",
            compression,
        ]
    )
    train_size = sum(
        1
        for path in sorted(tmp_path.iterdir())
        for _ in tf.python_io.tf_record_iterator(str(path), compression or None)
    )
    assert out["steps"] == -(-2 * train_size // 64)  # every record of both epochs, last batch short
    losses = out["losses"]
    assert np.mean(losses[-5:]) < 0.7 * np.mean(losses[:5])
    assert out["test_accuracy"] > 0.5
    assert "input exhausted after 2 epochs" in capsys.readouterr().out
