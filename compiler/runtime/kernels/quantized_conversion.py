"""TensorFlow's eight-bit conversions: QuantizeV2, Dequantize, Requantize, RequantizationRange.

TF maps between floats and quantized codes in two different ways, and the
bits differ between them, so both are reproduced here as small functions the
compute kernels in `quantized_ops.py` import:

* the *reference* helpers (`float_to_quantized`, `quantized_to_float`) work in
  float64 on float32 operands and round with C's `round` (half away from zero);
* the *vectorised* helpers (`quantize_like_eigen`, `dequantize_like_eigen`) hold
  their scale factors in float32 and do every step in float32.

Each helper spells out where TF rounds to float32, because that is what makes
the results bit-identical rather than merely close.  Two TF quirks run through
all of them: qint32 codes widen through float32 (its only conversion
operator), and kernels run with denormals flushed to zero.

TF's x86 builds replace some cases with oneDNN kernels that round differently
(QuantizeV2 MIN_FIRST to quint8, SCALED + HALF_TO_EVEN to (q)int8; Dequantize
SCALED of (q)int8; QuantizedAvgPool): up to 1 LSB on a share of the codes.
The kernels reproduce TF's stock kernels, which every TF build has (ARM and
mobile builds have nothing else), so gttc's results never depend on the
machine or its environment.  `onednn_rounding()` switches them to the oneDNN
flavour for the length of a `with` block, to compare against a TF that runs
oneDNN (TF's x86 default unless TF_ENABLE_ONEDNN_OPTS=0); even there TF keeps
its stock kernels for a QuantizeV2 or Dequantize fed by a Const node.

Quantized tensors are numpy integer arrays of the type that stores their bits
(quint8 -> uint8, qint8 -> int8, qint32 -> int32, ...); float range scalars
are float32.
"""
from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from fractions import Fraction
from typing import Optional

import numpy as np

from .common import attr, choice, dtype_attr
from .registry import KernelError, kernel

Array = np.ndarray
Attrs = Mapping[str, object]

F32 = np.float32
F64 = np.float64
_INT32_MIN = -(2 ** 31)
_INT32_MAX = 2 ** 31 - 1
_FLT_MAX = F32(np.finfo(np.float32).max)
# Bounds QUANTIZE_WITH_EIGEN clamps to before its float -> int32 cast: the
# float32 values nearest to int32's limits that still convert back into range.
_EIGEN_LOWER_BOUND = F32(-2.147483648e9)
_EIGEN_UPPER_BOUND = F32(2.147483520e9)

_MODES = ("MIN_COMBINED", "MIN_FIRST", "SCALED")


# ---------------------------------------------------------------- scalar plumbing


def quantized_limits(dtype: np.dtype) -> tuple[int, int]:
    """(lowest, highest) code of a quantized type, from the integer type holding it."""
    info = np.iinfo(np.dtype(dtype))
    return int(info.min), int(info.max)


def _steps(dtype: np.dtype) -> int:
    """Number of codes of a quantized type: 2 ** bits."""
    return 1 << (8 * np.dtype(dtype).itemsize)


def range_scalar(x: Array, what: str, strict: bool = False) -> F32:
    """The float32 range bound TF reads from an operand: its first element.
    `strict` mirrors the kernels that insist on a rank-0 tensor."""
    arr = np.asarray(x)
    if strict and arr.ndim != 0:
        raise KernelError(f"{what} must be a scalar, got shape {list(arr.shape)}")
    if arr.size == 0:
        raise KernelError(f"{what} is empty")
    return F32(arr.reshape(-1)[0])


def flush_denormal(x: Array | F32) -> Array | F32:
    """TF runs kernels with denormals flushed to zero (sign kept), so a float32
    result below the smallest normal number reads as 0."""
    x32 = np.asarray(x, dtype=F32)
    flushed = np.where(np.abs(x32) < np.finfo(np.float32).tiny, x32 * F32(0.0), x32)
    return F32(flushed) if flushed.ndim == 0 else flushed


def round_half_away(x: Array) -> Array:
    """C's round(): ties go away from zero.  Exact for float32 and float64
    (x - trunc(x) never rounds), unlike floor(x + 0.5)."""
    x = np.asarray(x)
    whole = np.trunc(x)
    frac = x - whole
    return whole + np.sign(x) * (np.abs(frac) >= 0.5)


