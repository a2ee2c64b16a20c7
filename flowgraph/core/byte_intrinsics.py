"""numba intrinsics for the compiled byte walks of record files and Examples (records_walk.py,
kernels/cpu/dataset_wire.py): what numba's own code does slowly or cannot say.

- `load_u64(arr, pos)`: the little-endian uint64 at byte `pos` of a uint8 array, one unaligned
  load (eight byte loads and shifts, as Python-level numba writes it, are not combined).
- `memcpy(dst, dst_pos, src, src_pos, count)`: bytes between uint8 arrays (flat positions of
  C-contiguous arrays). numba's slice assignment copies element by element with a per-slice
  setup: 64 rows of 256 floats took 6 us, LLVM's memcpy 0.8.
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
    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.core.errors import TypingError
    from numba.extending import intrinsic

    i8, i32, i64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)

    def data(context, builder, array_type, value):
        return context.make_array(array_type)(context, builder, value=value).data

    @intrinsic
    def load_u64(typingctx, arr, pos):
        if arr.dtype != types.uint8:
            raise TypingError(f"load_u64 reads a uint8 array, not {arr}")

        def codegen(context, builder, sig, args):
            at = builder.gep(data(context, builder, sig.args[0], args[0]), [args[1]])
            return builder.load(builder.bitcast(at, i64.as_pointer()), align=1)

        return types.uint64(arr, types.intp), codegen

    @intrinsic
    def memcpy(typingctx, dst, dst_pos, src, src_pos, count):
        if not all(a.layout == "C" and a.dtype == types.uint8 for a in (dst, src)):
            raise TypingError(f"memcpy copies between C-contiguous uint8 arrays: {dst}, {src}")

        def codegen(context, builder, sig, args):
            to = builder.gep(data(context, builder, sig.args[0], args[0]), [args[1]])
            frm = builder.gep(data(context, builder, sig.args[2], args[2]), [args[3]])
            cgutils.raw_memcpy(builder, to, frm, args[4], 1)
            return context.get_dummy_value()

        return types.none(dst, types.intp, src, types.intp, types.intp), codegen

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
    return SimpleNamespace(load_u64=load_u64, memcpy=memcpy, crc32_u64=crc32_u64, crc32_u8=crc32_u8)
