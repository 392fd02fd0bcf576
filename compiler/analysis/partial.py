"""Integer vectors with some elements known: shapes computed at run time around a dynamic batch.

A model frozen with a dynamic batch computes its reshape targets and transposed
convs' output sizes from `Shape(x)`: `Pack(Shape(x)[0], 22, 11, 4)`.  Only the
batch is unknown, yet without element-level facts the whole target is, and so
is every rank after the Reshape.  A `Partial` is such a value: its elements and
which of them are known.  Ops that only move elements (slices, gathers, packs,
concats, reshapes) are run on the elements and, separately, on the known-mask;
integer arithmetic is run on the elements, known where all operands are.  A
result whose every element is known is a plain constant.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import numpy as np

from compiler.analysis.const_eval import evaluate
from compiler.ir.graph import Op, Value
from compiler.ir.shapes import Shape

LARGEST = 64  # elements: shape vectors are short; anything longer is data, not worth tracking


@dataclass(frozen=True)
class Partial:
    """An integer array whose elements are known where `known` says."""

    values: np.ndarray
    known: np.ndarray

    def ints(self) -> list[Optional[int]]:
        """The elements, flattened, None where unknown."""
        return [int(v) if k else None for v, k in zip(self.values.reshape(-1), self.known.reshape(-1))]


def of_shape(shape: Shape) -> Optional[Partial]:
    """`Shape(x)` of a value whose rank is known but not every dimension."""
    if shape.dims is None or len(shape.dims) > LARGEST:
        return None
    return Partial(np.array([d or 0 for d in shape.dims], np.int64), np.array([d is not None for d in shape.dims]))


# Ops that only move elements, and which operands carry them (others must be constant).
_MOVES: dict[str, Callable[[int], Sequence[int]]] = {
    "StridedSlice": lambda n: (0,), "Slice": lambda n: (0,), "GatherV2": lambda n: (0,), "Gather": lambda n: (0,),
    "Reshape": lambda n: (0,), "Squeeze": lambda n: (0,), "ExpandDims": lambda n: (0,), "Transpose": lambda n: (0,),
    "Identity": lambda n: (0,), "Unpack": lambda n: (0,), "Pack": lambda n: range(n),
    "ConcatV2": lambda n: range(n - 1), "Concat": lambda n: range(1, n),
}
# Elementwise integer arithmetic Keras uses on sizes (times a repeat count, a flattened length).
_ARITHMETIC = frozenset({"Mul", "Add", "AddV2", "Sub", "FloorDiv", "Maximum", "Minimum", "Cast"})


def _unknown(shape: Shape) -> Optional[Partial]:
    """A value of known (small) shape and no known element: a size computed at run time."""
    if not shape.is_fully_defined or (shape.num_elements or 0) > LARGEST:
        return None
    dims = tuple(shape.dims)  # type: ignore[arg-type]
    return Partial(np.zeros(dims, np.int64), np.zeros(dims, bool))


def partial_results(op: Op, constant: Callable[[Value], Optional[np.ndarray]],
                    partial: Callable[[Value], Optional[Partial]], shape: Callable[[Value], Shape]
                    ) -> Optional[list[Optional[Partial]]]:
    """The results of `op` as Partials, when an operand is partial and the op keeps elements apart.
    Element-carrying operands may also be wholly unknown (a batch size multiplied out by Prod)."""
    if op.type in _MOVES:
        carried = set(_MOVES[op.type](len(op.operands)))
    elif op.type in _ARITHMETIC:
        carried = set(range(len(op.operands)))
    else:
        return None
    values, masks, known_some, unknown_some = [], [], False, False
    for index, value in enumerate(op.operands):
        array = constant(value)
        found = None
        if array is None and index in carried:
            found = partial(value) or _unknown(shape(value))
        if array is None and found is None:
            return None
        if found is not None:
            known_some, unknown_some = known_some or bool(found.known.any()), True
            values.append(found.values if op.type not in _ARITHMETIC else np.where(found.known, found.values, 1))
            masks.append(found.known)
        else:
            known_some = known_some or index in carried
            values.append(np.asarray(array))
            masks.append(np.ones(np.shape(array), bool) if index in carried else np.asarray(array))
    if not (known_some and unknown_some) or any(np.size(v) > LARGEST for v in values):
        return None
    computed = evaluate(op, [v.astype(op.operands[i].dtype.to_numpy()) if op.operands[i].dtype else v
                             for i, v in enumerate(values)])
    if computed is None:
        return None
    if op.type in _ARITHMETIC:
        known = [np.logical_and.reduce(np.broadcast_arrays(*masks)) if len(masks) > 1 else masks[0]]
    else:
        moved = evaluate(op, [m.astype(values[i].dtype) if i in carried else m for i, m in enumerate(masks)])
        if moved is None:
            return None
        known = [m != 0 for m in moved]
    return [Partial(np.asarray(v).astype(np.int64), np.broadcast_to(k, np.shape(v)))
            if np.asarray(v).dtype.kind in "iu" else None for v, k in zip(computed, known)]
