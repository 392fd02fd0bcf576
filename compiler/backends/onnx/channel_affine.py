"""A per-channel scale and shift as one ONNX BatchNormalization.

A batch norm that -O2 cannot fold into a convolution (it follows a Concat or a
pooling: every DenseNet block, ResNetV2's pre-activations) is left as
`x * s + b` with per-channel constants, lowered op by op as Mul and Add.
onnxruntime runs those as two passes over the tensor, each leaving its blocked
NCHWc layout (DenseNet121: 62 Mul/Add pairs, 63 reorders).  Written as
`BatchNormalization(x, scale=s, B=b, mean=0, var=1, epsilon=0)`, the same
function (`(x - 0) / sqrt(1 + 0) * s + b`), onnxruntime turns it into a 1x1
depthwise convolution in its blocked layout and fuses the Relu that usually
follows: DenseNet121's latency fell to 0.86x in the prototype.

The Add is the last op of the pattern; the Mul's node, already emitted, is left
unread and pruned.  Only for float32 x of rank 3 to 5 whose channel axis is
stored second (the channels-first layout convolutions use), or of rank 2 in TF
order, with s and b constant vectors over that axis (any leading 1s), and x
not straight out of a Conv or Gemm (onnxruntime folds a Mul and Add there
into the weights already, as at -O0).
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from compiler.backends.onnx import layout
from compiler.backends.onnx.context import LoweringContext
from compiler.backends.onnx.fusion import sole_reader
from compiler.backends.onnx.ops_quantized import is_dequantized
from compiler.ir.dtypes import DType
from compiler.ir.graph import Op, Value

_MULS = ("Mul",)
_LINEAR = ("Conv", "ConvTranspose", "Gemm", "MatMul")
_ADDS = ("Add", "AddV2")


def lower_channel_affine(ctx: LoweringContext, add: Op) -> bool:
    """Lower the Add `add` of `x * s` and `b` as one BatchNormalization when both are per-channel
    constants; True when it did."""
    found = _match(ctx, add)
    if found is None:
        return False
    x, scale, shift = found
    stored = ctx.lowered(x)
    vectors = [ctx.initializer(v.astype(np.float32), f"{add.name}/{what}") for what, v in
               (("scale", scale), ("shift", shift), ("mean", np.zeros_like(scale)), ("var", np.ones_like(scale)))]
    out = ctx.emit1(add, "BatchNormalization", [stored.tensor] + vectors, epsilon=0.0)
    ctx.bind(add.results[0], out, stored.perm)
    ctx.stats["channel_affine_as_batch_norm"] += 1
    return True


def _match(ctx: LoweringContext, add: Op) -> Optional[tuple[Value, np.ndarray, np.ndarray]]:
    if add.type not in _ADDS or len(add.operands) != 2 or ctx.dtype(add.results[0]) != DType.FLOAT:
        return None
    for product, addend in (add.operands, add.operands[::-1]):
        mul = product.op
        if mul.type not in _MULS or len(mul.operands) != 2 or not sole_reader(ctx, product, add) or mul.control_deps:
            continue
        for x, factor in (mul.operands, mul.operands[::-1]):
            found = _per_channel(ctx, x, factor, addend, add)
            if found is not None:
                return x, found[0], found[1]
    return None


def _per_channel(ctx: LoweringContext, x: Value, factor: Value, addend: Value,
                 add: Op) -> Optional[tuple[np.ndarray, np.ndarray]]:
    """(s, b) as [C] vectors when x's channel axis is stored second and both broadcast along it."""
    if ctx.is_constant(x) or not ctx.is_bound(x) or _after_linear_node(ctx, x):
        return None
    dims = ctx.shape(x).dims
    if dims is None or None in dims[1:] or ctx.shape(add.results[0]).dims != dims or not _channel_second(ctx, x):
        return None
    channels = dims[-1]
    scale, shift = (_vector(ctx.constant(v), channels, len(dims)) for v in (factor, addend))
    if scale is None or shift is None:
        return None
    return scale, shift


def _after_linear_node(ctx: LoweringContext, x: Value) -> bool:
    """x comes straight from a Conv or Gemm, whose weights onnxruntime folds a Mul and Add into
    itself (and its quantizer expects them there): nothing to gain.  Or from a DequantizeLinear:
    an eight-bit graph's groups stay as they were lowered."""
    tensor = ctx.lowered(x).tensor
    producer = ctx.builder.producer(tensor)
    return (producer is not None and producer.op_type in _LINEAR) or is_dequantized(ctx, tensor)


def _channel_second(ctx: LoweringContext, x: Value) -> bool:
    """x's last (TF channel) axis is stored at position 1: channels-first, or TF order at rank 2."""
    rank, perm = ctx.rank(x), ctx.lowered(x).perm
    if rank == 2:
        return perm is None
    return rank is not None and 3 <= rank <= 5 and perm is not None and layout.physical_axis(-1, perm, rank) == 1


def _vector(array: Optional[np.ndarray], channels: int, rank: int) -> Optional[np.ndarray]:
    """`array` as a [channels] vector when it broadcasts along the last axis only."""
    if array is None or array.dtype != np.float32 or array.ndim > rank or array.size != channels:
        return None
    if array.ndim == 0 or array.shape[-1] != channels or not np.isfinite(array).all():
        return None
    return array.reshape(channels)
