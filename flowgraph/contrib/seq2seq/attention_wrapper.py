"""AttentionWrapper: an RNN cell that attends over a memory at every step (TF1's
tf.contrib.seq2seq.AttentionWrapper, Luong et al. 2015's "input feeding").

Each step: the cell reads `cell_input_fn(inputs, previous attention)` (by default their
concatenation); its output is the query of every attention mechanism, which returns alignments
over the memory; the context is the alignment-weighted sum of the memory's values; the
attention is `attention_layer([cell_output, context])` (or the bare context without an
attention layer). The wrapper outputs the attention (or, with output_attention=False, the cell
output) and carries an AttentionWrapperState: the cell's state, the attention, the step, the
alignments, each mechanism's state and, optionally, a TensorArray of every step's alignments.
"""

from __future__ import annotations

import collections

from flowgraph.contrib.seq2seq.attention_mechanism import (
    AttentionMechanism,
    assert_equal_sizes,
)
from flowgraph.contrib.seq2seq.decoder import zero_state_tensors
from flowgraph.core import dtypes
from flowgraph.core.shapes import TensorShape
from flowgraph.framework import default_graph, nest
from flowgraph.framework.operation import Tensor
from flowgraph.framework.scopes import name_scope
from flowgraph.layers.core import Dense
from flowgraph.ops import array as array_ops
from flowgraph.ops import linalg as linalg_ops
from flowgraph.ops import rnn_cell
from flowgraph.ops.tensor_array import TensorArray

__all__ = ["AttentionWrapper", "AttentionWrapperState"]


class AttentionWrapperState(
    collections.namedtuple(
        "AttentionWrapperState",
        (
            "cell_state",
            "attention",
            "time",
            "alignments",
            "alignment_history",
            "attention_state",
        ),
    )
):
    """The state AttentionWrapper carries from step to step (see the module docstring)."""

    __slots__ = ()

    def clone(self, **kwargs):
        """A copy with some fields replaced; a replaced tensor keeps the old one's static shape.

        Example: initial = wrapper.zero_state(batch, tf.float32).clone(cell_state=encoder_state)
        """

        def with_same_shape(old, new):
            if isinstance(old, Tensor) and isinstance(new, Tensor):
                new.set_shape(new.get_shape().merge_with(old.get_shape()))
            return new

        return nest.map_structure(with_same_shape, self, self._replace(**kwargs))


def _compute_attention(attention_mechanism, cell_output, attention_state, attention_layer):
    """(attention, alignments, next attention state) of one mechanism for one step."""
    alignments, next_attention_state = attention_mechanism(cell_output, state=attention_state)
    expanded = array_ops.expand_dims(alignments, 1)  # [batch, 1, max_time]
    context = array_ops.squeeze(linalg_ops.matmul(expanded, attention_mechanism.values), [1])
    if attention_layer is not None:
        attention = attention_layer(array_ops.concat([cell_output, context], 1))
    else:
        attention = context
    return attention, alignments, next_attention_state


def _default_cell_input_fn(inputs, attention):
    return array_ops.concat([inputs, attention], -1)


_BEAM_HINT = {
    "init": "Non-matching batch sizes between the memory (encoder output) and "
    "initial_cell_state.  Are you using the BeamSearchDecoder?  You may need to tile your "
    "initial state via the tf.contrib.seq2seq.tile_batch function with argument "
    "multiple=beam_width.",
    "zero_state": "Non-matching batch sizes between the memory (encoder output) and the "
    "requested batch size.  Are you using the BeamSearchDecoder?  If so, make sure your "
    "encoder output has been tiled to beam_width via tf.contrib.seq2seq.tile_batch, and the "
    "batch_size= argument passed to zero_state is batch_size * beam_width.",
    "call": "Non-matching batch sizes between the memory (encoder output) and the query "
    "(decoder output).  Are you using the BeamSearchDecoder?  You may need to tile your memory "
    "input via the tf.contrib.seq2seq.tile_batch function with argument multiple=beam_width.",
}