def round_half_away_scalar(value: float) -> int:
    """std::lround / std::round on one double, exactly (via a rational)."""
    exact = Fraction(value)
    whole = math.trunc(exact)
    if abs(exact - whole) >= Fraction(1, 2):
        whole += 1 if exact > 0 else -1
    return whole


def wrap_int32(x: Array) -> Array:
    """Two's-complement wrap of int64 values into int32, as TF's int32
    accumulators overflow."""
    return np.asarray(x, dtype=np.int64).astype(np.int32)


def c_divide(a: Array, b: Array | int) -> Array:
    """Integer division truncating toward zero (C), not flooring (Python)."""
    a = np.asarray(a, dtype=np.int64)
    quotient = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (np.asarray(b) < 0), -quotient, quotient)


def cast_float_to_code(values: Array, dtype: np.dtype) -> Array:
    """x86's float -> int conversion: truncate toward zero, and NaN or anything
    outside int32 becomes INT32_MIN; narrower types keep the low bits."""
    wide = np.asarray(values, dtype=F64)
    valid = (wide >= -2.0 ** 31) & (wide < 2.0 ** 31)
    as_int = np.where(valid, np.trunc(np.where(valid, wide, 0.0)), _INT32_MIN)
    return as_int.astype(np.int64).astype(np.int32).astype(np.dtype(dtype))


def widen_codes(codes: Array) -> Array:
    """Codes as int64 the way TF widens them.  qint32's only conversion
    operator is to float, so TF's casts of qint32 codes to int64 or double pass
    through float32 and round codes beyond 2**24; narrower types convert exactly."""
    codes = np.asarray(codes)
    if codes.dtype == np.dtype(np.int32):
        return codes.astype(F32).astype(np.int64)
    return codes.astype(np.int64)


def _int64_like_c(value: float) -> int:
    """A double converted to int64 as x86 does: truncated, INT64_MIN when out of range."""
    if not -2.0 ** 63 <= value < 2.0 ** 63:
        return -(2 ** 63)
    return math.trunc(value)


# ---------------------------------------------------------------- reference conversions


def float_to_quantized_unclamped(x: Array | float, range_min: float, range_max: float,
                                 dtype: np.dtype) -> Array:
    """TF's FloatToQuantizedUnclamped as int64: float64 arithmetic, except that
    `range_max - range_min` is a float32 subtraction; min == max gives `lowest`."""
    lowest, _ = quantized_limits(dtype)
    rmin, rmax = F32(range_min), F32(range_max)
    x = np.asarray(x, dtype=F32)
    if rmin == rmax:
        return np.full(x.shape, lowest, dtype=np.int64)
    steps = _steps(dtype)
    scale = steps / (float(F32(rmax - rmin)) * (steps / (steps - 1.0)))
    codes = round_half_away(x.astype(F64) * scale) - round_half_away(F64(float(rmin) * scale))
    # A code beyond int64 (a range so narrow the scale explodes, or NaN) converts
    # to INT64_MIN, and TF's result then stays at the bottom rather than wrapping.
    valid = np.abs(codes) < 2.0 ** 63
    whole = np.where(valid, codes, 0.0).astype(np.int64)
    return np.where(valid, whole + lowest, np.iinfo(np.int64).min)


def float_to_quantized(x: Array | float, range_min: float, range_max: float,
                       dtype: np.dtype) -> Array:
    """TF's FloatToQuantized: the unclamped code saturated into `dtype`."""
    lowest, highest = quantized_limits(dtype)
    codes = float_to_quantized_unclamped(x, range_min, range_max, dtype)
    return np.clip(codes, lowest, highest).astype(np.dtype(dtype))


def zero_point(range_min: float, range_max: float, dtype: np.dtype) -> int:
    """The code of real 0.0, unclamped, as the int32 the quantized kernels keep."""
    code = int(float_to_quantized_unclamped(0.0, range_min, range_max, dtype))
    return int(wrap_int32(code))


