"""CPU kernels for activations, softmax, bias, losses and local response normalization.

Activations and their gradient ops are table rows, as in kernels/cpu/math.py. Softmax and the
cross-entropies subtract the row maximum first, so large logits never overflow.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from flowgraph.core import errors
from flowgraph.kernels.base import register_kernel
from flowgraph.kernels.cpu.loops import COMPILED_TYPES, compiled
from flowgraph.kernels.sharding import ELEMENT_COST, parallel_for

_FLOATS = [np.float16, np.float32, np.float64]
_REAL = _FLOATS + [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
_SELU_SCALE = 1.0507009873554804934193349852946
_SELU_ALPHA = 1.6732632423543772848170429916717


def _zero(x):
    return np.zeros((), x.dtype)


def _exp_minus_one(x):
    """exp(x) - 1 in x's dtype, rounded after each step as TensorFlow's kernels compute it (not
    expm1), so that float16 results match TensorFlow's bit for bit."""
    return np.exp(x) - np.ones((), x.dtype)


def _relu(x, out=None):
    """max(x, 0) as TensorFlow computes it (x < 0 ? 0 : x): NaN and -0.0 pass through, where
    np.maximum would turn -0.0 into +0.0."""
    if x.dtype.kind != "f":
        return np.maximum(x, _zero(x), out=out)
    if out is None:
        out = np.empty_like(x)
    np.copyto(out, x)
    np.copyto(out, _zero(x), where=x < 0)
    return out


def _selu(x):
    scale_alpha, scale = (
        np.asarray(_SELU_SCALE * _SELU_ALPHA, x.dtype),
        np.asarray(_SELU_SCALE, x.dtype),
    )
    return np.where(x < 0, scale_alpha * _exp_minus_one(x), scale * x)


# op type -> (kernel(x, attrs), dtypes). Results keep the input dtype (NumPy 2 weak scalars).
ACTIVATIONS = {
    "Relu": (lambda x, a, out=None: _relu(x, out), _REAL),
    "Relu6": (lambda x, a: np.clip(x, _zero(x), np.asarray(6, x.dtype)), _REAL),
    "Elu": (lambda x, a: np.where(x < 0, _exp_minus_one(x), x), _FLOATS),
    "Selu": (lambda x, a: _selu(x), _FLOATS),
    "Softplus": (lambda x, a: np.logaddexp(_zero(x), x), _FLOATS),
    "Softsign": (lambda x, a: x / (1 + np.abs(x)), _FLOATS),
    "LeakyRelu": (lambda x, a: np.where(x > 0, x, x * a["alpha"]), _FLOATS),
}
# op type -> kernel(gradients, second input, attrs); the second input is named in opdefs/nn.py.
# ReluGrad and Relu6Grad multiply by the 0/1 mask, TF's own formula (a NaN gradient stays NaN
# where the unit is off) and 15x faster than np.where (6.5 -> 0.43 ms on LeNet's conv1 output).
ACTIVATION_GRADS = {
    "ReluGrad": (lambda dy, x, a, out=None: np.multiply(dy, x > _zero(x), out=out), _REAL),
    "Relu6Grad": (lambda dy, x, a: np.multiply(dy, (x > 0) & (x < 6), dtype=dy.dtype), _REAL),
    "EluGrad": (lambda dy, y, a: np.where(y < 0, dy * (y + 1), dy), _FLOATS),
    "SeluGrad": (
        lambda dy, y, a: np.where(y < 0, dy * (y + _SELU_SCALE * _SELU_ALPHA), dy * _SELU_SCALE),
        _FLOATS,
    ),
    "SoftplusGrad": (lambda dy, x, a: dy * special.expit(x), _FLOATS),
    "SoftsignGrad": (lambda dy, x, a: dy / np.square(1 + np.abs(x)), _FLOATS),
    "LeakyReluGrad": (lambda dy, x, a: np.where(x > 0, dy, dy * a["alpha"]), _FLOATS),
}


def _unary(fn):
    def kernel(ctx, x):
        return np.asarray(fn(x, ctx.attrs), x.dtype)

    return kernel


def _check_same_shape(dy, x):
    if dy.shape != x.shape:
        raise errors.InvalidArgumentError(
            None, None, f"gradients and inputs must have the same shape: {dy.shape} vs {x.shape}"
        )


def _binary(fn):
    def kernel(ctx, dy, x):
        _check_same_shape(dy, x)
        return np.asarray(fn(dy, x, ctx.attrs), dy.dtype)

    return kernel


