"""The client Session (whitepaper §2 "Sessions"): Extend ships new graph parts as GraphDefs to
the runtime, Run names feeds, fetches and targets.

Fetches may be any nesting of lists, tuples, namedtuples and dicts of Tensors, Operations and
"name:port"/"name" strings; an Operation fetches as None. The structure is flattened to unique
tensor names for the runtime and rebuilt around the results. A feed key may be such a nesting
too (an LSTMStateTuple fed back as the next initial state), with a value of the same structure.

What leaves the Session never aliases state: every buffer a later step reads (constants,
variables) is read-only in the runtime, so a fetched array that is read-only is copied, and a
writable one is private to its step. Every method may be called from many threads at once.
"""

from __future__ import annotations

import collections
import contextlib
import threading

import numpy as np

from flowgraph.core import errors
from flowgraph.core.protos import CallableOptions, ConfigProto, GraphDef
from flowgraph.distributed import local, messages
from flowgraph.distributed.master import Master
from flowgraph.framework import default_graph, sparse_tensor
from flowgraph.framework.indexed_slices import IndexedSlices, IndexedSlicesValue
from flowgraph.framework.operation import Operation, Tensor
from flowgraph.runtime.partial_execution import Signature
from flowgraph.session import callables, default_session, remote
from flowgraph.session.feeds import expand_sparse_feeds, feed_array, feed_tensor, flatten_feeds


class _FetchMapper:
    """Flattens a fetch structure into elements and rebuilds it from their values."""

    def __init__(self, graph, fetches):
        self.tensors: list[Tensor] = []
        self.targets: list[Operation] = []
        self._index: dict[Tensor, int] = {}
        self._build = self._map(graph, fetches)

    def _map(self, graph, f):
        if f is None:
            raise TypeError(f"Fetch argument None has invalid type {type(f)}")
        if isinstance(f, (list, tuple)) and not hasattr(f, "_fields"):
            parts = [self._map(graph, x) for x in f]
            kind = type(f)
            return lambda vals: kind(p(vals) for p in parts)
        if hasattr(f, "_fields"):  # namedtuple
            parts = [self._map(graph, x) for x in f]
            kind = type(f)
            return lambda vals: kind(*(p(vals) for p in parts))
        if isinstance(f, (dict, collections.abc.Mapping)):
            parts = [(k, self._map(graph, v)) for k, v in f.items()]
            kind = type(f) if not isinstance(f, collections.defaultdict) else dict
            return lambda vals: kind((k, p(vals)) for k, p in parts)
        if isinstance(f, IndexedSlices):  # fetched as its parts, returned as IndexedSlicesValue
            parts = [self._map(graph, t) for t in (f.values, f.indices)]
            shape = (
                self._map(graph, f.dense_shape)
                if f.dense_shape is not None
                else (lambda vals: None)
            )
            return lambda vals: IndexedSlicesValue(parts[0](vals), parts[1](vals), shape(vals))
        if isinstance(f, sparse_tensor.SparseTensor):  # fetched as its three parts
            parts = [self._map(graph, t) for t in sparse_tensor.fetch_parts(f)]
            return lambda vals: sparse_tensor.SparseTensorValue(*(p(vals) for p in parts))
        el = _fetch_element(graph, f)
        if isinstance(el, Operation):
            if el not in self.targets:
                self.targets.append(el)
            return lambda vals: None
        if el not in self._index:
            self._index[el] = len(self.tensors)
            self.tensors.append(el)
        i = self._index[el]
        return lambda vals: vals[i]

    def build(self, values):
        return self._build(values)


def _fetch_element(graph, f):
    try:
        if hasattr(f, "_as_graph_element") and not isinstance(f, (Tensor, Operation)):
            f = f._as_graph_element()
        el = graph.as_graph_element(f, allow_tensor=True, allow_operation=True)
    except TypeError as e:
        raise TypeError(
            f"Fetch argument {f!r} has invalid type {type(f)}, must be a string or Tensor. ({e})"
        ) from None
    except (KeyError, ValueError) as e:
        raise ValueError(f"Fetch argument {f!r} cannot be interpreted as a Tensor. ({e})") from None
    if not graph.is_fetchable(el):
        op = el.op if isinstance(el, Tensor) else el
        raise ValueError(
            f"Operation {op.name!r} has been marked as not fetchable. Typically this happens "
            f"when it is defined in another function or code block (a while_loop body). Use "
            f"return values, explicit Python locals or TensorFlow collections to access it."
        )
    return el


