"""Helpers: how a BasicDecoder picks each step's sample and its next input (TF1's
tf.contrib.seq2seq helpers).

A Helper answers three questions for the decode loop (decoder.dynamic_decode):
* `initialize()` -> (finished [batch] bool, first inputs);
* `sample(time, outputs, state)` -> sample ids [batch] from the cell's outputs;
* `next_inputs(time, outputs, state, sample_ids)` -> (finished, next inputs, next state).

Training reads the ground-truth inputs (teacher forcing, `TrainingHelper`), optionally
replacing some of them with samples of the model's own outputs (scheduled sampling); inference
feeds back the embedding of the argmax (`GreedyEmbeddingHelper`) or of a sample
(`SampleEmbeddingHelper`) until every sequence has emitted `end_token`. Once every example is
finished, the helpers hand back zeros (or the start inputs) instead of reading past the end.
"""

from __future__ import annotations

import abc

from flowgraph.core import dtypes
from flowgraph.core.shapes import TensorShape
from flowgraph.framework import nest
from flowgraph.framework.convert import convert_to_tensor
from flowgraph.framework.operation import Tensor
from flowgraph.framework.scopes import name_scope
from flowgraph.ops import array as array_ops
from flowgraph.ops import array_index
from flowgraph.ops import embedding as embedding_ops
from flowgraph.ops import math as math_ops
from flowgraph.ops import random as random_ops
from flowgraph.ops import reduction as reduction_ops
from flowgraph.ops.control_flow.cond import cond
from flowgraph.ops.dynamic_rnn import _transpose_batch_time
from flowgraph.ops.tensor_array import TensorArray

__all__ = [
    "CustomHelper",
    "GreedyEmbeddingHelper",
    "Helper",
    "InferenceHelper",
    "SampleEmbeddingHelper",
    "ScheduledEmbeddingTrainingHelper",
    "ScheduledOutputTrainingHelper",
    "TrainingHelper",
]


def _unstack_ta(inp):
    """A time-major tensor as a TensorArray of its time steps."""
    return TensorArray(
        dtype=inp.dtype, size=array_ops.shape(inp)[0], element_shape=inp.get_shape()[1:]
    ).unstack(inp)


def _embedding_fn(embedding):
    """`embedding` itself when callable (ids -> vectors), else a lookup into that matrix."""
    if callable(embedding):
        return embedding
    return lambda ids: embedding_ops.embedding_lookup(embedding, ids)


class Helper(abc.ABC):
    """The interface BasicDecoder drives (see the module docstring)."""

    @property
    @abc.abstractmethod
    def batch_size(self):
        """Batch size of the tensors `sample` returns (an int or a scalar int32 tensor)."""

    @property
    @abc.abstractmethod
    def sample_ids_shape(self):
        """Shape of one example's sample id (a TensorShape, [] for one id per step)."""

    @property
    @abc.abstractmethod
    def sample_ids_dtype(self):
        """DType of the sample ids."""

    @abc.abstractmethod
    def initialize(self, name=None):
        """(initial finished, initial inputs)."""

    @abc.abstractmethod
    def sample(self, time, outputs, state, name=None):
        """The sample ids of this step."""

    @abc.abstractmethod
    def next_inputs(self, time, outputs, state, sample_ids, name=None):
        """(finished, next inputs, next state)."""


class CustomHelper(Helper):
    """A Helper made of three user functions: initialize_fn() -> (finished, inputs),
    sample_fn(time, outputs, state) -> ids, next_inputs_fn(time, outputs, state, sample_ids)
    -> (finished, next inputs, next state)."""

    def __init__(
        self, initialize_fn, sample_fn, next_inputs_fn, sample_ids_shape=None, sample_ids_dtype=None
    ):
        for arg, fn in (
            ("initialize_fn", initialize_fn),
            ("sample_fn", sample_fn),
            ("next_inputs_fn", next_inputs_fn),
        ):
            if not callable(fn):
                raise TypeError(f"{arg} must be callable, saw type: {type(fn).__name__}")
        self._initialize_fn = initialize_fn
        self._sample_fn = sample_fn
        self._next_inputs_fn = next_inputs_fn
        self._batch_size = None
        self._sample_ids_shape = TensorShape(sample_ids_shape or [])
        self._sample_ids_dtype = dtypes.as_dtype(sample_ids_dtype or dtypes.int32)

    @property
    def batch_size(self):
        if self._batch_size is None:
            raise ValueError("batch_size accessed before initialize was called")
        return self._batch_size

    @property
    def sample_ids_shape(self):
        return self._sample_ids_shape

    @property
    def sample_ids_dtype(self):
        return self._sample_ids_dtype

    def initialize(self, name=None):
        with name_scope(name, f"{type(self).__name__}Initialize"):
            finished, next_inputs = self._initialize_fn()
            if self._batch_size is None:
                self._batch_size = array_ops.size(finished)
        return finished, next_inputs

    def sample(self, time, outputs, state, name=None):
        with name_scope(name, f"{type(self).__name__}Sample", (time, outputs)):
            return self._sample_fn(time=time, outputs=outputs, state=state)

    def next_inputs(self, time, outputs, state, sample_ids, name=None):
        with name_scope(name, f"{type(self).__name__}NextInputs", (time, outputs)):
            return self._next_inputs_fn(
                time=time, outputs=outputs, state=state, sample_ids=sample_ids
            )


