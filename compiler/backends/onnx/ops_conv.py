"""Windowed ops: convolutions (plain, depthwise, transposed, GTT's fused pad/resize variants) and pools.

All run channels-first.  Filters are rearranged at compile time (HWIO ->
OIHW; depthwise HW·C·M -> (C·M)·1·HW with group=C), TF's SAME padding
becomes explicit `pads` when the input size is known, and a zero Pad
feeding a Conv is folded into the Conv's pads.  A Keras 1-D layer's window,
one pixel high, runs 2-D like any other (see height_squeezes.py for why).
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from compiler.analysis.window import DataFormat, data_format, explicit_pairs, same_pads
from compiler.backends.onnx import layout
from compiler.backends.onnx.context import LoweringContext
from compiler.backends.onnx.errors import UnsupportedOpError
from compiler.backends.onnx.fusion import fold_zero_pad
from compiler.backends.onnx.layout import Perm
from compiler.backends.onnx.ops_array import emit_pad, stored_pairs
from compiler.backends.onnx.ops_image import emit_resize
from compiler.backends.onnx.ops_quantized import dequantized_weight, is_dequantized, quantized_filter
from compiler.backends.onnx.registry import CHANNELS_FIRST, lowers
from compiler.backends.onnx.shape_terms import Element, Term, terms
from compiler.ir.attrs import attr_text
from compiler.ir.graph import Op, Value

Pairs = list[tuple[int, int]]



def window_format(op: Op) -> tuple[DataFormat, Perm]:
    """A 2-D windowed op's data_format and the layout it computes in (NHWC runs channels-first)."""
    fmt = data_format(op.attr("data_format"))
    if fmt.name not in ("NHWC", "NCHW"):
        raise UnsupportedOpError(op.type, op.name, f"data_format {fmt.name}")
    return fmt, (layout.channels_first(4) if fmt.channels_last else None)


def spatial_dims(ctx: LoweringContext, value: Value, fmt: DataFormat) -> list[Optional[int]]:
    """A 4-D value's two spatial sizes under `fmt`, None where unknown."""
    dims = ctx.shape(value).dims
    return [None, None] if dims is None else [dims[a] for a in fmt.spatial_axes(4)]


def window_pads(op: Op, fmt: DataFormat, spatial: Sequence[Optional[int]], windows: Sequence[int],
                strides: Sequence[int], dilations: Sequence[int]) -> Optional[Pairs]:
    """Explicit (before, after) per spatial axis; None for SAME on an input of unknown size."""
    padding = attr_text(op.attr("padding", "VALID"))
    if padding == "VALID":
        return [(0, 0)] * len(windows)
    if padding == "EXPLICIT":
        return explicit_pairs(op.attr("explicit_paddings", ()), fmt, 4)
    if any(s is None for s in spatial):
        return None
    return [same_pads(s, k, st, d) for s, k, st, d in zip(spatial, windows, strides, dilations)]  # type: ignore


def onnx_pad_attrs(pairs: Optional[Pairs]) -> dict[str, object]:
    if pairs is None:
        return {"auto_pad": "SAME_UPPER"}
    return {"pads": [b for b, _ in pairs] + [a for _, a in pairs]}


# -- filters -----------------------------------------------------------------------
def _onnx_filter(array: np.ndarray, depthwise: bool) -> np.ndarray:
    """HWIO -> OIHW; depthwise HW·C·M -> (C·M)·1·HW."""
    kh, kw, c, m = array.shape
    if depthwise:
        array = array.transpose(2, 3, 0, 1).reshape(c * m, 1, kh, kw)
    else:
        array = array.transpose(3, 2, 0, 1)
    return np.ascontiguousarray(array)


