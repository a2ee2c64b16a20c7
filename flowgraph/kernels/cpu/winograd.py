"""5x5 and 3x3 convolutions with unit strides by Winograd's minimal filtering (Lavin and Gray,
"Fast Algorithms for Convolutional Neural Networks", 2016): F(2x2, 5x5) and F(4x4, 3x3).

Each s x s block of outputs (s = 6 - K + 1 for a K x K filter) is read from a 6x6 tile d of
the input: with the filter g transformed once into U = G g G^T (6x6 per channel pair), the
block is A^T [sum over channels of U * (B^T d B)] A. The channel sums are 36 GEMMs, (tiles, C)
times (C, OC), one per transformed tap: 36 multiply-adds per channel pair and s x s outputs
instead of s*s*K*K, i.e. 2.8x fewer than im2col's GEMM for 5x5 filters and 4x fewer for 3x3.
The transforms (kernels/cpu/winograd_loops.py) are a few adds per value. LeNet's conv2 on one core
(64x14x14x32 by 5x5x32x64; interleaved A/B, load 7): forward 16.3 -> 9.2 ms, input gradient
17.9 -> 11.4 ms against the GEMM path (conv_rows.py).

Both use the interpolation points 0, +-1, +-2 and infinity, so they share one B^T (written out
in winograd_loops._winograd_bt); G and A^T are the Toom-Cook matrices of those points
(`_toom_cook`).
Small points keep the transforms' entries small: float32 results differ from the direct sum by
a few 1e-6 of the output's magnitude for 5x5 filters and some 1e-5 for 3x3 (the direct GEMM:
about 1e-7); float64 by 1e-15. TensorFlow's CPU kernels compute directly, cuDNN chooses
Winograd on GPUs the same way. Used for Conv2D and for the input gradient of a unit-stride
convolution (itself such a convolution, conv_rows.transposed).

The filter gradient, dW[j] = sum over outputs y of x[y + j] dy[y] (per dimension), is the
minimal filtering F(KxK, sxs) of the same 6x6 input tiles by each s x s tile of dy: with the
same points its input transform is the same B^T, so `filter_grad` reuses the forward's tile
transform, transforms dy's tiles by G (of s taps) and sums the products over tiles as 36 GEMMs
(C, tiles) times (tiles, OC); A^T (of K outputs) turns the sums into the taps.
"""

from __future__ import annotations

import functools

import numpy as np

from flowgraph.kernels.cpu import windows as W
from flowgraph.kernels.cpu.loops import COMPILED_TYPES, compiled

_POINTS = (0, 1, -1, 2, -2)  # and infinity
# Fewer channels make GEMMs too thin to repay the transforms (LeNet's conv1 has one).
MIN_CHANNELS = 8
# Tiles per block: the block's transformed tiles and products stay in the core's cache. The
# filter gradient's blocks are larger: each block's GEMMs are 36 calls whatever its size.
TILES_PER_BLOCK = 100
GRAD_TILES_PER_BLOCK = 400


@functools.cache
def _toom_cook(outputs: int, taps: int) -> tuple:
    """(A^T, G) of F(outputs, taps) over _POINTS: A^T[i, k] = p_k^i, G[k, j] = p_k^j / prod of
    (p_k - p_l) over the other finite points, infinity's column of A^T and row of G picking the
    last output and tap."""
    at, g = np.zeros((outputs, 6)), np.zeros((6, taps))
    for k, p in enumerate(_POINTS):
        scale = np.prod([p - q for q in _POINTS if q != p])
        at[:, k] = [p**i for i in range(outputs)]
        g[k] = [p**j / scale for j in range(taps)]
    at[-1, 5] = g[5, -1] = 1
    return at, g


def applies(win: W.Window, dtype, channels: int, out_channels: int) -> bool:
    return (
        win.kh == win.kw in (3, 5)
        and (win.sh, win.sw, win.dh, win.dw) == (1, 1, 1, 1)
        and np.dtype(dtype) in COMPILED_TYPES
        and min(channels, out_channels) >= MIN_CHANNELS
    )


def work(kernel: int) -> float:
    """The fraction of a direct convolution's multiply-adds that the GEMMs do: 36 per s x s
    outputs instead of s*s*K*K (0.36 for 5x5 filters, 0.25 for 3x3)."""
    return 36 / ((7 - kernel) ** 2 * kernel**2)


@functools.cache
def _filter_matrix(kernel: int, dtype) -> np.ndarray:
    """kron(G, G) in `dtype`, (36, K*K): U[6a + b] = sum over i, j of G[a, i] G[b, j] f[i, j]."""
    _, g = _toom_cook(7 - kernel, kernel)
    return np.kron(g, g).astype(dtype)


