"""The tile transforms of Winograd's minimal filtering (kernels/cpu/winograd.py) as compiled
loops (numba; kernels/cpu/loops.py compiles them): a few adds per value over 36 strided streams
that NumPy would run as ~70 small whole-array passes.

Each transform is separable, one axis of a tile at a time, through one helper per matrix
(`_winograd_bt` for B^T, `_winograd_at` for A^T, `_winograd_g` for the filter gradient's G)
that loops over flat arrays at offsets. What makes their loops vectorize (measured on the
digits CNN's conv2, 64x4x4x32, and LeNet's 2x14x14x32 blocks):

* one loop per output row: a loop that writes six rows reads and writes arrays LLVM cannot
  prove apart, and it vectorizes none of it (the input transform: 62 -> 44 us);
* unsigned indices: numba wraps a negative index around, a branch per access, unless the
  index type is unsigned (with signed offsets the same loops ran 4x slower);
* offsets into whole arrays rather than slices: a numba view reference-counts its buffer,
  which costs as much as a short loop (the input transform 44 -> 25 us, LeNet's 47 -> 13;
  the output transform 79 -> 38 us);
* constants in the data's dtype (`k`, `dtype.type(2)`): a Python int promotes float32 to
  float64 (LeNet's conv2: 4.2 -> 2.3 ms).
"""

from __future__ import annotations

import numpy as np


def _winograd_bt(src, s0, ss, dst, d0, ds, count, k):
    """dst[d0 + i * ds + e] = sum_j B^T[i, j] src[s0 + j * ss + e] for i < 6, e < count: B^T
    along one axis of tiles (winograd.py's B^T; k = (2, 4, 5) in the data's dtype), in the
    loops that vectorize (module docstring)."""
    k2, k4, k5 = k[0], k[1], k[2]
    u = np.uint64  # unsigned indices (module docstring)
    a0, a1, a2, a3, a4, a5 = (
        u(s0),
        u(s0 + ss),
        u(s0 + 2 * ss),
        u(s0 + 3 * ss),
        u(s0 + 4 * ss),
        u(s0 + 5 * ss),
    )
    n = u(count)
    for e in range(n):
        dst[u(d0) + e] = k4 * src[a0 + e] - k5 * src[a2 + e] + src[a4 + e]
    o = u(d0 + ds)
    for e in range(n):
        dst[o + e] = src[a3 + e] + src[a4 + e] - k4 * (src[a1 + e] + src[a2 + e])
    o += u(ds)
    for e in range(n):
        dst[o + e] = k4 * (src[a1 + e] - src[a2 + e]) - src[a3 + e] + src[a4 + e]
    o += u(ds)
    for e in range(n):
        dst[o + e] = k2 * (src[a3 + e] - src[a1 + e]) - src[a2 + e] + src[a4 + e]
    o += u(ds)
    for e in range(n):
        dst[o + e] = k2 * (src[a1 + e] - src[a3 + e]) - src[a2 + e] + src[a4 + e]
    o += u(ds)
    for e in range(n):
        dst[o + e] = k4 * src[a1 + e] - k5 * src[a3 + e] + src[a5 + e]


