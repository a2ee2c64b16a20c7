"""tf.nn.rnn_cell: recurrent cells, each one time step `(output, new_state) = cell(inputs, state)`.

Cells are layers (flowgraph.layers.Layer): the first call captures a variable scope named after
the cell ("rnn/basic_lstm_cell") and creates `kernel` and `bias` there; later calls (later time
steps) reuse them. A state is a tensor or a nested tuple of tensors (LSTMStateTuple(c, h));
`state_size` and `output_size` describe it without a batch dimension.
"""

from __future__ import annotations

import collections
import hashlib
import numbers

from flowgraph.core.shapes import TensorShape
from flowgraph.framework import default_graph, nest
from flowgraph.framework.convert import convert_to_tensor
from flowgraph.layers.base import Layer
from flowgraph.ops import array as array_ops
from flowgraph.ops import array_index, init_ops
from flowgraph.ops import clip as clip_ops
from flowgraph.ops import linalg as linalg_ops
from flowgraph.ops import math as math_ops
from flowgraph.ops import nn as nn_ops
from flowgraph.ops import variable_scope as vs

__all__ = [
    "BasicLSTMCell",
    "BasicRNNCell",
    "DropoutWrapper",
    "GRUCell",
    "LSTMCell",
    "LSTMStateTuple",
    "MultiRNNCell",
    "RNNCell",
]


class LSTMStateTuple(collections.namedtuple("LSTMStateTuple", ("c", "h"))):
    """An LSTM state: the memory cell `c` and the output `h`."""

    __slots__ = ()

    @property
    def dtype(self):
        c, h = self
        if c.dtype != h.dtype:
            raise TypeError(f"Inconsistent internal state: {c.dtype} vs {h.dtype}")
        return c.dtype


def _concat_dims(prefix, suffix):
    """[batch] + size as a static list (None where the batch size is a tensor)."""
    suffix = (
        TensorShape(suffix).as_list() if not isinstance(suffix, numbers.Integral) else [int(suffix)]
    )
    return [prefix if isinstance(prefix, numbers.Integral) else None] + suffix


def _zeros(batch_size, size, dtype):
    dims = _concat_dims(batch_size, size)
    if isinstance(batch_size, numbers.Integral):
        z = array_ops.zeros(dims, dtype=dtype)
    else:
        shape = array_ops.concat([array_ops.reshape(batch_size, [1]), dims[1:]], 0)
        z = array_ops.zeros(shape, dtype=dtype)
    z.set_shape(dims)
    return z


class RNNCell(Layer):
    """Abstract cell: subclasses define `state_size`, `output_size`, `build` and `call`."""

    def __init__(self, trainable=True, name=None, dtype=None, **kwargs):
        super().__init__(trainable=trainable, name=name, dtype=dtype, **kwargs)

    def __call__(self, inputs, state, scope=None):
        """One step. With `scope`, the cell's variables live in that variable scope."""
        if scope is not None:
            with vs.variable_scope(scope) as captured:
                return super().__call__(inputs, state, scope=captured)
        return super().__call__(inputs, state)

    @property
    def state_size(self):
        raise NotImplementedError("Abstract method")

    @property
    def output_size(self):
        raise NotImplementedError("Abstract method")

    def zero_state(self, batch_size, dtype):
        """All-zero state(s) of shape [batch_size] + state_size, in `<Cell>ZeroState/`."""
        with default_graph.get().name_scope(type(self).__name__ + "ZeroState"):
            return nest.map_structure(lambda s: _zeros(batch_size, s, dtype), self.state_size)

    def get_initial_state(self, inputs=None, batch_size=None, dtype=None):
        if inputs is not None:
            inputs = convert_to_tensor(inputs)
            batch_size = inputs.get_shape()[0].value or array_ops.shape(inputs)[0]
            dtype = dtype or inputs.dtype
        return self.zero_state(batch_size, dtype)


def _input_depth(cell, inputs_shape):
    shape = TensorShape(inputs_shape)
    if shape.ndims is None or shape[-1].value is None:
        raise ValueError(f"Expected inputs.shape[-1] to be known, saw shape: {shape}")
    return shape[-1].value


