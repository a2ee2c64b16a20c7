"""tf.test (TF1's `tensorflow.python.platform.test`): the TestCase that TF1 test suites subclass,
`main`, and the helpers they call, so a user's own TF1 test file runs unchanged under
`flowgraph run -m pytest` or `flowgraph run test_file.py`.

A test gets a fresh global default graph with TF's test seeds (TF's setUp resets it). `session()`
opens a new Session per call, `cached_session()` (and the deprecated `test_session()`) one Session
per test, closed in tearDown; both make the session and its graph the defaults, and pin the ops
built inside to the CPU unless `use_gpu=True`, or to the GPU with `force_gpu=True` (soft placement
off, so a missing GPU is an error), as TF does. `evaluate` runs in the default session, as TF1's
does.
"""

from __future__ import annotations

import contextlib
import math
import random
import re
import tempfile
import threading
import time
import unittest
from unittest import mock

import numpy as np

from flowgraph.core import dtypes, errors
from flowgraph.core.protos import ConfigProto
from flowgraph.framework import default_graph, random_seed
from flowgraph.session import default_session
from flowgraph.testing.gradient_checker import compute_gradient, compute_gradient_error

__all__ = [
    "Benchmark",
    "TestCase",
    "assert_equal_graph_def",
    "compute_gradient",
    "compute_gradient_error",
    "get_temp_dir",
    "gpu_device_name",
    "is_built_with_cuda",
    "is_built_with_gpu_support",
    "is_gpu_available",
    "main",
    "mock",
]