# Rows whose function takes `out=`: their kernels write blocks of the flattened result in
# parallel on the device's pool (kernels/sharding.py), as the layers of a CNN make them large;
# float32 and float64 run the compiled loop of the same formula (kernels/cpu/loops.py).
SHARDED = {"Relu": "relu", "ReluGrad": "relu_grad"}


def _sharded(fn, binary: bool, loop_name: str):
    def kernel(ctx, *args):
        if binary:
            _check_same_shape(*args)
        out = np.empty(args[0].shape, args[0].dtype)
        flat, flat_out = [a.reshape(-1) for a in args], out.reshape(-1)
        same = all(a.dtype == out.dtype for a in args)
        loop = compiled(loop_name) if same and out.dtype in COMPILED_TYPES else None

        def block(lo: int, hi: int) -> None:
            if loop is not None:
                loop(*(a[lo:hi] for a in flat), flat_out[lo:hi])
            else:
                fn(*(a[lo:hi] for a in flat), ctx.attrs, out=flat_out[lo:hi])

        parallel_for(ctx, out.size, ELEMENT_COST, block)
        return out

    return kernel


for _op, (_fn, _types) in ACTIVATIONS.items():
    _kernel = _sharded(_fn, False, SHARDED[_op]) if _op in SHARDED else _unary(_fn)
    register_kernel(_op, dtypes_=_types, intra_op=_op in SHARDED)(_kernel)
for _op, (_fn, _types) in ACTIVATION_GRADS.items():
    _kernel = _sharded(_fn, True, SHARDED[_op]) if _op in SHARDED else _binary(_fn)
    register_kernel(_op, dtypes_=_types, intra_op=_op in SHARDED)(_kernel)


# -- softmax ------------------------------------------------------------------------------------
def _wide(x):
    """half is computed in float32: exp and sums lose too much in 11 bits."""
    return x.astype(np.float32) if x.dtype == np.float16 else x


def _log_softmax(x):
    shifted = x - np.max(x, axis=-1, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=-1, keepdims=True))


def _check_rank(x, rank, what):
    if x.ndim < rank:
        raise errors.InvalidArgumentError(
            None, None, f"{what} must be at least {rank}-D, got shape {x.shape}"
        )


@register_kernel("Softmax", dtypes_=_FLOATS)
def softmax(ctx, x):
    _check_rank(x, 1, "logits")
    w = _wide(x)
    e = np.exp(w - np.max(w, axis=-1, keepdims=True))
    return (e / np.sum(e, axis=-1, keepdims=True)).astype(x.dtype, copy=False)


@register_kernel("LogSoftmax", dtypes_=_FLOATS)
def log_softmax(ctx, x):
    _check_rank(x, 1, "logits")
    return _log_softmax(_wide(x)).astype(x.dtype, copy=False)


# -- bias -----------------------------------------------------------------------------------------
def _bias_axis(value, data_format):
    _check_rank(value, 2, "value")
    return 1 if data_format == "NCHW" else value.ndim - 1


