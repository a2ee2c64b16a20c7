"""The process's BLAS, set up once by the first Session: one thread per library, and on CPUs
where OpenBLAS's automatic choice is measurably slow, its faster kernel set.

One thread: intra-op parallelism belongs to the devices' pools (DESIGN.md decision 10,
runtime/threadpool.py). OpenBLAS's own threads spin and wait on each other: a 256x256 sgemm was
measured at ~140 GFLOP/s on one thread but 1.5 GFLOP/s on OpenBLAS's 2 threads while another
process held one of the two cores. TensorFlow avoids this by sharding kernels over its own pool;
so do we, and every BLAS library loaded in the process (NumPy's and SciPy's) is limited to one
thread at run time through threadpoolctl, so that users need no environment variables. The limit
is process-wide, like the libraries' own setting.

The kernel set: OpenBLAS's builds for NumPy and SciPy (DYNAMIC_ARCH) pick their kernels from
the CPU at load. On AMD Zen 4 (family 25 with AVX-512, whose 512-bit units are two 256-bit
halves) they pick the SkylakeX kernels, but the Haswell (AVX2) ones are faster there for float32.
Measured on one core of an EPYC Zen 4, CPU time, SkylakeX -> Haswell GFLOP/s: sgemm 2048^3
100 -> 107; 256x784x1024 (W4's first layer) 96 -> 104; 784x256x1024 (its weight gradient)
97 -> 105; 256^3 102 -> 108; 64x3136x1024 (LeNet's fc1) 75 -> 92; dgemm 2048^3 52 -> 49.
float32 is what models train in, so on Zen 4 the Haswell set is chosen, through the library's
own entry points (`gotoblas_dynamic_init` reads OPENBLAS_CORETYPE, as at load). A user's own
OPENBLAS_CORETYPE is respected. The switch is process-wide and must not overlap a BLAS call on
another thread; it happens once, when the first Session is created, before any kernel runs.
"""

from __future__ import annotations

import ctypes
import os
import threading

import scipy.linalg  # noqa: F401  (loads SciPy's BLAS too, so that the setup covers it)
from threadpoolctl import threadpool_info, threadpool_limits

_lock = threading.Lock()
_configured = False

# (CPU vendor, family) -> (OpenBLAS's automatic choices that are slower there, the faster one)
_FASTER_CORES = {("AuthenticAMD", 25): (frozenset({"skylakex", "cooperlake"}), "Haswell")}


def configure() -> None:
    """Sets up every loaded BLAS library (once per process): the faster kernel set where one is
    known, then one thread."""
    global _configured
    if _configured:
        return
    with _lock:
        if not _configured:
            _choose_faster_cores()
            threadpool_limits(1, user_api="blas")
            _configured = True


def num_threads() -> list[int]:
    """The thread count of each loaded BLAS library (for tests and diagnostics)."""
    return [info["num_threads"] for info in _blas_info()]


def core_names() -> list[str]:
    """The kernel set each loaded OpenBLAS runs (e.g. 'Haswell'; for tests and diagnostics)."""
    return [_core_name(_openblas(info)) for info in _blas_info() if _is_openblas(info)]


def _blas_info() -> list[dict]:
    return [info for info in threadpool_info() if info["user_api"] == "blas"]


def _is_openblas(info: dict) -> bool:
    return info["internal_api"] == "openblas"


def _openblas(info: dict) -> ctypes.CDLL:
    return ctypes.CDLL(info["filepath"])  # the loaded library (dlopen counts a reference)


def _core_name(lib: ctypes.CDLL) -> str:
    lib.gotoblas_corename.restype = ctypes.c_char_p
    return lib.gotoblas_corename().decode()


def _cpu() -> tuple[str, int] | None:
    """(vendor, family) of this machine's CPU, from /proc/cpuinfo; None where it is absent."""
    try:
        with open("/proc/cpuinfo") as f:
            lines = f.read(8192).splitlines()  # the first processor's fields
        pairs = (line.partition(":") for line in lines)
        fields = {key.strip(): value.strip() for key, _, value in pairs}
        return fields["vendor_id"], int(fields["cpu family"])
    except (OSError, KeyError, ValueError):
        return None


def _choose_faster_cores() -> None:
    """Re-initialises each OpenBLAS whose automatic kernel choice is a slow one here (see the
    module docstring) with the faster set, unless the user chose one."""
    if "OPENBLAS_CORETYPE" in os.environ:
        return
    slow, faster = _FASTER_CORES.get(_cpu(), (frozenset(), ""))
    for info in _blas_info():
        if not _is_openblas(info):
            continue
        lib = _openblas(info)
        try:
            if _core_name(lib).lower() not in slow:
                continue
            quit_, init = lib.gotoblas_dynamic_quit, lib.gotoblas_dynamic_init
        except AttributeError:  # not a DYNAMIC_ARCH build: its kernels are fixed
            continue
        os.environ["OPENBLAS_CORETYPE"] = faster
        try:
            quit_()
            init()
        finally:
            del os.environ["OPENBLAS_CORETYPE"]
