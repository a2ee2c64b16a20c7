"""MonitoredSession: a training loop's Session that initializes or restores its model, runs
hooks, starts the queue runners and survives lost workers (TF1's monitored_session.py;
whitepaper §3.3: on a failure "the entire graph execution is aborted and restarted from
scratch", from the last checkpoint).

A MonitoredSession is a stack of WrappedSession layers around a Session:

    RecoverableSession     an AbortedError/UnavailableError closes the layers below and builds
                           them again through the session creator (restoring the checkpoint)
      CoordinatedSession   a Coordinator: queue-runner threads, their errors re-raised in run
        HookedSession      the hooks' before_run/after_run (hooked_session.py)
          Session          made by a ChiefSessionCreator (restore or initialize) or a
                           WorkerSessionCreator (wait until the chief did)

`should_stop()` asks every layer. Closing calls the hooks' end (unless the loop raised), stops
the threads and closes the Session; as a context manager OutOfRangeError and StopIteration end
the loop cleanly.
"""

from __future__ import annotations

import inspect

from flowgraph.core import errors
from flowgraph.framework import default_graph
from flowgraph.framework.graph import GraphKeys
from flowgraph.platform import tf_logging as logging
from flowgraph.train.coordinator import Coordinator
from flowgraph.train.hooked_session import HookedSession, StepContext, WrappedSession
from flowgraph.train.scaffold import Scaffold
from flowgraph.train.session_manager import SessionManager

__all__ = [
    "ChiefSessionCreator",
    "MonitoredSession",
    "MonitoredTrainingSession",
    "SessionCreator",
    "SingularMonitoredSession",
    "WorkerSessionCreator",
]

USE_DEFAULT = object()  # "not given": lets MonitoredTrainingSession tell None from the default

_PREEMPTION_ERRORS = (errors.AbortedError, errors.UnavailableError)

_PREEMPTION_NOTE = (
    "This may be due to a preemption in a connected worker or parameter server. The current "
    "session will be closed and a new session will be created. Error: %s"
)


class SessionCreator:
    """A factory of Sessions (`create_session()`)."""

    def create_session(self):
        raise NotImplementedError(f"create_session is not implemented for {self}.")


class _ScaffoldSessionCreator(SessionCreator):
    """What the chief's and the workers' creators share: a scaffold and a SessionManager
    built from it once the scaffold is finalized."""

    def __init__(self, scaffold, master, config):
        self._scaffold = scaffold or Scaffold()
        self._session_manager = None
        self._master = master
        self._config = config

    def _get_session_manager(self):
        if self._session_manager is None:
            self._session_manager = SessionManager(
                local_init_op=self._scaffold.local_init_op,
                local_init_feed_dict=self._scaffold.local_init_feed_dict,
                ready_op=self._scaffold.ready_op,
                ready_for_local_init_op=self._scaffold.ready_for_local_init_op,
                graph=default_graph.get(),
            )
        return self._session_manager


class ChiefSessionCreator(_ScaffoldSessionCreator):
    """Creates the chief's Session: restored from the newest checkpoint of `checkpoint_dir`
    (or `checkpoint_filename_with_path`) if there is one, else initialized by the scaffold."""

    def __init__(
        self,
        scaffold=None,
        master="",
        config=None,
        checkpoint_dir=None,
        checkpoint_filename_with_path=None,
    ):
        super().__init__(scaffold, master, config)
        self._checkpoint_dir = checkpoint_dir
        self._checkpoint_filename_with_path = checkpoint_filename_with_path

    def create_session(self):
        self._scaffold.finalize()
        return self._get_session_manager().prepare_session(
            self._master,
            saver=self._scaffold.saver,
            checkpoint_dir=self._checkpoint_dir,
            checkpoint_filename_with_path=self._checkpoint_filename_with_path,
            config=self._config,
            init_op=self._scaffold.init_op,
            init_feed_dict=self._scaffold.init_feed_dict,
            init_fn=self._scaffold.init_fn,
        )


class WorkerSessionCreator(_ScaffoldSessionCreator):
    """Creates a worker's Session once the chief made the model ready (up to
    `max_wait_secs`, then DeadlineExceededError)."""

    def __init__(self, scaffold=None, master="", config=None, max_wait_secs=30 * 60):
        super().__init__(scaffold, master, config)
        self._max_wait_secs = max_wait_secs

    def create_session(self):
        self._scaffold.finalize()
        return self._get_session_manager().wait_for_session(
            self._master, config=self._config, max_wait_secs=self._max_wait_secs
        )


