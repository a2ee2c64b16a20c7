"""tf.train.Supervisor: TF1's older training-loop manager (supervisor.py), built on the same
pieces as MonitoredSession: a SessionManager initializes or restores the model from `logdir`,
a Coordinator stops every thread together, and the chief runs three "standard services" as
LooperThreads beside the training loop: summaries and global steps/sec every
`save_summaries_secs`, a checkpoint every `save_model_secs` (whitepaper §3.3 checkpointing,
§9.1 summaries).

Arguments left at USE_DEFAULT are taken from the graph collections (READY_OP, INIT_OP,
LOCAL_INIT_OP, SAVERS, SUMMARY_OP, GLOBAL_STEP) or built and added there; None disables
the piece. The constructor finalizes the graph.
"""

from __future__ import annotations

import contextlib
import os
import time

from flowgraph.core.protos import SessionLog, Summary
from flowgraph.framework import default_graph
from flowgraph.framework.graph import GraphKeys
from flowgraph.platform import tf_logging as logging
from flowgraph.train import training_util
from flowgraph.train.coordinator import Coordinator, LooperThread
from flowgraph.train.session_manager import SessionManager

__all__ = ["Supervisor"]

_VARIABLE_OP_TYPES = ("Variable", "VariableV2")


class Supervisor:
    """Initializes or restores a model, runs the chief's summary and checkpoint services and
    stops the training threads together.

    Example:
        sv = tf.train.Supervisor(logdir="/tmp/run", save_model_secs=60)
        with sv.managed_session() as sess:
            while not sv.should_stop():
                sess.run(train_op)
    """

    USE_DEFAULT = 0

    def __init__(
        self,
        graph=None,
        ready_op=USE_DEFAULT,
        ready_for_local_init_op=USE_DEFAULT,
        is_chief=True,
        init_op=USE_DEFAULT,
        init_feed_dict=None,
        local_init_op=USE_DEFAULT,
        logdir=None,
        summary_op=USE_DEFAULT,
        saver=USE_DEFAULT,
        global_step=USE_DEFAULT,
        save_summaries_secs=120,
        save_model_secs=600,
        recovery_wait_secs=30,
        stop_grace_secs=120,
        checkpoint_basename="model.ckpt",
        session_manager=None,
        summary_writer=USE_DEFAULT,
        init_fn=None,
        local_init_run_options=None,
    ):
        graph = graph if graph is not None else default_graph.get()
        self._graph = graph
        with graph.as_default():
            self._init_ops(ready_op, ready_for_local_init_op, init_op, local_init_op)
            self._init_feed_dict = init_feed_dict
            self._saver = self._default(saver, GraphKeys.SAVERS, _default_saver)
            self._summary_op = self._default(summary_op, GraphKeys.SUMMARY_OP, _merge_all)
            self._global_step = self._default(
                global_step, GraphKeys.GLOBAL_STEP, _default_global_step_tensor
            )
            self._meta_graph_def = self._export_meta_graph()
        self._is_chief = is_chief
        self._coord = Coordinator()
        self._recovery_wait_secs = recovery_wait_secs
        self._stop_grace_secs = stop_grace_secs
        self._init_fn = init_fn
        self._local_init_run_options = local_init_run_options
        self._logdir = None
        self._save_summaries_secs = None
        self._save_model_secs = None
        self._save_path = None
        self._summary_writer = None
        if is_chief:  # only the chief writes events and checkpoints
            self._logdir = logdir
            self._save_summaries_secs = save_summaries_secs
            self._save_model_secs = save_model_secs
            if logdir:
                self._save_path = os.path.join(logdir, checkpoint_basename)
            if summary_writer is Supervisor.USE_DEFAULT:
                if logdir:
                    from flowgraph.summary import FileWriter

                    self._summary_writer = FileWriter(logdir)
            else:
                self._summary_writer = summary_writer
            self._graph_added_to_summary = False
        self._session_manager = session_manager or SessionManager(
            local_init_op=self._local_init_op,
            ready_op=self._ready_op,
            ready_for_local_init_op=self._ready_for_local_init_op,
            graph=graph,
            recovery_wait_secs=recovery_wait_secs,
            local_init_run_options=local_init_run_options,
        )
        self._verify_setup()
        graph.finalize()

    # -- the pieces, from arguments, collections or defaults ------------------------------------
    def _default(self, given, key, make):
        """`given` unless USE_DEFAULT; else the first item of collection `key`, or make()'s
        result, added to the collection when not None."""
        if given is not Supervisor.USE_DEFAULT:
            return given
        found = self._graph.get_collection(key)
        if len(found) > 1:
            logging.info("Found %d %s operations. Returning the first one.", len(found), key)
        if found:
            return found[0]
        made = make()
        if made is not None:
            self._graph.add_to_collection(key, made)
        return made

    def _init_ops(self, ready_op, ready_for_local_init_op, init_op, local_init_op):
        from flowgraph.ops import variables

        self._ready_op = self._default(
            ready_op, GraphKeys.READY_OP, variables.report_uninitialized_variables
        )
        self._ready_for_local_init_op = self._default(
            ready_for_local_init_op, GraphKeys.READY_FOR_LOCAL_INIT_OP, lambda: None
        )
        self._init_op = self._default(
            init_op, GraphKeys.INIT_OP, variables.global_variables_initializer
        )
        self._local_init_op = self._default(
            local_init_op, GraphKeys.LOCAL_INIT_OP, _default_local_init_op
        )

    def _export_meta_graph(self):
        from flowgraph.train import meta_graph

        return meta_graph.export_meta_graph(
            graph_def=self._graph.as_graph_def(add_shapes=True),
            saver_def=self._saver.saver_def if self._saver else None,
        )

    def _verify_setup(self):
        """Replicas share variables only through explicit devices (a ps job)."""
        if self._is_chief:
            return
        for op in self._graph.get_operations():
            if op.type in _VARIABLE_OP_TYPES and not op.device:
                raise ValueError(
                    f"When using replicas, all Variables must have their device set: {op}"
                )

    # -- properties ------------------------------------------------------------------------------
    is_chief = property(lambda self: self._is_chief)
    session_manager = property(lambda self: self._session_manager)
    coord = property(lambda self: self._coord)
    init_op = property(lambda self: self._init_op)
    init_feed_dict = property(lambda self: self._init_feed_dict)
    ready_op = property(lambda self: self._ready_op)
    ready_for_local_init_op = property(lambda self: self._ready_for_local_init_op)
    summary_writer = property(lambda self: self._summary_writer)
    summary_op = property(lambda self: self._summary_op)
    save_summaries_secs = property(lambda self: self._save_summaries_secs)
    global_step = property(lambda self: self._global_step)
    saver = property(lambda self: self._saver)
    save_model_secs = property(lambda self: self._save_model_secs)
    save_path = property(lambda self: self._save_path)

    # -- sessions and services -------------------------------------------------------------------
    def _write_graph(self):
        from flowgraph.train import graph_io

        if self._logdir:
            graph_def = self._graph.as_graph_def(add_shapes=True)
            graph_io.write_graph(graph_def, self._logdir, "graph.pbtxt")
        if self._summary_writer and not self._graph_added_to_summary:
            self._summary_writer.add_graph(self._graph)
            self._summary_writer.add_meta_graph(self._meta_graph_def)
            self._graph_added_to_summary = True

    def start_standard_services(self, sess):
        """Starts the chief's summary, steps/sec and checkpoint threads; returns them."""
        if not self._is_chief:
            raise RuntimeError(
                "Only chief supervisor can start standard services. Because only chief "
                "supervisors can write events."
            )
        if not self._logdir:
            logging.warning("Standard services need a 'logdir' passed to the SessionManager")
            return None
        if self._global_step is not None and self._summary_writer:
            current_step = training_util.global_step(sess, self._global_step)
            self._summary_writer.add_session_log(SessionLog(status=SessionLog.START), current_step)
        threads = []
        if self._save_summaries_secs and self._summary_writer:
            if self._summary_op is not None:
                threads.append(SVSummaryThread(self, sess))
            if self._global_step is not None:
                threads.append(SVStepCounterThread(self, sess))
        if self.saver and self._save_model_secs:
            threads.append(SVTimerCheckpointThread(self, sess))
        for t in threads:
            t.start()
        return threads

    def prepare_or_wait_for_session(
        self,
        master="",
        config=None,
        wait_for_checkpoint=False,
        max_wait_secs=7200,
        start_standard_services=True,
    ):
        """The chief's Session restored from `logdir` or initialized (then its services
        start); a worker's Session once the chief made the model ready. Queue runners start
        with the standard services."""
        self._coord.clear_stop()
        if self._summary_writer:
            self._summary_writer.reopen()
        if self._is_chief:
            sess = self._session_manager.prepare_session(
                master,
                init_op=self.init_op,
                saver=self.saver,
                checkpoint_dir=self._logdir,
                wait_for_checkpoint=wait_for_checkpoint,
                max_wait_secs=max_wait_secs,
                config=config,
                init_feed_dict=self._init_feed_dict,
                init_fn=self._init_fn,
            )
            self._write_graph()
            if start_standard_services:
                logging.info("Starting standard services.")
                self.start_standard_services(sess)
        else:
            sess = self._session_manager.wait_for_session(
                master, config=config, max_wait_secs=max_wait_secs
            )
        if start_standard_services:
            logging.info("Starting queue runners.")
            self.start_queue_runners(sess)
        return sess

    def start_queue_runners(self, sess, queue_runners=None):
        """Starts the threads of `queue_runners` (default: the graph's) under the coordinator."""
        if queue_runners is None:
            queue_runners = self._graph.get_collection(GraphKeys.QUEUE_RUNNERS)
        threads = []
        for qr in queue_runners:
            threads.extend(qr.create_threads(sess, coord=self._coord, daemon=True, start=True))
        return threads

    def loop(self, timer_interval_secs, target, args=None, kwargs=None):
        """Starts a LooperThread calling target(*args, **kwargs) every timer_interval_secs."""
        looper = LooperThread(
            self._coord, timer_interval_secs, target=target, args=args, kwargs=kwargs
        )
        looper.start()
        return looper

    def stop(self, threads=None, close_summary_writer=True, ignore_live_threads=False):
        """Stops the threads (re-raising an error one reported) and closes the writer."""
        self._coord.request_stop()
        try:
            self._coord.join(
                threads,
                stop_grace_period_secs=self._stop_grace_secs,
                ignore_live_threads=ignore_live_threads,
            )
        finally:
            if close_summary_writer and self._summary_writer:
                self._summary_writer.add_session_log(SessionLog(status=SessionLog.STOP))
                self._summary_writer.close()
                self._graph_added_to_summary = False

    def request_stop(self, ex=None):
        self._coord.request_stop(ex=ex)

    def should_stop(self) -> bool:
        return self._coord.should_stop()

    def stop_on_exception(self):
        return self._coord.stop_on_exception()

    def wait_for_stop(self):
        self._coord.wait_for_stop()

    def summary_computed(self, sess, summary, global_step=None):
        """Writes a summary the caller computed, at the global step unless one is given."""
        if not self._summary_writer:
            raise RuntimeError("Writing a summary requires a summary writer.")
        if global_step is None and self.global_step is not None:
            global_step = training_util.global_step(sess, self.global_step)
        self._summary_writer.add_summary(summary, global_step)

    @contextlib.contextmanager
    def managed_session(
        self, master="", config=None, start_standard_services=True, close_summary_writer=True
    ):
        """A context manager around prepare_or_wait_for_session: an exception in the block
        stops the threads and is re-raised (OutOfRangeError ends it cleanly); on exit the
        services stop and the session closes.

        Example:
            with sv.managed_session() as sess:
                while not sv.should_stop(): sess.run(train_op)
        """
        sess = None
        try:
            sess = self.prepare_or_wait_for_session(
                master=master, config=config, start_standard_services=start_standard_services
            )
            yield sess
        except Exception as e:  # noqa: BLE001 - handed to the coordinator, re-raised by stop()
            self.request_stop(e)
        finally:
            try:
                self.stop(close_summary_writer=close_summary_writer)
            finally:
                if sess is not None:
                    sess.close()

    # TF's CamelCase aliases.
    PrepareSession = prepare_or_wait_for_session
    StartQueueRunners = start_queue_runners
    StartStandardServices = start_standard_services
    Stop = stop
    RequestStop = request_stop
    Loop = loop
    ShouldStop = should_stop
    StopOnException = stop_on_exception
    WaitForStop = wait_for_stop
    SummaryComputed = summary_computed


