"""The tf.layers Layer: a callable that owns variables in its own variable scope.

A layer captures a VariableScope the first time it is called (or at construction when given
`_scope`, as the functional forms `tf.layers.dense(..., name=...)` do): unnamed layers get a
unique default name ("dense", "dense_1", ...). `build` creates the variables with
`get_variable` inside that scope; later calls reuse them. Ops of every call go in the scope's
original name scope ("dense/MatMul", then "dense/MatMul_1"), like TF1.
"""

from __future__ import annotations

import contextlib
import inspect
import re

import numpy as np

from flowgraph.core import dtypes
from flowgraph.framework import default_graph, nest
from flowgraph.framework.convert import constant_value, convert_to_tensor
from flowgraph.framework.graph import GraphKeys
from flowgraph.ops import variable_scope as vs

_LAYER_NAME_UIDS = ("__layer_name_uids",)


def to_snake_case(name: str) -> str:
    """'BatchNormalization' -> 'batch_normalization', 'Conv2D' -> 'conv2d' (Keras's rule)."""
    intermediate = re.sub("(.)([A-Z][a-z0-9]+)", r"\1_\2", name)
    insecure = re.sub("([a-z])([A-Z])", r"\1_\2", intermediate).lower()
    return insecure if insecure[0] != "_" else "private" + insecure


def _unique_layer_name(graph, base: str) -> str:
    """`base`, then `base_1`, `base_2`, ... per graph."""
    found = graph.get_collection(_LAYER_NAME_UIDS)
    if found:
        uids = found[0]
    else:
        uids = {}
        graph.add_to_collection(_LAYER_NAME_UIDS, uids)
    n = uids.get(base, 0)
    uids[base] = n + 1
    return base if n == 0 else f"{base}_{n}"


def as_bool_or_tensor(training):
    """A Python bool when `training` is one or a constant tensor; else the tensor itself."""
    if isinstance(training, bool) or training is None:
        return bool(training)
    if hasattr(training, "dtype"):
        value = constant_value(training)
        return bool(value) if value is not None else training
    return bool(training)


def smart_cond(pred, true_fn, false_fn, arg_name="training"):
    """`true_fn()` or `false_fn()` chosen now for a Python bool; a tf.cond for a tensor."""
    pred = as_bool_or_tensor(pred)
    if isinstance(pred, bool):
        return true_fn() if pred else false_fn()
    try:
        from flowgraph.ops.control_flow import cond
    except ImportError:
        cond = None
    if cond is None:
        raise NotImplementedError(
            f"`{arg_name}` as a Tensor needs tf.cond, which flowgraph does not have yet; "
            f"pass a Python bool for `{arg_name}`."
        )
    return cond(pred, true_fn, false_fn)


