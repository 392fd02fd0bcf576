"""Which TF integer values are never negative: positions, counts and sizes.

ONNX ops such as OneHot read a negative index from the end, where TF treats
it as out of range; a lowering can use the ONNX op as it stands only when
the index cannot be negative.  That holds for what index-producing ops
return, and stays true through ops that only move, copy or widen elements.
"""
from __future__ import annotations

from compiler.ir.dtypes import DType
from compiler.ir.graph import Value

# Op type -> the result indices that hold positions, counts or sizes.
_INDEX_RESULTS = {
    "TopKV2": (1,), "ArgMax": (0,), "ArgMin": (0,), "Shape": (0,), "ShapeN": None, "Size": (0,), "Rank": (0,),
    "Where": (0,), "Unique": (1,), "UniqueWithCounts": (1, 2), "ListDiff": (1,), "InvertPermutation": (0,),
    "NonMaxSuppressionV3": (0,), "NonMaxSuppressionV4": (0, 1), "NonMaxSuppressionV5": (0, 2),
    "LowerBound": (0,), "UpperBound": (0,), "Bucketize": (0,),
}
# Ops whose result elements are elements of operand 0 (moved, copied, or widened).
_SAME_ELEMENTS = frozenset({"Identity", "Snapshot", "Reshape", "Squeeze", "ExpandDims", "StridedSlice", "Slice",
                            "GatherV2", "Gather", "GatherNd", "Transpose", "Tile", "ReverseV2", "Pack"})
_WIDE_ENOUGH = frozenset({DType.INT32, DType.INT64})
_MAX_DEPTH = 16


def never_negative(value: Value) -> bool:
    """True when every element of `value` is a position, count or size (so >= 0)."""
    for _ in range(_MAX_DEPTH):
        op = value.op
        produced = _INDEX_RESULTS.get(op.type, ())
        if produced is None or value.index in produced:
            return True
        if op.type == "Cast" and op.attr("DstT") in _WIDE_ENOUGH and op.operands[0].dtype in _WIDE_ENOUGH:
            value = op.operands[0]
        elif op.type in _SAME_ELEMENTS and op.operands and (op.type != "Pack" or len(op.operands) == 1):
            value = op.operands[0]
        else:
            return False
    return False
