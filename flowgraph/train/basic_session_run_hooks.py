"""Hooks of a training loop (TF1's basic_session_run_hooks.py).

Here: StopAtStepHook (stop at a global step), LoggingTensorHook (log tensors every N steps or
seconds), NanTensorHook (stop or fail when the loss diverges), FeedFnHook, FinalOpsHook,
GlobalStepWaiterHook and ProfilerHook (whitepaper §9.2: traces a step every N steps or seconds
into timeline-<step>.json and the event file). The hooks that save checkpoints, summaries and
steps/sec are in saving_hooks.py, SecondOrStepTimer in second_or_step_timer.py; this module
re-exports them under TF's module path.
"""

from __future__ import annotations

import logging
import os
import time

import numpy as np

from flowgraph.core import errors
from flowgraph.core.protos import RunOptions
from flowgraph.framework import default_graph
from flowgraph.platform import tf_logging
from flowgraph.train import training_util
from flowgraph.train.saving_hooks import (
    CheckpointSaverHook,
    CheckpointSaverListener,
    StepCounterHook,
    SummarySaverHook,
)
from flowgraph.train.second_or_step_timer import SecondOrStepTimer
from flowgraph.train.session_run_hook import SessionRunArgs, SessionRunHook

__all__ = [
    "CheckpointSaverHook",
    "CheckpointSaverListener",
    "FeedFnHook",
    "FinalOpsHook",
    "GlobalStepWaiterHook",
    "LoggingTensorHook",
    "NanLossDuringTrainingError",
    "NanTensorHook",
    "ProfilerHook",
    "SecondOrStepTimer",
    "StepCounterHook",
    "StopAtStepHook",
    "SummarySaverHook",
]

_log = logging.getLogger(__name__)


def _global_step_read(hook_name):
    tensor = training_util._get_or_create_global_step_read()
    if tensor is None:
        raise RuntimeError(f"Global step should be created to use {hook_name}.")
    return tensor


def _as_graph_element(obj):
    """The Tensor (or Operation) `obj` names in the default graph; a bare op name means its
    only output, and is ambiguous for an op with several outputs."""
    graph = default_graph.get()
    if not isinstance(obj, str):
        if getattr(obj, "graph", None) is not graph:
            raise ValueError(
                f"Passed {obj} should have graph attribute that is equal to current graph {graph}."
            )
        return obj
    if ":" in obj:
        return graph.as_graph_element(obj)
    element = graph.as_graph_element(obj + ":0")
    try:
        graph.as_graph_element(obj + ":1")
    except (KeyError, ValueError):
        return element
    raise ValueError(
        f"Name {obj} is ambiguous, as this `Operation` has multiple outputs (at least 2)."
    )


class StopAtStepHook(SessionRunHook):
    """Requests a stop once the global step reaches `last_step`, or `num_steps` steps after
    the step the session started at (exactly one of them).

    Example:
        hooks = [tf.train.StopAtStepHook(last_step=1000)]
    """

    def __init__(self, num_steps=None, last_step=None):
        if num_steps is None and last_step is None:
            raise ValueError("One of num_steps or last_step must be specified.")
        if num_steps is not None and last_step is not None:
            raise ValueError("Only one of num_steps or last_step can be specified.")
        self._num_steps = num_steps
        self._last_step = last_step

    def begin(self):
        self._global_step_tensor = _global_step_read("StopAtStepHook")

    def after_create_session(self, session, coord):
        if self._last_step is None:
            global_step = int(session.run(self._global_step_tensor))
            self._last_step = global_step + self._num_steps

    def before_run(self, run_context):
        return SessionRunArgs(self._global_step_tensor)

    def after_run(self, run_context, run_values):
        # The fetched value is read before the train op ran: re-read only near the end.
        if int(run_values.results) + 1 >= self._last_step:
            step = int(run_context.session.run(self._global_step_tensor))
            if step >= self._last_step:
                run_context.request_stop()