def quantized_to_float(codes: Array, range_min: float, range_max: float,
                       dtype: np.dtype) -> Array:
    """TF's QuantizedToFloat: float64 arithmetic around a float32-rounded
    `range_min` (kept in step with the vectorised form); min == max gives min."""
    rmin, rmax = F32(range_min), F32(range_max)
    codes = np.asarray(codes)
    if rmin == rmax:
        return np.full(codes.shape, rmin, dtype=F32)
    lowest, _ = quantized_limits(dtype)
    steps = _steps(dtype)
    scale = float(F32(rmax - rmin)) * (steps / (steps - 1.0)) / steps
    scale32 = flush_denormal(F32(scale))
    min_rounded = flush_denormal(F32(round_half_away(flush_denormal(F32(rmin / scale32)))
                                     * scale32))
    result = float(min_rounded) + (widen_codes(codes).astype(F64) - lowest) * scale
    return flush_denormal(result.astype(F32))


def requantize_in_new_range(codes: Array, in_min: float, in_max: float, out_min: float,
                            out_max: float, in_dtype: np.dtype, out_dtype: np.dtype) -> Array:
    """TF's RequantizeInNewRange: reference dequantize, then reference quantize."""
    real = quantized_to_float(codes, in_min, in_max, in_dtype)
    return float_to_quantized(real, out_min, out_max, out_dtype)


# ---------------------------------------------------------------- vectorised (Eigen) conversions


def dequantize_like_eigen(codes: Array, range_min: float, range_max: float) -> Array:
    """DEQUANTIZE_WITH_EIGEN: all float32 -- (min_rounded - lowest * scale) + code * scale."""
    rmin, rmax = F32(range_min), F32(range_max)
    lowest, _ = quantized_limits(codes.dtype)
    scale = flush_denormal(F32(float(F32(rmax - rmin)) / (_steps(codes.dtype) - 1.0)))
    min_rounded = rmin if rmax == rmin else \
        flush_denormal(F32(round_half_away(flush_denormal(F32(rmin / scale))) * scale))
    base = flush_denormal(F32(min_rounded - flush_denormal(F32(F32(lowest) * scale))))
    return flush_denormal(base + flush_denormal(codes.astype(F32) * scale))


def quantize_like_eigen(x: Array, range_min: float, range_max: float, dtype: np.dtype) -> Array:
    """QUANTIZE_WITH_EIGEN: all float32 -- round(x * scale) - (round(min * scale) - lowest),
    clamped to the type (and to int32-safe floats), then cast."""
    rmin, rmax = F32(range_min), F32(range_max)
    lowest, highest = quantized_limits(dtype)
    scale = F32(0.0) if rmax == rmin else \
        flush_denormal(F32((_steps(dtype) - 1.0) / float(F32(rmax - rmin))))
    min_scaled = F32(round_half_away(flush_denormal(F32(rmin * scale))))
    shift = F32(min_scaled - F32(lowest))
    codes = (round_half_away(flush_denormal(np.asarray(x, dtype=F32) * scale)) - shift)
    lower = max(F32(lowest), _EIGEN_LOWER_BOUND)
    upper = min(F32(highest), _EIGEN_UPPER_BOUND)
    return cast_float_to_code(np.clip(codes, lower, upper), dtype)


def requantize_like_eigen(codes: Array, in_min: float, in_max: float, out_min: float,
                          out_max: float, out_dtype: np.dtype) -> Array:
    """RequantizeManyInNewRangeUsingEigen's generic form: float32 dequantize, quantize."""
    return quantize_like_eigen(dequantize_like_eigen(codes, in_min, in_max),
                               out_min, out_max, out_dtype)


