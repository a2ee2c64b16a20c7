"""Variable sharing: `variable_scope` and `get_variable` (TF1's variable store).

A program names its parameters by scope ("layer1/weights") and asks for them by name; the store
creates a variable the first time and hands back the same object later when the scope allows reuse.
Each graph has one store (in the collection `_VARSTORE_KEY`, keyed by the variable's full name) and
one scope stack (in `_VARSCOPESTORE_KEY`): two graphs never share variables.

Reuse is a tri-state inherited by nested scopes: False (create; an existing name is an error),
True (look up; a missing name is an error) and AUTO_REUSE (create or look up). Variable names
depend only on the variable scope, never on the enclosing name scope; ops created inside a
`variable_scope` block go in a name scope of the same name, made unique (`x_1/`) when re-entered.
"""

from __future__ import annotations

import contextlib
import enum
import functools

from flowgraph.core import dtypes, errors
from flowgraph.framework import default_graph
from flowgraph.framework.apply_op import graph_of
from flowgraph.framework.convert import convert_to_tensor
from flowgraph.framework.graph import GraphKeys
from flowgraph.ops.variable_store import _get_store

__all__ = [
    "AUTO_REUSE",
    "VariableScope",
    "get_local_variable",
    "get_variable",
    "get_variable_scope",
    "no_regularizer",
    "variable_scope",
]

_VARSCOPESTORE_KEY = ("__varscope",)


class _ReuseMode(enum.Enum):
    """The third reuse state: create a variable if it is missing, reuse it if it exists."""

    AUTO_REUSE = 1


AUTO_REUSE = _ReuseMode.AUTO_REUSE


def no_regularizer(_):
    """A regularizer that adds no loss: overrides a scope's default regularizer."""
    return