def _default_saver():
    from flowgraph.ops import variables
    from flowgraph.train.saver import Saver

    return Saver() if variables.global_variables() else None


def _merge_all():
    from flowgraph.summary import merge_all

    return merge_all()


def _default_local_init_op():
    from flowgraph.ops import variables
    from flowgraph.ops.array import group
    from flowgraph.ops.lookup_ops import tables_initializer

    return group(variables.local_variables_initializer(), tables_initializer())


def _default_global_step_tensor():
    """The graph's `global_step:0` if it is an integer, else None (TF's lookup by name)."""
    graph = default_graph.get()
    try:
        step = graph.get_tensor_by_name("global_step:0")
    except (KeyError, ValueError):
        return None
    if step.dtype.base_dtype.is_integer:
        return step
    logging.warning("Found 'global_step' is not an int type: %s", step.dtype)
    return None


class SVSummaryThread(LooperThread):
    """Runs the summary op every save_summaries_secs and writes it at the global step."""

    def __init__(self, sv, sess):
        super().__init__(sv.coord, sv.save_summaries_secs)
        self._sv = sv
        self._sess = sess

    def run_loop(self):
        if self._sv.global_step is not None:
            summary_strs, global_step = self._sess.run([self._sv.summary_op, self._sv.global_step])
        else:
            summary_strs = self._sess.run(self._sv.summary_op)
            global_step = None
        if self._sv.summary_writer:
            logging.info("Recording summary at step %s.", global_step)
            self._sv.summary_writer.add_summary(summary_strs, global_step)


