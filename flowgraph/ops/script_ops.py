"""Calling Python from the graph: tf.py_func and tf.numpy_function (TF1's script_ops).

The callable cannot travel in a GraphDef, so it is stored in the process-local table
`flowgraph.core.py_funcs` under a fresh token, and the PyFunc node carries the token; the CPU
kernel (kernels/cpu/script_ops.py) looks it up when the node runs. The graph keeps its
callables alive: when the graph is garbage-collected its tokens are released, as in TF.
A GraphDef holding PyFuncs therefore runs only in the process (and while the graph) that made it.
"""

from __future__ import annotations

import threading
import weakref

from flowgraph.core import dtypes, py_funcs
from flowgraph.framework.apply_op import apply_op, graph_of
from flowgraph.gradients.registry import not_differentiable

__all__ = ["numpy_function", "py_func"]

_LOCK = threading.Lock()  # guards _TOKENS
_TOKENS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # Graph -> its tokens

not_differentiable("PyFunc")
not_differentiable("PyFuncStateless")


def _keep_until_graph_dies(graph, token: str) -> None:
    """Releases `token` from the table when `graph` is collected."""
    with _LOCK:
        tokens = _TOKENS.get(graph)
        if tokens is None:
            tokens = _TOKENS[graph] = []
            weakref.finalize(graph, py_funcs.remove, tokens)
        tokens.append(token)


def py_func(func, inp, Tout, stateful=True, name=None):
    """Wraps the Python function `func` as an op: when it runs, `func` gets the values of `inp`
    as NumPy arrays (scalars as NumPy scalars) and returns the outputs.

    Args:
      func: a callable taking len(inp) arguments and returning one value per dtype in `Tout`
        (a single value when `Tout` is a single dtype; nothing when `Tout` is []).
      inp: a list of Tensors (or values convertible to Tensors).
      Tout: a DType, or a list/tuple of DTypes. Results are converted to these dtypes (a
        precision change within a kind is allowed; a change of kind is an InvalidArgumentError
        naming the op).
      stateful: True (op type PyFunc) means `func` may have side effects or give different
        results for the same inputs, so the graph never merges, folds or drops the op; False
        gives a PyFuncStateless op.
      name: the op's name.

    Returns:
      A Tensor if `Tout` is a single dtype, a list of Tensors if it is a list, or the Operation
      if `Tout` is empty. Output shapes are unknown; use `set_shape` to declare them.

    Example:
      y = tf.py_func(lambda x: np.sinh(x), [x], tf.float32)
    """
    is_list = isinstance(Tout, (list, tuple))
    tout = [dtypes.as_dtype(t) for t in (Tout if is_list else [Tout])]
    if not isinstance(inp, (list, tuple)):
        raise TypeError(f"py_func: `inp` must be a list of Tensors, got {inp!r}")
    token = py_funcs.register(func)
    try:
        op = apply_op(
            "PyFunc" if stateful else "PyFuncStateless",
            [list(inp)],
            name=name,
            graph=graph_of(list(inp)),
            token=token,
            Tout=tout,
        )
    except BaseException:
        py_funcs.remove([token])
        raise
    _keep_until_graph_dies(op.graph, token)
    if not tout:
        return op
    return list(op.outputs) if is_list else op.outputs[0]


def numpy_function(func, inp, Tout, name=None):
    """`py_func` with stateful=True: `func` takes and returns NumPy values (TF 1.15's
    tf.numpy_function)."""
    return py_func(func, inp, Tout, stateful=True, name=name)
