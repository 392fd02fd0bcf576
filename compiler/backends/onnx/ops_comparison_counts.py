"""Ops whose answer is a count of comparisons, which ONNX has no operator for: Bucketize (Keras'
Discretization layer), LowerBound/UpperBound (keras.ops.searchsorted) and InTopK (keras.ops.in_top_k).

Each compares every element against a whole row along a new axis and sums
the hits: O(n * m) work where TF binary-searches, but exact, and for the
sizes these ops see in models a handful of nodes beats a Loop.

Bucketize: TF's kernel returns, per element, `upper_bound(boundaries, x)`: how many boundaries
are not greater than x, and all of them for NaN (no `x < b` ever holds).  The
lowering spells that count directly: x against every boundary along a new
innermost axis, `not (x < b)` (true for NaN, as in TF), summed.  Boundaries are
float32 in TF; an integer input is compared as float32, as C++ compares an int
with a float, and a double one against the float32 boundaries widened.
"""
from __future__ import annotations

import numpy as np

from compiler.backends.onnx import opset
from compiler.backends.onnx.context import LoweringContext
from compiler.backends.onnx.dtypes import onnx_type
from compiler.backends.onnx.errors import UnsupportedOpError
from compiler.backends.onnx.ops_array import int64_operand, shape_slice
from compiler.backends.onnx.ops_elementwise import type_name
from compiler.backends.onnx.registry import AGNOSTIC, lowers
from compiler.ir.dtypes import DType
from compiler.ir.graph import Op

_WIDENED = (DType.DOUBLE,)
_COMPARED_AS_FLOAT = (DType.FLOAT, DType.INT32, DType.INT64)


@lowers("Bucketize", layout=AGNOSTIC)
def _bucketize(ctx: LoweringContext, op: Op) -> None:
    dtype = ctx.dtype(op.operands[0])
    if dtype not in _WIDENED + _COMPARED_AS_FLOAT:
        raise UnsupportedOpError(op.type, op.name, f"Bucketize of {type_name(dtype)} (float, double, int32 or "
                                                   "int64 only)")
    found = ctx.agnostic_operand(op)
    x = found.tensor
    bounds = np.asarray(list(op.attr("boundaries", ())), np.float32)
    if dtype in _WIDENED:
        bounds = bounds.astype(np.float64)
    elif dtype != DType.FLOAT:
        x = ctx.helper1(op, "as_float", "Cast", [x], to=onnx_type(DType.FLOAT))
    column = ctx.helper1(op, "column", "Unsqueeze", [x, ctx.ints([-1], f"{op.name}/innermost")])
    below = ctx.helper1(op, "below", "Less", [column, ctx.initializer(bounds, f"{op.name}/boundaries")])
    counted = ctx.helper1(op, "counted", "Cast", [ctx.helper1(op, "not_below", "Not", [below])],
                          to=onnx_type(DType.INT32))
    ctx.bind(op.results[0], opset.reduce(ctx, op, "ReduceSum", counted, [-1], False), found.perm)


@lowers("LowerBound", "UpperBound")
def _sorted_search(ctx: LoweringContext, op: Op) -> None:
    """Per row, how many sorted elements are below each value (LowerBound: `s < v`) or not above
    it (UpperBound: `not v < s`), which is where TF's std::lower_bound/upper_bound land on a
    sorted row, NaN values included (0 and all of them).  Bools are refused: ONNX's Less does not
    take them, and TF registers no bool kernel either."""
    if ctx.dtype(op.operands[0]) == DType.BOOL:
        raise UnsupportedOpError(op.type, op.name, f"{op.type} of bool (TF has no bool kernel)")
    row = ctx.helper1(op, "row", "Unsqueeze", [ctx.operand(op, 0), ctx.ints([1], f"{op.name}/row_axis")])
    column = ctx.helper1(op, "column", "Unsqueeze", [ctx.operand(op, 1), ctx.ints([2], f"{op.name}/column_axis")])
    if op.type == "LowerBound":
        hits = ctx.helper1(op, "below", "Less", [row, column])
    else:
        hits = ctx.helper1(op, "not_above", "Not", [ctx.helper1(op, "above", "Less", [column, row])])
    counted = ctx.helper1(op, "counted", "Cast", [hits], to=onnx_type(ctx.dtype(op.results[0]) or DType.INT32))
    ctx.bind(op.results[0], opset.reduce(ctx, op, "ReduceSum", counted, [2], False))


@lowers("InTopK", "InTopKV2")
def _in_top_k(ctx: LoweringContext, op: Op) -> None:
    """True where fewer than k classes score strictly above the target's score (ties straddling
    the k-th place are all in, as in TF), and false for a target out of range and for a row that
    holds NaN or infinity anywhere (x - x sums to NaN over such a row, to 0 over a finite one)."""
    scores = ctx.operand(op, 0)
    targets = int64_operand(ctx, op, 1)
    classes = shape_slice(ctx, op, scores, 1, 2, "classes")
    zero = ctx.ints([0], f"{op.name}/zero")
    in_range = ctx.helper1(op, "in_range", "And", [ctx.helper1(op, "not_negative", "GreaterOrEqual", [targets, zero]),
                                                   ctx.helper1(op, "below_classes", "Less", [targets, classes])])
    safe = ctx.helper1(op, "safe_targets", "Where", [in_range, targets, zero])
    class_axis = ctx.ints([1], f"{op.name}/axis")
    column = ctx.helper1(op, "target_column", "Unsqueeze", [safe, class_axis])
    picked = ctx.helper1(op, "picked", "GatherElements", [scores, column], axis=1)
    beaten = ctx.helper1(op, "beaten", "Cast", [ctx.helper1(op, "above", "Greater", [scores, picked])],
                         to=onnx_type(DType.INT64))
    above = opset.reduce(ctx, op, "ReduceSum", beaten, [1], False, suffix="above_count")
    k = ctx.ints([int(op.attr("k"))], f"{op.name}/k") if op.type == "InTopK" else int64_operand(ctx, op, 2)
    inside = ctx.helper1(op, "inside", "Less", [above, k])
    nan_if_not_finite = opset.reduce(ctx, op, "ReduceSum", ctx.helper1(op, "self_difference", "Sub", [scores, scores]),
                                     [1], False, suffix="row_difference")
    finite = ctx.helper1(op, "finite", "Equal", [nan_if_not_finite, ctx.scalar(0, DType.FLOAT, "zero")])
    valid = ctx.helper1(op, "valid", "And", [in_range, finite])
    ctx.bind(op.results[0], ctx.emit1(op, "And", [valid, inside]))
