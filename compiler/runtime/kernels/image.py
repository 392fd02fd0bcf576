"""Image resizing, bit-compatible with TF's CPU kernels.

TF computes source coordinates in float32 (`scale` included), so the kernels
do the same arithmetic in float32 rather than the "exact" float64 geometry;
that is what keeps sampled indices identical at the rounding boundaries.
"""
from __future__ import annotations

from collections.abc import Mapping

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


def _resize_args(attrs: Attrs, inputs: list[Array]) -> tuple[Array, int, int, bool, bool]:
    images, size = inputs
    dims = int_vector(size)
    if images.ndim != 4:
        raise KernelError(f"images must be 4-D, got shape {list(images.shape)}")
    if len(dims) != 2 or min(dims) <= 0:
        raise KernelError(f"size must be two positive ints, got {dims}")
    align = bool(attr(attrs, "align_corners", False))
    half = bool(attr(attrs, "half_pixel_centers", False))
    if align and half:
        raise KernelError("if half_pixel_centers is True, align_corners must be False")
    if min(images.shape[1:3]) <= 0:
        raise KernelError("input image must have non-empty spatial dims")
    checked_shape([images.shape[0], dims[0], dims[1], images.shape[3]], 8)
    return images, dims[0], dims[1], align, half


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
    [i * scale, (i + 1) * scale) in float32 as TF computes it (cells past the edge count as the last)."""
    scale = _area_scale(in_size, out_size, align_corners)
    weights = np.zeros((out_size, in_size))
    for i in range(out_size):
        start, end = _F32(i) * scale, _F32(i + 1) * scale
        for cell in range(int(np.floor(start)), int(np.ceil(end))):
            cover = min(_F32(cell + 1), end) - max(_F32(cell), start)
            weights[i, min(cell, in_size - 1)] += float(cover)
    return weights


@kernel("ResizeArea")
def _resize_area(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """Each output is the coverage-weighted sum of the input cells under it, over its area;
    always float32."""
    images, h, w, align, _ = _resize_args(attrs, inputs)
    rows = area_weights(images.shape[1], h, align)
    cols = area_weights(images.shape[2], w, align)
    area = _F32(1) / (_area_scale(images.shape[1], h, align) * _area_scale(images.shape[2], w, align))
    total = np.einsum("hi,niwc,jw->nhjc", rows, images.astype(np.float64), cols, optimize=True)
    return [(total * float(area)).astype(_F32)]


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
    """TF's rgb_to_hsv (adjust_saturation_op.cc), hue as a fraction of the circle."""
    value = np.maximum(r, np.maximum(g, b))
    span = value - np.minimum(r, np.minimum(g, b))
    saturation = np.where(value > 0, span / np.where(value > 0, value, _F32(1)), _F32(0))
    norm = _F32(1) / (_F32(6) * span)
    hue = np.where(r == value, norm * (g - b),
                   np.where(g == value, norm * (b - r) + _F32(2.0 / 6.0), norm * (r - g) + _F32(4.0 / 6.0)))
    hue = np.where(span <= 0, _F32(0), hue)
    return np.where(hue < 0, hue + _F32(1), hue).astype(_F32), saturation.astype(_F32), value


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


@kernel("AdjustSaturation")
def _adjust_saturation(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """Scale the HSV saturation, clamped to [0, 1]."""
    images, scale = inputs
    hue, saturation, value = _hsv(*_rgb(images))
    saturation = np.clip(saturation * _F32(np.asarray(scale).reshape(())), _F32(0), _F32(1))
    return [_rgb_of_hsv(hue, saturation, value).astype(images.dtype)]