def requantize_32_to_8(codes: Array, in_min: float, in_max: float, out_min: float,
                       out_max: float) -> Array:
    """TF's fixed-point qint32 -> quint8 requantization (16 fractional bits).
    Its constants mix float32 and float64 exactly as below."""
    in_min, in_max, out_min, out_max = F32(in_min), F32(in_max), F32(out_min), F32(out_max)
    input_range = F32(in_max - in_min)
    output_range = F32(out_max - out_min)
    recip = F32(0.0) if output_range == 0 else F32(255.0 / float(output_range))
    rezero = F32(float(F32(in_min + in_max)) / 2.0)
    if output_range == 0:
        range_scale_fp, output_offset_fp = 0, 0
    else:
        range_scale_fp = _int64_like_c(255.0 * 65536 * float(input_range) / float(output_range))
        offset = 65536 * (float(out_min) * 255.0) / float(output_range)
        output_offset_fp = round_half_away_scalar(offset) if abs(offset) < 2.0 ** 63 \
            else -(2 ** 63)
    input_offset_fp = _int64_like_c(float(F32(F32(rezero * recip) * F32(65536))))
    constants = np.array([input_offset_fp, output_offset_fp, 1 << 15], dtype=np.int64)
    constant = constants[0] - constants[1] + constants[2]
    # int64 products wrap like TF's (its codes pass through float32 first).
    fixed = ((widen_codes(codes) * np.int64(range_scale_fp)) >> 32) + constant
    return np.clip(fixed >> 16, 0, 255).astype(np.uint8)


def requantize_8_to_32(codes: Array, in_min: float, in_max: float, out_min: float,
                       out_max: float) -> Array:
    """TF's quint8 -> qint32 shortcut: the codes of 0 and 1 are converted with
    the reference helpers, every other code by linear extrapolation."""
    ends = quantized_to_float(np.array([0, 1], np.uint8), in_min, in_max, np.uint8)
    pair = float_to_quantized_unclamped(ends, out_min, out_max, np.int32)
    step = wrap_int32(np.diff(pair)).astype(np.int64)  # int64 arrays wrap silently
    wide = pair[0] + codes.astype(np.int64) * step
    return np.clip(wide, _INT32_MIN, _INT32_MAX).astype(np.int32)


# ---------------------------------------------------------------- output ranges


def float_for_one_level(range_min: float, range_max: float, dtype: np.dtype) -> F32:
    """The real value of one code step, in float32."""
    lowest, highest = quantized_limits(dtype)
    return flush_denormal(F32(F32(F32(range_max) - F32(range_min)) / F32(highest - lowest)))


def multiplication_range(min_a: float, max_a: float, min_b: float, max_b: float,
                         a_dtype: np.dtype, b_dtype: np.dtype,
                         out_dtype: np.dtype = np.dtype(np.int32)) -> tuple[F32, F32]:
    """QuantizationRangeForMultiplication: the range of a product of codes
    (conv, matmul, mul), step_a * step_b times the output type's limits."""
    step = flush_denormal(F32(float_for_one_level(min_a, max_a, a_dtype) *
                              float_for_one_level(min_b, max_b, b_dtype)))
    lowest, highest = quantized_limits(out_dtype)
    return flush_denormal(F32(step * F32(lowest))), flush_denormal(F32(step * F32(highest)))


def add_range(input_min: float, input_max: float, other_min: float,
              other_max: float) -> tuple[F32, F32]:
    """GetOutputMinAndMaxForQuantizedAdd (QuantizedBiasAdd): symmetric, the
    largest input magnitude times 2**17."""
    largest = max(F32(input_max), -F32(input_min), F32(other_max), -F32(other_min))
    top = F32(largest * F32(1 << 17))
    return -top, top


# ---------------------------------------------------------------- QuantizeV2


def _adjusted_range(in_min: F32, in_max: F32, ensure_minimum: F32) -> tuple[F32, F32]:
    """QuantizeV2's range: min pulled down to 0, max pushed up to 0 and to at
    least `ensure_minimum_range` times the larger magnitude (or 1) above min."""
    if in_max < in_min:
        raise KernelError(f"input_max_range ({in_max}) must be >= input_min_range ({in_min})")
    range_min = min(F32(0.0), in_min)
    epsilon = F32(max(F32(1.0), abs(in_min), abs(in_max)) * ensure_minimum)
    range_max = max(F32(0.0), max(in_max, F32(range_min + epsilon)))
    return range_min, range_max


def _quantize_min_combined(x: Array, range_min: F32, range_max: F32, dtype: np.dtype) -> Array:
    """Scale [min, max] onto the whole type; unsigned types add 0.5 and
    truncate, signed ones shift by half the range and round half away."""
    lowest, highest = quantized_limits(dtype)
    scale = F32((float(highest) - float(lowest)) / float(F32(range_max - range_min)))
    shifted = (np.clip(x, range_min, range_max) - range_min).astype(F32) * scale
    if lowest == 0:
        return cast_float_to_code((shifted + F32(0.5)).astype(F32), dtype)
    half_range = F32((float(highest) - float(lowest) + 1) / 2.0)
    return cast_float_to_code(round_half_away((shifted - half_range).astype(F32)), dtype)


