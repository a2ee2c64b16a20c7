"""Image kernels (whitepaper §4.5's input preprocessing): PNG/JPEG/GIF/BMP coding by Pillow, and
bilinear / nearest-neighbour resizing in NumPy with TensorFlow's sampling conventions
(align_corners, half_pixel_centers), gathered along each axis at once."""

from __future__ import annotations

import io

import numpy as np

from flowgraph.core import dtypes, errors
from flowgraph.kernels.base import register_kernel

_MODES = {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}


def _invalid(msg: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, msg)


def _pil():
    try:
        from PIL import Image
    except ImportError:
        raise errors.UnimplementedError(
            None, None, "image coding needs Pillow (pip install pillow)"
        ) from None
    return Image


def _bytes(contents) -> bytes:
    value = contents.item() if isinstance(contents, np.ndarray) else contents
    if not isinstance(value, bytes):
        raise _invalid("contents must be a scalar string")
    return value


def _open(data: bytes, what: str):
    Image = _pil()
    try:
        img = Image.open(io.BytesIO(data))
        img.load()
    except Exception as e:  # noqa: BLE001  (Pillow raises many kinds of errors on bad data)
        raise _invalid(f"Invalid {what} data or size: {e}") from None
    return img


def _to_array(img, channels: int, dtype) -> np.ndarray:
    """[height, width, channels] of `img`, converted to `channels` (0: the image's own)."""
    if dtype == dtypes.uint16:
        if img.mode not in ("I;16", "I;16B", "I") or channels not in (0, 1):
            raise errors.UnimplementedError(
                None, None, f"uint16 decoding of a {img.mode} image is not supported"
            )
        return np.asarray(img, dtype=np.uint16)[:, :, np.newaxis]
    if channels == 0:
        if img.mode in ("P", "PA"):
            img = img.convert("RGBA" if "transparency" in img.info or img.mode == "PA" else "RGB")
        elif img.mode not in _MODES.values():
            img = img.convert("RGB")
    else:
        if channels not in _MODES:
            raise _invalid(f"channels must be 0, 1, 3 or 4, got {channels}")
        img = img.convert(_MODES[channels])
    arr = np.asarray(img, dtype=np.uint8)
    return arr[:, :, np.newaxis] if arr.ndim == 2 else arr


@register_kernel("DecodePng")
def decode_png(ctx, contents):
    data = _bytes(contents)
    if not data.startswith(b"\x89PNG"):
        raise _invalid("Invalid PNG data, size " + str(len(data)))
    return _to_array(_open(data, "PNG"), ctx.attrs["channels"], ctx.attrs["dtype"])