@register_kernel("BiasAdd", intra_op=True)
@register_kernel("BiasAddV1", intra_op=True)
def bias_add(ctx, value, bias):
    """value + bias along the channel axis, written in blocks of rows on the device's pool.

    With channels last, float32 and float64 run a compiled loop (kernels/cpu/loops.py); other
    types add the rows `k` at a time against the bias tiled `k` times, so that NumPy's
    broadcasting loop runs over ~1024 elements instead of C (0.65 -> 0.39 ms on LeNet's
    64x28x28x32 conv1 output; the loop takes 0.26)."""
    axis = _bias_axis(value, ctx.attrs.get("data_format", "NHWC"))
    if bias.ndim != 1 or bias.shape[0] != value.shape[axis]:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"Must provide as many biases as the channel dimension of the input tensor: "
            f"{bias.shape} vs. {value.shape}",
        )
    out = np.empty(value.shape, np.result_type(value, bias))
    if not out.size:
        return out
    channels = bias.shape[0]
    if axis == value.ndim - 1:  # rows of channels
        rows, rows_out = value.reshape(-1, channels), out.reshape(-1, channels)
        same = value.dtype == bias.dtype == out.dtype
        loop = compiled("bias_add") if same and out.dtype in COMPILED_TYPES else None
        k = max(1, 1024 // max(channels, 1))
        tiled = np.tile(bias, k) if loop is None else None

        def block(lo: int, hi: int) -> None:
            if loop is not None:
                loop(rows[lo:hi], bias, rows_out[lo:hi])
                return
            full = lo + (hi - lo) // k * k
            width = k * channels
            np.add(
                rows[lo:full].reshape(-1, width), tiled, out=rows_out[lo:full].reshape(-1, width)
            )
            np.add(rows[full:hi], bias, out=rows_out[full:hi])

        parallel_for(ctx, rows.shape[0], ELEMENT_COST * channels, block)
    else:  # NCHW: images of (C, H*W)
        images = value.reshape(value.shape[0], channels, -1)
        images_out = out.reshape(images.shape)
        column = bias.reshape(-1, 1)

        def block(lo: int, hi: int) -> None:
            np.add(images[lo:hi], column, out=images_out[lo:hi])

        parallel_for(ctx, images.shape[0], ELEMENT_COST * images[0].size, block)
    return out


@register_kernel("BiasAddGrad")
def bias_add_grad(ctx, dy):
    axis = _bias_axis(dy, ctx.attrs["data_format"])
    if dy.dtype in (np.float32, np.float64):
        # Sums as GEMVs with a ones vector: 5.7x faster than np.sum over the outer axes (0.70 ->
        # 0.12 ms on LeNet's conv1 gradient), which adds row by row, and no less accurate.
        lead, trail = math.prod(dy.shape[:axis]), math.prod(dy.shape[axis + 1 :])
        d3 = dy.reshape(lead, dy.shape[axis], trail)
        per_lead = d3[:, :, 0] if trail == 1 else np.matmul(d3, np.ones(trail, dy.dtype))
        return np.ones(lead, dy.dtype) @ per_lead
    axes = tuple(a for a in range(dy.ndim) if a != axis)
    return np.sum(_wide(dy), axis=axes).astype(dy.dtype, copy=False)


# -- losses ---------------------------------------------------------------------------------------
@register_kernel("L2Loss", dtypes_=_FLOATS)
def l2_loss(ctx, t):
    w = _wide(t)
    return np.asarray(np.sum(w * w) / 2, t.dtype)


@register_kernel("SoftmaxCrossEntropyWithLogits", dtypes_=_FLOATS)
def softmax_cross_entropy(ctx, logits, labels):
    if logits.ndim != 2 or labels.ndim != 2:
        raise errors.InvalidArgumentError(
            None, None, f"logits and labels must be 2-D, got {logits.shape} and {labels.shape}"
        )
    try:
        shape = np.broadcast_shapes(logits.shape, labels.shape)
    except ValueError:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"logits and labels must be broadcastable: logits_size={list(logits.shape)} "
            f"labels_size={list(labels.shape)}",
        ) from None
    if logits.shape == labels.shape and logits.dtype in COMPILED_TYPES and logits.size:
        loss = np.empty(shape[0], logits.dtype)  # the whole kernel in one loop
        backprop = np.empty(shape, logits.dtype)
        lab = np.ascontiguousarray(labels)
        compiled("xent")(np.ascontiguousarray(logits), lab, loss, backprop)
        return loss, backprop
    log_p = _log_softmax(np.broadcast_to(_wide(logits), shape))
    lab = _wide(labels)
    loss = np.sum(lab * -log_p, axis=1)
    backprop = np.exp(log_p) - lab
    return loss.astype(logits.dtype, copy=False), backprop.astype(logits.dtype, copy=False)


def _label_error(labels, label, classes) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(
        None,
        None,
        f"Received a label value of {label} which is outside the valid "
        f"range of [0, {classes}).  Label values: {' '.join(str(v) for v in labels)}",
    )


@register_kernel("SparseSoftmaxCrossEntropyWithLogits", dtypes_=_FLOATS)
def sparse_softmax_cross_entropy(ctx, logits, labels):
    if logits.ndim != 2 or labels.ndim != 1 or labels.shape[0] != logits.shape[0]:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"logits must be 2-D and labels 1-D with the same first dimension: "
            f"logits shape {logits.shape}, labels shape {labels.shape}",
        )
    classes = logits.shape[1]
    if logits.dtype in COMPILED_TYPES and logits.size:  # the whole kernel in one loop
        loss = np.empty(labels.shape, logits.dtype)
        backprop = np.empty(logits.shape, logits.dtype)
        bad_row = compiled("sparse_xent")(np.ascontiguousarray(logits), labels, loss, backprop)
        if bad_row >= 0:
            raise _label_error(labels, labels[bad_row], classes)
        return loss, backprop
    bad = (labels < 0) | (labels >= classes)
    if np.any(bad):
        raise _label_error(labels, labels[bad][0], classes)
    log_p = _log_softmax(_wide(logits))
    rows = np.arange(labels.shape[0])
    loss = -log_p[rows, labels]
    backprop = np.exp(log_p)
    backprop[rows, labels] -= 1
    return loss.astype(logits.dtype, copy=False), backprop.astype(logits.dtype, copy=False)