class TestCase(unittest.TestCase):
    """unittest.TestCase with TF1's sessions and assertions (see the module docstring)."""

    def __init__(self, methodName="runTest"):
        super().__init__(methodName)
        self._cached_session = None
        self._tempdir = None
        self._threads = []

    def setUp(self):
        """TF1's set-up: a new global default graph (so the test may reset it again) with
        graph seed 87654321, and Python's and NumPy's generators seeded the same."""
        super().setUp()
        self._clear_cached_session()
        random.seed(random_seed.DEFAULT_GRAPH_SEED)
        np.random.seed(random_seed.DEFAULT_GRAPH_SEED)
        default_graph.clear_stack()
        default_graph.reset()
        random_seed.set_random_seed(random_seed.DEFAULT_GRAPH_SEED)

    def tearDown(self):
        for thread in self._threads:
            thread.check_termination()
        self._clear_cached_session()
        super().tearDown()

    def _clear_cached_session(self):
        if self._cached_session is not None:
            self._cached_session.close()
            self._cached_session = None

    def get_temp_dir(self) -> str:
        """A directory for this test's files, the same for every call within the test."""
        if self._tempdir is None:
            self._tempdir = tempfile.mkdtemp(dir=get_temp_dir())
        return self._tempdir

    # -- sessions -----------------------------------------------------------------------------
    @contextlib.contextmanager
    def session(self, graph=None, config=None, use_gpu=False, force_gpu=False):
        """A new Session on `graph` (default: the default graph), made the default."""
        from flowgraph.session.session import Session

        graph = graph if graph is not None else default_graph.get()
        config = _prepare_config(config, force_gpu)
        with (
            Session(graph=graph, config=config) as sess,
            _constrain_devices(sess, use_gpu, force_gpu),
        ):
            yield sess

    @contextlib.contextmanager
    def cached_session(self, graph=None, config=None, use_gpu=False, force_gpu=False):
        """The Session of this test, created by the first call; later calls must not ask for
        another graph (TF: "The graph used to get the cached session is different ...")."""
        sess = self._get_cached_session(graph, config, force_gpu)
        with _constrain_devices(sess, use_gpu, force_gpu):
            yield sess

    def test_session(self, graph=None, config=None, use_gpu=False, force_gpu=False):
        """Deprecated TF1 name: cached_session() for the default graph, else session(graph).
        Test runners collect it as a test (its name starts with "test"); that run is skipped."""
        if self.id().endswith(".test_session"):
            self.skipTest("Not a test.")
        if graph is None:
            return self.cached_session(None, config, use_gpu, force_gpu)
        return self.session(graph, config, use_gpu, force_gpu)

    def _get_cached_session(self, graph, config, force_gpu):
        from flowgraph.session.session import Session

        graph = graph if graph is not None else default_graph.get()
        if self._cached_session is None:
            self._cached_session = Session(graph=graph, config=_prepare_config(config, force_gpu))
        elif self._cached_session.graph is not graph:
            raise ValueError(
                "The graph used to get the cached session is different than the one that was "
                "used to create the session. Maybe create a new session with self.session()"
            )
        return self._cached_session

    def evaluate(self, tensors):
        """The values of `tensors` in the default session (or this test's cached one)."""
        sess = default_session.get()
        if sess is not None:
            return sess.run(tensors)
        with self.test_session() as sess:
            return sess.run(tensors)

    def checkedThread(self, target, args=None, kwargs=None):
        """A thread whose exception fails the test when `join()`ed (or at tearDown)."""
        thread = _CheckedThread(self, target, args, kwargs)
        self._threads.append(thread)
        return thread

    # -- assertions ---------------------------------------------------------------------------
    def _GetNdArray(self, a):
        """`a` as an ndarray; a Tensor is evaluated first (TF's helper of the same name)."""
        if hasattr(a, "graph") and hasattr(a, "op") and hasattr(a, "value_index"):
            a = self.evaluate(a)
        return a if isinstance(a, np.ndarray) else np.array(a)

    def assertAllClose(self, a, b, rtol=1e-6, atol=1e-6, msg=None):
        """Element-wise |a - b| <= atol + rtol * |b|, recursing into lists, tuples and dicts."""
        _assert_all_close(self, a, b, rtol, atol, msg, path=[])

    def assertNotAllClose(self, a, b, **kwargs):
        try:
            self.assertAllClose(a, b, **kwargs)
        except AssertionError:
            return
        raise AssertionError("The two values are close at all elements")

    def assertAllCloseAccordingToType(
        self,
        a,
        b,
        rtol=1e-6,
        atol=1e-6,
        float_rtol=1e-6,
        float_atol=1e-6,
        half_rtol=1e-3,
        half_atol=1e-3,
        bfloat16_rtol=1e-2,
        bfloat16_atol=1e-2,
        msg=None,
    ):
        """assertAllClose with the tolerances widened to the coarsest float type involved."""
        a, b = self._GetNdArray(a), self._GetNdArray(b)
        kinds = {a.dtype, b.dtype}
        if kinds & {np.dtype(np.float32), np.dtype(np.complex64)}:
            rtol, atol = max(rtol, float_rtol), max(atol, float_atol)
        if np.dtype(np.float16) in kinds:
            rtol, atol = max(rtol, half_rtol), max(atol, half_atol)
        if np.dtype(dtypes.bfloat16.as_numpy_dtype) in kinds:
            rtol, atol = max(rtol, bfloat16_rtol), max(atol, bfloat16_atol)
        self.assertAllClose(a, b, rtol=rtol, atol=atol, msg=msg)

    def assertAllEqual(self, a, b, msg=None):
        a, b = self._GetNdArray(a), self._GetNdArray(b)
        self.assertEqual(
            a.shape, b.shape, f"Shape mismatch: expected {a.shape}, got {b.shape}. {msg or ''}"
        )
        np.testing.assert_array_equal(a, b, err_msg=msg or "")

    def assertNear(self, f1, f2, err, msg=None):
        self.assertTrue(
            f1 == f2 or math.fabs(f1 - f2) <= err,
            f"{f1:f} != {f2:f} +/- {err:f}{' (' + msg + ')' if msg else ''}",
        )

    def assertArrayNear(self, farray1, farray2, err, msg=None):
        self.assertEqual(len(farray1), len(farray2), msg=msg)
        for f1, f2 in zip(farray1, farray2):
            self.assertNear(float(f1), float(f2), err, msg=msg)

    def assertNDArrayNear(self, ndarray1, ndarray2, err, msg=None):
        """The L2 norm of the difference is below `err`."""
        diff = np.asarray(ndarray1) - np.asarray(ndarray2)
        self.assertTrue(np.linalg.norm(diff) < err, msg=msg)

    def assertAllGreater(self, a, comparison_target):
        self.assertGreater(np.min(self._GetNdArray(a)), comparison_target)

    def assertAllLess(self, a, comparison_target):
        self.assertLess(np.max(self._GetNdArray(a)), comparison_target)

    def assertAllGreaterEqual(self, a, comparison_target):
        self.assertGreaterEqual(np.min(self._GetNdArray(a)), comparison_target)

    def assertAllLessEqual(self, a, comparison_target):
        self.assertLessEqual(np.max(self._GetNdArray(a)), comparison_target)

    def assertAllInRange(
        self, target, lower_bound, upper_bound, open_lower_bound=False, open_upper_bound=False
    ):
        target = self._GetNdArray(target)
        low = target > lower_bound if open_lower_bound else target >= lower_bound
        high = target < upper_bound if open_upper_bound else target <= upper_bound
        bad = np.flatnonzero(~(low & high))
        if bad.size:
            raise AssertionError(
                f"{bad.size} of the {target.size} element(s) are outside the range "
                f"{'(' if open_lower_bound else '['}{lower_bound}, {upper_bound}"
                f"{')' if open_upper_bound else ']'}: first at flat index {bad[0]}"
            )

    def assertAllInSet(self, target, expected_set):
        diff = set(self._GetNdArray(target).ravel().tolist()) - set(expected_set)
        if diff:
            raise AssertionError(f"{len(diff)} unique element(s) are not in the set: {diff}")

    def assertDTypeEqual(self, target, expected_dtype):
        self.assertEqual(
            self._GetNdArray(target).dtype, np.dtype(dtypes.as_dtype(expected_dtype).as_numpy_dtype)
        )

    def assertShapeEqual(self, np_array, tf_tensor, msg=None):
        self.assertAllEqual(np.shape(np_array), tf_tensor.shape.as_list(), msg=msg)

    def assertDeviceEqual(self, device1, device2, msg=None):
        from flowgraph.core.device_spec import DeviceSpec

        a, b = (DeviceSpec.from_string(d).to_string() for d in (device1, device2))
        self.assertEqual(a, b, msg)

    def assertStartsWith(self, actual, expected_start, msg=None):
        if not actual.startswith(expected_start):
            self.fail(
                f"{actual!r} does not start with {expected_start!r}{' : ' + msg if msg else ''}"
            )

    def assertProtoEquals(self, expected_message_maybe_ascii, message, msg=None):
        """`message` equals the proto (or its text format) given first."""
        from google.protobuf import text_format

        expected = expected_message_maybe_ascii
        if isinstance(expected, str):
            expected = text_format.Parse(expected, type(message)())
        self.assertEqual(
            text_format.MessageToString(expected), text_format.MessageToString(message), msg
        )

    @contextlib.contextmanager
    def assertRaisesWithPredicateMatch(self, exception_type, expected_err_re_or_predicate):
        """Expects `exception_type` whose message (with the op names of an OpError) matches the
        regular expression, or for which the predicate holds."""
        if callable(expected_err_re_or_predicate):
            predicate = expected_err_re_or_predicate
        else:

            def predicate(e):
                text = e.message if isinstance(e, errors.OpError) else str(e)
                op = e.op if isinstance(e, errors.OpError) else None
                if op is not None:
                    text += "\nCaused by: " + op.name
                return re.search(expected_err_re_or_predicate, text)

        try:
            yield
        except Exception as e:
            if not isinstance(e, exception_type) or not predicate(e):
                raise AssertionError(f"Exception of type {type(e)}: {e}") from e
        else:
            self.fail(exception_type.__name__ + " not raised")

    def assertRaisesOpError(self, expected_err_re_or_predicate):
        return self.assertRaisesWithPredicateMatch(errors.OpError, expected_err_re_or_predicate)

    # Python-2-era names that TF1 test files still call.
    assertRaisesRegexp = unittest.TestCase.assertRaisesRegex
    assertItemsEqual = unittest.TestCase.assertCountEqual


