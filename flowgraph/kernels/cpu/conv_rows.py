"""Convolutions with unit height stride as KH accumulating GEMMs over a width-only patch matrix.

A full im2col copies every input value KH*KW times (LeNet's conv2: a 40 MB patch matrix per
pass). With a height stride of 1 the KH kernel rows need no copy of their own: gathering only
the KW width taps, into rows laid out height-major as (padded row, image, output column,
KW*C), makes the rows read by kernel row i the contiguous slab that starts at padded row
i * dilation. The output is then KH GEMMs over those slabs, each accumulated into one output
buffer by BLAS itself (`beta` = 1, SciPy's BLAS bindings; NumPy's matmul cannot accumulate),
and the filter gradient is KH GEMMs of the same slabs against the output gradient. The copy
shrinks KH-fold (10 MB for LeNet's conv2) and every GEMM runs on a block of a few images that
stays in cache, at the core's SGEMM speed. Padding is an index computation: the gather writes
zeros where a tap reads outside the input, and no padded copy of the input is made.

The height-major layout costs one transpose of each block's output (or output gradient),
which is a few percent of the patch copy it replaces. The input gradient of a convolution with
unit strides is itself such a convolution (of the output gradient with the filter flipped and
its channel axes swapped, `transposed`), so Conv2DBackpropInput runs through the same path.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy.linalg import blas

from flowgraph.kernels.cpu import windows as W

_GEMM = {np.dtype(np.float32): blas.sgemm, np.dtype(np.float64): blas.dgemm}
# Bytes of width patches gathered per block: a block's slabs and its GEMMs' output stay in the
# core's cache (2 MB of L2 on the developers' machines).
BLOCK_BYTES = 1 << 20


@dataclasses.dataclass(frozen=True)
class Rows:
    """A convolution's geometry with a height stride of 1: kernel, width stride, dilations,
    output size and the padding before the first row and column (negative: cropped)."""

    kh: int
    kw: int
    sw: int
    dh: int
    dw: int
    oh: int
    ow: int
    top: int
    left: int

    @property
    def out(self) -> tuple:
        return (self.oh, self.ow)

    @property
    def padded_rows(self) -> int:
        """Rows of the height-major patch matrix: those read by some output row."""
        return self.oh + (self.kh - 1) * self.dh


def applies(win: W.Window, dtype, channels: int) -> bool:
    """Whether a convolution takes this path: unit height stride, a BLAS type, and enough
    channels that a patch row of KW*C values makes a GEMM (fewer go tap-major, W.im2col_taps).
    """
    return win.sh == 1 and np.dtype(dtype) in _GEMM and channels >= W.TAP_MAJOR_CHANNELS


def forward_rows(win: W.Window) -> Rows:
    (top, _), (left, _) = win.pads
    return Rows(win.kh, win.kw, win.sw, win.dh, win.dw, win.oh, win.ow, top, left)


def transposed(win: W.Window, h: int, w: int) -> Rows:
    """The geometry of the input gradient of a unit-stride convolution with an h x w input,
    computed as a convolution over the output gradient (`transposed_filter`): output cell h of
    the input gradient collects the output rows h + top - i * dh, i.e. a convolution whose
    padding before is the kernel's dilated extent minus the forward padding."""
    (top, _), (left, _) = win.pads
    return Rows(
        win.kh,
        win.kw,
        1,
        win.dh,
        win.dw,
        h,
        w,
        (win.kh - 1) * win.dh - top,
        (win.kw - 1) * win.dw - left,
    )


def transposed_filter(f: np.ndarray) -> np.ndarray:
    """f[KH-1-i, KW-1-j] with its channel axes swapped: (KH, KW, OC, C)."""
    return np.ascontiguousarray(f[::-1, ::-1].transpose(0, 1, 3, 2))


def images_per_block(rows: Rows, channels: int, itemsize: int) -> int:
    per_image = rows.padded_rows * rows.ow * rows.kw * channels * itemsize
    return max(1, BLOCK_BYTES // max(per_image, 1))


def gather(x: np.ndarray, rows: Rows, buf: np.ndarray) -> np.ndarray:
    """The width patches of the NHWC block x, height-major: (padded row, image, output column,
    KW*C), in `buf`'s memory (reused across blocks), zero where a tap reads padding."""
    b, h, w, c = x.shape
    hp = rows.padded_rows
    xw = buf[: hp * b * rows.ow * rows.kw * c].reshape(hp, b, rows.ow, rows.kw, c)
    r0, r1 = min(max(rows.top, 0), hp), max(min(rows.top + h, hp), 0)
    xw[:r0] = 0
    xw[max(r1, r0) :] = 0
    if r1 <= r0:
        return xw.reshape(hp, b * rows.ow, rows.kw * c)
    src = x.transpose(1, 0, 2, 3)[r0 - rows.top : r1 - rows.top]  # (rows, b, w, c)
    for j in range(rows.kw):
        dst = xw[r0:r1, :, :, j]
        cols = W.valid_range(rows.ow, rows.sw, rows.left - j * rows.dw, w)
        if cols is None:
            dst[...] = 0
            continue
        out_cols, in_cols = cols
        dst[:, :, : out_cols.start] = 0
        dst[:, :, out_cols.stop :] = 0
        np.copyto(dst[:, :, out_cols], src[:, :, in_cols], casting="unsafe")
    return xw.reshape(hp, b * rows.ow, rows.kw * c)


def _slab(xw: np.ndarray, rows: Rows, i: int) -> np.ndarray:
    """The (OH * images * OW, KW*C) rows that kernel row i reads."""
    first = i * rows.dh
    return xw[first : first + rows.oh].reshape(-1, xw.shape[2])


def conv(x: np.ndarray, f: np.ndarray, rows: Rows, out: np.ndarray, dtype) -> None:
    """out (NHWC, dtype) = the convolution of the NHWC block x with f (KH, KW, C, OC)."""
    n, c, oc = x.shape[0], f.shape[2], f.shape[3]
    gemm = _GEMM[np.dtype(dtype)]
    taps = f.astype(dtype, copy=False).reshape(rows.kh, rows.kw * c, oc)
    step = images_per_block(rows, c, np.dtype(dtype).itemsize)
    buf = np.empty(rows.padded_rows * min(step, n) * rows.ow * rows.kw * c, dtype)
    acc = np.empty(rows.oh * min(step, n) * rows.ow * oc, dtype)
    for b0 in range(0, n, step):
        b = min(step, n - b0)
        xw = gather(x[b0 : b0 + b], rows, buf)
        ob = acc[: rows.oh * b * rows.ow * oc].reshape(rows.oh, b, rows.ow, oc)
        flat = ob.reshape(-1, oc)
        for i in range(rows.kh):
            # flat^T (OC, R) = taps[i]^T (OC, KW*C) @ slab^T: all three Fortran-ordered views
            # of C-ordered arrays, so that SciPy passes them to BLAS without copies.
            gemm(1.0, taps[i].T, _slab(xw, rows, i).T, beta=float(i > 0), c=flat.T, overwrite_c=1)
        np.copyto(out[b0 : b0 + b], ob.transpose(1, 0, 2, 3))