def _linear(inputs, state, kernel, bias):
    """concat([inputs, state], 1) · kernel + bias."""
    out = linalg_ops.matmul(array_ops.concat([inputs, state], 1), kernel)
    return nn_ops.bias_add(out, bias)


class BasicRNNCell(RNNCell):
    """output = new_state = activation(W · [inputs, state] + b)."""

    def __init__(self, num_units, activation=None, reuse=None, name=None, dtype=None, **kwargs):
        super().__init__(_reuse=reuse, name=name, dtype=dtype, **kwargs)
        self._num_units = num_units
        self._activation = activation or math_ops.tanh

    state_size = property(lambda self: self._num_units)
    output_size = property(lambda self: self._num_units)

    def build(self, inputs_shape):
        depth = _input_depth(self, inputs_shape)
        self._kernel = self.add_weight("kernel", [depth + self._num_units, self._num_units])
        self._bias = self.add_weight(
            "bias", [self._num_units], initializer=init_ops.zeros_initializer(dtype=self.dtype)
        )
        self.built = True

    def call(self, inputs, state):
        output = self._activation(_linear(inputs, state, self._kernel, self._bias))
        return output, output


class BasicLSTMCell(RNNCell):
    """The LSTM of Zaremba et al. (2014): gates i, j, f, o from one matmul; no peepholes.

    c' = c·σ(f + forget_bias) + σ(i)·act(j);  h' = act(c')·σ(o)
    """

    def __init__(
        self,
        num_units,
        forget_bias=1.0,
        state_is_tuple=True,
        activation=None,
        reuse=None,
        name=None,
        dtype=None,
        **kwargs,
    ):
        super().__init__(_reuse=reuse, name=name, dtype=dtype, **kwargs)
        self._num_units = num_units
        self._forget_bias = forget_bias
        self._state_is_tuple = state_is_tuple
        self._activation = activation or math_ops.tanh

    @property
    def state_size(self):
        n = self._num_units
        return LSTMStateTuple(n, n) if self._state_is_tuple else 2 * n

    output_size = property(lambda self: self._num_units)

    def build(self, inputs_shape):
        depth = _input_depth(self, inputs_shape)
        n = self._num_units
        self._kernel = self.add_weight("kernel", [depth + n, 4 * n])
        self._bias = self.add_weight(
            "bias", [4 * n], initializer=init_ops.zeros_initializer(dtype=self.dtype)
        )
        self.built = True

    def call(self, inputs, state):
        if self._state_is_tuple:
            c, h = state
        else:
            c, h = array_ops.split(state, 2, axis=1)
        i, j, f, o = array_ops.split(_linear(inputs, h, self._kernel, self._bias), 4, axis=1)
        forget_bias = convert_to_tensor(self._forget_bias, dtype=f.dtype)
        sig = math_ops.sigmoid
        new_c = math_ops.add(
            math_ops.multiply(c, sig(math_ops.add(f, forget_bias))),
            math_ops.multiply(sig(i), self._activation(j)),
        )
        new_h = math_ops.multiply(self._activation(new_c), sig(o))
        new_state = (
            LSTMStateTuple(new_c, new_h)
            if self._state_is_tuple
            else array_ops.concat([new_c, new_h], 1)
        )
        return new_h, new_state


