"""Window ops over NHWC images beyond plain pooling: MaxPoolWithArgmax and ExtractImagePatches.

MaxPoolWithArgmax is ONNX MaxPool with its Indices output.  ONNX flattens the argmax over the channels-first input, (((n * C + c) * H + y) * W + x);
TF over the channels-last one, ((y * W + x) * C + c), plus n * H * W * C with
include_batch_in_index.  The position in the image is the ONNX index mod H * W,
so TF's index is that times C plus the channel (and the batch offset), all in
int64 on the channels-first result; both pick the first maximum in a window.

ExtractImagePatches is one Gather of pixel rows: the (zero-padded) NHWC image
flattened to [N, H*W, C], gathered with constant indices of shape
[out_h, out_w, taps] in TF's (row, column) tap order, then reshaped so the
taps and channels merge in TF's (row, column, channel) order.  It copies
values, so it is exact for every input (a convolution with one-hot filters
would turn a neighbouring inf into NaN), and it is four nodes where a Slice
per tap was k*k + 1 (50 for NAT's 7x7 windows; onnxruntime also ran the
Gather 1.4-1.6x faster on 7x7 windows of 64-128 channels).
"""
from __future__ import annotations

import numpy as np

from compiler.analysis.window import DataFormat
from compiler.backends.onnx import layout
from compiler.backends.onnx.context import LoweringContext
from compiler.backends.onnx.errors import UnsupportedOpError
from compiler.backends.onnx.ops_array import emit_pad
from compiler.backends.onnx.ops_conv import onnx_pad_attrs, pool_window, window_attr, window_pads
from compiler.backends.onnx.ops_image import bind_stored
from compiler.backends.onnx.registry import CHANNELS_FIRST, lowers
from compiler.ir.dtypes import DType
from compiler.ir.graph import Op
from compiler.limits import check_tensor_size

_NHWC = layout.channels_first(4)


def _tf_index(ctx: LoweringContext, op: Op, onnx_index: str, dims: tuple[int, int, int]) -> str:
    """TF's flat NHWC argmax from ONNX's flat NCHW one, for an input of (H, W, C) `dims`."""
    height, width, channels = dims
    plane = ctx.helper1(op, "in_plane", "Mod", [onnx_index, ctx.scalar(height * width, DType.INT64, f"{op.name}/hw")])
    scaled = ctx.helper1(op, "in_plane_c", "Mul", [plane, ctx.scalar(channels, DType.INT64, f"{op.name}/c")])
    check_tensor_size([channels], 8, "the channel offsets of an argmax pool")
    channel = ctx.initializer(np.arange(channels, dtype=np.int64).reshape(1, channels, 1, 1), f"{op.name}/channel")
    index = ctx.helper1(op, "argmax_nhwc", "Add", [scaled, channel])
    if not op.attr("include_batch_in_index", False):
        return index
    volume = height * width * channels
    image = ctx.helper1(op, "image", "Div", [onnx_index, ctx.scalar(volume, DType.INT64, f"{op.name}/chw")])
    offset = ctx.helper1(op, "image_offset", "Mul", [image, ctx.scalar(volume, DType.INT64, f"{op.name}/hwc")])
    return ctx.helper1(op, "argmax_batch", "Add", [index, offset])


@lowers("MaxPoolWithArgmax", layout=CHANNELS_FIRST)
def _max_pool_with_argmax(ctx: LoweringContext, op: Op) -> None:
    dims = ctx.shape(op.operands[0]).dims
    if dims is None or len(dims) != 4 or any(d is None for d in dims[1:]):
        raise UnsupportedOpError(op.type, op.name, "the input's height, width and depth must be known")
    fmt = DataFormat("NHWC")
    windows, steps, pads = pool_window(op, fmt, list(dims[1:3]))
    values, indices = ctx.emit(op, "MaxPool", [ctx.operand(op, 0, _NHWC)], 2, kernel_shape=windows, strides=steps,
                               **onnx_pad_attrs(pads))
    argmax = _tf_index(ctx, op, indices, tuple(int(d) for d in dims[1:]))  # type: ignore[arg-type]
    if op.attr("Targmax", DType.INT64) == DType.INT32:
        argmax = ctx.helper1(op, "argmax_int32", "Cast", [argmax], to=6)
    bind_stored(ctx, op, values, _NHWC)
    bind_stored(ctx, op, argmax, _NHWC, index=1)


@lowers("ExtractImagePatches")
def _extract_image_patches(ctx: LoweringContext, op: Op) -> None:
    dims = ctx.shape(op.operands[0]).dims
    if dims is None or len(dims) != 4 or dims[1] is None or dims[2] is None:
        raise UnsupportedOpError(op.type, op.name, "the image height and width must be known")
    fmt = DataFormat("NHWC")
    sizes, steps, rates = (window_attr(op, fmt, name) for name in ("ksizes", "strides", "rates"))
    pairs = window_pads(op, fmt, list(dims[1:3]), sizes, steps, rates)
    x = ctx.operand(op, 0)
    if any(any(p) for p in pairs):  # type: ignore[union-attr]
        x = emit_pad(ctx, op, x, [(0, 0), *pairs, (0, 0)], "constant", suffix="pad")  # type: ignore[misc]
    padded = [d + b + a for d, (b, a) in zip(dims[1:3], pairs)]  # type: ignore[operator,misc]
    outs = [(p - (k - 1) * r - 1) // s + 1 for p, k, r, s in zip(padded, sizes, rates, steps)]
    channels = -1 if dims[3] is None else dims[3]
    rows = ctx.helper1(op, "pixel_rows", "Reshape", [x, ctx.ints([0, padded[0] * padded[1], channels],
                                                                  f"{op.name}/rows_shape")])
    taps = ctx.helper1(op, "taps", "Gather", [rows, ctx.initializer(_tap_indices(padded, outs, sizes, steps, rates),
                                                                        f"{op.name}/tap_indices")], axis=1)
    depth = -1 if dims[3] is None else sizes[0] * sizes[1] * dims[3]
    ctx.bind(op.results[0], ctx.emit1(op, "Reshape", [taps, ctx.ints([0, *outs, depth], f"{op.name}/shape")]))


def _tap_indices(padded: list[int], outs: list[int], sizes: list[int], steps: list[int],
                 rates: list[int]) -> np.ndarray:
    """[out_h, out_w, taps] positions in the flattened padded image, taps in TF's (row, column) order."""
    check_tensor_size([*outs, sizes[0] * sizes[1]], 4, "the tap indices of an image-patch extraction")
    axes = [np.add.outer(np.arange(o) * s, np.arange(k) * r) for o, s, k, r in zip(outs, steps, sizes, rates)]
    flat = axes[0][:, None, :, None] * padded[1] + axes[1][None, :, None, :]  # [out_h, out_w, k_h, k_w]
    index_type = np.int32 if padded[0] * padded[1] <= np.iinfo(np.int32).max else np.int64
    return flat.reshape(outs[0], outs[1], sizes[0] * sizes[1]).astype(index_type)
