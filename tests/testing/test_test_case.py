"""tf.test.TestCase and test_util as TF1 test suites use them (issue 7, defect 21); a user's TF1
test file runs unchanged under `flowgraph run -m pytest` and `python -m flowgraph run`."""

from __future__ import annotations

import unittest
from pathlib import Path

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.testing import test_util
from tests.helpers import run_flowgraph

USER_SUITE = Path(__file__).with_name("tf1_user_suite.py")


def _run_case(case_cls, name):
    """Runs one test method of a TestCase; returns the unittest result."""
    result = unittest.TestResult()
    case_cls(name).run(result)
    return result


def _outcome(body):
    class Case(tf.test.TestCase):
        def test_it(self):
            body(self)

    result = _run_case(Case, "test_it")
    return [str(e[1]) for e in result.errors + result.failures], len(result.skipped)


def test_assertions_pass_and_fail_like_tf():
    def passing(t):
        t.assertAllClose(
            {"a": [1.0, 2.0], "b": ([1], np.zeros(2))}, {"a": [1.0, 2.0 + 1e-7], "b": ([1], [0, 0])}
        )
        t.assertAllClose([[1.0], [2.0, 3.0]], [[1.0], [2.0, 3.0]])  # ragged: element by element
        t.assertAllCloseAccordingToType(np.float16([1.0]), np.float16([1.0009]))
        t.assertAllCloseAccordingToType(np.float32([1.0]), np.float32([1.0000009]))
        t.assertAllEqual([[1, 2]], np.array([[1, 2]]))
        t.assertNear(1.0, 1.05, 0.1)
        t.assertArrayNear([1.0, 2.0], [1.05, 2.0], 0.1)
        t.assertNDArrayNear(np.zeros(3), np.full(3, 0.01), 0.1)
        t.assertAllInRange([1, 2, 3], 1, 3)
        t.assertAllGreater([2, 3], 1)
        t.assertDTypeEqual(np.float32([1]), tf.float32)
        t.assertDeviceEqual("/cpu:0", "/device:CPU:0")
        t.assertItemsEqual([1, 2], [2, 1])

    assert _outcome(passing) == ([], 0)
    for failing in [
        lambda t: t.assertAllClose([1.0, 2.0], [1.0, 2.1]),
        lambda t: t.assertAllClose({"a": 1}, {"b": 1}),
        lambda t: t.assertAllEqual([1, 2], [[1, 2]]),  # shapes differ
        lambda t: t.assertAllCloseAccordingToType(np.float32([1.0]), np.float32([1.001])),
        lambda t: t.assertArrayNear([1.0], [1.2], 0.1),
        lambda t: t.assertNDArrayNear(np.zeros(3), np.ones(3), 0.1),
        lambda t: t.assertAllInRange([0, 5], 1, 3),
    ]:
        errors, _ = _outcome(failing)
        assert len(errors) == 1 and "AssertionError" in errors[0], errors


def test_assert_raises_op_error_and_predicate_match():
    def body(t):
        p = tf.placeholder(tf.float32, name="feed_me")
        with t.cached_session():
            with t.assertRaisesOpError("must feed a value for placeholder"):
                p.eval()
            with t.assertRaisesOpError(lambda e: isinstance(e, tf.errors.InvalidArgumentError)):
                p.eval()
            with t.assertRaisesWithPredicateMatch(ValueError, "Caused by: feed_me"):
                p.eval()

    assert _outcome(body) == ([], 0)
    p_missing = "InvalidArgumentError"
    for wrong in [
        lambda t: t.assertRaisesOpError("some other text"),
        lambda t: t.assertRaisesWithPredicateMatch(TypeError, "must feed"),
    ]:

        def body_wrong(t, wrong=wrong):
            p = tf.placeholder(tf.float32)
            with t.cached_session(), wrong(t):
                p.eval()

        errors, _ = _outcome(body_wrong)
        assert len(errors) == 1 and p_missing in errors[0], errors

    def not_raised(t):
        with t.assertRaisesOpError("anything"):
            pass

    errors, _ = _outcome(not_raised)
    assert len(errors) == 1 and "OpError not raised" in errors[0]


