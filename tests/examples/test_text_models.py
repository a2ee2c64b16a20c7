"""The text examples: the character LSTM beats a unigram model on held-out text; word2vec's NCE
loss falls, its updates are sparse, and its nearest neighbours are the cosine-nearest words."""

from __future__ import annotations

import os

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.examples import lstm_lm, text_data, word2vec


def _scalars(logdir):
    (name,) = [f for f in os.listdir(logdir) if "tfevents" in f]
    events = list(tf.summary.summary_iterator(os.path.join(logdir, name)))
    assert any(e.WhichOneof("what") == "graph_def" for e in events)
    return {v.tag: v.simple_value for e in events for v in e.summary.value}


def test_text_data_characters_and_words():
    chars = text_data.characters()
    assert len(chars) > 9000 and "\n" not in chars and "  " not in "".join(chars)
    words = text_data.words()
    assert len(words) > 2000 and words[:4] == ["in", "the", "spring", "the"]
    vocab = text_data.vocabulary(words)
    assert vocab["the"] == 0 and text_data.as_ids(["the", "farmer"], vocab).dtype == np.int32


def test_unigram_perplexity_matches_numpy():
    train, test = np.array([0, 0, 1, 2]), np.array([0, 1, 3])
    p = np.array([3, 2, 2, 1]) / 8.0  # add-one counts over a vocabulary of 4
    expected = np.exp(-np.mean(np.log(p[test])))
    assert lstm_lm.unigram_perplexity(train, test, 4) == pytest.approx(expected)


def test_windows_cover_streams_in_order():
    rows = lstm_lm.streams(np.arange(23), 2)  # 2 streams of 11, the last id dropped
    np.testing.assert_array_equal(rows[1], np.arange(11, 22))
    pairs = list(lstm_lm.windows(rows, 4))
    assert len(pairs) == 2
    np.testing.assert_array_equal(pairs[1][0], [[4, 5, 6, 7], [15, 16, 17, 18]])
    np.testing.assert_array_equal(pairs[1][1], [[5, 6, 7, 8], [16, 17, 18, 19]])


def test_lstm_beats_unigram_on_held_out_text(tmp_path, capsys):
    args = ["--steps", "80", "--hidden", "64", "--log_every", "40", "--sample_chars", "30"]
    out = lstm_lm.main(args + ["--logdir", str(tmp_path)])
    assert np.mean(out["losses"][-5:]) < np.mean(out["losses"][:5]) - 0.8
    assert np.isfinite(out["perplexity"])
    assert out["perplexity"] < out["unigram_perplexity"]
    assert out["sample"].startswith("The ") and len(out["sample"]) == 4 + 30
    scalars = _scalars(tmp_path)
    assert {"loss", "perplexity"} <= set(scalars)
    assert scalars["held_out/lstm_perplexity"] == pytest.approx(out["perplexity"])
    assert scalars["held_out/unigram_perplexity"] == pytest.approx(out["unigram_perplexity"])
    assert "held-out perplexity" in capsys.readouterr().out


@pytest.mark.parametrize("batch_size, num_steps", [(400, 32), (1, 2000)])
def test_lstm_rejects_too_long_windows(batch_size, num_steps, tmp_path):
    args = ["--batch_size", str(batch_size), "--num_steps", str(num_steps)]
    with pytest.raises(ValueError, match="no training or held-out window"):
        lstm_lm.main(args + ["--logdir", str(tmp_path)])


def test_skip_gram_pairs():
    rng = np.random.RandomState(0)
    pairs = word2vec.skip_gram_pairs(np.array([5, 6, 7, 8]), 2, 0.0, rng)
    expected = {(5, 6), (6, 7), (7, 8), (5, 7), (6, 8)}
    expected |= {(b, a) for a, b in expected}
    assert sorted(map(tuple, pairs.tolist())) == sorted(expected)
    # Subsampling keeps a word of frequency f with probability sqrt(t / f): here ~95 of the 900
    # zeros (f = 0.9) and ~22 of each 50 others (f = 0.05), so zeros fall from 90% to ~68%.
    ids = np.array([0] * 900 + [1] * 50 + [2] * 50)
    pairs = word2vec.skip_gram_pairs(rng.permutation(ids), 1, 1e-2, rng)
    assert 0.55 < np.mean(pairs[:, 0] == 0) < 0.8
    assert 150 < len(pairs) < 320  # ~2 pairs per kept word


def test_word2vec_embedding_updates_are_sparse():
    args = word2vec._parse(["--num_sampled", "4"])
    model = word2vec.Word2Vec(50, args, [1, 2])
    assert isinstance(tf.gradients(model.loss, model.embeddings)[0], tf.IndexedSlices)
    updates = {
        op.inputs[0].op.name: op.type
        for op in tf.get_default_graph().get_operations()
        if op.name.startswith("GradientDescent/update_")
        and op.type not in ("Const", "NoOp", "Mul", "Neg")
    }
    assert updates == {
        "embeddings": "ScatterSub",
        "nce_weights": "ScatterSub",
        "nce_biases": "ScatterSub",
    }


def test_word2vec_loss_falls_and_neighbours_are_nearest(tmp_path, capsys):
    out = word2vec.main(["--steps", "400", "--log_every", "200", "--logdir", str(tmp_path)])
    losses = out["losses"]
    assert np.mean(losses[-50:]) < 0.7 * np.mean(losses[:50])
    vocab, emb = out["vocabulary"], out["embeddings"]
    words = sorted(vocab, key=vocab.get)
    normalized = emb / np.linalg.norm(emb, axis=1, keepdims=True)
    assert set(out["neighbours"]) == set(word2vec.EXAMPLE_WORDS.split(","))
    for word, found in out["neighbours"].items():
        assert len(found) == 5 and word not in [w for w, _ in found]
        similarity = normalized @ normalized[vocab[word]]
        similarity[vocab[word]] = -np.inf
        expected = [words[i] for i in np.argsort(-similarity, kind="stable")[:5]]
        assert [w for w, _ in found] == expected
        np.testing.assert_allclose(
            [s for _, s in found], similarity[[vocab[w] for w in expected]], rtol=1e-4, atol=1e-5
        )
    assert "loss" in _scalars(tmp_path)
    assert "nearest words" in capsys.readouterr().out


def test_word2vec_rejects_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="zebra"):
        word2vec.main(["--examples", "farmer,zebra", "--logdir", str(tmp_path)])
    with pytest.raises(ValueError, match="--batch_size 100000"):
        word2vec.main(["--batch_size", "100000", "--logdir", str(tmp_path)])
