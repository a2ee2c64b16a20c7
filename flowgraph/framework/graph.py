"""The client-side Graph (whitepaper §2): operations, name scopes, control-dependency, device
and colocation scopes, collections, and its GraphDef form.

A Graph only grows. Sessions remember how much of it they have shipped to the runtime and send
the rest as a GraphDef on the next run (the paper's Session.Extend).
"""

from __future__ import annotations

import contextlib
import re

from flowgraph.core import attr_value, device_spec
from flowgraph.core.protos import AttrValue, GraphDef, VersionDef
from flowgraph.framework import default_graph
from flowgraph.framework.operation import Operation, Tensor

GRAPH_DEF_VERSION = 27
_VALID_OP_NAME = re.compile(r"^[A-Za-z0-9.][A-Za-z0-9_.\\/>-]*$")
_VALID_SCOPE_NAME = re.compile(r"^[A-Za-z0-9_.\\/>-]*$")


class GraphKeys:
    """Standard collection names (TF1's tf.GraphKeys)."""

    GLOBAL_VARIABLES = "variables"
    VARIABLES = GLOBAL_VARIABLES
    LOCAL_VARIABLES = "local_variables"
    METRIC_VARIABLES = "metric_variables"
    MODEL_VARIABLES = "model_variables"
    TRAINABLE_VARIABLES = "trainable_variables"
    SUMMARIES = "summaries"
    QUEUE_RUNNERS = "queue_runners"
    TABLE_INITIALIZERS = "table_initializer"
    ASSET_FILEPATHS = "asset_filepaths"
    MOVING_AVERAGE_VARIABLES = "moving_average_variables"
    REGULARIZATION_LOSSES = "regularization_losses"
    CONCATENATED_VARIABLES = "concatenated_variables"
    SAVERS = "savers"
    WEIGHTS = "weights"
    BIASES = "biases"
    ACTIVATIONS = "activations"
    UPDATE_OPS = "update_ops"
    LOSSES = "losses"
    SAVEABLE_OBJECTS = "saveable_objects"
    RESOURCES = "resources"
    LOCAL_RESOURCES = "local_resources"
    TRAINABLE_RESOURCE_VARIABLES = "trainable_resource_variables"
    INIT_OP = "init_op"
    LOCAL_INIT_OP = "local_init_op"
    READY_OP = "ready_op"
    READY_FOR_LOCAL_INIT_OP = "ready_for_local_init_op"
    SUMMARY_OP = "summary_op"
    GLOBAL_STEP = "global_step"
    EVAL_STEP = "eval_step"
    TRAIN_OP = "train_op"
    COND_CONTEXT = "cond_context"
    WHILE_CONTEXT = "while_context"


class _Controller:
    """One `control_dependencies` block: its control ops and the ops created inside it."""

    def __init__(self, control_ops):
        self.control_ops = control_ops  # None clears every outer block
        self.created: set[int] = set()