def _scaled_factor(range_min: F32, range_max: F32, dtype: np.dtype,
                   narrow_range: bool) -> tuple[F32, int, int]:
    """SCALED mode's symmetric scale: the tighter of the two sides, so 0 maps to 0."""
    lowest, highest = quantized_limits(dtype)
    min_code = lowest + (1 if narrow_range else 0)
    from_min = F32(F32(min_code) / range_min) if F32(min_code) * range_min > 0 else _FLT_MAX
    from_max = F32(F32(highest) / range_max) if F32(highest) * range_max > 0 else _FLT_MAX
    return min(from_min, from_max), min_code, highest


def _quantize_scaled(x: Array, range_min: F32, range_max: F32, dtype: np.dtype,
                     narrow_range: bool, half_to_even: bool) -> tuple[Array, F32, F32]:
    """Clamp to the range the scale really covers, scale, round, cast; that
    covered range (denormals flushed) is the op's output range."""
    scale, min_code, max_code = _scaled_factor(range_min, range_max, dtype, narrow_range)
    range_min = flush_denormal(F32(F32(min_code) / scale))
    range_max = flush_denormal(F32(F32(max_code) / scale))
    scaled = (np.clip(x, range_min, range_max) * scale).astype(F32)
    rounded = np.rint(scaled) if half_to_even else round_half_away(scaled)
    return cast_float_to_code(rounded, dtype), range_min, range_max


def quantize_slice(x: Array, in_min: F32, in_max: F32, dtype: np.dtype, mode: str,
                   narrow_range: bool, half_to_even: bool,
                   ensure_minimum: F32) -> tuple[Array, F32, F32]:
    """One QuantizeV2 slice: (codes, output min, output max)."""
    x = np.asarray(x, dtype=F32)
    range_min, range_max = _adjusted_range(in_min, in_max, ensure_minimum)
    if mode == "MIN_FIRST":
        return quantize_like_eigen(x, range_min, range_max, dtype), range_min, range_max
    if mode == "SCALED":
        return _quantize_scaled(x, range_min, range_max, dtype, narrow_range, half_to_even)
    return _quantize_min_combined(x, range_min, range_max, dtype), range_min, range_max


def _check_quantize_ranges(mins: Array, maxs: Array, axis: int, count: int) -> None:
    """QuantizeV2's range operands: one element each per tensor; per channel
    (axis >= 0, even for a channel dim of 1) vectors as long as that dim."""
    for values, name in ((mins, "min_range"), (maxs, "max_range")):
        if axis < 0 and values.size != 1:
            raise KernelError(f"{name} must hold one element when axis is not given, "
                              f"got shape {list(values.shape)}")
        if axis >= 0 and (values.ndim != 1 or values.size != count):
            raise KernelError(f"{name} must be a vector of {count} elements for axis {axis}, "
                              f"got shape {list(values.shape)}")


def _slices(x: Array, axis: int) -> tuple[int, Array]:
    """TF's per-channel view (pre, channels, post); axis < 0 means per tensor."""
    if axis < 0:
        return 1, x.reshape(1, 1, -1)
    if axis >= x.ndim:
        raise KernelError(f"axis {axis} out of range for rank {x.ndim}")
    channels = x.shape[axis]
    return channels, x.reshape(int(np.prod(x.shape[:axis])), channels, -1)


# Whether the kernels round as TF's oneDNN kernels do (see the module docstring).
_ROUNDING = {"onednn": False}


def onednn_enabled() -> bool:
    """Whether the kernels currently reproduce TF's oneDNN kernels rather than its stock ones."""
    return _ROUNDING["onednn"]


@contextmanager
def onednn_rounding(enabled: bool = True) -> Iterator[None]:
    """Round as TF's x86 oneDNN kernels do (or, with False, as its stock ones) inside the block."""
    saved = _ROUNDING["onednn"]
    _ROUNDING["onednn"] = enabled
    try:
        yield
    finally:
        _ROUNDING["onednn"] = saved