class LSTMCell(RNNCell):
    """LSTM with optional peepholes (`use_peepholes`), cell clipping and an output projection
    (`num_proj`, then the state is (c, m) with m of size num_proj)."""

    def __init__(
        self,
        num_units,
        use_peepholes=False,
        cell_clip=None,
        initializer=None,
        num_proj=None,
        proj_clip=None,
        num_unit_shards=None,
        num_proj_shards=None,
        forget_bias=1.0,
        state_is_tuple=True,
        activation=None,
        reuse=None,
        name=None,
        dtype=None,
        **kwargs,
    ):
        super().__init__(_reuse=reuse, name=name, dtype=dtype, **kwargs)
        if num_unit_shards is not None or num_proj_shards is not None:
            raise NotImplementedError(
                "LSTMCell(num_unit_shards=..., num_proj_shards=...) needs partitioned variables, "
                "which flowgraph does not support."
            )
        self._num_units = num_units
        self._use_peepholes = use_peepholes
        self._cell_clip = cell_clip
        self._initializer = initializer
        self._num_proj = num_proj
        self._proj_clip = proj_clip
        self._forget_bias = forget_bias
        self._state_is_tuple = state_is_tuple
        self._activation = activation or math_ops.tanh

    @property
    def state_size(self):
        m = self._num_proj or self._num_units
        return LSTMStateTuple(self._num_units, m) if self._state_is_tuple else self._num_units + m

    output_size = property(lambda self: self._num_proj or self._num_units)

    def build(self, inputs_shape):
        depth = _input_depth(self, inputs_shape)
        n, m = self._num_units, self._num_proj or self._num_units
        init = self._initializer
        self._kernel = self.add_weight("kernel", [depth + m, 4 * n], initializer=init)
        self._bias = self.add_weight(
            "bias", [4 * n], initializer=init_ops.zeros_initializer(dtype=self.dtype)
        )
        if self._use_peepholes:
            self._w_f_diag = self.add_weight("w_f_diag", [n], initializer=init)
            self._w_i_diag = self.add_weight("w_i_diag", [n], initializer=init)
            self._w_o_diag = self.add_weight("w_o_diag", [n], initializer=init)
        if self._num_proj is not None:
            self._proj_kernel = self.add_weight(
                "projection/kernel", [n, self._num_proj], initializer=init
            )
        self.built = True

    def call(self, inputs, state):
        n, m = self._num_units, self._num_proj or self._num_units
        sig, act = math_ops.sigmoid, self._activation
        if self._state_is_tuple:
            c_prev, m_prev = state
        else:
            c_prev = array_index.slice(state, [0, 0], [-1, n])
            m_prev = array_index.slice(state, [0, n], [-1, m])
        i, j, f, o = array_ops.split(_linear(inputs, m_prev, self._kernel, self._bias), 4, axis=1)
        if self._use_peepholes:
            c = sig(f + self._forget_bias + self._w_f_diag * c_prev) * c_prev + sig(
                i + self._w_i_diag * c_prev
            ) * act(j)
        else:
            c = sig(f + self._forget_bias) * c_prev + sig(i) * act(j)
        if self._cell_clip is not None:
            c = clip_ops.clip_by_value(c, -self._cell_clip, self._cell_clip)
        if self._use_peepholes:
            h = sig(o + self._w_o_diag * c) * act(c)
        else:
            h = sig(o) * act(c)
        if self._num_proj is not None:
            h = linalg_ops.matmul(h, self._proj_kernel)
            if self._proj_clip is not None:
                h = clip_ops.clip_by_value(h, -self._proj_clip, self._proj_clip)
        new_state = LSTMStateTuple(c, h) if self._state_is_tuple else array_ops.concat([c, h], 1)
        return h, new_state


class GRUCell(RNNCell):
    """Gated recurrent unit (Cho et al. 2014): r, u = σ(W_g·[x, h] + b_g);
    h' = u·h + (1 - u)·act(W_c·[x, r·h] + b_c). Gate biases start at 1."""

    def __init__(
        self,
        num_units,
        activation=None,
        reuse=None,
        kernel_initializer=None,
        bias_initializer=None,
        name=None,
        dtype=None,
        **kwargs,
    ):
        super().__init__(_reuse=reuse, name=name, dtype=dtype, **kwargs)
        self._num_units = num_units
        self._activation = activation or math_ops.tanh
        self._kernel_initializer = kernel_initializer
        self._bias_initializer = bias_initializer

    state_size = property(lambda self: self._num_units)
    output_size = property(lambda self: self._num_units)

    def build(self, inputs_shape):
        depth = _input_depth(self, inputs_shape)
        n = self._num_units
        self._gate_kernel = self.add_weight(
            "gates/kernel", [depth + n, 2 * n], initializer=self._kernel_initializer
        )
        gate_bias_init = self._bias_initializer or init_ops.constant_initializer(
            1.0, dtype=self.dtype
        )
        self._gate_bias = self.add_weight("gates/bias", [2 * n], initializer=gate_bias_init)
        self._candidate_kernel = self.add_weight(
            "candidate/kernel", [depth + n, n], initializer=self._kernel_initializer
        )
        cand_bias_init = self._bias_initializer or init_ops.zeros_initializer(dtype=self.dtype)
        self._candidate_bias = self.add_weight("candidate/bias", [n], initializer=cand_bias_init)
        self.built = True

    def call(self, inputs, state):
        value = math_ops.sigmoid(_linear(inputs, state, self._gate_kernel, self._gate_bias))
        r, u = array_ops.split(value, 2, axis=1)
        c = self._activation(
            _linear(inputs, r * state, self._candidate_kernel, self._candidate_bias)
        )
        new_h = u * state + (1 - u) * c
        return new_h, new_h


