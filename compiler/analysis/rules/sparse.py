"""Shapes of the sparse-triple, set and bounding-box ops: entry counts are known only at run time,
but index widths, shape-vector lengths and the bounding box outputs are fixed."""
from __future__ import annotations

from typing import Optional

from compiler.analysis.rules.registry import OpFacts, shape_rule
from compiler.ir.shapes import Shape


def _length(facts: OpFacts, index: int) -> Optional[int]:
    """The length of 1-D operand `index`, if known."""
    dims = facts.dims(index)
    return dims[0] if dims is not None and len(dims) == 1 else None


@shape_rule("SparseReshape")
def _sparse_reshape(facts: OpFacts) -> Optional[list[Shape]]:
    """[entries, new rank] indices and the [new rank] shape."""
    entries = facts.dims(0)[0] if facts.rank(0) == 2 else None
    rank = _length(facts, 2)
    return [Shape((entries, rank)), Shape((rank,))]


@shape_rule("SparseFillEmptyRows")
def _sparse_fill_empty_rows(facts: OpFacts) -> Optional[list[Shape]]:
    """[filled entries, rank] indices, [filled] values, [dense rows] flags, [entries] reverse map."""
    width = facts.dims(0)[1] if facts.rank(0) == 2 else _length(facts, 2)
    entries = facts.dims(0)[0] if facts.rank(0) == 2 else None
    dense = facts.known_ints(2)
    rows = dense[0] if dense else None
    return [Shape((None, width)), Shape((None,)), Shape((rows,)), Shape((entries,))]


@shape_rule("DenseToDenseSetOperation")
def _dense_to_dense_set_operation(facts: OpFacts) -> Optional[list[Shape]]:
    """A SparseTensor of the operands' rank: [entries, rank] indices, [entries] values, [rank] shape."""
    rank = facts.rank(0) if facts.rank(0) is not None else facts.rank(1)
    return [Shape((None, rank)), Shape((None,)), Shape((rank,))]


@shape_rule("SampleDistortedBoundingBox", "SampleDistortedBoundingBoxV2")
def _sample_distorted_bounding_box(facts: OpFacts) -> Optional[list[Shape]]:
    """begin and size for a 3-D Slice, and the crop as one [1, 1, 4] box."""
    return [Shape((3,)), Shape((3,)), Shape((1, 1, 4))]
