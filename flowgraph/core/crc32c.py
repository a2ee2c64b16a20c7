"""CRC-32C of large buffers without holding the GIL (checkpoint tensors, whitepaper §3.3).

google_crc32c's extension releases the GIL only for `bytes` objects; over a NumPy buffer (a
tensor read from or written to a checkpoint) it holds it for the whole pass, ~0.4 ms per MiB,
so RestoreV2's reads on the device pool could not checksum in parallel and every other kernel
waited. This calls the same bundled C library (google_crc32c.libs, or a system libcrc32c)
through ctypes, which releases the GIL for a foreign call. Where no library can be loaded,
and for small buffers (a ctypes call costs ~1 us), google_crc32c's extension computes it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os

import google_crc32c
import numpy as np

# Below this many bytes the extension's call is cheaper than ctypes' argument conversion.
_NOGIL_MIN_BYTES = 1 << 16


def _load():
    """crc32c_extend(crc, data, n) of the library google_crc32c uses, or None."""
    try:
        from google_crc32c import _crc32c

        here = os.path.dirname(os.path.dirname(_crc32c.__file__))
        paths = sorted(glob.glob(os.path.join(here, "google_crc32c.libs", "libcrc32c*.so*")))
    except ImportError:  # the pure-Python google_crc32c: no library to share
        paths = []
    system = ctypes.util.find_library("crc32c")
    for path in paths + ([system] if system else []):
        try:
            fn = ctypes.CDLL(path).crc32c_extend
        except (OSError, AttributeError):
            continue
        fn.argtypes = [ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t]
        fn.restype = ctypes.c_uint32
        return fn
    return None


_extend = _load()


def value(data) -> int:
    """The (unmasked) CRC-32C of `data`, a bytes-like object; a C-contiguous NumPy array of
    64 KiB or more is checksummed without the GIL."""
    if (
        _extend is not None
        and isinstance(data, np.ndarray)
        and data.nbytes >= _NOGIL_MIN_BYTES
        and data.flags.c_contiguous
    ):
        return _extend(0, data.ctypes.data, data.nbytes)
    return google_crc32c.value(data)
