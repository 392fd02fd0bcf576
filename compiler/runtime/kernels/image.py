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


def bilinear_axis(in_size: int, out_size: int, align_corners: bool,
                  half_pixel_centers: bool) -> tuple[Array, Array, Array]:
    """Lower/upper source indices and the float32 interpolation weight per output index."""
    scale = resize_scale(in_size, out_size, align_corners)
    i = np.arange(out_size, dtype=_F32)
    src = (i + _F32(0.5)) * scale - _F32(0.5) if half_pixel_centers else i * scale
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