def onednn_quantize_applies(dtype: np.dtype, mode: str, half_to_even: bool, narrow_range: bool,
                            axis: int, onednn: bool | None = None) -> bool:
    """TF's oneDNN rewrite of QuantizeV2: per tensor, no narrow range, and
    either MIN_FIRST to quint8 or SCALED with HALF_TO_EVEN to (q)int8.  (In a
    graph TF also keeps the stock kernel when the input is a Const node.)"""
    if not (onednn_enabled() if onednn is None else onednn) or narrow_range or axis != -1:
        return False
    if mode == "MIN_FIRST":
        return np.dtype(dtype) == np.dtype(np.uint8)
    return mode == "SCALED" and half_to_even and np.dtype(dtype).itemsize == 1


def quantize_like_onednn(x: Array, in_min: F32, in_max: F32, dtype: np.dtype,
                         mode: str, ensure_minimum: F32) -> tuple[Array, F32, F32]:
    """oneDNN's QuantizeV2 (TF's _MklQuantizeV2): float32 scale and shift,
    round half to even, saturate.  SCALED uses the symmetric range of the
    larger magnitude with 127.5 (signed) or 255 steps; a rank-0 MIN_FIRST
    input is truncated instead of rounded."""
    x = np.asarray(x, dtype=F32)
    if x.ndim > 5 or (x.ndim == 0 and mode != "MIN_FIRST"):
        raise KernelError(f"oneDNN QuantizeV2 takes inputs of rank 1 to 5 (rank 0 in MIN_FIRST "
                          f"mode only), got rank {x.ndim}")
    range_min, range_max = _adjusted_range(in_min, in_max, ensure_minimum)
    lowest, highest = quantized_limits(dtype)
    if mode == "SCALED":
        largest = max(abs(range_min), abs(range_max))
        steps = float(_steps(dtype) - 1)
        target = F32(steps / 2.0) if lowest < 0 else F32(steps)
        scaled = (x * F32(target / largest)).astype(F32)
        codes = np.clip(np.rint(scaled), lowest, highest).astype(dtype)
        return codes, (-largest if lowest < 0 else F32(0.0)), largest
    if x.ndim == 0:
        scale = F32((_steps(dtype) - 1.0) / float(F32(range_max - range_min)))
        return cast_float_to_code(F32(F32(x - range_min) * scale), dtype), range_min, range_max
    scale = F32(F32(255.0) / F32(range_max - range_min))
    shifted = ((x * scale).astype(F32) + F32(-range_min * scale)).astype(F32)
    return np.clip(np.rint(shifted), lowest, highest).astype(dtype), range_min, range_max


