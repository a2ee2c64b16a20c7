"""ProximalGradientDescentOptimizer and ProximalAdagradOptimizer against TensorFlow 2.21's values
(tf.compat.v1, 3 steps of the same programs, dense and through a gather with a duplicate
index), on ref and resource variables; basic_train_loop, checkpoints_iterator /
wait_for_new_checkpoint and match_filenames_once."""

import contextlib
import os

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import errors

TF_VALUES = {
    "pgd_dense": [
        [0.4484209, -1.263725, 0.8244572],
        [-1.3801954, -0.028702, -2.0424287],
        [-0.2212872, -0.7146401, -0.8976685],
    ],
    "pgd_sparse": [
        [0.0241291, -2.1123085, 1.6730406],
        [0.3, 0.04, -2.0],
        [-0.2212872, -0.7146401, -0.8976685],
    ],
    "pada_dense": [
        [0.3270323, -1.0551976, 0.6048083],
        [-0.3665099, -0.0577239, -2.0672987],
        [0.0090872, -0.492211, -0.6798732],
    ],
    "pada_sparse": [
        [0.2905806, -1.1260787, 0.6618956],
        [0.3, 0.04, -2.0],
        [0.0090872, -0.492211, -0.6798732],
    ],
    "pada_nol1_dense": [
        [0.3242616, -1.1030949, 0.6535673],
        [-0.3742898, -0.1897019, -2.1562064],
        [0.0207245, -0.5411853, -0.7284885],
    ],
    "pada_nol1_sparse": [
        [0.3016793, -1.1477168, 0.6836605],
        [0.3, 0.04, -2.0],
        [0.0207245, -0.5411853, -0.7284885],
    ],
}
VAR0 = np.array([[1.0, -0.5, 0.02], [0.3, 0.04, -2.0], [0.7, 0.1, -0.1]], np.float32)
W = np.array([[0.5, 1.0, -1.0], [2.0, 0.1, 0.3], [1.0, 1.0, 1.0]], np.float32)
OPTIMIZERS = {
    "pgd": lambda: tf.train.ProximalGradientDescentOptimizer(
        0.3, l1_regularization_strength=0.05, l2_regularization_strength=0.1
    ),
    "pada": lambda: tf.train.ProximalAdagradOptimizer(
        0.3,
        initial_accumulator_value=0.2,
        l1_regularization_strength=0.05,
        l2_regularization_strength=0.1,
    ),
    "pada_nol1": lambda: tf.train.ProximalAdagradOptimizer(0.3, l2_regularization_strength=0.1),
}


@pytest.mark.parametrize("resource", [False, True])
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_proximal_optimizers_match_tensorflow(name, sparse, resource):
    with tf.Graph().as_default():
        v = tf.Variable(VAR0, use_resource=resource)
        w = tf.constant(W)
        if sparse:
            loss = tf.reduce_sum(tf.gather(v, [0, 2, 0]) * tf.gather(w, [0, 2, 0]))
        else:
            loss = tf.reduce_sum(v * w)
        opt = OPTIMIZERS[name]()
        step = opt.minimize(loss)
        types = {op.type for op in tf.get_default_graph().get_operations()}
        kind = "ProximalGradientDescent" if name == "pgd" else "ProximalAdagrad"
        want_op = ("Resource" if resource else "") + ("SparseApply" if sparse else "Apply") + kind
        assert want_op in types
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            for _ in range(3):
                sess.run(step)
            got = sess.run(v)
        key = f"{name}_{'sparse' if sparse else 'dense'}"
        np.testing.assert_allclose(got, TF_VALUES[key], rtol=1e-5, atol=1e-6)
        if name != "pgd":
            assert opt.get_slot(v, "accumulator") is not None


def test_proximal_l1_makes_exact_zeros_and_argument_errors():
    with tf.Graph().as_default():
        v = tf.Variable([0.01, -0.02, 3.0])
        step = tf.train.ProximalGradientDescentOptimizer(
            0.1, l1_regularization_strength=1.0
        ).minimize(tf.reduce_sum(v * 0.0))
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            sess.run(step)
            np.testing.assert_allclose(sess.run(v), [0.0, 0.0, 2.9], rtol=1e-6)
    with pytest.raises(ValueError, match="initial_accumulator_value"):
        tf.train.ProximalAdagradOptimizer(0.1, initial_accumulator_value=0.0)


# -- loops ------------------------------------------------------------------------------------
class _FakeSupervisor:
    """managed_session / should_stop as tf.train.Supervisor offers them, counting sessions."""

    def __init__(self, session, steps):
        self.session, self.steps, self.sessions = session, steps, 0

    @contextlib.contextmanager
    def managed_session(self, master=""):
        self.sessions += 1
        yield self.session

    def should_stop(self):
        return self.steps <= 0


def test_basic_train_loop_runs_until_stop_and_restarts_after_abort():
    with tf.Graph().as_default():
        counter = tf.Variable(0)
        incr = tf.assign_add(counter, 1)
        sess = tf.Session()
        sess.run(tf.global_variables_initializer())
        sv = _FakeSupervisor(sess, steps=5)
        aborted = []

        def step(session, scale, offset=0):
            if sv.steps == 3 and not aborted:
                aborted.append(True)
                raise errors.AbortedError(None, None, "a server restarted")
            session.run(incr)
            sv.steps -= scale + offset

        with sess:
            tf.train.basic_train_loop(sv, step, args=[1], kwargs={"offset": 0})
            assert sess.run(counter) == 5 and sv.sessions == 2
        with pytest.raises(errors.InvalidArgumentError):
            tf.train.basic_train_loop(
                _FakeSupervisor(tf.Session(), 1),
                lambda s: (_ for _ in ()).throw(errors.InvalidArgumentError(None, None, "x")),
            )


def test_checkpoints_iterator_and_wait(tmp_path):
    directory = str(tmp_path)
    assert tf.train.wait_for_new_checkpoint(directory, timeout=0) is None
    assert list(tf.train.checkpoints_iterator(directory, timeout=0)) == []
    with tf.Graph().as_default():
        v = tf.Variable(1.0)
        saver = tf.train.Saver()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            first = saver.save(sess, os.path.join(directory, "model"), global_step=1)
    assert tf.train.wait_for_new_checkpoint(directory, timeout=0) == first
    assert tf.train.wait_for_new_checkpoint(directory, first, timeout=0) is None
    assert list(tf.train.checkpoints_iterator(directory, timeout=0)) == [first]
    calls = []
    got = list(
        tf.train.checkpoints_iterator(
            directory, timeout=0, timeout_fn=lambda: calls.append(1) or True
        )
    )
    assert got == [first] and calls == [1]
    del v


def test_match_filenames_once(tmp_path):
    for name in ("b.txt", "a.txt", "c.csv"):
        (tmp_path / name).write_text("x")
    with tf.Graph().as_default():
        files = tf.train.match_filenames_once(str(tmp_path / "*.txt"))
        assert files in tf.local_variables() and files not in tf.trainable_variables()
        assert files.op.name == "matching_filenames"
        with tf.Session() as sess:
            sess.run(tf.local_variables_initializer())
            got = [os.path.basename(f.decode()) for f in sess.run(files)]
        assert got == ["a.txt", "b.txt"]
        with tf.Session() as sess:
            assert sess.run(tf.matching_files(str(tmp_path / "*.csv"))).shape == (1,)
