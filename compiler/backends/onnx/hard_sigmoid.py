"""Keras' hard sigmoid and hard swish as ONNX HardSigmoid and HardSwish.

TF has no op for either, so Keras spells them out (MobileNetV3, `hard_swish`,
`hard_sigmoid`): `relu6(x + 3) / 6` (or `* (1/6)`), and `x` times that (or
`x * relu6(x + 3)` over 6, as keras-cv-attention-models writes it).  Lowered
op by op that is Add, Clip, Div and Mul, four elementwise passes over the
tensor; onnxruntime fuses none of them, and on MobileNetV3Large they cost
more than a sixth of its run time.

ONNX's `HardSigmoid(z; alpha, beta) = clip(alpha * z + beta, 0, 1)`, so
`clip(z, 0, h) / h` is `HardSigmoid(z; 1/h, 0)`, and with `z = x + s` (a
constant scalar, an Add read by nothing else) `HardSigmoid(x; 1/h, s/h)`.
`HardSwish(x)` (opset 14) is `x * HardSigmoid(x; 1/6, 1/2)`.  These are
emission-time peepholes: the Mul or Div is the last op of the pattern, and
the nodes the earlier ops already emitted are left unread and pruned.  A
conv whose output only feeds `+ 3` has taken the 3 into its bias by then
(`fusion.absorb_bias`); the pattern then starts at the conv's output and
onnxruntime can fuse the HardSigmoid into the conv.

Numbers: alpha * x + beta rounds differently from (x + 3) / 6, by about one
float32 ulp of the result (measured on MobileNetV3Large: max error against
TF unchanged at 8.4e-7 relative).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from compiler.backends.onnx.context import LoweringContext
from compiler.backends.onnx.fusion import sole_reader
from compiler.ir.dtypes import DType
from compiler.ir.graph import Op, Value

HARD_SWISH_OPSET = 14
_ADDS = ("Add", "AddV2")


@dataclass(frozen=True)
class HardSigmoid:
    """`clip(alpha * source + beta, 0, 1)`, with `source` the value whose lowered tensor it reads."""

    source: Value
    alpha: float
    beta: float
    shifted: bool  # the `+ s` is part of it (alpha * x + s/h), not already in source's tensor


def lower_hard_activation(ctx: LoweringContext, op: Op) -> bool:
    """Lower `op` (a Mul, RealDiv or Div) as one HardSwish or HardSigmoid node when it ends one of
    those patterns; True when it did."""
    if ctx.dtype(op.results[0]) != DType.FLOAT or len(op.operands) != 2:
        return False
    swished, gated = _hard_swish_source(ctx, op), True
    if swished is None:
        swished, gated = _scaled_hard_swish_source(ctx, op), False
    if swished is not None:
        found = ctx.lowered(swished)
        ctx.bind(op.results[0], ctx.emit1(op, "HardSwish", [found.tensor]), found.perm)
        ctx.stats["hard_swish"] += 1
        if gated:
            ctx.stats["hard_sigmoid"] -= 1  # the gate's HardSigmoid node is now unread and pruned
        return True
    pattern = match_hard_sigmoid(ctx, op)
    if pattern is None:
        return False
    found = ctx.lowered(pattern.source)
    ctx.bind(op.results[0], ctx.emit1(op, "HardSigmoid", [found.tensor], alpha=pattern.alpha, beta=pattern.beta),
             found.perm)
    ctx.stats["hard_sigmoid"] += 1
    return True


def match_hard_sigmoid(ctx: LoweringContext, op: Op) -> Optional[HardSigmoid]:
    """`Relu6(z) * (1/6)` or `Relu6(z) / 6`, the Relu6 read by `op` alone, as a HardSigmoid."""
    split = _scaled(ctx, op)
    if split is None:
        return None
    clipped, scale = split
    relu6 = clipped.op
    if relu6.type != "Relu6" or not sole_reader(ctx, clipped, op):
        return None
    if not np.float32(scale) == np.float32(1) / np.float32(6):
        return None
    z = relu6.operands[0]
    dims = ctx.shape(z).dims
    if dims is None or ctx.shape(op.results[0]).dims != dims:  # a scale of rank > z's would broadcast
        return None
    alpha = float(np.float32(1) / np.float32(6))
    shift = _private_shift(ctx, z, relu6)
    if shift is None:
        return HardSigmoid(z, alpha, 0.0, False)
    x, s = shift
    return HardSigmoid(x, alpha, float(np.float32(s) / np.float32(6)), True)


def _scaled(ctx: LoweringContext, op: Op) -> Optional[tuple[Value, float]]:
    """(v, c) when `op` computes v * c: Mul by a constant scalar (either side), or a division by one."""
    if op.type == "Mul":
        for v, c in (op.operands, op.operands[::-1]):
            constant = _scalar(ctx, c)
            if constant is not None and not ctx.is_constant(v):
                return v, constant
        return None
    if op.type in ("RealDiv", "Div"):
        divisor = _scalar(ctx, op.operands[1])
        if divisor is not None and divisor != 0 and not ctx.is_constant(op.operands[0]):
            return op.operands[0], float(np.float32(1) / np.float32(divisor))
    return None


def _scalar(ctx: LoweringContext, value: Value) -> Optional[float]:
    array = ctx.constant(value)
    if array is None or array.size != 1 or not np.isfinite(array).all():
        return None
    return float(array.reshape(()))


def _private_shift(ctx: LoweringContext, z: Value, reader: Op) -> Optional[tuple[Value, float]]:
    """(x, s) when z = x + s for a constant scalar s, z is read by `reader` alone, and z's tensor is
    still an Add of x's tensor (not a conv that took s into its bias)."""
    add = z.op
    if add.type not in _ADDS or not sole_reader(ctx, z, reader):
        return None
    for x, s in (add.operands, add.operands[::-1]):
        shift = _scalar(ctx, s)
        if shift is None or ctx.is_constant(x) or not ctx.is_bound(x):
            continue
        if ctx.lowered(x).perm != ctx.lowered(z).perm or ctx.lowered(x).tensor == ctx.lowered(z).tensor:
            return None
        if ctx.shape(x).dims != ctx.shape(z).dims:
            return None
        return x, shift
    return None


