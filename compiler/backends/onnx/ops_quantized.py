"""TF's eight-bit ops (mobile-int8 graphs) as ONNX: QDQ when ranges are frozen, integer ops when not.

Frozen ranges (`--calibration`), the QDQ form onnxruntime fuses into QLinearConv & co:

    QuantizeV2(x, min, max) MIN_FIRST quint8       -> QuantizeLinear(x, step, zp)
    Dequantize(q, min, max) of an activation       -> DequantizeLinear(q, step, zp)
    QuantizedConv2D / QuantizedMatMul + Dequantize -> DequantizeLinear(x) -> Conv / Gemm on
                                                      DequantizeLinear(weight codes); the float result
                                                      is the dequantized accumulator
    Dequantize(stored weight) read by a float conv -> DequantizeLinear(weight codes) (ops_conv)

Weight codes on symmetric_weights' grid (zero point exactly 128) are written as
int8 with zero point 0, onnxruntime's U8S8 fast path; others as uint8 with
TF's zero point.  A BiasAdd after such a product becomes its int32 bias
(fusion.absorb_bias).

Run-time ranges (no calibration):

    QuantizeV2 of Min/Max of its own input         -> DynamicQuantizeLinear
    QuantizeV2 with other run-time ranges          -> QuantizeLinear with TF's widening in scalar ops
    QuantizedConv2D / QuantizedMatMul              -> ConvInteger / MatMulInteger (x, w, zp_x, zp_w)
    Dequantize(acc qint32, lo, hi)                 -> Cast(float) * (step_x * step_w)
    Dequantize(const quint8 weight)                -> a float initializer

Range mapping.  QuantizeV2 first widens [in_min, in_max] to [lo, hi]
(lo = min(0, in_min); hi = max(0, in_max, lo + ensure_minimum_range *
max(1, |in_min|, |in_max|))), then codes x as round(x * 255/(hi - lo)) - round(lo
* 255/(hi - lo)), clamped to [0, 255], rounding half away from zero.  So ONNX's
scale is TF's step `(hi - lo) / 255` (float32, as TF's float_for_one_level)
and the zero point is `round_half_away(-lo * 255/(hi - lo))`, in [0, 255]
since lo <= 0 <= hi; real 0.0 is exactly that code.  QuantizeLinear divides
by the step and rounds half to even where TF multiplies by the reciprocal and
rounds half away, so a code can differ by 1 LSB, only where x * 255/(hi - lo)
is within a few float32 ulps of a half-integer; never more than 1 LSB.

The integer accumulators are exact: ConvInteger/MatMulInteger subtract the
same zero points as TF's kernels (TF derives the input's from [lo, hi] in
float64; the two agree except when the zero point sits within ~1e-7 of a
half-integer, which a frozen range checks and keeps apart).  TF's Dequantize
of the qint32 accumulator over QuantizationRangeForMultiplication's range
[-2**31 s, 2**31 s] (s = step_x * step_w in float32) works out to exactly
float(code) * s + 0 in float32, so Cast + Mul is bit-exact with it.

Ranges known at export time (constants, calibrated Const min/max, constant
weights re-quantized by QuantizeV2) fold: this module evaluates QuantizeV2,
Dequantize, Reshape, Min and Max of constants with gttc's TF-exact kernels,
so weight codes and zero points are TF's bit for bit.

QuantizedConv2D places its windows with its own offsets (C division of the
padding extent): for SAME with stride <= kernel + 1 and for VALID with
stride <= 3 that is exactly TF's usual padding (ONNX pads, the odd pixel
after); otherwise the first window starts inside the input, which this
backend reports as unsupported rather than approximating.  Padding pads with
the input's zero point, as TF does whenever 0.0 is a code.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
from onnx import TensorProto

from compiler.backends.onnx import layout
from compiler.backends.onnx.context import Lowered, LoweringContext
from compiler.backends.onnx.errors import UnsupportedOpError
from compiler.backends.onnx.registry import AGNOSTIC, CHANNELS_FIRST, lowers
from compiler.ir.attrs import attr_text
from compiler.ir.graph import Op, Value
from compiler.runtime.kernels import KernelError, get_kernel
from compiler.runtime.kernels.quantized_conversion import (
    F32, float_for_one_level, flush_denormal, multiplication_range, quantize_v2_output_range, quantized_limits,
    round_half_away, zero_point)

# Ops evaluated at export time when all their operands are known (the weight path).
_FOLDABLE = frozenset({"QuantizeV2", "Dequantize", "Reshape", "Min", "Max", "Identity"})
_PRODUCTS = frozenset({"QuantizedConv2D", "QuantizedMatMul"})
_MAX_FOLD_ELEMENTS = 1 << 24
_TWO_31 = float(2 ** 31)


@dataclass
class _Range:
    """A quint8 range as ONNX tensors: the step (scale), QuantizeLinear's zero point, and the
    zero point TF's integer kernels subtract (the same tensor unless a frozen range splits them)."""

    step: str
    quantize_zp: str
    kernel_zp: str


