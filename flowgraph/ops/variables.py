"""tf.Variable: TF1's reference variable (whitepaper §2 "Variables").

A Variable is a handful of graph nodes under one name scope, built like TF1 builds them:

    v/initial_value   the initial value (callables run under v/Initializer/, colocated with v)
    v                 VariableV2: outputs the reference (dtype float32_ref) to the storage
    v/Assign          Assign(v, initial_value): the initializer
    v/read            Identity(v): the snapshot every ordinary consumer reads (`value()`)

The storage lives in the runtime's resource container, so a value persists across `run` calls
of one Session, and every new Session starts uninitialized; reading before the initializer ran
fails with FailedPreconditionError naming the variable.
"""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.core.shapes import TensorShape, as_shape, unknown_shape
from flowgraph.framework import default_graph
from flowgraph.framework.apply_op import apply_op
from flowgraph.framework.convert import convert_to_tensor, register_tensor_conversion_function
from flowgraph.framework.graph import GraphKeys
from flowgraph.framework.operation import Tensor
from flowgraph.ops import variable_ops
from flowgraph.ops.variable_collections import (
    all_variables,
    assert_variables_initialized,
    global_variables,
    global_variables_initializer,
    initialize_all_variables,
    initialize_local_variables,
    initialize_variables,
    local_variables,
    local_variables_initializer,
    model_variables,
    moving_average_variables,
    report_uninitialized_variables,
    trainable_variables,
    variables_initializer,
)
from flowgraph.ops.variable_settings import (
    VariableAggregation,
    VariableSynchronization,
    outside_control_flow,
    prepend_scope,
    strip_scope,
    validate_distribution,
)

__all__ = [
    "Variable",
    "VariableAggregation",
    "VariableSynchronization",
    "all_variables",
    "assert_variables_initialized",
    "global_variables",
    "global_variables_initializer",
    "initialize_all_variables",
    "initialize_local_variables",
    "initialize_variables",
    "local_variables",
    "local_variables_initializer",
    "model_variables",
    "moving_average_variables",
    "report_uninitialized_variables",
    "trainable_variables",
    "variables_initializer",
]


class _VariableMeta(type):
    """`Variable(...)` builds a ResourceVariable when asked to (use_resource=True, the variable
    scope's or enable_resource_variables()'s default, or a VariableDef with is_resource), like
    TF1's VariableMetaclass; subclasses are constructed as they are."""

    def __call__(cls, *args, **kwargs):
        if cls is Variable:
            from flowgraph.ops import resource_variables as rv  # a subclass: imported at call time

            arguments = rv.bind_variable_args(args, kwargs)
            if rv.wants_resource(arguments):
                return rv.ResourceVariable(**arguments)
        return super().__call__(*args, **kwargs)


