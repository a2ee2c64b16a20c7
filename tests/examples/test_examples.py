"""The examples run end to end for a few steps, learn (loss falls) and write event files."""

from __future__ import annotations

import os

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.examples import digits_cnn, digits_mlp, digits_softmax, figure1


def _event_tags(logdir):
    (name,) = [f for f in os.listdir(logdir) if "tfevents" in f]
    events = list(tf.summary.summary_iterator(os.path.join(logdir, name)))
    assert events[0].file_version == "brain.Event:2"
    assert any(e.WhichOneof("what") == "graph_def" for e in events)
    return {v.tag for e in events for v in e.summary.value}


@pytest.mark.parametrize(
    "module, steps, tags",
    [
        (digits_softmax, 60, {"cross_entropy", "accuracy"}),
        (digits_mlp, 60, {"loss", "accuracy", "hidden1/kernel_1"}),
        (digits_cnn, 60, {"loss", "accuracy", "conv1/filters", "inputs/image/0"}),
    ],
)
def test_digits_examples_learn(module, steps, tags, tmp_path, capsys):
    out = module.main(["--steps", str(steps), "--log_every", "30", "--logdir", str(tmp_path)])
    losses = out["losses"]
    assert np.mean(losses[-10:]) < 0.5 * np.mean(losses[:10])
    assert out["test_accuracy"] > 0.5
    assert tags <= _event_tags(tmp_path)
    assert "test accuracy" in capsys.readouterr().out


def test_figure1_runs_its_steps_and_computes_relu_of_wx_plus_b(capsys):
    figure1.main(["--steps", "2"])
    assert capsys.readouterr().out.count("step ") == 2
    with tf.Graph().as_default() as g:
        x, relu, C = figure1.build()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            batch = np.random.RandomState(1).rand(3, 784).astype(np.float32)
            W, b = sess.run([g.get_tensor_by_name("W:0"), g.get_tensor_by_name("b:0")])
            got_relu, got_c = sess.run([relu, C], {x: batch})
    want = np.maximum(batch @ W + b, 0)
    np.testing.assert_allclose(got_relu, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got_c, want.sum(), rtol=1e-5)