class RecoverableSession(WrappedSession):
    """Builds its session with `sess_creator` and builds it again whenever creating, running
    or checking it raises AbortedError or UnavailableError; the run is then retried."""

    def __init__(self, sess_creator):
        self._sess_creator = sess_creator
        super().__init__(self._create_session())

    def _create_session(self):
        while True:
            try:
                return self._sess_creator.create_session()
            except _PREEMPTION_ERRORS as e:
                logging.info(
                    "An error was raised while a session was being created. " + _PREEMPTION_NOTE,
                    e,
                )

    def _check_stop(self) -> bool:
        try:
            if self._sess:
                return self._sess._check_stop()
            return True
        except _PREEMPTION_ERRORS as e:
            logging.info(
                "An error was raised while considering whether the session is complete. "
                + _PREEMPTION_NOTE,
                e,
            )
            self.close()
            self._sess = self._create_session()
            return False
        except Exception:  # noqa: BLE001 - any other failure means this session is done
            return True

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        while True:
            try:
                if not self._sess:
                    self._sess = self._create_session()
                return self._sess.run(
                    fetches, feed_dict=feed_dict, options=options, run_metadata=run_metadata
                )
            except _PREEMPTION_ERRORS as e:
                logging.info("An error was raised. " + _PREEMPTION_NOTE, e)
                self.close()
                self._sess = None

    def run_step_fn(self, step_fn, raw_session, run_with_hooks):
        while True:
            try:
                if not self._sess:
                    self._sess = self._create_session()
                return self._sess.run_step_fn(step_fn, raw_session, self._sess.run)
            except _PREEMPTION_ERRORS as e:
                logging.info("An error was raised. " + _PREEMPTION_NOTE, e)
                self.close()
                self._sess = None


class CoordinatedSession(WrappedSession):
    """Reports to a Coordinator: stops when it is asked to, re-raises the error a queue-runner
    thread gave it in place of the error a run then gets, and joins the threads on close."""

    def __init__(self, sess, coord, stop_grace_period_secs=120):
        super().__init__(sess)
        self._coord = coord
        self._stop_grace_period_secs = stop_grace_period_secs

    def _check_stop(self) -> bool:
        self._coord.raise_requested_exception()
        return self._coord.should_stop()

    def close(self):
        self._coord.request_stop()
        try:
            self._coord.join(
                stop_grace_period_secs=self._stop_grace_period_secs, ignore_live_threads=True
            )
        finally:
            try:
                super().close()
            except Exception:  # noqa: BLE001 - the threads' error (if any) is the one to see
                logging.debug("Ignoring an error while closing a coordinated session.")

    def run(self, *args, **kwargs):
        try:
            return self._sess.run(*args, **kwargs)
        except _PREEMPTION_ERRORS:
            raise
        except Exception as original:
            # A thread's error (e.g. a failing reader) explains a run that fails because a
            # queue was closed: raise that one.
            try:
                self._coord.raise_requested_exception()
            except _PREEMPTION_ERRORS:
                raise
            except Exception:  # noqa: BLE001
                raise original from None
            raise


class _CoordinatedSessionCreator(SessionCreator):
    """Creates the Session, starts the queue runners, tells the hooks, and stacks a
    CoordinatedSession over a HookedSession over it."""

    def __init__(self, session_creator, hooks, stop_grace_period_secs):
        self._session_creator = session_creator
        self._hooks = hooks
        self._stop_grace_period_secs = stop_grace_period_secs
        self.coord = None
        self.tf_sess = None

    def create_session(self):
        from flowgraph.train import queue_runner

        self.tf_sess = self._session_creator.create_session()
        self.coord = Coordinator(clean_stop_exception_types=[])
        if default_graph.get().get_collection(GraphKeys.QUEUE_RUNNERS):
            queue_runner.start_queue_runners(sess=self.tf_sess, coord=self.coord)
        for hook in self._hooks:
            hook.after_create_session(self.tf_sess, self.coord)
        return CoordinatedSession(
            HookedSession(self.tf_sess, self._hooks), self.coord, self._stop_grace_period_secs
        )