def _hard_swish_source(ctx: LoweringContext, op: Op) -> Optional[Value]:
    """x when `op` is `x * hard_sigmoid(x)` with hard_sigmoid = relu6(x + 3) / 6, read by `op` alone."""
    if op.type != "Mul" or ctx.opset < HARD_SWISH_OPSET:
        return None
    for x, gate in (op.operands, op.operands[::-1]):
        if ctx.is_constant(gate) or not sole_reader(ctx, gate, op):
            continue
        pattern = match_hard_sigmoid(ctx, gate.op)
        if pattern is not None and pattern.shifted and pattern.source is x and pattern.beta == 0.5:
            return x
    return None


def _scaled_hard_swish_source(ctx: LoweringContext, op: Op) -> Optional[Value]:
    """x when `op` is `(x * relu6(x + 3)) / 6` (or `* (1/6)`), the product, the Relu6 and the Add
    each read by the next op alone: the spelling of keras-cv-attention-models' hard_swish."""
    if ctx.opset < HARD_SWISH_OPSET:
        return None
    split = _scaled(ctx, op)
    if split is None or not np.float32(split[1]) == np.float32(1) / np.float32(6):
        return None
    product = split[0]
    if product.op.type != "Mul" or not sole_reader(ctx, product, op):
        return None
    for x, gate in (product.op.operands, product.op.operands[::-1]):
        if gate.op.type != "Relu6" or not sole_reader(ctx, gate, product.op):
            continue
        shift = _private_shift(ctx, gate.op.operands[0], gate.op)
        if shift is not None and shift[0] is x and shift[1] == 3 and ctx.shape(op.results[0]).dims == ctx.shape(x).dims:
            return x
    return None
