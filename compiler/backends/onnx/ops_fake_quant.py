"""FakeQuantWithMinMaxArgs / Vars / VarsPerChannel as QuantizeLinear -> DequantizeLinear.

TF nudges [min, max] so that real zero is a code (runtime/kernels/fake_quant.py);
with eight bits the nudged grid is uint8 codes with scale `s` and zero point
`zp`, and TF's result (steps - zp) * s is DequantizeLinear's formula exactly.
The range is nudged here at export time, so it must be constant.
QuantizeLinear saturates to [0, 255]; narrow_range's grid starts at code 1,
so a Clip to the nudged range comes first.  QuantizeLinear rounds x / s half
to even where TF rounds (x - min) / s half up: a code can differ by one step,
only where x / s lies within a few float32 ulps of a half-integer (the same
bound the QuantizeV2 lowering has, ops_quantized.py).  The per-channel op
(Keras QAT's weights, usually folded to constants before export) quantizes
along the last axis with vector scales and zero points; its narrow_range
clamp is a Max and a Min, since Clip takes scalar bounds only.

onnxruntime with its graph optimizations on runs DequantizeLinear -> Conv ->
QuantizeLinear as integer kernels (QLinearConv), whose requantization can put
an output one step from TF's float simulation: on a Keras QAT CNN, 3 of 10
logits one step off (tf2onnx's model the same); with optimizations off the
model equals TF exactly.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
from onnx import numpy_helper

from compiler.backends.onnx.context import LoweringContext
from compiler.backends.onnx.errors import UnsupportedOpError
from compiler.backends.onnx.ops_image import bind_stored
from compiler.backends.onnx.registry import AGNOSTIC, lowers
from compiler.ir.graph import Op
from compiler.runtime.kernels.fake_quant import NudgedRange, empty_channels, empty_range, nudge, per_channel_grid


def _bounds(ctx: LoweringContext, op: Op) -> tuple[float, float]:
    if op.type == "FakeQuantWithMinMaxArgs":
        return float(op.attr("min", -6.0)), float(op.attr("max", 6.0))
    found = [ctx.constant(v) for v in op.operands[1:3]]
    if any(a is None or a.size != 1 for a in found):
        raise UnsupportedOpError(op.type, op.name, "min and max must be constant scalars to fix the ONNX scale")
    return tuple(float(np.asarray(a).reshape(())) for a in found)  # type: ignore[return-value]


def _eight_bit_flags(op: Op) -> tuple[int, bool]:
    """(num_bits, narrow_range), refusing any width but eight."""
    bits, narrow = int(op.attr("num_bits", 8)), bool(op.attr("narrow_range", False))
    if bits != 8:
        raise UnsupportedOpError(op.type, op.name, f"num_bits {bits}: only 8-bit grids are uint8 QuantizeLinear")
    return bits, narrow


def _grid(ctx: LoweringContext, op: Op) -> Optional[NudgedRange]:
    """The nudged grid; None for a Vars op's empty range [0, 0], which quantizes to zeros."""
    bits, narrow = _eight_bit_flags(op)
    lo, hi = _bounds(ctx, op)
    if op.type == "FakeQuantWithMinMaxVars" and empty_range(lo, hi):
        return None
    if not lo < hi:
        raise UnsupportedOpError(op.type, op.name, f"min {lo} must be smaller than max {hi}")
    return nudge(lo, hi, bits, narrow)


@lowers("FakeQuantWithMinMaxArgs", "FakeQuantWithMinMaxVars", layout=AGNOSTIC)
def _fake_quant(ctx: LoweringContext, op: Op) -> None:
    grid = _grid(ctx, op)
    found = ctx.agnostic_operand(op)
    x = found.tensor
    if grid is None:  # zeros of x's shape, inf and NaN included: no arithmetic on x
        shape = ctx.helper1(op, "shape", "Shape", [x])
        zero = numpy_helper.from_array(np.zeros(1, np.float32))
        bind_stored(ctx, op, ctx.emit1(op, "ConstantOfShape", [shape], value=zero), found.perm)
        return
    if grid.quant_min:
        bounds = [ctx.initializer(np.float32(b), f"{op.name}/{n}") for b, n in ((grid.min, "min"), (grid.max, "max"))]
        x = ctx.helper1(op, "clip", "Clip", [x] + bounds)
    scale = ctx.initializer(np.float32(grid.scale), f"{op.name}/scale")
    zero_point = ctx.initializer(np.uint8(grid.zero_point), f"{op.name}/zero_point")
    codes = ctx.helper1(op, "codes", "QuantizeLinear", [x, scale, zero_point])
    bind_stored(ctx, op, ctx.emit1(op, "DequantizeLinear", [codes, scale, zero_point]), found.perm)


@lowers("FakeQuantWithMinMaxVarsPerChannel")
def _fake_quant_per_channel(ctx: LoweringContext, op: Op) -> None:
    """Per-axis QuantizeLinear/DequantizeLinear on the last axis, in TF's layout."""
    bits, narrow = _eight_bit_flags(op)
    lo, hi = (ctx.constant(v) for v in op.operands[1:3])
    rank = ctx.rank(op.operands[0])
    if lo is None or hi is None or lo.ndim != 1 or lo.shape != hi.shape or not rank:
        raise UnsupportedOpError(op.type, op.name, "min and max must be constant vectors and the input's rank "
                                                   "known to fix the ONNX scales")
    empty = empty_channels(lo, hi)
    if not ((lo < hi) | empty).all():
        raise UnsupportedOpError(op.type, op.name, "every min must be smaller than its max")
    if ctx.opset < 13:
        raise UnsupportedOpError(op.type, op.name, f"opset {ctx.opset}: per-axis QuantizeLinear needs opset 13")
    grid = per_channel_grid(np.asarray(lo, np.float32), np.asarray(hi, np.float32), bits, narrow)
    x = ctx.operand(op, 0)
    if grid.quant_min:
        x = ctx.helper1(op, "above_min", "Max", [x, ctx.initializer(grid.min, f"{op.name}/min")])
        x = ctx.helper1(op, "below_max", "Min", [x, ctx.initializer(grid.max, f"{op.name}/max")])
    scale = ctx.initializer(grid.scale, f"{op.name}/scale")
    zero_point = ctx.initializer(grid.zero_point.astype(np.uint8), f"{op.name}/zero_point")
    codes = ctx.helper1(op, "codes", "QuantizeLinear", [x, scale, zero_point], axis=rank - 1)
    if not empty.any():
        ctx.bind(op.results[0], ctx.emit1(op, "DequantizeLinear", [codes, scale, zero_point], axis=rank - 1))
        return
    values = ctx.helper1(op, "values", "DequantizeLinear", [codes, scale, zero_point], axis=rank - 1)
    kept = ctx.initializer((~empty).astype(np.float32), f"{op.name}/kept_channels")  # the grid's codes are finite
    ctx.bind(op.results[0], ctx.emit1(op, "Mul", [values, kept]))