@dataclass
class _State:
    """What one lowering context remembers between the eight-bit ops of a graph."""

    static: dict[Value, Optional[np.ndarray]] = field(default_factory=dict)
    ranges: dict[tuple[Value, Value], _Range] = field(default_factory=dict)
    # (min, max) results of a quantized product -> the float32 step s of its accumulator.
    products: dict[tuple[Value, Value], str] = field(default_factory=dict)
    # (min, max) results of a product lowered as a float op on dequantized inputs -> its float result.
    float_products: dict[tuple[Value, Value], Lowered] = field(default_factory=dict)


_STATES: "weakref.WeakKeyDictionary[LoweringContext, _State]" = weakref.WeakKeyDictionary()


def _state(ctx: LoweringContext) -> _State:
    if ctx not in _STATES:
        _STATES[ctx] = _State()
    return _STATES[ctx]



# -- export-time evaluation ---------------------------------------------------------
def static_value(ctx: LoweringContext, value: Value) -> Optional[np.ndarray]:
    """The value when it is known at export time: a constant, or an eight-bit op of constants."""
    found = ctx.constant(value)
    if found is not None:
        return found
    cache = _state(ctx).static
    if value not in cache:
        cache[value] = _evaluate(ctx, value)
    return cache[value]


def _evaluate(ctx: LoweringContext, value: Value) -> Optional[np.ndarray]:
    op = value.op
    if op.type == "QuantizeV2" and value.index > 0 and attr_text(op.attr("mode", "MIN_COMBINED")) == "MIN_FIRST":
        return _static_quantize_range(ctx, op, value.index)
    if op.type in _PRODUCTS and value.index > 0:
        return _static_product_range(ctx, op, value.index)
    if op.type not in _FOLDABLE:
        return None
    operands = [static_value(ctx, v) for v in op.operands]
    if any(a is None or a.size > _MAX_FOLD_ELEMENTS for a in operands):
        return None
    try:
        results = get_kernel(op.type)(op.attrs, [np.asarray(a) for a in operands])
    except KernelError:
        return None
    return np.asarray(results[value.index])


def _static_quantize_range(ctx: LoweringContext, op: Op, index: int) -> Optional[np.ndarray]:
    """QuantizeV2 MIN_FIRST's output range depends on min/max only: run the kernel on no data."""
    output_range = quantize_v2_output_range(op.attrs, [static_value(ctx, v) for v in op.operands[1:3]])
    return None if output_range is None else np.asarray(output_range[index - 1], np.float32)


def _static_product_range(ctx: LoweringContext, op: Op, index: int) -> Optional[np.ndarray]:
    bounds = [static_value(ctx, v) for v in op.operands[2:6]]
    if any(b is None for b in bounds):
        return None
    lo_a, hi_a, lo_b, hi_b = (F32(np.asarray(b).reshape(-1)[0]) for b in bounds)
    return np.asarray(multiplication_range(lo_a, hi_a, lo_b, hi_b, np.uint8, np.uint8)[index - 1], np.float32)


def _scalar(array: np.ndarray) -> F32:
    return F32(np.asarray(array).reshape(-1)[0])


# -- ranges -------------------------------------------------------------------------
def _check_min_first_quint8(op: Op, type_attr: str) -> None:
    mode = attr_text(op.attr("mode", "MIN_COMBINED"))
    dtype = op.attr(type_attr)
    if mode != "MIN_FIRST" or dtype is None or dtype.to_numpy() != np.dtype(np.uint8):
        raise UnsupportedOpError(op.type, op.name, f"only MIN_FIRST quint8 is supported, not {mode} {dtype}")


def _half_away_static(value: float) -> int:
    whole = np.trunc(value)
    return int(whole + np.sign(value) * (abs(value - whole) >= 0.5))


