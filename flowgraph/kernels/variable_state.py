"""The storage of one variable (whitepaper §4.7), the state Variable kernels read and write.
It lives beside the kernels that use it; a device's ResourceMgr (runtime/resources.py) keeps
the instances between steps."""

from __future__ import annotations

import contextlib
import threading

import numpy as np

from flowgraph.core import errors


class VariableState:
    """The storage of one variable. `value` is None until the first write (uninitialized).

    `value` is always read-only, so no kernel and no Session fetch can change it by accident
    (a fetch copies what is read-only). Two kinds of write, as in TensorFlow:

    * A reference variable (VariableV2 and the Assign/Apply/Scatter ops on its ref) has one
      buffer that every read aliases; `write(..., in_place=True)` copies the new value into it
      while the shape is unchanged. A read taken earlier in the step therefore sees a later
      update, which is what `with control_dependencies([update]): identity(v)` relies on.
    * A resource variable is copy-on-write: `write(..., in_place=False)` rebinds `value` to a
      new frozen array, so a value already read never changes behind its reader's back.

    Writers that must not interleave hold `lock`; reads never lock (TF's ref reads do not)."""

    __slots__ = ("_buffer", "dtype", "lock", "name", "shape", "value")

    def __init__(self, name: str, dtype, shape):
        self.name = name
        self.dtype = dtype
        self.shape = shape
        self.value: np.ndarray | None = None
        self.lock = threading.Lock()
        self._buffer: np.ndarray | None = None  # the writable storage behind `value` (ref only)

    def read(self) -> np.ndarray:
        value = self.value
        if value is None:
            raise errors.FailedPreconditionError(
                None, None, f"Attempting to use uninitialized value {self.name}"
            )
        return value

    def write(self, value, in_place: bool, owned: bool = False) -> None:
        """Makes `value` the variable's value, cast to the variable's current dtype.

        `in_place` writes into the reference buffer (see the class docstring); otherwise the
        value is rebound. `owned` says `value` is a fresh array nobody else holds."""
        dtype = self.value.dtype if self.value is not None else _numpy_dtype(self.dtype, value)
        buffer = self._buffer
        if in_place and buffer is not None and buffer.shape == np.shape(value):
            np.copyto(buffer, value, casting="unsafe")
            return
        arr = np.asarray(value, dtype=dtype)
        # Keep without a copy only an array nobody can write: a fresh one handed over, or a
        # frozen one that owns its memory (a constant); a read-only view may alias a ref buffer.
        keep = arr.base is None and (owned if arr.flags.writeable else not in_place)
        if not keep:
            arr = np.array(arr, copy=True)
        if in_place:
            self._buffer = arr
            arr = arr.view()
        else:
            self._buffer = None
        arr.flags.writeable = False
        self.value = arr

    def update_buffer(self) -> np.ndarray | None:
        """The writable buffer of a reference variable, for kernels that update it in place
        (the fused training ops); None for a resource variable or before the first write."""
        return self._buffer

    def reset(self) -> None:
        """Back to uninitialized (DestroyResourceOp)."""
        self.value = None
        self._buffer = None

    def __repr__(self):
        return f"<VariableState {self.name} initialized={self.value is not None}>"


@contextlib.contextmanager
def locked(states):
    """Holds the lock of each of `states` (each once) in one fixed order, so that two kernels
    that lock overlapping sets cannot deadlock (TF's MaybeLockVariableInputMutexesInOrder)."""
    with contextlib.ExitStack() as stack:
        for state in sorted({id(s): s for s in states}.values(), key=id):
            stack.enter_context(state.lock)
        yield


def _numpy_dtype(dtype, value):
    if dtype is None:
        return np.asarray(value).dtype
    return np.dtype(dtype.base_dtype.as_numpy_dtype)