class AttentionWrapper(rnn_cell.RNNCell):
    """Wraps `cell` with one attention mechanism (or a list of them, concatenated).

    Example:
        attention = tf.contrib.seq2seq.BahdanauAttention(64, encoder_outputs, source_lengths)
        cell = tf.contrib.seq2seq.AttentionWrapper(tf.nn.rnn_cell.LSTMCell(64), attention,
                                                   attention_layer_size=64)
        state = cell.zero_state(batch, tf.float32).clone(cell_state=encoder_state)
    """

    def __init__(
        self,
        cell,
        attention_mechanism,
        attention_layer_size=None,
        alignment_history=False,
        cell_input_fn=None,
        output_attention=True,
        initial_cell_state=None,
        name=None,
        attention_layer=None,
        attention_fn=None,
    ):
        super().__init__(name=name)
        rnn_cell.assert_like_rnncell("cell", cell)
        self._is_multi = isinstance(attention_mechanism, (list, tuple))
        mechanisms = tuple(attention_mechanism) if self._is_multi else (attention_mechanism,)
        for m in mechanisms:
            if not isinstance(m, AttentionMechanism):
                raise TypeError(
                    "attention_mechanism must be an AttentionMechanism or list of multiple "
                    f"AttentionMechanism instances, saw type: {type(m).__name__}"
                )
        if cell_input_fn is None:
            cell_input_fn = _default_cell_input_fn
        elif not callable(cell_input_fn):
            raise TypeError(
                f"cell_input_fn must be callable, saw type: {type(cell_input_fn).__name__}"
            )
        if attention_fn is not None and not callable(attention_fn):
            raise TypeError(f"attention_fn must be callable, saw type: {type(attention_fn)}")
        self._attention_layers, self._attention_layer_size = _attention_layers(
            cell, mechanisms, attention_layer_size, attention_layer
        )
        self._attention_fn = attention_fn or _compute_attention
        self._cell = cell
        self._attention_mechanisms = mechanisms
        self._cell_input_fn = cell_input_fn
        self._output_attention = output_attention
        self._alignment_history = alignment_history
        with name_scope(name, "AttentionWrapperInit"):
            if initial_cell_state is None:
                self._initial_cell_state = None
            else:
                last = nest.flatten(initial_cell_state)[-1]
                batch = last.get_shape()[0].value or array_ops.shape(last)[0]
                checks = self._batch_size_checks(batch, "init")
                with default_graph.get().control_dependencies(checks):
                    self._initial_cell_state = nest.map_structure(
                        lambda s: array_ops.identity(s, name="check_initial_cell_state"),
                        initial_cell_state,
                    )

    def _batch_size_checks(self, batch_size, hint):
        message = f"When using AttentionWrapper {self._base_name}: {_BEAM_HINT[hint]}"
        checks = [
            assert_equal_sizes(batch_size, m.batch_size, message)
            for m in self._attention_mechanisms
        ]
        return [c for c in checks if c is not None]

    def _item_or_tuple(self, seq):
        t = tuple(seq)
        return t if self._is_multi else t[0]

    @property
    def output_size(self):
        return self._attention_layer_size if self._output_attention else self._cell.output_size

    @property
    def state_size(self):
        """Sizes of the AttentionWrapperState fields (alignment_history: () when off)."""
        mechanisms = self._attention_mechanisms
        return AttentionWrapperState(
            cell_state=self._cell.state_size,
            time=TensorShape([]),
            attention=self._attention_layer_size,
            alignments=self._item_or_tuple(a.alignments_size for a in mechanisms),
            attention_state=self._item_or_tuple(a.state_size for a in mechanisms),
            alignment_history=self._item_or_tuple(
                a.alignments_size if self._alignment_history else () for a in mechanisms
            ),
        )

    def zero_state(self, batch_size, dtype):
        """The initial state: `initial_cell_state` (else the cell's zero state), zero attention
        and alignments (the mechanisms' initial ones), and empty alignment histories."""
        with default_graph.get().name_scope(type(self).__name__ + "ZeroState"):
            if self._initial_cell_state is not None:
                cell_state = self._initial_cell_state
            else:
                cell_state = self._cell.zero_state(batch_size, dtype)
            checks = self._batch_size_checks(batch_size, "zero_state")
            with default_graph.get().control_dependencies(checks):
                cell_state = nest.map_structure(
                    lambda s: array_ops.identity(s, name="checked_cell_state"), cell_state
                )
            mechanisms = self._attention_mechanisms
            alignments = [m.initial_alignments(batch_size, dtype) for m in mechanisms]
            return AttentionWrapperState(
                cell_state=cell_state,
                time=array_ops.zeros([], dtype=dtypes.int32),
                attention=zero_state_tensors(self._attention_layer_size, batch_size, dtype),
                alignments=self._item_or_tuple(alignments),
                attention_state=self._item_or_tuple(
                    m.initial_state(batch_size, dtype) for m in mechanisms
                ),
                alignment_history=self._item_or_tuple(
                    TensorArray(dtype, size=0, dynamic_size=True, element_shape=a.get_shape())
                    if self._alignment_history
                    else ()
                    for a in alignments
                ),
            )

    def call(self, inputs, state):
        """One step (see the module docstring); returns (output, next AttentionWrapperState)."""
        if not isinstance(state, AttentionWrapperState):
            raise TypeError(
                "Expected state to be instance of AttentionWrapperState. Received type "
                f"{type(state)} instead."
            )
        cell_inputs = self._cell_input_fn(inputs, state.attention)
        cell_output, next_cell_state = self._cell(cell_inputs, state.cell_state)
        batch = cell_output.get_shape()[0].value or array_ops.shape(cell_output)[0]
        with default_graph.get().control_dependencies(self._batch_size_checks(batch, "call")):
            cell_output = array_ops.identity(cell_output, name="checked_cell_output")
        if self._is_multi:
            previous_states, previous_histories = state.attention_state, state.alignment_history
        else:
            previous_states, previous_histories = [state.attention_state], [state.alignment_history]
        attentions, alignments, attention_states, histories = [], [], [], []
        for i, mechanism in enumerate(self._attention_mechanisms):
            layer = self._attention_layers[i] if self._attention_layers else None
            attention, alignment, next_attention_state = self._attention_fn(
                mechanism, cell_output, previous_states[i], layer
            )
            if self._alignment_history:
                histories.append(previous_histories[i].write(state.time, alignment))
            else:
                histories.append(())
            attentions.append(attention)
            alignments.append(alignment)
            attention_states.append(next_attention_state)
        attention = array_ops.concat(attentions, 1)
        next_state = AttentionWrapperState(
            time=state.time + 1,
            cell_state=next_cell_state,
            attention=attention,
            attention_state=self._item_or_tuple(attention_states),
            alignments=self._item_or_tuple(alignments),
            alignment_history=self._item_or_tuple(histories),
        )
        return (attention if self._output_attention else cell_output), next_state