class TrainingHelper(Helper):
    """Teacher forcing: step t's input is `inputs[:, t]` (`inputs[t]` with `time_major`);
    example b is finished once t + 1 >= sequence_length[b]. Samples are the argmax ids."""

    def __init__(self, inputs, sequence_length, time_major=False, name=None):
        values = nest.flatten(inputs) + [sequence_length]
        with name_scope(name, "TrainingHelper", values):
            inputs = nest.map_structure(lambda x: convert_to_tensor(x, name="inputs"), inputs)
            self._inputs = inputs
            if not time_major:
                inputs = nest.map_structure(_transpose_batch_time, inputs)
            self._input_tas = nest.map_structure(_unstack_ta, inputs)
            self._sequence_length = convert_to_tensor(sequence_length, name="sequence_length")
            if self._sequence_length.get_shape().ndims != 1:
                raise ValueError(
                    "Expected sequence_length to be a vector, but received shape: "
                    f"{self._sequence_length.get_shape()}"
                )
            self._zero_inputs = nest.map_structure(
                lambda inp: array_ops.zeros_like(inp[0, :]), inputs
            )
            self._batch_size = array_ops.size(sequence_length)

    @property
    def inputs(self):
        return self._inputs

    @property
    def sequence_length(self):
        return self._sequence_length

    @property
    def batch_size(self):
        return self._batch_size

    @property
    def sample_ids_shape(self):
        return TensorShape([])

    @property
    def sample_ids_dtype(self):
        return dtypes.int32

    def _read_or_zeros(self, all_finished, index):
        return cond(
            all_finished,
            lambda: self._zero_inputs,
            lambda: nest.map_structure(lambda ta: ta.read(index), self._input_tas),
        )

    def initialize(self, name=None):
        with name_scope(name, "TrainingHelperInitialize"):
            finished = math_ops.equal(0, self._sequence_length)
            return finished, self._read_or_zeros(reduction_ops.reduce_all(finished), 0)

    def sample(self, time, outputs, name=None, **unused_kwargs):
        with name_scope(name, "TrainingHelperSample", [time, outputs]):
            return reduction_ops.argmax(outputs, axis=-1, output_type=dtypes.int32)

    def next_inputs(self, time, outputs, state, name=None, **unused_kwargs):
        with name_scope(name, "TrainingHelperNextInputs", [time, outputs]):
            next_time = time + 1
            finished = next_time >= self._sequence_length
            next_inputs = self._read_or_zeros(reduction_ops.reduce_all(finished), next_time)
            return finished, next_inputs, state


def _check_sampling_probability(p):
    p = convert_to_tensor(p, name="sampling_probability")
    if p.get_shape().ndims not in (0, 1):
        raise ValueError(
            f"sampling_probability must be either a scalar or a vector. saw shape: {p.get_shape()}"
        )
    return p


def _bernoulli(probability, batch_size, seed):
    """[batch] bools, each True with `probability` (a scalar, or one per example)."""
    uniform = random_ops.random_uniform(
        array_ops.reshape(batch_size, [1]), dtype=probability.dtype, seed=seed
    )
    return uniform < probability


def _merge_rows(choose_a, a, b):
    """Row b of the result is a[b] where choose_a[b], else b[b]; `a` is only computed for the
    chosen rows (gather/scatter, as TF1 does, so an embedding lookup sees only real ids)."""
    rows_a = math_ops.cast(math_ops.where(choose_a), dtypes.int32)
    rows_b = math_ops.cast(math_ops.where(math_ops.logical_not(choose_a)), dtypes.int32)
    shape = array_ops.shape(b)
    return array_index.scatter_nd(rows_a, a(rows_a), shape) + array_index.scatter_nd(
        rows_b, array_index.gather_nd(b, rows_b), shape
    )