class _MonitoredSession:
    """What MonitoredSession and SingularMonitoredSession share."""

    StepContext = StepContext

    def __init__(self, session_creator, hooks, should_recover, stop_grace_period_secs=120):
        graph = default_graph.get()
        self._graph_was_finalized = graph.finalized
        self._hooks = list(hooks or [])
        for hook in self._hooks:
            hook.begin()
        self._coordinated_creator = _CoordinatedSessionCreator(
            session_creator=session_creator or ChiefSessionCreator(),
            hooks=self._hooks,
            stop_grace_period_secs=stop_grace_period_secs,
        )
        try:
            if should_recover:
                self._sess = RecoverableSession(self._coordinated_creator)
            else:
                self._sess = self._coordinated_creator.create_session()
        except BaseException:
            # No session to close: leave the graph editable as it was (TF leaves it frozen).
            if not self._graph_was_finalized:
                graph._unsafe_unfinalize()
            raise

    @property
    def graph(self):
        """The graph the session runs (None once closed)."""
        sess = self._tf_sess()
        return None if sess is None else sess.graph

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        """Session.run with the hooks around it (and recovery, for MonitoredSession)."""
        return self._sess.run(
            fetches, feed_dict=feed_dict, options=options, run_metadata=run_metadata
        )

    def run_step_fn(self, step_fn):
        """Returns step_fn(step_context); see StepContext. A step_fn that calls
        step_context.request_stop() raises StopIteration out of here, which ends a
        `with MonitoredSession(...)` block cleanly."""
        names = tuple(inspect.signature(step_fn).parameters)
        if names not in (("step_context",), ("self", "step_context")):
            raise ValueError(
                "`step_fn` may either have one `step_context` argument, or `self` and "
                "`step_context` arguments if it's an instance method. Got "
                f"{names} instead."
            )
        return self._sess.run_step_fn(step_fn, self._tf_sess(), run_with_hooks=None)

    def should_stop(self) -> bool:
        return self._sess is None or self._sess.should_stop()

    def close(self):
        self._close_internal()

    def __enter__(self):
        return self

    def __exit__(self, exception_type, exception_value, traceback):
        if exception_type in (errors.OutOfRangeError, StopIteration):
            exception_type = None
        self._close_internal(exception_type)
        return exception_type is None

    def _close_internal(self, exception_type=None):
        try:
            if not exception_type:
                for hook in self._hooks:
                    hook.end(self._coordinated_creator.tf_sess)
        finally:
            try:
                if self._sess is None:
                    raise RuntimeError("Session is already closed.")
                self._sess.close()
            finally:
                self._sess = None
                self._coordinated_creator.tf_sess = None
                self._coordinated_creator.coord = None
                if not self._graph_was_finalized:
                    default_graph.get()._unsafe_unfinalize()

    def _is_closed(self) -> bool:
        return self._coordinated_creator.tf_sess is None

    def _tf_sess(self):
        return self._coordinated_creator.tf_sess


class MonitoredSession(_MonitoredSession):
    """A Session-like object for training loops: hooks, initialization or restore through
    `session_creator` (default ChiefSessionCreator()), queue runners, and recovery from
    AbortedError/UnavailableError by creating the session again.

    Example:
        with tf.train.MonitoredSession(
                session_creator=tf.train.ChiefSessionCreator(checkpoint_dir=d),
                hooks=[tf.train.StopAtStepHook(last_step=1000)]) as sess:
            while not sess.should_stop():
                sess.run(train_op)
    """

    def __init__(self, session_creator=None, hooks=None, stop_grace_period_secs=120):
        super().__init__(
            session_creator,
            hooks,
            should_recover=True,
            stop_grace_period_secs=stop_grace_period_secs,
        )


class SingularMonitoredSession(_MonitoredSession):
    """A MonitoredSession for one process: always the chief, no recovery, and the raw
    Session is available (`raw_session()`) to run without hooks or to save.

    Example:
        with tf.train.SingularMonitoredSession(hooks=hooks, checkpoint_dir=d) as sess:
            while not sess.should_stop():
                sess.run(train_op)
    """

    def __init__(
        self,
        hooks=None,
        scaffold=None,
        master="",
        config=None,
        checkpoint_dir=None,
        stop_grace_period_secs=120,
        checkpoint_filename_with_path=None,
    ):
        session_creator = ChiefSessionCreator(
            scaffold=scaffold,
            master=master,
            config=config,
            checkpoint_dir=checkpoint_dir,
            checkpoint_filename_with_path=checkpoint_filename_with_path,
        )
        super().__init__(
            session_creator,
            hooks,
            should_recover=False,
            stop_grace_period_secs=stop_grace_period_secs,
        )

    def raw_session(self):
        """The underlying Session."""
        return self._tf_sess()


