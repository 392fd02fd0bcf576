"""Volumetric ops: Conv3D, Conv3DBackpropInputV2 (Keras Conv3DTranspose), MaxPool3D, AvgPool3D.

ONNX's Conv, ConvTranspose and pools take any number of spatial axes,
channels-first; an NDHWC tensor is stored as NCDHW (layout perm
(0, 4, 1, 2, 3)) and filters DHWIO become OIDHW at compile time.  TF's SAME
padding becomes explicit `pads` when sizes are known (SAME_UPPER otherwise,
which places the odd voxel after, as TF does), and AvgPool3D's divisor
counts only real voxels, ONNX's default `count_include_pad=0`.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from compiler.analysis.window import DataFormat, data_format
from compiler.backends.onnx import layout
from compiler.backends.onnx.context import LoweringContext
from compiler.backends.onnx.errors import UnsupportedOpError
from compiler.backends.onnx.fusion import fold_zero_pad
from compiler.backends.onnx.layout import Perm
from compiler.backends.onnx.ops_conv import backprop_input_spatial, onnx_pad_attrs, transposed_end, window_pads
from compiler.backends.onnx.ops_image import bind_stored, channels_first_operand
from compiler.backends.onnx.registry import lowers
from compiler.ir.graph import Op

_NDHWC = layout.channels_first(5)


def _format(op: Op) -> tuple[DataFormat, Perm]:
    fmt = data_format(op.attr("data_format"), "NDHWC")
    if fmt.name not in ("NDHWC", "NCDHW"):
        raise UnsupportedOpError(op.type, op.name, f"data_format {fmt.name}")
    return fmt, (_NDHWC if fmt.channels_last else None)


def volume_attr(op: Op, fmt: DataFormat, name: str) -> list[int]:
    """The three spatial entries of a 5-entry window attribute; TF refuses any other length,
    and strides or windows over the batch or channel axis."""
    values = op.attr(name, (1,) * 5)
    if not isinstance(values, (tuple, list)) or len(values) != 5:
        raise UnsupportedOpError(op.type, op.name, f"'{name}' must have 5 entries (it is {values!r})")
    if values[0] != 1 or values[fmt.channel_axis(5)] != 1:
        raise UnsupportedOpError(op.type, op.name, f"'{name}' {list(values)} over batch or channels")
    return fmt.spatial(values)


def _spatial(ctx: LoweringContext, op: Op, fmt: DataFormat) -> list[Optional[int]]:
    dims = ctx.shape(op.operands[0]).dims
    return [None] * 3 if dims is None or len(dims) != 5 else [dims[a] for a in fmt.spatial_axes(5)]


def _filter(ctx: LoweringContext, op: Op, index: int) -> tuple[str, list[int]]:
    """(OIDHW weight, kernel D H W) from a DHWIO filter, permuted at compile time when constant."""
    value = op.operands[index]
    array = ctx.constant(value)
    if array is not None:
        if array.ndim != 5:
            raise UnsupportedOpError(op.type, op.name, f"the filter must be 5-D, not {list(array.shape)}")
        weight = np.ascontiguousarray(array.transpose(4, 3, 0, 1, 2))
        return ctx.initializer(weight, f"{value.name}/oidhw"), [int(k) for k in array.shape[:3]]
    dims = ctx.shape(value).dims
    if dims is None or len(dims) != 5 or None in dims[:3]:
        raise UnsupportedOpError(op.type, op.name, "a run-time filter needs a known 5-D shape")
    weight = ctx.helper1(op, "filter", "Transpose", [ctx.value_in(value)], perm=[4, 3, 0, 1, 2])
    return weight, [int(k) for k in dims[:3]]  # type: ignore[arg-type]


def _check_depth(ctx: LoweringContext, op: Op, fmt: DataFormat, filter_in: Optional[int]) -> None:
    """TF's Conv3D has no grouped form: input depth must equal the filter's."""
    dims = ctx.shape(op.operands[0]).dims
    depth = None if dims is None or len(dims) != 5 else dims[fmt.channel_axis(5)]
    if depth is not None and filter_in is not None and depth != filter_in:
        raise UnsupportedOpError(op.type, op.name, f"input depth {depth} differs from the filter's {filter_in}")


@lowers("Conv3D")
def _conv3d(ctx: LoweringContext, op: Op) -> None:
    fmt, perm = _format(op)
    strides, dilations = volume_attr(op, fmt, "strides"), volume_attr(op, fmt, "dilations")
    weight, kernel = _filter(ctx, op, 1)
    filter_dims = ctx.shape(op.operands[1]).dims
    _check_depth(ctx, op, fmt, None if filter_dims is None else filter_dims[3])
    pads = window_pads(op, fmt, _spatial(ctx, op, fmt), kernel, strides, dilations)
    # A zero Pad read only here (a dilated Conv3D's padding) becomes the Conv's.
    source, pads = fold_zero_pad(ctx, op, op.operands[0], fmt.spatial_axes(5), pads, rank=5)
    x = channels_first_operand(ctx, op, 0, perm) if source is op.operands[0] else ctx.value_in(source, perm)
    out = ctx.emit1(op, "Conv", [x, weight], kernel_shape=kernel, strides=strides, dilations=dilations,
                    **onnx_pad_attrs(pads))
    bind_stored(ctx, op, out, perm)


@lowers("Conv3DBackpropInputV2")
def _conv3d_backprop_input(ctx: LoweringContext, op: Op) -> None:
    """Conv3D's input gradient is ConvTranspose: the DHWIO filter read as OIDHW is its
    (C_in, C_out, kD, kH, kW) weight; TF's forward padding becomes its pads, and what the
    forward stride left uncovered at the end becomes output_padding."""
    fmt, perm = _format(op)
    strides, dilations = volume_attr(op, fmt, "strides"), volume_attr(op, fmt, "dilations")
    spatial = backprop_input_spatial(ctx, op, fmt, 5, strides)
    weight, kernel = _filter(ctx, op, 1)
    pairs = window_pads(op, fmt, spatial, kernel, strides, dilations)
    ends = [transposed_end(size, k, s, d, *pair)
            for size, k, s, d, pair in zip(spatial, kernel, strides, dilations, pairs)]  # type: ignore[arg-type]
    dy = channels_first_operand(ctx, op, 2, perm)
    out = ctx.emit1(op, "ConvTranspose", [dy, weight], kernel_shape=kernel, strides=strides, dilations=dilations,
                    pads=[b for b, _ in pairs] + [e for e, _ in ends],  # type: ignore[union-attr]
                    output_padding=[extra for _, extra in ends])
    bind_stored(ctx, op, out, perm)


@lowers("MaxPool3D", "AvgPool3D")
def _pool3d(ctx: LoweringContext, op: Op) -> None:
    fmt, perm = _format(op)
    windows, steps = volume_attr(op, fmt, "ksize"), volume_attr(op, fmt, "strides")
    pads = window_pads(op, fmt, _spatial(ctx, op, fmt), windows, steps, [1, 1, 1])
    onnx_op = "MaxPool" if op.type == "MaxPool3D" else "AveragePool"
    x = channels_first_operand(ctx, op, 0, perm)
    out = ctx.emit1(op, onnx_op, [x], kernel_shape=windows, strides=steps, **onnx_pad_attrs(pads))
    bind_stored(ctx, op, out, perm)