def conv_filter(ctx: LoweringContext, op: Op, index: int, depthwise: bool, eight_bit: bool = False
                ) -> tuple[str, list[int], int]:
    """(ONNX weight tensor, kernel H W, depthwise channel count or 0) for TF filter operand `index`.

    With `eight_bit` (the input is a DequantizeLinear), a filter that TF dequantizes
    from constant codes stays a DequantizeLinear of those codes, so onnxruntime
    runs the convolution in eight bits.
    """
    value = op.operands[index]
    suffix = "dw" if depthwise else "oihw"
    stored = quantized_filter(ctx, value) if eight_bit else None
    if stored is not None:
        codes, lo, hi = stored
        kh, kw, c, _ = codes.shape
        weight = dequantized_weight(ctx, _onnx_filter(codes, depthwise), lo, hi, f"{value.name}/{suffix}")
        return weight, [kh, kw], c if depthwise else 0
    array = ctx.constant(value)
    if array is not None:
        kh, kw, c, _ = array.shape
        return ctx.initializer(_onnx_filter(array, depthwise), f"{value.name}/{suffix}"), [kh, kw], \
            c if depthwise else 0
    dims = ctx.shape(value).dims
    if dims is None or None in dims:
        raise UnsupportedOpError(op.type, op.name, "a run-time filter needs a known shape")
    kh, kw, c, m = dims  # type: ignore[misc]
    weight = ctx.helper1(op, "filter", "Transpose", [ctx.value_in(value)], perm=[3, 2, 0, 1] if not depthwise else [2, 3, 0, 1])
    if depthwise:
        weight = ctx.helper1(op, "filter_dw", "Reshape", [weight, ctx.ints([c * m, 1, kh, kw], f"{op.name}/dw_shape")])
    return weight, [kh, kw], c if depthwise else 0


def _group(ctx: LoweringContext, op: Op, x: Value, fmt: DataFormat, filter_dims: Optional[Sequence[Optional[int]]]
           ) -> int:
    """TF runs Conv2D grouped when the input has a multiple of the filter's input channels
    (Keras' `Conv2D(groups=...)`); ONNX says the same with Conv's `group`."""
    dims = ctx.shape(x).dims
    channels = None if dims is None else dims[fmt.channel_axis(4)]
    filter_in, filter_out = (None, None) if filter_dims is None else (filter_dims[2], filter_dims[3])
    if channels is None or not filter_in or channels == filter_in:
        return 1
    groups = channels // filter_in
    if channels % filter_in or (filter_out is not None and filter_out % groups):
        raise UnsupportedOpError(op.type, op.name, f"input depth {channels} does not fit the filter's "
                                                   f"{filter_in} input and {filter_out} output channels")
    return groups


def window_attr(op: Op, fmt: DataFormat, name: str, values: Optional[Sequence[int]] = None) -> list[int]:
    """The two spatial entries of a 2-D window attribute (strides, dilations, ksize), which TF
    states once per axis of the 4-D input; any other length is refused, as TF's kernels refuse it."""
    values = op.attr(name, (1, 1, 1, 1)) if values is None else values
    if not isinstance(values, (tuple, list)) or len(values) != 4:
        raise UnsupportedOpError(op.type, op.name, f"'{name}' must have 4 entries, one per axis of the input "
                                                   f"(it is {values!r})")
    return fmt.spatial(values)


# -- convolutions ------------------------------------------------------------------
def emit_conv(ctx: LoweringContext, op: Op, x: str, filter_index: int, depthwise: bool, fmt: DataFormat,
              pads: Optional[Pairs], group: int = 1) -> str:
    """The Conv node itself, with `x` already channels-first and padding settled."""
    weight, kernel, channels = conv_filter(ctx, op, filter_index, depthwise, is_dequantized(ctx, x))
    attrs = {"kernel_shape": kernel, "strides": window_attr(op, fmt, "strides"),
             "dilations": window_attr(op, fmt, "dilations"), "group": channels or group}
    attrs.update(onnx_pad_attrs(pads))
    return ctx.emit1(op, "Conv", [x, weight], **attrs)


def _kernel_hw(ctx: LoweringContext, op: Op, index: int) -> list[int]:
    dims = ctx.shape(op.operands[index]).dims
    return [1, 1] if dims is None or None in dims[:2] else [int(dims[0]), int(dims[1])]  # type: ignore[arg-type]


