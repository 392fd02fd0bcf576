"""fuse_convolutions: merge ResizeBilinear and/or MirrorPad into the Conv2D that reads them.

GTT's three rewrites, applied in its order and with its node names and
attributes:

* `Conv2D(MirrorPad(ResizeBilinear(x, size), p), w)` -> `FusedResizeAndPadConv2D(x, size, p, w)`
* `Conv2D(ResizeBilinear(x, size), w)` -> the same with a zero `<conv>_dummy_paddings` Const, mode REFLECT
* `Conv2D(MirrorPad(x, p), w)` -> `FusedPadConv2D(x, p, w)`

The fused op takes the Conv2D's name.  Sites GTT would fuse but whose result
would change are skipped and reported: ResizeBilinear with
`half_pixel_centers=true` (the fused kernel always uses the legacy
corner-aligned sampling), NCHW or dilated convolutions, EXPLICIT padding,
non-int32 or non-constant paddings, and resize/pad results that other ops
also read.  Unlike GTT, one input feeding several pads does not stop all
but the first of them from fusing.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from compiler.ir.attrs import attr_text
from compiler.ir.dtypes import DType
from compiler.ir.graph import Graph, Op
from compiler.ir.tensor import Tensor
from compiler.passes.base import Pass, PassContext, PassResult, register_pass
from compiler.rewrite.constants import const_array
from compiler.rewrite.pattern import Match, used_outside
from compiler.rewrite.pattern_text import parse_pattern
from compiler.rewrite.rules import RewriteRule, Skip, apply_rules

_FUSABLE_T = frozenset({DType.FLOAT, DType.HALF, DType.DOUBLE})



# -- conditions ---------------------------------------------------------------------
def _conv_problem(conv: Op) -> Optional[str]:
    if attr_text(conv.attr("data_format", "NHWC")) != "NHWC":
        return "the fused ops only support NHWC"
    if any(d != 1 for d in conv.attr("dilations", (1, 1, 1, 1))):
        return "the fused ops do not support dilations"
    if attr_text(conv.attr("padding", "")) not in ("SAME", "VALID"):
        return f"padding {attr_text(conv.attr('padding', ''))} is not supported by the fused ops"
    if conv.attr("T") not in _FUSABLE_T:
        return "the fused ops only support half, float and double"
    return None


def _resize_problem(resize: Op, conv: Op) -> Optional[str]:
    if resize.attr("half_pixel_centers", False):
        return f"ResizeBilinear '{resize.name}' uses half_pixel_centers=true, which the fused op does not implement"
    if resize.operands and resize.operands[0].dtype not in (None, conv.attr("T")):
        return f"ResizeBilinear '{resize.name}' reads {resize.operands[0].dtype.tf_name}, not the conv's type"
    return None


def _pad_problem(pad: Op) -> Optional[str]:
    if pad.attr("Tpaddings", DType.INT32) != DType.INT32:
        return f"MirrorPad '{pad.name}' has int64 paddings; the fused ops take int32"
    paddings = const_array(pad.operands[1]) if len(pad.operands) == 2 else None
    if paddings is None:
        return f"MirrorPad '{pad.name}' paddings are not constant"
    if paddings.shape != (4, 2) or np.any(paddings[0] != 0) or np.any(paddings[3] != 0):
        return f"MirrorPad '{pad.name}' pads the batch or channel dimension"
    return None


def _shared(m: Match) -> Optional[str]:
    """GTT's rule: an absorbed op that something outside the match also reads must stay."""
    outside = used_outside(m)
    if outside:
        return f"'{outside[0].name}' ({outside[0].type}) is also read by other ops"
    return None


def _resize_pad_problem(m: Match) -> Optional[str]:
    return (_conv_problem(m.op("conv")) or _resize_problem(m.op("resize"), m.op("conv"))
            or _pad_problem(m.op("pad")) or _shared(m))