def _resolve_pair(steps, secs, default_steps, default_secs):
    """TF's defaulting of a (steps, secs) frequency pair: both left out gives the defaults;
    one given leaves the other off."""
    if steps is USE_DEFAULT and secs is USE_DEFAULT:
        return default_steps, default_secs
    return (None if steps is USE_DEFAULT else steps), (None if secs is USE_DEFAULT else secs)


def MonitoredTrainingSession(
    master="",
    is_chief=True,
    checkpoint_dir=None,
    scaffold=None,
    hooks=None,
    chief_only_hooks=None,
    save_checkpoint_secs=USE_DEFAULT,
    save_summaries_steps=USE_DEFAULT,
    save_summaries_secs=USE_DEFAULT,
    config=None,
    stop_grace_period_secs=120,
    log_step_count_steps=100,
    max_wait_secs=7200,
    save_checkpoint_steps=USE_DEFAULT,
    summary_dir=None,
    save_graph_def=True,
):
    """A MonitoredSession for training. The chief restores the newest checkpoint of
    `checkpoint_dir` or initializes the model, and saves checkpoints (every 600 s unless
    save_checkpoint_secs/steps say otherwise), summaries (every 100 steps) and global
    steps/sec (every `log_step_count_steps`) to `summary_dir` (default checkpoint_dir);
    other workers (is_chief=False) wait for the chief's model and run only `hooks`.

    Example:
        with tf.train.MonitoredTrainingSession(
                checkpoint_dir="/tmp/run", hooks=[tf.train.StopAtStepHook(last_step=1000)]) as sess:
            while not sess.should_stop():
                sess.run(train_op)
    """
    from flowgraph.train.basic_session_run_hooks import (
        CheckpointSaverHook,
        StepCounterHook,
        SummarySaverHook,
    )

    save_summaries_steps, save_summaries_secs = _resolve_pair(
        save_summaries_steps, save_summaries_secs, 100, None
    )
    save_checkpoint_steps, save_checkpoint_secs = _resolve_pair(
        save_checkpoint_steps, save_checkpoint_secs, None, 600
    )
    scaffold = scaffold or Scaffold()
    if not is_chief:
        creator = WorkerSessionCreator(
            scaffold=scaffold, master=master, config=config, max_wait_secs=max_wait_secs
        )
        return MonitoredSession(
            session_creator=creator,
            hooks=hooks or [],
            stop_grace_period_secs=stop_grace_period_secs,
        )
    all_hooks = list(chief_only_hooks or [])
    creator = ChiefSessionCreator(
        scaffold=scaffold, checkpoint_dir=checkpoint_dir, master=master, config=config
    )
    summary_dir = summary_dir or checkpoint_dir
    if summary_dir:
        if log_step_count_steps and log_step_count_steps > 0:
            all_hooks.append(
                StepCounterHook(output_dir=summary_dir, every_n_steps=log_step_count_steps)
            )
        if (save_summaries_steps and save_summaries_steps > 0) or (
            save_summaries_secs and save_summaries_secs > 0
        ):
            all_hooks.append(
                SummarySaverHook(
                    scaffold=scaffold,
                    save_steps=save_summaries_steps,
                    save_secs=save_summaries_secs,
                    output_dir=summary_dir,
                )
            )
    if checkpoint_dir and (
        (save_checkpoint_secs and save_checkpoint_secs > 0)
        or (save_checkpoint_steps and save_checkpoint_steps > 0)
    ):
        # Both given: seconds win, as in TF ("only save_checkpoint_secs is used").
        if save_checkpoint_secs and save_checkpoint_secs > 0:
            save_checkpoint_steps = None
        all_hooks.append(
            CheckpointSaverHook(
                checkpoint_dir,
                save_steps=save_checkpoint_steps,
                save_secs=save_checkpoint_secs,
                scaffold=scaffold,
                save_graph_def=save_graph_def,
            )
        )
    all_hooks.extend(hooks or [])
    return MonitoredSession(
        session_creator=creator, hooks=all_hooks, stop_grace_period_secs=stop_grace_period_secs
    )
