"""quantize_activations: eight-bit activations between the ops TF has no quantized kernel for.

quantize_nodes turns convolutions and matmuls into TF's quantized kernels, but
TF has none for depthwise convolutions, and mobile-int8 leaves the cheap ops
between layers (Add, pooling, Concat, Mean) in float because TF's eight-bit
versions are slower than its float ones.  onnxruntime, though, runs all of
them in eight bits (QLinearConv with groups, QLinearAdd, ...) when each of
their float inputs is the DequantizeLinear of a QuantizeLinear.

This pass gives every float, non-constant input of those ops exactly that
pair in the TF graph: QuantizeV2 (MIN_FIRST, quint8, the range measured as
quantize_nodes measures it, so calibrate_ranges freezes it) and a Dequantize.
The TF graph then computes what the eight-bit ONNX model computes, and the
ONNX backend lowers the pair to QuantizeLinear/DequantizeLinear.  A value
already quantized for a quantized kernel reuses that QuantizeV2; a value read
through a zero Pad is quantized before the Pad (padding with 0.0 commutes
with quantization, since 0.0 is a code).

Softmax stays in float by default (`float_op`): with eight-bit output it
flattens close probabilities to the same code (onnxruntime's own quantizer
zeroes a flat softmax).  (Not a GTT transform.)
"""
from __future__ import annotations

from collections import Counter
from typing import Optional

import numpy as np

from compiler.ir.attrs import attr_text
from compiler.ir.dtypes import DType
from compiler.ir.graph import Graph, Op, Value
from compiler.passes.base import Param, Pass, PassContext, PassResult, register_pass
from compiler.passes.quantize_nodes import measured_quantize
from compiler.rewrite.constants import const_array
from compiler.rewrite.edit import node_names

# Op type -> operand slots that carry activations (None: all of them).
QUANTIZABLE: dict[str, Optional[tuple[int, ...]]] = {
    "Conv2D": (0,),
    "DepthwiseConv2dNative": (0,),
    "MatMul": (0, 1),
    "Add": (0, 1),
    "AddV2": (0, 1),
    "Mul": (0, 1),
    "AvgPool": (0,),
    "MaxPool": (0,),
    "Mean": (0,),
    "ConcatV2": None,  # every operand but the axis
    "Softmax": (0,),
}
# Quantized both ways (input and output) when not kept in float: their output is not another op's input.
_OUTPUT_TOO = frozenset({"Softmax"})
DEFAULT_FLOAT_OPS = ("Softmax",)
_BINARY = frozenset({"Add", "AddV2", "Mul", "MatMul"})
_MODE = "MIN_FIRST"


@register_pass
class QuantizeActivations(Pass):
    """Quantize and dequantize the float inputs of ops onnxruntime runs in eight bits (gttc extension)."""

    name = "quantize_activations"
    params = (
        Param("float_op", "str", None, "keep this op type in float (repeatable; default Softmax; 'none' keeps none)",
              repeated=True),
    )

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        kept = _float_ops(ctx.params("float_op"))
        protected = node_names(ctx.inputs) | node_names(ctx.outputs)
        pairs: dict[Value, Value] = {}
        counts: Counter = Counter()
        for op in list(graph):
            if op.type not in QUANTIZABLE or op.type in kept:
                continue
            slots = _activation_slots(op)
            if not slots:
                continue
            for slot in slots:
                _quantize_operand(graph, op, slot, pairs)
            if op.type in _OUTPUT_TOO and op.name not in protected:
                _quantize_output(graph, op, pairs)
            counts[op.type] += 1
        return _report(counts, len(pairs), kept)


def _float_ops(given: list[str]) -> frozenset[str]:
    if not given:
        return frozenset(DEFAULT_FLOAT_OPS)
    return frozenset(name for name in given if name.lower() != "none")


def _activation_slots(op: Op) -> list[int]:
    """The operands that are float activations: not constants, not already dequantized eight-bit values,
    and not a Concat of dequantized values along the same axis (the ONNX backend merges the two
    Concats into one, which onnxruntime runs as a single QLinearConcat)."""
    slots = QUANTIZABLE[op.type]
    candidates = range(len(op.operands) - 1) if slots is None else [s for s in slots if s < len(op.operands)]
    found = [s for s in candidates if _is_float_activation(op.operands[s]) and not _inner_concat(op, s)]
    if op.type in _BINARY and len(found) + _dequantized_count(op) < 2:
        return []  # with a float constant operand onnxruntime cannot fuse the op: it stays float
    return found


