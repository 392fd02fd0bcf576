"""Shape rules of TF's eight-bit ops: the float op's shape, plus scalar ranges.

gttc's eight-bit graphs are quantized per tensor, so every min/max result is a
scalar; the codes have the shape of the float tensor they stand for.
"""
from __future__ import annotations

from typing import Optional

from compiler.analysis.rules.nn import conv2d_shapes, matmul_shapes
from compiler.analysis.rules.registry import OpFacts, shape_rule
from compiler.ir.shapes import Shape

_SCALAR = Shape(())


@shape_rule("QuantizeV2")
def _quantize(facts: OpFacts) -> Optional[list[Shape]]:
    return [facts.shapes[0], _SCALAR, _SCALAR]


@shape_rule("Dequantize")
def _dequantize(facts: OpFacts) -> Optional[list[Shape]]:
    return [facts.shapes[0]]


@shape_rule("QuantizedConv2D")
def _quantized_conv2d(facts: OpFacts) -> Optional[list[Shape]]:
    found = conv2d_shapes(facts)
    return None if found is None else [found[0], _SCALAR, _SCALAR]


@shape_rule("QuantizedMatMul")
def _quantized_matmul(facts: OpFacts) -> Optional[list[Shape]]:
    return [matmul_shapes(facts)[0], _SCALAR, _SCALAR]
