"""Window ops over NHWC images beyond plain pooling: MaxPoolWithArgmax and ExtractImagePatches.

MaxPoolWithArgmax gives the max of each window and where it came from, as a
flat NHWC index.  TF scans each window row by row and keeps the first strict maximum, so ties
go to the earliest position; padding never wins.  The index flattens
(y, x, c), plus the image's offset when include_batch_in_index is set.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .common import attr, choice, dtype_attr, int_list, is_floating
from .nn import axis_window_pads, pad_or_crop, pool_geometry, windows
from .registry import KernelError, kernel

Array = np.ndarray
Attrs = Mapping[str, object]


@kernel("MaxPoolWithArgmax")
def _max_pool_with_argmax(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    _, x, window, stride, pads = pool_geometry(attrs, int_list(attrs, "ksize"), int_list(attrs, "strides"),
                                               inputs[0], paddings=("SAME", "VALID"))
    if attr(attrs, "data_format", "NHWC") not in ("NHWC", b"NHWC"):
        raise KernelError("only NHWC is supported")
    n, height, width, channels = x.shape
    lowest = -np.inf if is_floating(x.dtype) else np.iinfo(x.dtype).min
    view = windows(pad_or_crop(x, pads, fill=np.array(lowest).astype(x.dtype)), window, stride)
    flat = view.reshape(view.shape[:4] + (-1,))  # N, OH, OW, C, KH*KW
    best = np.argmax(flat, axis=-1)  # the first maximum, as TF's scan keeps it
    out_h, out_w = view.shape[1], view.shape[2]
    rows = np.arange(out_h)[None, :, None, None] * stride[0] - pads[0][0] + best // window[1]
    cols = np.arange(out_w)[None, None, :, None] * stride[1] - pads[1][0] + best % window[1]
    index = (rows * width + cols) * channels + np.arange(channels)
    if attr(attrs, "include_batch_in_index", False):
        index = index + np.arange(n)[:, None, None, None] * (height * width * channels)
    values = np.take_along_axis(flat, best[..., None], axis=-1)[..., 0]
    return [values.astype(x.dtype), index.astype(dtype_attr(attrs, "Targmax", np.int64))]


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