class MultiRNNCell(RNNCell):
    """Stacks cells: layer i's output is layer i+1's input; variables under `cell_<i>/`."""

    def __init__(self, cells, state_is_tuple=True):
        super().__init__()
        if not cells:
            raise ValueError("Must specify at least one cell for MultiRNNCell.")
        if not nest.is_sequence(cells):
            raise TypeError(f"cells must be a list or tuple, but saw: {cells}.")
        self._cells = list(cells)
        self._state_is_tuple = state_is_tuple
        if not state_is_tuple and any(nest.is_sequence(c.state_size) for c in self._cells):
            raise ValueError(
                "Some cells return tuples of states, but the flag state_is_tuple is not set. "
                f"State sizes are: {[c.state_size for c in self._cells]}"
            )

    @property
    def state_size(self):
        if self._state_is_tuple:
            return tuple(c.state_size for c in self._cells)
        return sum(c.state_size for c in self._cells)

    output_size = property(lambda self: self._cells[-1].output_size)

    def zero_state(self, batch_size, dtype):
        if not self._state_is_tuple:
            return super().zero_state(batch_size, dtype)
        with default_graph.get().name_scope(type(self).__name__ + "ZeroState"):
            return tuple(c.zero_state(batch_size, dtype) for c in self._cells)

    @property
    def weights(self):
        return [w for c in self._cells for w in c.weights]

    @property
    def trainable_weights(self):
        return [w for c in self._cells for w in c.trainable_weights]

    @property
    def non_trainable_weights(self):
        return [w for c in self._cells for w in c.non_trainable_weights]

    variables = weights
    trainable_variables = trainable_weights

    def call(self, inputs, state):
        cur_inp, new_states, start = inputs, [], 0
        for i, cell in enumerate(self._cells):
            with vs.variable_scope(f"cell_{i}"):
                if self._state_is_tuple:
                    if not nest.is_sequence(state):
                        raise ValueError(
                            f"Expected state to be a tuple of length {len(self.state_size)}, but "
                            f"received: {state}"
                        )
                    cur_state = state[i]
                else:
                    cur_state = array_index.slice(state, [0, start], [-1, cell.state_size])
                    start += cell.state_size
                cur_inp, new_state = cell(cur_inp, cur_state)
                new_states.append(new_state)
        return cur_inp, (
            tuple(new_states) if self._state_is_tuple else array_ops.concat(new_states, 1)
        )


def _default_state_filter(substate):
    """Dropout applies to an LSTM's h, never to its memory c."""
    if isinstance(substate, LSTMStateTuple):
        return LSTMStateTuple(c=False, h=True)
    return True


