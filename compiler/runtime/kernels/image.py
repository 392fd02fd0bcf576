"""Image resizing, bit-compatible with TF's CPU kernels.

TF computes source coordinates in float32 (`scale` included), so the kernels
do the same arithmetic in float32 rather than the "exact" float64 geometry;
that is what keeps sampled indices identical at the rounding boundaries.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Optional

import numpy as np

from .common import attr, checked_shape, int_vector
from .registry import KernelError, kernel

Array = np.ndarray
Attrs = Mapping[str, object]

_F32 = np.float32


def resize_scale(in_size: int, out_size: int, align_corners: bool) -> np.float32:
    """TF's CalculateResizeScale, a float32 ratio."""
    if align_corners and out_size > 1:
        return _F32(in_size - 1) / _F32(out_size - 1)
    return _F32(in_size) / _F32(out_size)


def source_positions(in_size: int, out_size: int, align_corners: bool, half_pixel_centers: bool) -> Array:
    """The float32 source coordinate of each output index, as TF's interpolating resizers compute it."""
    scale = resize_scale(in_size, out_size, align_corners)
    i = np.arange(out_size, dtype=_F32)
    return (i + _F32(0.5)) * scale - _F32(0.5) if half_pixel_centers else i * scale


def bilinear_axis(in_size: int, out_size: int, align_corners: bool,
                  half_pixel_centers: bool) -> tuple[Array, Array, Array]:
    """Lower/upper source indices and the float32 interpolation weight per output index."""
    src = source_positions(in_size, out_size, align_corners, half_pixel_centers)
    floor = np.floor(src)
    lower = np.maximum(floor.astype(np.int64), 0)
    upper = np.minimum(np.ceil(src).astype(np.int64), in_size - 1)
    return lower, upper, (src - floor).astype(_F32)


def resize_bilinear(images: Array, height: int, width: int, align_corners: bool,
                    half_pixel_centers: bool) -> Array:
    """NHWC bilinear resize in float32: lerp along x on both rows, then along y."""
    x = images.astype(_F32)
    _, in_h, in_w, _ = x.shape
    y0, y1, ly = bilinear_axis(in_h, height, align_corners, half_pixel_centers)
    x0, x1, lx = bilinear_axis(in_w, width, align_corners, half_pixel_centers)
    lx = lx[None, None, :, None]
    top_rows, bottom_rows = x[:, y0], x[:, y1]
    top = top_rows[:, :, x0] + (top_rows[:, :, x1] - top_rows[:, :, x0]) * lx
    bottom = bottom_rows[:, :, x0] + (bottom_rows[:, :, x1] - bottom_rows[:, :, x0]) * lx
    return top + (bottom - top) * ly[None, :, None, None]


def _nearest_axis(in_size: int, out_size: int, align_corners: bool,
                  half_pixel_centers: bool) -> Array:
    """Source index per output index.  Half-pixel NN omits the -0.5 shift, and
    align_corners rounds half away from zero (C's roundf), as TF does."""
    scale = resize_scale(in_size, out_size, align_corners)
    i = np.arange(out_size, dtype=_F32)
    src = (i + _F32(0.5)) * scale if half_pixel_centers else i * scale
    wide = src.astype(np.float64)
    index = np.floor(wide + 0.5) if align_corners else np.floor(wide)
    index = np.minimum(index.astype(np.int64), in_size - 1)
    return np.maximum(index, 0) if half_pixel_centers else index


def _images_and_size(images: Array, size: Array) -> tuple[int, int]:
    """The output height and width, after the checks every resizer makes."""
    dims = int_vector(size)
    if images.ndim != 4:
        raise KernelError(f"images must be 4-D, got shape {list(images.shape)}")
    if len(dims) != 2 or min(dims) <= 0:
        raise KernelError(f"size must be two positive ints, got {dims}")
    if min(images.shape[1:3]) <= 0:
        raise KernelError("input image must have non-empty spatial dims")
    checked_shape([images.shape[0], dims[0], dims[1], images.shape[3]], 8)
    return dims[0], dims[1]


