"""Resource variables: tf.Variable(use_resource=True), TF1's ResourceVariable (whitepaper §2
"Variables", §4.7 containers).

A reference variable hands its storage to every consumer as a `float32_ref` edge, so when a read
happens relative to an update is up to the executor. A resource variable instead outputs a
*handle* (a `resource` scalar naming the storage), and every use of its value is an explicit
`ReadVariableOp`: a read sees every update it depends on (directly or by a control dependency) and
none that depends on it. TF1 builds, under the name scope of the variable:

    v/Initializer/...            the initial value (colocated with v)
    v                            VarHandleOp, shared_name "v": outputs the handle
    v/IsInitialized/VarIsInitializedOp
    v/Assign                     AssignVariableOp(v, initial value): the initializer
    v/Read/ReadVariableOp        the graph element: what session.run(v) fetches

Each `value()` (and so each conversion to a Tensor) adds a fresh ReadVariableOp where it is used,
as TF1 documents; `sparse_read` reads rows with ResourceGather, whose gradient stays sparse.
Gradients are taken with respect to the handle: ReadVariableOp passes its gradient through.
"""

from __future__ import annotations

import inspect

from flowgraph.core import dtypes
from flowgraph.core.shapes import TensorShape, as_shape, unknown_shape
from flowgraph.framework import default_graph
from flowgraph.framework.apply_op import apply_op
from flowgraph.framework.convert import convert_to_tensor, register_tensor_conversion_function
from flowgraph.framework.operation import Tensor
from flowgraph.ops import variables
from flowgraph.ops.variable_settings import (
    VariableAggregation,
    VariableSynchronization,
    outside_control_flow,
)

__all__ = ["disable_resource_variables", "enable_resource_variables", "resource_variables_enabled"]

# Whether tf.Variable / get_variable make resource variables when neither the call nor the
# enclosing variable_scope says (TF1's variable_scope._DEFAULT_USE_RESOURCE).
_default_use_resource = False


def enable_resource_variables():
    """Makes tf.Variable and tf.get_variable create resource variables by default (TF2's kind)."""
    global _default_use_resource
    _default_use_resource = True


def disable_resource_variables():
    """Makes tf.Variable and tf.get_variable create reference variables by default (TF1's)."""
    global _default_use_resource
    _default_use_resource = False


def resource_variables_enabled() -> bool:
    """Whether variables are resource variables unless a call or scope says otherwise."""
    return _default_use_resource


def is_resource_variable(var) -> bool:
    """True for ResourceVariable objects (TF's resource_variable_ops.is_resource_variable)."""
    return isinstance(var, ResourceVariable)


def wants_resource(arguments: dict) -> bool:
    """Whether a tf.Variable(...) call, given as its bound arguments, makes a ResourceVariable:
    a VariableDef says so itself; else use_resource, else the variable scope's, else the default."""
    variable_def = arguments.get("variable_def")
    if variable_def is not None:
        return bool(variable_def.is_resource)
    use_resource = arguments.get("use_resource")
    if use_resource is None:
        from flowgraph.ops import variable_scope  # imports variables: only at call time

        use_resource = variable_scope.get_variable_scope().use_resource
    if use_resource is None:
        use_resource = _default_use_resource
    return bool(use_resource)


_VARIABLE_ARGS = None  # the signature of tf.Variable, computed once


def bind_variable_args(args, kwargs) -> dict:
    """tf.Variable's arguments by name (positional order is Variable's, not ResourceVariable's)."""
    global _VARIABLE_ARGS
    if _VARIABLE_ARGS is None:
        _VARIABLE_ARGS = inspect.signature(variables.Variable.__init__)
    bound = _VARIABLE_ARGS.bind(None, *args, **kwargs)
    bound.arguments.pop("self")
    return dict(bound.arguments)


