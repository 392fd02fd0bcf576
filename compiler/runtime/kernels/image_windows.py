"""Window ops over NHWC images beyond plain pooling: MaxPoolWithArgmax and ExtractImagePatches.

MaxPoolWithArgmax gives the max of each window and where it came from, as a
flat NHWC index.  TF scans each window row by row and keeps the first strict maximum, so ties
go to the earliest position; padding never wins (`first_max_taps`, which MaxPoolGrad shares).
The index flattens (y, x, c), plus the image's offset when include_batch_in_index is set.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .common import attr, choice, dtype_attr, int_list
from .nn import Pads, axis_window_pads, pad_or_crop, pool_geometry, valid_taps, windows
from .registry import KernelError, kernel

Array = np.ndarray
Attrs = Mapping[str, object]


def first_max_taps(x: Array, window: tuple[int, int], stride: tuple[int, int], pads: Pads) -> tuple[Array, Array]:
    """Each window's maximum over NHWC `x` and its flat tap (row * KW + column), both (N, OH, OW, C), as TF's CPU
    kernels pick it: the first input tap in row-major order, replaced only by a strictly greater one.  So ties go to
    the earliest tap, a NaN wins only when it comes first, and padding never wins (-1: a window of padding only)."""
    view = windows(pad_or_crop(x, pads), window, stride)
    inside = valid_taps(x.shape[1:3], window, stride, pads)
    best = np.full(view.shape[:4], -1, dtype=np.int64)
    values = np.zeros(view.shape[:4], dtype=x.dtype)
    for i in range(window[0]):
        for j in range(window[1]):
            tap = view[..., i, j]
            take = inside[..., i, j] & ((best < 0) | (tap > values))
            best[take] = i * window[1] + j
            values = np.where(take, tap, values)
    return values, best


@kernel("MaxPoolWithArgmax")
def _max_pool_with_argmax(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    _, x, window, stride, pads = pool_geometry(attrs, int_list(attrs, "ksize"), int_list(attrs, "strides"),
                                               inputs[0], paddings=("SAME", "VALID"))
    if attr(attrs, "data_format", "NHWC") not in ("NHWC", b"NHWC"):
        raise KernelError("only NHWC is supported")
    n, height, width, channels = x.shape
    values, best = first_max_taps(x, window, stride, pads)
    out_h, out_w = values.shape[1], values.shape[2]
    rows = np.arange(out_h)[None, :, None, None] * stride[0] - pads[0][0] + best // window[1]
    cols = np.arange(out_w)[None, None, :, None] * stride[1] - pads[1][0] + best % window[1]
    index = (rows * width + cols) * channels + np.arange(channels)
    if attr(attrs, "include_batch_in_index", False):
        index = index + np.arange(n)[:, None, None, None] * (height * width * channels)
    return [values, index.astype(dtype_attr(attrs, "Targmax", np.int64))]


@kernel("ExtractImagePatches")
def _extract_image_patches(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """Each output pixel holds its (rate-dilated) window flattened as (row, column, channel);
    SAME padding reads zeros."""
    x = inputs[0]
    if x.ndim != 4:
        raise KernelError(f"images must be 4-D, got shape {list(x.shape)}")
    sizes, strides, rates = (int_list(attrs, name) for name in ("ksizes", "strides", "rates"))
    if any(len(v) != 4 or v[0] != 1 or v[3] != 1 or min(v) < 1 for v in (sizes, strides, rates)):
        raise KernelError(f"ksizes {sizes}, strides {strides} and rates {rates} must be [1, h, w, 1], positive")
    padding = choice(attrs, "padding", ("SAME", "VALID"))
    effective = [(k - 1) * r + 1 for k, r in zip(sizes[1:3], rates[1:3])]
    pads = tuple(axis_window_pads(s, e, st, padding) for s, e, st in zip(x.shape[1:3], effective, strides[1:3]))
    view = windows(pad_or_crop(x, pads), tuple(sizes[1:3]), tuple(strides[1:3]), tuple(rates[1:3]))  # type: ignore[arg-type]
    patches = view.transpose(0, 1, 2, 4, 5, 3)  # N, OH, OW, KH, KW, C
    return [np.ascontiguousarray(patches).reshape(patches.shape[:3] + (-1,))]
