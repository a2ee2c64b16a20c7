"""5x5 convolutions with unit strides by Winograd's minimal filtering F(2x2, 5x5) (Lavin and
Gray, "Fast Algorithms for Convolutional Neural Networks", 2016).

Each 2x2 block of outputs is read from a 6x6 tile d of the input (tiles overlap by 4): with
the filter g transformed once into U = G g G^T (6x6 per channel pair), the block is
A^T [sum over channels of U * (B^T d B)] A. The channel sums are 36 GEMMs, (tiles, C) times
(C, OC), one per transformed tap: 36 multiply-adds per channel pair and 2x2 outputs instead of
100, i.e. 2.8x fewer than im2col's GEMM. The transforms (kernels/cpu/loops.py) are a few adds
per value. LeNet's conv2 on one core (64x14x14x32 by 5x5x32x64; interleaved A/B, load 7):
forward 16.3 -> 9.2 ms, input gradient 17.9 -> 11.4 ms against the GEMM path (conv_rows.py).

The interpolation points 0, +-1, +-2 and infinity keep the transforms' entries small: float32
results differ from the direct sum by a few 1e-6 of the output's magnitude (the direct GEMM:
about 1e-7); float64 by 1e-15. TensorFlow's CPU kernels compute directly, cuDNN chooses Winograd
on GPUs the same way. Used for Conv2D and for the input gradient of a unit-stride convolution
(itself such a convolution, conv_rows.transposed).

The filter gradient, dW[j] = sum over outputs y of x[y + j] dy[y] (per dimension), is the
minimal filtering F(5x5, 2x2) of the same 6x6 input tiles by each 2x2 tile of dy: with the same
interpolation points its input transform is the same B^T, so `filter_grad` reuses the forward's
tile transform, transforms dy's tiles by G2 and sums the products over tiles as 36 GEMMs
(C, tiles) times (tiles, OC); A2^T turns the 36 sums into the 5x5 taps (`filter_from_sums`).
"""

from __future__ import annotations

import numpy as np

from flowgraph.kernels.cpu import windows as W
from flowgraph.kernels.cpu.loops import compiled

# The filter transform; B^T and A^T are written out in loops._winograd_input/_output.
G = np.array(
    [
        [1 / 4, 0, 0, 0, 0],
        [-1 / 6, -1 / 6, -1 / 6, -1 / 6, -1 / 6],
        [-1 / 6, 1 / 6, -1 / 6, 1 / 6, -1 / 6],
        [1 / 24, 1 / 12, 1 / 6, 1 / 3, 2 / 3],
        [1 / 24, -1 / 12, 1 / 6, -1 / 3, 2 / 3],
        [0, 0, 0, 0, 1],
    ]
)
# The filter gradient's F(5x5, 2x2): its dy transform and output transform.
G2 = np.array(
    [[1 / 4, 0], [-1 / 6, -1 / 6], [-1 / 6, 1 / 6], [1 / 24, 1 / 12], [1 / 24, -1 / 12], [0, 1]]
)
A2T = np.array(
    [
        [1, 1, 1, 1, 1, 0],
        [0, 1, -1, 2, -2, 0],
        [0, 1, 1, 4, 4, 0],
        [0, 1, -1, 8, -8, 0],
        [0, 1, 1, 16, 16, 1],
    ]
)
_TYPES = (np.dtype(np.float32), np.dtype(np.float64))
# Fewer channels make GEMMs too thin to repay the transforms (LeNet's conv1 has one).
MIN_CHANNELS = 8
# Images per block: the block's transformed tiles and products stay in the core's cache. The
# filter gradient's blocks are larger: each block's GEMMs are 36 calls whatever its size.
IMAGES_PER_BLOCK = 2
GRAD_IMAGES_PER_BLOCK = 8


def applies(win: W.Window, dtype, channels: int, out_channels: int) -> bool:
    geometry = (win.kh, win.kw, win.sh, win.sw, win.dh, win.dw)
    return (
        geometry == (5, 5, 1, 1, 1, 1)
        and np.dtype(dtype) in _TYPES
        and min(channels, out_channels) >= MIN_CHANNELS
    )


