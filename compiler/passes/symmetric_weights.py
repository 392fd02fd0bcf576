"""symmetric_weights: put convolution and matmul weights on the grid onnxruntime's fast int8 kernels use.

GTT's quantize_weights and quantize_nodes store a weight as quint8 codes over
[min(w), max(w)], so its zero point is wherever 0.0 falls.  onnxruntime's fast
path on x86 multiplies uint8 activations by *int8* weights with zero point 0
(U8S8); a uint8 weight with another zero point takes a slower path.  This
pass re-grids every weight of a quantized product onto the symmetric grid

    step s = max|w| / 127,   codes c = round(w / s) + 128 in [1, 255],
    range [min, max] = [-128 s, 127 s]

which TF reads as ordinary quint8 (its zero point is exactly 128), and which
the ONNX backend writes as int8 codes c - 128 with scale s: both sides then
hold the same weights, element for element.

Sites: the filter of QuantizedConv2D / QuantizedMatMul (stored codes, or a
QuantizeV2 of a float Const), and the filter of a float Conv2D,
DepthwiseConv2dNative or MatMul that reads a Dequantize of stored codes or a
float Const (these become Const + Dequantize on the same grid, so the ONNX
backend can run them in eight bits too).  Run before quantize_weights (as
mobile-int8 with --calibration does), it quantizes the float weights once,
straight onto the grid; quantize_nodes then reads those codes.  The report
says what the grid costs: for stored weights, how far each element moved in
steps (LSB) of its previous grid; for float weights, how far each element is
from its float value in steps of the quint8 grid GTT would have used.  (Not a
GTT transform.)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from compiler.errors import PassFailure
from compiler.ir.attrs import attr_text
from compiler.ir.dtypes import DType
from compiler.ir.graph import Graph, Op, Value
from compiler.passes.base import Pass, PassContext, PassResult, register_pass
from compiler.passes.quantize_weights import new_const, round_half_away, weight_range
from compiler.rewrite.constants import const_array
from compiler.rewrite.edit import erase_dead, node_names
from compiler.runtime.kernels import get_kernel
from compiler.runtime.kernels.quantized_conversion import float_for_one_level, zero_point

QUANTIZED_PRODUCTS = ("QuantizedConv2D", "QuantizedMatMul")
FLOAT_PRODUCTS = ("Conv2D", "DepthwiseConv2dNative", "MatMul")
_FILTER = 1
_FILTER_RANGE = (4, 5)  # the filter's (min, max) operands of a quantized product
_ZERO_CODE = 128


@dataclass(frozen=True)
class SymmetricGrid:
    """A weight on the symmetric grid: quint8 codes and the TF range that makes 128 the zero."""

    codes: np.ndarray
    lo: np.float32
    hi: np.float32

    @property
    def step(self) -> np.float32:
        return float_for_one_level(self.lo, self.hi, np.uint8)


def symmetric_grid(values: np.ndarray) -> SymmetricGrid:
    """`values` on the symmetric grid (see the module docstring); all-zero weights get step 1."""
    peak = float(np.max(np.abs(values))) if values.size else 0.0
    step = np.float32(peak / 127.0) if peak > 0 else np.float32(1.0)
    lo, hi = np.float32(-128.0 * step), np.float32(127.0 * step)
    # The codes are computed with TF's own step for [lo, hi], so TF and ONNX agree on every weight.
    tf_step = float(float_for_one_level(lo, hi, np.uint8))
    codes = np.clip(round_half_away(values.astype(np.float64) / tf_step), -127, 127) + _ZERO_CODE
    if zero_point(lo, hi, np.uint8) != _ZERO_CODE:
        raise PassFailure(f"symmetric_weights: range [{lo}, {hi}] does not put 0.0 on code 128")
    return SymmetricGrid(codes.astype(np.uint8), lo, hi)


def is_symmetric(lo: float, hi: float, codes: np.ndarray) -> bool:
    """Whether quint8 `codes` over [lo, hi] already are a symmetric-grid weight (zero at 128, no code 0)."""
    return (zero_point(np.float32(lo), np.float32(hi), np.uint8) == _ZERO_CODE
            and bool(np.isclose(np.float32(-lo) / np.float32(hi), 128.0 / 127.0, rtol=1e-6))
            and (codes.size == 0 or int(codes.min()) >= 1))


@dataclass
class _Moves:
    """How far re-gridding moved a set of weights, in steps (LSB) of a reference grid."""

    weights: int = 0
    max_lsb: float = 0.0
    total_lsb: float = 0.0
    elements: int = 0

    def add(self, before: np.ndarray, after: np.ndarray, step: float) -> None:
        moved = np.abs(after.astype(np.float64) - before.astype(np.float64)) / step
        self.weights += 1
        self.max_lsb = max(self.max_lsb, float(moved.max(initial=0.0)))
        self.total_lsb += float(moved.sum())
        self.elements += moved.size

    def describe(self) -> str:
        mean = self.total_lsb / max(self.elements, 1)
        return f"at most {self.max_lsb:.2f} LSB (mean {mean:.3f} LSB over {self.elements} elements)"


@dataclass
class _Cost:
    """Stored eight-bit weights moved (against their previous grid), float weights quantized
    (against GTT's quint8 grid of the same weight), and weights left as they were."""

    regridded: _Moves = field(default_factory=_Moves)
    quantized: _Moves = field(default_factory=_Moves)
    unchanged: int = 0


@dataclass
class _Rewriter:
    graph: Graph
    cost: _Cost = field(default_factory=_Cost)
    done: dict[Value, tuple[Value, Value, Value]] = field(default_factory=dict)

    def grid_consts(self, base: str, grid: SymmetricGrid, before: Op) -> tuple[Value, Value, Value]:
        parts = [(f"{base}/symmetric_codes", grid.codes, DType.QUINT8), (f"{base}/symmetric_min", grid.lo, DType.FLOAT),
                 (f"{base}/symmetric_max", grid.hi, DType.FLOAT)]
        made = [new_const(self.graph, self.graph.unique_name(name), np.asarray(array), dtype, before=before)
                for name, array, dtype in parts]
        return made[0].result, made[1].result, made[2].result

    def regrid(self, source: Value, values: np.ndarray, old: Optional[tuple[np.ndarray, float]], user: Op
               ) -> tuple[Value, Value, Value]:
        """New (codes, min, max) Consts for the weight `source` (made once per weight); `old` is
        (the weight as it was stored, its step), None for a float weight."""
        if source in self.done:
            return self.done[source]
        grid = symmetric_grid(values)
        after = dequantized(grid.codes, grid.lo, grid.hi)
        if old is None:
            lo, hi = weight_range(values)
            self.cost.quantized.add(values, after, float(float_for_one_level(lo, hi, np.uint8)))
        else:
            self.cost.regridded.add(old[0], after, old[1])
        self.done[source] = self.grid_consts(source.op.name, grid, user)
        return self.done[source]


def dequantized(codes: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """The float weights TF's Dequantize (MIN_FIRST) reads from quint8 codes over [lo, hi]."""
    attrs = {"T": DType.QUINT8, "mode": "MIN_FIRST"}
    return np.asarray(get_kernel("Dequantize")(attrs, [codes, np.float32(lo), np.float32(hi)])[0])


def _stored_weight(codes: Value, lo: Value, hi: Value) -> Optional[tuple[np.ndarray, float, float]]:
    """(quint8 codes, min, max) when all three are constants and the codes are quint8."""
    arrays = [const_array(v) for v in (codes, lo, hi)]
    if any(a is None for a in arrays) or codes.dtype != DType.QUINT8:
        return None
    return arrays[0], float(np.asarray(arrays[1]).reshape(-1)[0]), float(np.asarray(arrays[2]).reshape(-1)[0])


@register_pass
class SymmetricWeights(Pass):
    """Re-grid product weights onto the symmetric int8 grid TF and onnxruntime both run exactly (gttc extension)."""

    name = "symmetric_weights"

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        rewriter = _Rewriter(graph)
        stale: list[Op] = []
        for op in list(graph):
            if op.type in QUANTIZED_PRODUCTS and len(op.operands) >= 6:
                stale.extend(_quantized_product(rewriter, op))
            elif op.type in FLOAT_PRODUCTS and len(op.operands) >= 2:
                stale.extend(_float_product(rewriter, op))
        erase_dead(graph, stale, node_names(ctx.inputs) | node_names(ctx.outputs))
        return _report(rewriter.cost)


def _quantized_product(rewriter: _Rewriter, op: Op) -> list[Op]:
    """Re-grid the filter of a QuantizedConv2D/MatMul; returns ops that may now be dead."""
    weight, lo, hi = op.operands[_FILTER], op.operands[_FILTER_RANGE[0]], op.operands[_FILTER_RANGE[1]]
    stored = _stored_weight(weight, lo, hi)
    values: Optional[np.ndarray] = None  # the float weights, when the graph still has them
    if stored is not None:
        codes, low, high = stored
        if is_symmetric(low, high, codes):
            rewriter.cost.unchanged += 1
            return []
    else:
        source = _quantized_float_const(weight, lo, hi)
        if source is None:
            return []
        values, codes, low, high = source
    old = dequantized(codes, low, high)
    step = float(float_for_one_level(low, high, np.uint8))
    new = rewriter.regrid(weight, old if values is None else values, (old, step), op)
    stale = [weight.op, lo.op, hi.op]
    op.set_operand(_FILTER, new[0])
    op.set_operand(_FILTER_RANGE[0], new[1])
    op.set_operand(_FILTER_RANGE[1], new[2])
    return stale


def _quantized_float_const(weight: Value, lo: Value, hi: Value
                           ) -> Optional[tuple[np.ndarray, np.ndarray, float, float]]:
    """(float values, TF's codes, min, max) for a filter that is QuantizeV2 of a float Const at run time."""
    quantize = weight.op
    if quantize.type != "QuantizeV2" or lo.op is not quantize or hi.op is not quantize or weight.index != 0:
        return None
    if quantize.operands[0].dtype != DType.FLOAT or len(quantize.operands) != 3:
        return None
    source = _behind_identities(quantize.operands[0])
    values = weight_values(source)
    if values is None:
        return None
    bounds = [_static_bound(v, values, source) for v in quantize.operands[1:3]]
    if any(b is None for b in bounds):
        return None
    codes, low, high = get_kernel("QuantizeV2")(quantize.attrs, [np.asarray(values)] + bounds)
    return (np.asarray(values, np.float32), np.asarray(codes), float(np.asarray(low).reshape(-1)[0]),
            float(np.asarray(high).reshape(-1)[0]))


def _behind_identities(value: Value) -> Value:
    while value.op.type == "Identity" and len(value.op.operands) == 1 and not value.op.control_deps:
        value = value.op.operands[0]
    return value


def weight_values(value: Value) -> Optional[np.ndarray]:
    """Float weights known at compile time: a float Const, or TF's Dequantize of stored codes."""
    found = const_array(value)
    if found is not None:
        return np.asarray(found, np.float32)
    op = value.op
    if op.type == "Dequantize" and len(op.operands) == 3 and attr_text(op.attr("mode", "MIN_COMBINED")) == "MIN_FIRST":
        stored = _stored_weight(*op.operands)
        if stored is not None:
            return dequantized(*stored)
    return None



def _static_bound(bound: Value, values: np.ndarray, source: Value) -> Optional[np.ndarray]:
    """A QuantizeV2 range operand known at compile time: a constant, or (GTT's form) the Min or
    Max of a flattening Reshape of the constant weights themselves."""
    found = const_array(bound)
    if found is not None:
        return np.asarray(found, np.float32)
    reduction = bound.op
    if reduction.type not in ("Min", "Max") or not reduction.operands or reduction.operands[0].op.type != "Reshape":
        return None
    if _behind_identities(reduction.operands[0].op.operands[0]) is not source:
        return None
    flat = np.asarray(values, np.float32).reshape(-1)
    if flat.size == 0:
        return None
    return np.float32(flat.min() if reduction.type == "Min" else flat.max())


def _float_product(rewriter: _Rewriter, op: Op) -> list[Op]:
    """Give a float conv/matmul's constant filter a symmetric-grid Const + Dequantize."""
    weight = op.operands[_FILTER]
    producer = weight.op
    if producer.type == "Dequantize" and attr_text(producer.attr("mode", "MIN_COMBINED")) == "MIN_FIRST":
        stored = _stored_weight(*producer.operands[:3]) if len(producer.operands) == 3 else None
        if stored is None:
            return []
        codes, low, high = stored
        if is_symmetric(low, high, codes):
            rewriter.cost.unchanged += 1
            return []
        old = dequantized(codes, low, high)
        new = rewriter.regrid(weight, old, (old, float(float_for_one_level(low, high, np.uint8))), op)
    else:
        values = const_array(weight)
        if values is None or weight.dtype != DType.FLOAT or values.size == 0:
            return []
        new = rewriter.regrid(weight, np.asarray(values, np.float32), None, op)
    dequantize = _dequantize_of(rewriter, weight, new, op)
    op.set_operand(_FILTER, dequantize)
    return [producer]


def _dequantize_of(rewriter: _Rewriter, weight: Value, parts: tuple[Value, Value, Value], user: Op) -> Value:
    """One Dequantize (MIN_FIRST) of the new codes per weight, shared by every reader."""
    key = parts[0]
    found = [u for u in key.users if u.type == "Dequantize"]
    if found:
        return found[0].results[0]
    graph = rewriter.graph
    op = graph.create_op("Dequantize", graph.unique_name(f"{weight.op.name}/symmetric"), operands=list(parts),
                         attrs={"T": DType.QUINT8, "mode": "MIN_FIRST"}, before=user)
    return op.results[0]


def _report(cost: _Cost) -> PassResult:
    result = PassResult()
    result.sites = cost.regridded.weights + cost.quantized.weights
    result.changed = result.sites > 0
    if not result.sites and not cost.unchanged:
        result.note("no convolution or matmul weights to put on the symmetric grid")
        return result
    if cost.regridded.weights:
        result.note(f"re-gridded {cost.regridded.weights} eight-bit weights to symmetric int8: each element moved "
                    f"{cost.regridded.describe()} of its previous grid")
    if cost.quantized.weights:
        result.note(f"quantized {cost.quantized.weights} float weights onto the symmetric grid: each element is "
                    f"{cost.quantized.describe()} of GTT's quint8 grid from its float value (GTT's grid: 0.5)")
    if cost.unchanged:
        result.note(f"{cost.unchanged} weights were already symmetric")
    return result


__all__ = ["FLOAT_PRODUCTS", "QUANTIZED_PRODUCTS", "SymmetricGrid", "SymmetricWeights", "dequantized", "is_symmetric",
           "symmetric_grid", "weight_values"]
