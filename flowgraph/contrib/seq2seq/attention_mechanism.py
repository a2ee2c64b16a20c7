"""Attention mechanisms: how a decoder query scores each memory (encoder) step (TF1's
tf.contrib.seq2seq attention classes).

A mechanism holds the memory [batch, max_time, depth] (`values`, zeroed past
`memory_sequence_length`) and its projection `keys` (through `memory_layer`). Called with a
query [batch, query_depth] and the previous alignments, it returns the new alignments
[batch, max_time]: `probability_fn(score)`, with scores past each memory's length replaced by
`score_mask_value` (-inf by default, so softmax gives them zero weight).

* Luong (multiplicative): score = query · key, times a learnt scalar `attention_g` if `scale`.
* Bahdanau (additive): score = v · tanh(key + W query); with `normalize`, v is weight-normalized
  (g v / |v|) and a bias is added inside the tanh.
* The monotonic variants (Raffel et al. 2017) turn sigmoid(score + bias) into "choose this step"
  probabilities and alignments that only move forward in time (`monotonic_attention`).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from flowgraph.contrib.seq2seq.decoder import zero_state_tensors
from flowgraph.core import dtypes
from flowgraph.framework import default_graph, nest
from flowgraph.framework.convert import convert_to_tensor
from flowgraph.framework.scopes import name_scope
from flowgraph.layers.base import Layer
from flowgraph.layers.core import Dense
from flowgraph.ops import array as array_ops
from flowgraph.ops import array_index, init_ops
from flowgraph.ops import clip as clip_ops
from flowgraph.ops import linalg as linalg_ops
from flowgraph.ops import logging as logging_ops
from flowgraph.ops import math as math_ops
from flowgraph.ops import nn as nn_ops
from flowgraph.ops import random as random_ops
from flowgraph.ops import reduction as reduction_ops
from flowgraph.ops import variable_scope as vs
from flowgraph.ops.control_flow.functional import scan

__all__ = [
    "AttentionMechanism",
    "BahdanauAttention",
    "BahdanauMonotonicAttention",
    "LuongAttention",
    "LuongMonotonicAttention",
    "hardmax",
    "monotonic_attention",
    "safe_cumprod",
]


class AttentionMechanism:
    """Base class of the attention mechanisms AttentionWrapper accepts."""

    @property
    def alignments_size(self):
        raise NotImplementedError

    @property
    def state_size(self):
        raise NotImplementedError


def _static_or_dynamic(t, axis):
    """Dimension `axis` of `t`: an int when known statically, else a scalar tensor."""
    return t.get_shape()[axis].value or array_ops.shape(t)[axis]


def assert_equal_sizes(a, b, message):
    """An Assert op that two (int or tensor) sizes agree, or None when both are known equal."""
    if isinstance(a, int) and isinstance(b, int):
        if a != b:
            raise ValueError(f"{message} ({a} vs {b})")
        return None
    return logging_ops.Assert(math_ops.equal(a, b), [message, a, b])


def _prepare_memory(memory, memory_sequence_length, check_inner_dims_defined):
    """The memory as tensors, with the steps past each example's length zeroed."""
    memory = nest.map_structure(lambda m: convert_to_tensor(m, name="memory"), memory)
    if check_inner_dims_defined:
        for m in nest.flatten(memory):
            if not m.get_shape()[2:].is_fully_defined():
                raise ValueError(
                    f"Expected memory {m.name} to have fully defined inner dims, but saw shape: "
                    f"{m.get_shape()}"
                )
    if memory_sequence_length is None:
        return memory
    first = nest.flatten(memory)[0]
    mask = array_index.sequence_mask(
        memory_sequence_length, maxlen=array_ops.shape(first)[1], dtype=first.dtype
    )
    seq_batch = _static_or_dynamic(memory_sequence_length, 0)

    def maybe_mask(m):
        rank = m.get_shape().ndims
        extra_ones = array_ops.ones([rank - 2], dtype=dtypes.int32)
        check = assert_equal_sizes(
            seq_batch,
            _static_or_dynamic(m, 0),
            "memory_sequence_length and memory tensor batch sizes do not match.",
        )
        with default_graph.get().control_dependencies([check] if check is not None else []):
            shaped = array_ops.reshape(
                mask, array_ops.concat([array_ops.shape(mask), extra_ones], 0)
            )
            return m * shaped

    return nest.map_structure(maybe_mask, memory)