def filter_transform(f: np.ndarray, dtype) -> np.ndarray:
    """U = G f G^T of a (5, 5, C, OC) filter, as (36, C, OC) in `dtype` (computed in float64)."""
    u = np.einsum("ai,ijco,bj->abco", G, f.astype(np.float64, copy=False), G, optimize=True)
    return u.reshape(36, *f.shape[2:]).astype(dtype)


def conv(x: np.ndarray, u: np.ndarray, top: int, left: int, out: np.ndarray) -> None:
    """out (B, OH, OW, OC; float32 or float64) = the 5x5 unit-stride convolution of the NHWC
    block x, padded by `top` rows and `left` columns before (negative: cropped), with the
    transformed filter u (`filter_transform`, out's dtype)."""
    n, oh, ow = out.shape[:3]
    c, oc = u.shape[1:]
    dt = out.dtype
    tiles_h, tiles_w = (oh + 1) // 2, (ow + 1) // 2
    per_image = tiles_h * tiles_w
    k = np.array([2, 4, 5], dt)
    transform_in, transform_out = compiled("winograd_input"), compiled("winograd_output")
    step = min(IMAGES_PER_BLOCK, n)
    v_buf = np.empty(36 * step * per_image * c, dt)
    m_buf = np.empty(36 * step * per_image * oc, dt)
    for b0 in range(0, n, step):
        b = min(step, n - b0)
        v = v_buf[: 36 * b * per_image * c].reshape(36, b * per_image, c)
        m = m_buf[: 36 * b * per_image * oc].reshape(36, b * per_image, oc)
        transform_in(x[b0 : b0 + b], v, top, left, tiles_w, k)
        np.matmul(v, u, out=m)
        transform_out(m, out[b0 : b0 + b], tiles_w, k[0])


def filter_grad(x: np.ndarray, dy: np.ndarray, top: int, left: int) -> np.ndarray:
    """The 36 per-tap sums, (36, C, OC) in dy's dtype (float32 or float64), of the filter
    gradient of the 5x5 unit-stride convolution of the NHWC block x (padded as in `conv`) given
    its output gradient dy; `filter_from_sums` makes them the (5, 5, C, OC) gradient. Blocks of
    a batch add their sums."""
    n, oh, ow, oc = dy.shape
    c, dt = x.shape[3], dy.dtype
    tiles_w = (ow + 1) // 2
    per_image = (oh + 1) // 2 * tiles_w
    k, g = np.array([2, 4, 5], dt), G2.astype(dt)
    transform_x, transform_dy = compiled("winograd_input"), compiled("winograd_grad_tiles")
    step = min(GRAD_IMAGES_PER_BLOCK, n)
    v_buf = np.empty(36 * step * per_image * c, dt)
    u_buf = np.empty(36 * step * per_image * oc, dt)
    sums, product = np.zeros((36, c, oc), dt), np.empty((36, c, oc), dt)
    for b0 in range(0, n, step):
        b = min(step, n - b0)
        v = v_buf[: 36 * b * per_image * c].reshape(36, b * per_image, c)
        u = u_buf[: 36 * b * per_image * oc].reshape(36, b * per_image, oc)
        transform_x(x[b0 : b0 + b], v, top, left, tiles_w, k)
        transform_dy(dy[b0 : b0 + b], u, tiles_w, g)
        np.matmul(v.transpose(0, 2, 1), u, out=product)
        sums += product
    return sums


def filter_from_sums(sums: np.ndarray) -> np.ndarray:
    """(5, 5, C, OC) = A2^T S A2 of the (36, C, OC) sums of `filter_grad`, in float64."""
    s = sums.astype(np.float64).reshape(6, 6, *sums.shape[1:])
    return np.einsum("ia,abco,jb->ijco", A2T, s, A2T, optimize=True)
