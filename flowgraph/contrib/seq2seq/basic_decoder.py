"""BasicDecoder: one RNN cell step, an optional output layer (the projection to the
vocabulary), then the Helper's sample and next input (TF1's tf.contrib.seq2seq.BasicDecoder)."""

from __future__ import annotations

import collections

from flowgraph.contrib.seq2seq.decoder import Decoder
from flowgraph.contrib.seq2seq.helper import Helper
from flowgraph.core.shapes import TensorShape
from flowgraph.framework import nest
from flowgraph.framework.scopes import name_scope
from flowgraph.layers.base import Layer
from flowgraph.ops import rnn_cell

__all__ = ["BasicDecoder", "BasicDecoderOutput"]


class BasicDecoderOutput(collections.namedtuple("BasicDecoderOutput", ("rnn_output", "sample_id"))):
    """One step's (or, stacked, every step's) cell outputs and sample ids."""

    __slots__ = ()


def output_size_after_layer(cell, output_layer):
    """The cell's output_size, passed through `output_layer.compute_output_shape` if given."""
    size = cell.output_size
    if output_layer is None:
        return size
    with_batch = nest.map_structure(lambda s: TensorShape([None]).concatenate(s), size)
    layer_shape = output_layer.compute_output_shape(with_batch)
    return nest.map_structure(lambda s: s[1:], layer_shape)


def check_cell_and_layer(cell, output_layer):
    rnn_cell.assert_like_rnncell("cell", cell)
    if output_layer is not None and not isinstance(output_layer, Layer):
        raise TypeError(f"output_layer must be a Layer, received: {type(output_layer)}")


class BasicDecoder(Decoder):
    """Decodes with `cell` from `initial_state`, the helper choosing samples and inputs.

    Example:
        helper = tf.contrib.seq2seq.GreedyEmbeddingHelper(embedding, start_tokens, end_token)
        decoder = tf.contrib.seq2seq.BasicDecoder(cell, helper, encoder_state,
                                                  output_layer=tf.layers.Dense(vocab_size))
        outputs, _, lengths = tf.contrib.seq2seq.dynamic_decode(decoder, maximum_iterations=20)
    """

    def __init__(self, cell, helper, initial_state, output_layer=None):
        check_cell_and_layer(cell, output_layer)
        if not isinstance(helper, Helper):
            raise TypeError(f"helper must be a Helper, received: {type(helper)}")
        self._cell = cell
        self._helper = helper
        self._initial_state = initial_state
        self._output_layer = output_layer

    @property
    def batch_size(self):
        return self._helper.batch_size

    @property
    def output_size(self):
        return BasicDecoderOutput(
            rnn_output=output_size_after_layer(self._cell, self._output_layer),
            sample_id=self._helper.sample_ids_shape,
        )

    @property
    def output_dtype(self):
        dtype = nest.flatten(self._initial_state)[0].dtype
        rnn_size = output_size_after_layer(self._cell, self._output_layer)
        return BasicDecoderOutput(
            nest.map_structure(lambda _: dtype, rnn_size), self._helper.sample_ids_dtype
        )

    def initialize(self, name=None):
        return tuple(self._helper.initialize()) + (self._initial_state,)

    def step(self, time, inputs, state, name=None):
        with name_scope(name, "BasicDecoderStep", (time, inputs)):
            cell_outputs, cell_state = self._cell(inputs, state)
            if self._output_layer is not None:
                cell_outputs = self._output_layer(cell_outputs)
            sample_ids = self._helper.sample(time=time, outputs=cell_outputs, state=cell_state)
            finished, next_inputs, next_state = self._helper.next_inputs(
                time=time, outputs=cell_outputs, state=cell_state, sample_ids=sample_ids
            )
        outputs = BasicDecoderOutput(cell_outputs, sample_ids)
        return outputs, next_state, next_inputs, finished