def _maybe_mask_score(score, memory_sequence_length, score_mask_value):
    """`score` with the entries past each memory's length set to `score_mask_value`."""
    if memory_sequence_length is None:
        return score
    check = logging_ops.Assert(
        reduction_ops.reduce_all(memory_sequence_length > 0),
        ["All values in memory_sequence_length must greater than zero."],
    )
    with default_graph.get().control_dependencies([check]):
        score_mask = array_index.sequence_mask(
            memory_sequence_length, maxlen=array_ops.shape(score)[1]
        )
        score_mask_values = score_mask_value * array_ops.ones_like(score)
        return math_ops.where(score_mask, score, score_mask_values)


class _BaseAttentionMechanism(AttentionMechanism):
    """Keys, values and masking shared by every mechanism (see the module docstring)."""

    def __init__(
        self,
        query_layer,
        memory,
        probability_fn,
        memory_sequence_length=None,
        memory_layer=None,
        check_inner_dims_defined=True,
        score_mask_value=None,
        custom_key_value_fn=None,
        name=None,
    ):
        for what, layer in (("query_layer", query_layer), ("memory_layer", memory_layer)):
            if layer is not None and not isinstance(layer, Layer):
                raise TypeError(f"{what} is not a Layer: {type(layer).__name__}")
        if not callable(probability_fn):
            raise TypeError(
                f"probability_fn must be callable, saw type: {type(probability_fn).__name__}"
            )
        self._query_layer = query_layer
        self._memory_layer = memory_layer
        self.dtype = memory_layer.dtype
        if score_mask_value is None:
            score_mask_value = dtypes.as_dtype(self.dtype).as_numpy_dtype(-np.inf)
        if memory_sequence_length is not None:
            memory_sequence_length = convert_to_tensor(
                memory_sequence_length, name="memory_sequence_length"
            )
        self._probability_fn = lambda score, prev: probability_fn(
            _maybe_mask_score(score, memory_sequence_length, score_mask_value), prev
        )
        with name_scope(name, "BaseAttentionMechanismInit", nest.flatten(memory)):
            self._values = _prepare_memory(memory, memory_sequence_length, check_inner_dims_defined)
            self._keys = self.memory_layer(self._values) if self.memory_layer else self._values
            if custom_key_value_fn is not None:
                self._keys, self._values = custom_key_value_fn(self._keys, self._values)
            self._batch_size = _static_or_dynamic(self._keys, 0)
            self._alignments_size = _static_or_dynamic(self._keys, 1)

    @property
    def memory_layer(self):
        return self._memory_layer

    @property
    def query_layer(self):
        return self._query_layer

    @property
    def values(self):
        return self._values

    @property
    def keys(self):
        return self._keys

    @property
    def batch_size(self):
        return self._batch_size

    @property
    def alignments_size(self):
        return self._alignments_size

    @property
    def state_size(self):
        return self._alignments_size

    def initial_alignments(self, batch_size, dtype):
        """All-zero alignments [batch_size, max_time]."""
        return zero_state_tensors(self._alignments_size, batch_size, dtype)

    def initial_state(self, batch_size, dtype):
        return self.initial_alignments(batch_size, dtype)


def _luong_score(query, keys, scale):
    """query · key for every memory step: [batch, max_time]."""
    depth = query.get_shape()[-1].value
    key_units = keys.get_shape()[-1].value
    if depth != key_units:
        raise ValueError(
            "Incompatible or unknown inner dimensions between query and keys.  Query "
            f"({query.name}) has units: {depth}.  Keys ({keys.name}) have units: {key_units}.  "
            f"Perhaps you need to set num_units to the keys' dimension ({key_units})?"
        )
    score = linalg_ops.matmul(array_ops.expand_dims(query, 1), keys, transpose_b=True)
    score = array_ops.squeeze(score, [1])
    if scale:
        g = vs.get_variable(
            "attention_g", dtype=query.dtype, initializer=init_ops.ones_initializer(), shape=()
        )
        score = g * score
    return score


