"""The per-graph variable store behind `get_variable` (TF1's _VariableStore).

One store per graph, in the collection `_VARSTORE_KEY`, maps full variable names to variables:
it creates a variable the first time (with the scope's initializer, regularizer, partitioner
and custom getter applied by variable_scope.py) and checks shape and dtype when one is reused.
"""

from __future__ import annotations

import inspect
import traceback
from collections.abc import Sequence

from flowgraph.core import dtypes
from flowgraph.core.shapes import as_shape
from flowgraph.framework.graph import GraphKeys
from flowgraph.ops import init_ops, variables

_VARSTORE_KEY = ("__variable_store",)


class _VariableStore:
    """Variables created by `get_variable` in one graph, keyed by full name."""

    def __init__(self):
        self.vars: dict[str, object] = {}
        self.partitioned_vars: dict[str, object] = {}  # name -> PartitionedVariable

    def get_variable(
        self,
        name,
        shape=None,
        dtype=dtypes.float32,
        initializer=None,
        regularizer=None,
        reuse=None,
        trainable=None,
        collections=None,
        caching_device=None,
        partitioner=None,
        validate_shape=True,
        use_resource=None,
        custom_getter=None,
        constraint=None,
    ):
        """Creates or returns the variable `name`; `custom_getter` may wrap the creation."""
        if custom_getter is not None and not callable(custom_getter):
            raise ValueError(f"Passed a custom_getter which is not callable: {custom_getter}")
        dtype = dtypes.as_dtype(dtype).base_dtype
        kwargs = {
            "name": name,
            "shape": shape,
            "dtype": dtype,
            "initializer": initializer,
            "regularizer": regularizer,
            "reuse": reuse,
            "trainable": trainable,
            "collections": collections,
            "caching_device": caching_device,
            "partitioner": partitioner,
            "validate_shape": validate_shape,
            "use_resource": use_resource,
        }
        if custom_getter is None:
            return self._true_getter(constraint=constraint, **kwargs)
        if _accepts(custom_getter, "constraint"):
            kwargs["constraint"] = constraint
        return custom_getter(getter=self._true_getter, **kwargs)

    def _true_getter(
        self,
        name,
        shape=None,
        dtype=dtypes.float32,
        initializer=None,
        regularizer=None,
        reuse=None,
        trainable=None,
        collections=None,
        caching_device=None,
        partitioner=None,
        validate_shape=True,
        use_resource=None,
        constraint=None,
        **unused,
    ):
        if unused:
            raise TypeError(f"get_variable() got unexpected arguments {sorted(unused)}")
        is_scalar = isinstance(shape, Sequence) and not isinstance(shape, str) and len(shape) == 0
        if reuse is None:
            reuse = False
        if partitioner is not None and not is_scalar:
            from flowgraph.ops.partitioned_variables import get_partitioned_variable

            return get_partitioned_variable(
                self,
                name,
                partitioner,
                shape,
                dtype,
                initializer,
                regularizer,
                reuse,
                trainable,
                collections,
                caching_device,
                validate_shape,
                use_resource,
                constraint,
            )
        return self._get_single_variable(
            name,
            shape,
            dtype,
            initializer,
            regularizer,
            reuse,
            trainable,
            collections,
            caching_device,
            validate_shape,
            use_resource,
            constraint,
        )

    def _get_single_variable(
        self,
        name,
        shape,
        dtype,
        initializer,
        regularizer,
        reuse,
        trainable,
        collections,
        caching_device,
        validate_shape,
        use_resource,
        constraint,
        partition_info=None,
    ):
        from_value = initializer is not None and not callable(initializer)
        if shape is not None and from_value:
            raise ValueError("If initializer is a constant, do not specify shape.")
        dtype = dtypes.as_dtype(dtype)
        shape = as_shape(shape)
        if name in self.vars:
            return self._existing(name, shape, dtype, reuse)
        if reuse is True:
            raise ValueError(
                f"Variable {name} does not exist, or was not created with tf.get_variable(). "
                "Did you mean to set reuse=tf.AUTO_REUSE in VarScope?"
            )
        if initializer is None:
            initializer = _default_initializer(name, dtype)
        if from_value:
            init_val, variable_dtype = initializer, None
        else:
            if inspect.isclass(initializer):
                initializer = initializer()
            if shape.is_fully_defined():
                dims = shape.as_list()

                def init_val():
                    return initializer(dims, dtype=dtype, partition_info=partition_info)

                variable_dtype = dtype.base_dtype
            elif _takes_no_required_args(initializer):
                init_val, variable_dtype = initializer, None
            else:
                raise ValueError(
                    f"The initializer passed for variable {name} is not valid. It should be a "
                    "callable with no arguments and the shape should not be provided, or an "
                    "initializer object and the shape should be fully defined "
                    f"(shape={shape})."
                )
        v = variables.Variable(
            initial_value=init_val,
            name=name,
            trainable=trainable,
            collections=collections,
            caching_device=caching_device,
            dtype=variable_dtype,
            validate_shape=validate_shape,
            constraint=constraint,
            use_resource=use_resource,
        )
        self.vars[name] = v
        if regularizer:
            graph = v.op.graph
            with graph.colocate_with(v.op), graph.name_scope(name + "/Regularizer/"):
                loss = regularizer(v)
            if loss is not None:
                graph.add_to_collection(GraphKeys.REGULARIZATION_LOSSES, loss)
        return v

    def _existing(self, name, shape, dtype, reuse):
        found = self.vars[name]
        if reuse is False:
            site = "".join(traceback.format_list(_creation_trace(found)))
            raise ValueError(
                f"Variable {name} already exists, disallowed. Did you mean to set reuse=True or "
                f"reuse=tf.AUTO_REUSE in VarScope? Originally defined at:\n\n{site}"
            )
        if not shape.is_compatible_with(found.get_shape()):
            raise ValueError(
                f"Trying to share variable {name}, but specified shape {shape} and found shape "
                f"{found.get_shape()}."
            )
        if not dtype.is_compatible_with(found.dtype):
            raise ValueError(
                f"Trying to share variable {name}, but specified dtype {dtype.name} and found "
                f"dtype {found.dtype.base_dtype.name}."
            )
        return found


def _creation_trace(var):
    op = getattr(var, "op", None)
    frame = getattr(op, "_traceback", None)
    if not frame:
        return []
    file, line, func = frame
    return [(file, line, func, None)]


def _default_initializer(name, dtype):
    """Glorot-uniform for floats, zeros for integers, bools and strings (TF1's defaults)."""
    if dtype.is_floating:
        return init_ops.glorot_uniform_initializer()
    if dtype.is_integer or dtype.is_unsigned or dtype.is_bool or dtype == dtypes.string:
        return init_ops.zeros_initializer()
    raise ValueError(f"An initializer for variable {name} of {dtype.base_dtype.name} is required")


def _accepts(fn, arg: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return True
    return arg in params or any(p.kind == p.VAR_KEYWORD for p in params.values())


def _takes_no_required_args(fn) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return all(
        p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params
    )


def _get_store(graph) -> _VariableStore:
    found = graph.get_collection(_VARSTORE_KEY)
    if found:
        return found[0]
    store = _VariableStore()
    graph.add_to_collection(_VARSTORE_KEY, store)
    return store