class _CheckedThread:
    """TF's checkedThread: `join()` re-raises, as a test failure, what the target raised."""

    def __init__(self, testcase, target, args=None, kwargs=None):
        self._testcase = testcase
        self._target = target
        self._args = () if args is None else args
        self._kwargs = {} if kwargs is None else kwargs
        self._thread = threading.Thread(target=self._run)
        self._exception = None
        self._joined = False

    def _run(self):
        try:
            self._target(*self._args, **self._kwargs)
        except Exception as e:  # noqa: BLE001 - reported by join()
            self._exception = e

    def start(self):
        self._thread.start()

    def join(self):
        self._thread.join()
        self._joined = True
        if self._exception is not None:
            self._testcase.fail(f"Error in checkedThread: {self._exception}")

    def is_alive(self):
        return self._thread.is_alive()

    def check_termination(self):
        if self._thread.is_alive() or (self._thread.ident is not None and not self._joined):
            self._testcase.fail("A checked thread was not joined.")


def _prepare_config(config, force_gpu):
    """TF's prepare_config: soft placement unless the test forces the GPU."""
    out = ConfigProto()
    if config is not None:
        out.CopyFrom(config)
    out.allow_soft_placement = not force_gpu
    return out


@contextlib.contextmanager
def _constrain_devices(sess, use_gpu, force_gpu):
    """Makes `sess` and its graph the defaults; pins new ops to the CPU, or the GPU if forced."""
    with sess.graph.as_default(), sess.as_default():
        if force_gpu:
            with sess.graph.device(gpu_device_name() or "/device:GPU:0"):
                yield sess
        elif use_gpu:
            yield sess
        else:
            with sess.graph.device("/device:CPU:0"):
                yield sess


