"""TensorList ops as plain ONNX tensors: a list of n items of shape S is one tensor of shape [n, *S].

Keras recurrent loops unstack their input with TensorListFromTensor and
read one step per iteration with GetItem, and collect their outputs in a
TensorListReserve'd list written with SetItem and stacked after the loop.
Stored densely, FromTensor and Stack cost nothing, GetItem is a Gather and
SetItem a ScatterND into the tensor the loop carries -- no ONNX sequence
types, which runtimes optimize poorly.  An item never set reads as zeros,
as in TF, because Reserve allocates zeros.  An element dimension unknown at
export time (a Keras RNN frozen with a dynamic batch) is allocated as 1, and
every SetItem into such a list first Expands it to the item's shape: zeros
broadcast, and once written the list already has that shape.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
from onnx import TensorProto, helper

from compiler.backends.onnx.context import INITIALIZER_ELEMENTS, LoweringContext
from compiler.backends.onnx.dtypes import onnx_type
from compiler.backends.onnx.errors import UnsupportedOpError
from compiler.backends.onnx.ops_array import int64_operand, shape_slice
from compiler.backends.onnx.registry import lowers
from compiler.backends.onnx.tf1_frames import ENTER_OR_IDENTITY, MERGE, SWITCH
from compiler.ir.dtypes import DType
from compiler.ir.graph import Op, Value
from compiler.rewrite.constants import ordered_const_array

# Ops that make a list from nothing but its element shape (and a count).
LIST_CREATES = frozenset({"TensorListReserve", "EmptyTensorList"})
# Ops that hand a list through unchanged (control flow and identities), looked through for its dtype.
LIST_CARRIERS = frozenset({
    "Enter", "RefEnter", "Merge", "RefMerge", "Switch", "RefSwitch", "Exit", "RefExit",
    "NextIteration", "RefNextIteration", "Identity", "Snapshot",
})


def carried_on(user: Op, slot: int) -> Optional[Sequence[Value]]:
    """Where `user` hands on a list it reads at operand `slot` (a Switch to both sides, a Merge from
    any input); None when `user` does not carry the list."""
    if user.type not in LIST_CARRIERS or not (slot == 0 or user.type in MERGE):
        return None
    return user.results[:2] if user.type in SWITCH else user.results[:1]


def list_element_dtype(value: Value) -> Optional[DType]:
    """The element dtype of the TensorList `value`, from the list op that made it."""
    origin = list_origin(value)
    found = origin.attr("element_dtype", None) if origin is not None else None
    return found if isinstance(found, DType) else None


def list_origin(value: Value) -> Optional[Op]:
    """The op that created list `value` (Reserve, FromTensor...), looking through control flow,
    identities and SetItems; None past a cycle."""
    seen: set[Value] = set()
    while value not in seen:
        seen.add(value)
        passes_on = value.op.type in LIST_CARRIERS or value.op.type == "TensorListSetItem"
        if not passes_on or not value.op.operands:
            return value.op
        value = value.op.operands[0]
    return None


def _element_shape(ctx: LoweringContext, op: Op, index: int) -> Optional[list[int]]:
    """A constant element-shape operand as a list (-1: unknown dim), None for an unknown rank."""
    shape = np.asarray(_const(ctx, op, index, "the element shape"))
    return None if shape.ndim == 0 else [int(d) for d in shape.reshape(-1)]


def _const(ctx: LoweringContext, op: Op, index: int, what: str) -> np.ndarray:
    """Operand `index` at export time; a Const read straight from the IR when `op` lies outside the
    subgraph being lowered (a SetItem in a loop body asks about the Reserve before the loop)."""
    found = _known(ctx, op.operands[index])
    return found if found is not None else ctx.const_operand(op, index, what)


def _known(ctx: LoweringContext, value: Value) -> Optional[np.ndarray]:
    found = ctx.constant(value)
    return ordered_const_array(value) if found is None else np.asarray(found)


def _known_int(ctx: LoweringContext, value: Value) -> Optional[int]:
    found = _known(ctx, value)
    return int(found.reshape(())) if found is not None and found.size == 1 else None


def static_count(ctx: LoweringContext, value: Value) -> Optional[int]:
    """How many items list `value` holds, when the export can tell: a chain of SetItems at known
    indices from a Reserve, outside any loop, or such a list entering one (None through other
    control flow)."""
    op = value.op
    if op.type == "EmptyTensorList":
        return 0
    if op.type == "TensorListReserve":
        return _known_int(ctx, op.operands[1])
    if op.type == "TensorListFromTensor":
        dims = ctx.shape(op.operands[0]).dims
        return dims[0] if dims else None
    if op.type in ENTER_OR_IDENTITY:
        return static_count(ctx, op.operands[0])
    if op.type == "TensorListSetItem":
        count, index = static_count(ctx, op.operands[0]), _known_int(ctx, op.operands[1])
        if count is None or index is None:
            return None
        return max(count, index + 1) if op.attr("resize_if_index_out_of_bounds", False) else count
    return None


def kept_dense_shape(ctx: LoweringContext, initial: Value, passed: Value, start: Value) -> Optional[tuple[int, ...]]:
    """The dense tensor's shape of a list carried round a loop when it keeps that shape: the list
    `initial` is Reserved with a known count and item shape, and `passed` (the next iteration's
    list) comes from `start` (this iteration's) only through writes that cannot grow it."""
    origin = list_origin(initial)
    if origin is None or origin.type != "TensorListReserve":
        return None
    shape, count = _reserved(ctx, origin)
    if count is None or any(d < 0 for d in shape):
        return None
    seen: set[Value] = set()
    while passed is not start:
        op = passed.op
        writes = op.type == "TensorListSetItem" and not op.attr("resize_if_index_out_of_bounds", False)
        if passed in seen or not op.operands or not (writes or op.type in LIST_CARRIERS):
            return None
        seen.add(passed)
        passed = op.operands[0]
    return (count, *shape)


@lowers("TensorListFromTensor", "TensorListStack")
def _alias(ctx: LoweringContext, op: Op) -> None:
    """The dense tensor already is the list, and the list its stacked tensor."""
    ctx.bind(op.results[0], ctx.value_in(op.operands[0], None))


@lowers("TensorListSplit")
def _split(ctx: LoweringContext, op: Op) -> None:
    """Pieces of one length L, known at export time: the tensor reshaped to [pieces, L, ...]."""
    lengths = _known(ctx, op.operands[2])
    if lengths is None or lengths.ndim != 1 or not lengths.size or (lengths != lengths[0]).any():
        found = "not known at export time" if lengths is None else f"{lengths.tolist()}"
        raise UnsupportedOpError(op.type, op.name, f"a dense list needs pieces of one length; the lengths are {found}")
    pieces, tensor = [lengths.size, int(lengths[0])], ctx.operand(op, 0)
    rest = ctx.shape(op.operands[0]).dims
    if rest is not None and all(d is not None for d in rest[1:]):
        shape = ctx.ints([*pieces, *rest[1:]], f"{op.name}/items_shape")
    else:
        shape = ctx.helper1(op, "items_shape", "Concat", [ctx.ints(pieces, f"{op.name}/pieces"),
                                                          shape_slice(ctx, op, tensor, 1, name="rest")], axis=0)
    ctx.bind(op.results[0], ctx.emit1(op, "Reshape", [tensor, shape]))


@lowers("TensorListConcatV2")
def _concat(ctx: LoweringContext, op: Op) -> None:
    """Items of one shape [d0, ...] stored as [n, d0, ...]: joined, the first two dimensions become one;
    the lengths are d0, n times."""
    items = ctx.operand(op, 0)
    joined_shape = ctx.helper1(op, "joined_shape", "Concat",
                               [ctx.ints([-1], f"{op.name}/all_rows"), shape_slice(ctx, op, items, 2, name="rest")],
                               axis=0)
    ctx.bind(op.results[0], ctx.emit1(op, "Reshape", [items, joined_shape]))
    if op.results[1].uses:
        rows, count = shape_slice(ctx, op, items, 1, 2, "rows"), shape_slice(ctx, op, items, 0, 1, "count")
        ctx.bind(op.results[1], ctx.helper1(op, "lengths", "Expand", [rows, count]))


@lowers("TensorListReserve", "EmptyTensorList")
def _reserve(ctx: LoweringContext, op: Op) -> None:
    """n zero items (an EmptyTensorList: none), stored as one tensor; n may be known only at run time
    (a map_fn over a batch of unknown size)."""
    shape, count = _reserved(ctx, op)
    dtype = op.attr("element_dtype")
    item_dims = [d if d >= 0 else 1 for d in shape]
    if count is not None and int(np.prod([count, *item_dims])) <= INITIALIZER_ELEMENTS:
        ctx.bind(op.results[0], ctx.initializer(np.zeros([count, *item_dims], dtype.to_numpy()), op.name))
        return
    if count is None:
        n = ctx.helper1(op, "count", "Reshape", [int64_operand(ctx, op, 1), ctx.ints([1], f"{op.name}/one")])
        dims = ctx.helper1(op, "dims", "Concat", [n, ctx.ints(item_dims, f"{op.name}/item_dims")], axis=0) \
            if item_dims else n
    else:
        dims = ctx.ints([count, *item_dims], f"{op.name}/dims")
    zero = helper.make_tensor("value", _onnx_elem(op, dtype), [1], [0])
    ctx.bind(op.results[0], ctx.emit1(op, "ConstantOfShape", [dims], value=zero))


def _reserved(ctx: LoweringContext, op: Op) -> tuple[list[int], Optional[int]]:
    """A Reserve's element shape (-1: unknown dim), which must be a constant of known rank, and its
    count (an empty list's: 0; None: known only at run time)."""
    shape = _element_shape(ctx, op, 0)
    count = 0 if op.type == "EmptyTensorList" else _known_int(ctx, op.operands[1])
    if shape is None:
        raise UnsupportedOpError(op.type, op.name, "the element rank must be known to store the list as one "
                                                   "ONNX tensor")
    if count is not None and count < 0:
        raise UnsupportedOpError(op.type, op.name, f"it reserves {count} items")
    return shape, count


def _onnx_elem(op: Op, dtype: DType) -> int:
    elem = onnx_type(dtype)
    if not elem:
        raise UnsupportedOpError(op.type, op.name, f"ONNX has no tensor of {dtype}")
    return elem


@lowers("TensorListGetItem", "TensorListGather")
def _get_items(ctx: LoweringContext, op: Op) -> None:
    """One item (a scalar index) or several stacked (a vector of indices): a Gather on axis 0."""
    ctx.bind(op.results[0], ctx.emit1(op, "Gather", [ctx.operand(op, 0), ctx.operand(op, 1)], axis=0))


@lowers("TensorListSetItem")
def _set_item(ctx: LoweringContext, op: Op) -> None:
    """ScatterND of the one item at [[index]] (TF refuses an index outside the list, so does ScatterND,
    unless the list may grow: then it is first padded with zero items up to the index)."""
    target = ctx.operand(op, 0)
    origin = list_origin(op.operands[0])
    created = origin is not None and origin.type in LIST_CREATES
    shape, count = _reserved(ctx, origin) if created else ([], 0)
    grows, unknown_dims = bool(op.attr("resize_if_index_out_of_bounds", False)), any(d < 0 for d in shape)
    known_index, held = _known_int(ctx, op.operands[1]), static_count(ctx, op.operands[0])
    if grows and known_index is not None and held is not None:
        if not unknown_dims and _pads_statically(held, known_index, shape if created else None):
            return _appended(ctx, op, target, held, known_index, shape)
        grows = known_index >= held  # an index inside the list: a plain ScatterND
    constant_where = known_index is not None and not grows
    index = "" if constant_where else ctx.helper1(op, "index64", "Cast", [ctx.operand(op, 1)], to=TensorProto.INT64)
    item_shape = ctx.helper1(op, "item_shape", "Shape", [ctx.operand(op, 2)]) if grows or unknown_dims else ""
    if grows:
        target = _grown(ctx, op, target, index, item_shape, unknown_dims)
    elif unknown_dims:
        held = count if held is None else held
        count_now = shape_slice(ctx, op, target, 0, 1, "count") if held is None \
            else ctx.ints([held], f"{op.name}/count")
        target = _allocated(ctx, op, target, count_now, item_shape)
    if constant_where:
        where = ctx.initializer(np.asarray([[known_index]], np.int64), f"{op.name}/where")
    else:
        where = ctx.helper1(op, "where", "Unsqueeze", [index, ctx.ints([0, 1], f"{op.name}/where_axes")])
    item = ctx.helper1(op, "update", "Unsqueeze", [ctx.operand(op, 2), ctx.ints([0], f"{op.name}/update_axes")])
    ctx.bind(op.results[0], ctx.emit1(op, "ScatterND", [target, where, item]))


def _pads_statically(held: int, index: int, shape: Optional[list[int]]) -> bool:
    """Whether a growing write at `index` into a list of `held` items of `shape` (None: not known) is a
    Concat: at the end, or past it by zero items the export can write as an initializer."""
    if index == held:
        return True
    return index > held and shape is not None and (index - held) * int(np.prod(shape)) <= INITIALIZER_ELEMENTS


def _appended(ctx: LoweringContext, op: Op, target: str, held: int, index: int, shape: list[int]) -> None:
    """A growing SetItem at or past the end of a list whose length the export knows: the list, zero
    items up to the index, then the item (an empty list written at 0 is the item alone)."""
    parts = [target] if held else []
    if index > held:
        dtype = op.attr("element_dtype").to_numpy()
        parts.append(ctx.initializer(np.zeros([index - held, *shape], dtype), f"{op.name}/padding"))
    axes = ctx.ints([0], f"{op.name}/update_axes")
    if not parts:
        ctx.bind(op.results[0], ctx.emit1(op, "Unsqueeze", [ctx.operand(op, 2), axes]))
        return
    item = ctx.helper1(op, "update", "Unsqueeze", [ctx.operand(op, 2), axes])
    ctx.bind(op.results[0], ctx.emit1(op, "Concat", [*parts, item], axis=0))


def _allocated(ctx: LoweringContext, op: Op, target: str, count: str, item_shape: str) -> str:
    """The list with its unknown dimensions (allocated as 1) expanded to the item's: zeros broadcast,
    and a list already written has them."""
    full = ctx.helper1(op, "full_shape", "Concat", [count, item_shape], axis=0)
    return ctx.helper1(op, "allocated", "Expand", [target, full])


def _grown(ctx: LoweringContext, op: Op, target: str, index: str, item_shape: str, unknown_dims: bool) -> str:
    """The list with zero items appended until `index` is inside it (none when it already is)."""
    count = shape_slice(ctx, op, target, 0, 1, "count")
    if unknown_dims:
        target = _allocated(ctx, op, target, count, item_shape)
    wanted = ctx.helper1(op, "wanted", "Add", [ctx.helper1(op, "index_1d", "Reshape", [index, ctx.ints([1], f"{op.name}/one")]),
                                               ctx.ints([1], f"{op.name}/plus_one")])
    missing = ctx.helper1(op, "missing", "Max", [ctx.helper1(op, "short_by", "Sub", [wanted, count]),
                                                 ctx.ints([0], f"{op.name}/none")])
    dtype = op.attr("element_dtype")
    padding = ctx.helper1(op, "padding", "Expand", [ctx.scalar(0, dtype, f"{op.name}/zero"),
                                                    ctx.helper1(op, "padding_shape", "Concat", [missing, item_shape], axis=0)])
    return ctx.helper1(op, "grown", "Concat", [target, padding], axis=0)


@lowers("TensorListResize")
def _resize(ctx: LoweringContext, op: Op) -> None:
    """The first `size` items, then zero items up to `size` (what TF reads from items never set)."""
    dtype = list_element_dtype(op.operands[0])
    if dtype is None:
        raise UnsupportedOpError(op.type, op.name, "the list's element type is not known")
    items, size = ctx.operand(op, 0), ctx.helper1(op, "size", "Reshape", [ctx.operand(op, 1), ctx.ints([1], f"{op.name}/one")])
    size = ctx.helper1(op, "size64", "Cast", [size], to=TensorProto.INT64)
    first = ctx.ints([0], f"{op.name}/first")
    kept = ctx.helper1(op, "kept", "Slice", [items, first, size, first])
    count, rest = shape_slice(ctx, op, items, 0, 1, "count"), shape_slice(ctx, op, items, 1, name="item_dims")
    missing = ctx.helper1(op, "missing", "Max", [ctx.helper1(op, "short_by", "Sub", [size, count]), first])
    padding = ctx.helper1(op, "padding", "Expand", [ctx.scalar(0, dtype, f"{op.name}/zero"),
                                                    ctx.helper1(op, "padding_shape", "Concat", [missing, rest], axis=0)])
    ctx.bind(op.results[0], ctx.emit1(op, "Concat", [kept, padding], axis=0))


@lowers("TensorListLength")
def _length(ctx: LoweringContext, op: Op) -> None:
    shape = ctx.helper1(op, "shape", "Shape", [ctx.operand(op, 0)])
    first = ctx.helper1(op, "first", "Gather", [shape, ctx.scalar(0, DType.INT64, f"{op.name}/zero")], axis=0)
    ctx.bind(op.results[0], ctx.emit1(op, "Cast", [first], to=TensorProto.INT32))


@lowers("TensorListElementShape")
def _element_shape_op(ctx: LoweringContext, op: Op) -> None:
    rest = shape_slice(ctx, op, ctx.operand(op, 0), 1, name="items")
    to = TensorProto.INT64 if op.attr("shape_type", DType.INT32) == DType.INT64 else TensorProto.INT32
    ctx.bind(op.results[0], ctx.emit1(op, "Cast", [rest], to=to))
