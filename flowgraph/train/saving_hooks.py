"""The hooks of a training loop that write files (TF1's basic_session_run_hooks.py, the part
that saves): CheckpointSaverHook saves the model every N steps or seconds (whitepaper §3.3:
"periodically checkpoint" so a restarted job resumes), SummarySaverHook writes the summaries
and StepCounterHook the global steps per second to TensorBoard's event file (§9.1).

All of them fire on the global step, not on calls to run: a restarted program counts on from
the restored step, and several workers sharing one step save once per interval.
"""

from __future__ import annotations

import os

from flowgraph.core.protos import SessionLog, Summary
from flowgraph.framework import default_graph
from flowgraph.framework.graph import GraphKeys
from flowgraph.platform import tf_logging as logging
from flowgraph.train import training_util
from flowgraph.train.second_or_step_timer import SecondOrStepTimer
from flowgraph.train.session_run_hook import SessionRunArgs, SessionRunHook

__all__ = [
    "CheckpointSaverHook",
    "CheckpointSaverListener",
    "StepCounterHook",
    "SummarySaverHook",
]


def _writer_for(logdir):
    from flowgraph.summary import FileWriterCache

    return FileWriterCache.get(logdir)


def _global_step_read(hook_name):
    """The hooks' cached read of the global step; RuntimeError naming the hook if none."""
    tensor = training_util._get_or_create_global_step_read()
    if tensor is None:
        raise RuntimeError(f"Global step should be created to use {hook_name}.")
    return tensor


class CheckpointSaverListener:
    """Called by CheckpointSaverHook around each save; after_save returning True asks the
    training loop to stop (e.g. once an evaluation is good enough).

    Example:
        class Printer(tf.train.CheckpointSaverListener):
            def after_save(self, session, global_step_value): print("saved", global_step_value)
    """

    def begin(self):
        pass

    def before_save(self, session, global_step_value):
        pass

    def after_save(self, session, global_step_value):
        pass

    def end(self, session, global_step_value):
        pass


