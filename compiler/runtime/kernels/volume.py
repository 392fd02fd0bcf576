"""Volumetric (3-D) convolutions and pools: Conv3D, its input gradient (Conv3DTranspose), MaxPool3D, AvgPool3D.

They work internally in NDHWC, NCDHW operands transposed at the boundary.
The arithmetic is the 2-D kernels' (`nn.py`) with one more spatial axis: a
strided window view times the filter in one tensordot, accumulated in
float64 for float operands; SAME padding puts the odd voxel after, as TF does.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .common import accumulator, checked_shape, choice, int_list, int_vector, is_floating
from .nn import axis_window_pads, compute_type
from .registry import KernelError, kernel

Array = np.ndarray
Attrs = Mapping[str, object]
Triple = tuple[int, int, int]
Pads3 = list[tuple[int, int]]

_FORMATS_3D = ("NDHWC", "NCDHW")
_SPATIAL = (1, 2, 3)


def _to_ndhwc(x: Array, fmt: str) -> Array:
    return x.transpose(0, 2, 3, 4, 1) if fmt == "NCDHW" else x


def _from_ndhwc(x: Array, fmt: str) -> Array:
    return x.transpose(0, 4, 1, 2, 3) if fmt == "NCDHW" else x


def _check_5d(x: Array, name: str) -> None:
    if x.ndim != 5:
        raise KernelError(f"{name} must be 5-D, got shape {list(x.shape)}")


def spatial3(values: list[int], fmt: str, name: str) -> Triple:
    """The (D, H, W) entries of a 5-list in `fmt` order; batch and channel entries must be 1."""
    if len(values) != 5:
        raise KernelError(f"{name} must have 5 entries, got {values}")
    n, c = (values[0], values[1]) if fmt == "NCDHW" else (values[0], values[4])
    spatial = tuple(values[2:] if fmt == "NCDHW" else values[1:4])
    if n != 1 or c != 1:
        raise KernelError(f"{name} {values} over batch or channel dims is not supported")
    if min(spatial) < 1:
        raise KernelError(f"{name} {values} must be positive")
    return spatial  # type: ignore[return-value]


class _VolumeSpec:
    """A 3-D op's attributes decoded once: layout, strides, dilations, padding mode."""

    def __init__(self, attrs: Attrs, window_name: str = "") -> None:
        self.data_format = choice(attrs, "data_format", _FORMATS_3D, "NDHWC")
        self.strides = spatial3(int_list(attrs, "strides"), self.data_format, "strides")
        self.dilations = spatial3(int_list(attrs, "dilations", [1] * 5), self.data_format, "dilations")
        self.window = spatial3(int_list(attrs, window_name), self.data_format, window_name) if window_name else None
        self.padding = choice(attrs, "padding", ("SAME", "VALID"))

    def pads(self, spatial: Triple, window: Triple) -> Pads3:
        """(before, after) per spatial axis of an NDHWC input."""
        return [axis_window_pads(size, (k - 1) * d + 1, s, self.padding)
                for size, k, s, d in zip(spatial, window, self.strides, self.dilations)]


def _padded(x: Array, pads: Pads3, fill: object = 0) -> Array:
    grow = [(0, 0)] + [tuple(p) for p in pads] + [(0, 0)]
    if not any(any(p) for p in grow):
        return x
    checked_shape([d + a + b for d, (a, b) in zip(x.shape, grow)], x.itemsize, "padded input")
    return np.pad(x, grow, constant_values=fill)


def volume_windows(x: Array, window: Triple, strides: Triple, dilations: Triple = (1, 1, 1)) -> Array:
    """Strided view (N, OD, OH, OW, C, KD, KH, KW) of every window of a padded NDHWC tensor."""
    effective = tuple((k - 1) * d + 1 for k, d in zip(window, dilations))
    view = sliding_window_view(x, effective, axis=_SPATIAL)
    (sd, sh, sw), (dd, dh, dw) = strides, dilations
    return view[:, ::sd, ::sh, ::sw, :, ::dd, ::dh, ::dw]


# ---------------------------------------------------------------- convolutions