def _static_range(ctx: LoweringContext, op: Op, lo: F32, hi: F32) -> _Range:
    """Scale and zero points of a frozen quint8 range, computed as TF does."""
    if not hi > lo:
        raise UnsupportedOpError(op.type, op.name, f"empty eight-bit range [{lo}, {hi}]")
    step = float_for_one_level(lo, hi, np.uint8)
    inverse = F32(255.0 / float(F32(hi - lo)))
    quantize_zp = -_half_away_static(float(F32(lo * inverse)))
    kernel_zp = zero_point(lo, hi, np.uint8)
    if not (0 <= quantize_zp <= 255 and 0 <= kernel_zp <= 255):
        raise UnsupportedOpError(op.type, op.name, f"range [{lo}, {hi}] does not contain 0.0")
    q = ctx.initializer(np.uint8(quantize_zp), f"{op.name}/zero_point")
    k = q if kernel_zp == quantize_zp else ctx.initializer(np.uint8(kernel_zp), f"{op.name}/kernel_zero_point")
    return _Range(ctx.initializer(np.float32(step), f"{op.name}/step"), q, k)


def _dynamic_range(ctx: LoweringContext, op: Op, lo: str, hi: str) -> _Range:
    """Scale and zero point of a run-time range, with float32 scalar ops in TF's order."""
    width = ctx.helper1(op, "range_width", "Sub", [hi, lo])
    step = ctx.helper1(op, "step", "Div", [width, _f32(ctx, 255.0)])
    inverse = ctx.helper1(op, "inverse_step", "Div", [_f32(ctx, 255.0), width])
    code_of_zero = ctx.helper1(op, "zero_point_f", "Mul", [ctx.helper1(op, "neg_min", "Neg", [lo]), inverse])
    zp = ctx.helper1(op, "zero_point", "Cast", [_round_half_up(ctx, op, code_of_zero)], to=TensorProto.UINT8)
    return _Range(step, zp, zp)


def _round_half_up(ctx: LoweringContext, op: Op, value: str) -> str:
    """Round a non-negative float half away from zero, exactly (floor(v + 0.5) is not)."""
    floor = ctx.helper1(op, "zp_floor", "Floor", [value])
    fraction = ctx.helper1(op, "zp_fraction", "Sub", [value, floor])
    up = ctx.helper1(op, "zp_round_up", "GreaterOrEqual", [fraction, _f32(ctx, 0.5)])
    return ctx.helper1(op, "zp_rounded", "Add", [floor, ctx.helper1(op, "zp_carry", "Cast", [up], to=TensorProto.FLOAT)])


def _f32(ctx: LoweringContext, value: float) -> str:
    return ctx.initializer(np.float32(value), "q_const")


def range_of(ctx: LoweringContext, op: Op, lo: Value, hi: Value) -> _Range:
    """The ONNX scale and zero points of the quint8 range (lo, hi), computed once per pair."""
    key = (lo, hi)
    ranges = _state(ctx).ranges
    if key not in ranges:
        lo_static, hi_static = static_value(ctx, lo), static_value(ctx, hi)
        if lo_static is not None and hi_static is not None:
            ranges[key] = _static_range(ctx, op, _scalar(lo_static), _scalar(hi_static))
        else:
            ranges[key] = _dynamic_range(ctx, op, _scalar_tensor(ctx, op, lo), _scalar_tensor(ctx, op, hi))
    return ranges[key]


def _scalar_tensor(ctx: LoweringContext, op: Op, value: Value) -> str:
    """A range operand as a rank-0 tensor (TF reads the first element of whatever it gets)."""
    tensor = ctx.value_in(value)
    if ctx.rank(value) == 0:
        return tensor
    flat = ctx.helper1(op, f"{value.op.name}/flat", "Reshape", [tensor, ctx.ints([-1], "flat_shape")])
    return ctx.helper1(op, f"{value.op.name}/first", "Gather", [flat, ctx.initializer(np.int64(0), "index0")], axis=0)


# -- QuantizeV2 ---------------------------------------------------------------------
@lowers("QuantizeV2", layout=AGNOSTIC)
def _quantize_v2(ctx: LoweringContext, op: Op) -> None:
    if _bind_static(ctx, op):
        return
    _check_min_first_quint8(op, "T")
    if int(op.attr("axis", -1)) != -1 or op.attr("narrow_range", False):
        raise UnsupportedOpError(op.type, op.name, "per-channel or narrow-range QuantizeV2")
    found = ctx.agnostic_operand(op)
    if all(static_value(ctx, v) is not None for v in op.results[1:]):
        for value in op.results[1:]:
            ctx.info.constants[value] = static_value(ctx, value)
    elif _measures_own_input(op):
        _dynamic_quantize(ctx, op, found)
        return
    else:
        lo, hi = _widened_range(ctx, op, found.tensor)
        ctx.bind(op.results[1], lo)
        ctx.bind(op.results[2], hi)
    params = range_of(ctx, op, op.results[1], op.results[2])
    ctx.bind(op.results[0], ctx.emit1(op, "QuantizeLinear", [found.tensor, params.step, params.quantize_zp]), found.perm)


