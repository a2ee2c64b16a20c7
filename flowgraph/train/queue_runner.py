"""tf.train.QueueRunner (whitepaper §4.5, §4.6): threads that keep running a queue's enqueue ops,
so that input is read and preprocessed while the previous batch trains.

Each enqueue op gets a thread that runs it until the queue is closed (an error of the
`queue_closed_exception_types`, OutOfRangeError by default: its input ran out); the last
thread of a session to finish closes the queue, so consumers drain it and then see
OutOfRangeError. With a Coordinator, one more thread waits for a stop request and then closes
the queue with cancel_pending_enqueues, which releases enqueues blocked on a full queue; any
other error stops the coordinator, which re-raises it in `join`.

In a local Session a thread paces itself on its queue between runs (QueueBase.pace): when its
enqueue has filled the queue, it waits until the queue has drained half way and then refills
it in a burst. Only when its next run starts changes; the queue serves enqueues as always.
"""

from __future__ import annotations

import logging
import threading
import weakref

from flowgraph.core import errors
from flowgraph.framework import default_graph
from flowgraph.framework.graph import GraphKeys

__all__ = ["QueueRunner", "add_queue_runner", "start_queue_runners"]

_log = logging.getLogger(__name__)


class QueueRunner:
    """Holds a queue, its enqueue ops (one thread each) and the ops that close it."""

    def __init__(
        self,
        queue=None,
        enqueue_ops=None,
        close_op=None,
        cancel_op=None,
        queue_closed_exception_types=None,
        queue_runner_def=None,
        import_scope=None,
    ):
        if queue_runner_def is not None:
            if queue or enqueue_ops:
                raise ValueError("queue_runner_def and queue are mutually exclusive.")
            self._init_from_proto(queue_runner_def, import_scope)
        else:
            if queue is None or not enqueue_ops:
                raise ValueError("Queue and enqueue_ops are both required.")
            self._queue = queue
            self._enqueue_ops = list(enqueue_ops)
            self._close_op = close_op if close_op is not None else queue.close()
            self._cancel_op = (
                cancel_op if cancel_op is not None else queue.close(cancel_pending_enqueues=True)
            )
            types = tuple(queue_closed_exception_types or (errors.OutOfRangeError,))
            for t in types:
                if not (isinstance(t, type) and issubclass(t, errors.OpError)):
                    raise TypeError(
                        f"queue_closed_exception_types, when provided, must contain tf.errors "
                        f"classes; got {t!r}"
                    )
            self._queue_closed_exception_types = types
        self._lock = threading.Lock()
        self._runs_per_session = weakref.WeakKeyDictionary()  # guarded by _lock
        self._exceptions_raised: list = []  # guarded by _lock

    def _init_from_proto(self, queue_runner_def, import_scope):
        graph = default_graph.get()

        def element(name):
            if import_scope:
                name = f"{import_scope}/{name}"
            return graph.as_graph_element(name)

        self._queue = element(queue_runner_def.queue_name)
        self._enqueue_ops = [element(n) for n in queue_runner_def.enqueue_op_name]
        self._close_op = element(queue_runner_def.close_op_name)
        self._cancel_op = element(queue_runner_def.cancel_op_name)
        codes = list(queue_runner_def.queue_closed_exception_types)
        self._queue_closed_exception_types = (
            tuple(errors.exception_type_from_error_code(c) for c in codes)
            if codes
            else (errors.OutOfRangeError,)
        )

    # -- properties ---------------------------------------------------------------------------
    @property
    def queue(self):
        return self._queue

    @property
    def enqueue_ops(self):
        return self._enqueue_ops

    @property
    def close_op(self):
        return self._close_op

    @property
    def cancel_op(self):
        return self._cancel_op

    @property
    def queue_closed_exception_types(self):
        return self._queue_closed_exception_types

    @property
    def exceptions_raised(self):
        """Exceptions the threads raised (without a coordinator to hand them to)."""
        return self._exceptions_raised

    @property
    def name(self):
        return self._queue.name

    # -- threads ------------------------------------------------------------------------------
    def _run(self, sess, enqueue_op, coord=None):
        decremented = False
        try:
            enqueue = sess.make_callable(enqueue_op)
            queue = None  # its resource, found after the first run made it; False: none here
            while True:
                if coord is not None and coord.should_stop():
                    break
                try:
                    enqueue()
                    if queue is None:
                        queue = _local_queue(sess, self._queue) or False
                    if queue is not False:
                        queue.pace()
                except self._queue_closed_exception_types:
                    with self._lock:
                        self._runs_per_session[sess] -= 1
                        decremented = True
                        last = self._runs_per_session[sess] == 0
                    if last:
                        try:
                            sess.run(self._close_op)
                        except (errors.OpError, RuntimeError) as e:
                            _log.debug("Ignored exception: %s", e)
                    return
        except Exception as e:  # handed to the coordinator, which re-raises it in join
            if coord is not None:
                coord.request_stop(e)
            else:
                _log.error("Exception in QueueRunner: %s", e)
                with self._lock:
                    self._exceptions_raised.append(e)
                raise
        finally:
            if not decremented:
                with self._lock:
                    self._runs_per_session[sess] -= 1

    def _close_on_stop(self, sess, cancel_op, coord):
        coord.wait_for_stop()
        try:
            sess.run(cancel_op)
        except (errors.OpError, RuntimeError) as e:
            _log.debug("Ignored exception: %s", e)

    def create_threads(self, sess, coord=None, daemon=False, start=False):
        """The threads that run the enqueue ops in `sess` (none if already running there)."""
        with self._lock:
            if self._runs_per_session.get(sess, 0) > 0:
                return []
            self._runs_per_session[sess] = len(self._enqueue_ops)
            self._exceptions_raised = []
        threads = [
            threading.Thread(target=self._run, args=(sess, op, coord)) for op in self._enqueue_ops
        ]
        if coord is not None:
            threads.append(
                threading.Thread(
                    target=self._close_on_stop,
                    args=(sess, self._cancel_op, coord),
                    name=f"QueueRunnerThread-{self.name}",
                )
            )
        for t in threads:
            if coord is not None:
                coord.register_thread(t)
            if daemon:
                t.daemon = True
            if start:
                t.start()
        return threads

    # -- serialization (MetaGraphDef collections) -----------------------------------------------
    def to_proto(self, export_scope=None):
        from flowgraph.core.protos import QueueRunnerDef

        def strip(name):
            if export_scope and name.startswith(export_scope + "/"):
                return name[len(export_scope) + 1 :]
            return name

        return QueueRunnerDef(
            queue_name=strip(self._queue.name),
            enqueue_op_name=[strip(op.name) for op in self._enqueue_ops],
            close_op_name=strip(self._close_op.name),
            cancel_op_name=strip(self._cancel_op.name),
            queue_closed_exception_types=[t.code for t in self._queue_closed_exception_types],
        )

    @staticmethod
    def from_proto(queue_runner_def, import_scope=None):
        return QueueRunner(queue_runner_def=queue_runner_def, import_scope=import_scope)