@lowers("Conv2D", "DepthwiseConv2dNative", layout=CHANNELS_FIRST)
def _conv2d(ctx: LoweringContext, op: Op) -> None:
    fmt, perm = window_format(op)
    depthwise = op.type == "DepthwiseConv2dNative"
    x = op.operands[0]
    kernel = _kernel_hw(ctx, op, 1)
    strides = window_attr(op, fmt, "strides")
    dilations = window_attr(op, fmt, "dilations")
    pads = window_pads(op, fmt, spatial_dims(ctx, x, fmt), kernel, strides, dilations)
    group = 1 if depthwise else _group(ctx, op, x, fmt, ctx.shape(op.operands[1]).dims)
    x, pads = fold_zero_pad(ctx, op, x, fmt.spatial_axes(4), pads)
    out = emit_conv(ctx, op, ctx.value_in(x, perm), 1, depthwise, fmt, pads, group)
    ctx.bind(op.results[0], out, perm)


def fused_conv_pads(op: Op, padded: Sequence[Optional[int]], kernel: Sequence[int], strides: Sequence[int]
                    ) -> Optional[Pairs]:
    """Padding as TF's fused pad/resize conv kernel places its patches (C division), when sizes are known."""
    padding = attr_text(op.attr("padding", "VALID"))
    pairs = []
    for size, k, s in zip(padded, kernel, strides):
        if size is None:
            return None
        out = -(-size // s) if padding == "SAME" else -(-(size - k + 1) // s)
        before = int(((out - 1) * s + k - size + (1 if padding == "VALID" else 0)) / 2)
        after = (out - 1) * s + k - size - before
        if before < 0:
            return None
        pairs.append((before, max(after, 0)))
    return pairs


def _mirror_then_conv(ctx: LoweringContext, op: Op, x: str, spatial: Sequence[Optional[int]],
                      paddings_index: int, filter_index: int) -> str:
    """MirrorPad then Conv, the tail shared by FusedPadConv2D and FusedResizeAndPadConv2D."""
    paddings = ctx.const_operand(op, paddings_index, "the paddings")
    pairs = stored_pairs(paddings, layout.channels_first(4))
    padded = emit_pad(ctx, op, x, pairs, attr_text(op.attr("mode")).lower(), suffix="mirror_pad",
                      dims=(None, None, *spatial))
    grown = [None if s is None else s + b + a for s, (b, a) in zip(spatial, pairs[2:])]
    strides = window_attr(op, DataFormat("NHWC"), "strides")
    pads = fused_conv_pads(op, grown, _kernel_hw(ctx, op, filter_index), strides)
    if pads is None:
        raise UnsupportedOpError(op.type, op.name, "needs known spatial sizes and non-negative patch offsets")
    return emit_conv(ctx, op, padded, filter_index, False, DataFormat("NHWC"), pads)


@lowers("FusedPadConv2D", layout=CHANNELS_FIRST)
def _fused_pad_conv(ctx: LoweringContext, op: Op) -> None:
    nchw = layout.channels_first(4)
    spatial = spatial_dims(ctx, op.operands[0], DataFormat("NHWC"))
    out = _mirror_then_conv(ctx, op, ctx.operand(op, 0, nchw), spatial, 1, 2)
    ctx.bind(op.results[0], out, nchw)


@lowers("FusedResizeAndPadConv2D", layout=CHANNELS_FIRST)
def _fused_resize_pad_conv(ctx: LoweringContext, op: Op) -> None:
    """GTT's fused kernel resizes bilinearly without half-pixel centres."""
    nchw = layout.channels_first(4)
    size = [int(s) for s in ctx.const_operand(op, 1, "the resize size").reshape(-1)]
    dims = ctx.shape(op.operands[0]).dims or (None,) * 4
    resized = emit_resize(ctx, op, ctx.operand(op, 0, nchw), layout.physical_dims(dims, nchw), size, "linear",
                          bool(op.attr("resize_align_corners", False)), False, suffix="resize")
    ctx.bind(op.results[0], _mirror_then_conv(ctx, op, resized, size, 2, 3), nchw)


# -- transposed convolutions ---------------------------------------------------------
# An out_backprop size standing in for one known only at run time (see `backprop_input_spatial`).
_STAND_IN = 64


def backprop_input_spatial(ctx: LoweringContext, op: Op, fmt: DataFormat, rank: int, strides: Sequence[int]
                           ) -> list[int]:
    """The spatial sizes of the input whose gradient is computed: from input_sizes (`rank` entries,
    or for 2-D just the 2 spatial ones) or, for Conv2DBackpropInputV2, from the input tensor's
    shape.  The batch and channels may be known only at run time (input_sizes computed with
    Shape around a dynamic batch).  So may a spatial size that is stride * (out_backprop's size
    along that axis) + a constant, as Keras computes it from Shape for unknown heights and widths:
    TF's padding then does not depend on that size, and a stand-in size gives the pads."""
    found: Optional[list[Element]] = None  # input_sizes read as terms, once needed
    if op.type == "Conv2DBackpropInputV2":
        dims = ctx.shape(op.operands[0]).dims
        sizes = None if dims is None else list(dims)
    else:
        sizes = ctx.info.known_ints(op.operands[0])
        if sizes is None:
            found = terms(ctx, op.operands[0])
            if found is None:
                raise UnsupportedOpError(op.type, op.name, "input_sizes must be a constant, or computed from the "
                                                           "gradient's shape (stride times its size plus a constant)")
            sizes = [e if isinstance(e, int) else None for e in found]
    axes = fmt.spatial_axes(rank)
    if sizes is not None and len(sizes) == rank:
        picked = list(axes)
    elif sizes is None or rank != 4 or len(sizes) != 2:
        raise UnsupportedOpError(op.type, op.name, f"input_sizes {sizes} must have {rank} entries")
    else:
        picked = [0, 1]
    spatial = [sizes[i] for i in picked]
    if None in spatial:
        if found is None and op.type != "Conv2DBackpropInputV2":
            found = terms(ctx, op.operands[0])
        spatial = [size if size is not None else _stand_in(found, op.operands[2], i, axis, stride)
                   for size, i, axis, stride in zip(spatial, picked, axes, strides)]
        if None in spatial:
            raise UnsupportedOpError(op.type, op.name, "the input's spatial sizes must be static, or stride times "
                                                       "the gradient's size plus a constant")
    return [int(s) for s in spatial]  # type: ignore[arg-type]


def _stand_in(found: Optional[list[Element]], dy: Value, index: int, axis: int, stride: int) -> Optional[int]:
    """The input size for a stand-in gradient size, when input_sizes[index] is stride times dy's
    size along `axis` plus a constant."""
    term = None if found is None or index >= len(found) else found[index]
    if not isinstance(term, Term) or not term.size or term.value is not dy:
        return None
    if term.axis != axis or term.factor != stride:
        return None
    size = stride * _STAND_IN + term.offset
    return size if size > 0 else None


def transposed_end(size: int, window: int, stride: int, dilation: int, before: int, after: int) -> tuple[int, int]:
    """(end pad, output_padding) making ConvTranspose's output `size` long: the forward conv's
    padding, less (or, past it, plus zero rows for) what its stride left uncovered."""
    effective = (window - 1) * dilation + 1
    covered = ((size + before + after - effective) // stride) * stride + effective
    end = covered - before - size
    return (end, 0) if end >= 0 else (0, -end)


@lowers("Conv2DBackpropInput", "Conv2DBackpropInputV2", "DepthwiseConv2dNativeBackpropInput")
def _conv2d_backprop_input(ctx: LoweringContext, op: Op) -> None:
    """Conv2D's input gradient is ONNX ConvTranspose, channels-first: the HWIO filter read as OIHW
    is ConvTranspose's (C_in, C_out, kH, kW) weight, TF's forward padding becomes its pads.  A
    depthwise conv's is the same with group=C: its (C·M)·1·HW filter maps each channel's M
    gradients back to that channel."""
    fmt, perm = window_format(op)
    strides = window_attr(op, fmt, "strides")
    spatial = backprop_input_spatial(ctx, op, fmt, 4, strides)
    filter_dims = ctx.shape(op.operands[1]).dims
    if filter_dims is None or None in filter_dims:
        raise UnsupportedOpError(op.type, op.name, "the filter shape must be static")
    weight, kernel, channels = conv_filter(ctx, op, 1, op.type == "DepthwiseConv2dNativeBackpropInput")
    out = emit_transposed(ctx, op, fmt, ctx.operand(op, 2, perm), weight, spatial, kernel, strides,
                          window_attr(op, fmt, "dilations"), channels or 1)
    ctx.bind(op.results[0], out, perm)


def emit_transposed(ctx: LoweringContext, op: Op, fmt: DataFormat, dy: str, weight: str, spatial: Sequence[int],
                    kernel: Sequence[int], strides: Sequence[int], dilations: Sequence[int], group: int = 1) -> str:
    """The ConvTranspose spreading `dy` (channels-first) back over an input of `spatial` size,
    padded as the op's forward window (data_format `fmt`) was."""
    pairs = window_pads(op, fmt, spatial, kernel, strides, dilations)
    ends = [transposed_end(size, k, s, d, *pair)
            for size, k, s, d, pair in zip(spatial, kernel, strides, dilations, pairs)]  # type: ignore[arg-type]
    grouped = {"group": group} if group != 1 else {}
    return ctx.emit1(op, "ConvTranspose", [dy, weight], kernel_shape=list(kernel), strides=list(strides),
                     dilations=list(dilations), pads=[b for b, _ in pairs] + [e for e, _ in ends],  # type: ignore
                     output_padding=[extra for _, extra in ends], **grouped)


# -- pools -------------------------------------------------------------------------
def pool_window(op: Op, fmt: DataFormat, spatial: Sequence[Optional[int]], ksize: Optional[Sequence[int]] = None,
                strides: Optional[Sequence[int]] = None) -> tuple[list[int], list[int], Optional[Pairs]]:
    """A pool's (window, strides, pads) over an input of `spatial` size: from `ksize` and
    `strides` when given (MaxPoolV2 reads them as operands), else from the op's attributes.
    The pools' gradients share it."""
    windows, steps = window_attr(op, fmt, "ksize", ksize), window_attr(op, fmt, "strides", strides)
    return windows, steps, window_pads(op, fmt, spatial, windows, steps, [1, 1])


def _pool(ctx: LoweringContext, op: Op, ksize: Sequence[int], strides: Sequence[int]) -> None:
    fmt, perm = window_format(op)
    x = op.operands[0]
    windows, steps, pads = pool_window(op, fmt, spatial_dims(ctx, x, fmt), ksize, strides)
    onnx_op = "MaxPool" if op.type.startswith("MaxPool") else "AveragePool"
    out = ctx.emit1(op, onnx_op, [ctx.value_in(x, perm)], kernel_shape=windows, strides=steps, **onnx_pad_attrs(pads))
    ctx.bind(op.results[0], out, perm)


@lowers("MaxPool", "AvgPool", layout=CHANNELS_FIRST)
def _pool_attrs(ctx: LoweringContext, op: Op) -> None:
    """AveragePool's default count_include_pad=0 is TF's SAME: padding is not averaged in."""
    _pool(ctx, op, list(op.attr("ksize")), list(op.attr("strides")))


@lowers("MaxPoolV2", layout=CHANNELS_FIRST)
def _pool_inputs(ctx: LoweringContext, op: Op) -> None:
    ksize = [int(k) for k in ctx.const_operand(op, 1, "ksize").reshape(-1)]
    strides = [int(s) for s in ctx.const_operand(op, 2, "strides").reshape(-1)]
    _pool(ctx, op, ksize, strides)
