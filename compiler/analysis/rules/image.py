"""Shape rules of 3-D convolutions and pools, depth/space rearrangements and image ops."""
from __future__ import annotations

from typing import Optional

import numpy as np

from compiler.analysis.rules.elementwise import same_shape
from compiler.analysis.rules.registry import OpFacts, shape_rule
from compiler.analysis.window import data_format, window_output_shape
from compiler.ir.attrs import attr_text
from compiler.ir.shapes import Shape


def _volume(facts: OpFacts, windows, strides, dilations, channels) -> Optional[list[Shape]]:
    x = facts.shapes[0]
    if x.dims is None or len(x.dims) != 5 or windows is None or None in windows:
        return [Shape((None,) * 5)]
    fmt = data_format(facts.attr("data_format"), "NDHWC")
    return [window_output_shape(x, fmt, windows, fmt.spatial(strides), fmt.spatial(dilations),
                                attr_text(facts.attr("padding", "VALID")), [], channels)]


@shape_rule("Conv3D")
def _conv3d(facts: OpFacts) -> Optional[list[Shape]]:
    w = facts.dims(1)
    known = w is not None and len(w) == 5
    return _volume(facts, list(w[:3]) if known else None, facts.attr("strides", (1,) * 5),
                   facts.attr("dilations", (1,) * 5), w[4] if known else None)


@shape_rule("MaxPool3D", "AvgPool3D")
def _pool3d(facts: OpFacts) -> Optional[list[Shape]]:
    x = facts.dims(0)
    fmt = data_format(facts.attr("data_format"), "NDHWC")
    channels = None if x is None or len(x) != 5 else x[fmt.channel_axis(5)]
    return _volume(facts, fmt.spatial(facts.attr("ksize", (1,) * 5)), facts.attr("strides", (1,) * 5), (1,) * 5,
                   channels)


@shape_rule("Conv3DBackpropInputV2", "Conv2DBackpropInput", "DepthwiseConv2dNativeBackpropInput", "AvgPoolGrad")
def _backprop_input(facts: OpFacts) -> Optional[list[Shape]]:
    """A transposed conv's result (a pool's or depthwise conv's input gradient) has the shape its `input_sizes`
    (`orig_input_shape`) operand states."""
    rank = 5 if facts.op.type.startswith("Conv3D") else 4
    sizes = facts.known_ints(0)
    return [Shape(tuple(sizes)) if sizes is not None and len(sizes) == rank else Shape((None,) * rank)]


# Conv2DBackpropInputV2 takes a tensor of the input's shape instead of the sizes.
shape_rule("Conv2DBackpropInputV2")(same_shape)


@shape_rule("SpaceToBatchND", "BatchToSpaceND")
def _space_batch(facts: OpFacts) -> Optional[list[Shape]]:
    """Blocks move between the batch and the spatial dims (padded before, cropped after)."""
    dims, block, amounts = facts.dims(0), facts.ints(1), facts.ints(2)
    if dims is None or block is None or amounts is None or len(amounts) != 2 * len(block) or not block:
        return None if dims is None else [Shape((None,) * len(dims))]
    if len(dims) < len(block) + 1:
        return None
    product = int(np.prod(block))
    to_batch = facts.op.type == "SpaceToBatchND"
    out = list(dims)
    out[0] = None if dims[0] is None else (dims[0] * product if to_batch else dims[0] // product)
    for i, b in enumerate(block):
        d, before, after = dims[1 + i], amounts[2 * i], amounts[2 * i + 1]
        if d is not None:
            out[1 + i] = (d + before + after) // b if to_batch else d * b - before - after
    return [Shape(tuple(out))]


@shape_rule("DepthToSpace", "SpaceToDepth")
def _depth_space(facts: OpFacts) -> Optional[list[Shape]]:
    x, block = facts.dims(0), int(facts.attr("block_size", 1))
    if x is None or len(x) != 4:
        return [Shape((None,) * 4)]
    fmt = data_format(facts.attr("data_format"))
    grow = facts.op.type == "DepthToSpace"
    dims = list(x)
    for axis in fmt.spatial_axes(4):
        dims[axis] = _scaled(x[axis], block, grow)
    channel = fmt.channel_axis(4)
    dims[channel] = _scaled(x[channel], block * block, not grow)
    return [Shape(tuple(dims))]


def _scaled(dim: Optional[int], factor: int, up: bool) -> Optional[int]:
    if dim is None:
        return None
    return dim * factor if up else dim // factor


# Per-element (LRN: per-position) image ops keep the shape.
shape_rule("LRN", "FakeQuantWithMinMaxArgs", "FakeQuantWithMinMaxVars", "FakeQuantWithMinMaxVarsPerChannel",
           "AdjustContrastv2", "AdjustHue",
           "AdjustSaturation", "RGBToHSV", "HSVToRGB")(same_shape)


@shape_rule("CropAndResize")
def _crop_and_resize(facts: OpFacts) -> Optional[list[Shape]]:
    image, boxes, crop = facts.dims(0), facts.dims(1), facts.ints(3)
    count = None if boxes is None else boxes[0]
    size = (None, None) if crop is None or len(crop) != 2 else tuple(crop)
    return [Shape((count,) + size + (None if image is None or len(image) != 4 else image[3],))]


@shape_rule("ExtractImagePatches")
def _extract_image_patches(facts: OpFacts) -> Optional[list[Shape]]:
    """NHWC windows, each flattened into the depth: k_h * k_w * C channels."""
    x = facts.shapes[0]
    if x.dims is None or len(x.dims) != 4:
        return [Shape((None,) * 4)]
    fmt = data_format("NHWC")
    sizes = fmt.spatial(facts.attr("ksizes"))
    depth = None if x.dims[3] is None else sizes[0] * sizes[1] * x.dims[3]
    return [window_output_shape(x, fmt, sizes, fmt.spatial(facts.attr("strides")), fmt.spatial(facts.attr("rates")),
                                attr_text(facts.attr("padding", "VALID")), [], depth)]


@shape_rule("MaxPoolWithArgmax")
def _max_pool_with_argmax(facts: OpFacts) -> Optional[list[Shape]]:
    x = facts.shapes[0]
    if x.dims is None or len(x.dims) != 4:
        return None
    fmt = data_format("NHWC")
    out = window_output_shape(x, fmt, fmt.spatial(facts.attr("ksize")), fmt.spatial(facts.attr("strides")), [1, 1],
                              attr_text(facts.attr("padding", "VALID")), [], x.dims[3])
    return [out, out]