def _bahdanau_score(processed_query, keys, normalize):
    """v · tanh(keys + processed query (+ b)) for every memory step: [batch, max_time]."""
    dtype = processed_query.dtype
    num_units = keys.get_shape()[2].value
    if num_units is None:
        raise ValueError(f"The depth of the keys must be known statically, saw {keys.get_shape()}")
    processed_query = array_ops.expand_dims(processed_query, 1)
    v = vs.get_variable("attention_v", [num_units], dtype=dtype)
    if not normalize:
        return reduction_ops.reduce_sum(v * math_ops.tanh(keys + processed_query), [2])
    g = vs.get_variable(
        "attention_g",
        dtype=dtype,
        initializer=init_ops.constant_initializer(math.sqrt(1.0 / num_units)),
        shape=(),
    )
    b = vs.get_variable(
        "attention_b", [num_units], dtype=dtype, initializer=init_ops.zeros_initializer()
    )
    normed_v = g * v * math_ops.rsqrt(reduction_ops.reduce_sum(math_ops.square(v)))
    return reduction_ops.reduce_sum(normed_v * math_ops.tanh(keys + processed_query + b), [2])


def _check_probability_fn(probability_fn):
    """softmax by default; anything else must be callable (score -> probabilities)."""
    if probability_fn is None:
        return nn_ops.softmax
    if not callable(probability_fn):
        raise TypeError(
            f"probability_fn must be callable, saw type: {type(probability_fn).__name__}"
        )
    return probability_fn


def _memory_dense(num_units, dtype, name="memory_layer"):
    return Dense(num_units, name=name, use_bias=False, dtype=dtype)


class LuongAttention(_BaseAttentionMechanism):
    """Multiplicative attention (Luong et al. 2015): score = query · (W memory).

    Example:
        attention = tf.contrib.seq2seq.LuongAttention(64, encoder_outputs,
                                                      memory_sequence_length=source_lengths)
    """

    def __init__(
        self,
        num_units,
        memory,
        memory_sequence_length=None,
        scale=False,
        probability_fn=None,
        score_mask_value=None,
        dtype=None,
        custom_key_value_fn=None,
        name="LuongAttention",
    ):
        probability_fn = _check_probability_fn(probability_fn)
        dtype = dtypes.float32 if dtype is None else dtype
        super().__init__(
            query_layer=None,
            memory_layer=_memory_dense(num_units, dtype),
            memory=memory,
            probability_fn=lambda score, _: probability_fn(score),
            memory_sequence_length=memory_sequence_length,
            score_mask_value=score_mask_value,
            custom_key_value_fn=custom_key_value_fn,
            name=name,
        )
        self._num_units = num_units
        self._scale = scale
        self._name = name

    def __call__(self, query, state):
        with vs.variable_scope(None, default_name="luong_attention"):
            score = _luong_score(query, self._keys, self._scale)
        alignments = self._probability_fn(score, state)
        return alignments, alignments


class BahdanauAttention(_BaseAttentionMechanism):
    """Additive attention (Bahdanau et al. 2015): score = v · tanh(W1 memory + W2 query).

    Example:
        attention = tf.contrib.seq2seq.BahdanauAttention(64, encoder_outputs, normalize=True)
    """

    def __init__(
        self,
        num_units,
        memory,
        memory_sequence_length=None,
        normalize=False,
        probability_fn=None,
        score_mask_value=None,
        dtype=None,
        custom_key_value_fn=None,
        name="BahdanauAttention",
    ):
        probability_fn = _check_probability_fn(probability_fn)
        dtype = dtypes.float32 if dtype is None else dtype
        super().__init__(
            query_layer=_memory_dense(num_units, dtype, name="query_layer"),
            memory_layer=_memory_dense(num_units, dtype),
            memory=memory,
            probability_fn=lambda score, _: probability_fn(score),
            memory_sequence_length=memory_sequence_length,
            score_mask_value=score_mask_value,
            custom_key_value_fn=custom_key_value_fn,
            name=name,
        )
        self._num_units = num_units
        self._normalize = normalize
        self._name = name

    def __call__(self, query, state):
        with vs.variable_scope(None, default_name="bahdanau_attention"):
            processed_query = self.query_layer(query) if self.query_layer else query
            score = _bahdanau_score(processed_query, self._keys, self._normalize)
        alignments = self._probability_fn(score, state)
        return alignments, alignments


