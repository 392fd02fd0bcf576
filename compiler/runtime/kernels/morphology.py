"""Grayscale morphology: Dilation2D (tf.nn.dilation2d; tf.nn.erosion2d is its negation in the graph).

TF's CPU kernel starts every output at the type's lowest finite value and keeps
`input + filter` over the in-bounds taps when it is strictly greater, so taps in
the padding are skipped (never -inf), a window with no tap in the image gives
the lowest value, and NaNs never win.  The sum is computed in the operand type
(integers wrap).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .common import choice, int_list, is_floating, require_rank
from .registry import KernelError, kernel

Array = np.ndarray
Attrs = Mapping[str, object]


@dataclass(frozen=True)
class Window:
    """One spatial axis of a dilation: output size and the padding before the first input."""

    out: int
    pad_before: int


def _c_div(a: int, b: int) -> int:
    """C's integer division (truncating toward zero), which TF's size arithmetic uses."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def windowed_size(size: int, taps: int, rate: int, stride: int, padding: str) -> Window:
    """TF's GetWindowedOutputSize for a filter of `taps` taps spaced `rate` apart."""
    effective = taps + (taps - 1) * (rate - 1)
    if padding == "VALID":
        out, pad = _c_div(size - effective + stride, stride), 0
    else:
        out = _c_div(size + stride - 1, stride)
        pad = max(0, (out - 1) * stride + effective - size) // 2
    if out < 0:
        raise KernelError(f"Computed output size would be negative: {out} [input_size: {size}, "
                          f"effective_filter_size: {effective}, stride: {stride}]")
    return Window(out, pad)


def lowest(dtype: np.dtype) -> object:
    """Eigen's NumTraits<T>::lowest(): the most negative finite value."""
    return np.finfo(dtype).min if is_floating(dtype) else np.iinfo(dtype).min


def dilation_attrs(attrs: Attrs) -> tuple[list[int], list[int], str]:
    """(strides, rates, padding), each spatial pair checked as TF's kernel constructor does."""
    strides, rates = int_list(attrs, "strides"), int_list(attrs, "rates")
    if len(strides) != 4 or len(rates) != 4:
        raise KernelError("strides and rates must specify 4 dimensions")
    if strides[0] != 1 or strides[3] != 1 or rates[0] != 1 or rates[3] != 1:
        raise KernelError("Stride and rate are only supported across spatial dimensions.")
    if min(strides + rates) < 1:
        raise KernelError(f"strides {strides} and rates {rates} must be positive")
    return strides[1:3], rates[1:3], choice(attrs, "padding", ("SAME", "VALID"))


def _taps(window: Window, size: int, taps: int, rate: int, stride: int) -> tuple[Array, Array]:
    """Per (output position, tap): the input index, and whether it lies inside the input."""
    index = (np.arange(window.out)[:, None] * stride - window.pad_before + np.arange(taps)[None, :] * rate)
    return np.clip(index, 0, max(size - 1, 0)), (index >= 0) & (index < size)


@kernel("Dilation2D")
def _dilation2d(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    x, f = inputs
    require_rank(x, 4, "input")
    require_rank(f, 3, "filter")
    if f.shape[2] != x.shape[3]:
        raise KernelError(f"input and filter must have the same depth: {x.shape[3]} vs {f.shape[2]}")
    strides, rates, padding = dilation_attrs(attrs)
    rows = windowed_size(x.shape[1], f.shape[0], rates[0], strides[0], padding)
    cols = windowed_size(x.shape[2], f.shape[1], rates[1], strides[1], padding)
    out = np.full((x.shape[0], rows.out, cols.out, x.shape[3]), lowest(x.dtype), x.dtype)
    if out.size == 0:
        return [out]
    row_at, row_in = _taps(rows, x.shape[1], f.shape[0], rates[0], strides[0])
    col_at, col_in = _taps(cols, x.shape[2], f.shape[1], rates[1], strides[1])
    for i in range(f.shape[0]):
        for j in range(f.shape[1]):
            value = x[:, row_at[:, i]][:, :, col_at[:, j]] + f[i, j]
            inside = (row_in[:, i][:, None] & col_in[:, j][None, :])[None, :, :, None]
            out = np.where(inside & (value > out), value, out)
    return [out]