class CheckpointSaverHook(SessionRunHook):
    """Saves a checkpoint every `save_secs` seconds or `save_steps` steps (exactly one), when
    the session starts and at its end, as `<checkpoint_dir>/<checkpoint_basename>-<step>`.

    The Saver is `saver`, the scaffold's, or the one of the SAVERS collection. Each save
    adds a CHECKPOINT SessionLog to the directory's event file.

    Example:
        hook = tf.train.CheckpointSaverHook("/tmp/run", save_steps=100)
    """

    def __init__(
        self,
        checkpoint_dir,
        save_secs=None,
        save_steps=None,
        saver=None,
        checkpoint_basename="model.ckpt",
        scaffold=None,
        listeners=None,
        save_graph_def=True,
    ):
        logging.info("Create CheckpointSaverHook.")
        if saver is not None and scaffold is not None:
            raise ValueError("You cannot provide both saver and scaffold.")
        self._saver = saver
        self._checkpoint_dir = os.fspath(checkpoint_dir)
        self._save_path = os.path.join(self._checkpoint_dir, checkpoint_basename)
        self._scaffold = scaffold
        self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)
        self._listeners = list(listeners or [])
        self._steps_per_run = 1
        self._save_graph_def = save_graph_def

    def _set_steps_per_run(self, steps_per_run):
        self._steps_per_run = steps_per_run

    def begin(self):
        self._summary_writer = _writer_for(self._checkpoint_dir)
        self._global_step_tensor = _global_step_read("CheckpointSaverHook")
        for listener in self._listeners:
            listener.begin()

    def after_create_session(self, session, coord):
        from flowgraph.train import graph_io, meta_graph

        global_step = int(session.run(self._global_step_tensor))
        graph = default_graph.get()
        if self._save_graph_def:
            # Written here, not in begin(): other hooks may still add to the graph in begin.
            graph_def = graph.as_graph_def(add_shapes=True)
            graph_io.write_graph(graph_def, self._checkpoint_dir, "graph.pbtxt")
        saver = self._get_saver()
        saver_def = saver.saver_def if saver is not None else None
        with graph.as_default():
            meta = meta_graph.export_meta_graph(
                graph_def=graph.as_graph_def(add_shapes=True), saver_def=saver_def
            )
        self._summary_writer.add_graph(graph)
        self._summary_writer.add_meta_graph(meta)
        # The checkpoint saved here is the state at step `global_step`.
        self._save(session, global_step)
        self._timer.update_last_triggered_step(global_step)

    def before_run(self, run_context):
        return SessionRunArgs(self._global_step_tensor)

    def after_run(self, run_context, run_values):
        stale_global_step = int(run_values.results)
        if self._timer.should_trigger_for_step(stale_global_step + self._steps_per_run):
            global_step = int(run_context.session.run(self._global_step_tensor))
            if self._timer.should_trigger_for_step(global_step):
                self._timer.update_last_triggered_step(global_step)
                if self._save(run_context.session, global_step):
                    run_context.request_stop()

    def end(self, session):
        last_step = int(session.run(self._global_step_tensor))
        if last_step != self._timer.last_triggered_step():
            self._save(session, last_step)
        for listener in self._listeners:
            listener.end(session, last_step)

    def _save(self, session, step):
        """Saves at `step`; True if a listener asked to stop."""
        logging.info("Calling checkpoint listeners before saving checkpoint %d...", step)
        for listener in self._listeners:
            listener.before_save(session, step)
        logging.info("Saving checkpoints for %d into %s.", step, self._save_path)
        self._get_saver().save(
            session, self._save_path, global_step=step, write_meta_graph=self._save_graph_def
        )
        self._summary_writer.add_session_log(
            SessionLog(status=SessionLog.CHECKPOINT, checkpoint_path=self._save_path), step
        )
        logging.info("Calling checkpoint listeners after saving checkpoint %d...", step)
        should_stop = False
        for listener in self._listeners:
            if listener.after_save(session, step):
                logging.info(
                    "A CheckpointSaverListener requested that training be stopped. "
                    f"listener: {listener}"
                )
                should_stop = True
        return should_stop

    def _get_saver(self):
        if self._saver is not None:
            return self._saver
        if self._scaffold is not None:
            return self._scaffold.saver
        key = GraphKeys.SAVERS
        savers = default_graph.get().get_collection(key)
        if not savers:
            raise RuntimeError(
                f"No items in collection {key}. Please add a saver to the collection or "
                "provide a saver or scaffold."
            )
        if len(savers) > 1:
            raise RuntimeError(
                f"More than one item in collection {key}. Please indicate which one to use by "
                "passing it to the constructor."
            )
        self._saver = savers[0]
        return savers[0]


