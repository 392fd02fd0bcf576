"""FakeQuantWithMinMaxArgs / Vars / VarsPerChannel: quantize-dequantize onto TF's nudged grid.

TF first nudges [min, max] so that zero is exactly representable (the zero
point rounded to an integer in [quant_min, quant_max]), then clamps to the
nudged range and rounds half up on the grid.  Everything is float32, in TF's
order of operations, so results are bit-identical.  The per-channel op (Keras
QAT's weight quantizer) nudges one range per last-axis channel.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import numpy as np

from .common import attr
from .registry import KernelError, kernel

Array = np.ndarray
Attrs = Mapping[str, object]

_F32 = np.float32


class NudgedRange(NamedTuple):
    """TF's nudged quantization grid: min + k * scale for k in 0 .. quant_max - quant_min."""

    min: np.float32
    max: np.float32
    scale: np.float32
    zero_point: int
    quant_min: int
    quant_max: int


def quant_bounds(num_bits: int, narrow_range: bool) -> tuple[int, int]:
    if not 2 <= num_bits <= 16:
        raise KernelError(f"num_bits must be in [2, 16], got {num_bits}")
    return (1 if narrow_range else 0), (1 << num_bits) - 1


def nudge(lo: float, hi: float, num_bits: int, narrow_range: bool) -> NudgedRange:
    """TF's Nudge: the float32 scale of [lo, hi], the zero point rounded (half away from zero) into
    the quantized range, and the range that zero point implies."""
    quant_min, quant_max = quant_bounds(num_bits, narrow_range)
    qmin, qmax = _F32(quant_min), _F32(quant_max)
    lo32, hi32 = _F32(lo), _F32(hi)
    scale = (hi32 - lo32) / (qmax - qmin)
    from_min = qmin - lo32 / scale
    if from_min < qmin:
        zero = quant_min
    elif from_min > qmax:
        zero = quant_max
    else:
        zero = int(np.sign(from_min) * np.floor(np.abs(from_min) + _F32(0.5)))
    return NudgedRange((qmin - _F32(zero)) * scale, (qmax - _F32(zero)) * scale, scale, zero, quant_min, quant_max)


def fake_quant(x: Array, grid: NudgedRange, divide: bool) -> Array:
    """Clamp to the nudged range, count grid steps from its minimum rounding half up, and scale
    the steps' distance from the zero point back, all in float32.  TF's Vars kernel divides by
    the scale where the Args kernel multiplies by its inverse (`divide`)."""
    clamped = np.minimum(np.maximum(x.astype(_F32), grid.min), grid.max)
    shifted = clamped - grid.min
    ratio = shifted / grid.scale if divide else shifted * (_F32(1) / grid.scale)
    steps = np.floor(ratio + _F32(0.5))
    return ((steps - _F32(grid.zero_point - grid.quant_min)) * grid.scale).astype(_F32)


def _flags(attrs: Attrs) -> tuple[int, bool]:
    return int(attr(attrs, "num_bits", 8)), bool(attr(attrs, "narrow_range", False))  # type: ignore[arg-type]


def _checked(x: Array, lo: float, hi: float, empty_allowed: bool = True) -> None:
    if x.dtype != np.float32:
        raise KernelError(f"inputs must be float32, got {x.dtype}")
    if not lo < hi and not (empty_allowed and empty_range(lo, hi)):
        raise KernelError(f"min {lo} must be smaller than max {hi}")


def empty_range(lo: float, hi: float) -> bool:
    """[0, 0]: the range of a Keras QAT model that has seen no data yet, which TF's Vars kernels
    quantize everything to zero over (the Args kernel refuses it)."""
    return lo == 0 and hi == 0


@kernel("FakeQuantWithMinMaxArgs")
def _fake_quant_args(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    lo, hi = float(attr(attrs, "min", -6.0)), float(attr(attrs, "max", 6.0))  # type: ignore[arg-type]
    _checked(inputs[0], lo, hi, empty_allowed=False)
    return [fake_quant(inputs[0], nudge(lo, hi, *_flags(attrs)), divide=False)]


@kernel("FakeQuantWithMinMaxVars")
def _fake_quant_vars(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    x, lo, hi = inputs
    if lo.size != 1 or hi.size != 1:
        raise KernelError(f"min and max must be scalars, got shapes {list(lo.shape)} and {list(hi.shape)}")
    lo_f, hi_f = float(lo.reshape(())), float(hi.reshape(()))
    _checked(x, lo_f, hi_f)
    if empty_range(lo_f, hi_f):
        return [np.zeros(x.shape, _F32)]
    return [fake_quant(x, nudge(lo_f, hi_f, *_flags(attrs)), divide=True)]


@kernel("FakeQuantWithMinMaxVarsPerChannel")
def _fake_quant_per_channel(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    x, lo, hi = inputs
    if x.ndim < 1 or lo.shape != (x.shape[-1],) or hi.shape != (x.shape[-1],):
        raise KernelError(f"min and max must be vectors of the last dimension's size, got shapes "
                          f"{list(lo.shape)} and {list(hi.shape)} for inputs of shape {list(x.shape)}")
    for low, high in zip(lo.tolist(), hi.tolist()):
        _checked(x, low, high)
    empty = empty_channels(lo, hi)
    out = fake_quant(x, per_channel_grid(lo, hi, *_flags(attrs)), divide=True)
    out[..., empty] = 0
    return [out]


def empty_channels(lo: Array, hi: Array) -> Array:
    """The channels whose range is [0, 0] (see empty_range): TF gives them zeros."""
    return (np.asarray(lo) == 0) & (np.asarray(hi) == 0)


def per_channel_grid(lo: Array, hi: Array, num_bits: int, narrow_range: bool) -> NudgedRange:
    """One nudged grid per channel, as a NudgedRange of float32 vectors (zero points int64); an
    empty channel gets the grid of [0, 1], its results being zeros whatever the grid."""
    hi = np.where(empty_channels(lo, hi), np.float32(1), hi)
    grids = [nudge(low, high, num_bits, narrow_range) for low, high in zip(lo.tolist(), hi.tolist())]
    quant_min, quant_max = quant_bounds(num_bits, narrow_range)
    return NudgedRange(np.array([g.min for g in grids], _F32), np.array([g.max for g in grids], _F32),
                       np.array([g.scale for g in grids], _F32), np.array([g.zero_point for g in grids], np.int64),
                       quant_min, quant_max)
