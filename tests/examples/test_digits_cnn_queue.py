"""The digits CNN trained from TFRecord shards through queue runners (§4.5, §4.6)."""

import pytest
from epoch_checks import check_two_epochs

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
    check_two_epochs(out, tmp_path, compression, capsys.readouterr().out)