def _assert_all_close(test, a, b, rtol, atol, msg, path):
    """TF's _assertAllCloseRecursive: dicts by key, lists and tuples as arrays when they are
    rectangular and element by element otherwise, arrays element-wise (NaN equals NaN)."""
    where = f" at {''.join(path)}" if path else ""
    if isinstance(a, dict) or isinstance(b, dict):
        test.assertIsInstance(a, dict, f"a is not a dict{where}")
        test.assertIsInstance(b, dict, f"b is not a dict{where}")
        test.assertEqual(set(a), set(b), f"mismatched keys{where}")
        for key in a:
            _assert_all_close(test, a[key], b[key], rtol, atol, msg, [*path, f"[{key!r}]"])
        return
    sequences = isinstance(a, (list, tuple)) and isinstance(b, (list, tuple))
    if sequences and not (_rectangular(a) and _rectangular(b)):
        test.assertEqual(len(a), len(b), f"mismatched lengths{where}: {len(a)} vs {len(b)}")
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_all_close(test, x, y, rtol, atol, msg, [*path, f"[{i}]"])
        return
    a, b = test._GetNdArray(a), test._GetNdArray(b)
    test.assertEqual(a.shape, b.shape, f"Shape mismatch{where}: expected {a.shape}, got {b.shape}")
    text = (msg or "") + where
    if a.dtype.kind in "biufc" and b.dtype.kind in "biufc":
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=text, equal_nan=True)
    else:
        np.testing.assert_array_equal(a, b, err_msg=text)


def _rectangular(x) -> bool:
    """Whether a list or tuple converts to a non-object ndarray (no Tensors, no ragged rows)."""
    if any(hasattr(e, "graph") and hasattr(e, "op") for e in x):
        return False
    try:
        return np.asarray(x).dtype != object
    except ValueError:
        return False


# -- tf.test functions --------------------------------------------------------------------------
def main(argv=None):
    """Runs the tests of the calling module (tf.test.main)."""
    unittest.main(argv=argv)


def is_gpu_available(cuda_only=False, min_cuda_compute_capability=None) -> bool:
    """Whether a GPU device exists (CuPy and a GPU present); `min_cuda_compute_capability`,
    a (major, minor) pair, also requires that the GPU has at least this capability."""
    from flowgraph.runtime import device

    if "GPU" not in device.available_device_types():
        return False
    if min_cuda_compute_capability is None:
        return True
    import cupy  # present: a GPU device exists only with CuPy

    cc = cupy.cuda.Device(0).compute_capability  # e.g. "90"
    return (int(cc[:-1]), int(cc[-1])) >= tuple(min_cuda_compute_capability)