def test_sessions_devices_and_the_cached_session():
    def body(t):
        with t.session() as s1, t.session() as s2:
            assert s1 is not s2 and tf.get_default_session() is s2
            assert tf.constant(1.0).device == "/device:CPU:0"  # use_gpu=False pins to the CPU
        with t.session(use_gpu=True):
            assert tf.constant(1.0).device == ""
        with t.cached_session() as a, t.test_session() as b:
            assert a is b
        message = "graph used to get the cached session is different"
        with pytest.raises(ValueError, match=message), t.cached_session(graph=tf.Graph()):
            pass
        if not tf.test.is_gpu_available():
            with t.session(force_gpu=True) as sess:
                x = tf.constant(1.0) + 1.0
                with pytest.raises(tf.errors.InvalidArgumentError):
                    sess.run(x)  # no GPU, and soft placement is off as in TF

    assert _outcome(body) == ([], 0)


def test_evaluate_uses_the_default_session():
    def body(t):
        v = tf.Variable(3.0)
        with t.cached_session():
            t.evaluate(v.initializer)
            assert t.evaluate(v) == 3.0
        assert t.evaluate(tf.constant(2.0)) == 2.0  # no default session: the cached one

    assert _outcome(body) == ([], 0)


def test_test_session_run_as_a_test_is_skipped():
    class Case(tf.test.TestCase):
        pass

    result = _run_case(Case, "test_session")
    assert len(result.skipped) == 1 and not result.errors


def test_decorators():
    calls = []

    @test_util.run_all_in_graph_and_eager_modes
    class Case(tf.test.TestCase):
        @test_util.run_deprecated_v1
        def test_v1(self):
            calls.append("v1")

        def test_in_session(self):
            calls.append(tf.get_default_session() is not None)

        @test_util.run_v1_only("reason")
        def test_v1_only(self):
            calls.append("v1_only")

    for name in ("test_v1", "test_in_session", "test_v1_only"):
        result = _run_case(Case, name)
        assert not result.errors and not result.failures, result.errors + result.failures
    assert calls == ["v1", True, "v1_only"]
    with pytest.raises(ValueError, match="'reason' should be string"):
        test_util.run_v1_only(lambda self: None)
    with pytest.raises(ValueError, match="only supports test methods"):
        test_util.run_in_graph_and_eager_modes(Case)


@pytest.fixture
def user_dir(tmp_path):
    (tmp_path / "my_op_test.py").write_text(USER_SUITE.read_text())
    return tmp_path


def test_a_user_tf1_test_file_runs_under_flowgraph_run_pytest(user_dir):
    out = run_flowgraph(
        "run", "-m", "pytest", "-p", "no:cacheprovider", "my_op_test.py", cwd=user_dir
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "9 passed, 1 skipped" in out.stdout, out.stdout


def test_a_user_tf1_test_file_runs_as_a_script(user_dir):
    out = run_flowgraph("run", "my_op_test.py", cwd=user_dir)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Ran 10 tests" in out.stderr and "OK (skipped=1)" in out.stderr, out.stderr


def test_a_failing_user_test_gives_a_failing_exit_status(tmp_path):
    path = tmp_path / "failing_suite.py"
    path.write_text(
        "import tensorflow as tf\n\n"
        "class T(tf.test.TestCase):\n"
        "    def testWrong(self):\n"
        "        self.assertAllEqual([1], [2])\n\n"
        "if __name__ == '__main__':\n"
        "    tf.test.main()\n"
    )
    out = run_flowgraph("run", str(path), cwd=tmp_path)
    assert out.returncode == 1 and "FAILED (failures=1" in out.stderr, out.stderr