class Graph:
    """A dataflow graph. See the module docstring."""

    _count = 0

    def __init__(self):
        Graph._count += 1
        self._number = Graph._count
        self._ops: list[Operation] = []
        self._by_name: dict[str, Operation] = {}
        self._names_in_use: dict[str, int] = {}
        self._name_stack = ""
        self._controllers: list[_Controller] = []
        self._device_stack: list = []
        self._colocation_stack: list[Operation] = []
        self._collections: dict[str, list] = {}
        self._finalized = False
        self._container = ""  # tf.container: where new stateful ops keep their state
        self._mutated_ops: list[Operation] = []
        self._gradient_override_map: dict[str, str] = {}
        self._control_flow_context = None
        self._attr_scope_map: dict = {}
        self.seed = None
        self._building_function = False
        self._functions: dict = {}  # name -> FunctionDef: the graph's function library
        self._unfetchable_ops: set[int] = set()  # ids of ops marked by prevent_fetching
        self._unfeedable_tensors: set[str] = set()  # names of tensors marked by prevent_feeding
        # Counts prevent_fetching/prevent_feeding calls: a Session's cached Run signatures are
        # checked again when it changes.
        self.prevent_version = 0

    # -- identity -----------------------------------------------------------------------------
    def __repr__(self):
        return f"<flowgraph.Graph#{self._number}>"

    @property
    def version(self) -> int:
        return len(self._ops)

    @property
    def graph_def_versions(self) -> VersionDef:
        return VersionDef(producer=GRAPH_DEF_VERSION)

    @property
    def finalized(self) -> bool:
        return self._finalized

    def finalize(self):
        self._finalized = True

    def _unsafe_unfinalize(self):
        self._finalized = False

    @contextlib.contextmanager
    def as_default(self):
        with default_graph.push(self):
            yield self

    # -- names --------------------------------------------------------------------------------
    def get_name_scope(self) -> str:
        return self._name_stack

    def unique_name(self, name: str, mark_as_used: bool = True) -> str:
        """`name` under the current scope, suffixed `_1`, `_2`, ... if already used (TF's rule)."""
        if self._name_stack:
            name = self._name_stack + "/" + name
        key = name.lower()
        i = self._names_in_use.get(key, 0)
        if mark_as_used:
            self._names_in_use[key] = i + 1
        if i > 0:
            base = key
            while key in self._names_in_use:
                key = f"{base}_{i}"
                i += 1
            if mark_as_used:
                self._names_in_use[key] = 1
            name = f"{name}_{i - 1}"
        return name

    @contextlib.contextmanager
    def name_scope(self, name):
        """Opens scope `name` (made unique); `name/` re-enters a scope; None or '' resets."""
        if name:
            valid = _VALID_SCOPE_NAME if self._name_stack else _VALID_OP_NAME
            if not valid.match(name):
                raise ValueError(f"'{name}' is not a valid scope name")
        old = self._name_stack
        if not name:
            new = ""
        elif name[-1] == "/":
            new = name[:-1]
        else:
            new = self.unique_name(name)
        self._name_stack = new
        try:
            yield new + "/" if new else ""
        finally:
            self._name_stack = old

    # -- scopes that shape new ops ------------------------------------------------------------
    @contextlib.contextmanager
    def control_dependencies(self, control_inputs):
        """New ops run after `control_inputs`; None clears the enclosing blocks."""
        if control_inputs is None:
            controller = _Controller(None)
        else:
            ops = []
            for c in control_inputs:
                op = self.as_graph_element(
                    _control_target(c), allow_tensor=True, allow_operation=True
                )
                op = op.op if isinstance(op, Tensor) else op
                if op not in ops:
                    ops.append(op)
            controller = _Controller(ops)
        self._controllers.append(controller)
        try:
            yield
        finally:
            self._controllers.remove(controller)

    def _active_controllers(self) -> list:
        """The open blocks since the last `None` block: an op made inside `None` is unseen by
        the blocks around it (TF swaps in an empty stack), so it never dominates them."""
        start = 0
        for i, controller in enumerate(self._controllers):
            if controller.control_ops is None:
                start = i + 1
        return self._controllers[start:]

    def _control_inputs_for(self, input_ops) -> list[Operation]:
        """Control inputs of the open blocks since the last `None` block, outermost first (TF's
        order); a block is skipped when an input was created inside it (it already waits)."""
        result = []
        for controller in self._active_controllers():
            if any(op._id in controller.created for op in input_ops):
                continue  # an input already runs after this block's control ops
            result.extend(
                c for c in controller.control_ops if c not in input_ops and c not in result
            )
        return result

    @contextlib.contextmanager
    def device(self, device_name_or_function):
        """Requests a device for new ops: a string spec (merged with outer scopes) or a function."""
        self._device_stack.append(device_name_or_function)
        try:
            yield
        finally:
            self._device_stack.pop()

    @contextlib.contextmanager
    def container(self, container_name):
        """Stateful ops created in the block (variables, queues, tables) keep their state in
        resource container `container_name`, which `tf.Session.reset(target, [name])` clears
        without touching other state (whitepaper §4.7). '' is the default container."""
        original, self._container = self._container, container_name
        try:
            yield self._container
        finally:
            self._container = original

    def _apply_device(self, op: Operation) -> str:
        spec = device_spec.DeviceSpec()
        for entry in reversed(self._device_stack):  # innermost first; inner fields win
            if entry is None:
                break
            if callable(entry) and not isinstance(entry, device_spec.DeviceSpec):
                op._device = spec.to_string()
                spec = device_spec.parse(entry(op) or "")
            else:
                spec = device_spec.parse(entry).merge_from(spec)
        return spec.to_string()

    @contextlib.contextmanager
    def colocate_with(self, op, ignore_existing: bool = False):
        """New ops are placed with `op` (TF's `_class: loc:@op` attr)."""
        if op is None and not ignore_existing:
            raise ValueError(
                "Trying to reset colocation (op is None) but ignore_existing is not True"
            )
        saved = self._colocation_stack
        if ignore_existing:
            self._colocation_stack = []
        if op is not None:
            target = op.op if isinstance(op, Tensor) else getattr(op, "op", op)
            if not isinstance(target, Operation):
                target = self.as_graph_element(
                    _control_target(op), allow_tensor=True, allow_operation=True
                )
                target = target.op if isinstance(target, Tensor) else target
            self._colocation_stack = self._colocation_stack + [target]
        device_stack, self._device_stack = (
            self._device_stack,
            ([None] if op is not None else self._device_stack),
        )
        try:
            yield
        finally:
            self._colocation_stack = saved
            self._device_stack = device_stack

    @contextlib.contextmanager
    def gradient_override_map(self, op_type_map: dict):
        """Uses the gradient registered under the mapped name for ops of these types."""
        saved = dict(self._gradient_override_map)
        self._gradient_override_map.update(op_type_map)
        try:
            yield
        finally:
            self._gradient_override_map = saved

    @contextlib.contextmanager
    def _attr_scope(self, attr_map: dict):
        """Sets these attrs on every op created inside (TF's private hook behind jit_scope). A
        value is an AttrValue, a plain attr value, or a callable of the new op's NodeDef that
        returns one; None clears an outer scope's attr."""
        saved = dict(self._attr_scope_map)
        self._attr_scope_map.update(attr_map)
        try:
            yield
        finally:
            self._attr_scope_map = saved

    def _apply_attr_scope(self, op: Operation):
        for key, value in self._attr_scope_map.items():
            if callable(value):
                value = value(op.node_def)
            if isinstance(value, AttrValue):
                value = attr_value.from_attr_value(value)
            if value is not None:
                op._set_attr(key, value)

    # -- creating ops -------------------------------------------------------------------------
    def create_op(
        self,
        op_type,
        inputs,
        dtypes=None,
        input_types=None,
        name=None,
        attrs=None,
        op_def=None,
        compute_shapes=True,
        compute_device=True,
    ):
        """TF1's low-level constructor: inputs are Tensors; attrs are already resolved."""
        from flowgraph.framework import apply_op

        return apply_op.create(
            self,
            op_type,
            list(inputs),
            dict(attrs or {}),
            name,
            output_types=dtypes,
            input_types=input_types,
        )

    def _add_op(self, op_type, name, op_def, inputs, attrs, output_types, input_types=None):
        """Registers a new, validated Operation, applying the active scopes."""
        if self._finalized:
            raise RuntimeError("Graph is finalized and cannot be modified.")
        input_ops = [t.op for t in inputs]
        control = self._control_inputs_for(input_ops)
        op = Operation(
            self,
            len(self._ops) + 1,
            name,
            op_type,
            op_def,
            inputs,
            control,
            attrs,
            output_types,
            "",
            input_types,
        )
        takes_container = op_def is not None and "container" in op_def.attrs
        if self._container and takes_container and not op._attrs.get("container"):
            op._attrs["container"] = self._container
        if op_type in self._gradient_override_map:  # TF1 applies the map active at creation
            op._attrs["_gradient_op_type"] = self._gradient_override_map[op_type]
        if self._attr_scope_map:
            self._apply_attr_scope(op)
        if self._colocation_stack:
            groups = sorted({g for c in self._colocation_stack for g in c._colocation_names()})
            op._attrs["_class"] = groups
            op._device = self._colocation_stack[-1]._device
        elif self._device_stack:
            op._device = self._apply_device(op)
        if self._control_flow_context is not None:
            self._control_flow_context.add_op(op)
        self._ops.append(op)
        self._by_name[name] = op
        for controller in self._active_controllers():
            controller.created.add(op._id)
        return op

    def _mutated(self, op: Operation):
        self._mutated_ops.append(op)

    def _remove_ops_since(self, version: int):
        """Undoes the creation of ops after `version` (a failed `import_graph_def` is atomic)."""
        removed = self._ops[version:]
        del self._ops[version:]
        gone = {id(op) for op in removed}
        for op in removed:
            self._by_name.pop(op._name, None)
            for t in op._inputs:
                if id(t._op) not in gone and op in t._consumers:
                    t._consumers.remove(op)
        self._mutated_ops = [op for op in self._mutated_ops if id(op) not in gone]

    # -- what a Session may feed and fetch ----------------------------------------------------
    def prevent_fetching(self, op: Operation):
        self._unfetchable_ops.add(id(op))
        self.prevent_version += 1

    def prevent_feeding(self, tensor: Tensor):
        self._unfeedable_tensors.add(tensor.name)
        self.prevent_version += 1

    def is_fetchable(self, tensor_or_op) -> bool:
        """False for ops marked by prevent_fetching and for values inside a while loop (they
        exist once per iteration; only the loop's Exits leave it), as in TF."""
        op = tensor_or_op.op if isinstance(tensor_or_op, Tensor) else tensor_or_op
        ctx = getattr(op, "_control_flow_context", None)
        return id(op) not in self._unfetchable_ops and (ctx is None or ctx.fetchable(op))

    def is_feedable(self, tensor: Tensor) -> bool:
        ctx = getattr(tensor.op, "_control_flow_context", None)
        return tensor.name not in self._unfeedable_tensors and (
            ctx is None or ctx.fetchable(tensor.op)
        )

    # -- lookups ------------------------------------------------------------------------------
    def get_operations(self) -> list[Operation]:
        return list(self._ops)

    def get_operation_by_name(self, name: str) -> Operation:
        if not isinstance(name, str):
            raise TypeError(f"Operation names are strings (or similar), not {type(name).__name__}.")
        return self.as_graph_element(name, allow_tensor=False, allow_operation=True)

    def get_tensor_by_name(self, name: str) -> Tensor:
        if not isinstance(name, str):
            raise TypeError(f"Tensor names are strings (or similar), not {type(name).__name__}.")
        return self.as_graph_element(name, allow_tensor=True, allow_operation=False)

    def _get_operation_by_name_unsafe(self, name: str):
        return self._by_name.get(name)

    def as_graph_element(self, obj, allow_tensor=True, allow_operation=True):
        """Resolves a Tensor, Operation or 'name'/'name:i' string to an element of this graph."""
        if (
            allow_tensor
            and isinstance(obj, Tensor)
            or allow_operation
            and isinstance(obj, Operation)
        ):
            owner = obj.graph
            if owner is not self:
                raise ValueError(
                    f"{obj!r} belongs to {owner!r}, not to {self!r}: it is not an element of this "
                    "graph."
                )
            return obj
        if hasattr(obj, "_as_graph_element"):
            return self.as_graph_element(obj._as_graph_element(), allow_tensor, allow_operation)
        if isinstance(obj, bytes):
            obj = obj.decode()
        if not isinstance(obj, str):
            kinds = " or ".join(
                k for k, a in (("Tensor", allow_tensor), ("Operation", allow_operation)) if a
            )
            raise TypeError(f"Can not convert a {type(obj).__name__} into a {kinds}.")
        if ":" in obj:
            if not allow_tensor:
                raise ValueError(f"Name '{obj}' appears to refer to a Tensor, not a Operation.")
            op_name, _, index = obj.rpartition(":")
            op = self._by_name.get(op_name)
            if op is None:
                raise KeyError(
                    f"The name '{obj}' refers to a Tensor which does not exist. The operation, "
                    f"'{op_name}', does not exist in the graph."
                )
            try:
                return op.outputs[int(index)]
            except (IndexError, ValueError):
                raise KeyError(
                    f"The name '{obj}' refers to a Tensor which does not exist. The operation, "
                    f"'{op_name}', "
                    f"exists but only has {len(op.outputs)} outputs."
                ) from None
        if not allow_operation:
            if obj in self._by_name:
                raise ValueError(
                    f"The name '{obj}' refers to an Operation, not a Tensor. Tensor names must be "
                    'of the form "<op_name>:<output_index>".'
                )
            raise KeyError(f"The name '{obj}' looks a like a Tensor name, but is not a valid one.")
        op = self._by_name.get(obj)
        if op is None:
            raise KeyError(f"The name '{obj}' refers to an Operation not in the graph.")
        return op

    # -- collections --------------------------------------------------------------------------
    def add_to_collection(self, name, value):
        self._collections.setdefault(name, []).append(value)

    def add_to_collections(self, names, value):
        names = (names,) if isinstance(names, str) else set(names)
        for name in names:
            self.add_to_collection(name, value)

    def get_collection_ref(self, name) -> list:
        return self._collections.setdefault(name, [])

    def get_collection(self, name, scope=None) -> list:
        items = self._collections.get(name, [])
        if scope is None:
            return list(items)
        pattern = re.compile(scope)
        return [i for i in items if hasattr(i, "name") and pattern.match(i.name)]

    def get_all_collection_keys(self) -> list:
        return [k for k, v in self._collections.items() if isinstance(v, list)]

    def clear_collection(self, name):
        self._collections.pop(name, None)

    # -- GraphDef ----------------------------------------------------------------------------
    def as_graph_def(self, from_version=None, add_shapes=False) -> GraphDef:
        """The GraphDef of ops created after op number `from_version` (all ops by default)."""
        gd = GraphDef()
        gd.versions.CopyFrom(self.graph_def_versions)
        if self._functions:
            gd.library.CopyFrom(self._library())
        for op in self._ops[from_version or 0 :]:
            nd = gd.node.add()
            nd.CopyFrom(op.node_def)
            if add_shapes:
                from flowgraph.core.attr_value import to_attr_value

                nd.attr["_output_shapes"].CopyFrom(
                    to_attr_value([t.shape for t in op.outputs], "list(shape)")
                )
        return gd

    def _add_function(self, fdef) -> None:
        """Adds a FunctionDef to the library (framework/function.py builds them)."""
        self._check_not_finalized()
        name = fdef.signature.name
        if name in self._functions and self._functions[name] != fdef:
            raise ValueError(f"Another function is already defined with the name {name}.")
        self._functions[name] = fdef

    def _library(self):
        from flowgraph.core.protos import FunctionDefLibrary

        return FunctionDefLibrary(function=list(self._functions.values()))

    def _nodes_for_extend(self, cursor: int, sent_mutations: int):
        """NodeDefs to ship: new ops since `cursor`, and already-shipped ops mutated since."""
        changed = {op._name: op for op in self._mutated_ops[sent_mutations:] if op._id <= cursor}
        new = [op.node_def for op in self._ops[cursor:]]
        return new, [op.node_def for op in changed.values()], len(self._mutated_ops)

    def _check_not_finalized(self):
        if self._finalized:
            raise RuntimeError("Graph is finalized and cannot be modified.")


def _control_target(c):
    """Variables and other objects expose the op to depend on (`.op`, `_as_graph_element`)."""
    if isinstance(c, (Tensor, Operation, str)):
        return c
    if hasattr(c, "_as_graph_element"):
        return c._as_graph_element()
    if hasattr(c, "op"):
        return c.op
    raise TypeError(f"Can not convert a {type(c).__name__} into a Tensor or Operation.")


def get_default_graph() -> Graph:
    return default_graph.get()


def reset_default_graph():
    default_graph.reset()
