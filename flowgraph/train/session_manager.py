"""tf.train.SessionManager: creates a Session and makes its model ready, by restoring the newest
checkpoint or running the init ops (TF1's session_manager.py; whitepaper §3.3 fault tolerance:
"the system restarts from the last checkpoint").

A model is *ready* when its `ready_op` returns an empty string vector (the names of the
uninitialized variables otherwise). `local_init_op` (local variables, tables) runs in every new
session, but only once `ready_for_local_init_op` says the global state it reads exists. The chief
calls `prepare_session` (restore or initialize); other workers call `wait_for_session` and poll
until the chief made the shared model ready.
"""

from __future__ import annotations

import time

import numpy as np

from flowgraph.core import errors
from flowgraph.framework import default_graph
from flowgraph.platform import tf_logging as logging
from flowgraph.train import checkpoint_management

__all__ = ["SessionManager"]


def _maybe_name(obj) -> str:
    """The name of an op for error messages, "None", or a note that it has none."""
    if obj is None:
        return "None"
    if hasattr(obj, "name"):
        return obj.name
    return f"<no name for {type(obj)}>"


def _ready(op, sess, msg):
    """(True, None) if `op` is None or returns an empty vector; else (False, why)."""
    if op is None:
        return True, None
    try:
        not_ready = sess.run(op)
    except errors.FailedPreconditionError as e:
        if "uninitialized" not in str(e):
            raise
        logging.warning("%s : error [%s]", msg, str(e))
        return False, str(e)
    not_ready = np.asarray(not_ready)
    if not_ready.size == 0:
        return True, None
    names = [n.decode() if isinstance(n, bytes) else str(n) for n in not_ready.reshape(-1)]
    return False, "Variables not initialized: " + ", ".join(names)


class _CountDownTimer:
    def __init__(self, duration_secs):
        self._start = time.time()
        self._duration = duration_secs

    def secs_remaining(self):
        return max(0, self._duration - (time.time() - self._start))