class Variable(metaclass=_VariableMeta):
    """A TF1 reference variable. See the module docstring for the graph it builds.

    Example:
        w = tf.Variable(tf.zeros([784, 10]), name="w")
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            sess.run(w.assign_add(tf.ones([784, 10])))
    """

    __array_priority__ = 100
    is_tensor_like = True  # tf.is_tensor counts variables

    def __init__(
        self,
        initial_value=None,
        trainable=None,
        collections=None,
        validate_shape=True,
        caching_device=None,
        name=None,
        variable_def=None,
        dtype=None,
        expected_shape=None,
        import_scope=None,
        constraint=None,
        use_resource=None,
        synchronization=VariableSynchronization.AUTO,
        aggregation=VariableAggregation.NONE,
        shape=None,
    ):
        del use_resource  # resolved by _VariableMeta: a Variable is a reference variable
        self._save_slice_info = None
        if variable_def is not None:
            if initial_value is not None:
                raise ValueError("variable_def and initial_value are mutually exclusive.")
            self._init_from_proto(variable_def, import_scope)
            return
        self._init_from_args(
            initial_value,
            trainable,
            collections,
            validate_shape,
            caching_device,
            name,
            dtype,
            expected_shape,
            constraint,
            synchronization,
            aggregation,
            shape,
        )

    # -- construction -------------------------------------------------------------------------
    def _check_args(
        self, initial_value, trainable, collections, constraint, synchronization, aggregation, name
    ) -> list:
        """Validates the constructor arguments shared by ref and resource variables; sets the
        distribution settings and returns the collections the variable joins."""
        if initial_value is None:
            raise ValueError("initial_value must be specified.")
        if collections is None:
            collections = [GraphKeys.GLOBAL_VARIABLES]
        if not isinstance(collections, (list, tuple, set)):
            raise ValueError(
                "collections argument to Variable constructor must be a list, tuple, or set. "
                f"Got {collections} of type {type(collections)}"
            )
        if constraint is not None and not callable(constraint):
            raise ValueError("The `constraint` argument must be a callable.")
        self._synchronization, self._aggregation, self._trainable = validate_distribution(
            synchronization, aggregation, trainable, name
        )
        if self._trainable and GraphKeys.TRAINABLE_VARIABLES not in collections:
            collections = list(collections) + [GraphKeys.TRAINABLE_VARIABLES]
        return collections

    def _init_from_args(
        self,
        initial_value,
        trainable,
        collections,
        validate_shape,
        caching_device,
        name,
        dtype,
        expected_shape,
        constraint,
        synchronization,
        aggregation,
        shape,
    ):
        collections = self._check_args(
            initial_value, trainable, collections, constraint, synchronization, aggregation, name
        )
        graph = default_graph.get()
        # Like TF's init_scope: a variable is never created under the caller's control deps,
        # nor inside the caller's loop body or cond branch (a cell's first step in dynamic_rnn).
        with (
            outside_control_flow(graph),
            graph.control_dependencies(None),
            graph.name_scope(name or "Variable") as scope,
        ):
            var_name = scope[:-1]
            self._initial_value = self._make_initial_value(graph, initial_value, dtype)
            value_shape = self._initial_value.shape
            shape = self._checked_shape(value_shape, expected_shape, shape)
            var_shape, validate_shape = self._variable_shape(value_shape, validate_shape, shape)
            self._variable = variable_ops.variable_op_v2(
                var_shape, self._initial_value.dtype, name=scope
            )
            self._colocate_initializer_ops(var_name)
            with graph.colocate_with(self._variable.op):
                self._initializer_op = variable_ops.assign(
                    self._variable,
                    self._initial_value,
                    validate_shape=validate_shape,
                    name="Assign",
                ).op
            if caching_device is not None:
                with graph.device(caching_device):
                    self._snapshot = apply_op("Identity", [self._variable], name="read").outputs[0]
            else:
                with graph.colocate_with(self._variable.op):
                    self._snapshot = apply_op("Identity", [self._variable], name="read").outputs[0]
        self._caching_device = caching_device
        self._constraint = constraint
        graph.add_to_collections(collections, self)

    def _make_initial_value(self, graph, initial_value, dtype) -> Tensor:
        """Converts the initial value; a callable runs under `Initializer/` so its ops can be
        colocated with the variable once that exists (TF does it with an attr scope)."""
        dtype = None if dtype is None else dtypes.as_dtype(dtype).base_dtype
        self._first_init_op = len(graph.get_operations())
        if callable(initial_value):
            with graph.name_scope("Initializer"):
                value = convert_to_tensor(initial_value(), dtype=dtype, name="initial_value")
        else:
            value = convert_to_tensor(initial_value, dtype=dtype, name="initial_value")
            self._first_init_op = None
        return self._checked_initial_value(graph, value)

    @staticmethod
    def _checked_initial_value(graph, value: Tensor) -> Tensor:
        """Refuses an initial value built inside a loop or cond (it would not exist when the
        initializer runs); a reference-typed one is read through an Identity."""
        if getattr(value.op, "_control_flow_context", None) is not None:
            raise ValueError(
                f"Initializer for variable {graph.get_name_scope()} is from inside a control-flow "
                "construct, such as a loop or conditional. When creating a variable inside a loop "
                "or conditional, use a lambda as the initializer."
            )
        if value.dtype.is_ref_dtype:
            value = apply_op("Identity", [value]).outputs[0]
        return value

    @staticmethod
    def _checked_shape(value_shape: TensorShape, expected_shape, shape) -> TensorShape | None:
        """Checks the initial value's shape against `expected_shape` and `shape`; returns
        `shape` as a TensorShape (None when not given)."""
        if expected_shape is not None and not as_shape(expected_shape).is_compatible_with(
            value_shape
        ):
            raise ValueError(
                f"initial_value shape {value_shape} is not compatible with expected_shape "
                f"{as_shape(expected_shape)}"
            )
        if shape is None:
            return None
        shape = as_shape(shape)
        if not shape.is_compatible_with(value_shape):
            raise ValueError(
                f"The initial value's shape ({value_shape}) is not compatible with the "
                f"explicitly supplied `shape` argument ({shape})."
            )
        return shape

    @staticmethod
    def _colocate(ops, name: str, device: str) -> None:
        """Puts the ops of a callable initial value in the variable's colocation group (TF
        does it with an attr scope)."""
        for op in ops:
            op._set_attr("_class", [f"loc:@{name}"])
            op._set_device(device)

    def _colocate_initializer_ops(self, var_name: str):
        if self._first_init_op is None:
            return
        graph = self._variable.graph
        new_ops = graph.get_operations()[self._first_init_op : -1]  # all but VariableV2 itself
        self._colocate(new_ops, var_name, self._variable.op.device)

    @staticmethod
    def _variable_shape(value_shape: TensorShape, validate_shape: bool, shape):
        """The VariableV2 shape attr and whether Assign checks shapes (`shape` is checked)."""
        if shape is not None:
            return shape, validate_shape and shape.is_fully_defined()
        if not validate_shape:
            return unknown_shape(), False
        if not value_shape.is_fully_defined():
            raise ValueError(f"initial_value must have a shape specified: {value_shape}")
        return value_shape, True

    def _init_from_proto(self, variable_def, import_scope):
        element = self._settings_from_proto(variable_def, import_scope)
        self._variable = element(variable_def.variable_name)
        self._snapshot = element(variable_def.snapshot_name)

    def _settings_from_proto(self, variable_def, import_scope):
        """Sets what a VariableDef says besides the variable's own nodes (ref and resource
        alike); returns the function that finds a node it names in the default graph."""
        graph = default_graph.get()

        def element(name):
            return graph.as_graph_element(prepend_scope(name, import_scope))

        self._initializer_op = element(variable_def.initializer_name)
        self._initial_value = (
            element(variable_def.initial_value_name) if variable_def.initial_value_name else None
        )
        self._synchronization, self._aggregation, self._trainable = validate_distribution(
            variable_def.synchronization,
            variable_def.aggregation,
            variable_def.trainable,
            variable_def.variable_name,
        )
        if variable_def.HasField("save_slice_info_def"):
            self._save_slice_info = variable_def.save_slice_info_def
        self._caching_device = None
        self._constraint = None
        return element

    # -- identity -----------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._variable.name

    @property
    def op(self):
        return self._variable.op

    @property
    def dtype(self) -> dtypes.DType:
        """The reference dtype, e.g. float32_ref, as in TF1."""
        return self._variable.dtype

    @property
    def shape(self) -> TensorShape:
        return self._variable.shape

    def get_shape(self) -> TensorShape:
        return self._variable.shape

    def set_shape(self, shape):
        self._variable.set_shape(shape)
        self._snapshot.set_shape(shape)

    @property
    def graph(self):
        return self._variable.graph

    @property
    def device(self) -> str:
        return self._variable.device

    @property
    def initializer(self):
        return self._initializer_op

    @property
    def initial_value(self) -> Tensor:
        return self._initial_value

    @property
    def constraint(self):
        return self._constraint

    @property
    def trainable(self) -> bool:
        return self._trainable

    @property
    def synchronization(self) -> VariableSynchronization:
        return self._synchronization

    @property
    def aggregation(self) -> VariableAggregation:
        return self._aggregation

    @property
    def _shared_name(self) -> str:
        return self.name[: self.name.index(":")]

    def _ref(self) -> Tensor:
        return self._variable

    def _as_graph_element(self) -> Tensor:
        return self._variable

    def __repr__(self):
        return f"<tf.Variable '{self.name}' shape={self.shape} dtype={self.dtype.name}>"

    # -- reading ------------------------------------------------------------------------------
    def value(self) -> Tensor:
        """The snapshot `v/read`: what ops that consume this variable read."""
        return self._snapshot

    def read_value(self) -> Tensor:
        """A new read of the variable (an Identity named `read`)."""
        return apply_op("Identity", [self._variable], name="read").outputs[0]

    def initialized_value(self) -> Tensor:
        """The variable's value if it is initialized, else its initial value (TF1's cond on
        is_variable_initialized): for initial values of other variables, e.g.
        `tf.Variable(w.initialized_value() * 2)`, whatever order the initializers run in."""
        from flowgraph.ops.control_flow import cond

        graph = self.graph
        with outside_control_flow(graph), graph.control_dependencies(None):
            initialized = variable_ops.is_variable_initialized(self._variable)
            return cond(initialized, self.read_value, lambda: self._initial_value)

    def eval(self, session=None):
        """The variable's value in `session` (default: the default session)."""
        return self._variable.eval(session=session)

    def load(self, value, session=None):
        """Stores `value` by running the initializer with its initial value fed."""
        from flowgraph.session import default_session

        session = session if session is not None else default_session.get()
        if session is None:
            raise ValueError(
                "Either session argument should be provided or default session should be "
                "established"
            )
        session.run(self._initializer_op, {self._initializer_op.inputs[1]: value})

    # -- updates ------------------------------------------------------------------------------
    def assign(self, value, use_locking=False, name=None, read_value=True):
        """Assigns `value`; returns the updated ref tensor, or the op if read_value is False."""
        t = variable_ops.assign(self._variable, value, use_locking=use_locking, name=name)
        return t if read_value else t.op

    def assign_add(self, delta, use_locking=False, name=None, read_value=True):
        t = variable_ops.assign_add(self._variable, delta, use_locking=use_locking, name=name)
        return t if read_value else t.op

    def assign_sub(self, delta, use_locking=False, name=None, read_value=True):
        t = variable_ops.assign_sub(self._variable, delta, use_locking=use_locking, name=name)
        return t if read_value else t.op

    def _scatter(self, fn, sparse_delta, use_locking, name):
        if not (hasattr(sparse_delta, "indices") and hasattr(sparse_delta, "values")):
            raise TypeError(f"sparse_delta is not IndexedSlices: {sparse_delta}")
        return fn(
            self._variable,
            sparse_delta.indices,
            sparse_delta.values,
            use_locking=use_locking,
            name=name,
        )

    def scatter_update(self, sparse_delta, use_locking=False, name=None):
        """Writes the rows of an IndexedSlices `sparse_delta` into the variable."""
        return self._scatter(variable_ops.scatter_update, sparse_delta, use_locking, name)

    def scatter_add(self, sparse_delta, use_locking=False, name=None):
        return self._scatter(variable_ops.scatter_add, sparse_delta, use_locking, name)

    def scatter_sub(self, sparse_delta, use_locking=False, name=None):
        return self._scatter(variable_ops.scatter_sub, sparse_delta, use_locking, name)

    def scatter_mul(self, sparse_delta, use_locking=False, name=None):
        return self._scatter(variable_ops.scatter_mul, sparse_delta, use_locking, name)

    def scatter_div(self, sparse_delta, use_locking=False, name=None):
        return self._scatter(variable_ops.scatter_div, sparse_delta, use_locking, name)

    def scatter_min(self, sparse_delta, use_locking=False, name=None):
        return self._scatter(variable_ops.scatter_min, sparse_delta, use_locking, name)

    def scatter_max(self, sparse_delta, use_locking=False, name=None):
        return self._scatter(variable_ops.scatter_max, sparse_delta, use_locking, name)

    def _strided_slice_assign(self, begin, end, strides, value, name, masks):
        value = convert_to_tensor(value, dtype=self.dtype.base_dtype, name="value")
        inputs = [self._variable, begin, end, strides, value]
        return apply_op("StridedSliceAssign", inputs, name=name, **masks).outputs[0]

    def scatter_nd_update(self, indices, updates, name=None):
        return variable_ops.scatter_nd_update(
            self._variable, indices, updates, use_locking=True, name=name
        )

    def scatter_nd_add(self, indices, updates, name=None):
        return variable_ops.scatter_nd_add(
            self._variable, indices, updates, use_locking=True, name=name
        )

    def scatter_nd_sub(self, indices, updates, name=None):
        return variable_ops.scatter_nd_sub(
            self._variable, indices, updates, use_locking=True, name=name
        )

    def count_up_to(self, limit):
        """Increments this int variable up to `limit`; returns the value before the increment."""
        return variable_ops.count_up_to(self._variable, limit=limit)

    # -- serialization ------------------------------------------------------------------------
    def _proto_snapshot(self) -> Tensor:
        """The tensor a VariableDef records as the snapshot."""
        return self._snapshot

    def to_proto(self, export_scope=None):
        """A VariableDef naming this variable's nodes (None if outside `export_scope`)."""
        from flowgraph.core.protos import VariableDef

        if export_scope is not None and not self._ref().name.startswith(export_scope):
            return None
        var_def = VariableDef()
        var_def.variable_name = strip_scope(self._ref().name, export_scope)
        if self._initial_value is not None:
            var_def.initial_value_name = strip_scope(self._initial_value.name, export_scope)
        var_def.trainable = self._trainable
        var_def.synchronization = self._synchronization.value
        var_def.aggregation = self._aggregation.value
        var_def.initializer_name = strip_scope(self._initializer_op.name, export_scope)
        var_def.snapshot_name = strip_scope(self._proto_snapshot().name, export_scope)
        var_def.is_resource = self._ref().dtype.base_dtype == dtypes.resource
        if self._save_slice_info is not None:
            var_def.save_slice_info_def.CopyFrom(self._save_slice_info)
        return var_def

    @staticmethod
    def from_proto(variable_def, import_scope=None) -> Variable:
        return Variable(variable_def=variable_def, import_scope=import_scope)

    def __iter__(self):
        raise TypeError("'Variable' object is not iterable.")