def gpu_device_name() -> str:
    return "/device:GPU:0" if is_gpu_available() else ""


def is_built_with_cuda() -> bool:
    """True when the GPU kernels can run: CuPy (CUDA) is importable."""
    try:
        import cupy  # noqa: F401
    except ImportError:
        return False
    return True


is_built_with_gpu_support = is_built_with_cuda


def get_temp_dir() -> str:
    """A temporary directory for this test process (TF: the test's temp dir)."""
    global _TEMP_DIR
    if _TEMP_DIR is None:
        _TEMP_DIR = tempfile.mkdtemp(prefix="flowgraph_test_")
    return _TEMP_DIR


_TEMP_DIR = None


def assert_equal_graph_def(actual, expected, checkpoint_v2=False, hash_table_shared_name=False):
    """Raises AssertionError unless the two GraphDefs hold the same nodes (in any order).

    `checkpoint_v2` ignores the random `_temp_<hex>` suffix of V2 checkpoint paths in string
    constants; `hash_table_shared_name` ignores the shared_name of hash tables (TF's options)."""
    a = {n.name: _comparable(n, checkpoint_v2, hash_table_shared_name) for n in actual.node}
    e = {n.name: _comparable(n, checkpoint_v2, hash_table_shared_name) for n in expected.node}
    if set(a) != set(e):
        raise AssertionError(f"GraphDefs have different nodes: {sorted(set(a) ^ set(e))}")
    for name, node in a.items():
        if node != e[name]:
            raise AssertionError(f"Node {name!r} differs:\n{node}\nvs\n{e[name]}")


def _comparable(node, checkpoint_v2, hash_table_shared_name):
    out = type(node)()
    out.CopyFrom(node)
    if hash_table_shared_name and out.op.startswith("HashTable") and "shared_name" in out.attr:
        del out.attr["shared_name"]
    if checkpoint_v2 and out.op == "Const" and "value" in out.attr:
        strings = out.attr["value"].tensor.string_val
        for i, value in enumerate(strings):
            strings[i] = re.sub(rb"_temp_[0-9a-f]{32}", b"_temp_", value)
    return out


class Benchmark:
    """tf.test.Benchmark: times a Session run (`run_op_benchmark`) and reports the result."""

    def report_benchmark(
        self,
        iters=None,
        cpu_time=None,
        wall_time=None,
        throughput=None,
        extras=None,
        name=None,
        metrics=None,
    ):
        name = name or f"{type(self).__name__}.{_caller()}"
        entry = {
            "name": name,
            "iters": iters,
            "wall_time": wall_time,
            "cpu_time": cpu_time,
            "throughput": throughput,
            "extras": extras or {},
            "metrics": metrics or [],
        }
        print(f"benchmark {name}: {entry}", flush=True)
        return entry

    def run_op_benchmark(
        self,
        sess,
        op_or_tensor,
        feed_dict=None,
        burn_iters=2,
        min_iters=10,
        store_trace=False,
        store_memory_usage=True,
        name=None,
        extras=None,
        mbs=0,
    ):
        """Runs `op_or_tensor` burn_iters + min_iters times; reports the median wall time."""
        if store_trace:
            raise NotImplementedError("Benchmark.run_op_benchmark(store_trace=True)")
        for _ in range(burn_iters):
            sess.run(op_or_tensor, feed_dict=feed_dict)
        times = []
        for _ in range(min_iters):
            t0 = time.perf_counter()
            sess.run(op_or_tensor, feed_dict=feed_dict)
            times.append(time.perf_counter() - t0)
        wall = float(np.median(times))
        extras = dict(extras or {})
        if mbs:
            extras["throughput_mbs"] = mbs / wall
        return self.report_benchmark(iters=min_iters, wall_time=wall, extras=extras, name=name)


def _caller() -> str:
    import inspect

    frame = inspect.currentframe()
    return (
        frame.f_back.f_back.f_code.co_name if frame and frame.f_back and frame.f_back.f_back else ""
    )


def test_src_dir_path(relative_path):
    """TF's path into its own source tree: there is none to point into."""
    raise NotImplementedError(
        f"tf.test.test_src_dir_path({relative_path!r}): no TensorFlow sources"
    )