def _attention_layers(cell, mechanisms, attention_layer_size, attention_layer):
    """(the attention layers or None, the total attention depth) for the wrapper's arguments."""
    if attention_layer_size is not None and attention_layer is not None:
        raise ValueError("Only one of attention_layer_size and attention_layer should be set")
    if attention_layer_size is not None:
        sizes = tuple(
            attention_layer_size
            if isinstance(attention_layer_size, (list, tuple))
            else (attention_layer_size,)
        )
        if len(sizes) != len(mechanisms):
            raise ValueError(
                "If provided, attention_layer_size must contain exactly one integer per "
                f"attention_mechanism, saw: {len(sizes)} vs {len(mechanisms)}"
            )
        layers = tuple(
            Dense(size, name="attention_layer", use_bias=False, dtype=m.dtype)
            for size, m in zip(sizes, mechanisms)
        )
        return layers, sum(sizes)
    if attention_layer is not None:
        layers = tuple(
            attention_layer if isinstance(attention_layer, (list, tuple)) else (attention_layer,)
        )
        if len(layers) != len(mechanisms):
            raise ValueError(
                "If provided, attention_layer must contain exactly one layer per "
                f"attention_mechanism, saw: {len(layers)} vs {len(mechanisms)}"
            )
        total = 0
        for layer, m in zip(layers, mechanisms):
            depth = cell.output_size + m.values.get_shape()[-1].value
            total += layer.compute_output_shape(TensorShape([None, depth]))[-1].value
        return layers, total
    return None, sum(m.values.get_shape()[-1].value for m in mechanisms)