def _fetch_value(value):
    """What Run returns for one tensor: a writable array, or a NumPy scalar for rank 0."""
    if isinstance(value, np.ndarray):
        if value.ndim == 0:
            return value[()]
        return value if value.flags.writeable else value.copy()
    if isinstance(value, np.generic):
        return value
    return np.asarray(value)[()] if np.ndim(value) == 0 else np.asarray(value)


class BaseSession:
    """A Session over a runtime; see the module docstring."""

    def __init__(self, target: str = "", graph=None, config: ConfigProto | None = None):
        if graph is None:
            graph = default_graph.get()
        if target and not isinstance(target, str):
            raise TypeError(f"target must be a string, got {type(target).__name__}")
        self._graph = graph
        self._target = target
        self._config = config if config is not None else ConfigProto()
        self._local = None  # the in-process master and worker of a local Session
        self._master = self._make_master(target, self._config)
        # a master of this process: cached Runs and callables may skip its requests
        self._inproc_master = self._master if isinstance(self._master, Master) else None
        self._runs: dict[tuple, _CachedRun] = {}  # see _cached_run
        self._handle = self._master.create_session(
            messages.CreateSessionRequest(config=self._config)
        ).session_handle
        self._graph_version = 0
        self._sent_ops = 0
        self._sent_mutations = 0
        self._closed = False
        self._default_ctx = None
        self._lock = threading.Lock()  # guards _sent_ops, _sent_mutations and _closed

    def _make_master(self, target, config):
        """The master this Session talks to, by request and response messages only."""
        if target in ("", "local", "direct://"):
            self._local = local.local_cluster(config)
            return self._local.master
        if isinstance(target, str) and target.startswith("inproc://"):
            return local.master_for(target)
        if isinstance(target, str) and target.startswith(remote.SCHEME):
            served = local.served_master(target, config)  # a server of this process's
            return served if served is not None else remote.RemoteMaster(target, config)
        raise errors.UnimplementedError(
            None,
            None,
            f"Session target {target!r} is not supported: use '' for the local runtime or "
            "grpc://host:port for a server's",
        )

    # -- properties ---------------------------------------------------------------------------
    @property
    def graph(self):
        return self._graph

    @property
    def graph_def(self) -> GraphDef:
        return self._graph.as_graph_def()

    @property
    def sess_str(self) -> str:
        return self._target

    def list_devices(self):
        resp = self._master.list_devices(messages.ListDevicesRequest(session_handle=self._handle))
        return [
            _DeviceAttributes(d.name, d.device_type)
            for d in list(resp.local_device) + list(resp.remote_device)
        ]

    # -- lifecycle ----------------------------------------------------------------------------
    def close(self):
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._master.close_session(messages.CloseSessionRequest(session_handle=self._handle))
        if self._local is not None:
            self._local.close()

    def as_default(self):
        return default_session.push(self)

    def __enter__(self):
        self._default_ctx = default_session.push(self)
        self._graph_ctx = self._graph.as_default()
        self._graph_ctx.__enter__()
        self._default_ctx.__enter__()
        return self

    def __exit__(self, exc_type, exc, tb):
        self._default_ctx.__exit__(exc_type, exc, tb)
        self._graph_ctx.__exit__(exc_type, exc, tb)
        self.close()

    def __del__(self):
        with contextlib.suppress(Exception):  # interpreter shutdown: nothing left to release
            self.close()

    # -- Extend and Run -----------------------------------------------------------------------
    def _extend(self):
        """Sends the ops added (or changed) since the last Extend. Threads making their first
        run at once must not send the same ops twice, hence the lock (the check before it is
        only a fast path)."""
        g = self._graph
        if g.version == self._sent_ops and len(g._mutated_ops) == self._sent_mutations:
            return
        with self._lock:
            if g.version == self._sent_ops and len(g._mutated_ops) == self._sent_mutations:
                return
            new, changed, sent_mutations = g._nodes_for_extend(self._sent_ops, self._sent_mutations)
            gd = GraphDef(node=new)
            if g._functions:  # the function library travels whole; the runtime keeps new ones
                gd.library.CopyFrom(g._library())
            resp = self._master.extend_session(
                messages.ExtendSessionRequest(
                    session_handle=self._handle,
                    graph_def=gd,
                    current_graph_version=self._graph_version,
                    replace=GraphDef(node=changed) if changed else None,
                )
            )
            self._graph_version = resp.new_graph_version
            self._sent_ops += len(new)  # not g.version: another thread may be adding ops
            self._sent_mutations = sent_mutations

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        """Runs the ops needed for `fetches`, feeding `feed_dict`; returns values in the same
        structure."""
        if self._closed:
            raise RuntimeError("Attempted to use a closed Session.")
        if options is None and (not feed_dict or type(feed_dict) is dict):
            cached = self._cached_run(fetches, feed_dict)
            if cached is not None:
                return self._run_cached(cached, feed_dict, run_metadata)
        feed_names, feed_values = self._feeds(feed_dict)
        if (
            type(fetches) is Tensor
            and fetches.graph is self._graph
            and self._graph.is_fetchable(fetches)
        ):  # the common case, no mapper
            values = self._do_run(feed_names, feed_values, (fetches,), (), options, run_metadata)
            return _fetch_value(values[0])
        mapper = _FetchMapper(self._graph, fetches)
        values = self._do_run(
            feed_names, feed_values, mapper.tensors, mapper.targets, options, run_metadata
        )
        return mapper.build([_fetch_value(v) for v in values])

    def _cached_run(self, fetches, feed_dict) -> _CachedRun | None:
        """The _CachedRun of these fetches and feed keys, made on their first Run; None when
        they have none: fetches that are not hashable (a dict, a list of lists), a feed key
        that is not a feedable Tensor of this graph. The cache holds _RUNS_KEPT entries; an
        entry made before a prevent_fetching/prevent_feeding call is not used after it (the
        graph's prevent_version is part of the key), so that call's ValueError is raised."""
        kind = type(fetches)
        marks = self._graph.prevent_version
        try:
            key = (kind, tuple(fetches) if kind is list else fetches, marks, *(feed_dict or ()))
            cached = self._runs.get(key)
        except TypeError:  # unhashable
            return None
        if cached is not None:
            return cached
        graph = self._graph
        feeds = tuple(feed_dict or ())
        if any(
            type(t) is not Tensor or t.graph is not graph or not graph.is_feedable(t) for t in feeds
        ):
            return None
        self._extend()
        cached = _CachedRun(self, fetches, feeds)
        if len(self._runs) >= _RUNS_KEPT:
            self._runs.clear()
        self._runs[key] = cached
        return cached

    def _run_cached(self, cached: _CachedRun, feed_dict, run_metadata):
        """Runs a _CachedRun: by its LocalRun when that runs it, else by the master's Run."""
        values = (
            [feed_array(t, v) for t, v in zip(cached.feeds, feed_dict.values())]
            if feed_dict
            else []
        )
        self._extend()
        out = self._run_local(cached.local, values) if cached.local is not None else None
        if out is None:
            mapper = cached.mapper
            out = self._do_run(
                cached.sig.feeds, values, mapper.tensors, mapper.targets, None, run_metadata
            )
        return cached.build(out)

    def _run_local(self, local, feed_values) -> list | None:
        """`local(feed_values)` (a LocalRun: its fetches, or None to take the master's Run),
        its errors named as the master's are."""
        try:
            return local(feed_values)
        except errors.OpError as e:
            raise self._decorate(e) from e.__cause__

    def _do_run(self, feed_names, feed_values, tensors, targets, options, run_metadata):
        self._extend()
        req = messages.RunStepRequest(
            self._handle,
            list(zip(feed_names, feed_values)),
            [t.name for t in tensors],
            [op.name for op in targets],
            options,
        )
        try:
            resp = self._master.run_step(req)
        except errors.OpError as e:
            raise self._decorate(e) from e.__cause__
        if run_metadata is not None and resp.metadata is not None:
            if resp.metadata.HasField("step_stats"):
                run_metadata.step_stats.CopyFrom(resp.metadata.step_stats)
            run_metadata.partition_graphs.extend(resp.metadata.partition_graphs)
        return [value for _, value in resp.tensor]

    def _decorate(self, e: errors.OpError) -> errors.OpError:
        """Adds the creating op and the user's line that created it, found in this graph."""
        name = getattr(e, "node_name", None)
        op = self._graph._get_operation_by_name_unsafe(name) if name else None
        if op is None:
            return e
        err = type(e)(
            op.node_def, op, f"{e.message}\n\tnode '{op.name}' defined at {op.creation_site()}"
        )
        err.node_name = name
        return err

    def _feeds(self, feed_dict):
        """Feed names and arrays. A key may be a nested structure of tensors with a value of the
        same structure; a tensor given twice (as `x` and as "x:0") takes the last value, as in
        TF."""
        if not feed_dict:
            return (), ()
        graph = self._graph
        if type(feed_dict) is dict:  # the common case: a dict keyed by this graph's Tensors
            names, values = [], []
            for key, value in feed_dict.items():
                if type(key) is not Tensor or key.graph is not graph or not graph.is_feedable(key):
                    break
                names.append(key.name)
                values.append(feed_array(key, value))
            else:
                return names, values
        feeds = {}
        for key, value in expand_sparse_feeds(flatten_feeds(feed_dict)):
            t = feed_tensor(graph, key)
            feeds.pop(t.name, None)  # the last value wins, and its place in the order
            feeds[t.name] = feed_array(t, value)
        return tuple(feeds), tuple(feeds.values())

    def partial_run_setup(self, fetches, feeds=None):
        """Starts a step that will be fed `feeds` and fetch `fetches` over several partial_run
        calls."""
        if self._closed:
            raise RuntimeError("Attempted to use a closed Session.")
        self._extend()
        mapper = _FetchMapper(self._graph, fetches)
        feeds = [
            part
            for f in feeds or ()
            for part in (
                sparse_tensor.fetch_parts(f) if isinstance(f, sparse_tensor.SparseTensor) else (f,)
            )
        ]
        req = messages.PartialRunSetupRequest(
            self._handle,
            [feed_tensor(self._graph, f).name for f in feeds],
            [t.name for t in mapper.tensors],
            [op.name for op in mapper.targets],
        )
        try:
            return self._master.partial_run_setup(req).partial_run_handle
        except errors.OpError as e:
            raise self._decorate(e) from e.__cause__

    def partial_run(self, handle, fetches, feed_dict=None):
        """Continues the partial run `handle`: feeds `feed_dict`, returns `fetches`."""
        mapper = _FetchMapper(self._graph, fetches)
        names, values = self._feeds(feed_dict)
        req = messages.RunStepRequest(
            self._handle,
            list(zip(names, values)),
            [t.name for t in mapper.tensors],
            partial_run_handle=handle,
        )
        try:
            out = [value for _, value in self._master.run_step(req).tensor]
        except errors.OpError as e:
            raise self._decorate(e) from e.__cause__
        return mapper.build([_fetch_value(v) for v in out])

    def make_callable(self, fetches, feed_list=None, accept_options=False):
        """A function running `fetches` with positional feeds for `feed_list` (TF1's fast
        path): the master plans the signature once (MakeCallable) and each call is one
        RunCallable. A call given RunOptions runs as a plain Run of the same signature, as
        in TF (a callable's RunOptions are fixed when it is made)."""
        if self._closed:
            raise RuntimeError("Attempted to use a closed Session.")
        self._extend()
        mapper = _FetchMapper(self._graph, fetches)
        keys = list(feed_list or ())
        parts = [
            sparse_tensor.fetch_parts(k)
            if isinstance(k, sparse_tensor.SparseTensor)
            else (feed_tensor(self._graph, k),)
            for k in keys
        ]
        feeds = [t for p in parts for t in p]
        names = [t.name for t in feeds]
        callable_options = CallableOptions(
            feed=names,
            fetch=[t.name for t in mapper.tensors],
            target=[op.name for op in mapper.targets],
        )
        master_callable = callables.MasterCallable(self, callable_options)

        def call(*args, options=None, run_metadata=None):
            if len(args) != len(keys):
                raise TypeError(f"Expected {len(keys)} feed values, got {len(args)}")
            vals = []
            for key, (t, *_), arg in zip(keys, parts, args):
                if isinstance(key, sparse_tensor.SparseTensor):  # (indices, values, shape)
                    vals.extend(feed_array(p, v) for p, v in sparse_tensor.expand_feed(key, arg))
                else:
                    vals.append(feed_array(t, arg))
            if options is not None:
                out = self._do_run(
                    names, vals, mapper.tensors, mapper.targets, options, run_metadata
                )
            else:
                out = master_callable.run(vals, run_metadata)
            return mapper.build([_fetch_value(v) for v in out])

        call.master_callable = master_callable  # keeps the handle alive as long as `call`
        return call

    def _make_callable_from_options(self, callable_options):
        """TF's Session._make_callable_from_options (Keras's backend uses it): a function of
        the feed values in `callable_options.feed` order returning the list of fetched values;
        `tensor_connection` feeds tensors from other tensors inside the step."""
        if self._closed:
            raise RuntimeError("Attempted to use a closed Session.")
        self._extend()
        feeds = [feed_tensor(self._graph, name) for name in callable_options.feed]
        master_callable = callables.MasterCallable(self, callable_options)

        def call(*args, run_metadata=None):
            if len(args) != len(feeds):
                raise TypeError(f"Expected {len(feeds)} feed values, got {len(args)}")
            vals = [feed_array(t, a) for t, a in zip(feeds, args)]
            return [_fetch_value(v) for v in master_callable.run(vals, run_metadata)]

        call.master_callable = master_callable
        return call