class LoggingTensorHook(SessionRunHook):
    """Logs tensors (at INFO, through tf.logging) every `every_n_iter` runs or `every_n_secs`
    seconds, and/or once at the end (`at_end`). `tensors` is a dict tag -> tensor or name, or
    a list of tensors or names; `formatter(dict tag -> value)` replaces the default
    "tag = value, ..." line.

    Example:
        hook = tf.train.LoggingTensorHook({"loss": loss, "step": step}, every_n_iter=100)
    """

    def __init__(self, tensors, every_n_iter=None, every_n_secs=None, at_end=False, formatter=None):
        only_log_at_end = at_end and every_n_iter is None and every_n_secs is None
        if not only_log_at_end and (every_n_iter is None) == (every_n_secs is None):
            raise ValueError(
                "either at_end and/or exactly one of every_n_iter and every_n_secs must be "
                "provided."
            )
        if every_n_iter is not None and every_n_iter <= 0:
            raise ValueError(f"invalid every_n_iter={every_n_iter}.")
        if not isinstance(tensors, dict):
            self._tag_order = list(tensors)
            tensors = {item: item for item in tensors}
        else:
            self._tag_order = sorted(tensors.keys())
        self._tensors = tensors
        self._formatter = formatter
        self._timer = (
            _NeverTriggerTimer()
            if only_log_at_end
            else SecondOrStepTimer(every_secs=every_n_secs, every_steps=every_n_iter)
        )
        self._log_at_end = at_end

    def begin(self):
        self._timer.reset()
        self._iter_count = 0
        self._current_tensors = {
            tag: _as_graph_element(tensor) for tag, tensor in self._tensors.items()
        }

    def before_run(self, run_context):
        self._should_trigger = self._timer.should_trigger_for_step(self._iter_count)
        if self._should_trigger:
            return SessionRunArgs(self._current_tensors)
        return None

    def _log_tensors(self, tensor_values):
        original = np.get_printoptions()
        np.set_printoptions(suppress=True)
        try:
            elapsed_secs, _ = self._timer.update_last_triggered_step(self._iter_count)
            if self._formatter:
                tf_logging.info(self._formatter(tensor_values))
                return
            stats = ", ".join(f"{tag} = {tensor_values[tag]}" for tag in self._tag_order)
            if elapsed_secs is not None:
                tf_logging.info("%s (%.3f sec)", stats, elapsed_secs)
            else:
                tf_logging.info("%s", stats)
        finally:
            np.set_printoptions(**original)

    def after_run(self, run_context, run_values):
        if self._should_trigger:
            self._log_tensors(run_values.results)
        self._iter_count += 1

    def end(self, session):
        if self._log_at_end:
            self._log_tensors(session.run(self._current_tensors))


class _NeverTriggerTimer(SecondOrStepTimer):
    """The timer of a LoggingTensorHook that logs only at the end."""

    def __init__(self):
        self.reset()

    def should_trigger_for_step(self, step) -> bool:
        return False


class NanLossDuringTrainingError(RuntimeError):
    """Raised by NanTensorHook when the loss became NaN."""

    def __str__(self):
        return "NaN loss during training."


class NanTensorHook(SessionRunHook):
    """Checks `loss_tensor` after every run: on NaN, raises NanLossDuringTrainingError (or,
    with fail_on_nan_loss=False, logs a warning and requests a stop).

    Example:
        hook = tf.train.NanTensorHook(loss)
    """

    def __init__(self, loss_tensor, fail_on_nan_loss=True):
        self._loss_tensor = loss_tensor
        self._fail_on_nan_loss = fail_on_nan_loss

    def before_run(self, run_context):
        return SessionRunArgs(self._loss_tensor)

    def after_run(self, run_context, run_values):
        if np.isnan(run_values.results):
            failure_message = "Model diverged with loss = NaN."
            if self._fail_on_nan_loss:
                tf_logging.error(failure_message)
                raise NanLossDuringTrainingError
            tf_logging.warning(failure_message)
            run_context.request_stop()


class FeedFnHook(SessionRunHook):
    """Feeds every run with the dict `feed_fn()` returns.

    Example:
        hook = tf.train.FeedFnHook(lambda: {x: next(batches)})
    """

    def __init__(self, feed_fn):
        self.feed_fn = feed_fn

    def before_run(self, run_context):
        return SessionRunArgs(fetches=None, feed_dict=self.feed_fn())


class FinalOpsHook(SessionRunHook):
    """Runs `final_ops` once when the session ends; their values are `final_ops_values`.

    Example:
        hook = tf.train.FinalOpsHook({"accuracy": acc}); ...; hook.final_ops_values
    """

    def __init__(self, final_ops, final_ops_feed_dict=None):
        self._final_ops = final_ops
        self._final_ops_feed_dict = final_ops_feed_dict
        self._final_ops_values = None

    @property
    def final_ops_values(self):
        return self._final_ops_values

    def end(self, session):
        if self._final_ops is None:
            return
        try:
            self._final_ops_values = session.run(
                self._final_ops, feed_dict=self._final_ops_feed_dict
            )
        except (errors.OutOfRangeError, StopIteration):
            tf_logging.warning(
                "An OutOfRangeError or StopIteration exception is raised by the code in "
                "FinalOpsHook. This typically means the Ops running by the FinalOpsHook have a "
                "dependency back to some input source, which should not happen. For example, "
                "for metrics in tf.estimator.Estimator, all metrics functions return two Ops: "
                "`value_op` and  `update_op`. Estimator.evaluate calls the `update_op` for each "
                "batch of the data in input source and, once it is exhausted, it call the "
                "`value_op` to get the metric values. The `value_op` here should have "
                "dependency back to variables reading only, rather than reading another batch "
                "from input. Otherwise, the `value_op`, executed by `FinalOpsHook`, triggers "
                "another data reading, which ends OutOfRangeError/StopIteration. Please fix "
                "that."
            )
            raise


