"""tf.train.Coordinator: lets the threads of an input pipeline (queue runners, §4.6) stop together.

Any thread may call `request_stop(ex)`; every thread polls `should_stop()`. The first exception
handed to `request_stop` (other than the clean-stop types, OutOfRangeError by default: an input
that ran out of epochs) is re-raised by `join()` in the thread that waits for the others.

Example:
    coord = tf.train.Coordinator()
    threads = tf.train.start_queue_runners(sess, coord=coord)
    try:
        while not coord.should_stop():
            sess.run(train_op)
    except tf.errors.OutOfRangeError:
        pass
    finally:
        coord.request_stop()
    coord.join(threads)
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time

from flowgraph.core import errors

__all__ = ["Coordinator", "LooperThread"]

_log = logging.getLogger(__name__)


class Coordinator:
    """Stop requests and exception hand-off between threads. Guarded by `_lock`: the first
    exception to raise (`_exc_info_to_raise`), `_joined` and `_registered_threads`."""

    def __init__(self, clean_stop_exception_types=None):
        if clean_stop_exception_types is None:
            clean_stop_exception_types = (errors.OutOfRangeError,)
        self._clean_stop_exception_types = tuple(clean_stop_exception_types)
        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self._exc_info_to_raise = None
        self._joined = False
        self._registered_threads: set = set()

    def _filter_exception(self, ex):
        ex_instance = ex[1] if isinstance(ex, tuple) else ex
        if isinstance(ex_instance, self._clean_stop_exception_types):
            return None
        return ex

    def request_stop(self, ex=None):
        """Asks every thread to stop; `ex` (an exception or an exc_info tuple) is kept for join."""
        with self._lock:
            ex = self._filter_exception(ex)
            if self._joined:
                if ex is not None:
                    _log.info("Error reported to Coordinator after join: %s", ex)
                return
            if not self._stop_event.is_set():
                if ex and self._exc_info_to_raise is None:
                    if isinstance(ex, tuple):
                        self._exc_info_to_raise = ex
                    else:
                        self._exc_info_to_raise = (type(ex), ex, ex.__traceback__)
                self._stop_event.set()

    def clear_stop(self):
        """Clears the stop request so the coordinator can be reused."""
        with self._lock:
            self._joined = False
            self._exc_info_to_raise = None
            self._stop_event.clear()

    def should_stop(self) -> bool:
        return self._stop_event.is_set()

    @contextlib.contextmanager
    def stop_on_exception(self):
        """A `with` block whose exception is handed to request_stop instead of propagating."""
        try:
            yield
        except:  # noqa: E722  (TF1 also catches everything here, e.g. KeyboardInterrupt)
            self.request_stop(ex=sys.exc_info())

    def wait_for_stop(self, timeout=None) -> bool:
        """Waits until a stop is requested (or `timeout` seconds); returns whether it was."""
        return self._stop_event.wait(timeout)

    def register_thread(self, thread):
        with self._lock:
            self._registered_threads.add(thread)

    def join(self, threads=None, stop_grace_period_secs=120, ignore_live_threads=False):
        """Waits for the threads to end; re-raises the exception given to request_stop.

        Once a stop is requested the threads get `stop_grace_period_secs` to finish; threads
        still alive then raise RuntimeError unless `ignore_live_threads`."""
        with self._lock:
            threads = list(self._registered_threads.union(threads or ()))
        while any(t.is_alive() for t in threads) and not self.wait_for_stop(0.05):
            pass
        deadline = time.monotonic() + stop_grace_period_secs
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        stragglers = [t.name for t in threads if t.is_alive()]
        with self._lock:
            self._joined = True
            self._registered_threads = set()
            if self._exc_info_to_raise:
                _, ex, tb = self._exc_info_to_raise
                raise ex.with_traceback(tb)
            if stragglers:
                if ignore_live_threads:
                    _log.info("Coordinator stopped with threads still running: %s", stragglers)
                else:
                    raise RuntimeError(
                        "Coordinator stopped with threads still running: " + " ".join(stragglers)
                    )

    @property
    def joined(self) -> bool:
        return self._joined

    def raise_requested_exception(self):
        """Re-raises the exception given to request_stop, if any."""
        with self._lock:
            if self._exc_info_to_raise:
                _, ex, tb = self._exc_info_to_raise
                raise ex.with_traceback(tb)

    def loop(self, timer_interval_secs, target, args=None, kwargs=None):
        """Starts a LooperThread calling `target` every `timer_interval_secs` until a stop."""
        looper = LooperThread(self, timer_interval_secs, target=target, args=args, kwargs=kwargs)
        looper.start()
        return looper


class LooperThread(threading.Thread):
    """A thread that calls `target` (or `run_loop`) every `timer_interval_secs` until the
    coordinator stops; an exception stops the coordinator."""

    def __init__(self, coord, timer_interval_secs, target=None, args=None, kwargs=None):
        if not isinstance(coord, Coordinator):
            raise ValueError(f"'coord' argument must be a Coordinator: {coord}")
        super().__init__()
        self.daemon = True
        self._coord = coord
        self._timer_interval_secs = timer_interval_secs
        self._target = target
        if self._target:
            self._args = args or ()
            self._kwargs = kwargs or {}
        elif args or kwargs:
            raise ValueError("'args' and 'kwargs' argument require that you also pass 'target'")
        self._coord.register_thread(self)

    @staticmethod
    def loop(coord, timer_interval_secs, target, args=None, kwargs=None):
        looper = LooperThread(coord, timer_interval_secs, target=target, args=args, kwargs=kwargs)
        looper.start()
        return looper

    def run(self):
        with self._coord.stop_on_exception():
            self.start_loop()
            if self._timer_interval_secs is None:
                while not self._coord.should_stop():
                    self.run_loop()
            else:
                next_time = time.time()
                while not self._coord.wait_for_stop(max(0.0, next_time - time.time())):
                    next_time += self._timer_interval_secs
                    self.run_loop()
            self.stop_loop()

    def start_loop(self):
        """Called once before the loop."""

    def stop_loop(self):
        """Called once after the loop."""

    def run_loop(self):
        if self._target:
            self._target(*self._args, **self._kwargs)
