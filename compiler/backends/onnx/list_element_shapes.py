"""Item shapes for TensorLists created with an unknown element rank, taken from what is written.

A `tf.TensorArray` in a TF2 function (a `for i in tf.range(n)` loop writing
one step per iteration, or a growing array collecting a data-dependent
loop's outputs) freezes to a TensorListReserve whose element shape is
"unknown rank": TF learns the shape only from the first write.  The ONNX
export stores a list as one dense tensor and must allocate it before the
first write, so it needs the rank up front.  This rewrite gives such a list
the shape that every item it is given and every read of it agree on
(unknown dimensions stay unknown, as -1), by replacing the creation's
element-shape operand with that constant.  That only narrows what TF would
accept anyway: a write of another shape is refused by TF too.  A list that
reaches anything but control flow, identities and the list ops below, or
whose items disagree, is left alone (and refused by name when lowered).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Collection, Iterable, Optional

import numpy as np

from compiler.backends.onnx.ops_tensor_list import LIST_CREATES, carried_on
from compiler.backends.onnx.tf1_frames import frame_shapes
from compiler.ir.dtypes import DType
from compiler.ir.graph import Graph, Op, Value
from compiler.ir.shapes import Shape
from compiler.rewrite.constants import ordered_const_array
from compiler.rewrite.edit import add_const

# List op -> the operand holding the element shape it reads with (readers), or None (writers: the item).
_READS = {"TensorListGetItem": 2, "TensorListStack": 1, "TensorListGather": 2, "TensorListPopBack": 1}
_PASSES_ON = frozenset({"TensorListSetItem", "TensorListPushBack", "TensorListResize"})
_ENDS = frozenset({"TensorListLength", "TensorListElementShape"})


@dataclass(frozen=True)
class UnknownRankList:
    """A list created with an unknown element rank, and the item shape its uses agree on."""

    create: Op
    element_shape: tuple[int, ...]  # -1: a dimension unknown at export time


def merged_dims(shapes: Iterable[Optional[Shape]]) -> Optional[tuple[int, ...]]:
    """The one item shape `shapes` describe (-1 where none knows the dimension); None when no shape
    knows the rank or two disagree.  (Unlike analysis.merge_shapes, a conflict is not resolved.)"""
    merged: Optional[list[Optional[int]]] = None
    for shape in shapes:
        dims = getattr(shape, "dims", None)
        if dims is None:
            continue
        if merged is None:
            merged = list(dims)
        elif len(merged) != len(dims) or any(a is not None and b is not None and a != b for a, b in zip(merged, dims)):
            return None
        else:
            merged = [a if a is not None else b for a, b in zip(merged, dims)]
    return None if merged is None else tuple(-1 if d is None else int(d) for d in merged)


def find_unknown_rank_lists(graph: Graph, named: Collection[str] = ()) -> list[UnknownRankList]:
    """Every list created with an unknown element rank whose writes and reads give one rank.  The
    IR's shapes come first; shapes carried through loop frames (the items of a list in a nested
    loop) are derived only when those leave the rank open."""
    found = []
    refined: Optional[Callable[[Value], Shape]] = None
    for op in graph:
        if op.type in LIST_CREATES and op.name not in named and _unknown_rank(op.operands[0]):
            shape = merged_dims(_item_shapes(op, lambda value: value.shape))
            if shape is None:
                refined = refined or frame_shapes(graph)
                shape = merged_dims(_item_shapes(op, refined))
            if shape is not None:
                found.append(UnknownRankList(op, shape))
    return found


def set_found_shapes(graph: Graph, found: list[UnknownRankList], named: Collection[str] = ()) -> None:
    """Give each list found its items' shape as its element-shape operand."""
    for site in found:
        create = site.create
        shape = add_const(graph, f"{create.name}/item_shape", np.asarray(site.element_shape, np.int64),
                          DType.INT64, create)
        create.set_operand(0, shape)
        create.attrs["shape_type"] = DType.INT64


def _item_shapes(create: Op, shape_of: Callable[[Value], Shape]) -> list[Optional[Shape]]:
    """The shapes of the items written to the list and of its reads' element shapes and results;
    [] when the list reaches an op that is not a carrier or a list op this module knows."""
    shapes: list[Optional[Shape]] = []
    seen = {create.results[0]}
    pending = [create.results[0]]
    while pending:
        for user, slot in pending.pop().uses:
            carried = carried_on(user, slot)
            if carried is not None:
                new = carried
            elif user.type in _PASSES_ON and slot == 0:
                new = user.results[:1]
                if user.type != "TensorListResize":
                    shapes.append(shape_of(user.operands[-1]))
            elif user.type in _READS and slot == 0:
                new = []
                shapes.append(_shape_operand(user.operands[_READS[user.type]]))
                shapes.append(_read_item_shape(user, shape_of))
            elif user.type in _ENDS and slot == 0:
                new = []
            else:
                return []
            for value in new:
                if value not in seen:
                    seen.add(value)
                    pending.append(value)
    return shapes


def _unknown_rank(value: Value) -> bool:
    """Whether an element-shape operand is the constant "unknown rank" (a scalar -1)."""
    found = ordered_const_array(value)
    return found is not None and found.ndim == 0


def _shape_operand(value: Value) -> Optional[Shape]:
    """A constant element-shape operand as a Shape; None for an unknown rank (-1) or a computed shape."""
    found = ordered_const_array(value)
    if found is None or found.ndim == 0:
        return None
    return Shape.of(int(d) for d in found.reshape(-1))


def _read_item_shape(read: Op, shape_of: Callable[[Value], Shape]) -> Optional[Shape]:
    """One item's shape as the read's result shows it (a Stack or Gather adds the item axis)."""
    shape = shape_of(read.results[-1] if read.type == "TensorListPopBack" else read.results[0])
    dims = shape.dims
    if dims is None or read.type in ("TensorListGetItem", "TensorListPopBack"):
        return shape
    return Shape(dims[1:]) if dims else None