class ResourceVariable(variables.Variable):
    """A variable whose value is read explicitly through its handle; see the module docstring.

    Example:
        v = tf.Variable([1.0, 2.0], name="v", use_resource=True)
        with tf.control_dependencies([v.assign_add([1.0, 1.0])]):
            doubled = v * 2.0  # reads after the update: [4.0, 6.0]
    """

    def __init__(
        self,
        initial_value=None,
        trainable=None,
        collections=None,
        validate_shape=True,
        caching_device=None,
        name=None,
        dtype=None,
        variable_def=None,
        import_scope=None,
        constraint=None,
        distribute_strategy=None,
        synchronization=VariableSynchronization.AUTO,
        aggregation=VariableAggregation.NONE,
        shape=None,
        expected_shape=None,
        use_resource=None,
    ):
        if distribute_strategy is not None:
            raise ValueError(
                "ResourceVariable(distribute_strategy=...): distribution strategies are not "
                "provided; create the variable without one"
            )
        if use_resource is False:
            raise ValueError("ResourceVariable(use_resource=False): it is a resource variable")
        self._cached_value = None
        super().__init__(
            initial_value=initial_value,
            trainable=trainable,
            collections=collections,
            validate_shape=validate_shape,
            caching_device=caching_device,
            name=name,
            variable_def=variable_def,
            dtype=dtype,
            expected_shape=expected_shape,
            import_scope=import_scope,
            constraint=constraint,
            synchronization=synchronization,
            aggregation=aggregation,
            shape=shape,
        )

    # -- construction -------------------------------------------------------------------------
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
        with (
            outside_control_flow(graph),
            graph.control_dependencies(None),
            graph.name_scope(name or "Variable") as scope,
        ):
            handle_name = scope[:-1]
            first_init_op = len(graph.get_operations())
            self._initial_value = self._make_initial_value(graph, initial_value, dtype)
            value_shape = self._initial_value.shape
            shape = self._checked_shape(value_shape, expected_shape, shape)
            self._shape = self._variable_shape(value_shape, validate_shape, shape)
            self._dtype = self._initial_value.dtype.base_dtype
            self._handle = apply_op(
                "VarHandleOp",
                [],
                name=scope,
                shape=self._shape,
                dtype=self._dtype,
                shared_name=handle_name,
            ).outputs[0]
            new_ops = graph.get_operations()[first_init_op:-1]  # all but VarHandleOp itself
            self._colocate(new_ops, handle_name, self._handle.op.device)
            device = self._handle.device
            with graph.name_scope("IsInitialized"):
                self._is_initialized_op = apply_op("VarIsInitializedOp", [self._handle]).outputs[0]
            with (
                graph.name_scope("Assign") as assign_scope,
                graph.colocate_with(None, ignore_existing=True),
                graph.device(device),
            ):
                self._initializer_op = apply_op(
                    "AssignVariableOp", [self._handle, self._initial_value], name=assign_scope
                )
            with graph.name_scope("Read"):
                with graph.device(device):
                    self._graph_element = self._read_op()
                if caching_device is not None:
                    with (
                        graph.colocate_with(None, ignore_existing=True),
                        graph.device(caching_device),
                    ):
                        self._cached_value = apply_op("Identity", [self._graph_element]).outputs[0]
        self._caching_device = caching_device
        self._constraint = constraint
        graph.add_to_collections(collections, self)

    def _make_initial_value(self, graph, initial_value, dtype) -> Tensor:
        """The initial value, converted (or computed, for a callable) under `Initializer/`."""
        dtype = None if dtype is None else dtypes.as_dtype(dtype).base_dtype
        with graph.name_scope("Initializer"):
            value = initial_value() if callable(initial_value) else initial_value
            value = convert_to_tensor(value, dtype=dtype, name="initial_value")
        return self._checked_initial_value(graph, value)

    @staticmethod
    def _variable_shape(value_shape: TensorShape, validate_shape: bool, shape) -> TensorShape:
        """The VarHandleOp shape: `shape` if given (checked), else the initial value's
        (partially known shapes are allowed), unknown when validate_shape is False."""
        if shape is not None:
            return shape
        return value_shape if validate_shape else unknown_shape()

    def _init_from_proto(self, variable_def, import_scope):
        element = self._settings_from_proto(variable_def, import_scope)
        self._handle = element(variable_def.variable_name)
        self._shape = as_shape(self._handle.op.get_attr("shape"))
        self._dtype = dtypes.as_dtype(self._handle.op.get_attr("dtype")).base_dtype
        self._graph_element = element(variable_def.snapshot_name)
        self._is_initialized_op = None

    # -- identity -----------------------------------------------------------------------------
    @property
    def handle(self) -> Tensor:
        """The `resource` tensor naming this variable's storage."""
        return self._handle

    @property
    def name(self) -> str:
        return self._handle.name

    @property
    def op(self):
        return self._handle.op

    @property
    def dtype(self) -> dtypes.DType:
        """The element type (float32, not float32_ref: there is no reference edge)."""
        return self._dtype

    @property
    def shape(self) -> TensorShape:
        return self._shape

    def get_shape(self) -> TensorShape:
        return self._shape

    def set_shape(self, shape):
        raise NotImplementedError("ResourceVariable does not implement set_shape()")

    @property
    def graph(self):
        return self._handle.graph

    @property
    def device(self) -> str:
        return self._handle.device

    @property
    def create(self):
        """The initializer op (TF1's older name for it)."""
        return self._initializer_op

    def _ref(self) -> Tensor:
        return self._handle

    def _as_graph_element(self) -> Tensor:
        """What session.run(v) fetches and feeds: the read `v/Read/ReadVariableOp`."""
        return self._graph_element

    def __repr__(self):
        return f"<tf.Variable '{self.name}' shape={self.shape} dtype={self.dtype.name}>"

    # -- reading ------------------------------------------------------------------------------
    def _read_op(self, name=None) -> Tensor:
        t = apply_op("ReadVariableOp", [self._handle], name=name, dtype=self._dtype).outputs[0]
        t.set_shape(self._shape)
        return t

    def value(self) -> Tensor:
        """A read of the variable where it is used (after the updates it depends on); the cached
        copy on caching_device if one was asked for."""
        if self._cached_value is not None:
            return self._cached_value
        graph = self.graph
        with graph.colocate_with(None, ignore_existing=True), graph.device(self._handle.device):
            return self._read_op()

    def read_value(self) -> Tensor:
        """A new read (`Read_n/ReadVariableOp`) followed by an Identity placed by the caller's
        device scope, as in TF1."""
        graph = self.graph
        with graph.name_scope("Read"):
            value = self._read_op()
        return apply_op("Identity", [value]).outputs[0]

    def sparse_read(self, indices, name=None) -> Tensor:
        """The rows `indices` of the variable (ResourceGather); the gradient is IndexedSlices.

        Example: rows = emb.sparse_read([0, 5, 5])
        """
        graph = self.graph
        with graph.name_scope(name or "Gather") as scope:
            indices = convert_to_tensor(indices, name="indices")
            t = apply_op(
                "ResourceGather", [self._handle, indices], name=scope, dtype=self._dtype
            ).outputs[0]
        if indices.shape.ndims is not None and self._shape.ndims is not None:
            t.set_shape(indices.shape.concatenate(self._shape[1:]))
        return t

    def is_initialized(self, name=None) -> Tensor:
        """A bool scalar: whether the variable holds a value in this Session."""
        return apply_op("VarIsInitializedOp", [self._handle], name=name).outputs[0]

    def initialized_value(self) -> Tensor:
        """The value if initialized, else the initial value (a cond, as for tf.Variable)."""
        from flowgraph.ops.control_flow import cond

        graph = self.graph
        with outside_control_flow(graph), graph.control_dependencies(None):
            return cond(self.is_initialized(), self.read_value, lambda: self._initial_value)

    def eval(self, session=None):
        """The variable's value in `session` (default: the default session)."""
        return self._graph_element.eval(session=session)

    # -- updates ------------------------------------------------------------------------------
    def _updated(self, op, read_value: bool):
        """The op itself, or a read that runs after it (what `sess.run` of the update returns)."""
        if not read_value:
            return op
        graph = self.graph
        with (
            graph.control_dependencies([op]),
            graph.colocate_with(None, ignore_existing=True),
            graph.device(self._handle.device),
        ):
            return self._read_op()

    def _convert_value(self, value, what: str) -> Tensor:
        value = convert_to_tensor(value, dtype=self._dtype, name="value")
        if not self._shape.is_compatible_with(value.shape):
            raise ValueError(
                f"Shapes {self._shape} and {value.shape} are incompatible: cannot {what} "
                f"variable {self.name}"
            )
        return value

    def assign(self, value, use_locking=None, name=None, read_value=True):
        """Stores `value` (AssignVariableOp). Resource updates always hold the variable's lock,
        so `use_locking` changes nothing (as in TF1). Returns the new value, or the op if
        read_value is False."""
        op = apply_op(
            "AssignVariableOp", [self._handle, self._convert_value(value, "assign to")], name=name
        )
        return self._updated(op, read_value)

    def assign_add(self, delta, use_locking=None, name=None, read_value=True):
        """variable += delta (AssignAddVariableOp); returns the new value or the op."""
        op = apply_op(
            "AssignAddVariableOp", [self._handle, self._convert_value(delta, "add to")], name=name
        )
        return self._updated(op, read_value)

    def assign_sub(self, delta, use_locking=None, name=None, read_value=True):
        """variable -= delta (AssignSubVariableOp); returns the new value or the op."""
        op = apply_op(
            "AssignSubVariableOp",
            [self._handle, self._convert_value(delta, "subtract from")],
            name=name,
        )
        return self._updated(op, read_value)

    def _strided_slice_assign(self, begin, end, strides, value, name, masks):
        value = convert_to_tensor(value, dtype=self._dtype, name="value")
        inputs = [self._handle, begin, end, strides, value]
        op = apply_op("ResourceStridedSliceAssign", inputs, name=name, **masks)
        return self._updated(op, True)

    def _scatter_op(self, op_type, sparse_delta, name):
        if not (hasattr(sparse_delta, "indices") and hasattr(sparse_delta, "values")):
            raise TypeError(f"sparse_delta is not IndexedSlices: {sparse_delta}")
        values = convert_to_tensor(sparse_delta.values, dtype=self._dtype)
        op = apply_op(op_type, [self._handle, sparse_delta.indices, values], name=name)
        return self._updated(op, True)

    def scatter_update(self, sparse_delta, use_locking=False, name=None):
        """Writes the rows of the IndexedSlices `sparse_delta` (ResourceScatterUpdate)."""
        return self._scatter_op("ResourceScatterUpdate", sparse_delta, name)

    def scatter_add(self, sparse_delta, use_locking=False, name=None):
        return self._scatter_op("ResourceScatterAdd", sparse_delta, name)

    def scatter_sub(self, sparse_delta, use_locking=False, name=None):
        return self._scatter_op("ResourceScatterSub", sparse_delta, name)

    def scatter_mul(self, sparse_delta, use_locking=False, name=None):
        return self._scatter_op("ResourceScatterMul", sparse_delta, name)

    def scatter_div(self, sparse_delta, use_locking=False, name=None):
        return self._scatter_op("ResourceScatterDiv", sparse_delta, name)

    def scatter_min(self, sparse_delta, use_locking=False, name=None):
        return self._scatter_op("ResourceScatterMin", sparse_delta, name)

    def scatter_max(self, sparse_delta, use_locking=False, name=None):
        return self._scatter_op("ResourceScatterMax", sparse_delta, name)

    def _scatter_nd_op(self, op_type, indices, updates, name):
        updates = convert_to_tensor(updates, dtype=self._dtype)
        op = apply_op(op_type, [self._handle, indices, updates], name=name)
        return self._updated(op, True)

    def scatter_nd_update(self, indices, updates, name=None):
        """variable[tuple(indices[i])] = updates[i] (ResourceScatterNdUpdate)."""
        return self._scatter_nd_op("ResourceScatterNdUpdate", indices, updates, name)

    def scatter_nd_add(self, indices, updates, name=None):
        return self._scatter_nd_op("ResourceScatterNdAdd", indices, updates, name)

    def scatter_nd_sub(self, indices, updates, name=None):
        return self._scatter_nd_op("ResourceScatterNdSub", indices, updates, name)

    def count_up_to(self, limit):
        """Increments this int variable up to `limit`; returns the value before the increment."""
        return apply_op("ResourceCountUpTo", [self._handle], limit=limit, T=self._dtype).outputs[0]

    # -- serialization ------------------------------------------------------------------------
    def _proto_snapshot(self) -> Tensor:
        return self._cached_value if self._cached_value is not None else self._graph_element

    @staticmethod
    def from_proto(variable_def, import_scope=None) -> ResourceVariable:
        return ResourceVariable(variable_def=variable_def, import_scope=import_scope)


def _to_tensor(v: ResourceVariable, dtype=None, name=None, as_ref=False) -> Tensor:
    """A fresh read of the variable; the handle where a reference or a resource is asked for."""
    if as_ref or (dtype is not None and dtype.base_dtype == dtypes.resource):
        return v.handle
    if dtype is not None and not dtype.is_compatible_with(v.dtype):
        raise ValueError(
            f"Incompatible type conversion requested to type '{dtype.name}' for variable of type "
            f"'{v.dtype.name}'"
        )
    return v.value()


# Before tf.Variable's own conversion (lower priorities are tried first).
register_tensor_conversion_function(ResourceVariable, _to_tensor, priority=99)