@register_kernel("DecodeJpeg")
def decode_jpeg(ctx, contents):
    a = ctx.attrs
    if a["ratio"] not in (1, 2, 4, 8):
        raise _invalid(f"ratio must be 1, 2, 4 or 8, got {a['ratio']}")
    if not a["fancy_upscaling"] or a["try_recover_truncated"] or a["acceptable_fraction"] != 1:
        raise errors.UnimplementedError(
            None,
            None,
            "DecodeJpeg: fancy_upscaling=False, try_recover_truncated and acceptable_fraction "
            "are not supported by Pillow's decoder",
        )
    if a["dct_method"] not in ("", "INTEGER_ACCURATE"):
        raise errors.UnimplementedError(
            None, None, f"DecodeJpeg: dct_method {a['dct_method']!r} (only INTEGER_ACCURATE)"
        )
    data = _bytes(contents)
    img = _pil().open(io.BytesIO(data))
    if img.format != "JPEG":
        raise _invalid(f"Invalid JPEG data, size {len(data)}")
    if a["ratio"] > 1:  # libjpeg's DCT scaling, as TensorFlow's ratio uses
        img.draft(img.mode, (img.width // a["ratio"], img.height // a["ratio"]))
    try:
        img.load()
    except OSError as e:
        raise _invalid(f"Invalid JPEG data or crop window: {e}") from None
    return _to_array(img, a["channels"], dtypes.uint8)


@register_kernel("DecodeImage")
def decode_image(ctx, contents):
    a = ctx.attrs
    img = _open(_bytes(contents), "image")
    out_dtype = a["dtype"]
    read_as = dtypes.uint16 if out_dtype == dtypes.uint16 else dtypes.uint8
    frames = getattr(img, "n_frames", 1)
    if img.format == "GIF" and a["expand_animations"]:
        arrays = []
        for k in range(frames):
            img.seek(k)
            arrays.append(_to_array(img.convert("RGB"), a["channels"] or 3, read_as))
        out = np.stack(arrays)
    else:
        out = _to_array(img, a["channels"], read_as)
    if out_dtype == dtypes.float32:  # convert_image_dtype: [0, 255] -> [0, 1]
        return out.astype(np.float32) / np.float32(255)
    return out


@register_kernel("EncodePng")
def encode_png(ctx, image):
    image = np.asarray(image)
    if image.ndim != 3 or image.shape[2] not in _MODES:
        raise _invalid(f"image must be 3-dimensional with 1-4 channels, got {list(image.shape)}")
    level = ctx.attrs["compression"]
    if not -1 <= level <= 9:
        raise _invalid(f"compression should be in [-1,9], got {level}")
    Image = _pil()
    if image.dtype == np.uint16:
        if image.shape[2] != 1:
            raise errors.UnimplementedError(None, None, "uint16 PNG encoding of >1 channel")
        img = Image.fromarray(np.ascontiguousarray(image[:, :, 0], dtype=np.uint16))
    else:  # Pillow picks L, LA, RGB or RGBA from the shape
        img = Image.fromarray(
            np.ascontiguousarray(image[:, :, 0] if image.shape[2] == 1 else image)
        )
    buf = io.BytesIO()
    img.save(buf, format="PNG", compress_level=6 if level < 0 else level)
    return np.array(buf.getvalue(), dtype=object)


@register_kernel("EncodeJpeg")
def encode_jpeg(ctx, image):
    a = ctx.attrs
    image = np.asarray(image)
    if image.ndim != 3 or image.shape[2] not in (1, 3):
        raise _invalid(f"image must be 3-dimensional with 1 or 3 channels, got {image.shape}")
    if (
        a["xmp_metadata"]
        or a["density_unit"] != "in"
        or (a["x_density"], a["y_density"])
        != (
            300,
            300,
        )
    ):
        raise errors.UnimplementedError(None, None, "EncodeJpeg: density and XMP metadata")
    fmt = a["format"] or ("grayscale" if image.shape[2] == 1 else "rgb")
    if fmt == "grayscale" and image.shape[2] != 1 or fmt == "rgb" and image.shape[2] != 3:
        raise _invalid(f"format {fmt!r} does not match {image.shape[2]} channels")
    pixels = image[:, :, 0] if image.shape[2] == 1 else image
    img = _pil().fromarray(np.ascontiguousarray(pixels))
    buf = io.BytesIO()
    img.save(
        buf,
        format="JPEG",
        quality=a["quality"],
        progressive=a["progressive"],
        optimize=a["optimize_size"],
        subsampling=2 if a["chroma_downsampling"] else 0,
        dpi=(300, 300),
    )
    return np.array(buf.getvalue(), dtype=object)


# -- resizing -------------------------------------------------------------------------------------
def _scale(in_size: int, out_size: int, align_corners: bool) -> np.float32:
    if align_corners and out_size > 1:
        return np.float32((in_size - 1) / (out_size - 1))
    return np.float32(in_size / out_size)


def _check_resize(ctx, images, size):
    images = np.asarray(images)
    size = np.asarray(size)
    if images.ndim != 4:
        raise _invalid(f"input must be 4-dimensional{list(images.shape)}")
    if size.shape != (2,):
        raise _invalid(f"shape_t must be 1-dimensional with 2 elements{list(size.shape)}")
    out_h, out_w = int(size[0]), int(size[1])
    if out_h <= 0 or out_w <= 0:
        raise _invalid(f"output dimensions must be positive, got {[out_h, out_w]}")
    if ctx.attrs["align_corners"] and ctx.attrs.get("half_pixel_centers"):  # ResizeArea: none
        raise _invalid("If half_pixel_centers is True, align_corners must be False.")
    return images, out_h, out_w


def _bilinear_axis(in_size, out_size, align_corners, half_pixel):
    """TF's interpolation weights: lower/upper source indices and the fraction toward upper."""
    scale = _scale(in_size, out_size, align_corners)
    x = np.arange(out_size, dtype=np.float32)
    src = (x + np.float32(0.5)) * scale - np.float32(0.5) if half_pixel else x * scale
    floor = np.floor(src)
    lower = np.maximum(floor.astype(np.int64), 0)
    upper = np.minimum(np.ceil(src).astype(np.int64), in_size - 1)
    return lower, upper, (src - floor).astype(np.float32)


@register_kernel("ResizeBilinear")
def resize_bilinear(ctx, images, size):
    images, out_h, out_w = _check_resize(ctx, images, size)
    a = ctx.attrs
    ylo, yhi, dy = _bilinear_axis(
        images.shape[1], out_h, a["align_corners"], a["half_pixel_centers"]
    )
    xlo, xhi, dx = _bilinear_axis(
        images.shape[2], out_w, a["align_corners"], a["half_pixel_centers"]
    )
    img = images.astype(np.float32, copy=False)
    top, bottom = img[:, ylo], img[:, yhi]
    dx = dx[np.newaxis, np.newaxis, :, np.newaxis]
    top = top[:, :, xlo] + (top[:, :, xhi] - top[:, :, xlo]) * dx
    bottom = bottom[:, :, xlo] + (bottom[:, :, xhi] - bottom[:, :, xlo]) * dx
    return top + (bottom - top) * dy[np.newaxis, :, np.newaxis, np.newaxis]


def _nearest_axis(in_size, out_size, align_corners, half_pixel):
    scale = _scale(in_size, out_size, align_corners)
    x = np.arange(out_size, dtype=np.float32)
    src = (x + np.float32(0.5)) * scale if half_pixel else x * scale
    idx = np.floor(src + np.float32(0.5)) if align_corners else np.floor(src)  # roundf / floorf
    idx = np.minimum(idx.astype(np.int64), in_size - 1)
    return np.maximum(idx, 0) if half_pixel else idx


@register_kernel("ResizeNearestNeighbor")
def resize_nearest_neighbor(ctx, images, size):
    images, out_h, out_w = _check_resize(ctx, images, size)
    a = ctx.attrs
    ys = _nearest_axis(images.shape[1], out_h, a["align_corners"], a["half_pixel_centers"])
    xs = _nearest_axis(images.shape[2], out_w, a["align_corners"], a["half_pixel_centers"])
    return images[:, ys][:, :, xs]


# -- gradients: both resizes are separable, out = Wy . image . Wx^T per image and channel ----------
def _bilinear_matrix(in_size, out_size, align_corners, half_pixel) -> np.ndarray:
    """[out, in] interpolation weights of one axis (the forward pass's, as a matrix)."""
    lower, upper, frac = _bilinear_axis(in_size, out_size, align_corners, half_pixel)
    m = np.zeros((out_size, in_size), np.float32)
    rows = np.arange(out_size)
    np.add.at(m, (rows, lower), 1 - frac)
    np.add.at(m, (rows, upper), frac)
    return m


@register_kernel("ResizeBilinearGrad")
def resize_bilinear_grad(ctx, grads, original):
    a = ctx.attrs
    grads = np.asarray(grads, np.float32)
    _, h, w, _ = np.shape(original)
    wy = _bilinear_matrix(h, grads.shape[1], a["align_corners"], a["half_pixel_centers"])
    wx = _bilinear_matrix(w, grads.shape[2], a["align_corners"], a["half_pixel_centers"])
    out = np.einsum("yh,nyxc,xw->nhwc", wy, grads, wx, optimize=True)
    return out.astype(np.asarray(original).dtype, copy=False)


@register_kernel("ResizeNearestNeighborGrad")
def resize_nearest_neighbor_grad(ctx, grads, size):
    a = ctx.attrs
    grads = np.asarray(grads)
    h, w = (int(v) for v in np.asarray(size))
    ys = _nearest_axis(h, grads.shape[1], a["align_corners"], a["half_pixel_centers"])
    xs = _nearest_axis(w, grads.shape[2], a["align_corners"], a["half_pixel_centers"])
    sy = np.zeros((grads.shape[1], h), grads.dtype)
    sy[np.arange(grads.shape[1]), ys] = 1
    sx = np.zeros((grads.shape[2], w), grads.dtype)
    sx[np.arange(grads.shape[2]), xs] = 1
    return np.einsum("yh,nyxc,xw->nhwc", sy, grads, sx, optimize=True).astype(grads.dtype)