_RUNS_KEPT = 256  # cached Run signatures per Session (cleared when full)


class _CachedRun:
    """What a Run of some fetches and feed keys needs, worked out once: the fetch mapper, the
    signature, the feed Tensors (in feed_dict order) and, with a master of this process, the
    signature's LocalRun (distributed/local_run.py)."""

    __slots__ = ("build", "feeds", "local", "mapper", "sig")

    def __init__(self, session: BaseSession, fetches, feeds: tuple):
        self.mapper = mapper = _FetchMapper(session._graph, fetches)
        self.feeds = feeds
        self.sig = Signature(
            tuple(t.name for t in feeds),
            tuple(t.name for t in mapper.tensors),
            tuple(op.name for op in mapper.targets),
        )
        if type(fetches) is Tensor:
            self.build = lambda values: _fetch_value(values[0])
        else:
            self.build = lambda values: mapper.build([_fetch_value(v) for v in values])
        master = session._inproc_master
        self.local = master.local_run(session._handle, self.sig) if master is not None else None


class _DeviceAttributes(collections.namedtuple("_DeviceAttributes", ["name", "device_type"])):
    memory_limit_bytes = 0


class Session(BaseSession):
    """tf.Session: `with tf.Session() as sess: sess.run(fetches, feed_dict)`."""

    @staticmethod
    def reset(target, containers=None, config=None):
        """Clears the resource containers (variables, queues) of the cluster at `target` and
        closes its sessions; `containers` names them (None: the default container)."""
        remote.reset(target, containers, config)


class InteractiveSession(BaseSession):
    """A Session that installs itself as the default session when created (for shells)."""

    def __init__(self, target="", graph=None, config=None):
        super().__init__(target, graph, config)
        default_session.install(self)
        self._graph_ctx = self._graph.as_default()
        self._graph_ctx.__enter__()

    def close(self):
        if not self._closed:
            default_session.uninstall(self)
            try:
                self._graph_ctx.__exit__(None, None, None)
            except (AssertionError, ValueError, IndexError):
                pass
        super().close()