class SessionManager:
    """Restores or initializes the model of a new Session, or waits until another process did.

    Example:
        sm = tf.train.SessionManager(ready_op=tf.report_uninitialized_variables())
        sess = sm.prepare_session("", init_op=init, saver=saver, checkpoint_dir=ckpt_dir)
    """

    def __init__(
        self,
        local_init_op=None,
        ready_op=None,
        ready_for_local_init_op=None,
        graph=None,
        recovery_wait_secs=30,
        local_init_run_options=None,
        local_init_feed_dict=None,
    ):
        self._local_init_op = local_init_op
        self._ready_op = ready_op
        self._ready_for_local_init_op = ready_for_local_init_op
        self._graph = graph if graph is not None else default_graph.get()
        self._recovery_wait_secs = recovery_wait_secs
        self._target = None
        self._local_init_run_options = local_init_run_options
        self._local_init_feed_dict = local_init_feed_dict
        if ready_for_local_init_op is not None and local_init_op is None:
            raise ValueError(
                "If you pass a ready_for_local_init_op you must also pass a local_init_op , "
                f"ready_for_local_init_op [{ready_for_local_init_op}]"
            )

    def _new_session(self, master, config):
        from flowgraph.session.session import Session

        self._target = master
        return Session(master, graph=self._graph, config=config)

    def _restore_checkpoint(
        self,
        master,
        saver=None,
        checkpoint_dir=None,
        checkpoint_filename_with_path=None,
        wait_for_checkpoint=False,
        max_wait_secs=7200,
        config=None,
    ):
        """A new Session and whether a checkpoint was restored into it."""
        sess = self._new_session(master, config)
        if checkpoint_dir and checkpoint_filename_with_path:
            raise ValueError(
                "Can not provide both checkpoint_dir and checkpoint_filename_with_path."
            )
        if not saver or not (checkpoint_dir or checkpoint_filename_with_path):
            return sess, False
        if checkpoint_filename_with_path:
            saver.restore(sess, checkpoint_filename_with_path)
            return sess, True
        wait_time = 0
        ckpt = checkpoint_management.get_checkpoint_state(checkpoint_dir)
        while not ckpt or not ckpt.model_checkpoint_path:
            if not (wait_for_checkpoint and wait_time < max_wait_secs):
                return sess, False
            logging.info("Waiting for checkpoint to be available.")
            time.sleep(self._recovery_wait_secs)
            wait_time += self._recovery_wait_secs
            ckpt = checkpoint_management.get_checkpoint_state(checkpoint_dir)
        saver.restore(sess, ckpt.model_checkpoint_path)
        saver.recover_last_checkpoints(list(ckpt.all_model_checkpoint_paths))
        return sess, True

    def prepare_session(
        self,
        master,
        init_op=None,
        saver=None,
        checkpoint_dir=None,
        checkpoint_filename_with_path=None,
        wait_for_checkpoint=False,
        max_wait_secs=7200,
        config=None,
        init_feed_dict=None,
        init_fn=None,
    ):
        """A Session whose model is ready: restored from the newest checkpoint of
        `checkpoint_dir` (or `checkpoint_filename_with_path`) when there is one, else
        initialized by `init_op` and `init_fn(sess)`; `local_init_op` runs either way.

        Raises RuntimeError if nothing can initialize the model or it is still not ready."""
        sess, restored = self._restore_checkpoint(
            master,
            saver,
            checkpoint_dir=checkpoint_dir,
            checkpoint_filename_with_path=checkpoint_filename_with_path,
            wait_for_checkpoint=wait_for_checkpoint,
            max_wait_secs=max_wait_secs,
            config=config,
        )
        if not restored:
            if init_op is None and not init_fn and self._local_init_op is None:
                raise RuntimeError(
                    "Model is not initialized and no init_op or init_fn or local_init_op was given"
                )
            if init_op is not None:
                sess.run(init_op, feed_dict=init_feed_dict)
            if init_fn:
                init_fn(sess)
        ok, msg = self._try_run_local_init_op(sess)
        if not ok:
            raise RuntimeError(
                "Init operations did not make model ready for local_init.  "
                f"Init op: {_maybe_name(init_op)}, init fn: {init_fn}, error: {msg}"
            )
        ready, msg = self._model_ready(sess)
        if not ready:
            raise RuntimeError(
                "Init operations did not make model ready.  "
                f"Init op: {_maybe_name(init_op)}, init fn: {init_fn}, "
                f"local_init_op: {self._local_init_op}, error: {msg}"
            )
        return sess

    def recover_session(
        self,
        master,
        saver=None,
        checkpoint_dir=None,
        checkpoint_filename_with_path=None,
        wait_for_checkpoint=False,
        max_wait_secs=7200,
        config=None,
    ):
        """(sess, initialized): a new Session restored from a checkpoint if possible;
        `initialized` is True only if the restore made the model ready."""
        sess, restored = self._restore_checkpoint(
            master,
            saver,
            checkpoint_dir=checkpoint_dir,
            checkpoint_filename_with_path=checkpoint_filename_with_path,
            wait_for_checkpoint=wait_for_checkpoint,
            max_wait_secs=max_wait_secs,
            config=config,
        )
        local_ok, msg = self._try_run_local_init_op(sess)
        if not restored:
            return sess, False
        source = checkpoint_dir or checkpoint_filename_with_path
        if not local_ok:
            logging.info(
                "Restoring model from %s did not make model ready for local init: %s", source, msg
            )
            return sess, False
        ready, msg = self._model_ready(sess)
        if not ready:
            logging.info("Restoring model from %s did not make model ready: %s", source, msg)
            return sess, False
        logging.info("Restored model from %s", source)
        return sess, True

    def wait_for_session(self, master, config=None, max_wait_secs=float("Inf")):
        """A new Session once another process made its model ready, polling every
        `recovery_wait_secs`; DeadlineExceededError after `max_wait_secs`."""
        if max_wait_secs is None:
            max_wait_secs = float("Inf")
        timer = _CountDownTimer(max_wait_secs)
        while True:
            sess = self._new_session(master, config)
            not_ready_msg = None
            local_ok, not_ready_local_msg = self._try_run_local_init_op(sess)
            if local_ok:
                ready, not_ready_msg = self._model_ready(sess)
                if ready:
                    return sess
            _safe_close(sess)
            if timer.secs_remaining() - self._recovery_wait_secs < 0:
                raise errors.DeadlineExceededError(
                    None, None, f"Session was not ready after waiting {max_wait_secs} secs."
                )
            logging.info(
                "Waiting for model to be ready.  Ready_for_local_init_op:  %s, ready: %s",
                not_ready_local_msg,
                not_ready_msg,
            )
            time.sleep(self._recovery_wait_secs)

    def _model_ready(self, sess):
        return _ready(self._ready_op, sess, "Model not ready")

    def _model_ready_for_local_init(self, sess):
        return _ready(self._ready_for_local_init_op, sess, "Model not ready for local init")

    def _try_run_local_init_op(self, sess):
        """(True, None) after running local_init_op (or when there is none); (False, why)
        when the global state it needs is not ready yet."""
        if self._local_init_op is None:
            return True, None
        ready, msg = self._model_ready_for_local_init(sess)
        if not ready:
            return False, msg
        logging.info("Running local_init_op.")
        sess.run(
            self._local_init_op,
            feed_dict=self._local_init_feed_dict,
            options=self._local_init_run_options,
        )
        logging.info("Done running local_init_op.")
        return True, None


def _safe_close(sess):
    """Closes `sess`, ignoring errors: it is being discarded anyway."""
    try:
        sess.close()
    except Exception:  # noqa: BLE001 - a failing close must not hide the wait loop's state
        logging.debug("Ignoring an error closing a session that was not ready.")
