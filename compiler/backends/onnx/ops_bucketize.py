"""Bucketize (Keras' Discretization layer): ONNX has no such operator.

TF's kernel returns, per element, `upper_bound(boundaries, x)`: how many boundaries
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
from compiler.backends.onnx.registry import AGNOSTIC, lowers
from compiler.ir.dtypes import DType
from compiler.ir.graph import Op

_WIDENED = (DType.DOUBLE,)
_COMPARED_AS_FLOAT = (DType.FLOAT, DType.INT32, DType.INT64)


@lowers("Bucketize", layout=AGNOSTIC)
def _bucketize(ctx: LoweringContext, op: Op) -> None:
    dtype = ctx.dtype(op.operands[0])
    if dtype not in _WIDENED + _COMPARED_AS_FLOAT:
        raise UnsupportedOpError(op.type, op.name, f"Bucketize of {dtype} (float, double, int32 or int64 only)")
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
