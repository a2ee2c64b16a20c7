"""The main job saves checkpoints and resumes from them; a model is restored from its MetaGraph
alone (no model code) and predicts what the trained model predicted."""

from __future__ import annotations

import flowgraph as tf
from flowgraph.examples import digits_cnn, predict_from_checkpoint


def test_digits_cnn_resumes_and_predicts_from_meta_graph(tmp_path, capsys):
    ckpt = str(tmp_path / "ckpt")
    common = ["--log_every", "20", "--save_every", "20", "--checkpoint_dir", ckpt]
    first = digits_cnn.main(["--steps", "40", "--logdir", str(tmp_path / "a"), *common])
    assert first["start_step"] == 0 and len(first["losses"]) == 40
    assert tf.train.latest_checkpoint(ckpt).endswith("model.ckpt-40")
    second = digits_cnn.main(["--steps", "60", "--logdir", str(tmp_path / "b"), *common])
    assert second["start_step"] == 40 and len(second["losses"]) == 20
    assert "resumed from" in capsys.readouterr().out
    # the resumed run continues where the first stopped: its first loss is no restart's loss
    assert second["losses"][0] < first["losses"][0]
    out = predict_from_checkpoint.main(["--checkpoint_dir", ckpt])
    assert out["step"] == 60 and out["checkpoint"].endswith("model.ckpt-60")
    assert abs(out["accuracy"] - second["test_accuracy"]) < 1e-6  # float32 mean vs float64
