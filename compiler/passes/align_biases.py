"""align_biases: put each bias after an eight-bit product on its accumulator's step.

An integer kernel (onnxruntime's QLinearConv, QGemm) adds the bias to the
int32 accumulator, so the bias must be a whole number of accumulator steps
x_step * w_step; the ONNX backend rounds it there.  TF adds the float bias to
the dequantized accumulator instead.  The two then differ by up to half an
accumulator step, which is a small fraction of an output step but flips an
output code wherever the result sits that close to a rounding boundary
(0.02% of ResNet50's codes).  This pass rounds the bias in the TF graph, so
both add exactly the same value.

Sites: a BiasAdd (or Add of a constant) reading the Dequantize of a
QuantizedConv2D / QuantizedMatMul accumulator, or a float Conv2D,
DepthwiseConv2dNative or MatMul whose input and weight are both dequantized
from frozen ranges (quantize_activations' layers).  Needs frozen ranges: run
it after calibrate_ranges.  (Not a GTT transform.)
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from compiler.ir.dtypes import DType
from compiler.ir.graph import Graph, Op, Value
from compiler.passes.base import Pass, PassContext, PassResult, register_pass
from compiler.passes.quantize_weights import new_const
from compiler.passes.symmetric_weights import FLOAT_PRODUCTS, QUANTIZED_PRODUCTS, weight_values
from compiler.rewrite.constants import const_array
from compiler.rewrite.edit import erase_dead, node_names
from compiler.runtime.kernels.quantized_conversion import float_for_one_level, quantize_v2_output_range

_BIAS_ADDS = ("BiasAdd", "Add", "AddV2")
_INT32 = np.iinfo(np.int32)


@register_pass
class AlignBiases(Pass):
    """Round biases after eight-bit products to their accumulator's step, as integer kernels add them (gttc extension)."""

    name = "align_biases"

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        result = PassResult()
        stale: list[Op] = []
        moved = 0.0
        for op in list(graph):
            site = _site(op)
            if site is None:
                continue
            slot, bias, step = site
            aligned = np.clip(np.rint(bias.astype(np.float64) / float(step)), _INT32.min, _INT32.max) * float(step)
            aligned = aligned.astype(np.float32)
            moved = max(moved, float(np.max(np.abs(aligned.astype(np.float64) - bias), initial=0.0)) / float(step))
            stale.append(op.operands[slot].op)
            const = new_const(graph, graph.unique_name(f"{op.name}/aligned_bias"), aligned, DType.FLOAT, before=op)
            op.set_operand(slot, const.result)
            result.sites += 1
        erase_dead(graph, stale, node_names(ctx.inputs) | node_names(ctx.outputs))
        result.changed = result.sites > 0
        if result.sites:
            result.note(f"aligned {result.sites} biases to their accumulator step (each moved at most "
                        f"{moved:.3f} of a step)")
        else:
            result.note("no bias after an eight-bit product with frozen ranges")
        return result


def _site(op: Op) -> Optional[tuple[int, np.ndarray, np.float32]]:
    """(bias operand slot, bias values, accumulator step) for a bias add after an eight-bit product."""
    if op.type not in _BIAS_ADDS or len(op.operands) != 2 or op.attr("T") not in (None, DType.FLOAT):
        return None
    for slot in (1, 0):
        bias = weight_values(op.operands[slot])
        step = _accumulator_step(op.operands[1 - slot])
        if bias is not None and step is not None and step > 0:
            return slot, bias, step
    return None


def _accumulator_step(value: Value) -> Optional[np.float32]:
    """x_step * w_step of the product computing `value`, when both ranges are frozen."""
    op = value.op
    if op.type == "Dequantize" and op.operands and op.operands[0].op.type in QUANTIZED_PRODUCTS:
        product = op.operands[0].op
        bounds = [_frozen_bound(v) for v in product.operands[2:6]] if len(product.operands) >= 6 else [None]
        if any(b is None for b in bounds):
            return None
        x_step = float_for_one_level(bounds[0], bounds[1], np.uint8)
        w_step = float_for_one_level(bounds[2], bounds[3], np.uint8)
        return np.float32(x_step * w_step)
    if op.type in FLOAT_PRODUCTS and len(op.operands) >= 2:
        steps = [_dequantized_step(v) for v in op.operands[:2]]
        if any(s is None for s in steps):
            return None
        return np.float32(steps[0] * steps[1])
    return None


def _dequantized_step(value: Value) -> Optional[np.float32]:
    """The code step of a MIN_FIRST quint8 Dequantize with a frozen range (a constant, or a QuantizeV2's
    output range for constant min and max)."""
    op = value.op
    if op.type != "Dequantize" or len(op.operands) != 3 or op.attr("T") != DType.QUINT8:
        return None
    bounds = [_frozen_bound(v) for v in op.operands[1:3]]
    if any(b is None for b in bounds):
        return None
    return float_for_one_level(bounds[0], bounds[1], np.uint8)


def _frozen_bound(value: Value) -> Optional[np.float32]:
    found = const_array(value)
    if found is not None:
        return np.float32(np.asarray(found).reshape(-1)[0])
    quantize = value.op
    if quantize.type != "QuantizeV2" or value.index not in (1, 2):
        return None
    output_range = quantize_v2_output_range(quantize.attrs, [const_array(v) for v in quantize.operands[1:3]])
    if output_range is None:
        return None
    return np.float32(np.asarray(output_range[value.index - 1]).reshape(-1)[0])


__all__ = ["AlignBiases"]