class StepCounterHook(SessionRunHook):
    """Logs and writes "global_step/sec" every `every_n_steps` steps or `every_n_secs`
    seconds (exactly one), to `summary_writer` or `output_dir`'s event file if given.

    Example:
        hook = tf.train.StepCounterHook(every_n_steps=100, output_dir=logdir)
    """

    def __init__(self, every_n_steps=100, every_n_secs=None, output_dir=None, summary_writer=None):
        if (every_n_steps is None) == (every_n_secs is None):
            raise ValueError("exactly one of every_n_steps and every_n_secs should be provided.")
        self._timer = SecondOrStepTimer(every_steps=every_n_steps, every_secs=every_n_secs)
        self._summary_writer = summary_writer
        self._output_dir = output_dir
        self._last_global_step = None
        self._steps_per_run = 1

    def _set_steps_per_run(self, steps_per_run):
        self._steps_per_run = steps_per_run

    def begin(self):
        if self._summary_writer is None and self._output_dir:
            self._summary_writer = _writer_for(self._output_dir)
        self._global_step_tensor = _global_step_read("StepCounterHook")
        self._summary_tag = training_util.get_global_step().op.name + "/sec"

    def before_run(self, run_context):
        return SessionRunArgs(self._global_step_tensor)

    def _log_and_record(self, elapsed_steps, elapsed_time, global_step):
        steps_per_sec = elapsed_steps / elapsed_time if elapsed_time > 0 else float("inf")
        if self._summary_writer is not None:
            summary = Summary(
                value=[Summary.Value(tag=self._summary_tag, simple_value=steps_per_sec)]
            )
            self._summary_writer.add_summary(summary, global_step)
        logging.info("%s: %g", self._summary_tag, steps_per_sec)

    def after_run(self, run_context, run_values):
        stale_global_step = int(run_values.results)
        if self._timer.should_trigger_for_step(stale_global_step + self._steps_per_run):
            global_step = int(run_context.session.run(self._global_step_tensor))
            if self._timer.should_trigger_for_step(global_step):
                elapsed_time, elapsed_steps = self._timer.update_last_triggered_step(global_step)
                if elapsed_time is not None:
                    self._log_and_record(elapsed_steps, elapsed_time, global_step)
        # Some optimizers (SyncReplicasOptimizer's workers) do not step every run: warn 5 times.
        if stale_global_step == self._last_global_step:
            logging.log_first_n(
                logging.WARN,
                "It seems that global step (tf.train.get_global_step) has not been increased. "
                "Current value (could be stable): %s vs previous value: %s. You could increase "
                "the global step by passing tf.train.get_global_step() to "
                "Optimizer.apply_gradients or Optimizer.minimize.",
                5,
                stale_global_step,
                self._last_global_step,
            )
        self._last_global_step = stale_global_step


class SummarySaverHook(SessionRunHook):
    """Runs the summary op every `save_steps` steps or `save_secs` seconds (exactly one) and
    writes its result to `summary_writer` or `output_dir`'s event file at the global step; the
    first run also writes a START SessionLog. The op is `summary_op` or the scaffold's
    (exactly one of `scaffold` and `summary_op`).

    Example:
        hook = tf.train.SummarySaverHook(save_steps=10, output_dir=d, summary_op=merged)
    """

    def __init__(
        self,
        save_steps=None,
        save_secs=None,
        output_dir=None,
        summary_writer=None,
        scaffold=None,
        summary_op=None,
    ):
        if (scaffold is None) + (summary_op is None) != 1:
            raise ValueError("Exactly one of scaffold or summary_op must be provided.")
        self._summary_op = summary_op
        self._summary_writer = summary_writer
        self._output_dir = output_dir
        self._scaffold = scaffold
        self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)

    def begin(self):
        if self._summary_writer is None and self._output_dir:
            self._summary_writer = _writer_for(self._output_dir)
        self._next_step = None
        self._global_step_tensor = _global_step_read("SummarySaverHook")

    def before_run(self, run_context):
        self._request_summary = self._next_step is None or self._timer.should_trigger_for_step(
            self._next_step
        )
        requests = {"global_step": self._global_step_tensor}
        if self._request_summary:
            summary_op = self._get_summary_op()
            if summary_op is not None:
                requests["summary"] = summary_op
        return SessionRunArgs(requests)

    def after_run(self, run_context, run_values):
        if not self._summary_writer:
            return
        global_step = int(run_values.results["global_step"]) + 1
        if self._next_step is None or self._request_summary:
            global_step = int(run_context.session.run(self._global_step_tensor))
        if self._next_step is None:
            self._summary_writer.add_session_log(SessionLog(status=SessionLog.START), global_step)
        if self._request_summary:
            self._timer.update_last_triggered_step(global_step)
            for summary in run_values.results.get("summary", ()):
                self._summary_writer.add_summary(summary, global_step)
        self._next_step = global_step + 1

    def end(self, session=None):
        if self._summary_writer:
            self._summary_writer.flush()

    def _get_summary_op(self):
        """The summary ops to run as a list, or None when the graph has no summaries."""
        summary_op = self._summary_op if self._summary_op is not None else None
        if summary_op is None and self._scaffold is not None:
            summary_op = self._scaffold.summary_op
        if summary_op is None:
            return None
        return summary_op if isinstance(summary_op, list) else [summary_op]
