"""The numeric gradient checker (TF1's tf.test.compute_gradient / compute_gradient_error).

It compares two Jacobians of y with respect to x, each of shape [x.size, y.size]:
* the theoretical one, from the symbolic gradient graph (tf.gradients with grad_ys = dy):
  one run per element of y, feeding dy = e_j, gives row j of J^T;
* the numeric one, by central differences: one pair of runs per element of x,
  (y(x + delta e_i) - y(x - delta e_i)) / (2 delta).

Complex tensors are not supported (the Jacobian of a non-holomorphic function needs the real
and imaginary parts separately); they raise ValueError.
"""

from __future__ import annotations

import numpy as np

from flowgraph.core import dtypes
from flowgraph.framework.indexed_slices import IndexedSlices

__all__ = ["check_gradients", "compute_gradient", "compute_gradient_error"]


def _session_for(graph):
    from flowgraph.session import default_session

    sess = default_session.get()
    if sess is not None and sess.graph is graph:
        return sess, False
    from flowgraph.session.session import Session

    return Session(graph=graph), True


def _dense(sess, t, feed):
    """Fetches `t`, densifying an IndexedSlices gradient on the client side."""
    if not isinstance(t, IndexedSlices):
        return np.asarray(sess.run(t, feed))
    values, indices, shape = sess.run([t.values, t.indices, t.dense_shape], feed)
    out = np.zeros(shape, dtype=values.dtype)
    np.add.at(out, indices, values)
    return out


def _check_dtype(t, what):
    dt = t.dtype.base_dtype
    if dt.is_complex:
        raise ValueError(f"compute_gradient does not support complex {what} {t.name}")
    if not dt.is_floating:
        raise ValueError(f"compute_gradient needs a floating-point {what}; {t.name} is {dt.name}")


def _theoretical_jacobian(sess, x, x_size, x_data, dx, dy, dy_size, feed):
    y_dtype = dy.dtype.base_dtype.as_numpy_dtype
    jacobian = np.zeros((x_size, dy_size), dtype=np.float64)
    if dx is None:
        return jacobian
    dy_data = np.zeros(dy.shape.as_list(), dtype=y_dtype)
    flat = dy_data.reshape(-1)
    for col in range(dy_size):
        flat[:] = 0
        flat[col] = 1
        value = _dense(sess, dx, {**feed, x: x_data, dy: dy_data})
        jacobian[:, col] = value.reshape(-1)
    return jacobian


def _numeric_jacobian(sess, x, x_size, x_data, y, y_size, delta, feed):
    jacobian = np.zeros((x_size, y_size), dtype=np.float64)
    x_work = x_data.copy()
    flat = x_work.reshape(-1)
    for row in range(x_size):
        original = flat[row]
        flat[row] = original + delta
        y_pos = np.asarray(sess.run(y, {**feed, x: x_work}), dtype=np.float64)
        flat[row] = original - delta
        y_neg = np.asarray(sess.run(y, {**feed, x: x_work}), dtype=np.float64)
        flat[row] = original
        jacobian[row, :] = ((y_pos - y_neg) / (2 * delta)).reshape(-1)
    return jacobian


def _gradient_graph(x_list, y, y_shape):
    """dy (a fed constant) and the symbolic gradients of y . dy with respect to each x."""
    from flowgraph.framework.convert import constant
    from flowgraph.gradients.impl import gradients

    with y.graph.as_default():
        dy = constant(
            np.ones(y_shape, y.dtype.base_dtype.as_numpy_dtype), name="gradient_checker_dy"
        )
        return gradients(y, x_list, dy), dy