class SVStepCounterThread(LooperThread):
    """Writes "<global step>/sec" every save_summaries_secs."""

    def __init__(self, sv, sess, step_counter=None):
        super().__init__(sv.coord, sv.save_summaries_secs)
        self._sv = sv
        self._sess = sess
        self._last_time = 0.0
        self._last_step = 0
        self._step_counter = sv.global_step if step_counter is None else step_counter
        self._summary_tag = f"{self._step_counter.op.name}/sec"

    def start_loop(self):
        self._last_time = time.time()
        self._last_step = training_util.global_step(self._sess, self._step_counter)

    def run_loop(self):
        current_step = training_util.global_step(self._sess, self._step_counter)
        added_steps = current_step - self._last_step
        self._last_step = current_step
        current_time = time.time()
        elapsed_time = current_time - self._last_time
        self._last_time = current_time
        steps_per_sec = added_steps / elapsed_time if elapsed_time > 0.0 else float("inf")
        summary = Summary(value=[Summary.Value(tag=self._summary_tag, simple_value=steps_per_sec)])
        if self._sv.summary_writer:
            self._sv.summary_writer.add_summary(summary, current_step)
        logging.log_first_n(logging.INFO, "%s: %g", 10, self._summary_tag, steps_per_sec)


class SVTimerCheckpointThread(LooperThread):
    """Saves a checkpoint every save_model_secs (the first one at once)."""

    def __init__(self, sv, sess):
        super().__init__(sv.coord, sv.save_model_secs)
        self._sv = sv
        self._sess = sess

    def run_loop(self):
        logging.info("Saving checkpoint to path %s", self._sv.save_path)
        self._sv.saver.save(self._sess, self._sv.save_path, global_step=self._sv.global_step)
        if self._sv.summary_writer and self._sv.global_step is not None:
            current_step = training_util.global_step(self._sess, self._sv.global_step)
            self._sv.summary_writer.add_session_log(
                SessionLog(status=SessionLog.CHECKPOINT, checkpoint_path=self._sv.save_path),
                current_step,
            )