def hardmax(logits, name=None):
    """One-hot of the argmax along the last axis, in the dtype of `logits` (ties: first)."""
    with name_scope(name, "Hardmax", [logits]):
        logits = convert_to_tensor(logits, name="logits")
        depth = _static_or_dynamic(logits, -1)
        return array_index.one_hot(reduction_ops.argmax(logits, -1), depth, dtype=logits.dtype)


def safe_cumprod(x, *args, **kwargs):
    """cumprod computed as exp(cumsum(log x)) with x clipped to [tiny, 1]: no underflow to 0
    for long products of probabilities. Extra arguments go to cumsum (axis, exclusive)."""
    with name_scope(None, "SafeCumprod", [x]):
        x = convert_to_tensor(x, name="x")
        tiny = np.finfo(x.dtype.as_numpy_dtype).tiny
        clipped = clip_ops.clip_by_value(x, tiny, 1)
        return math_ops.exp(reduction_ops.cumsum(math_ops.log(clipped), *args, **kwargs))


def monotonic_attention(p_choose_i, previous_attention, mode):
    """Expected monotonic alignments [batch, max_time] from the probabilities of choosing
    each memory step and the previous alignments.

    mode: "recursive" (a scan over time, exact), "parallel" (closed form with cumprod; can
    be inaccurate when p_choose_i is near 1), or "hard" (p_choose_i and previous_attention
    are 0/1: the first step at or after the previous one with p_choose_i = 1).
    """
    p_choose_i = convert_to_tensor(p_choose_i, name="p_choose_i")
    previous_attention = convert_to_tensor(previous_attention, name="previous_attention")
    if mode == "recursive":
        batch_size = _static_or_dynamic(p_choose_i, 0)
        ones = array_ops.ones(array_ops.stack([batch_size, 1]), dtype=p_choose_i.dtype)
        shifted_1mp = array_ops.concat([ones, 1 - p_choose_i[:, :-1]], 1)
        # q[i] = (1 - p_choose_i[i - 1]) q[i - 1] + previous_attention[i]
        q = scan(
            lambda x, yz: array_ops.reshape(yz[0] * x + yz[1], array_ops.stack([batch_size])),
            [array_ops.transpose(shifted_1mp), array_ops.transpose(previous_attention)],
            array_ops.zeros(array_ops.stack([batch_size]), dtype=p_choose_i.dtype),
        )
        return p_choose_i * array_ops.transpose(q)
    if mode == "parallel":
        cumprod_1mp = safe_cumprod(1 - p_choose_i, axis=1, exclusive=True)
        clipped = clip_ops.clip_by_value(cumprod_1mp, 1e-10, 1.0)
        return p_choose_i * cumprod_1mp * reduction_ops.cumsum(previous_attention / clipped, axis=1)
    if mode == "hard":
        p_choose_i = p_choose_i * reduction_ops.cumsum(previous_attention, axis=1)
        return p_choose_i * reduction_ops.cumprod(1 - p_choose_i, axis=1, exclusive=True)
    raise ValueError("mode must be 'recursive', 'parallel', or 'hard'.")


def _monotonic_probability_fn(score, previous_alignments, sigmoid_noise, mode, seed=None):
    """Alignments from scores: (noisy) sigmoid choosing probabilities, then monotonic_attention."""
    if sigmoid_noise > 0:
        noise = random_ops.random_normal(array_ops.shape(score), dtype=score.dtype, seed=seed)
        score = score + sigmoid_noise * noise
    if mode == "hard":
        p_choose_i = math_ops.cast(score > 0, score.dtype)
    else:
        p_choose_i = math_ops.sigmoid(score)
    return monotonic_attention(p_choose_i, previous_alignments, mode)


