"""repair_weight_ranges: give eight-bit weights a range TensorFlow can dequantize.

GTT's quantize_weights (reproduced byte for byte by gttc's) starts its running
max at FLT_MIN, so an all-zero weight gets the range [0, 1.18e-38].  Its step
(max - min) / 255 is denormal; TF flushes it to zero and dequantizes 0/0 = NaN,
which is why GTT's eight-bit ResNet50 (22 zero biases) computes nothing but
NaN.  This pass gives every such constant codes 0 over [min, min + 1], which
dequantize to exactly `min`, the value GTT meant.  quantize_nodes does the
same as its first step; this pass serves pipelines that stop after
quantize_weights, such as `--target=mobile-small`.  (Not a GTT transform.)
"""
from __future__ import annotations

from compiler.ir.graph import Graph
from compiler.passes.base import Pass, PassContext, PassResult, register_pass
from compiler.passes.quantize_nodes import repair_weight_ranges


@register_pass
class RepairWeightRanges(Pass):
    """Give eight-bit weights whose range TF dequantizes to NaN (all-zero weights) a usable one (gttc extension)."""

    name = "repair_weight_ranges"

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        repaired = repair_weight_ranges(graph)
        result = PassResult(sites=len(repaired), changed=bool(repaired))
        shown = ", ".join(repaired[:5]) + (", ..." if len(repaired) > 5 else "")
        result.note(f"repaired {len(repaired)} eight-bit constants whose range step is denormal"
                    + (f": {shown}" if repaired else ""))
        return result


__all__ = ["RepairWeightRanges"]
