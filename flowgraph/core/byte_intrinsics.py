"""numba intrinsics for the compiled code that reads records (records_walk.py, the wire decoders
and tf.data's packed records): what numba's own code does slowly or cannot say.

- `copy_bytes(dst, dst_at, src, src_at, n)`: a memcpy. numba compiles `dst[a:b] = src[c:d]`
  on uint8 arrays to an element loop that LLVM does not vectorize (the arrays may alias):
  ~13 us for the 20 KB of one I2d batch, against 0.7 us for a memcpy.
- `load_u64(arr, pos)`: the little-endian uint64 at byte `pos` of a uint8 array, one unaligned
  load (eight byte loads and shifts, as Python-level numba writes it, are not combined).
- `crc32_u64(crc, word)`, `crc32_u8(crc, byte)`: SSE4.2's crc32 instruction (CRC-32C), on
  x86-64 CPUs that have it (`has_sse42`); google_crc32c's library uses the same instruction.

Built on first use (`intrinsics()`), so that importing this module does not import numba.
"""

from __future__ import annotations

import functools
import platform
from types import SimpleNamespace


def has_sse42() -> bool:
    """Whether numba compiles for this CPU (not NUMBA_CPU_NAME's) and it has SSE4.2."""
    import llvmlite.binding as llvm
    import numba

    if platform.machine().lower() not in ("x86_64", "amd64") or numba.config.CPU_NAME:
        return False
    try:
        return bool(llvm.get_host_cpu_features().get("sse4.2"))
    except RuntimeError:  # llvmlite cannot tell on this platform
        return False


@functools.cache
def intrinsics() -> SimpleNamespace:
    """copy_bytes, load_u64, crc32_u64 and crc32_u8 (the crc32 ones compile only where
    has_sse42())."""
    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.core.errors import TypingError
    from numba.extending import intrinsic

    i8, i32, i64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)

    @intrinsic
    def copy_bytes(typingctx, dst, dst_at, src, src_at, n):
        """Copies src[src_at:src_at + n] to dst[dst_at:dst_at + n] (1-D contiguous uint8
        arrays; no bounds checks: the caller's indices must lie in both, the ranges must not
        overlap)."""
        for a in (dst, src):
            if not (isinstance(a, types.Array) and a.dtype == types.uint8 and a.ndim == 1):
                return None
            if a.layout != "C":
                return None

        def codegen(context, builder, sig, args):
            d, d_at, s, s_at, count = args
            d_arr = context.make_array(sig.args[0])(context, builder, d)
            s_arr = context.make_array(sig.args[2])(context, builder, s)
            to, frm = builder.gep(d_arr.data, [d_at]), builder.gep(s_arr.data, [s_at])
            cgutils.raw_memcpy(builder, to, frm, count, 1)
            return context.get_dummy_value()

        return types.void(dst, types.intp, src, types.intp, types.intp), codegen

    @intrinsic
    def load_u64(typingctx, arr, pos):
        if arr.dtype != types.uint8:
            raise TypingError(f"load_u64 reads a uint8 array, not {arr}")

        def codegen(context, builder, sig, args):
            array = context.make_array(sig.args[0])(context, builder, value=args[0])
            at = builder.gep(array.data, [args[1]])
            return builder.load(builder.bitcast(at, i64.as_pointer()), align=1)

        return types.uint64(arr, types.intp), codegen

    def instruction(name, ir_types, signature):
        def codegen(context, builder, sig, args):
            fnty = ir.FunctionType(ir_types[0], ir_types)
            return builder.call(cgutils.get_or_insert_function(builder.module, fnty, name), args)

        return intrinsic(lambda typingctx, crc, value: (signature, codegen))

    crc32_u64 = instruction(
        "llvm.x86.sse42.crc32.64.64", (i64, i64), types.uint64(types.uint64, types.uint64)
    )
    crc32_u8 = instruction(
        "llvm.x86.sse42.crc32.32.8", (i32, i8), types.uint32(types.uint32, types.uint8)
    )
    return SimpleNamespace(
        copy_bytes=copy_bytes, load_u64=load_u64, crc32_u64=crc32_u64, crc32_u8=crc32_u8
    )
