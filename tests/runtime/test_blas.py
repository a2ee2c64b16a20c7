"""runtime/blas.py: once a Session exists, BLAS is single-threaded (intra-op parallelism is the
device pool's) and OpenBLAS runs the kernel set chosen for this CPU."""

import flowgraph as tf
from flowgraph.runtime import blas
from tests.helpers import fresh_json


def test_session_limits_blas_to_one_thread():
    tf.Session(config=tf.ConfigProto(intra_op_parallelism_threads=2)).close()
    assert blas.num_threads() and set(blas.num_threads()) == {1}


# In a new interpreter (the kernel choice is once per process): the kernel sets before and after
# configure(), and whether a float32 product afterwards matches float64 NumPy.
_CHOICE = """
import json, numpy as np
from flowgraph.runtime import blas
before = blas.core_names()
blas.configure()
a = np.random.RandomState(0).randn(300, 200).astype(np.float32)
err = float(np.abs(a @ a.T - a.astype(np.float64) @ a.T.astype(np.float64)).max())
print(json.dumps([before, blas.core_names(), err]))
"""


def _choice(**env: str):
    return fresh_json(_CHOICE, **env)


def test_kernel_choice_follows_the_table_and_products_stay_right():
    before, after, err = _choice()
    assert before and err < 1e-3
    slow, faster = blas._FASTER_CORES.get(blas._cpu(), (frozenset(), ""))
    assert after == [faster if name.lower() in slow else name for name in before]


def test_a_users_coretype_is_kept():
    before, after, err = _choice(OPENBLAS_CORETYPE="Sandybridge")
    assert after == before == ["Sandybridge"] * len(before) and err < 1e-3
