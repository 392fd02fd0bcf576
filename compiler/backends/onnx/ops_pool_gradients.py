"""The gradients of MaxPool and AvgPool, as a saliency map's GradientTape leaves them.

MaxPoolGrad sends each window's gradient to where the window's maximum was:
ONNX MaxPool names that position in its Indices output (row-major over the
channels-first input, padding not counted), and ScatterElements adds the
gradients there, so overlapping windows sum as in TF.  AvgPoolGrad spreads
each gradient evenly over the input elements its window averaged: a
ConvTranspose of the gradient, divided by each window's count, with a
filter of ones per channel.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
from onnx import numpy_helper

from compiler.backends.onnx import layout
from compiler.backends.onnx.context import LoweringContext
from compiler.backends.onnx.errors import UnsupportedOpError
from compiler.backends.onnx.ops_conv import emit_transposed, onnx_pad_attrs, pool_window, spatial_dims, window_format
from compiler.backends.onnx.registry import CHANNELS_FIRST, lowers
from compiler.ir.graph import Op
from compiler.runtime.kernels.nn import valid_taps

# ScatterElements adds duplicates (reduction="add") from opset 16.
_SCATTER_ADD_OPSET = 16


@lowers("MaxPoolGrad", layout=CHANNELS_FIRST)
def _max_pool_grad(ctx: LoweringContext, op: Op) -> None:
    if ctx.opset < _SCATTER_ADD_OPSET:
        raise UnsupportedOpError(op.type, op.name, f"needs ONNX opset {_SCATTER_ADD_OPSET} or newer "
                                                   f"(ScatterElements with reduction='add'); this export is {ctx.opset}")
    fmt, perm = window_format(op)
    x = ctx.value_in(op.operands[0], perm)
    windows, steps, pads = pool_window(op, fmt, spatial_dims(ctx, op.operands[0], fmt))
    _, where = ctx.helper(op, "argmax", "MaxPool", [x], 2, kernel_shape=windows, strides=steps,
                          **onnx_pad_attrs(pads))
    shape, size = _shape_and_size(ctx, op, x, ctx.shape(op.operands[0]).dims, perm)
    flat = ctx.ints([-1], f"{op.name}/flat")
    zeros = ctx.helper1(op, "zeros", "ConstantOfShape", [size],
                        value=numpy_helper.from_array(np.zeros(1, ctx.dtype(op.results[0]).to_numpy())))
    updates = ctx.helper1(op, "updates", "Reshape", [ctx.value_in(op.operands[2], perm), flat])
    positions = ctx.helper1(op, "positions", "Reshape", [where, flat])
    summed = ctx.helper1(op, "summed", "ScatterElements", [zeros, positions, updates], axis=0, reduction="add")
    ctx.bind(op.results[0], ctx.emit1(op, "Reshape", [summed, shape]), perm)


def _shape_and_size(ctx: LoweringContext, op: Op, x: str, dims: Optional[Sequence[Optional[int]]],
                    perm: Optional[layout.Perm]) -> tuple[str, str]:
    """x's stored shape and its element count as a [1] vector: constants when the shape is static."""
    if dims is not None and None not in dims:
        stored = [int(d) for d in layout.physical_dims(dims, perm)]  # type: ignore[arg-type]
        return ctx.ints(stored, f"{op.name}/shape"), ctx.ints([int(np.prod(stored))], f"{op.name}/size")
    shape = ctx.helper1(op, "shape", "Shape", [x])
    return shape, ctx.helper1(op, "size", "ReduceProd", [shape], keepdims=1)


@lowers("AvgPoolGrad", layout=CHANNELS_FIRST)
def _avg_pool_grad(ctx: LoweringContext, op: Op) -> None:
    fmt, perm = window_format(op)
    sizes = [int(s) for s in ctx.const_operand(op, 0, "orig_input_shape").reshape(-1)]
    if len(sizes) != 4:
        raise UnsupportedOpError(op.type, op.name, f"orig_input_shape {sizes} must have 4 entries")
    spatial = [sizes[a] for a in fmt.spatial_axes(4)]
    channels = sizes[fmt.channel_axis(4)]
    windows, steps, pads = pool_window(op, fmt, spatial)
    # how many input elements (padding not counted) each output's window averaged, as the kernel counts them
    counts = valid_taps(tuple(spatial), tuple(windows), tuple(steps), pads).sum(axis=(-2, -1))[0, :, :, 0]  # type: ignore
    dtype = ctx.dtype(op.results[0]).to_numpy()
    dy = ctx.value_in(op.operands[1], perm)
    if np.all(counts == counts.flat[0]):
        ones = np.full([channels, 1, *windows], 1.0 / counts.flat[0], dtype)
    else:
        ones = np.ones([channels, 1, *windows], dtype)
        dy = ctx.helper1(op, "averaged", "Div", [dy, ctx.initializer(counts.astype(dtype), f"{op.name}/counts")])
    weight = ctx.initializer(ones, f"{op.name}/spread")
    out = emit_transposed(ctx, op, fmt, dy, weight, spatial, windows, steps, [1, 1], channels)
    ctx.bind(op.results[0], out, perm)