class ScheduledEmbeddingTrainingHelper(TrainingHelper):
    """TrainingHelper with scheduled sampling (Bengio et al. 2015): with probability
    `sampling_probability`, an example's next input is the embedding of an id sampled from
    its outputs (as logits) instead of the ground truth. Sample ids are -1 where not sampled."""

    def __init__(
        self,
        inputs,
        sequence_length,
        embedding,
        sampling_probability,
        time_major=False,
        seed=None,
        scheduling_seed=None,
        name=None,
    ):
        with name_scope(name, "ScheduledEmbeddingSamplingWrapper", [embedding]):
            self._embedding_fn = _embedding_fn(embedding)
            self._sampling_probability = _check_sampling_probability(sampling_probability)
            self._seed = seed
            self._scheduling_seed = scheduling_seed
            super().__init__(inputs, sequence_length, time_major=time_major, name=name)

    def sample(self, time, outputs, state, name=None):
        with name_scope(name, "ScheduledEmbeddingTrainingHelperSample", [time, outputs]):
            select = _bernoulli(self._sampling_probability, self.batch_size, self._scheduling_seed)
            ids = random_ops.multinomial(outputs, 1, seed=self._seed, output_dtype=dtypes.int32)
            ids = array_ops.reshape(ids, [-1])
            return math_ops.where(select, ids, array_ops.fill([self.batch_size], -1))

    def next_inputs(self, time, outputs, state, sample_ids, name=None):
        with name_scope(name, "ScheduledEmbeddingTrainingHelperNextInputs", [time, outputs]):
            finished, base_next_inputs, state = super().next_inputs(time, outputs, state)

            def maybe_sample():
                return _merge_rows(
                    sample_ids > -1,
                    lambda rows: self._embedding_fn(array_index.gather_nd(sample_ids, rows)),
                    base_next_inputs,
                )

            all_finished = reduction_ops.reduce_all(finished)
            next_inputs = cond(all_finished, lambda: base_next_inputs, maybe_sample)
            return finished, next_inputs, state


class ScheduledOutputTrainingHelper(TrainingHelper):
    """TrainingHelper that, with probability `sampling_probability`, feeds an example's own
    outputs (through `next_inputs_fn`, and concatenated with `auxiliary_inputs` if given)
    instead of the ground truth. Sample ids are bools: True where the output was fed back."""

    def __init__(
        self,
        inputs,
        sequence_length,
        sampling_probability,
        time_major=False,
        seed=None,
        next_inputs_fn=None,
        auxiliary_inputs=None,
        name=None,
    ):
        with name_scope(name, "ScheduledOutputTrainingHelper", [inputs, auxiliary_inputs]):
            self._sampling_probability = _check_sampling_probability(sampling_probability)
            if auxiliary_inputs is None:
                maybe_concatenated = inputs
            else:
                inputs = convert_to_tensor(inputs, name="inputs")
                auxiliary_inputs = convert_to_tensor(auxiliary_inputs, name="auxiliary_inputs")
                maybe_concatenated = array_ops.concat([inputs, auxiliary_inputs], -1)
                if not time_major:
                    auxiliary_inputs = _transpose_batch_time(auxiliary_inputs)
            self._auxiliary_input_tas = (
                None if auxiliary_inputs is None else _unstack_ta(auxiliary_inputs)
            )
            self._seed = seed
            self._next_inputs_fn = next_inputs_fn
            super().__init__(maybe_concatenated, sequence_length, time_major=time_major, name=name)

    @property
    def sample_ids_shape(self):
        return TensorShape([])

    @property
    def sample_ids_dtype(self):
        return dtypes.bool_

    def sample(self, time, outputs, state, name=None):
        with name_scope(name, "ScheduledOutputTrainingHelperSample", [time, outputs]):
            return _bernoulli(self._sampling_probability, self.batch_size, self._seed)

    def next_inputs(self, time, outputs, state, sample_ids, name=None):
        with name_scope(name, "ScheduledOutputTrainingHelperNextInputs", [time, outputs]):
            finished, base_next_inputs, state = super().next_inputs(time, outputs, state)
            sample_ids = math_ops.cast(sample_ids, dtypes.bool_)

            def sampled(rows):
                out = array_index.gather_nd(outputs, rows)
                if self._next_inputs_fn is not None:
                    out = self._next_inputs_fn(out)
                if self._auxiliary_input_tas is None:
                    return out
                aux = array_index.gather_nd(self._auxiliary_input_tas.read(time + 1), rows)
                return array_ops.concat([out, aux], -1)

            def maybe_sample():
                return _merge_rows(sample_ids, sampled, base_next_inputs)

            all_finished = reduction_ops.reduce_all(finished)
            no_samples = math_ops.logical_not(reduction_ops.reduce_any(sample_ids))
            next_inputs = cond(
                math_ops.logical_or(all_finished, no_samples),
                lambda: base_next_inputs,
                maybe_sample,
            )
            return finished, next_inputs, state