class DropoutWrapper(RNNCell):
    """Dropout on a cell's inputs, outputs and (filtered) state, each with its keep probability.

    The wrapper adds no variable scope: the wrapped cell's variables keep their names.
    """

    def __init__(
        self,
        cell,
        input_keep_prob=1.0,
        output_keep_prob=1.0,
        state_keep_prob=1.0,
        variational_recurrent=False,
        input_size=None,
        dtype=None,
        seed=None,
        dropout_state_filter_visitor=None,
    ):
        super().__init__()
        if variational_recurrent:
            raise NotImplementedError(
                "DropoutWrapper(variational_recurrent=True) is not supported by flowgraph."
            )
        del input_size, dtype  # used only with variational_recurrent
        for arg, p in (
            ("input_keep_prob", input_keep_prob),
            ("output_keep_prob", output_keep_prob),
            ("state_keep_prob", state_keep_prob),
        ):
            if isinstance(p, numbers.Real) and not 0 < p <= 1:
                raise ValueError(f"Parameter {arg} must be between 0 and 1: {p}")
        self._cell = cell
        self._input_keep_prob = input_keep_prob
        self._output_keep_prob = output_keep_prob
        self._state_keep_prob = state_keep_prob
        self._seed = seed
        self._filter = dropout_state_filter_visitor or _default_state_filter

    cell = property(lambda self: self._cell)
    wrapped_cell = cell
    state_size = property(lambda self: self._cell.state_size)
    output_size = property(lambda self: self._cell.output_size)
    weights = property(lambda self: self._cell.weights)
    trainable_weights = property(lambda self: self._cell.trainable_weights)
    variables = weights
    trainable_variables = trainable_weights

    def zero_state(self, batch_size, dtype):
        with default_graph.get().name_scope(type(self).__name__ + "ZeroState"):
            return self._cell.zero_state(batch_size, dtype)

    def _gen_seed(self, salt_prefix, index):
        """A per-tensor seed derived from `seed` (TF1's md5 rule), so dropout masks differ."""
        if self._seed is None:
            return None
        digest = hashlib.md5(f"{self._seed}{salt_prefix}_{index}".encode()).hexdigest()
        return int(digest[:8], 16) & 0x7FFFFFFF

    def _dropout(self, values, salt, keep_prob, keep_mask=None):
        flat = nest.flatten(values)
        mask = nest.flatten(keep_mask) if keep_mask is not None else [True] * len(flat)
        out = []
        for i, (v, drop) in enumerate(zip(flat, mask)):
            if drop:
                v = nn_ops.dropout(v, rate=1 - keep_prob, seed=self._gen_seed(salt, i))
            out.append(v)
        return nest.pack_sequence_as(values, out)

    def __call__(self, inputs, state, scope=None):
        if _should_drop(self._input_keep_prob):
            inputs = self._dropout(inputs, "input", self._input_keep_prob)
        output, new_state = self._cell(inputs, state, scope=scope)
        if _should_drop(self._state_keep_prob):
            keep_mask = _filter_structure(self._filter, new_state)
            new_state = self._dropout(new_state, "state", self._state_keep_prob, keep_mask)
        if _should_drop(self._output_keep_prob):
            output = self._dropout(output, "output", self._output_keep_prob)
        return output, new_state


def _should_drop(p):
    return not (isinstance(p, numbers.Real) and p == 1)


def _filter_structure(visitor, structure):
    """Which leaves of `structure` dropout may touch (TF1's shallow-structure rule): the visitor
    returns True (recurse into a sequence, or drop a leaf), False (keep all of it), or a
    structure of such bools for the children."""
    verdict = visitor(structure)
    if isinstance(verdict, bool):
        if verdict and nest.is_sequence(structure):
            return _rebuild(structure, [_filter_structure(visitor, c) for c in structure])
        return nest.map_structure(lambda _: verdict, structure)
    children = []
    for child, v in zip(structure, verdict):
        if v is True and nest.is_sequence(child):
            children.append(_filter_structure(visitor, child))
        else:
            children.append(nest.map_structure(lambda _, v=v: bool(v), child))
    return _rebuild(structure, children)


def _rebuild(structure, children):
    """A tuple/list/namedtuple like `structure` holding `children`."""
    if hasattr(structure, "_fields"):
        return type(structure)(*children)
    return type(structure)(children)


def assert_like_rnncell(name, cell):
    """Raises TypeError unless `cell` has output_size, state_size, zero_state and is callable."""
    missing = [a for a in ("output_size", "state_size", "zero_state") if not hasattr(cell, a)]
    if not callable(cell):
        missing.append("__call__")
    if missing:
        raise TypeError(
            f"The argument {name!r} ({cell}) is not an RNNCell: it lacks {', '.join(missing)}."
        )
