"""tf.train.Scaffold: the ops a monitored session needs around the user's model (TF1's
monitored_session.Scaffold): how to initialize it, how to tell it is ready, what to save and
which summaries to write.

Each piece the caller leaves out is taken from its graph collection (INIT_OP, READY_OP, ...,
SAVERS), or built with TF's default and stored there, so every hook and session creator that
finalizes a Scaffold of one graph shares the same ops. `finalize()` then freezes the graph:
nothing a training loop runs may add nodes (the whitepaper's Extend happens once).
"""

from __future__ import annotations

from flowgraph.framework import default_graph
from flowgraph.framework.graph import GraphKeys
from flowgraph.platform import tf_logging as logging

__all__ = ["Scaffold"]


def _coalesce(a, b):
    return a if a is not None else b


class Scaffold:
    """The init, ready, local-init, summary ops and the Saver of a training program.

    `init_fn`, if given, is called as init_fn(scaffold, session) after init_op.

    Example:
        scaffold = tf.train.Scaffold(saver=tf.train.Saver(max_to_keep=2))
        with tf.train.MonitoredTrainingSession(checkpoint_dir=d, scaffold=scaffold) as sess: ...
    """

    def __init__(
        self,
        init_op=None,
        init_feed_dict=None,
        init_fn=None,
        ready_op=None,
        ready_for_local_init_op=None,
        local_init_op=None,
        summary_op=None,
        saver=None,
        copy_from_scaffold=None,
        local_init_feed_dict=None,
    ):
        if copy_from_scaffold is not None:
            if not isinstance(copy_from_scaffold, Scaffold):
                raise TypeError("copy_from_scaffold is not a Scaffold instance.")
            other = copy_from_scaffold
            init_op = _coalesce(init_op, other.init_op)
            init_feed_dict = _coalesce(init_feed_dict, other.init_feed_dict)
            init_fn = _coalesce(init_fn, other._user_init_fn)
            ready_op = _coalesce(ready_op, other.ready_op)
            ready_for_local_init_op = _coalesce(
                ready_for_local_init_op, other.ready_for_local_init_op
            )
            local_init_op = _coalesce(local_init_op, other.local_init_op)
            local_init_feed_dict = _coalesce(local_init_feed_dict, other.local_init_feed_dict)
            summary_op = _coalesce(summary_op, other.summary_op)
            saver = _coalesce(saver, other.saver)
        self._user_init_fn = init_fn
        self._init_fn = (lambda sess: init_fn(self, sess)) if init_fn else None
        self._init_op = init_op
        self._init_feed_dict = init_feed_dict
        self._ready_op = ready_op
        self._ready_for_local_init_op = ready_for_local_init_op
        self._local_init_op = local_init_op
        self._local_init_feed_dict = local_init_feed_dict
        self._summary_op = summary_op
        self._saver = saver

    def finalize(self):
        """Fills in every missing piece (from its collection or TF's default), builds the
        Saver and finalizes the default graph. Returns self."""
        if self._init_op is None:
            self._init_op = Scaffold.get_or_default("init_op", GraphKeys.INIT_OP, _default_init_op)
        if self._ready_op is None:
            self._ready_op = Scaffold.get_or_default(
                "ready_op", GraphKeys.READY_OP, _default_ready_op
            )
        if self._ready_for_local_init_op is None:
            self._ready_for_local_init_op = Scaffold.get_or_default(
                "ready_for_local_init_op",
                GraphKeys.READY_FOR_LOCAL_INIT_OP,
                _default_ready_for_local_init_op,
            )
        if self._local_init_op is None:
            self._local_init_op = Scaffold.get_or_default(
                "local_init_op", GraphKeys.LOCAL_INIT_OP, Scaffold.default_local_init_op
            )
        if self._summary_op is None:
            from flowgraph.summary import merge_all

            self._summary_op = Scaffold.get_or_default(
                "summary_op", GraphKeys.SUMMARY_OP, merge_all
            )
        if self._saver is None:
            self._saver = _get_saver_or_default()
        self._saver.build()
        default_graph.get().finalize()
        logging.info("Graph was finalized.")
        return self

    @property
    def init_fn(self):
        return self._init_fn

    @property
    def init_op(self):
        return self._init_op

    @property
    def ready_op(self):
        return self._ready_op

    @property
    def ready_for_local_init_op(self):
        return self._ready_for_local_init_op

    @property
    def local_init_op(self):
        return self._local_init_op

    @property
    def local_init_feed_dict(self):
        return self._local_init_feed_dict

    @property
    def summary_op(self):
        return self._summary_op

    @property
    def saver(self):
        return self._saver

    @property
    def init_feed_dict(self):
        return self._init_feed_dict

    @staticmethod
    def get_or_default(arg_name, collection_key, default_constructor):
        """The one item of `collection_key`, or default_constructor()'s result, which is
        then added to the collection (unless None)."""
        graph = default_graph.get()
        elements = graph.get_collection(collection_key)
        if elements:
            if len(elements) > 1:
                raise RuntimeError(
                    f'More than one item in the collection "{collection_key}". Please indicate '
                    "which one to use by passing it to the tf.Scaffold constructor as:  "
                    f"tf.Scaffold({arg_name}=item to use)"
                )
            return elements[0]
        op = default_constructor()
        if op is not None:
            graph.add_to_collection(collection_key, op)
        return op

    @staticmethod
    def default_local_init_op():
        """Groups the local variables' initializer and the tables' initializer."""
        from flowgraph.ops import variables
        from flowgraph.ops.array import group
        from flowgraph.ops.lookup_ops import tables_initializer

        return group(variables.local_variables_initializer(), tables_initializer())


def _default_init_op():
    from flowgraph.ops import variables
    from flowgraph.ops.array import group

    return group(variables.global_variables_initializer())


def _default_ready_op():
    from flowgraph.ops import variables

    return variables.report_uninitialized_variables()


def _default_ready_for_local_init_op():
    from flowgraph.ops import variables

    return variables.report_uninitialized_variables(variables.global_variables())


def _get_saver_or_default():
    """The Saver of the SAVERS collection, or a new sharded one (allow_empty) added to it."""
    from flowgraph.train.saver import Saver

    graph = default_graph.get()
    savers = graph.get_collection(GraphKeys.SAVERS)
    if savers:
        if len(savers) > 1:
            raise RuntimeError(
                f"More than one item in collection {GraphKeys.SAVERS}. Please indicate which "
                "one to use by passing it to the constructor."
            )
        return savers[0]
    saver = Saver(sharded=True, allow_empty=True)
    graph.add_to_collection(GraphKeys.SAVERS, saver)
    return saver
