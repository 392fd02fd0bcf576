"""fold_requantize_dequantize: dequantize a 32-bit accumulator directly.

quantize_nodes turns a convolution whose result is read in float into
QuantizedConv2D -> RequantizationRange -> Requantize (to eight bits) ->
Dequantize.  The detour through eight bits only loses precision, and in
TensorFlow RequantizationRange and Requantize scan the whole accumulator on
every run.  `Dequantize` accepts qint32 itself, so when a Requantize's
eight-bit result is only dequantized, the Dequantize can read the qint32
value and its range instead; the Requantize, and the RequantizationRange
that fed it, then have no readers and are erased.  (Not a GTT transform.)
"""
from __future__ import annotations

from compiler.ir.dtypes import DType
from compiler.ir.graph import Graph, Op
from compiler.passes.base import Pass, PassContext, PassResult, register_pass
from compiler.rewrite.edit import erase_dead, node_names

# The mode whose qint32 form reads a range as Requantize reads its input's (TF's QuantizedToFloat).
_MODE = "MIN_FIRST"


@register_pass
class FoldRequantizeDequantize(Pass):
    """Dequantize qint32 accumulators directly where a Requantize only feeds Dequantize ops (gttc extension)."""

    name = "fold_requantize_dequantize"

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        protected = node_names(ctx.inputs) | node_names(ctx.outputs)
        result = PassResult()
        requantizes = [op for op in graph if op.type == "Requantize"]
        folded: list[Op] = []
        for requantize in requantizes:
            dequantizes = _only_dequantize_readers(requantize, protected)
            if dequantizes is None:
                continue
            for dequantize in dequantizes:
                dequantize.set_operands(requantize.operands[:3])
                dequantize.attrs["T"] = DType.QINT32
            folded.append(requantize)
            result.sites += 1
        erased = erase_dead(graph, folded, protected)
        result.changed = result.sites > 0
        result.note(f"folded {result.sites} of {len(requantizes)} Requantize ops into the Dequantize reading them "
                    f"({erased} ops erased)")
        kept = len(requantizes) - result.sites
        if kept:
            result.note(f"kept {kept} Requantize ops whose eight-bit result feeds quantized ops or graph outputs")
        return result


def _only_dequantize_readers(requantize: Op, protected: set[str]) -> list[Op] | None:
    """The Dequantize ops that are the only readers of `requantize`, or None if it must stay."""
    if requantize.name in protected or requantize.control_users or len(requantize.operands) < 3:
        return None
    if requantize.operands[0].dtype != DType.QINT32:
        return None
    readers = requantize.users
    if not readers or any(not _dequantizes(reader, requantize) for reader in readers):
        return None
    return readers


def _dequantizes(op: Op, requantize: Op) -> bool:
    """True if `op` is a per-tensor float Dequantize of exactly (value, min, max) of `requantize`."""
    if op.type != "Dequantize" or len(op.operands) != 3 or op.attr("mode", "MIN_COMBINED") != _MODE:
        return False
    if op.attr("axis", -1) != -1 or op.attr("narrow_range", False):
        return False
    return all(value.op is requantize and value.index == i for i, value in enumerate(op.operands))


__all__ = ["FoldRequantizeDequantize"]