class _BaseMonotonicAttentionMechanism(_BaseAttentionMechanism):
    """Monotonic mechanisms start with all attention on the first memory step."""

    def initial_alignments(self, batch_size, dtype):
        zeros = array_ops.zeros(array_ops.reshape(batch_size, [1]), dtype=dtypes.int32)
        return array_index.one_hot(zeros, self._alignments_size, dtype=dtype)

    def _biased_alignments(self, default_name, score_fn, state):
        """`score_fn()` plus the learnt scalar `attention_score_bias`, both under the variable
        scope `default_name`, turned into monotonic alignments (also the next state)."""
        with vs.variable_scope(None, default_name=default_name):
            score = score_fn()
            score_bias = vs.get_variable(
                "attention_score_bias",
                dtype=score.dtype,
                initializer=init_ops.constant_initializer(self._score_bias_init),
                shape=(),
            )
            score = score + score_bias
        alignments = self._probability_fn(score, state)
        return alignments, alignments


def _monotonic_fn(mode, sigmoid_noise, seed):
    """The probability_fn of a monotonic mechanism; `mode` must be one TF knows."""
    if mode not in ("recursive", "parallel", "hard"):
        raise ValueError(f"mode must be 'recursive', 'parallel', or 'hard', saw {mode!r}")
    return functools.partial(
        _monotonic_probability_fn, sigmoid_noise=sigmoid_noise, mode=mode, seed=seed
    )


class BahdanauMonotonicAttention(_BaseMonotonicAttentionMechanism):
    """Bahdanau scores (plus a learnt scalar bias) turned into monotonic alignments."""

    def __init__(
        self,
        num_units,
        memory,
        memory_sequence_length=None,
        normalize=False,
        score_mask_value=None,
        sigmoid_noise=0.0,
        sigmoid_noise_seed=None,
        score_bias_init=0.0,
        mode="parallel",
        dtype=None,
        name="BahdanauMonotonicAttention",
    ):
        probability_fn = _monotonic_fn(mode, sigmoid_noise, sigmoid_noise_seed)
        dtype = dtypes.float32 if dtype is None else dtype
        super().__init__(
            query_layer=_memory_dense(num_units, dtype, name="query_layer"),
            memory_layer=_memory_dense(num_units, dtype),
            memory=memory,
            probability_fn=probability_fn,
            memory_sequence_length=memory_sequence_length,
            score_mask_value=score_mask_value,
            name=name,
        )
        self._num_units = num_units
        self._normalize = normalize
        self._name = name
        self._score_bias_init = score_bias_init

    def __call__(self, query, state):
        def score():
            processed_query = self.query_layer(query) if self.query_layer else query
            return _bahdanau_score(processed_query, self._keys, self._normalize)

        return self._biased_alignments("bahdanau_monotonic_attention", score, state)


class LuongMonotonicAttention(_BaseMonotonicAttentionMechanism):
    """Luong scores (plus a learnt scalar bias) turned into monotonic alignments."""

    def __init__(
        self,
        num_units,
        memory,
        memory_sequence_length=None,
        scale=False,
        score_mask_value=None,
        sigmoid_noise=0.0,
        sigmoid_noise_seed=None,
        score_bias_init=0.0,
        mode="parallel",
        dtype=None,
        name="LuongMonotonicAttention",
    ):
        probability_fn = _monotonic_fn(mode, sigmoid_noise, sigmoid_noise_seed)
        dtype = dtypes.float32 if dtype is None else dtype
        super().__init__(
            query_layer=None,
            memory_layer=_memory_dense(num_units, dtype),
            memory=memory,
            probability_fn=probability_fn,
            memory_sequence_length=memory_sequence_length,
            score_mask_value=score_mask_value,
            name=name,
        )
        self._num_units = num_units
        self._scale = scale
        self._score_bias_init = score_bias_init
        self._name = name

    def __call__(self, query, state):
        def score():
            return _luong_score(query, self._keys, self._scale)

        return self._biased_alignments("luong_monotonic_attention", score, state)