def _bind_static(ctx: LoweringContext, op: Op) -> bool:
    """Bind every used result to an initializer when all are known at export time."""
    used = [v for v in op.results if v.uses]
    arrays = [static_value(ctx, v) for v in used]
    if any(a is None for a in arrays):
        return False
    for value, array in zip(used, arrays):
        # Recorded as a constant, so readers take it in their own layout (a depthwise filter,
        # say) as an initializer rearranged at export time, as for any folded op.
        ctx.info.constants[value] = array
    ctx.stats["folded_ops"] += 1
    return True


def _measures_own_input(op: Op) -> bool:
    """Whether min and max are Min/Max over a flattening Reshape of the quantized tensor itself
    (quantize_nodes' run-time range), which ONNX's DynamicQuantizeLinear measures the same way."""
    for bound, reduction in zip(op.operands[1:3], ("Min", "Max")):
        producer = bound.op
        if producer.type != reduction or not producer.operands:
            return False
        source = producer.operands[0].op
        if source.type != "Reshape" or source.operands[0] is not op.operands[0]:
            return False
    return True


def _dynamic_quantize(ctx: LoweringContext, op: Op, found: Lowered) -> None:
    """DynamicQuantizeLinear: the range [min(0, x), max(0, x)], scale and zero point at run time.

    TF also widens a range narrower than ensure_minimum_range * max(1, |min|, |max|)
    (1% by default) and rounds the zero point half away where ONNX rounds half to even;
    docs/QUANTIZATION.md bounds what that changes.
    """
    codes = ctx.scope.tensors.claim(ctx.prefix + op.results[0].name)
    step, zp = (ctx.scope.tensors.fresh(f"{ctx.prefix}{op.name}/{suffix}") for suffix in ("step", "zero_point"))
    ctx.builder.add_node("DynamicQuantizeLinear", [found.tensor], [codes, step, zp],
                         ctx.scope.nodes.claim(ctx.prefix + op.name))
    ctx.bind(op.results[0], codes, found.perm)
    zp_float = ctx.helper1(op, "zero_point_f", "Cast", [zp], to=TensorProto.FLOAT)
    lo = ctx.helper1(op, "range_min", "Mul", [ctx.helper1(op, "neg_zero_point", "Neg", [zp_float]), step])
    ctx.bind(op.results[1], lo)
    ctx.bind(op.results[2], ctx.helper1(op, "range_max", "Add", [lo, ctx.helper1(
        op, "range_width", "Mul", [step, _f32(ctx, 255.0)])]))
    _state(ctx).ranges[(op.results[1], op.results[2])] = _Range(step, zp, zp)
    ctx.stats["dynamic_quantize"] += 1


def _widened_range(ctx: LoweringContext, op: Op, stored_x: str) -> tuple[str, str]:
    """QuantizeV2's range at run time: [min(0, lo), max(0, hi, lo' + eps * max(1, |lo|, |hi|))]."""
    in_lo = _reduced(ctx, op, op.operands[1], "Min", stored_x)
    in_hi = _reduced(ctx, op, op.operands[2], "Max", stored_x)
    zero = _f32(ctx, 0.0)
    lo = ctx.helper1(op, "range_min", "Min", [zero, in_lo])
    magnitude = ctx.helper1(op, "magnitude", "Max", [_f32(ctx, 1.0), ctx.helper1(op, "abs_min", "Abs", [in_lo]),
                                                      ctx.helper1(op, "abs_max", "Abs", [in_hi])])
    epsilon = ctx.helper1(op, "epsilon", "Mul", [magnitude, _f32(ctx, float(op.attr("ensure_minimum_range", 0.01)))])
    floor = ctx.helper1(op, "min_plus_epsilon", "Add", [lo, epsilon])
    hi = ctx.helper1(op, "range_max", "Max", [zero, in_hi, floor])
    return lo, hi


def _reduced(ctx: LoweringContext, op: Op, bound: Value, reduction: str, stored_x: str) -> str:
    """A range operand; a Min/Max over a flattening Reshape of x reduces x as stored instead."""
    producer = bound.op
    if producer.type == reduction and producer.operands:
        source = producer.operands[0].op
        if source.type == "Reshape" and source.operands[0] is op.operands[0] and ctx.rank(source.results[0]) == 1:
            return ctx.helper1(op, f"input_{reduction.lower()}", f"Reduce{reduction}", [stored_x], keepdims=0)
    return _scalar_tensor(ctx, op, bound)