@kernel("Conv3D")
def _conv3d(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """Filter DHWIO; TF's CPU kernel refuses grouped 3-D convolutions, and so does this one."""
    x, w = inputs
    _check_5d(x, "input")
    _check_5d(w, "filter")
    spec = _VolumeSpec(attrs)
    x = _to_ndhwc(x, spec.data_format)
    if x.shape[4] != w.shape[3]:
        raise KernelError(f"input depth {x.shape[4]} != filter depth {w.shape[3]}")
    acc = compute_type(x.dtype)
    pads = spec.pads(x.shape[1:4], w.shape[:3])
    win = volume_windows(_padded(x.astype(acc, copy=False), pads), w.shape[:3], spec.strides, spec.dilations)
    out = np.tensordot(win, w.astype(acc, copy=False), axes=([4, 5, 6, 7], [3, 0, 1, 2]))
    return [_from_ndhwc(out.astype(x.dtype), spec.data_format)]


def _backprop_shape(sizes: list[int], fmt: str) -> tuple[int, Triple, int]:
    if len(sizes) != 5:
        raise KernelError(f"input_sizes must have 5 entries, got {sizes}")
    checked_shape(sizes, 8, "input_sizes")
    n, d, h, w, c = _to_ndhwc(np.empty(sizes, dtype=np.bool_), fmt).shape
    return n, (d, h, w), c


@kernel("Conv3DBackpropInputV2")
def _conv3d_backprop_input(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """Transposed 3-D convolution: dy x filter^T scattered back onto the padded input, one
    strided add per filter tap, then the padding dropped."""
    sizes, w, dy = inputs
    _check_5d(w, "filter")
    _check_5d(dy, "out_backprop")
    spec = _VolumeSpec(attrs)
    n, spatial, c = _backprop_shape(int_vector(sizes), spec.data_format)
    dy = _to_ndhwc(dy, spec.data_format)
    window, cin, cout = w.shape[:3], w.shape[3], w.shape[4]
    if cin != c:
        raise KernelError(f"input depth {c} != filter depth {cin}")
    pads = spec.pads(spatial, window)
    effective = [(k - 1) * d + 1 for k, d in zip(window, spec.dilations)]
    out = [(size + b + a - e) // s + 1 for size, (b, a), e, s in zip(spatial, pads, effective, spec.strides)]
    if dy.shape != (n, *out, cout):
        raise KernelError(f"out_backprop shape {list(dy.shape)} != expected {[n, *out, cout]}")
    acc = compute_type(dy.dtype)
    cols = np.tensordot(dy.astype(acc), w.astype(acc), axes=([4], [4]))  # N,OD,OH,OW,KD,KH,KW,C
    full = [max(size + b + a, (o - 1) * s + e)
            for size, (b, a), o, s, e in zip(spatial, pads, out, spec.strides, effective)]
    dx = np.zeros(checked_shape((n, *full, c), acc.itemsize), dtype=acc)
    for tap in np.ndindex(*window):
        starts = [t * d for t, d in zip(tap, spec.dilations)]
        region = tuple(slice(b, b + (o - 1) * s + 1, s) for b, o, s in zip(starts, out, spec.strides))
        dx[(slice(None),) + region] += cols[(slice(None),) * 4 + tap]
    kept = tuple(slice(b, b + size) for (b, _), size in zip(pads, spatial))
    return [_from_ndhwc(dx[(slice(None),) + kept].astype(dy.dtype), spec.data_format)]


# ---------------------------------------------------------------- pools


def _pool_geometry(attrs: Attrs, x: Array) -> tuple[_VolumeSpec, Array, Pads3]:
    _check_5d(x, "input")
    spec = _VolumeSpec(attrs, "ksize")
    x = _to_ndhwc(x, spec.data_format)
    return spec, x, spec.pads(x.shape[1:4], spec.window)  # type: ignore[arg-type]


@kernel("MaxPool3D")
def _max_pool3d(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """Padding never wins the max: it is filled with the type's lowest value."""
    spec, x, pads = _pool_geometry(attrs, inputs[0])
    lowest = -np.inf if is_floating(x.dtype) else np.iinfo(x.dtype).min
    xp = _padded(x, pads, fill=np.array(lowest).astype(x.dtype))
    out = volume_windows(xp, spec.window, spec.strides).max(axis=(-3, -2, -1))  # type: ignore[arg-type]
    return [_from_ndhwc(out.astype(x.dtype), spec.data_format)]


@kernel("AvgPool3D")
def _avg_pool3d(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """Each output averages only the real (unpadded) voxels under its window."""
    spec, x, pads = _pool_geometry(attrs, inputs[0])
    acc = accumulator(x.dtype)
    window, strides = spec.window, spec.strides
    total = volume_windows(_padded(x.astype(acc), pads), window, strides).sum(axis=(-3, -2, -1))  # type: ignore[arg-type]
    ones = np.ones((1,) + x.shape[1:4] + (1,), dtype=acc)
    count = volume_windows(_padded(ones, pads), window, strides).sum(axis=(-3, -2, -1))  # type: ignore[arg-type]
    return [_from_ndhwc((total / count).astype(x.dtype), spec.data_format)]
