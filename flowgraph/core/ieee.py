"""IEEE floating-point exceptions ignored for a while, cheaply: TensorFlow's kernels compute
log(0) = -inf and 0/0 = nan silently, and so must ours (CheckNumerics is the op that turns
them into errors); feeds cast silently too.

`np.errstate(all="ignore")` does that, but costs about a microsecond per use (a Python context
manager building NumPy's error state each time), which is most of a small step's budget on the
per-run path. NumPy keeps the state in a context variable; setting it to a state built once
costs a tenth of that. `ignore()` returns a token for `restore(token)`; both are thread-safe
and nest, like the context variable. Where NumPy's internals differ (another major version),
they fall back to `np.errstate`.
"""

from __future__ import annotations

import numpy as np

try:
    from numpy._core._ufunc_config import _extobj_contextvar, _make_extobj

    _IGNORE = _make_extobj(all="ignore")

    def ignore():
        """Ignores floating-point exceptions in this context until `restore(token)`."""
        return _extobj_contextvar.set(_IGNORE)

    def restore(token) -> None:
        _extobj_contextvar.reset(token)

except (ImportError, AttributeError, TypeError):  # another NumPy: its public context manager

    def ignore():
        """Ignores floating-point exceptions in this context until `restore(token)`."""
        state = np.errstate(all="ignore")
        state.__enter__()
        return state

    def restore(token) -> None:
        token.__exit__(None, None, None)