def _delegate(method: str):
    """An operator of Variable that applies the same operator to `value()`."""

    def op(self, *args):
        fn = getattr(Tensor, method, None)
        if fn is not None:
            return fn(self.value(), *args)
        if args and method != "__getitem__":
            return NotImplemented  # lets Python try the other operand's reflected operator
        raise TypeError(f"Variable does not support {method}: Tensor defines no such operator yet")

    op.__name__ = method
    return op


for _method in Tensor.OVERLOADABLE_OPERATORS:
    setattr(Variable, _method, _delegate(_method))

_SLICE_MASKS = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")


def _getitem(self, slice_spec):
    """`v[spec]`: a slice of the value whose `assign(value, name=None)` writes that slice of
    the variable (TF1's _SliceHelperVar: `v[:, 0].assign(x)`)."""
    from flowgraph.ops.array_index import getitem

    result = getitem(self.value(), slice_spec)
    op = result.op
    if op.type == "StridedSlice":  # a boolean mask is not an l-value
        begin, end, strides = op.inputs[1:]
        masks = {k: op.get_attr(k) for k in _SLICE_MASKS}

        def assign(value, name=None):
            # TF names the write after the slice: 'strided_slice/_assign'.
            name = name if name is not None else f"{op.name}/_assign"
            return self._strided_slice_assign(begin, end, strides, value, name, masks)

        result.assign = assign
    return result


Variable.__getitem__ = _getitem


def _to_tensor(v: Variable, dtype=None, name=None, as_ref=False) -> Tensor:
    if dtype is not None and not dtype.is_compatible_with(v.dtype):
        raise ValueError(
            f"Incompatible type conversion requested to type '{dtype.name}' for variable of type "
            f"'{v.dtype.name}'"
        )
    return v._ref() if as_ref else v.value()


register_tensor_conversion_function(Variable, _to_tensor)