# -- products -----------------------------------------------------------------------
def _static_codes(ctx: LoweringContext, op: Op, index: int, what: str) -> np.ndarray:
    found = static_value(ctx, op.operands[index])
    if found is None:
        raise UnsupportedOpError(op.type, op.name, f"the {what} must be known at export time")
    return np.asarray(found)


def _weight_zero_point(ctx: LoweringContext, op: Op) -> str:
    lo, hi = (static_value(ctx, v) for v in op.operands[4:6])
    if lo is None or hi is None:
        raise UnsupportedOpError(op.type, op.name, "the weights' range must be known at export time")
    code = zero_point(_scalar(lo), _scalar(hi), np.uint8)
    if not 0 <= code <= 255:
        raise UnsupportedOpError(op.type, op.name, "the weights' range does not contain 0.0")
    return ctx.initializer(np.uint8(code), f"{op.name}/weight_zero_point")


def _bind_product_range(ctx: LoweringContext, op: Op, x_range: _Range) -> None:
    """The accumulator's range (QuantizationRangeForMultiplication) and its float32 step."""
    lo_value, hi_value = op.results[1], op.results[2]
    lo, hi = static_value(ctx, lo_value), static_value(ctx, hi_value)
    w_lo, w_hi = (_scalar(static_value(ctx, v)) for v in op.operands[4:6])  # type: ignore[arg-type]
    w_step = F32(float_for_one_level(w_lo, w_hi, np.uint8))
    if lo is not None and hi is not None:
        ctx.info.constants[lo_value], ctx.info.constants[hi_value] = lo, hi
        x_lo, x_hi = (_scalar(static_value(ctx, v)) for v in op.operands[2:4])  # type: ignore[arg-type]
        step = ctx.initializer(np.float32(flush_denormal(F32(float_for_one_level(x_lo, x_hi, np.uint8) * w_step))),
                               f"{op.name}/product_step")
    else:
        step = ctx.helper1(op, "product_step", "Mul", [x_range.step, ctx.initializer(np.float32(w_step), "weight_step")])
        ctx.bind(lo_value, ctx.helper1(op, "out_min", "Mul", [step, _f32(ctx, -_TWO_31)]))
        ctx.bind(hi_value, ctx.helper1(op, "out_max", "Mul", [step, _f32(ctx, _TWO_31)]))
    _state(ctx).products[(lo_value, hi_value)] = step


def _check_product_types(op: Op, names: tuple[str, str, str]) -> None:
    types = [op.attr(n) for n in names]
    wanted = (np.dtype(np.uint8), np.dtype(np.uint8), np.dtype(np.int32))
    if any(t is None or t.to_numpy() != w for t, w in zip(types, wanted)):
        raise UnsupportedOpError(op.type, op.name, f"only quint8 x quint8 -> qint32 is supported, not {types}")


def quantized_conv_pads(size: Optional[int], window: int, stride: int, padding: str) -> Optional[tuple[int, int]]:
    """(before, after) padding matching QuantizedConv2D's window placement, None when unknown or
    not expressible (TF's offset would start inside the input)."""
    if size is None:
        exact = stride <= window + 1 if padding == "SAME" else stride <= 3
        return (-1, -1) if exact else None
    out = (size - window + stride) // stride if padding == "VALID" else -(-size // stride)
    extent = (out - 1) * stride + window - size
    numerator = extent + (1 if padding == "VALID" else 0)
    before = abs(numerator) // 2 * (1 if numerator >= 0 else -1)
    if before < 0:
        return None
    return before, max(extent - before, 0)


# -- products on dequantized inputs (QDQ) ---------------------------------------------
def _qdq_applies(ctx: LoweringContext, op: Op) -> bool:
    """Frozen ranges, constant weights, and one per-tensor Dequantize reading the accumulator:
    then the product is a float op on DequantizeLinear inputs, which onnxruntime fuses."""
    if any(static_value(ctx, v) is None for v in op.operands[1:6]):
        return False
    readers = op.results[0].users
    if len(readers) != 1 or op.results[0] in ctx.keep:
        return False
    reader = readers[0]
    return (reader.type == "Dequantize" and len(reader.operands) == 3 and reader.operands[0] is op.results[0]
            and reader.operands[1] is op.results[1] and reader.operands[2] is op.results[2]
            and attr_text(reader.attr("mode", "MIN_COMBINED")) == "MIN_FIRST" and int(reader.attr("axis", -1)) == -1)


