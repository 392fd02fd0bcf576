"""Keras' 1-D layers (Conv1D, SeparableConv1D, pooling 1D) as 1-D ONNX windows.

TF has no 1-D conv or pool kernel: Keras adds a unit height axis
(ExpandDims), runs the 2-D op (Conv1DTranspose: the 2-D input gradient) with a
window one pixel high, and removes the axis again (Squeeze).  Lowered op by op that is an Unsqueeze and a Squeeze
around every layer, and the BiasAdd after the Squeeze cannot reach the Conv's
bias input.  ONNX's Conv and pools take N·C·W as readily as N·C·H·W, so a
window one pixel high over such a tensor runs 1-D on the N·C·W tensor:

- operand 0 is read 3-D, channels-first, when it is an ExpandDims of the
  height axis, or the result of another window run this way (a
  SeparableConv1D's depthwise then pointwise conv);
- the result is recorded 3-D in `ctx.flat` and bound 4-D to an Unsqueeze of
  it, which pruning removes when only Squeezes and 1-D windows read it;
- a Squeeze of the height axis is the 3-D tensor itself, so the BiasAdd after
  it folds into the Conv (`fusion.absorb_bias`) and the ops between two
  layers keep N·C·W.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

from compiler.analysis.window import data_format
from compiler.backends.onnx import layout
from compiler.backends.onnx.builder import ValueSpec
from compiler.backends.onnx.context import LoweringContext
from compiler.backends.onnx.dtypes import onnx_type
from compiler.backends.onnx.fusion import single_use, zero_pad_source
from compiler.backends.onnx.ops_quantized import is_dequantized
from compiler.ir.graph import Op, Value

Pairs = list[tuple[int, int]]

HEIGHT = 1  # the NHWC axis Keras adds for a 1-D layer
NCW = layout.channels_first(3)
NCHW = layout.channels_first(4)


def flat_operand(ctx: LoweringContext, op: Op, kernel: Sequence[int], strides: Sequence[int],
                 dilations: Sequence[int], pads: Optional[Pairs], fold_pad: bool = False, operand: int = 0
                 ) -> Optional[tuple[str, Optional[Pairs]]]:
    """(the image operand of window `op` as an N·C·W tensor, the width padding) when the window is
    one pixel high over TF's added height axis; None when `op` must run 2-D.  With `fold_pad` (a
    conv, whose padding is zeros) a zero Pad of the width in front of the ExpandDims joins the padding."""
    if not data_format(op.attr("data_format")).channels_last or (kernel[0], strides[0], dilations[0]) != (1, 1, 1):
        return None
    if pads is not None and pads[0] != (0, 0):
        return None
    x = op.operands[operand]
    width = None if pads is None else [pads[1]]
    if x in ctx.flat:
        tensor = ctx.flat[x]
        return None if is_dequantized(ctx, tensor) else (tensor, width)
    source = added_height_source(ctx, x)
    if source is None:
        return None
    padded = None
    if fold_pad and width is not None and single_use(ctx, x, op):
        padded = zero_pad_source(ctx, x.op, source, (1,), rank=3)
    if padded is not None:
        source, [(before, after)] = padded
        width = [(width[0][0] + before, width[0][1] + after)]
    tensor = ctx.value_in(source, NCW)
    if is_dequantized(ctx, tensor):
        return None
    ctx.stats["pad_into_conv"] += padded is not None
    return tensor, width


def added_height_source(ctx: LoweringContext, value: Value) -> Optional[Value]:
    """The 3-D run-time value `value` is the ExpandDims of at the height axis, if it is one."""
    op = value.op
    if op.type != "ExpandDims" or len(op.operands) != 2 or ctx.rank(op.operands[0]) != 3:
        return None
    axis = ctx.constant(op.operands[1])
    if axis is None or axis.size != 1 or int(axis.reshape(())) not in (HEIGHT, HEIGHT - 4):
        return None
    return None if ctx.is_constant(op.operands[0]) else op.operands[0]


def width_only(attrs: dict[str, Any]) -> dict[str, Any]:
    """ONNX window attributes stated for height and width, with the height entries dropped
    (the padding, already width-only, is left as given)."""
    return {key: (list(value)[1:] if key in ("kernel_shape", "strides", "dilations") else value)
            for key, value in attrs.items()}


def bind_flat(ctx: LoweringContext, value: Value, tensor: str) -> None:
    """Record `tensor` (N·C·W) as 4-D `value` without its unit height, and bind `value` itself to an
    Unsqueeze of it, for readers that need the 4-D tensor (pruned when none does)."""
    ctx.flat[value] = tensor
    dims = ctx.shape(value).dims
    elem = onnx_type(ctx.dtype(value))
    if elem and tensor not in ctx.builder.value_info:
        stored = None if dims is None else (dims[0], dims[3], dims[2])
        ctx.builder.annotate(ValueSpec(tensor, elem, stored))
    height = ctx.ints([2], "height_axis")
    ctx.bind(value, ctx.node("Unsqueeze", [tensor, height], f"{ctx.prefix}{value.name}/nchw")[0], NCHW)
    ctx.stats["windows_1d"] += 1


def squeeze_flat(ctx: LoweringContext, op: Op) -> bool:
    """Bind a Squeeze of the height axis of a 1-D window's only reader to the window's N·C·W result;
    False (nothing done) otherwise.  Only reader: the tensor is then free to take a bias."""
    x = op.operands[0]
    if x not in ctx.flat or not single_use(ctx, x, op):
        return False
    if sorted(int(a) % 4 for a in op.attr("squeeze_dims", ())) != [HEIGHT]:
        return False
    ctx.bind(op.results[0], ctx.flat[x], NCW)
    return True
