"""The op-type -> shape rule table, and what a rule gets to look at.

A rule is a plain function `rule(facts) -> list[Shape] | None` returning one
shape per result (None: nothing known).  Rules see operand shapes and, for
operands that are constant, their values, because TF ops take axes, sizes
and paddings as tensors.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

import numpy as np

from compiler.ir.dtypes import DType
from compiler.ir.graph import Op
from compiler.ir.op_registry import attr_defaults
from compiler.ir.shapes import Shape, UNKNOWN_SHAPE


@dataclass
class OpFacts:
    """One op and what is statically known about its operands."""

    op: Op
    shapes: Sequence[Shape]
    dtypes: Sequence[Optional[DType]]
    constant: Callable[[int], Optional[np.ndarray]]
    known: Callable[[int], Optional[list[Optional[int]]]] = lambda index: None

    def known_ints(self, index: int) -> Optional[list[Optional[int]]]:
        """Operand `index` as a flat list of ints, None for elements only run time knows
        (a batch read with Shape); None when nothing about its elements is known."""
        found = self.known(index)
        return found if found is not None else self.ints(index)

    def attr(self, name: str, default: Any = None) -> Any:
        """An attribute, falling back to the OpDef default, then to `default`."""
        if name in self.op.attrs:
            return self.op.attrs[name]
        return attr_defaults(self.op.type).get(name, default)

    def ints(self, index: int) -> Optional[list[int]]:
        """Operand `index` as a flat list of ints, if it is constant."""
        value = self.constant(index)
        return None if value is None else [int(v) for v in np.asarray(value).reshape(-1)]

    def rank(self, index: int) -> Optional[int]:
        return self.shapes[index].rank

    def dims(self, index: int) -> Optional[tuple[Optional[int], ...]]:
        return self.shapes[index].dims


Rule = Callable[[OpFacts], Optional[list[Shape]]]

SHAPE_RULES: dict[str, Rule] = {}


def shape_rule(*op_types: str) -> Callable[[Rule], Rule]:
    """Register the decorated function as the shape rule of each op type."""

    def register(fn: Rule) -> Rule:
        for op_type in op_types:
            if op_type in SHAPE_RULES:
                raise ValueError(f"duplicate shape rule for '{op_type}'")
            SHAPE_RULES[op_type] = fn
        return fn

    return register


def unknown_rank(count: int = 1) -> list[Shape]:
    return [UNKNOWN_SHAPE] * count


def broadcast(shapes: Sequence[Shape]) -> Shape:
    """numpy-style broadcast of static shapes; unknown dims stay unknown unless a side is > 1."""
    if any(s.dims is None for s in shapes):
        return UNKNOWN_SHAPE
    rank = max((len(s.dims) for s in shapes), default=0)  # type: ignore[arg-type]
    out: list[Optional[int]] = []
    for i in range(rank):
        dims = [s.dims[i - rank + len(s.dims)] for s in shapes if i - rank + len(s.dims) >= 0]  # type: ignore
        out.append(_broadcast_dim(dims))
    return Shape(tuple(out))


def _broadcast_dim(dims: Sequence[Optional[int]]) -> Optional[int]:
    big = {d for d in dims if d is not None and d != 1}
    if len(big) == 1:
        return big.pop()
    if all(d == 1 for d in dims):
        return 1
    return None


def normalize_axis(axis: int, rank: int) -> int:
    """A possibly negative axis as an index in [0, rank)."""
    if not -rank <= axis < rank:
        raise ValueError(f"axis {axis} out of range for rank {rank}")
    return axis % rank