def compute_gradient(
    x, x_shape, y, y_shape, x_init_value=None, delta=1e-3, init_targets=None, extra_feed_dict=None
):
    """The (theoretical, numeric) Jacobians of y with respect to x, each [x size, y size].

    x may be a list of tensors (then x_shape and x_init_value are lists too, and a list of
    Jacobian pairs is returned). x_init_value defaults to uniform random values in [0, 1).
    Runs in the default session when it holds y's graph, else in a temporary one.

    Example: theo, num = compute_gradient(x, [2, 3], tf.tanh(x), [2, 3])
    """
    xs = x if isinstance(x, list) else [x]
    shapes = x_shape if isinstance(x, list) else [x_shape]
    inits = x_init_value if isinstance(x, list) else [x_init_value]
    if inits is None:
        inits = [None] * len(xs)
    if not (len(xs) == len(shapes) == len(inits)):
        raise ValueError("x, x_shape and x_init_value must have the same length")
    _check_dtype(y, "y")
    for t in xs:
        _check_dtype(t, "x")
    y_shape = tuple(int(d) for d in y_shape)
    y_size = int(np.prod(y_shape))
    sess, owned = _session_for(y.graph)
    try:
        if init_targets is not None:
            if not isinstance(init_targets, (list, tuple)):
                raise TypeError("init_targets must be a list or tuple")
            for target in init_targets:
                sess.run(target)
        grads, dy = _gradient_graph(xs, y, y_shape)
        feed = dict(extra_feed_dict or {})
        datas = []
        for t, shp, init in zip(xs, shapes, inits):
            np_type = t.dtype.base_dtype.as_numpy_dtype
            if init is None:
                init = np.random.random_sample(tuple(shp))
            data = np.array(init, dtype=np_type).reshape(tuple(shp))
            datas.append(data)
        feed.update({t: d for t, d in zip(xs, datas)})
        results = []
        for i, (t, data, dx) in enumerate(zip(xs, datas, grads)):
            others = {u: d for j, (u, d) in enumerate(zip(xs, datas)) if j != i}
            base = {**feed, **others}
            theo = _theoretical_jacobian(sess, t, data.size, data, dx, dy, y_size, base)
            step = np.asarray(delta, dtype=t.dtype.base_dtype.as_numpy_dtype).item()
            num = _numeric_jacobian(sess, t, data.size, data, y, y_size, step, base)
            results.append((theo, num))
    finally:
        if owned:
            sess.close()
    return results if isinstance(x, list) else results[0]


def compute_gradient_error(
    x, x_shape, y, y_shape, x_init_value=None, delta=1e-3, init_targets=None, extra_feed_dict=None
):
    """The largest absolute difference between the theoretical and numeric Jacobians."""
    result = compute_gradient(
        x, x_shape, y, y_shape, x_init_value, delta, init_targets, extra_feed_dict
    )
    pairs = result if isinstance(x, list) else [result]
    return max((float(np.max(np.abs(t - n))) if t.size else 0.0) for t, n in pairs)


_DEFAULTS = {  # dtype -> (delta, atol, rtol): central differences lose about eps / delta
    dtypes.float64: (1e-6, 1e-6, 1e-5),
    dtypes.float32: (1e-3, 3e-3, 3e-3),
    dtypes.float16: (1e-2, 5e-2, 5e-2),
}


def check_gradients(fn, inputs, delta=None, atol=None, rtol=None, **kwargs):
    """Asserts that the symbolic gradients of `fn` match central differences at `inputs`.

    `fn(*tensors, **kwargs)` is built on placeholders of the inputs' dtypes and shapes; it may
    return one tensor or a list (each output is checked against every input). Tolerances
    default by dtype.

    Example: check_gradients(tf.tanh, [np.array([0.1, -0.5], np.float32)])
    """
    import flowgraph as tf

    inputs = [np.asarray(a) for a in inputs]
    graph = tf.Graph()
    with graph.as_default():
        phs = [tf.placeholder(dtypes.as_dtype(a.dtype), a.shape) for a in inputs]
        out = fn(*phs, **kwargs)
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        dt = dtypes.as_dtype(inputs[0].dtype)
        d_delta, d_atol, d_rtol = _DEFAULTS.get(dt, _DEFAULTS[dtypes.float32])
        delta = d_delta if delta is None else delta
        atol = d_atol if atol is None else atol
        rtol = d_rtol if rtol is None else rtol
        with tf.Session(graph=graph) as sess, sess.as_default():
            for k, y in enumerate(outs):
                y_shape = np.shape(sess.run(y, dict(zip(phs, inputs))))
                pairs = compute_gradient(
                    list(phs),
                    [a.shape for a in inputs],
                    y,
                    y_shape,
                    x_init_value=list(inputs),
                    delta=delta,
                )
                for i, (theo, num) in enumerate(pairs):
                    np.testing.assert_allclose(
                        theo,
                        num,
                        rtol=rtol,
                        atol=atol,
                        err_msg=f"gradient of output {k} ({y.name}) w.r.t. input {i}",
                    )