# -- scopes -----------------------------------------------------------------------------------
class VariableScope:
    """Defaults for `get_variable` inside one `variable_scope` block, and the scope's name.

    `name` prefixes variable names; `original_name_scope` is the name scope opened when the
    scope was first entered, where layers put their ops.
    """

    def __init__(
        self,
        reuse,
        name="",
        initializer=None,
        regularizer=None,
        caching_device=None,
        partitioner=None,
        custom_getter=None,
        name_scope="",
        dtype=dtypes.float32,
        use_resource=None,
        constraint=None,
    ):
        self._name = name
        self._initializer = initializer
        self._regularizer = regularizer
        self._reuse = reuse
        self._caching_device = caching_device
        self._partitioner = partitioner
        self._custom_getter = custom_getter
        self._name_scope = name_scope
        self._dtype = dtypes.as_dtype(dtype)
        self._use_resource = use_resource
        self._constraint = constraint

    name = property(lambda self: self._name)
    original_name_scope = property(lambda self: self._name_scope)
    reuse = property(lambda self: self._reuse)
    initializer = property(lambda self: self._initializer)
    dtype = property(lambda self: self._dtype)
    use_resource = property(lambda self: self._use_resource)
    regularizer = property(lambda self: self._regularizer)
    caching_device = property(lambda self: self._caching_device)
    partitioner = property(lambda self: self._partitioner)
    custom_getter = property(lambda self: self._custom_getter)
    constraint = property(lambda self: self._constraint)

    def reuse_variables(self):
        """From now on, `get_variable` in this scope looks variables up instead of creating them."""
        self._reuse = True

    def set_initializer(self, initializer):
        self._initializer = initializer

    def set_dtype(self, dtype):
        self._dtype = dtypes.as_dtype(dtype)

    def set_use_resource(self, use_resource):
        self._use_resource = use_resource

    def set_regularizer(self, regularizer):
        self._regularizer = regularizer

    def set_caching_device(self, caching_device):
        self._caching_device = caching_device

    def set_partitioner(self, partitioner):
        self._partitioner = partitioner

    def set_custom_getter(self, custom_getter):
        self._custom_getter = custom_getter

    def get_collection(self, name):
        """Items of collection `name` whose names start with this scope's name."""
        scope = self._name + "/" if self._name else ""
        return [
            item
            for item in default_graph.get().get_collection(name)
            if hasattr(item, "name") and item.name.startswith(scope)
        ]

    def trainable_variables(self):
        return self.get_collection(GraphKeys.TRAINABLE_VARIABLES)

    def global_variables(self):
        return self.get_collection(GraphKeys.GLOBAL_VARIABLES)

    def local_variables(self):
        return self.get_collection(GraphKeys.LOCAL_VARIABLES)

    def get_variable(
        self,
        var_store,
        name,
        shape=None,
        dtype=None,
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
        """Fills unset arguments from this scope, then asks `var_store` for `name` in it."""
        regularizer = self._regularizer if regularizer is None else regularizer
        caching_device = self._caching_device if caching_device is None else caching_device
        partitioner = self._partitioner if partitioner is None else partitioner
        custom_getter = self._custom_getter if custom_getter is None else custom_getter
        reuse = self._reuse if reuse is None else reuse
        use_resource = self._use_resource if use_resource is None else use_resource
        full_name = f"{self._name}/{name}" if self._name else name
        graph = default_graph.get()
        # Variable names depend only on the variable scope, so the name scope is reset.
        with graph.name_scope(None):
            if dtype is not None and initializer is not None and not callable(initializer):
                init_dtype = convert_to_tensor(initializer).dtype.base_dtype
                if init_dtype != dtypes.as_dtype(dtype):
                    raise ValueError(
                        f"Initializer type '{init_dtype.name}' and explicit dtype "
                        f"'{dtypes.as_dtype(dtype).name}' don't match."
                    )
            initializer = self._initializer if initializer is None else initializer
            constraint = self._constraint if constraint is None else constraint
            dtype = self._dtype if dtype is None else dtype
            return var_store.get_variable(
                full_name,
                shape=shape,
                dtype=dtype,
                initializer=initializer,
                regularizer=regularizer,
                reuse=reuse,
                trainable=trainable,
                collections=collections,
                caching_device=caching_device,
                partitioner=partitioner,
                validate_shape=validate_shape,
                use_resource=use_resource,
                custom_getter=custom_getter,
                constraint=constraint,
            )

    def __repr__(self):
        return f"<VariableScope '{self._name}' reuse={self._reuse}>"


class _ScopeStack:
    """A graph's current VariableScope and how often each scope name has been opened."""

    def __init__(self):
        self.current = VariableScope(False)
        self.counts: dict[str, int] = {}

    def open(self, name: str):
        self.counts[name] = self.counts.get(name, 0) + 1

    def close_subscopes(self, name: str):
        """Forgets the subscopes of `name`, so default names restart there when it is re-entered."""
        for key in self.counts:
            if key.startswith(name + "/"):
                self.counts[key] = 0


def _scope_stack(graph) -> _ScopeStack:
    found = graph.get_collection(_VARSCOPESTORE_KEY)
    if found:
        return found[0]
    stack = _ScopeStack()
    graph.add_to_collection(_VARSCOPESTORE_KEY, stack)
    return stack


def get_variable_scope() -> VariableScope:
    """The current VariableScope of the default graph."""
    return _scope_stack(default_graph.get()).current


def _wrap_custom_getter(custom_getter, old_getter):
    """A nested scope's getter runs around the outer one, which runs around the true getter."""
    if old_getter is None:
        return custom_getter

    def wrapped(getter, *args, **kwargs):
        return custom_getter(functools.partial(old_getter, getter), *args, **kwargs)

    return wrapped


def _unique_scope_name(stack: _ScopeStack, prefix: str) -> str:
    """`prefix`, or `prefix_N` with the first N whose full scope name is unused."""
    current = stack.current.name
    name = f"{current}/{prefix}" if current else prefix
    if stack.counts.get(name, 0) == 0:
        return prefix
    idx = 1
    while stack.counts.get(f"{name}_{idx}", 0) > 0:
        idx += 1
    return f"{prefix}_{idx}"


class variable_scope:
    """Opens a variable scope (and a name scope for ops) for `get_variable` and layers.

    Example:
        with tf.variable_scope("layer1"):
            w = tf.get_variable("w", [784, 100])     # "layer1/w"
        with tf.variable_scope("layer1", reuse=True):
            w2 = tf.get_variable("w", [784, 100])    # the same Variable
    """

    def __init__(
        self,
        name_or_scope,
        default_name=None,
        values=None,
        initializer=None,
        regularizer=None,
        caching_device=None,
        partitioner=None,
        custom_getter=None,
        reuse=None,
        dtype=None,
        use_resource=None,
        constraint=None,
        auxiliary_name_scope=True,
    ):
        if default_name is None and name_or_scope is None:
            raise TypeError("If default_name is None then name_or_scope is required")
        if name_or_scope is not None and not isinstance(name_or_scope, (VariableScope, str)):
            raise TypeError("VariableScope: name_or_scope must be a string or VariableScope.")
        if not isinstance(auxiliary_name_scope, bool):
            raise TypeError(
                f"The value of auxiliary_name_scope must be a bool, got {auxiliary_name_scope!r}"
            )
        if reuse not in (None, False, True, AUTO_REUSE):
            raise ValueError(f"reuse must be True, False, None or tf.AUTO_REUSE, got {reuse!r}")
        if custom_getter is not None and not callable(custom_getter):
            raise ValueError(f"The custom_getter must be callable, got {custom_getter!r}")
        self._name_or_scope = name_or_scope
        self._default_name = default_name
        self._values = values
        self._defaults = {
            "initializer": initializer,
            "regularizer": regularizer,
            "caching_device": caching_device,
            "partitioner": partitioner,
            "dtype": dtype,
            "use_resource": use_resource,
            "constraint": constraint,
        }
        self._custom_getter = custom_getter
        self._reuse = None if reuse is False else reuse  # False never overrides an outer True
        self._auxiliary_name_scope = auxiliary_name_scope
        self._exit_stack = None

    def __enter__(self) -> VariableScope:
        stack = contextlib.ExitStack()
        try:
            scope = self._enter(stack)
        except BaseException:
            stack.close()
            raise
        self._exit_stack = stack
        return scope

    def __exit__(self, *exc):
        stack, self._exit_stack = self._exit_stack, None
        return stack.__exit__(*exc)

    def _enter(self, stack: contextlib.ExitStack) -> VariableScope:
        if self._values is not None:
            graph = graph_of(list(self._values))
            if graph is not default_graph.get():
                stack.enter_context(graph.as_default())
        graph = default_graph.get()
        if self._name_or_scope is not None:
            if isinstance(self._name_or_scope, str):
                ns_name = self._name_or_scope
            else:
                ns_name = self._name_or_scope.name.split("/")[-1]
            opened = self._open_name_scope(graph, stack, ns_name)
            if isinstance(self._name_or_scope, str) or opened is None:
                old_name_scope = opened
            else:
                old_name_scope = self._name_or_scope.original_name_scope
            return self._enter_pure(graph, stack, self._name_or_scope, old_name_scope)
        if self._reuse:
            raise ValueError("reuse=True cannot be used without a name_or_scope")
        opened = self._open_name_scope(graph, stack, self._default_name)
        unique = _unique_scope_name(_scope_stack(graph), self._default_name)
        return self._enter_pure(graph, stack, unique, opened)

    def _open_name_scope(self, graph, stack, name):
        """Opens the block's name scope; returns its name with '/' (None if none was opened)."""
        if not self._auxiliary_name_scope:
            current = graph.get_name_scope()
            return stack.enter_context(graph.name_scope(current + "/" if current else None)) or None
        if not name and not graph.get_name_scope():
            return None
        return stack.enter_context(graph.name_scope(name))

    def _enter_pure(self, graph, stack, name_or_scope, old_name_scope) -> VariableScope:
        """Makes the new VariableScope current (TF's `_pure_variable_scope`)."""
        store = _scope_stack(graph)
        old = store.current
        d = self._defaults
        if isinstance(name_or_scope, VariableScope):
            new_name = name_or_scope.name
            store.open(new_name)
            saved_counts = dict(store.counts)
            src = name_or_scope
            reuse = self._reuse if self._reuse else name_or_scope.reuse
            name_scope = name_or_scope.original_name_scope
            getter = name_or_scope.custom_getter
        else:
            new_name = f"{old.name}/{name_or_scope}" if old.name else name_or_scope
            saved_counts = None
            src = old
            reuse = self._reuse or old.reuse
            name_scope = name_or_scope if old_name_scope is None else old_name_scope
            getter = old.custom_getter
        scope = VariableScope(
            reuse,
            name=new_name,
            initializer=src.initializer,
            regularizer=src.regularizer,
            caching_device=src.caching_device,
            partitioner=src.partitioner,
            dtype=src.dtype,
            use_resource=src.use_resource,
            custom_getter=getter,
            name_scope=name_scope,
            constraint=src.constraint if d["constraint"] is None else d["constraint"],
        )
        if d["initializer"] is not None:
            scope.set_initializer(d["initializer"])
        if d["regularizer"] is not None:
            scope.set_regularizer(d["regularizer"])
        if d["caching_device"] is not None:
            scope.set_caching_device(d["caching_device"])
        if d["partitioner"] is not None:
            scope.set_partitioner(d["partitioner"])
        if self._custom_getter is not None:
            scope.set_custom_getter(_wrap_custom_getter(self._custom_getter, getter))
        if d["dtype"] is not None:
            scope.set_dtype(d["dtype"])
        if d["use_resource"] is not None:
            scope.set_use_resource(d["use_resource"])
        if saved_counts is None:
            store.open(new_name)
        store.current = scope
        stack.callback(self._leave, store, old, new_name, saved_counts)
        return scope

    @staticmethod
    def _leave(store: _ScopeStack, old: VariableScope, new_name: str, saved_counts):
        if saved_counts is not None and store.counts:
            store.counts = saved_counts
        else:
            store.close_subscopes(new_name)
        store.current = old


def get_variable(
    name,
    shape=None,
    dtype=None,
    initializer=None,
    regularizer=None,
    trainable=None,
    collections=None,
    caching_device=None,
    partitioner=None,
    validate_shape=True,
    use_resource=None,
    custom_getter=None,
    constraint=None,
    synchronization=None,
    aggregation=None,
):
    """Gets an existing variable with these parameters or creates a new one (TF1 semantics).

    Example:
        with tf.variable_scope("dense"):
            w = tf.get_variable("w", [3, 4], initializer=tf.zeros_initializer())
    """
    _check_sync_args(synchronization, aggregation)
    graph = default_graph.get()
    return get_variable_scope().get_variable(
        _get_store(graph),
        name,
        shape=shape,
        dtype=dtype,
        initializer=initializer,
        regularizer=regularizer,
        trainable=trainable,
        collections=collections,
        caching_device=caching_device,
        partitioner=partitioner,
        validate_shape=validate_shape,
        use_resource=use_resource,
        custom_getter=custom_getter,
        constraint=constraint,
    )


def get_local_variable(
    name,
    shape=None,
    dtype=None,
    initializer=None,
    regularizer=None,
    trainable=False,
    collections=None,
    caching_device=None,
    partitioner=None,
    validate_shape=True,
    use_resource=None,
    custom_getter=None,
    constraint=None,
    synchronization=None,
    aggregation=None,
):
    """`get_variable` for a variable in LOCAL_VARIABLES (not saved, not trained by default)."""
    collections = list(collections or []) + [GraphKeys.LOCAL_VARIABLES]
    return get_variable(
        name,
        shape=shape,
        dtype=dtype,
        initializer=initializer,
        regularizer=regularizer,
        trainable=trainable,
        collections=collections,
        caching_device=caching_device,
        partitioner=partitioner,
        validate_shape=validate_shape,
        use_resource=use_resource,
        custom_getter=custom_getter,
        constraint=constraint,
        synchronization=synchronization,
        aggregation=aggregation,
    )


def _check_sync_args(synchronization, aggregation):
    """Accepts only the single-replica values: there are no mirrored variables here."""
    for arg, value in (("synchronization", synchronization), ("aggregation", aggregation)):
        if value is not None and str(getattr(value, "name", value)).upper() not in ("AUTO", "NONE"):
            raise errors.UnimplementedError(
                None,
                None,
                f"get_variable({arg}={value!r}) is not supported: flowgraph has no "
                "distribution strategies; use the default.",
            )