def _inner_concat(op: Op, slot: int) -> bool:
    """Operand `slot` of a ConcatV2 is another ConcatV2's result, read only here, on the same axis,
    whose own inputs are all dequantized values or activations this pass dequantizes (in any order)."""
    inner = op.operands[slot].op
    if op.type != "ConcatV2" or inner.type != "ConcatV2" or len(op.operands[slot].uses) != 1:
        return False
    axes = [const_array(concat.operands[-1]) for concat in (op, inner)]
    if any(a is None for a in axes) or int(axes[0]) != int(axes[1]):  # same rank, so same axis
        return False
    return all(v.op.type == "Dequantize" or _is_float_activation(v) for v in inner.operands[:-1])


def _dequantized_count(op: Op) -> int:
    return sum(1 for v in op.operands[:2] if v.op.type == "Dequantize")


def _is_float_activation(value: Value) -> bool:
    return value.dtype == DType.FLOAT and const_array(value) is None and value.op.type != "Dequantize"


def _quantize_operand(graph: Graph, op: Op, slot: int, pairs: dict[Value, Value]) -> None:
    """Point operand `slot` at Dequantize(QuantizeV2(x)); through a zero Pad only it reads, quantize the
    Pad's input."""
    value = op.operands[slot]
    pad = value.op
    if _is_zero_pad(pad) and len(value.uses) == 1 and _is_float_activation(pad.operands[0]):
        pad.set_operand(0, _dequantized(graph, pad.operands[0], pad, pairs))
        return
    op.set_operand(slot, _dequantized(graph, value, op, pairs))


def _quantize_output(graph: Graph, op: Op, pairs: dict[Value, Value]) -> None:
    """Readers of `op`'s result read it through a QuantizeV2/Dequantize pair instead."""
    value = op.results[0]
    readers = [(user, slot) for user, slot in value.uses]
    if not readers:
        return
    dequantized = _dequantized(graph, value, readers[0][0], pairs)
    for user, slot in readers:
        user.set_operand(slot, dequantized)


def _is_zero_pad(op: Op) -> bool:
    if op.type == "Pad" and len(op.operands) == 2:
        return const_array(op.operands[1]) is not None
    if op.type == "PadV2" and len(op.operands) == 3:
        fill = const_array(op.operands[2])
        return const_array(op.operands[1]) is not None and fill is not None and not np.any(fill)
    return False


def _dequantized(graph: Graph, value: Value, before: Op, pairs: dict[Value, Value]) -> Value:
    """The Dequantize of `value`'s QuantizeV2 (a new one goes before `before`, a reader of `value`),
    made once per value, reusing an existing QuantizeV2."""
    if value in pairs:
        return pairs[value]
    quantize = _existing_quantize(value) or measured_quantize(
        graph, value, graph.unique_name(f"{value.op.name}_{value.index}/activation"), before)
    dequantize = graph.create_op("Dequantize", graph.unique_name(f"{quantize.name}/dequantize"),
                                 operands=list(quantize.results[:3]), attrs={"T": DType.QUINT8, "mode": _MODE},
                                 after=quantize)
    pairs[value] = dequantize.results[0]
    return pairs[value]


def _existing_quantize(value: Value) -> Optional[Op]:
    """A MIN_FIRST quint8 QuantizeV2 of `value` already in the graph (quantize_nodes made one)."""
    for user in value.users:
        if (user.type == "QuantizeV2" and user.operands[0] is value and attr_text(user.attr("mode")) == _MODE
                and user.attr("T") == DType.QUINT8 and int(user.attr("axis", -1)) == -1):
            return user
    return None



def _report(counts: Counter, quantized: int, kept: frozenset[str]) -> PassResult:
    result = PassResult()
    result.sites = sum(counts.values())
    result.changed = quantized > 0
    if not result.sites:
        result.note("no float activations to quantize")
    else:
        ops = ", ".join(f"{n} {t}" for t, n in sorted(counts.items()))
        result.note(f"quantized {quantized} activations read by {ops}")
    if kept:
        result.note(f"kept in float: {', '.join(sorted(kept))} (eight-bit probabilities lose close classes)")
    return result


__all__ = ["DEFAULT_FLOAT_OPS", "QUANTIZABLE", "QuantizeActivations"]