def _resize_args(attrs: Attrs, inputs: list[Array]) -> tuple[Array, int, int, bool, bool]:
    images, size = inputs
    h, w = _images_and_size(images, size)
    align = bool(attr(attrs, "align_corners", False))
    half = bool(attr(attrs, "half_pixel_centers", False))
    if align and half:
        raise KernelError("if half_pixel_centers is True, align_corners must be False")
    return images, h, w, align, half


def _zero_matrix(out_size: int, in_size: int) -> Array:
    """An (out, in) float64 weight matrix of zeros, within the tensor size limit."""
    return np.zeros(checked_shape([out_size, in_size], 8, "resize weight matrix"))


def _dense(indices: Array, weights: Array, in_size: int) -> Array:
    """Per-output taps (indices, weights), each (out, taps), scatter-added into a dense (out, in)
    float64 matrix: the form both the interpreter and the ONNX lowering (a MatMul) apply."""
    matrix = _zero_matrix(indices.shape[0], in_size)
    np.add.at(matrix, (np.arange(indices.shape[0])[:, None], indices), weights.astype(np.float64))
    return matrix


def separable_resize(images: Array, rows: Array, cols: Array) -> Array:
    """NHWC images through an (out_h, in_h) and an (out_w, in_w) weight matrix, summed in float64;
    float32 out, as every interpolating TF resizer returns."""
    x = images.astype(np.float64)
    return np.einsum("hi,niwc,jw->nhjc", rows, x, cols, optimize=True).astype(_F32)


