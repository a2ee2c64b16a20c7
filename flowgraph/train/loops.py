"""The small training and evaluation loops of TF1's tf.train: basic_train_loop (a step function
run under a Supervisor until it says stop, restarted after an AbortedError, which signals that a
server of the cluster restarted), checkpoints_iterator / wait_for_new_checkpoint (an evaluator
following a training job's checkpoints), and match_filenames_once (a local variable holding the
files a pattern matches, evaluated once at initialization).
"""

from __future__ import annotations

import logging
import time

from flowgraph.core import errors
from flowgraph.framework import default_graph
from flowgraph.framework.apply_op import apply_op
from flowgraph.framework.graph import GraphKeys
from flowgraph.ops import variables
from flowgraph.train import checkpoint_management

__all__ = [
    "basic_train_loop",
    "checkpoints_iterator",
    "match_filenames_once",
    "matching_files",
    "wait_for_new_checkpoint",
]

_log = logging.getLogger(__name__)


def basic_train_loop(supervisor, train_step_fn, args=None, kwargs=None, master=""):
    """Calls `train_step_fn(session, *args, **kwargs)` in `supervisor.managed_session(master)`
    until `supervisor.should_stop()`; after an AbortedError it opens a new session and goes on.

    Example: tf.train.basic_train_loop(sv, lambda sess: sess.run(train_op))
    """
    args = [] if args is None else args
    kwargs = {} if kwargs is None else kwargs
    while True:
        try:
            with supervisor.managed_session(master) as sess:
                while not supervisor.should_stop():
                    train_step_fn(sess, *args, **kwargs)
            return
        except errors.AbortedError:
            _log.info("basic_train_loop: the session was aborted; starting a new one")


def wait_for_new_checkpoint(checkpoint_dir, last_checkpoint=None, seconds_to_sleep=1, timeout=None):
    """The newest checkpoint in `checkpoint_dir` once it differs from `last_checkpoint`,
    polling every `seconds_to_sleep`; None when `timeout` seconds pass first."""
    _log.info("Waiting for new checkpoint at %s", checkpoint_dir)
    stop_time = None if timeout is None else time.time() + timeout
    while True:
        path = checkpoint_management.latest_checkpoint(checkpoint_dir)
        if path is not None and path != last_checkpoint:
            _log.info("Found new checkpoint at %s", path)
            return path
        if stop_time is not None and time.time() + seconds_to_sleep > stop_time:
            return None
        time.sleep(seconds_to_sleep)


def checkpoints_iterator(checkpoint_dir, min_interval_secs=0, timeout=None, timeout_fn=None):
    """Yields each new checkpoint of `checkpoint_dir` as it appears, at most one per
    `min_interval_secs`. After `timeout` seconds without one it stops, unless `timeout_fn()`
    returns False (then it keeps waiting).

    Example: for path in tf.train.checkpoints_iterator(train_dir, timeout=600): evaluate(path)
    """
    last = None
    while True:
        path = wait_for_new_checkpoint(checkpoint_dir, last, timeout=timeout)
        if path is None:
            if timeout_fn is None:
                _log.info("Timed-out waiting for a checkpoint.")
                return
            if timeout_fn():
                return
            continue
        start = time.time()
        last = path
        yield path
        remaining = start + min_interval_secs - time.time()
        if remaining > 0:
            time.sleep(remaining)


def matching_files(pattern, name=None):
    """The files matching a glob pattern (or a vector of patterns), sorted (MatchingFiles)."""
    return apply_op("MatchingFiles", [pattern], name=name).outputs[0]


def match_filenames_once(pattern, name=None):
    """A local variable initialized to the files `pattern` matches: the glob runs once, at
    initialization (tf.local_variables_initializer), not at every step.

    Example: files = tf.train.match_filenames_once("/data/train-*.tfrecord")
    """
    graph = default_graph.get()
    with graph.name_scope(name or "matching_filenames") as scope:
        files = matching_files(pattern)
    return variables.Variable(  # named by the scope itself ('matching_filenames'), as in TF
        files,
        name=scope,
        trainable=False,
        validate_shape=False,
        collections=[GraphKeys.LOCAL_VARIABLES],
    )
