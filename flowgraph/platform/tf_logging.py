"""tf.logging: TF 1.15's logging functions over Python's `logging`, logger name "tensorflow".

Levels are Python's (DEBUG 10, INFO 20, WARN 30, ERROR 40, FATAL 50). The logger starts at
NOTSET, so only warnings and above show until `set_verbosity(tf.logging.INFO)`. If the root
logger has no handler when tf.logging is first used, a stderr handler with Python's basic
format ("INFO:tensorflow:message") is attached, as TF does; an application that configures
`logging` itself keeps full control. Records point at the caller's line, not at this module.
`fatal` logs at FATAL and does not exit (TF's behaviour).
"""

from __future__ import annotations

import logging as _logging
import sys as _sys
import threading as _threading

__all__ = [
    "DEBUG",
    "ERROR",
    "FATAL",
    "INFO",
    "WARN",
    "TaskLevelStatusMessage",
    "debug",
    "error",
    "fatal",
    "flush",
    "get_logger",
    "get_verbosity",
    "info",
    "log",
    "log_every_n",
    "log_first_n",
    "log_if",
    "set_verbosity",
    "vlog",
    "warn",
    "warning",
]

DEBUG = _logging.DEBUG
INFO = _logging.INFO
WARN = _logging.WARNING
ERROR = _logging.ERROR
FATAL = _logging.FATAL

_LOCK = _threading.Lock()  # guards _logger and _counts
_logger: _logging.Logger | None = None
_counts: dict = {}  # (file, line) of a log_every_n/log_first_n call -> calls so far


def get_logger() -> _logging.Logger:
    """The "tensorflow" logger, given a stderr handler on first use if nothing is configured."""
    global _logger
    with _LOCK:
        if _logger is None:
            logger = _logging.getLogger("tensorflow")
            if not _logging.getLogger().handlers and not logger.handlers:
                handler = _logging.StreamHandler(_sys.stderr)
                handler.setFormatter(_logging.Formatter(_logging.BASIC_FORMAT))
                logger.addHandler(handler)
            _logger = logger
        return _logger


def set_verbosity(v) -> None:
    """Shows messages at level `v` and above."""
    get_logger().setLevel(v)


def get_verbosity() -> int:
    return get_logger().getEffectiveLevel()


# `stacklevel` makes each record name the user's line: 2 skips `log`, 3 also skips the wrapper.
def log(level, msg, *args, **kwargs) -> None:
    kwargs.setdefault("stacklevel", 2)
    get_logger().log(level, msg, *args, **kwargs)


def debug(msg, *args, **kwargs) -> None:
    log(DEBUG, msg, *args, stacklevel=3, **kwargs)


def info(msg, *args, **kwargs) -> None:
    log(INFO, msg, *args, stacklevel=3, **kwargs)


def warning(msg, *args, **kwargs) -> None:
    log(WARN, msg, *args, stacklevel=3, **kwargs)


warn = warning


def error(msg, *args, **kwargs) -> None:
    log(ERROR, msg, *args, stacklevel=3, **kwargs)


def fatal(msg, *args, **kwargs) -> None:
    log(FATAL, msg, *args, stacklevel=3, **kwargs)


def vlog(level, msg, *args, **kwargs) -> None:
    """`log` under TF's verbose-logging name."""
    log(level, msg, *args, stacklevel=3, **kwargs)


def log_if(level, msg, condition, *args) -> None:
    """Logs only if `condition` holds."""
    if condition:
        log(level, msg, *args, stacklevel=3)


def _next_count() -> int:
    """How many times the line that called the caller got here before (thread-safe)."""
    frame = _sys._getframe(2)
    key = (frame.f_code.co_filename, frame.f_lineno)
    with _LOCK:
        count = _counts.get(key, 0)
        _counts[key] = count + 1
    return count


def log_every_n(level, msg, n, *args) -> None:
    """Logs on the 1st, (n+1)th, (2n+1)th, ... call from the same line."""
    if _next_count() % n == 0:
        log(level, msg, *args, stacklevel=3)


def log_first_n(level, msg, n, *args) -> None:
    """Logs on the first `n` calls from the same line only."""
    if _next_count() < n:
        log(level, msg, *args, stacklevel=3)


def flush() -> None:
    for handler in get_logger().handlers:
        handler.flush()


def TaskLevelStatusMessage(msg) -> None:
    """Logs `msg` at ERROR (TF's status message for a task)."""
    error(msg)