def dequantized_weight(ctx: LoweringContext, codes: np.ndarray, lo: F32, hi: F32, base: str) -> str:
    """DequantizeLinear of constant quint8 weight codes over [lo, hi].

    On the symmetric grid (zero point 128, no code 0: see symmetric_weights) the
    codes are stored as int8 with zero point 0, onnxruntime's fast U8S8 path;
    otherwise as uint8 with TF's zero point (U8U8), the same numbers on a slower path.
    """
    step = float_for_one_level(lo, hi, np.uint8)
    zp = zero_point(lo, hi, np.uint8)
    if not 0 <= zp <= 255:
        raise UnsupportedOpError("Dequantize", base, f"weight range [{lo}, {hi}] does not contain 0.0")
    if zp == 128 and (codes.size == 0 or int(codes.min()) >= 1):
        stored, zero = (codes.astype(np.int16) - 128).astype(np.int8), np.int8(0)
        ctx.stats["int8_weights"] += 1
    else:
        stored, zero = np.asarray(codes, np.uint8), np.uint8(zp)
        ctx.stats["uint8_weights"] += 1
    inputs = [ctx.initializer(np.ascontiguousarray(stored), f"{base}/codes"),
              ctx.initializer(np.float32(step), f"{base}/scale"), ctx.initializer(zero, f"{base}/zero_point")]
    return ctx.node("DequantizeLinear", inputs, f"{ctx.prefix}{base}/dequantize")[0]


def is_dequantized(ctx: LoweringContext, tensor: str) -> bool:
    """Whether `tensor` is a DequantizeLinear output: the op reading it can run in eight bits."""
    producer = ctx.builder.producer(tensor)
    return producer is not None and producer.op_type == "DequantizeLinear"


def quantized_filter(ctx: LoweringContext, value: Value) -> Optional[tuple[np.ndarray, F32, F32]]:
    """(quint8 codes, lo, hi) when `value` is a MIN_FIRST Dequantize of constant codes with a constant range."""
    op = value.op
    if op.type != "Dequantize" or len(op.operands) != 3 or attr_text(op.attr("mode", "MIN_COMBINED")) != "MIN_FIRST":
        return None
    arrays = [static_value(ctx, v) for v in op.operands]
    if any(a is None for a in arrays) or np.asarray(arrays[0]).dtype != np.uint8:
        return None
    return np.asarray(arrays[0]), _scalar(arrays[1]), _scalar(arrays[2])  # type: ignore[arg-type]


def _quantized_zero_pad(ctx: LoweringContext, op: Op) -> Optional[tuple[str, list[int]]]:
    """When the conv's input is QuantizeV2 of a zero Pad of H and W that only it reads: the input
    quantized before the Pad (channels-first) and the Pad's amounts as ONNX pads.

    Padding with 0.0 commutes with quantization (0.0 is exactly the zero point), so
    the Conv's own padding replaces a float Pad of the whole input (ResNet's stem).
    """
    quantize = op.operands[0].op
    if quantize.type != "QuantizeV2" or len(quantize.results[0].uses) != 1 or quantize.results[0] in ctx.keep:
        return None
    pad = quantize.operands[0].op
    if pad.type not in ("Pad", "PadV2") or len(pad.results[0].uses) != 1 or pad.results[0] in ctx.keep:
        return None
    amounts = ctx.constant(pad.operands[1])
    fill = ctx.constant(pad.operands[2]) if pad.type == "PadV2" else np.zeros(())
    if amounts is None or amounts.shape != (4, 2) or (amounts < 0).any() or amounts[[0, 3]].any():
        return None
    if fill is None or np.any(fill):
        return None
    params = range_of(ctx, quantize, quantize.results[1], quantize.results[2])
    source = ctx.value_in(pad.operands[0], layout.channels_first(4))
    codes = ctx.helper1(quantize, "unpadded", "QuantizeLinear", [source, params.step, params.quantize_zp])
    return codes, [int(amounts[1][0]), int(amounts[2][0]), int(amounts[1][1]), int(amounts[2][1])]


def _dequantized_input(ctx: LoweringContext, op: Op, x: str) -> str:
    x_range = range_of(ctx, op, op.operands[2], op.operands[3])
    return ctx.helper1(op, "dequantize_input", "DequantizeLinear", [x, x_range.step, x_range.kernel_zp])


def _bind_float_product(ctx: LoweringContext, op: Op, tensor: str, perm: layout.Perm) -> None:
    """The float product stands for the accumulator: its only reader, a Dequantize, takes it as is."""
    ctx.bind(op.results[0], tensor, perm, describe=False)
    for value in op.results[1:3]:
        ctx.info.constants[value] = static_value(ctx, value)
    _state(ctx).float_products[(op.results[1], op.results[2])] = Lowered(tensor, perm)
    ctx.stats["qdq_products"] += 1


