"""runtime/heap.py: once a Session exists, a large buffer freed by one kernel is reused by the
next allocation of its size instead of being faulted in afresh (in a new interpreter each: the
setting is per process)."""

from tests.helpers import fresh_json

# Page faults of writing two fresh 1 MiB arrays after two of that size were freed (a step's
# pattern: glibc's dynamic threshold alone then maps the one and trims the other each time).
_REFAULTS = """
import json, resource, sys
import numpy as np
import flowgraph as tf
if sys.argv[1] == "session":
    tf.Session().close()
from flowgraph.runtime import heap
faults = []
for _ in range(5):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    a, b = np.empty(1 << 18, np.float32), np.empty(1 << 18, np.float32)
    a.fill(1.0)
    b.fill(1.0)
    del a, b
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(json.dumps([heap._configured, min(faults[1:])]))
"""


def _refaults(mode: str, **env: str):
    return fresh_json(_REFAULTS, mode, **env)


def test_a_session_makes_large_buffers_reused():
    configured, faults = _refaults("session")
    if not configured:  # not glibc: nothing to set
        assert _refaults("none")[0] is False
        return
    assert faults < 8
    assert _refaults("none")[1] >= 256  # without the setting: at least one array's pages


def test_a_users_malloc_setting_is_kept():
    configured, _ = _refaults("session", MALLOC_MMAP_THRESHOLD_="131072")
    assert configured is False