@kernel("QuantizeV2")
def _quantize_v2_kernel(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    return quantize_v2(attrs, inputs)


def quantize_v2(attrs: Attrs, inputs: list[Array], onednn: bool | None = None) -> list[Array]:
    """QuantizeV2.  Per tensor (axis -1, or a channel dim of size 1) the
    outputs' ranges are scalars; per channel they take min_range's shape
    (MIN_FIRST unsupported).  `onednn` overrides the current rounding, e.g.
    False for a node fed by a Const, where TF keeps its stock kernel."""
    x, min_in, max_in = inputs
    dtype = dtype_attr(attrs, "T")
    mode = choice(attrs, "mode", _MODES, "MIN_COMBINED")
    half_to_even = choice(attrs, "round_mode", ("HALF_AWAY_FROM_ZERO", "HALF_TO_EVEN"),
                          "HALF_AWAY_FROM_ZERO") == "HALF_TO_EVEN"
    if half_to_even and mode != "SCALED":
        raise KernelError(f"round_mode HALF_TO_EVEN needs mode SCALED, not {mode}")
    narrow = bool(attr(attrs, "narrow_range", False))
    ensure = F32(attr(attrs, "ensure_minimum_range", 0.01))  # type: ignore[arg-type]
    axis = int(attr(attrs, "axis", -1))  # type: ignore[arg-type]
    if onednn_quantize_applies(dtype, mode, half_to_even, narrow, axis, onednn):
        codes, lo, hi = quantize_like_onednn(
            x, range_scalar(min_in, "min_range", strict=True),
            range_scalar(max_in, "max_range", strict=True), dtype, mode, ensure)
        return [codes, lo, hi]
    mins, maxs = np.asarray(min_in, dtype=F32), np.asarray(max_in, dtype=F32)
    count, view = _slices(np.asarray(x), axis)
    _check_quantize_ranges(mins, maxs, axis, count)
    if count == 1:
        codes, lo, hi = quantize_slice(x, mins.reshape(-1)[0], maxs.reshape(-1)[0], dtype, mode,
                                       narrow, half_to_even, ensure)
        return [codes.reshape(np.shape(x)), lo, hi]
    if mode == "MIN_FIRST":
        raise KernelError("MIN_FIRST mode is not implemented for Quantize with axis != -1")
    out = np.empty(view.shape, dtype=dtype)
    out_min, out_max = np.empty(count, F32), np.empty(count, F32)
    for i in range(count):
        out[:, i], out_min[i], out_max[i] = quantize_slice(
            view[:, i], mins.reshape(-1)[i], maxs.reshape(-1)[i], dtype, mode, narrow,
            half_to_even, ensure)
    return [out.reshape(np.shape(x)), out_min.reshape(mins.shape), out_max.reshape(maxs.shape)]


def quantize_v2_output_range(attrs: Attrs, bounds: Sequence[Optional[Array]]) -> Optional[tuple[Array, Array]]:
    """The (min, max) outputs of QuantizeV2 for an input range (min, max): they depend on the range alone
    (TF widens it to hold 0.0 and a minimum width), so they are known wherever min and max are.

    None when a bound is unknown (None) or TF's kernel would refuse the range.
    """
    if len(bounds) != 2 or any(b is None for b in bounds):
        return None
    try:
        _, low, high = quantize_v2(attrs, [np.zeros((0,), F32), *(np.asarray(b) for b in bounds)])
    except KernelError:
        return None
    return low, high


# ---------------------------------------------------------------- Dequantize


def dequantize_slice(codes: Array, range_min: F32, range_max: F32, mode: str,
                     narrow_range: bool, per_tensor: bool = True) -> Array:
    """One Dequantize slice in float32.  Per tensor, SCALED passes the codes
    through int first -- for qint32 that is float32 then int32, so codes that
    round to 2**31 become INT32_MIN."""
    lowest, highest = quantized_limits(codes.dtype)
    if mode == "MIN_FIRST":
        return dequantize_like_eigen(codes, range_min, range_max)
    if mode == "SCALED":
        from_max = flush_denormal(F32(range_max / F32(highest)))
        if lowest == 0:
            scale = from_max
        else:
            min_code = lowest + (1 if narrow_range else 0)
            scale = max(flush_denormal(F32(range_min / F32(min_code))), from_max)
        as_float = codes.astype(F32)
        if per_tensor:
            as_float = cast_float_to_code(as_float, np.int32).astype(F32)
        return flush_denormal(as_float * scale)
    half_range = F32(0.0) if lowest == 0 else \
        F32(F32(F32(F32(highest) - F32(lowest)) + F32(1.0)) / F32(2.0))
    scale = flush_denormal(F32(F32(range_max - range_min) / F32(F32(highest) - F32(lowest))))
    return flush_denormal(flush_denormal((codes.astype(F32) + half_range) * scale) + range_min)


def onednn_dequantize_applies(dtype: np.dtype, mode: str, axis: int,
                              onednn: bool | None = None) -> bool:
    """TF's oneDNN rewrite of Dequantize: SCALED (q)int8 codes, per tensor
    (and, in a graph, not fed by a Const)."""
    enabled = onednn_enabled() if onednn is None else onednn
    return enabled and mode == "SCALED" and axis < 0 and np.dtype(dtype).itemsize == 1


def dequantize_like_onednn(codes: Array, range_min: F32, range_max: F32,
                           narrow_range: bool) -> Array:
    """TF's _MklDequantize: as SCALED, except that narrow_range raises the
    lowest code of unsigned types to 1 too, so a positive min can set the scale."""
    lowest, highest = quantized_limits(codes.dtype)
    min_code = F32(lowest + (1 if narrow_range else 0))
    from_max = flush_denormal(F32(range_max / F32(highest)))
    scale = max(flush_denormal(F32(range_min / min_code)), from_max) if min_code != 0 \
        else from_max
    return flush_denormal(codes.astype(F32) * scale)


@kernel("Dequantize")
def _dequantize_kernel(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    return dequantize(attrs, inputs)


def dequantize(attrs: Attrs, inputs: list[Array], onednn: bool | None = None) -> list[Array]:
    """Dequantize to float32 (or bfloat16, MIN_COMBINED only, rounded from the
    float32 result).  `onednn` overrides the current rounding as in quantize_v2."""
    codes, min_in, max_in = (np.asarray(v) for v in inputs)
    mode = choice(attrs, "mode", _MODES, "MIN_COMBINED")
    out_type = dtype_attr(attrs, "dtype", np.dtype(F32))
    if out_type != np.dtype(F32) and out_type.name != "bfloat16":
        raise KernelError(f"output type must be float or bfloat16, got {out_type}")
    if out_type != np.dtype(F32) and mode != "MIN_COMBINED":
        raise KernelError(f"bfloat16 output needs mode MIN_COMBINED, not {mode}")
    narrow = bool(attr(attrs, "narrow_range", False))
    axis = int(attr(attrs, "axis", -1))  # type: ignore[arg-type]
    count, view = _slices(codes, axis)
    mins, maxs = min_in.astype(F32).reshape(-1), max_in.astype(F32).reshape(-1)
    if mins.size != count or maxs.size != count:
        raise KernelError(f"min_range/max_range need {count} elements for axis {axis}, "
                          f"got {mins.size} and {maxs.size}")
    if count > 1 and mode == "MIN_FIRST":
        raise KernelError("MIN_FIRST mode is not implemented for Dequantize with axis != -1")
    if onednn_dequantize_applies(codes.dtype, mode, axis, onednn):
        if not 1 <= codes.ndim <= 5:
            raise KernelError(f"oneDNN Dequantize takes inputs of rank 1 to 5, got {codes.ndim}")
        return [dequantize_like_onednn(codes, mins[0], maxs[0], narrow).astype(out_type)]
    out = np.empty(view.shape, dtype=F32)
    for i in range(count):
        out[:, i] = dequantize_slice(view[:, i], mins[i], maxs[i], mode, narrow, count == 1)
    return [out.reshape(codes.shape).astype(out_type)]


# ---------------------------------------------------------------- Requantize / range


@kernel("Requantize")
def _requantize(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """qint32 -> quint8 takes TF's fixed-point path; other outputs (qint8) the
    float32 one.  The requested range is passed through unchanged."""
    codes, in_min, in_max, out_min, out_max = inputs
    out_type = dtype_attr(attrs, "out_type")
    lo, hi = range_scalar(in_min, "input_min"), range_scalar(in_max, "input_max")
    want_lo = range_scalar(out_min, "requested_output_min")
    want_hi = range_scalar(out_max, "requested_output_max")
    if not want_lo <= 0:
        raise KernelError(f"requested_output_min must be <= 0, got {want_lo}")
    if not want_hi >= want_lo:
        raise KernelError(f"requested_output_max must be >= requested_output_min, "
                          f"got {want_hi} and {want_lo}")
    codes = np.asarray(codes)
    if out_type == np.dtype(np.uint8) and codes.dtype == np.dtype(np.int32):
        result = requantize_32_to_8(codes, lo, hi, want_lo, want_hi)
    else:
        result = requantize_like_eigen(codes, lo, hi, want_lo, want_hi, out_type)
    return [result, want_lo, want_hi]


@kernel("RequantizationRange")
def _requantization_range(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """The real range the codes actually use, with the minimum capped at 0."""
    codes, in_min, in_max = inputs
    codes = np.asarray(codes)
    lowest, highest = quantized_limits(codes.dtype)
    lo, hi = range_scalar(in_min, "input_min"), range_scalar(in_max, "input_max")
    used_min = codes.min(initial=highest)
    used_max = codes.max(initial=lowest)
    as_float = quantized_to_float(np.array([used_min, used_max], dtype=codes.dtype), lo, hi,
                                  codes.dtype)
    return [min(F32(0.0), as_float[0]), as_float[1]]