def _weight_bounds(ctx: LoweringContext, op: Op) -> tuple[F32, F32]:
    return _scalar(static_value(ctx, op.operands[4])), _scalar(static_value(ctx, op.operands[5]))  # type: ignore


@lowers("QuantizedConv2D", layout=CHANNELS_FIRST)
def _quantized_conv2d(ctx: LoweringContext, op: Op) -> None:
    _check_product_types(op, ("Tinput", "Tfilter", "out_type"))
    strides = list(op.attr("strides", (1, 1, 1, 1)))
    if len(strides) != 4 or strides[0] != 1 or strides[3] != 1 or strides[1] != strides[2]:
        raise UnsupportedOpError(op.type, op.name, f"strides {strides} (TF's kernel needs [1, s, s, 1])")
    if any(d != 1 for d in op.attr("dilations", (1, 1, 1, 1))):
        raise UnsupportedOpError(op.type, op.name, "dilations other than 1")
    padding = attr_text(op.attr("padding", "VALID"))
    weights = _static_codes(ctx, op, 1, "filter")
    kh, kw = int(weights.shape[0]), int(weights.shape[1])
    dims = ctx.shape(op.operands[0]).dims or (None,) * 4
    pairs = [quantized_conv_pads(dims[axis], k, strides[1], padding) for axis, k in ((1, kh), (2, kw))]
    if any(p is None for p in pairs):
        raise UnsupportedOpError(op.type, op.name, f"{padding} windows with stride {strides[1]} start inside the "
                                 "input (TF's quantized offsets), which ONNX pads cannot express")
    pad_attrs: dict[str, object] = {"auto_pad": "SAME_UPPER"} if padding == "SAME" else {}
    if all(p != (-1, -1) for p in pairs):
        pad_attrs = {"pads": [pairs[0][0], pairs[1][0], pairs[0][1], pairs[1][1]]}  # type: ignore[index]
    nchw = layout.channels_first(4)
    attrs = {"kernel_shape": [kh, kw], "strides": [strides[1], strides[2]], **pad_attrs}
    if _qdq_applies(ctx, op):
        codes = ctx.operand(op, 0, nchw)
        padded = _quantized_zero_pad(ctx, op)
        if padded is not None and "pads" in attrs:
            codes, extra = padded
            attrs["pads"] = [p + e for p, e in zip(attrs["pads"], extra)]  # type: ignore[union-attr]
            ctx.stats["pad_into_quantized_conv"] += 1
        x = _dequantized_input(ctx, op, codes)
        w = dequantized_weight(ctx, np.ascontiguousarray(weights.transpose(3, 2, 0, 1)), *_weight_bounds(ctx, op),
                               f"{op.operands[1].name}/oihw")
        _bind_float_product(ctx, op, ctx.emit1(op, "Conv", [x, w], **attrs), nchw)
        return
    x_range = range_of(ctx, op, op.operands[2], op.operands[3])
    oihw = ctx.initializer(np.ascontiguousarray(weights.transpose(3, 2, 0, 1)), f"{op.operands[1].name}/oihw_u8")
    inputs = [ctx.operand(op, 0, nchw), oihw, x_range.kernel_zp, _weight_zero_point(ctx, op)]
    out = ctx.emit1(op, "ConvInteger", inputs, **attrs)
    ctx.bind(op.results[0], out, nchw)
    _bind_product_range(ctx, op, x_range)


@lowers("QuantizedMatMul")
def _quantized_matmul(ctx: LoweringContext, op: Op) -> None:
    _check_product_types(op, ("T1", "T2", "Toutput"))
    weights = _static_codes(ctx, op, 1, "second operand")
    if op.attr("transpose_b", False):
        weights = weights.T
    a = ctx.operand(op, 0)
    if _qdq_applies(ctx, op):
        w = dequantized_weight(ctx, np.ascontiguousarray(weights), *_weight_bounds(ctx, op), f"{op.operands[1].name}/kn")
        transpose_a = int(bool(op.attr("transpose_a", False)))
        _bind_float_product(ctx, op, ctx.emit1(op, "Gemm", [_dequantized_input(ctx, op, a), w], transA=transpose_a),
                            None)
        return
    if op.attr("transpose_a", False):
        a = ctx.helper1(op, "transpose_a", "Transpose", [a], perm=[1, 0])
    a_range = range_of(ctx, op, op.operands[2], op.operands[3])
    b = ctx.initializer(np.ascontiguousarray(weights), f"{op.operands[1].name}/u8")
    out = ctx.emit1(op, "MatMulInteger", [a, b, a_range.kernel_zp, _weight_zero_point(ctx, op)])
    ctx.bind(op.results[0], out)
    _bind_product_range(ctx, op, a_range)