@kernel("ResizeBilinear")
def _resize_bilinear(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """Always float32 output, whatever the input type (TF's contract)."""
    images, h, w, align, half = _resize_args(attrs, inputs)
    return [resize_bilinear(images, h, w, align, half)]


@kernel("ResizeNearestNeighbor")
def _resize_nearest(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """Keeps the input dtype: nearest-neighbour only copies values."""
    images, h, w, align, half = _resize_args(attrs, inputs)
    rows = _nearest_axis(images.shape[1], h, align, half)
    cols = _nearest_axis(images.shape[2], w, align, half)
    return [images[:, rows][:, :, cols]]


# ---------------------------------------------------------------- bicubic

_CUBIC_TABLE_SIZE = 1024


def cubic_table(a: float) -> Array:
    """TF's float32 coefficient table: row i holds the cubic kernel at distances i/1024 and 1 + i/1024."""
    x = np.arange(_CUBIC_TABLE_SIZE + 1, dtype=_F32) / _F32(_CUBIC_TABLE_SIZE)
    a = _F32(a)
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far = ((a * (x + 1) - 5 * a) * (x + 1) + 8 * a) * (x + 1) - 4 * a
    return np.stack([near, far], axis=1).astype(_F32)


def bicubic_axis(in_size: int, out_size: int, align_corners: bool, half_pixel_centers: bool
                 ) -> tuple[Array, Array]:
    """(indices, weights), each (out_size, 4): the four taps per output index.  TF reads the
    weights from its table at the nearest 1/1024 of the fraction; with half-pixel centres it
    uses Keys' a = -0.5, zeroes taps outside the image and renormalises, else a = -0.75 with
    taps clamped to the edge."""
    src = source_positions(in_size, out_size, align_corners, half_pixel_centers)
    start = np.floor(src)
    offset = np.rint((src - start) * _F32(_CUBIC_TABLE_SIZE)).astype(np.int64)
    table = cubic_table(-0.5 if half_pixel_centers else -0.75)
    weights = np.stack([table[offset, 1], table[offset, 0], table[_CUBIC_TABLE_SIZE - offset, 0],
                        table[_CUBIC_TABLE_SIZE - offset, 1]], axis=1)
    taps = start.astype(np.int64)[:, None] + np.arange(-1, 3)
    clamped = np.clip(taps, 0, in_size - 1)
    if half_pixel_centers:
        weights = np.where(taps == clamped, weights, _F32(0))
        total = weights.sum(axis=1, keepdims=True, dtype=_F32)
        weights = np.where(np.abs(total) >= 1000 * np.finfo(_F32).tiny, weights / total, weights)
    return clamped, weights.astype(_F32)


def bicubic_matrix(in_size: int, out_size: int, align_corners: bool, half_pixel_centers: bool) -> Array:
    """(out, in) float64: `bicubic_axis`'s tabulated taps as a matrix (clamped taps add up)."""
    return _dense(*bicubic_axis(in_size, out_size, align_corners, half_pixel_centers), in_size)


@kernel("ResizeBicubic")
def _resize_bicubic(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """Always float32 output; rows, then columns, are weighted sums of four taps."""
    images, h, w, align, half = _resize_args(attrs, inputs)
    rows, row_w = bicubic_axis(images.shape[1], h, align, half)
    cols, col_w = bicubic_axis(images.shape[2], w, align, half)
    x = images.astype(np.float64)
    n, in_w, depth = x.shape[0], x.shape[2], x.shape[3]
    tall = x[:, rows.reshape(-1)].reshape(n, h, 4, in_w, depth)
    across = np.einsum("nhkwc,hk->nhwc", tall, row_w)
    wide = across[:, :, cols.reshape(-1)].reshape(n, h, w, 4, depth)
    return [np.einsum("nhwkc,wk->nhwc", wide, col_w).astype(_F32)]


# ---------------------------------------------------------------- area


def _area_scale(in_size: int, out_size: int, align_corners: bool) -> np.float32:
    """The resize scale, except that a one-cell axis under align_corners (scale 0, every span
    empty) covers in/out per output as without it, which is what TF computes."""
    scale = resize_scale(in_size, out_size, align_corners)
    return scale if scale > 0 else resize_scale(in_size, out_size, False)


def area_weights(in_size: int, out_size: int, align_corners: bool) -> Array:
    """(out, in) float64 matrix: how much of each input cell output cell i covers, its span being
    [i * scale, (i + 1) * scale) in float32 as TF computes it (cells past the edge count as the last).
    A span inside one cell covers `scale` of it, not the rounded end - start, as in TF."""
    scale = _area_scale(in_size, out_size, align_corners)
    weights = _zero_matrix(out_size, in_size)
    for i in range(out_size):
        start, end = _F32(i) * scale, _F32(i + 1) * scale
        for cell in range(int(np.floor(start)), int(np.ceil(end))):
            inside = cell < start and cell + 1 > end
            cover = scale if inside else min(_F32(cell + 1), end) - max(_F32(cell), start)
            weights[i, min(cell, in_size - 1)] += float(cover)
    return weights


def area_matrix(in_size: int, out_size: int, align_corners: bool) -> Array:
    """(out, in) float64: `area_weights` over the span's length, so that output cell's mean.  TF
    divides by both axes' spans at once in float32; per axis differs by an ulp or so."""
    mean = _F32(1) / _area_scale(in_size, out_size, align_corners)
    return area_weights(in_size, out_size, align_corners) * float(mean)


@kernel("ResizeArea")
def _resize_area(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """Each output is the coverage-weighted mean of the input cells under it; always float32."""
    images, h, w, align, _ = _resize_args(attrs, inputs)
    return [separable_resize(images, area_matrix(images.shape[1], h, align), area_matrix(images.shape[2], w, align))]


# ---------------------------------------------------------------- scale and translate
# TF's sampling_kernels.h, in float32 as there: each maps |distance| in input pixels to a weight.

_PI = _F32(3.14159265359)


def _lanczos(radius: float) -> Callable[[Array], Array]:
    """sinc(x) * sinc(x / radius) within the radius; 1 close to zero, where the quotient is 0/0."""
    r = _F32(radius)

    def weigh(x: Array) -> Array:
        with np.errstate(divide="ignore", invalid="ignore"):
            wave = r * np.sin(_PI * x) * np.sin(_PI * x / r) / (_PI * _PI * x * x)
        return np.where(x > r, _F32(0), np.where(x.astype(np.float64) <= 1e-3, _F32(1), wave))
    return weigh


def _gaussian(x: Array) -> Array:
    """sigma = radius / 3 = 0.5; TF takes the exponential in double."""
    wave = np.exp(-(x * x).astype(np.float64) / (2.0 * 0.5 * 0.5)).astype(_F32)
    return np.where(x >= _F32(1.5), _F32(0), wave)


def _box(x: Array) -> Array:
    """1 inside, a half on the edge, so adjacent boxes tile."""
    return np.where(x < _F32(0.5), _F32(1), np.where(x == _F32(0.5), _F32(0.5), _F32(0)))


def _triangle(x: Array) -> Array:
    return np.where(x < _F32(1), _F32(1) - x, _F32(0))


def _cubic(near: tuple[float, ...], far: tuple[float, ...]) -> Callable[[Array], Array]:
    """A piecewise cubic of radius 2, coefficients (x^3, x^2, x, 1) on [0, 1) and [1, 2), evaluated
    as TF's Horner forms are."""
    n3, n2, n1, n0 = (_F32(c) for c in near)
    f3, f2, f1, f0 = (_F32(c) for c in far)

    def weigh(x: Array) -> Array:
        inner = ((n3 * x + n2) * x + n1) * x + n0
        outer = ((f3 * x + f2) * x + f1) * x + f0
        return np.where(x >= _F32(2), _F32(0), np.where(x >= _F32(1), outer, inner))
    return weigh


_SAMPLING_KERNELS: dict[str, tuple[float, Callable[[Array], Array]]] = {
    "lanczos1": (1.0, _lanczos(1.0)),
    "lanczos3": (3.0, _lanczos(3.0)),
    "lanczos5": (5.0, _lanczos(5.0)),
    "gaussian": (1.5, _gaussian),
    "box": (1.0, _box),
    "triangle": (1.0, _triangle),
    "keyscubic": (2.0, _cubic((1.5, -2.5, 0.0, 1.0), (-0.5, 2.5, -4.0, 2.0))),
    "mitchellcubic": (2.0, _cubic((_F32(7) / _F32(6), -2.0, 0.0, _F32(8) / _F32(9)),
                                  (_F32(-7) / _F32(18), 2.0, _F32(-10) / _F32(3), _F32(16) / _F32(9)))),
}


def sampling_kernel(name: object) -> Optional[str]:
    """TF's kernel_type, which it matches ignoring case; None for a name TF rejects."""
    text = (name.decode(errors="replace") if isinstance(name, bytes) else str(name)).lower()
    return text if text in _SAMPLING_KERNELS else None


def scale_translate_matrix(in_size: int, out_size: int, scale: float, translation: float, kernel_type: str,
                           antialias: bool) -> Array:
    """(out, in) float64: TF's ScaleAndTranslate along one axis.  Output pixel i samples the input
    at (i + 0.5) / scale - translation / scale (float32, as TF computes it); when antialiasing a
    shrink the kernel is stretched by 1 / scale to low-pass filter.  The taps are the input pixels
    within the kernel's reach (none when the sample falls outside the input), their weights
    normalised to sum to one, or all zero when they sum to about zero."""
    radius, weigh = _SAMPLING_KERNELS[kernel_type]
    checked_shape([out_size, in_size], 8, "resize weight matrix")  # the taps below are at most this big
    inv_scale = _F32(1.0 / float(_F32(scale)))
    stretch = max(inv_scale, _F32(1)) if antialias else _F32(1)
    reach = _F32(radius) * stretch
    sample = (np.arange(out_size, dtype=_F32) + _F32(0.5)) * inv_scale + -inv_scale * _F32(translation)
    inside = (sample >= 0) & (sample <= _F32(in_size))
    centre = np.where(inside, sample, _F32(0))
    first = np.clip(np.ceil(centre - reach - _F32(0.5)), 0, in_size - 1).astype(np.int64)
    last = np.clip(np.floor(centre + reach - _F32(0.5)), 0, in_size - 1).astype(np.int64)
    width = min(2 * int(np.ceil(reach)) + 1, in_size) if reach < in_size else in_size
    taps = first[:, None] + np.arange(width)
    weights = weigh(np.abs((taps.astype(_F32) + _F32(0.5) - centre[:, None]) * (_F32(1) / stretch)))
    weights = np.where((taps <= last[:, None]) & inside[:, None], weights, _F32(0)).astype(_F32)
    total = np.cumsum(weights, axis=1, dtype=_F32)[:, -1:]  # in tap order, as TF adds them
    usable = np.abs(total) >= 1000 * np.finfo(_F32).tiny
    with np.errstate(divide="ignore", invalid="ignore"):
        weights = np.where(usable, weights * (_F32(1) / total), _F32(0))
    return _dense(np.minimum(taps, in_size - 1), weights, in_size)


def _pair(values: Array, what: str) -> tuple[float, float]:
    flat = np.asarray(values, _F32)
    if flat.shape != (2,):
        raise KernelError(f"{what} must be a vector of two floats, got shape {list(flat.shape)}")
    return float(flat[0]), float(flat[1])


@kernel("ScaleAndTranslate")
def _scale_and_translate(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """Rows, then columns, resampled under a kernel placed by scale and translation; always float32."""
    images, size, scale, translation = inputs
    h, w = _images_and_size(images, size)
    kernel_type = sampling_kernel(attr(attrs, "kernel_type", "lanczos3"))
    if kernel_type is None:
        raise KernelError(f"unrecognized kernel_type {attr(attrs, 'kernel_type')!r}")
    if images.shape[3] <= 0:
        raise KernelError("image must have at least one channel")
    scales, shifts = _pair(scale, "scale"), _pair(translation, "translation")
    if not min(scales) > 0:
        raise KernelError(f"scale must be greater than zero, got {list(scales)}")
    antialias = bool(attr(attrs, "antialias", True))
    rows, cols = (scale_translate_matrix(images.shape[axis + 1], out, scales[axis], shifts[axis], kernel_type,
                                         antialias) for axis, out in enumerate((h, w)))
    return [separable_resize(images, rows, cols)]


# ---------------------------------------------------------------- contrast


@kernel("AdjustContrastv2")
def _adjust_contrast(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """(x - mean) * factor + mean per image and channel, the mean over height and width; float32
    arithmetic (half inputs computed in float32, as TF does)."""
    images, factor = inputs
    if images.ndim < 3:
        raise KernelError(f"images must be at least 3-D, got shape {list(images.shape)}")
    x = images.astype(_F32)
    mean = x.astype(np.float64).mean(axis=(-3, -2), keepdims=True).astype(_F32)
    scale = _F32(np.asarray(factor).reshape(()))
    return [((x - mean) * scale + mean).astype(images.dtype)]


# ---------------------------------------------------------------- colour


def _rgb(images: Array) -> tuple[Array, Array, Array]:
    if images.ndim < 1 or images.shape[-1] != 3:
        raise KernelError(f"images must have 3 channels in the last dimension, got shape {list(images.shape)}")
    x = images.astype(_F32)
    return x[..., 0], x[..., 1], x[..., 2]


def _pick(category: Array, choices: list[Array]) -> Array:
    """choices[category] per element (category in 0..5, anything else taking the last)."""
    return np.select([category == i for i in range(len(choices) - 1)], choices[:-1], choices[-1])


def hue_range(r: Array, g: Array, b: Array) -> tuple[Array, Array, Array]:
    """TF's rgb_to_hv_range: hue in [0, 6) from the ordering of the channels and where the middle
    one sits between the smallest and largest, plus those two."""
    r_lt_g = r < g
    category = np.where(r_lt_g, np.where(b < r, 1, np.where(b > g, 3, 2)), np.where(b < g, 0, np.where(b > r, 4, 5)))
    hi = _pick(category, [r, g, g, b, b, r])
    mid = _pick(category, [g, r, b, g, r, b])
    lo = _pick(category, [b, b, r, r, g, g])
    span = hi - lo
    ratio = (mid - lo) / np.where(span == 0, _F32(1), span)
    hue = category.astype(_F32) + np.where(category % 2 == 0, ratio, _F32(1) - ratio)
    return np.where(hi == lo, _F32(0), hue).astype(_F32), lo, hi


def rgb_from_hue_range(hue: Array, lo: Array, hi: Array) -> Array:
    """TF's hv_range_to_rgb: the inverse of `hue_range`."""
    category = hue.astype(np.int64)
    ratio = hue - category.astype(_F32)
    ratio = np.where(category % 2 == 0, ratio, _F32(1) - ratio)
    mid = lo + ratio * (hi - lo)
    r = _pick(category, [hi, mid, lo, lo, mid, hi])
    g = _pick(category, [mid, hi, hi, mid, lo, lo])
    b = _pick(category, [lo, lo, mid, hi, hi, mid])
    return np.stack([r, g, b], axis=-1).astype(_F32)


@kernel("AdjustHue")
def _adjust_hue(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """Rotate the hue by delta (a fraction of the circle), wrapped into [0, 6) by repeated add or
    subtract as TF does; float32 throughout."""
    images, delta = inputs
    hue, lo, hi = hue_range(*_rgb(images))
    hue = hue + _F32(np.asarray(delta).reshape(())) * _F32(6)
    hue = np.where(hue < 0, hue + _F32(6), hue)
    hue = np.where(hue >= 6, hue - _F32(6), hue)
    return [rgb_from_hue_range(hue.astype(_F32), lo, hi).astype(images.dtype)]


def _hsv(r: Array, g: Array, b: Array) -> tuple[Array, Array, Array]:
    """TF's rgb_to_hsv (adjust_saturation_op.cc, colorspace_op.h), hue as a fraction of the circle;
    in the channels' type."""
    t = r.dtype.type
    value = np.maximum(r, np.maximum(g, b))
    span = value - np.minimum(r, np.minimum(g, b))
    saturation = np.where(value > 0, span / np.where(value > 0, value, t(1)), t(0))
    with np.errstate(divide="ignore", invalid="ignore"):
        norm = t(1) / (t(6) * span)
        hue = np.where(r == value, norm * (g - b),
                       np.where(g == value, norm * (b - r) + t(2.0 / 6.0), norm * (r - g) + t(4.0 / 6.0)))
    hue = np.where(span <= 0, t(0), hue)
    return np.where(hue < 0, hue + t(1), hue).astype(t), saturation.astype(t), value


def _rgb_of_hsv(hue: Array, saturation: Array, value: Array) -> Array:
    """TF's hsv_to_rgb: chroma c = s * v placed by the hue's sextant."""
    c = saturation * value
    m = value - c
    dh = hue * _F32(6)
    category = dh.astype(np.int64)
    wrapped = np.mod(dh, _F32(2))
    x = c * (_F32(1) - np.abs(wrapped - _F32(1)))
    zero = np.zeros_like(c)
    r = _pick(category, [c, x, zero, zero, x, c, zero])
    g = _pick(category, [x, c, c, x, zero, zero, zero])
    b = _pick(category, [zero, zero, x, c, c, x, zero])
    return np.stack([r + m, g + m, b + m], axis=-1).astype(_F32)


def _channels(images: Array) -> tuple[Array, Array, Array]:
    """The three channels of the last axis, in the images' own float type."""
    if images.ndim < 1 or images.shape[-1] != 3:
        raise KernelError(f"images must have 3 channels in the last dimension, got shape {list(images.shape)}")
    if images.dtype.kind != "f":
        raise KernelError(f"images must be floating point, not {images.dtype}")
    return images[..., 0], images[..., 1], images[..., 2]


@kernel("RGBToHSV")
def _rgb_to_hsv(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """TF's colorspace_op: `_hsv`'s arithmetic, in the images' type."""
    return [np.stack(_hsv(*_channels(inputs[0])), axis=-1).astype(inputs[0].dtype)]


@kernel("HSVToRGB")
def _hsv_to_rgb(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """TF's colorspace_op: each channel's weight is a clipped tent of the hue, mixed with grey by
    the saturation and scaled by the value."""
    hue, saturation, value = _channels(inputs[0])
    dtype = inputs[0].dtype.type
    six, one, two = dtype(6), dtype(1), dtype(2)
    dh = hue * six
    tents = (np.abs(dh - dtype(3)) - one, two - np.abs(dh - two), two - np.abs(dh - dtype(4)))
    grey = one - saturation
    return [np.stack([(grey + saturation * np.clip(t, 0, 1)) * value for t in tents], axis=-1).astype(dtype)]


@kernel("AdjustSaturation")
def _adjust_saturation(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """Scale the HSV saturation, clamped to [0, 1]."""
    images, scale = inputs
    hue, saturation, value = _hsv(*_rgb(images))
    saturation = np.clip(saturation * _F32(np.asarray(scale).reshape(())), _F32(0), _F32(1))
    return [_rgb_of_hsv(hue, saturation, value).astype(images.dtype)]
