"""Shape rules of the ragged ops (kernels/ragged.py): how many values a ragged level holds is data,
so those dims stay unknown; ranks, the row-splits lengths and the uniform dims are static."""
from __future__ import annotations

from typing import Optional

from compiler.analysis.rules.registry import OpFacts, shape_rule
from compiler.ir.shapes import UNKNOWN_SHAPE, Shape

VECTOR = Shape((None,))


@shape_rule("RaggedRange")
def _ragged_range(facts: OpFacts) -> Optional[list[Shape]]:
    """Splits of one row per start/limit/delta (1 when all are scalars), and the values."""
    rows: Optional[int] = 1
    for index in range(3):
        dims = facts.dims(index)
        if dims is None:
            rows = None
        elif len(dims) == 1:
            rows = dims[0] if rows == 1 or rows is None else rows
    return [Shape((None if rows is None else rows + 1,)), VECTOR]


@shape_rule("RaggedTensorToSparse")
def _ragged_to_sparse(facts: OpFacts) -> Optional[list[Shape]]:
    rank = facts.rank(len(facts.op.operands) - 1)
    width = None if rank is None else len(facts.op.operands) - 1 + rank
    return [Shape((None, width)), VECTOR, Shape((width,))]


@shape_rule("RaggedGather")
def _ragged_gather(facts: OpFacts) -> Optional[list[Shape]]:
    """The indices' own dims give uniform splits of known length; the params' levels are data."""
    count = len(facts.op.operands) - 2
    indices, values = facts.dims(count + 1), facts.dims(count)
    splits = [VECTOR] * (len(facts.op.results) - 1)
    if indices is not None:
        rows: Optional[int] = 1
        for dim in range(min(len(indices) - 1, len(splits))):
            rows = None if rows is None or indices[dim] is None else rows * indices[dim]
            splits[dim] = Shape((None if rows is None else rows + 1,))
    return splits + [UNKNOWN_SHAPE if values is None else Shape((None,) + tuple(values[1:]))]


@shape_rule("RaggedTensorToTensor")
def _ragged_to_tensor(facts: OpFacts) -> Optional[list[Shape]]:
    """The requested dims where given (>= 0), the values' uniform dims, unknown widths elsewhere."""
    types = [t.decode() if isinstance(t, bytes) else str(t) for t in facts.attr("row_partition_types", ())]
    ragged = len(types) - (1 if types and types[0] == "FIRST_DIM_SIZE" else 0)
    values = facts.dims(1)
    if values is None:
        return None
    rank = ragged + len(values)
    requested = facts.known_ints(0)
    dims: list[Optional[int]] = [None] * rank
    if requested is not None and facts.rank(0) == 1 and len(requested) == rank:
        dims = [d if d is not None and d >= 0 else None for d in requested]
    for i in range(1, len(values)):
        if values[i] is not None:
            dims[rank - len(values) + i] = values[i]
    return [Shape(tuple(dims))]


@shape_rule("RaggedTensorToVariant")
def _to_variant(facts: OpFacts) -> Optional[list[Shape]]:
    """A scalar, or one variant per row of the outermost splits when batched."""
    if not facts.attr("batched_input", False):
        return [Shape(())]
    splits = facts.dims(0) if len(facts.op.operands) > 1 else None
    rows = None if not splits or splits[0] is None else splits[0] - 1
    return [Shape((rows,))]
