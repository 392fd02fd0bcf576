"""fold_pad_into_conv: let a convolution do the zero padding a Pad op does before it.

Keras' ZeroPadding2D (in front of every stride-2 depthwise conv of
MobileNetV2, for one) freezes to `Pad(x, paddings) -> Conv2D(padding=VALID)`.
Conv2D and DepthwiseConv2dNative take `padding=EXPLICIT` with
`explicit_paddings`, so the Pad, and the padded copy of the activations it
writes, can go: the conv reads `x` and pads its windows itself.  The result
is the same number for number, since both pad with zeros.

Only Conv2D is folded by default.  DepthwiseConv2dNative takes EXPLICIT
padding too (`op=DepthwiseConv2dNative` folds it), but TensorFlow 2.21's
Grappler remapper drops `explicit_paddings` when it fuses such a conv with
the BiasAdd and Relu6 after it, and the session aborts; gttc's own ONNX
export already merges those Pads into the ONNX Conv.
"""
from __future__ import annotations

from typing import Optional

from compiler.ir import Graph, Op
from compiler.passes import Param, Pass, PassContext, PassResult, register_pass
from compiler.rewrite import Match, const_array, replace_matching

CONVS = ("Conv2D", "DepthwiseConv2dNative")
DEFAULT = ("Conv2D",)
PATTERN = "conv=Conv2D|DepthwiseConv2dNative(pad=Pad(x=*, paddings=Const), filter=*)"


@register_pass
class FoldPadIntoConv(Pass):
    """Fold a zero Pad in front of Conv2D/DepthwiseConv2dNative into the conv's explicit padding."""

    name = "fold_pad_into_conv"
    params = (Param("op", "str", DEFAULT, "conv op type to fold into (repeatable): Conv2D, DepthwiseConv2dNative",
                    repeated=True),)
    requires = ("fold_constants",)  # paddings computed from shapes are constants only after folding

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        types = set(ctx.params("op") or DEFAULT)
        unknown = sorted(types - set(CONVS))
        if unknown:
            raise ValueError(f"op={unknown[0]} is not one of {', '.join(CONVS)}")
        stats = replace_matching(graph, PATTERN, fold, condition=lambda m: problem(m, types),
                                 protected=ctx.inputs + ctx.outputs, name=self.name)
        result = PassResult(sites=stats.total, changed=stats.total > 0)
        result.note(f"folded {stats.total} Pad op{'' if stats.total == 1 else 's'} into convolutions")
        result.notes.extend(f"skipped {skip}" for skip in stats.skipped)
        return result


def problem(m: Match, types: set[str]) -> Optional[str]:
    """Why this Pad -> conv cannot fold, or None when it can."""
    conv = m.op("conv")
    if conv.type not in types:
        return f"{conv.type} is not among op={','.join(sorted(types))}"
    padding = conv.attr("padding")
    if padding not in ("VALID", "EXPLICIT"):
        return f"the conv pads {padding} itself; only VALID and EXPLICIT convs take extra padding"
    pads = const_array(m.value("paddings"))
    if pads is None or pads.shape != (4, 2):
        return "paddings are not a constant 4x2 array"
    batch, channels = (0, 3) if conv.attr("data_format", "NHWC") == "NHWC" else (0, 1)
    if pads[batch].any() or pads[channels].any():
        return "the Pad pads the batch or channel dimension, which a conv cannot"
    pad = m.op("pad")
    if set(pad.result.users) != {conv} or pad.control_users:
        return "the padded tensor is also read by other ops"
    return None


def fold(graph: Graph, m: Match) -> Op:
    """The same conv reading the unpadded input, with the Pad's amounts added to its explicit padding."""
    conv = m.op("conv")
    extra = [int(v) for v in const_array(m.value("paddings")).reshape(-1)]
    before = list(conv.attr("explicit_paddings", ())) or [0] * 8
    attrs = conv.attrs.copy()
    attrs["padding"] = "EXPLICIT"
    attrs["explicit_paddings"] = [a + b for a, b in zip(before, extra)]
    return graph.create_op(conv.type, graph.unique_name(conv.name + "/explicit"), [m.value("x"), conv.operands[1]],
                           attrs, device=conv.device, before=conv)