# -- Dequantize ---------------------------------------------------------------------
@lowers("Dequantize", layout=AGNOSTIC)
def _dequantize(ctx: LoweringContext, op: Op) -> None:
    """Constant codes fold to a float initializer (nothing left to run); run-time codes scale."""
    if _bind_static(ctx, op):
        return
    mode, dtype = attr_text(op.attr("mode", "MIN_COMBINED")), op.attr("T")
    if mode != "MIN_FIRST" or int(op.attr("axis", -1)) != -1:
        raise UnsupportedOpError(op.type, op.name, f"only per-tensor MIN_FIRST is supported, not {mode}")
    key = (op.operands[1], op.operands[2])
    if key in _state(ctx).float_products:
        product = _state(ctx).float_products[key]
        ctx.bind(op.results[0], product.tensor, product.perm)
        return
    found = ctx.agnostic_operand(op)
    lo, hi = static_value(ctx, key[0]), static_value(ctx, key[1])
    if lo is not None and hi is not None and dtype.to_numpy() == np.dtype(np.uint8):
        out = ctx.emit1(op, "DequantizeLinear", [found.tensor, *_dequantize_params(ctx, op, _scalar(lo), _scalar(hi))])
    elif key in _state(ctx).products:
        out = _scaled(ctx, op, found.tensor, _state(ctx).products[key], None)
    elif lo is not None and hi is not None:
        scale, offset = _static_affine(_scalar(lo), _scalar(hi), dtype.to_numpy())
        out = _scaled(ctx, op, found.tensor, ctx.initializer(scale, f"{op.name}/scale"),
                      None if offset == 0 else ctx.initializer(offset, f"{op.name}/offset"))
    elif key in _state(ctx).ranges and dtype.to_numpy() == np.dtype(np.uint8):
        params = _state(ctx).ranges[key]
        out = ctx.emit1(op, "DequantizeLinear", [found.tensor, params.step, params.quantize_zp])
    else:
        raise UnsupportedOpError(op.type, op.name, "a run-time range that does not come from a QuantizeV2, "
                                 "QuantizedConv2D or QuantizedMatMul exported with it")
    ctx.bind(op.results[0], out, found.perm)


def _dequantize_params(ctx: LoweringContext, op: Op, lo: F32, hi: F32) -> tuple[str, str]:
    """(scale, zero point) of TF's Dequantize MIN_FIRST of quint8 over a frozen range.

    TF computes code * scale + round(lo / scale) * scale: DequantizeLinear's
    (code - zp) * scale with zp = -round_half_away(lo / scale), within a float32
    rounding of TF's two-step result.
    """
    scale, offset = _static_affine(lo, hi, np.dtype(np.uint8))
    zp = -int(round_half_away(np.float32(offset / scale))) if scale else 0
    if not 0 <= zp <= 255:
        raise UnsupportedOpError(op.type, op.name, f"range [{lo}, {hi}] does not contain 0.0")
    params = range_of(ctx, op, op.operands[1], op.operands[2])
    step = params.step if ctx.scope.initializers.get(params.step) == scale else ctx.initializer(scale, f"{op.name}/scale")
    same = ctx.scope.initializers.get(params.quantize_zp) == zp
    return step, params.quantize_zp if same else ctx.initializer(np.uint8(zp), f"{op.name}/zero_point")


def _static_affine(lo: F32, hi: F32, dtype: np.dtype) -> tuple[np.float32, np.float32]:
    """TF's Dequantize MIN_FIRST of a frozen range as float(code) * scale + offset, in float32 as
    DEQUANTIZE_WITH_EIGEN computes them (the offset is the rounded min less lowest * scale)."""
    lowest, highest = quantized_limits(dtype)
    scale = flush_denormal(F32(float(F32(hi - lo)) / float(highest - lowest)))
    rounded_min = lo if hi == lo else flush_denormal(F32(round_half_away(flush_denormal(F32(lo / scale))) * scale))
    offset = flush_denormal(F32(rounded_min - flush_denormal(F32(F32(lowest) * scale))))
    return np.float32(scale), np.float32(offset)


def _scaled(ctx: LoweringContext, op: Op, codes: str, scale: str, offset: Optional[str]) -> str:
    as_float = ctx.helper1(op, "as_float", "Cast", [codes], to=TensorProto.FLOAT)
    if offset is None:
        return ctx.emit1(op, "Mul", [as_float, scale])
    return ctx.emit1(op, "Add", [ctx.helper1(op, "scaled", "Mul", [as_float, scale]), offset])
