"""The digits CNN trained from TFRecord shards through tf.data (§4.5)."""

import numpy as np
import pytest
from epoch_checks import check_two_epochs

import flowgraph as tf
from flowgraph.examples import digits_cnn_data, digits_cnn_queue


@pytest.mark.parametrize("compression", ["", "ZLIB"])
def test_dataset_fed_cnn_learns_and_consumes_every_epoch(tmp_path, capsys, compression):
    argv = ["--epochs", "2", "--batch_size", "64", "--log_every", "1000"]
    argv += ["--data_dir", str(tmp_path), "--compression", compression]
    out = digits_cnn_data.main(argv)
    check_two_epochs(out, tmp_path, compression, capsys.readouterr().out)


def test_graph_def_of_the_pipeline_carries_the_parse_function(tmp_path):
    paths = digits_cnn_queue.write_shards(
        np.zeros((4, 64), np.float32), np.arange(4, dtype=np.int64), str(tmp_path)
    )
    ds = digits_cnn_data.train_dataset(paths, 2, 1)
    _, labels = ds.make_one_shot_iterator().get_next()
    gd = tf.get_default_graph().as_graph_def()
    bodies = {f.signature.name: f for f in gd.library.function}
    parse = next(f for name, f in bodies.items() if name.startswith("Dataset_map_parse"))
    assert any(n.op == "ParseSingleExample" for n in parse.node_def)
    with tf.Session() as sess:
        got = [sess.run(labels) for _ in range(2)]
    assert sorted(np.concatenate(got).tolist()) == [0, 1, 2, 3]