def _winograd_input(x, v, step, top, left, tiles_w, k):
    """v[6 * a + b, tile] = (B^T d B)[a, b] for each 6x6 tile d (`step` apart, row-major over
    the images of the NHWC block x) of x padded by `top` rows and `left` columns of zeros
    (negative: cropped), channels innermost; v C-contiguous; k = (2, 4, 5) in v's dtype
    (`_winograd_bt`)."""
    n, h, w, c = x.shape
    tiles = v.shape[1]
    tiles_h = tiles // (n * tiles_w)
    wide = (step * (tiles_w - 1) + 6) * c  # one tile row's width of values
    rows = np.zeros(6 * wide, v.dtype)  # its 6 input rows, zero-padded
    t = np.empty(6 * wide, v.dtype)
    flat = v.reshape(-1)
    first = max(-left, 0)  # the first input column read
    lo = (first + left) * c
    width = max(min(w - first, wide // c - first - left), 0)
    tile = 0
    for b in range(n):
        for ty in range(tiles_h):
            for a in range(6):
                r = step * ty + a - top
                at = np.uint64(a * wide + lo)  # unsigned (module docstring)
                if 0 <= r < h:
                    src = x[b, r]
                    for q in range(width):
                        for ch in range(c):
                            rows[at + np.uint64(q * c + ch)] = src[first + q, ch]
                else:
                    for e in range(np.uint64(width * c)):
                        rows[at + e] = 0
            _winograd_bt(rows, 0, wide, t, 0, wide, wide, k)  # B^T along the rows
            for tx in range(tiles_w):  # and along the columns of each tile
                for a in range(6):
                    at = a * wide + step * tx * c  # its row a: six columns of c values
                    _winograd_bt(t, at, c, flat, (6 * a * tiles + tile) * c, tiles * c, c, k)
                tile += 1


def _winograd_at(src, s0, ss, dst, d0, ds, count, step):
    """dst[d0 + i * ds + e] = sum_k A^T[i, k] src[s0 + k * ss + e] for the `step` (2 or 4)
    rows A^T[i] = (0^i, 1, (-1)^i, 2^i, (-2)^i, [i = step - 1]) (winograd.py's points), as
    sums and differences of the pairs (1, 2), (3, 4), on flat arrays at offsets as
    `_winograd_bt`; the constants in the data's dtype (a Python int makes it float64)."""
    two, four, eight = dst.dtype.type(2), dst.dtype.type(4), dst.dtype.type(8)
    u = np.uint64  # unsigned indices (module docstring)
    a0, a1, a2, a3, a4, a5 = (
        u(s0),
        u(s0 + ss),
        u(s0 + 2 * ss),
        u(s0 + 3 * ss),
        u(s0 + 4 * ss),
        u(s0 + 5 * ss),
    )
    n = u(count)
    for e in range(n):
        dst[u(d0) + e] = src[a0 + e] + (src[a1 + e] + src[a2 + e]) + (src[a3 + e] + src[a4 + e])
    o = u(d0 + ds)
    if step == 2:
        for e in range(n):
            m5 = src[a5 + e]
            dst[o + e] = (src[a1 + e] - src[a2 + e]) + two * (src[a3 + e] - src[a4 + e]) + m5
        return
    for e in range(n):
        dst[o + e] = (src[a1 + e] - src[a2 + e]) + two * (src[a3 + e] - src[a4 + e])
    o += u(ds)
    for e in range(n):
        dst[o + e] = (src[a1 + e] + src[a2 + e]) + four * (src[a3 + e] + src[a4 + e])
    o += u(ds)
    for e in range(n):
        m5 = src[a5 + e]
        dst[o + e] = (src[a1 + e] - src[a2 + e]) + eight * (src[a3 + e] - src[a4 + e]) + m5


def _winograd_output(m, y, tiles_w, at):
    """y[b, s * ty + i, s * tx + j] = (A^T M A)[i, j] for the tiles of m (as `winograd_input`
    orders them; s = A^T's rows, 2 or 4), the outputs past y's edge dropped; m and y
    C-contiguous (`_winograd_at`; `at` gives s)."""
    n, oh, ow, c = y.shape
    step = at.shape[0]
    tiles = m.shape[1]
    tiles_h = tiles // (n * tiles_w)
    src, dst = m.reshape(-1), y.reshape(-1)
    s = np.empty(step * 6 * c, m.dtype)  # A^T M of one tile: (step, 6, c)
    cut = np.empty(step * c, m.dtype)  # one row of a tile cut by y's edge
    tile = 0
    for b in range(n):
        for ty in range(tiles_h):
            for tx in range(tiles_w):
                for j in range(6):  # A^T along the rows
                    _winograd_at(src, (j * tiles + tile) * c, 6 * tiles * c, s, j * c, 6 * c, c,
                                 step)  # fmt: skip
                rows, cols = min(step, oh - step * ty), min(step, ow - step * tx)
                for i in range(rows):  # and along the columns
                    out = ((b * oh + step * ty + i) * ow + step * tx) * c
                    if cols == step:
                        _winograd_at(s, i * 6 * c, c, dst, out, c, c, step)
                        continue
                    _winograd_at(s, i * 6 * c, c, cut, 0, c, c, step)
                    for e in range(cols * c):
                        dst[out + e] = cut[e]
                tile += 1


def _winograd_g(src, s0, ss, dst, d0, ds, count, g, step):
    """dst[d0 + i * ds + e] = sum_j g[i, j] src[s0 + j * ss + e] for i < 6, j < step (2 or 4),
    e < count: the filter gradient's G (6 x step, in the data's dtype) along one axis of
    tiles, on flat arrays at offsets as `_winograd_bt` (unsigned indices, one loop per
    output row, coefficients hoisted)."""
    u = np.uint64
    n, a0, a1 = u(count), u(s0), u(s0 + ss)
    a2, a3 = u(s0 + 2 * ss), u(s0 + 3 * ss)
    for i in range(6):
        o = u(d0 + i * ds)
        g0, g1 = g[i, 0], g[i, 1]
        if step == 2:  # half the loads and multiply-adds (5x5 filters)
            for e in range(n):
                dst[o + e] = g0 * src[a0 + e] + g1 * src[a1 + e]
        else:
            g2, g3 = g[i, 2], g[i, 3]
            for e in range(n):
                dst[o + e] = (
                    g0 * src[a0 + e] + g1 * src[a1 + e] + g2 * src[a2 + e] + g3 * src[a3 + e]
                )


def _winograd_grad_tiles(dy, u, tiles_w, g):
    """u[6 * a + b, tile] = (G e G^T)[a, b] for each s x s tile e of the NHWC block dy (tiles as
    `winograd_input` orders them, zeros past dy's edge) with the 6 x s matrix g (winograd.py's
    filter-gradient G, in u's dtype; s is 2 or 4; `_winograd_g`); u C-contiguous."""
    n, oh, ow, c = dy.shape
    step = g.shape[1]
    tiles = u.shape[1]
    tiles_h = tiles // (n * tiles_w)
    flat = u.reshape(-1)
    e = np.zeros(step * step * c, u.dtype)  # one tile of dy: (step, step, c)
    s = np.empty(6 * step * c, u.dtype)  # G e: (6, step, c)
    tile = 0
    for b in range(n):
        for ty in range(tiles_h):
            for tx in range(tiles_w):
                for i in range(step):
                    for j in range(step):
                        r, q = step * ty + i, step * tx + j
                        at = np.uint64((i * step + j) * c)
                        if r < oh and q < ow:
                            for ch in range(c):
                                e[at + np.uint64(ch)] = dy[b, r, q, ch]
                        else:
                            for ch in range(np.uint64(c)):
                                e[at + ch] = 0
                # G along the rows, the tile's `step` columns in one loop
                _winograd_g(e, 0, step * c, s, 0, step * c, step * c, g, step)
                for a in range(6):  # and along the columns
                    out = (6 * a * tiles + tile) * c
                    _winograd_g(s, a * step * c, c, flat, out, tiles * c, c, g, step)
                tile += 1


FUNCTIONS = {
    "winograd_input": _winograd_input,
    "winograd_output": _winograd_output,
    "winograd_grad_tiles": _winograd_grad_tiles,
}
HELPERS = ["_winograd_bt", "_winograd_at", "_winograd_g"]