def _resize_only_problem(m: Match) -> Optional[str]:
    return _conv_problem(m.op("conv")) or _resize_problem(m.op("resize"), m.op("conv")) or _shared(m)


def _pad_only_problem(m: Match) -> Optional[str]:
    return _conv_problem(m.op("conv")) or _pad_problem(m.op("pad")) or _shared(m)


def fuse_resize_pad(graph: Graph, m: Match) -> Op:
    conv, pad, resize = m.op("conv"), m.op("pad"), m.op("resize")
    attrs = _conv_attrs(conv)
    attrs.update(resize_align_corners=bool(resize.attr("align_corners", False)), mode=pad.attrs["mode"])
    operands = [resize.operands[0], resize.operands[1], pad.operands[1], conv.operands[1]]
    return _fused(graph, conv, "FusedResizeAndPadConv2D", operands, attrs)


def fuse_resize(graph: Graph, m: Match) -> Op:
    conv, resize = m.op("conv"), m.op("resize")
    zeros = Tensor.from_numpy(np.zeros((4, 2), np.int32), DType.INT32)
    dummy = graph.create_op("Const", graph.unique_name(conv.name + "_dummy_paddings"),
                            attrs={"dtype": DType.INT32, "value": zeros}, device=conv.device, before=conv)
    attrs = _conv_attrs(conv)
    attrs.update(resize_align_corners=bool(resize.attr("align_corners", False)), mode="REFLECT")
    operands = [resize.operands[0], resize.operands[1], dummy.results[0], conv.operands[1]]
    return _fused(graph, conv, "FusedResizeAndPadConv2D", operands, attrs)


def fuse_pad(graph: Graph, m: Match) -> Op:
    conv, pad = m.op("conv"), m.op("pad")
    attrs = _conv_attrs(conv)
    attrs["mode"] = pad.attrs["mode"]
    return _fused(graph, conv, "FusedPadConv2D", [pad.operands[0], pad.operands[1], conv.operands[1]], attrs)


def _conv_attrs(conv: Op) -> dict:
    return {"T": conv.attrs["T"], "padding": conv.attrs["padding"], "strides": conv.attrs["strides"]}


def _fused(graph: Graph, conv: Op, kind: str, operands: list, attrs: dict) -> Op:
    """The fused op, placed before the conv; the rule driver gives it the conv's name and readers."""
    return graph.create_op(kind, graph.unique_name(conv.name + "/fused"), operands, attrs=attrs,
                           device=conv.device, before=conv)


RULES = (
    RewriteRule("resize+pad", parse_pattern("conv=Conv2D(pad=MirrorPad(resize=ResizeBilinear, *), *)"),
                fuse_resize_pad, _resize_pad_problem),
    RewriteRule("resize", parse_pattern("conv=Conv2D(resize=ResizeBilinear, *)"), fuse_resize, _resize_only_problem),
    RewriteRule("pad", parse_pattern("conv=Conv2D(pad=MirrorPad(*, *), *)"), fuse_pad, _pad_only_problem),
)


@register_pass
class FuseConvolutions(Pass):
    """Fuse ResizeBilinear and/or MirrorPad feeding a Conv2D into FusedResizeAndPadConv2D / FusedPadConv2D."""

    name = "fuse_convolutions"

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        stats = apply_rules(graph, RULES, protected=[*ctx.inputs, *ctx.outputs])
        result = PassResult(sites=stats.total, changed=stats.total > 0)
        result.note("fused " + ", ".join(f"{n} {rule}" for rule, n in stats.applied.items()))
        result.notes.extend(f"skipped {reason}" for reason in _final_skips(graph, stats.skipped))
        return result


def _final_skips(graph: Graph, skipped: list[Skip]) -> list[str]:
    """Skip reasons for convolutions that stayed unfused (a later rule may have fused an earlier skip)."""
    return [str(skip) for skip in skipped if graph.get(skip.root) is not None and graph.op(skip.root).type == "Conv2D"]


__all__ = ["FuseConvolutions"]