# -- local response normalization ---------------------------------------------------------------
def _window_sum(x: np.ndarray, radius: int) -> np.ndarray:
    """Sum over channels d-radius..d+radius (clipped) of NHWC `x`: 2*radius+1 shifted adds."""
    depth = x.shape[-1]
    padded = np.pad(x, ((0, 0),) * 3 + ((radius, radius),))
    total = np.zeros_like(x)
    for shift in range(2 * radius + 1):
        total += padded[..., shift : shift + depth]
    return total


def _lrn_norm(ctx, x):
    a = ctx.attrs
    return a["bias"] + a["alpha"] * _window_sum(x * x, a["depth_radius"])


@register_kernel("LRN", dtypes_=[np.float16, np.float32])
def lrn(ctx, x):
    if x.ndim != 4:
        raise errors.InvalidArgumentError(None, None, f"input must be 4-dimensional, got {x.shape}")
    w = _wide(x)
    return (w * _lrn_norm(ctx, w) ** -ctx.attrs["beta"]).astype(x.dtype, copy=False)


@register_kernel("LRNGrad", dtypes_=[np.float16, np.float32])
def lrn_grad(ctx, dy, x, y):
    """dx_i = dy_i N_i^-beta - 2 alpha beta x_i sum_{j near i} dy_j y_j / N_j."""
    if not dy.shape == x.shape == y.shape or x.ndim != 4:
        raise errors.InvalidArgumentError(
            None, None, "LRNGrad inputs must be 4-D with equal shapes"
        )
    dyw, xw, yw = _wide(dy), _wide(x), _wide(y)
    norm = _lrn_norm(ctx, xw)
    a = ctx.attrs
    cross = _window_sum(dyw * yw / norm, a["depth_radius"])
    dx = dyw * norm ** -a["beta"] - 2 * a["alpha"] * a["beta"] * xw * cross
    return dx.astype(dy.dtype, copy=False)


# -- top-k ----------------------------------------------------------------------------------------
def _top_k(x: np.ndarray, k: int):
    """The k largest along the last axis, descending; equal values keep the lower index first."""
    if x.ndim < 1:
        raise errors.InvalidArgumentError(None, None, "input must be at least 1-D")
    n = x.shape[-1]
    if k < 0 or k > n:
        raise errors.InvalidArgumentError(
            None, None, f"input must have at least k columns. Had {n}, needed {k}"
        )
    if x.dtype.kind == "f" and np.isnan(x).any():
        # TF's own order of NaNs is undefined (a sort with a comparator NaN breaks); NaN ranks
        # last here, so top_k(x, 1) agrees with argmax, which never picks a NaN.
        indices = np.lexsort((-x, np.isnan(x)), axis=-1)[..., :k].astype(np.int32)
    else:
        # A stable ascending sort of the reversed row, read backwards, is descending with ties
        # broken by the lower original index; it needs no negation (unsigned ints, -0.0).
        order = np.argsort(x[..., ::-1], axis=-1, kind="stable")[..., ::-1][..., :k]
        indices = (n - 1 - order).astype(np.int32)
    return np.take_along_axis(x, indices, axis=-1), indices


@register_kernel("TopKV2", dtypes_=_REAL)
def top_k_v2(ctx, x, k):
    values, indices = _top_k(x, int(k))
    return values, indices.astype(ctx.attrs["index_type"].as_numpy_dtype, copy=False)


@register_kernel("TopK", dtypes_=_REAL)
def top_k(ctx, x):
    return _top_k(x, ctx.attrs["k"])


def _in_top_k(predictions, targets, k):
    """TF's rule: false if the target is out of range or any prediction in its row is not finite;
    else true when fewer than k classes score strictly higher than the target."""
    if predictions.ndim != 2 or targets.shape != (predictions.shape[0],):
        raise errors.InvalidArgumentError(
            None,
            None,
            f"predictions must be 2-D and targets 1-D of the same batch size: "
            f"{predictions.shape} vs {targets.shape}",
        )
    batch, classes = predictions.shape
    in_range = (targets >= 0) & (targets < classes)
    target_score = predictions[np.arange(batch), np.where(in_range, targets, 0)]
    higher = np.sum(predictions > target_score[:, None], axis=1)
    return in_range & np.all(np.isfinite(predictions), axis=1) & (higher < k)


@register_kernel("InTopKV2")
def in_top_k_v2(ctx, predictions, targets, k):
    return _in_top_k(predictions, targets, int(k))


@register_kernel("InTopK")
def in_top_k(ctx, predictions, targets):
    return _in_top_k(predictions, targets, ctx.attrs["k"])
