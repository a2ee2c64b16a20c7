"""A Session that runs SessionRunHooks around each `run` (TF1's monitored_session
_HookedSession): every hook's before_run adds fetches, feeds and RunOptions to the one
Session.run, its after_run gets its own results with the run's RunOptions and RunMetadata, and
a hook may request a stop. A monitored session wraps one of these.

WrappedSession is the base of the layers a MonitoredSession stacks (monitored_session.py):
each forwards `run` to the session it wraps, may add its own stop condition (`_check_stop`),
and asks the wrapped layer too, so `should_stop()` of the outer layer answers for all of them.

Example:
    sess = HookedSession(tf.Session(), [tf.train.ProfilerHook(save_steps=100)])
    sess.run(train_op)
"""

from __future__ import annotations

from flowgraph.core import errors
from flowgraph.core.protos import RunMetadata, RunOptions
from flowgraph.platform import tf_logging
from flowgraph.train.session_run_hook import SessionRunArgs, SessionRunContext, SessionRunValues

__all__ = ["HookedSession", "StepContext", "WrappedSession", "merge_run_options"]


def merge_run_options(options, incoming):
    """Adds a hook's RunOptions to the run's: the most tracing, the longest timeout, debug
    watches of both (TensorFlow's rule)."""
    options.trace_level = max(options.trace_level, incoming.trace_level)
    options.timeout_in_ms = max(options.timeout_in_ms, incoming.timeout_in_ms)
    options.inter_op_thread_pool = max(options.inter_op_thread_pool, incoming.inter_op_thread_pool)
    options.output_partition_graphs |= incoming.output_partition_graphs
    options.debug_options.debug_tensor_watch_opts.extend(
        incoming.debug_options.debug_tensor_watch_opts
    )
    options.debug_options.reset_disk_byte_usage |= incoming.debug_options.reset_disk_byte_usage
    options.report_tensor_allocations_upon_oom |= incoming.report_tensor_allocations_upon_oom


class StepContext:
    """What a `step_fn` given to MonitoredSession.run_step_fn gets: the raw `session` (runs
    without hooks), `run_with_hooks` (a monitored run) and `request_stop`."""

    def __init__(self, session, run_with_hooks_fn):
        self._session = session
        self._run_with_hooks_fn = run_with_hooks_fn

    @property
    def session(self):
        return self._session

    def run_with_hooks(self, *args, **kwargs):
        """Same as MonitoredSession.run."""
        return self._run_with_hooks_fn(*args, **kwargs)

    def request_stop(self):
        """Ends the step function; the monitored session's should_stop() then returns True."""
        raise StopIteration("step_fn has requested the iterations to stop.")


class WrappedSession:
    """Forwards to `sess` (a Session or another WrappedSession); closing never raises a
    preemption error (the session is gone either way)."""

    def __init__(self, sess):
        self._sess = sess
        self._wrapped_is_stoppable = isinstance(sess, WrappedSession)

    @property
    def graph(self):
        return self._sess.graph

    @property
    def sess_str(self):
        return self._sess.sess_str

    def should_stop(self) -> bool:
        """True once this layer or a wrapped one wants to stop, or the session is closed."""
        if self._check_stop():
            return True
        if self._sess:
            return self._wrapped_is_stoppable and self._sess.should_stop()
        return True

    def _check_stop(self) -> bool:
        """This layer's own stop condition (none here)."""
        return False

    def close(self):
        if self._sess:
            try:
                self._sess.close()
            except (errors.AbortedError, errors.UnavailableError) as e:
                tf_logging.error(
                    "An error occurred when attempting to close the session. This may be due "
                    "to a preemption in a connected worker or parameter server. Error: %s",
                    e,
                )
            finally:
                self._sess = None

    def run(self, *args, **kwargs):
        return self._sess.run(*args, **kwargs)

    def run_step_fn(self, step_fn, raw_session, run_with_hooks):
        return step_fn(StepContext(raw_session, run_with_hooks or self.run))


class HookedSession(WrappedSession):
    """Wraps `sess`; `run` calls the hooks' before_run and after_run around each run."""

    def __init__(self, sess, hooks):
        super().__init__(sess)
        self._hooks = list(hooks)
        self._should_stop = False

    def _check_stop(self) -> bool:
        return self._should_stop

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        if self.should_stop():
            raise RuntimeError("Run called even after should_stop requested.")
        actual_fetches = {"caller": fetches}
        context = SessionRunContext(SessionRunArgs(fetches, feed_dict), self._sess)
        options = options if options is not None else RunOptions()
        feed_dict = self._before_run(context, actual_fetches, feed_dict, options)
        run_metadata = run_metadata if run_metadata is not None else RunMetadata()
        outputs = self._sess.run(
            actual_fetches, feed_dict=feed_dict, options=options, run_metadata=run_metadata
        )
        for hook in self._hooks:
            hook.after_run(
                context,
                SessionRunValues(
                    results=outputs.get(hook), options=options, run_metadata=run_metadata
                ),
            )
        self._should_stop = self._should_stop or context.stop_requested
        return outputs["caller"]

    def _before_run(self, context, fetch_dict, user_feeds, options):
        hook_feeds = {}
        for hook in self._hooks:
            request = hook.before_run(context)
            if request is None:
                continue
            if request.fetches is not None:
                fetch_dict[hook] = request.fetches
            if request.feed_dict:
                _check_disjoint(hook_feeds, request.feed_dict, "Same tensor is fed by two hooks.")
                hook_feeds.update(request.feed_dict)
            if request.options:
                merge_run_options(options, request.options)
        if not hook_feeds:
            return user_feeds
        if not user_feeds:
            return hook_feeds
        _check_disjoint(user_feeds, hook_feeds, "Same tensor is fed by a SessionRunHook and user.")
        return {**hook_feeds, **user_feeds}


def _check_disjoint(a, b, message):
    both = set(a) & set(b)
    if both:
        raise RuntimeError(f"{message} Conflict(s): {sorted(map(str, both))}")