class GreedyEmbeddingHelper(Helper):
    """Inference: the next input is the embedding of the argmax of the outputs; an example is
    finished when its argmax is `end_token`."""

    def __init__(self, embedding, start_tokens, end_token):
        self._embedding_fn = _embedding_fn(embedding)
        self._start_tokens = convert_to_tensor(
            start_tokens, dtype=dtypes.int32, name="start_tokens"
        )
        self._end_token = convert_to_tensor(end_token, dtype=dtypes.int32, name="end_token")
        if self._start_tokens.get_shape().ndims != 1:
            raise ValueError("start_tokens must be a vector")
        self._batch_size = array_ops.size(start_tokens)
        if self._end_token.get_shape().ndims != 0:
            raise ValueError("end_token must be a scalar")
        self._start_inputs = self._embedding_fn(self._start_tokens)

    @property
    def batch_size(self):
        return self._batch_size

    @property
    def sample_ids_shape(self):
        return TensorShape([])

    @property
    def sample_ids_dtype(self):
        return dtypes.int32

    def initialize(self, name=None):
        with name_scope(name, "GreedyEmbeddingHelperInitialize"):
            finished = array_ops.tile([False], [self._batch_size])
        return finished, self._start_inputs

    def sample(self, time, outputs, state, name=None):
        if not isinstance(outputs, Tensor):
            raise TypeError(f"Expected outputs to be a single Tensor, got: {type(outputs)}")
        with name_scope(name, "GreedyEmbeddingHelperSample", [outputs]):
            return reduction_ops.argmax(outputs, axis=-1, output_type=dtypes.int32)

    def next_inputs(self, time, outputs, state, sample_ids, name=None):
        with name_scope(name, "GreedyEmbeddingHelperNextInputs", [sample_ids]):
            finished = math_ops.equal(sample_ids, self._end_token)
            all_finished = reduction_ops.reduce_all(finished)
            next_inputs = cond(
                all_finished, lambda: self._start_inputs, lambda: self._embedding_fn(sample_ids)
            )
        return finished, next_inputs, state


class SampleEmbeddingHelper(GreedyEmbeddingHelper):
    """GreedyEmbeddingHelper that samples the next id from softmax(outputs / temperature)
    instead of taking the argmax."""

    def __init__(self, embedding, start_tokens, end_token, softmax_temperature=None, seed=None):
        super().__init__(embedding, start_tokens, end_token)
        self._softmax_temperature = softmax_temperature
        self._seed = seed

    def sample(self, time, outputs, state, name=None):
        if not isinstance(outputs, Tensor):
            raise TypeError(f"Expected outputs to be a single Tensor, got: {type(outputs)}")
        with name_scope(name, "SampleEmbeddingHelperSample", [outputs]):
            logits = outputs
            if self._softmax_temperature is not None:
                logits = outputs / self._softmax_temperature
            ids = random_ops.multinomial(logits, 1, seed=self._seed, output_dtype=dtypes.int32)
            return array_ops.reshape(ids, [-1])


class InferenceHelper(Helper):
    """Inference without embeddings: `sample_fn(outputs)` gives the ids, `end_fn(ids)` the
    finished flags and `next_inputs_fn(outputs)` (default: the outputs) the next inputs."""

    def __init__(
        self, sample_fn, sample_shape, sample_dtype, start_inputs, end_fn, next_inputs_fn=None
    ):
        self._sample_fn = sample_fn
        self._end_fn = end_fn
        self._sample_shape = TensorShape(sample_shape)
        self._sample_dtype = dtypes.as_dtype(sample_dtype)
        self._next_inputs_fn = next_inputs_fn
        self._batch_size = array_ops.shape(start_inputs)[0]
        self._start_inputs = convert_to_tensor(start_inputs, name="start_inputs")

    @property
    def batch_size(self):
        return self._batch_size

    @property
    def sample_ids_shape(self):
        return self._sample_shape

    @property
    def sample_ids_dtype(self):
        return self._sample_dtype

    def initialize(self, name=None):
        with name_scope(name, "InferenceHelperInitialize"):
            finished = array_ops.tile([False], [self._batch_size])
        return finished, self._start_inputs

    def sample(self, time, outputs, state, name=None):
        with name_scope(name, "InferenceHelperSample", [outputs]):
            return self._sample_fn(outputs)

    def next_inputs(self, time, outputs, state, sample_ids, name=None):
        with name_scope(name, "InferenceHelperNextInputs", [outputs]):
            next_inputs = outputs
            if self._next_inputs_fn is not None:
                next_inputs = self._next_inputs_fn(outputs)
            return self._end_fn(sample_ids), next_inputs, state