def _local_queue(sess, queue):
    """The resource of `queue` (a data_flow_ops queue) in local Session `sess`'s containers,
    found as its kernel names it (shared_name, else the op's name); None for any other
    session, or a queue kind that cannot pace."""
    cluster = getattr(sess, "_local", None)
    if cluster is None:
        return None
    op = getattr(queue, "queue_ref", queue)
    op = getattr(op, "op", op)
    try:
        container, name = op.get_attr("container"), op.get_attr("shared_name") or op.name
    except ValueError:  # not a queue op
        return None
    for worker in cluster.workers.values():
        for device in worker.devices:
            resource = device.resource_mgr.find(container, name)
            if resource is not None:
                return resource if hasattr(resource, "pace") else None
    return None


def add_queue_runner(qr, collection=GraphKeys.QUEUE_RUNNERS):
    """Adds `qr` to the graph's collection, where start_queue_runners finds it."""
    default_graph.get().add_to_collection(collection, qr)


def start_queue_runners(
    sess=None, coord=None, daemon=True, start=True, collection=GraphKeys.QUEUE_RUNNERS
):
    """Starts the threads of every QueueRunner in the graph's collection; returns them."""
    from flowgraph.session import default_session
    from flowgraph.session.session import BaseSession

    if sess is None:
        sess = default_session.get()
        if sess is None:
            raise ValueError(
                "Cannot start queue runners: No default session is registered. Use `with "
                "sess.as_default()` or pass an explicit session to "
                "tf.start_queue_runners(sess=sess)"
            )
    if not isinstance(sess, BaseSession):
        if type(sess).__name__ in ("MonitoredSession", "SingularMonitoredSession"):
            return []
        raise TypeError(f"sess must be a `tf.Session` object. Given class: {type(sess)}")
    runners = sess.graph.get_collection(collection)
    if not runners:
        _log.warning(
            "`tf.train.start_queue_runners()` was called when no queue runners were defined."
        )
    threads = []
    for qr in runners:
        threads.extend(qr.create_threads(sess, coord=coord, daemon=daemon, start=start))
    return threads
