"""End to end: a tiny attention encoder-decoder learns to copy sequences (TF1's NMT-tutorial
recipe: dynamic_rnn encoder, AttentionWrapper decoder trained with TrainingHelper and
sequence_loss), then greedy and beam search decoding reproduce the sources."""

import itertools

import numpy as np

import flowgraph as tf

seq2seq = tf.contrib.seq2seq
EOS, GO = 0, 1
SYMBOLS = [2, 3, 4, 5]
V, H, BEAM, MAX_LEN = 6, 24, 3, 3


def _dataset():
    """Every sequence of 2 or 3 symbols; targets are the source plus EOS."""
    seqs = [list(s) for n in (2, 3) for s in itertools.product(SYMBOLS, repeat=n)]
    n = len(seqs)
    src = np.full((n, MAX_LEN), EOS, np.int32)
    tgt_in = np.full((n, MAX_LEN + 1), EOS, np.int32)
    tgt_out = np.full((n, MAX_LEN + 1), EOS, np.int32)
    for i, s in enumerate(seqs):
        src[i, : len(s)] = s
        tgt_in[i, : len(s) + 1] = [GO] + s
        tgt_out[i, : len(s)] = s
    lengths = np.array([len(s) for s in seqs], np.int32)
    return src, lengths, tgt_in, tgt_out, lengths + 1


def _model(src, src_len, tgt_in, tgt_len):
    embedding = tf.get_variable("embedding", [V, 12])
    with tf.variable_scope("encoder"):
        enc_out, enc_state = tf.nn.dynamic_rnn(
            tf.nn.rnn_cell.GRUCell(H),
            tf.nn.embedding_lookup(embedding, src),
            src_len,
            dtype=tf.float32,
        )
    projection = tf.layers.Dense(V, name="projection")
    batch = tf.shape(src)[0]

    def decoder_cell(memory, memory_len, state, multiplier):
        mechanism = seq2seq.BahdanauAttention(H, memory, memory_sequence_length=memory_len)
        cell = seq2seq.AttentionWrapper(
            tf.nn.rnn_cell.GRUCell(H), mechanism, attention_layer_size=H
        )
        initial = cell.zero_state(batch * multiplier, tf.float32).clone(cell_state=state)
        return cell, initial

    with tf.variable_scope("decoder"):
        cell, initial = decoder_cell(enc_out, src_len, enc_state, 1)
        helper = seq2seq.TrainingHelper(tf.nn.embedding_lookup(embedding, tgt_in), tgt_len)
        train_out, _, _ = seq2seq.dynamic_decode(
            seq2seq.BasicDecoder(cell, helper, initial, output_layer=projection)
        )
    with tf.variable_scope("decoder", reuse=True):
        greedy = seq2seq.GreedyEmbeddingHelper(embedding, tf.fill([batch], GO), EOS)
        greedy_out, _, _ = seq2seq.dynamic_decode(
            seq2seq.BasicDecoder(cell, greedy, initial, output_layer=projection),
            maximum_iterations=MAX_LEN + 2,
        )
    with tf.variable_scope("decoder", reuse=True):
        beam_cell, beam_initial = decoder_cell(
            seq2seq.tile_batch(enc_out, BEAM),
            seq2seq.tile_batch(src_len, BEAM),
            seq2seq.tile_batch(enc_state, BEAM),
            BEAM,
        )
        beam = seq2seq.BeamSearchDecoder(
            beam_cell,
            embedding,
            tf.fill([batch], GO),
            EOS,
            beam_initial,
            BEAM,
            output_layer=projection,
            length_penalty_weight=0.2,
        )
        beam_out, _, beam_len = seq2seq.dynamic_decode(beam, maximum_iterations=MAX_LEN + 2)
    return train_out, greedy_out, beam_out, beam_len


def _strip(ids):
    out = []
    for i in ids:
        if i == EOS:
            break
        out.append(int(i))
    return out


def test_attention_copy_task_trains_and_decodes():
    tf.set_random_seed(0)
    src_v, src_len_v, tgt_in_v, tgt_out_v, tgt_len_v = _dataset()
    src = tf.placeholder(tf.int32, [None, None])
    src_len = tf.placeholder(tf.int32, [None])
    tgt_in = tf.placeholder(tf.int32, [None, None])
    tgt_out = tf.placeholder(tf.int32, [None, None])
    tgt_len = tf.placeholder(tf.int32, [None])
    train_out, greedy_out, beam_out, beam_len = _model(src, src_len, tgt_in, tgt_len)
    logits = train_out.rnn_output
    mask = tf.sequence_mask(tgt_len, tf.shape(logits)[1], dtype=tf.float32)
    loss = seq2seq.sequence_loss(logits, tgt_out[:, : tf.shape(logits)[1]], mask)
    train = tf.train.AdamOptimizer(0.02).minimize(loss)
    feed = {
        src: src_v,
        src_len: src_len_v,
        tgt_in: tgt_in_v,
        tgt_out: tgt_out_v,
        tgt_len: tgt_len_v,
    }
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        first = sess.run(loss, feed)
        for _ in range(150):
            last, _ = sess.run([loss, train], feed)
        greedy, beam, lengths = sess.run(
            [greedy_out.sample_id, beam_out.predicted_ids, beam_len],
            {src: src_v, src_len: src_len_v},
        )
    assert last < 0.05 * first, (first, last)
    sources = [list(s[:n]) for s, n in zip(src_v, src_len_v)]
    greedy_ok = np.mean([_strip(g) == s for g, s in zip(greedy, sources)])
    beam_ok = np.mean([_strip(b[:, 0]) == s for b, s in zip(beam, sources)])
    assert greedy_ok >= 0.95 and beam_ok >= 0.95, (greedy_ok, beam_ok)
    # beam 0's length counts its EOS step
    best_len = lengths[:, 0]
    np.testing.assert_array_equal(
        best_len[[_strip(b[:, 0]) == s for b, s in zip(beam, sources)]],
        (src_len_v + 1)[[_strip(b[:, 0]) == s for b, s in zip(beam, sources)]],
    )