def filter_transform(f: np.ndarray, dtype) -> np.ndarray:
    """U = G f G^T of a (K, K, C, OC) filter, as (36, C, OC) in `dtype` (float32 or float64):
    one GEMM by kron(G, G) in that dtype. Its float32 rounding (an ulp of U) is far below the
    transforms' own (module docstring); the two products in float64 and the conversions took
    3x as long (the digits CNN's conv2 filter: 52 -> 17 us)."""
    kernel, (c, oc) = f.shape[0], f.shape[2:]
    fd = f.astype(dtype, copy=False).reshape(kernel * kernel, c * oc)
    return (_filter_matrix(kernel, np.dtype(dtype)) @ fd).reshape(36, c, oc)


def _tiles(oh: int, ow: int, step: int) -> tuple:
    return -(-oh // step), -(-ow // step)


def conv(x: np.ndarray, u: np.ndarray, kernel: int, pads: tuple, out: np.ndarray) -> None:
    """out (B, OH, OW, OC; float32 or float64) = the `kernel`-square unit-stride convolution
    of the NHWC block x, padded by pads = (top, left) before (negative: cropped), with the
    transformed filter u (`filter_transform`, in out's dtype)."""
    n, oh, ow = out.shape[:3]
    c, oc = u.shape[1:]
    dt = out.dtype
    step = 7 - kernel
    at = _toom_cook(step, kernel)[0].astype(dt)
    tiles_h, tiles_w = _tiles(oh, ow, step)
    per_image = tiles_h * tiles_w
    k = np.array([2, 4, 5], dt)
    transform_in, transform_out = compiled("winograd_input"), compiled("winograd_output")
    images = min(max(TILES_PER_BLOCK // per_image, 1), n)
    v_buf = np.empty(36 * images * per_image * c, dt)
    m_buf = np.empty(36 * images * per_image * oc, dt)
    for b0 in range(0, n, images):
        b = min(images, n - b0)
        v = v_buf[: 36 * b * per_image * c].reshape(36, b * per_image, c)
        m = m_buf[: 36 * b * per_image * oc].reshape(36, b * per_image, oc)
        transform_in(x[b0 : b0 + b], v, step, *pads, tiles_w, k)
        np.matmul(v, u, out=m)
        transform_out(m, out[b0 : b0 + b], tiles_w, at)


def filter_grad(x: np.ndarray, dy: np.ndarray, kernel: int, pads: tuple) -> np.ndarray:
    """The 36 per-tap sums, (36, C, OC) in dy's dtype (float32 or float64), of the filter
    gradient of the `kernel`-square unit-stride convolution of the NHWC block x (padded as in
    `conv`) given its output gradient dy; `filter_from_sums` makes them the filter's gradient.
    Blocks of a batch add their sums."""
    n, oh, ow, oc = dy.shape
    c, dt = x.shape[3], dy.dtype
    step = 7 - kernel
    tiles_h, tiles_w = _tiles(oh, ow, step)
    per_image = tiles_h * tiles_w
    k, g = np.array([2, 4, 5], dt), _toom_cook(kernel, step)[1].astype(dt)
    transform_x, transform_dy = compiled("winograd_input"), compiled("winograd_grad_tiles")
    images = min(max(GRAD_TILES_PER_BLOCK // per_image, 1), n)
    v_buf = np.empty(36 * images * per_image * c, dt)
    u_buf = np.empty(36 * images * per_image * oc, dt)
    sums, product = np.zeros((36, c, oc), dt), np.empty((36, c, oc), dt)
    for b0 in range(0, n, images):
        b = min(images, n - b0)
        v = v_buf[: 36 * b * per_image * c].reshape(36, b * per_image, c)
        u = u_buf[: 36 * b * per_image * oc].reshape(36, b * per_image, oc)
        transform_x(x[b0 : b0 + b], v, step, *pads, tiles_w, k)
        transform_dy(dy[b0 : b0 + b], u, tiles_w, g)
        np.matmul(v.transpose(0, 2, 1), u, out=product)
        sums += product
    return sums


@functools.cache
def _sums_matrix(kernel: int, dtype) -> np.ndarray:
    """kron(A^T, A^T) in `dtype`, (K*K, 36), of the filter gradient's A^T (integer entries)."""
    at, _ = _toom_cook(kernel, 7 - kernel)
    return np.kron(at, at).astype(dtype)


def filter_from_sums(sums: np.ndarray, kernel: int) -> np.ndarray:
    """(K, K, C, OC) = A^T S A of the (36, C, OC) sums of `filter_grad`, in their dtype: one
    GEMM by kron(A^T, A^T), whose entries are small integers (two float64 products took 2.5x
    as long; the rounding is that of S's own accumulation)."""
    c, oc = sums.shape[1:]
    product = _sums_matrix(kernel, sums.dtype) @ sums.reshape(36, c * oc)
    return product.reshape(kernel, kernel, c, oc)