class GlobalStepWaiterHook(SessionRunHook):
    """Holds this worker's first run until the global step reaches `wait_until_step` (so
    late-starting workers of a data-parallel job begin once the chief's model has warmed up).
    It polls the step every 0.5 s, as TensorFlow does.

    Example:
        hook = tf.train.GlobalStepWaiterHook(wait_until_step=task_index * 100)
    """

    def __init__(self, wait_until_step):
        self._wait_until_step = wait_until_step

    def begin(self):
        self._worker_is_started = False
        self._global_step_tensor = _global_step_read("_GlobalStepWaiterHook")

    def before_run(self, run_context):
        if self._worker_is_started:
            return
        if self._wait_until_step <= 0:
            self._worker_is_started = True
            return
        tf_logging.info(
            "Waiting for global step %d before starting training.", self._wait_until_step
        )
        last_logged_step = 0
        while True:
            current_step = int(run_context.session.run(self._global_step_tensor))
            if current_step >= self._wait_until_step:
                self._worker_is_started = True
                return
            if current_step - last_logged_step > 1000:
                tf_logging.info(
                    "Waiting for global step %d before starting training. Current step is %d.",
                    self._wait_until_step,
                    current_step,
                )
                last_logged_step = current_step
            time.sleep(0.5)


class ProfilerHook(SessionRunHook):
    """Traces one step every `save_steps` steps or `save_secs` seconds (exactly one of them)
    and writes "timeline-<global step>.json" (Chrome trace format, chrome://tracing or
    Perfetto) to `output_dir`, with flow arrows between producers and consumers if
    `show_dataflow` and tensor lifetimes if `show_memory`; the step's RunMetadata goes to the
    directory's event file as "step_<global step>". Needs a global step.

    Example:
        hook = tf.train.ProfilerHook(save_steps=100, output_dir=logdir, show_memory=True)
    """

    def __init__(
        self, save_steps=None, save_secs=None, output_dir="", show_dataflow=True, show_memory=False
    ):
        from flowgraph.summary import FileWriterCache

        self._output_file = os.path.join(output_dir, "timeline-{}.json")
        self._file_writer = FileWriterCache.get(output_dir or os.curdir)
        self._show_dataflow = show_dataflow
        self._show_memory = show_memory
        self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)

    def begin(self):
        self._next_step = None
        self._global_step_tensor = training_util._get_or_create_global_step_read()
        if self._global_step_tensor is None:
            raise RuntimeError("Global step should be created to use ProfilerHook.")

    def before_run(self, run_context):
        self._request_summary = self._next_step is not None and (
            self._timer.should_trigger_for_step(self._next_step)
        )
        options = RunOptions(trace_level=RunOptions.FULL_TRACE) if self._request_summary else None
        return SessionRunArgs({"global_step": self._global_step_tensor}, options=options)

    def after_run(self, run_context, run_values):
        stale_global_step = int(run_values.results["global_step"])
        if self._next_step is None:
            # The first run only starts the timer: it triggers N steps or seconds later.
            self._timer.update_last_triggered_step(stale_global_step)
        global_step = stale_global_step + 1
        if self._request_summary:
            global_step = int(run_context.session.run(self._global_step_tensor))
            self._timer.update_last_triggered_step(global_step)
            self._save(
                global_step,
                self._output_file.format(global_step),
                run_values.run_metadata.step_stats,
            )
            self._file_writer.add_run_metadata(run_values.run_metadata, f"step_{global_step}")
        self._next_step = global_step + 1

    def _save(self, step, path, step_stats):
        from flowgraph.client import timeline

        _log.info("Saving timeline for %d into '%s'.", step, path)
        trace = timeline.Timeline(step_stats).generate_chrome_trace_format(
            show_dataflow=self._show_dataflow, show_memory=self._show_memory
        )
        with open(path, "w") as f:
            f.write(trace)
