"""Evaluate cheap ops whose operands are all constant, with the reference kernels.

Static analysis needs some values, not just shapes: a Reshape's target, a
Mean's axes, the BN statistics Keras computes from weights.  Only ops that
cost O(elements) are evaluated and only up to `MAX_ELEMENTS`, so analysing a
graph never turns into running it; real constant folding is a pass.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from compiler.analysis.rules.elementwise import BROADCAST_OPS, SAME_SHAPE_OPS
from compiler.ir.graph import Op

MAX_ELEMENTS = 1 << 20

_ARRAY_OPS = (
    "Reshape", "Squeeze", "ExpandDims", "ConcatV2", "Concat", "Pack", "Unpack", "Transpose", "ReverseV2",
    "Pad", "PadV2", "MirrorPad", "Slice", "StridedSlice", "Gather", "GatherV2", "Fill", "Tile",
    "Split", "SplitV", "Mean", "Sum", "Max", "Min", "Prod", "All", "Any", "ArgMax", "ArgMin",
    "Range", "BroadcastTo", "BroadcastArgs", "Select", "Shape", "Size", "Rank", "OneHot", "MatrixBandPart",
)
# Ops that never need evaluating: their result is an operand as it is.
# A PlaceholderWithDefault that is not fed is its default.
PASS_THROUGH_OPS = frozenset({
    "Identity", "StopGradient", "PreventGradient", "Snapshot", "IdentityN", "PlaceholderWithDefault",
})
# CheckNumerics is an identity on data that passed TF's checks; evaluating would only re-check.
EVALUATED_OPS = frozenset(SAME_SHAPE_OPS + BROADCAST_OPS + _ARRAY_OPS) - {"CheckNumerics", "CheckNumericsV2"}


def is_evaluable(op: Op) -> bool:
    """Whether `op` is on the cheap list (its operands must still all be constant)."""
    return op.type in EVALUATED_OPS


def evaluate(op: Op, operands: Sequence[np.ndarray]) -> Optional[list[np.ndarray]]:
    """Run `op`'s reference kernel; None when it has none, fails, or the result is too big."""
    if any(np.asarray(a).size > MAX_ELEMENTS for a in operands):
        return None
    from compiler.runtime.kernels import KernelError, get_kernel

    try:
        results = get_kernel(op.type)(op.attrs, [np.asarray(a) for a in operands])
    except KernelError:
        return None
    if len(results) != len(op.results) or any(np.asarray(r).size > MAX_ELEMENTS for r in results):
        return None
    return [_as_result_type(np.asarray(r), op, i) for i, r in enumerate(results)]


def _as_result_type(array: np.ndarray, op: Op, index: int) -> np.ndarray:
    """Kernels may compute wider than TF; store what TF would hold."""
    dtype = op.results[index].dtype
    if dtype is None or dtype.to_numpy() == array.dtype:
        return array
    return array.astype(dtype.to_numpy())