class Layer:
    """Base class of tf.layers: subclasses define `build(input_shape)` and `call(inputs)`.

    Example:
        class Scale(tf.layers.Layer):
            def build(self, input_shape):
                self.s = self.add_weight("s", [], initializer=tf.ones_initializer())
            def call(self, inputs):
                return inputs * self.s
    """

    def __init__(self, trainable=True, name=None, dtype=None, activity_regularizer=None, **kwargs):
        allowed = {"_scope", "_reuse", "input_shape", "batch_input_shape", "batch_size"}
        unknown = set(kwargs) - allowed
        if unknown:
            raise TypeError(f"Keyword argument not understood: {min(unknown)}")
        self.trainable = trainable
        self.built = False
        self._dtype = None if dtype is None else dtypes.as_dtype(dtype).base_dtype
        self.activity_regularizer = activity_regularizer
        self._reuse = kwargs.get("_reuse")
        self._trainable_weights: list = []
        self._non_trainable_weights: list = []
        self._updates: list = []
        self._losses: list = []
        self._graph = None
        graph = default_graph.get()
        if isinstance(name, vs.VariableScope):
            self._base_name = name.name
            self._name = _unique_layer_name(graph, to_snake_case(type(self).__name__))
        elif name:
            self._base_name = self._name = name
        else:
            self._base_name = to_snake_case(type(self).__name__)
            self._name = _unique_layer_name(graph, self._base_name)
        self._scope = None
        self._current_scope = None
        scope = kwargs.get("_scope")
        if scope:
            with vs.variable_scope(scope) as captured:
                self._scope = captured

    # -- properties ---------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._name

    @property
    def dtype(self):
        return self._dtype

    @property
    def scope_name(self) -> str:
        if self._scope is None:
            raise ValueError(
                "No name available for layer scope because the layer "
                f"'{self._name}' has not been used yet."
            )
        return self._scope.name

    @property
    def trainable_weights(self) -> list:
        return list(self._trainable_weights) if self.trainable else []

    @property
    def non_trainable_weights(self) -> list:
        if self.trainable:
            return list(self._non_trainable_weights)
        return self._trainable_weights + self._non_trainable_weights

    @property
    def weights(self) -> list:
        return self.trainable_weights + self.non_trainable_weights

    trainable_variables = trainable_weights
    non_trainable_variables = non_trainable_weights
    variables = weights

    @property
    def updates(self) -> list:
        return list(self._updates)

    @property
    def losses(self) -> list:
        return list(self._losses)

    def count_params(self) -> int:
        return int(sum(w.get_shape().num_elements() for w in self.weights))

    # -- to override --------------------------------------------------------------------------
    def build(self, input_shape):
        self.built = True

    def call(self, inputs, **kwargs):
        return inputs

    def compute_output_shape(self, input_shape):
        raise NotImplementedError(f"{type(self).__name__} does not define compute_output_shape")

    # -- variables, updates, losses -----------------------------------------------------------
    def add_weight(
        self,
        name,
        shape,
        dtype=None,
        initializer=None,
        regularizer=None,
        trainable=True,
        constraint=None,
        partitioner=None,
        use_resource=None,
    ):
        """Creates (or, on reuse, finds) `scope/name` with `get_variable`; tracks it."""
        dtype = dtypes.as_dtype(dtype or self._dtype or dtypes.float32)
        trainable = bool(trainable and self.trainable)
        reuse = True if self.built else self._reuse
        graph = default_graph.get()
        with vs.variable_scope(self._scope, reuse=reuse, auxiliary_name_scope=False) as scope:
            self._current_scope = scope
            with _reenter(graph, scope.original_name_scope):
                existing = len(graph.get_collection(GraphKeys.REGULARIZATION_LOSSES))
                variable = vs.get_variable(
                    name,
                    shape=shape,
                    dtype=dtype,
                    initializer=initializer,
                    regularizer=regularizer,
                    trainable=trainable,
                    constraint=constraint,
                    partitioner=partitioner,
                    use_resource=use_resource,
                )
                self._losses.extend(
                    graph.get_collection(GraphKeys.REGULARIZATION_LOSSES)[existing:]
                )
        if trainable:
            self._trainable_weights.append(variable)
        else:
            self._non_trainable_weights.append(variable)
        return variable

    def add_update(self, updates, inputs=None):
        """Records update ops (e.g. moving averages); they also go to tf.GraphKeys.UPDATE_OPS."""
        updates = updates if isinstance(updates, (list, tuple)) else [updates]
        for u in updates:
            self._updates.append(u)
            u.graph.add_to_collection(GraphKeys.UPDATE_OPS, u)

    def add_loss(self, losses, inputs=None):
        """Records losses; they also go to tf.GraphKeys.REGULARIZATION_LOSSES (TF1)."""
        losses = losses if isinstance(losses, (list, tuple)) else [losses]
        for loss in losses:
            self._losses.append(loss)
            loss.graph.add_to_collection(GraphKeys.REGULARIZATION_LOSSES, loss)

    # -- calling ------------------------------------------------------------------------------
    def _set_scope(self, scope=None):
        if self._scope is None:
            if self._reuse:
                with vs.variable_scope(scope if scope is not None else self._base_name) as captured:
                    self._scope = captured
            else:
                with vs.variable_scope(scope, default_name=self._base_name) as captured:
                    self._scope = captured

    def __call__(self, inputs, *args, **kwargs):
        """Builds the layer on first use, then applies `call` in the layer's scope."""
        scope = kwargs.pop("scope", None)
        inputs = nest.map_structure(_as_tensor_if_array, inputs)
        graph = _graph_of(inputs)
        if self._graph is not None and graph is not self._graph:
            raise ValueError(
                f"Layer '{self._name}' was built in {self._graph!r}, but is called in {graph!r}."
            )
        with graph.as_default():
            self._set_scope(scope)
            reuse = True if self.built else self._reuse
            with vs.variable_scope(self._scope, reuse=reuse, auxiliary_name_scope=False) as vscope:
                self._current_scope = vscope
                with _reenter(graph, self._scope.original_name_scope):
                    if not self.built:
                        self._build_for(inputs)
                    outputs = self.call(inputs, *args, **kwargs)
                    if self.activity_regularizer is not None:
                        with graph.name_scope("ActivityRegularizer"):
                            loss = self.activity_regularizer(outputs)
                        if loss is not None:
                            self.add_loss(loss)
        self._graph = graph
        return outputs

    apply = __call__

    def _build_for(self, inputs):
        first = inputs[0] if isinstance(inputs, (list, tuple)) else inputs
        if self._dtype is None and hasattr(first, "dtype"):
            self._dtype = first.dtype.base_dtype
        if isinstance(inputs, (list, tuple)):
            shapes = [convert_to_tensor(x).get_shape() for x in inputs]
        else:
            shapes = convert_to_tensor(inputs).get_shape()
        self.build(shapes)
        self.built = True


def functional(layer_class, doc: str):
    """The functional form of `layer_class`, as tf.layers.dense is of Dense: builds a layer whose
    variable scope is `name` (reused with `reuse`) and applies it to `inputs`. Its signature is
    the class's with `inputs` first and `reuse` last, so help() and positional calls match TF1's
    spelt-out functions."""

    def build_and_apply(inputs, *args, name=None, reuse=None, **kwargs):
        layer = layer_class(*args, name=name, _reuse=reuse, _scope=name, **kwargs)
        return layer.apply(inputs)

    params = [
        p for p in inspect.signature(layer_class).parameters.values() if p.kind != p.VAR_KEYWORD
    ]
    build_and_apply.__signature__ = inspect.Signature(
        [
            inspect.Parameter("inputs", inspect.Parameter.POSITIONAL_OR_KEYWORD),
            *params,
            inspect.Parameter("reuse", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None),
        ]
    )
    build_and_apply.__doc__ = doc
    build_and_apply.__name__ = build_and_apply.__qualname__ = to_snake_case(layer_class.__name__)
    return build_and_apply


def _as_tensor_if_array(x):
    """NumPy arrays and Python numbers given to a layer become constants (TF's layers convert
    them); tensors and other objects pass through."""
    return convert_to_tensor(x) if isinstance(x, (np.ndarray, np.generic, float, int)) else x


def _graph_of(inputs):
    items = inputs if isinstance(inputs, (list, tuple)) else [inputs]
    for x in items:
        g = getattr(x, "graph", None)
        if g is not None:
            return g
    return default_graph.get()


def _reenter(graph, name_scope: str):
    """Re-enters a scope's original name scope exactly (no new scope when it has none)."""
    if not name_scope:
        return contextlib.nullcontext()
    return graph.name_scope(name_scope if name_scope.endswith("/") else name_scope + "/")
