"""Band parts of matrices as ONNX Trilu.

tf.linalg.band_part, and the constant-mask selects Keras writes for tril/triu
with an offset and for a diagonal (keras.ops.trace), keep the elements on
diagonals `lowest` <= j - i <= `highest` (None: unbounded on that side) and
zero the rest.  One Trilu per bounded side computes that; onnxruntime runs it
at about the cost of a copy, where a Where with a band mask costs several
times more.  Trilu reads its diagonal as a tensor, so a bound known only at
run time (a sliding window clipped to a dynamic length) is a tensor too.
"""
from __future__ import annotations

from typing import Optional, Union

import numpy as np

from compiler.backends.onnx.context import LoweringContext
from compiler.ir.dtypes import DType
from compiler.ir.graph import Op

TRILU_OPSET = 14
# Element types onnxruntime's Trilu kernel takes.
TRILU_TYPES = (DType.FLOAT, DType.DOUBLE, DType.HALF, DType.INT32, DType.INT64, DType.BOOL)
Band = tuple[Optional[Union[int, str]], Optional[Union[int, str]]]  # a str: an int64 scalar tensor
_UNBOUNDED = 1 << 40  # a diagonal past any matrix's: Trilu keeps the whole side


def band_part_diagonals(num_lower: int, num_upper: int) -> Band:
    """tf.linalg.band_part's bounds (negative: the whole side) as diagonals."""
    return (-num_lower if num_lower >= 0 else None), (num_upper if num_upper >= 0 else None)


def run_time_diagonal(ctx: LoweringContext, op: Op, count: str, below: bool) -> str:
    """band_part's `count` diagonals below (or above) the main one, an int64 scalar known at
    run time, as Trilu's diagonal: -count (count), or unbounded when count is negative."""
    side = "lower" if below else "upper"
    negative = ctx.helper1(op, f"{side}_whole", "Less", [count, ctx.scalar(0, DType.INT64, "zero")])
    bound = ctx.helper1(op, f"{side}_bound", "Where", [negative, ctx.scalar(_UNBOUNDED, DType.INT64, "unbounded"),
                                                       count])
    return ctx.helper1(op, f"{side}_diagonal", "Neg", [bound]) if below else bound


def band_of(mask: np.ndarray) -> Optional[Band]:
    """The diagonals boolean `mask` keeps when, over its last two axes and the same for every
    leading index, it is exactly a band; None otherwise."""
    if mask.dtype != np.bool_ or mask.ndim < 2 or not mask.any():
        return None
    rows, cols = mask.shape[-2:]
    matrices = mask.reshape(-1, rows, cols)
    if not (matrices == matrices[0]).all():
        return None
    diagonal = np.arange(cols)[None, :] - np.arange(rows)[:, None]  # j - i
    kept = diagonal[matrices[0]]
    lowest, highest = int(kept.min()), int(kept.max())
    if not np.array_equal(matrices[0], (diagonal >= lowest) & (diagonal <= highest)):
        return None
    return (None if lowest <= 1 - rows else lowest), (None if highest >= cols - 1 else highest)


def emit_band(ctx: LoweringContext, op: Op, x: str, band: Band) -> str:
    """`x` with the elements off the band's diagonals zeroed (`x` itself for an unbounded band).
    The last node is op's main node."""
    lowest, highest = band
    sides = ([(0, highest)] if highest is not None else []) + ([(1, lowest)] if lowest is not None else [])
    for n, (keep_upper, k) in enumerate(sides):
        inputs = [x, k if isinstance(k, str) else ctx.scalar(k, DType.INT64, f"k{k}")]
        last = n == len(sides) - 1
        x = (ctx.emit1(op, "Trilu", inputs, upper=keep_upper) if last
             else ctx.helper1(op, "cut", "Trilu", inputs, upper=keep_upper))
    return x
