"""Integer vectors computed from run-time sizes, read as affine terms of those sizes.

Keras builds shapes it cannot know when it traces (a repeat's Reshape target, a transposed
conv's output size) from `Shape(x)` with a few integer ops.  The static analysis sees only
that such an element is unknown; read op by op, it is `factor * (size of x's axis) + offset`,
which is enough to prove a Reshape is a repeat, or that a transposed conv's padding is the same
whatever the input size.  Only the ops TF and Keras use for this are read; anything else gives
None.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

import numpy as np

from compiler.backends.onnx.context import LoweringContext
from compiler.ir.graph import Op, Value
from compiler.runtime.kernels.array import strided_slice_index
from compiler.runtime.kernels.registry import KernelError

_LONGEST = 8  # constant vectors past this length are not shapes
_DEPTH = 12  # ops followed back from the vector


@dataclass(frozen=True)
class Term:
    """factor * (the size of `value`'s axis `axis`, known at run time) + offset."""

    value: Value
    axis: int
    factor: int = 1
    offset: int = 0

    def scaled(self, k: int) -> "Term":
        return Term(self.value, self.axis, self.factor * k, self.offset * k)

    def shifted(self, k: int) -> "Term":
        return Term(self.value, self.axis, self.factor, self.offset + k)


Element = Union[int, Term]


def terms(ctx: LoweringContext, value: Value, depth: int = _DEPTH) -> Optional[list[Element]]:
    """The elements of a small integer vector (a scalar as one element), or None."""
    array = ctx.constant(value)
    if array is not None:
        ok = array.dtype.kind in "iu" and array.size <= _LONGEST
        return [int(v) for v in array.reshape(-1)] if ok else None
    op = value.op
    if depth == 0:
        return None
    if op.type == "Shape":
        rank = ctx.rank(op.operands[0])
        return None if rank is None else [Term(op.operands[0], i) for i in range(rank)]
    if op.type in ("Cast", "Identity", "ExpandDims", "Reshape"):
        return terms(ctx, op.operands[0], depth - 1)
    if op.type in ("Pack", "ConcatV2"):
        parts = [terms(ctx, part, depth - 1) for part in (op.operands[:-1] if op.type == "ConcatV2" else op.operands)]
        return None if any(p is None for p in parts) else [e for p in parts for e in p]  # type: ignore[union-attr]
    if op.type == "StridedSlice":
        return _sliced(ctx, op, terms(ctx, op.operands[0], depth - 1))
    if op.type in ("Mul", "Add", "AddV2", "Sub"):
        return _arithmetic(op.type, terms(ctx, op.operands[0], depth - 1), terms(ctx, op.operands[1], depth - 1))
    return None


def _sliced(ctx: LoweringContext, op: Op, elements: Optional[list[Element]]) -> Optional[list[Element]]:
    bounds = [ctx.constant(v) for v in op.operands[1:4]]
    if elements is None or any(b is None for b in bounds):
        return None
    masks = {m: int(op.attr(m, 0)) for m in ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask",
                                              "shrink_axis_mask")}
    held = np.empty(len(elements), dtype=object)
    for i, element in enumerate(elements):
        held[i] = element
    try:
        index = strided_slice_index((len(elements),), *(b.reshape(-1).tolist() for b in bounds), masks)  # type: ignore
        picked = held[index]
    except (ValueError, IndexError, TypeError, KernelError):
        return None
    return list(picked) if isinstance(picked, np.ndarray) else [picked]


def _arithmetic(kind: str, a: Optional[list[Element]], b: Optional[list[Element]]) -> Optional[list[Element]]:
    """One-element arithmetic that stays affine: ints with ints, a term times or plus/minus an int."""
    if a is None or b is None or len(a) != 1 or len(b) != 1:
        return None
    (x,), (y,) = a, b
    if isinstance(x, int) and isinstance(y, int):
        return [{"Mul": x * y, "Sub": x - y}.get(kind, x + y)]
    if kind == "Mul":
        term, k = (x, y) if isinstance(x, Term) else (y, x)
        return [term.scaled(k)] if isinstance(k, int) else None  # type: ignore[union-attr]
    if isinstance(x, Term) and isinstance(y, int):
        return [x.shifted(-y if kind == "Sub" else y)]
    if isinstance(x, int) and isinstance(y, Term) and kind != "Sub":
        return [y.shifted(x)]
    return None
