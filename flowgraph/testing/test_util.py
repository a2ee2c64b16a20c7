"""`tensorflow.python.framework.test_util` as TF1 test files use it: the test-method decorators
and TensorFlowTestCase.

flowgraph runs graph mode only, so the decorators that choose a mode run the graph half: a
test marked `run_in_graph_and_eager_modes` runs once, in a graph, inside `test_session()` (its
`self.evaluate` calls use that session), as the graph half does in TF; the eager half, which
needs eager execution, is not run. `run_deprecated_v1` and `run_v1_only` run the test as it is.
"""

from __future__ import annotations

import functools
import inspect
import unittest

from flowgraph.testing.test_case import TestCase, gpu_device_name, is_gpu_available

__all__ = [
    "TensorFlowTestCase",
    "also_run_as_tf_function",
    "deprecated_graph_mode_only",
    "gpu_device_name",
    "is_gpu_available",
    "run_all_in_graph_and_eager_modes",
    "run_deprecated_v1",
    "run_in_graph_and_eager_modes",
    "run_v1_only",
    "skip_if",
]

TensorFlowTestCase = TestCase


def _for_methods(decorator, cls):
    """Applies `decorator` to every test method of `cls` (TF's for_all_test_methods)."""
    for name, value in list(vars(cls).items()):
        is_test = name.startswith(unittest.TestLoader.testMethodPrefix) and name != "test_session"
        if callable(value) and is_test:
            setattr(cls, name, decorator(value))
    return cls


def run_deprecated_v1(func=None):
    """Marks a test that uses TF1 graph APIs; it runs as it is (flowgraph is TF1 graph mode)."""

    def decorator(f):
        if inspect.isclass(f):
            raise ValueError("`run_deprecated_v1` only supports test methods.")
        return f

    return decorator(func) if func is not None else decorator


deprecated_graph_mode_only = run_deprecated_v1


def run_v1_only(reason, func=None):
    """Marks a test (or every test of a class) as TF1-only; it runs as it is."""
    if not isinstance(reason, str):
        raise ValueError(f"'reason' should be string, got {type(reason)}")

    def decorator(f):
        return f  # a test method or a whole class: both run as they are

    return decorator(func) if func is not None else decorator


def run_in_graph_and_eager_modes(
    func=None, config=None, use_gpu=True, reset_test=True, assert_no_eager_garbage=False
):
    """Runs the test's graph half: in a graph, inside `self.test_session(use_gpu, config)`.

    `reset_test` and `assert_no_eager_garbage` concern the eager half, which flowgraph does not
    run (it has no eager execution)."""
    del reset_test, assert_no_eager_garbage  # options of the eager half only

    def decorator(f):
        if inspect.isclass(f):
            raise ValueError(
                "`run_in_graph_and_eager_modes` only supports test methods. Did you mean to use "
                "`run_all_in_graph_and_eager_modes`?"
            )

        @functools.wraps(f)
        def decorated(self, *args, **kwargs):
            with self.test_session(use_gpu=use_gpu, config=config):
                return f(self, *args, **kwargs)

        return decorated

    return decorator(func) if func is not None else decorator


def run_all_in_graph_and_eager_modes(cls):
    """run_in_graph_and_eager_modes for every test method of `cls`."""
    return _for_methods(run_in_graph_and_eager_modes, cls)


def also_run_as_tf_function(f):
    """TF runs the test also inside a tf.function; flowgraph has no tf.function: runs it once."""
    return f


def skip_if(condition):
    """Skips the test when `condition` (or `condition()`) is true."""

    def decorator(f):
        @functools.wraps(f)
        def decorated(self, *args, **kwargs):
            if condition() if callable(condition) else condition:
                self.skipTest("skip_if condition is true")
            return f(self, *args, **kwargs)

        return decorated

    return decorator
