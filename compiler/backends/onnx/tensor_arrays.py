"""TF1 TensorArrays (V3) rewritten as TensorLists, which the exporter stores as one dense tensor.

`tf.map_fn`, `tf.scan`, `tf.foldl`, `dynamic_rnn` and a `tf.TensorArray` in a
`tf.compat.v1.while_loop` build a TensorArrayV3: a resource handle, and a
dummy float "flow" that every write returns and every access takes, threaded
through the loop's Enter/Merge/Switch/NextIteration/Exit so the dataflow
orders the accesses.  Made the array's value, the flow is exactly a
TensorList: each write returns a new list, each read reads the list it is
given.  So for each array whose flow reaches only control flow, identities
and accesses of that same array, the rewrite

- creates the list where the array was created: a TensorListReserve of its
  size, or, for TensorArray.unstack (a scatter of `range(size)` into the new
  array) or TensorArray.split into pieces of one constant length, a
  TensorListFromTensor of that tensor (split: reshaped to [pieces, length, ...]);
- turns WriteV3 into TensorListSetItem, ReadV3 into TensorListGetItem,
  GatherV3 (TensorArray.stack) into TensorListGather and SizeV3 into
  TensorListLength, each reading the flow it read before, and ConcatV3
  (TensorArray.concat) into a stack reshaped to [-1, ...] (its lengths, if
  read, a Fill of the items' first dimension);
- retypes the flow's carriers to variant, and drops the handle, its Enters
  and CloseV3.

ops_tensor_list.py then lowers the lists, inside a loop or out, with no ONNX
sequence types.  Storing a list densely needs the item rank at export time;
it is taken from the array's element_shape, its gathers' and the shapes of
what is written.  A growing array (dynamic_size) writes with
`resize_if_index_out_of_bounds`, as TF2's TensorArray does.  An array split
into pieces of different or unknown lengths, split or scattered after it was
created, or concatenated from items whose trailing dimensions are unknown,
stays as it is and is refused by name when lowered.  The runtime runs TensorArrays natively
(runtime/kernels/tensor_array.py); this rewrite exists only for ONNX.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Collection, Optional

import numpy as np

from compiler.analysis import StaticInfo, analyze
from compiler.analysis.order import reachable_ops, topological_order
from compiler.backends.onnx.list_element_shapes import merged_dims
from compiler.backends.onnx.ops_tensor_list import carried_on
from compiler.backends.onnx.tf1_frames import ENTER_OR_IDENTITY, MERGE, forwarded_source
from compiler.ir.dtypes import DType
from compiler.ir.graph import Graph, IRError, Op, Value
from compiler.ir.shapes import Shape
from compiler.rewrite.constants import const_array, is_integer, picks_element
from compiler.rewrite.edit import add_const, take_place

# The flow passes control flow and identities as a list would (Switch to both results); the handle
# only enters loops.  Access op -> the operand slot of its flow.  Write and Scatter return the next flow.
_FLOW_SLOT = {"TensorArrayWriteV3": 3, "TensorArrayScatterV3": 3, "TensorArraySplitV3": 3, "TensorArrayReadV3": 2,
              "TensorArrayGatherV3": 2, "TensorArraySizeV3": 1, "TensorArrayConcatV3": 1}
_MAKES_FLOW = frozenset({"TensorArrayWriteV3", "TensorArrayScatterV3", "TensorArraySplitV3"})
# Accesses that fill a new array whole (TensorArray.unstack, TensorArray.split).
_FILLS = frozenset({"TensorArrayScatterV3", "TensorArraySplitV3"})
# Access -> (the list op, the access's operands it takes, whether the element shape follows them).
# TensorArray.stack() (a gather of every item) is the dense list itself: a Stack.
_AS_LIST_OP = {
    "TensorArrayWriteV3": ("TensorListSetItem", (3, 1, 2), False),
    "TensorArrayScatterV3": ("TensorListFromTensor", (2,), True),
    "TensorArrayReadV3": ("TensorListGetItem", (2, 1), True),
    "TensorArrayGatherV3": ("TensorListGather", (2, 1), True),
    "TensorArrayStack": ("TensorListStack", (2,), True),
    "TensorArraySizeV3": ("TensorListLength", (1,), False),
}
# What the export can write (as lists) when the conditions above hold.
EXPORTED_OP_TYPES = frozenset(_FLOW_SLOT) | {"TensorArrayV3", "TensorArrayCloseV3"}


@dataclass
class TensorArrayUse:
    """One TensorArrayV3 and everything its handle and flow reach."""

    create: Op
    element_shape: tuple[int, ...]             # -1: a dimension unknown at export time
    accesses: list[Op] = field(default_factory=list)
    carriers: list[Op] = field(default_factory=list)
    flows: set[Value] = field(default_factory=set)
    handle_carriers: list[Op] = field(default_factory=list)
    handle_users: list[Op] = field(default_factory=list)
    closes: list[Op] = field(default_factory=list)
    unstack: Optional[Op] = None               # the ScatterV3 or SplitV3 that fills the new array with a whole tensor
    stacks: set[Op] = field(default_factory=set)  # the GatherV3s of every item, in order (TensorArray.stack)
    dynamic: bool = False                      # dynamic_size: a write past the end grows the array


def find_tensor_arrays(graph: Graph, named: Collection[str] = ()) -> list[TensorArrayUse]:
    """Every TensorArrayV3 the rewrite can turn into a list; `named` ops must keep what they compute."""
    found = []
    for op in graph:
        if op.type == "TensorArrayV3":
            use = _match(op, named)
            if use is not None:
                found.append(use)
    return found


def _match(create: Op, named: Collection[str]) -> Optional[TensorArrayUse]:
    if create.name in named or create.control_users:
        return None
    use = TensorArrayUse(create, (), dynamic=bool(create.attr("dynamic_size", False)))
    if not _follow_handle(use) or not _follow_flow(use) or not set(use.handle_users) <= set(use.accesses):
        return None  # (an access of this handle that this flow does not reach reads another array's flow)
    if any(op.name in named for op in use.carriers + use.handle_carriers)\
            or any(op.name in named and op.type in _MAKES_FLOW for op in use.accesses):
        return None
    shape = _element_shape(use)
    if shape is None:
        return None
    use.element_shape = shape
    use.unstack = _unstack(use)
    if any(op.type in _FILLS and op is not use.unstack for op in use.accesses):
        return None
    if not all(_concatenable(op, shape) for op in use.accesses if op.type == "TensorArrayConcatV3"):
        return None
    use.stacks = {op for op in use.accesses if op.type == "TensorArrayGatherV3" and _gathers_every_item(op, use)}
    return use


def _follow_handle(use: TensorArrayUse) -> bool:
    """The handle reaches only accesses (as their handle) and closes, through Enters and identities."""
    pending = [use.create.results[0]]
    while pending:
        value = pending.pop()
        for user, slot in value.uses:
            if user.type in ENTER_OR_IDENTITY and slot == 0 and not user.control_users:
                use.handle_carriers.append(user)
                pending.append(user.results[0])
            elif user.type == "TensorArrayCloseV3" and not user.control_users:
                use.closes.append(user)
            elif user.type in _FLOW_SLOT and slot == 0:
                use.handle_users.append(user)
            else:
                return False
    return True


def _follow_flow(use: TensorArrayUse) -> bool:
    """The flow reaches only carriers and accesses of this array; every access's handle is its own."""
    handles = {use.create.results[0]} | {op.results[0] for op in use.handle_carriers}
    pending = [use.create.results[1]]
    use.flows.add(use.create.results[1])
    while pending:
        value = pending.pop()
        for user, slot in value.uses:
            carried = carried_on(user, slot)
            if carried is not None:
                new, group = carried, use.carriers
            elif _FLOW_SLOT.get(user.type) == slot and user.operands[0] in handles:
                new, group = (user.results[:1] if user.type in _MAKES_FLOW else []), use.accesses
            else:
                return False
            if user not in group:
                group.append(user)
            for result in new:
                if result not in use.flows:
                    use.flows.add(result)
                    pending.append(result)
    merged_whole = all(v in use.flows for op in use.carriers if op.type in MERGE for v in op.operands)
    return merged_whole and all(op.operands[0] in use.flows for op in use.carriers)


def _element_shape(use: TensorArrayUse) -> Optional[tuple[int, ...]]:
    """The items' shape as far as the array's attribute, its gathers and its writes tell; None while
    the rank is unknown or they disagree."""
    shapes = [use.create.attr("element_shape")]
    for op in use.accesses:
        if op.type == "TensorArrayGatherV3":
            shapes.append(op.attr("element_shape"))
        elif op.type == "TensorArrayWriteV3":
            shapes.append(op.operands[2].shape)
        elif op.type == "TensorArrayScatterV3":
            dims = op.operands[2].shape.dims
            shapes.append(Shape(dims[1:]) if dims else None)
        elif op.type == "TensorArraySplitV3":
            length, dims = _piece_length(op), _static_shape(op.operands[1]).dims
            shapes.append(Shape((length, *dims[1:])) if length is not None and dims else None)
        elif op.type == "TensorArrayConcatV3":
            rest = getattr(op.attr("element_shape_except0"), "dims", None)
            shapes.append(Shape((None, *rest)) if rest is not None else None)
    return _with_piece_length(merged_dims(shapes), use)


def _with_piece_length(dims: Optional[tuple[int, ...]], use: TensorArrayUse) -> Optional[tuple[int, ...]]:
    """A split's pieces are as long as its lengths say, even where the split tensor's shape is unknown
    (before -O2 infers it)."""
    lengths = {_piece_length(op) for op in use.accesses if op.type == "TensorArraySplitV3"} - {None}
    if not dims or not lengths:
        return dims
    if len(lengths) > 1 or dims[0] not in (-1, *lengths):
        return None
    return (lengths.pop(), *dims[1:])


def _piece_length(split: Op) -> Optional[int]:
    """The one length a split's lengths all have, known at export time (None: they differ or are not known)."""
    lengths = _static(split.operands[2])
    if lengths is None or lengths.ndim != 1 or not lengths.size or (lengths != lengths[0]).any():
        return None
    return int(lengths[0])


def _concatenable(concat: Op, element_shape: tuple[int, ...]) -> bool:
    """A concat is a reshape of the stacked items when their trailing dimensions are known (and their
    first, when the lengths are read)."""
    if not element_shape or any(d < 0 for d in element_shape[1:]):
        return False
    return element_shape[0] >= 0 or not concat.results[1].uses


def _every_item(access: Op, use: TensorArrayUse, at_least: bool = False) -> bool:
    """Whether a gather's or scatter's indices (operand 1) are `range(m)`, known at export time, for m
    the array's size (or, `at_least`, no less than it).  (TF writes them as a Range to the array's
    size, which for an array that cannot grow is the size it was created with; before -O2 folds it,
    the exporter computes it.)"""
    size, found = _static(use.create.operands[0]), _static(access.operands[1])
    if size is None or found is None or found.ndim != 1 or size.size != 1:
        return _ranges_over_the_size(access, use)
    count = int(size.reshape(()))
    if found.size != count and not (at_least and found.size > count):
        return False
    return np.array_equal(found, np.arange(found.size))


def _ranges_over_the_size(access: Op, use: TensorArrayUse) -> bool:
    """The indices are `range(0, n)` for n the array's size, read at run time: the very tensor the
    array was created with, or, for a scatter, that tensor and the range's limit both the scattered
    value's first dimension (how TF1's map_fn unstacks a batch of unknown size)."""
    indices = forwarded_source(access.operands[1]).op
    if indices.type != "Range" or len(indices.operands) != 3:
        return False
    start, limit, delta = indices.operands
    if not (is_integer(const_array(start), 0) and is_integer(const_array(delta), 1)):
        return False
    size = use.create.operands[0]
    if forwarded_source(limit) is forwarded_source(size):
        return True
    scattered = access.operands[2] if access.type == "TensorArrayScatterV3" else None
    return scattered is not None and _first_dim_of(limit, scattered) and _first_dim_of(size, scattered)


def _first_dim_of(value: Value, tensor: Value) -> bool:
    """`value` is `tf.shape(tensor)[0]`: a StridedSlice of its Shape, shrunk to element 0."""
    sliced = forwarded_source(value).op
    if not picks_element(sliced, 0):
        return False
    shape = forwarded_source(sliced.operands[0]).op
    return shape.type == "Shape" and forwarded_source(shape.operands[0]) is forwarded_source(tensor)


def _gathers_every_item(gather: Op, use: TensorArrayUse) -> bool:
    """TensorArray.stack(): a gather of `range(0, size(flow))` for the flow it reads (how TF builds
    it), or of indices known to be every item of an array that cannot grow."""
    indices = gather.operands[1].op
    if indices.type == "Range" and len(indices.operands) == 3:
        start, limit, delta = indices.operands
        size = limit.op
        if size.type == "TensorArraySizeV3" and size.operands[1] is gather.operands[2] \
                and is_integer(const_array(start), 0) and is_integer(const_array(delta), 1):
            return True
    return not use.dynamic and _every_item(gather, use)


def _static(value: Value) -> Optional[np.ndarray]:
    """`value` when the exporter can compute it from constants and the inputs' stated shapes."""
    found = const_array(value)
    if found is not None:
        return found
    info = _analyzed(value)
    found = None if info is None else info.constant(value)
    return None if found is None else np.asarray(found)


def _static_shape(value: Value) -> Shape:
    """`value`'s shape as the IR states it, else as the exporter infers it from the inputs' shapes."""
    if value.shape.rank is not None:
        return value.shape
    info = _analyzed(value)
    return value.shape if info is None else info.shape(value)


def _analyzed(value: Value) -> Optional[StaticInfo]:
    try:
        return analyze(topological_order(value.op.graph, reachable_ops([value])))
    except IRError:  # a cycle (the value is computed in a loop)
        return None


def _unstack(use: TensorArrayUse) -> Optional[Op]:
    """The scatter of `range(size)` (TensorArray.unstack), or the split into pieces of one length
    (TensorArray.split), straight into the new array, if that is how it is filled: then the list is
    the tensor itself (reshaped, for a split).  (Scatter and gather both take their indices as
    operand 1.)"""
    first = [user for user, _ in use.create.results[1].uses]
    if len(first) != 1 or first[0].type not in _FILLS:
        return None
    fill = first[0]
    if fill.type == "TensorArraySplitV3":
        return fill if _piece_length(fill) is not None and _splits_into_every_item(fill, use) else None
    return fill if _every_item(fill, use, at_least=use.dynamic) else None


def _splits_into_every_item(split: Op, use: TensorArrayUse) -> bool:
    """As many pieces as the array has items (at least as many, for a growing array)."""
    size, lengths = _static(use.create.operands[0]), _static(split.operands[2])
    if size is None or size.size != 1 or lengths is None:
        return False
    count = int(size.reshape(()))
    return lengths.size == count or (use.dynamic and lengths.size > count)


def rewrite_found(graph: Graph, found: list[TensorArrayUse], named: Collection[str] = ()) -> None:
    """Turn each array `find_tensor_arrays` found into a TensorList, in place."""
    for use in found:
        _rewrite(graph, use)


def _rewrite(graph: Graph, use: TensorArrayUse) -> None:
    create = use.create
    dtype = create.attr("dtype")
    shape = add_const(graph, f"{create.name}/element_shape", np.asarray(use.element_shape, np.int64),
                      DType.INT64, create)
    list_attrs = {"element_dtype": dtype, "shape_type": DType.INT64}
    if use.unstack is None:
        made = graph.create_op("TensorListReserve", graph.unique_name(f"{create.name}/list"),
                               [shape, create.operands[0]], list_attrs, device=create.device, before=create)
        create.results[1].replace_all_uses_with(made.results[0])
    for op in use.carriers:
        op.attrs["T"] = DType.VARIANT
        for value in op.results:
            if value in use.flows:
                value.dtype, value.shape = DType.VARIANT, Shape(())
    for op in list(use.accesses):
        _replace(graph, op, shape, list_attrs, use)
    for op in use.closes:
        graph.erase_op(op)
    for op in reversed(use.handle_carriers):
        graph.erase_op(op)
    graph.erase_op(create)


def _replace(graph: Graph, op: Op, shape: Value, list_attrs: dict, use: TensorArrayUse) -> None:
    """One access as the list op reading (or making) the same flow; it takes the access's name."""
    if op.type == "TensorArrayConcatV3":
        return _replace_concat(graph, op, shape, list_attrs, use)
    if op.type == "TensorArraySplitV3":  # pieces of one length: the tensor with one more dimension
        new_type, with_shape = "TensorListFromTensor", True
        operands = [_reshaped(graph, op.operands[1], (-1, *use.element_shape), op)]
    else:
        new_type, slots, with_shape = _AS_LIST_OP["TensorArrayStack" if op in use.stacks else op.type]
        operands = [op.operands[i] for i in slots]
    operands += [shape] if with_shape else []
    attrs = {} if new_type == "TensorListLength" else dict(list_attrs)
    if new_type == "TensorListSetItem" and use.dynamic:
        attrs["resize_if_index_out_of_bounds"] = True
    made = graph.create_op(new_type, graph.unique_name(f"{op.name}/list"), operands, attrs,
                           control_deps=op.control_deps, device=op.device, before=op)
    take_place(graph, op, made)


def _replace_concat(graph: Graph, op: Op, shape: Value, list_attrs: dict, use: TensorArrayUse) -> None:
    """TensorArray.concat of items of one shape: the stacked list with its first two dimensions joined."""
    flow = op.operands[1]
    stacked = graph.create_op("TensorListStack", graph.unique_name(f"{op.name}/stack"), [flow, shape],
                              dict(list_attrs), control_deps=op.control_deps, device=op.device, before=op)
    if op.results[1].uses:
        op.results[1].replace_all_uses_with(_item_lengths(graph, op, use))
    joined = _reshaped(graph, stacked.results[0], (-1, *use.element_shape[1:]), op)
    take_place(graph, op, joined.op)


def _item_lengths(graph: Graph, concat: Op, use: TensorArrayUse) -> Value:
    """A concat's lengths: the items' first dimension once per item, a constant unless the array grows."""
    length = use.element_shape[0]
    size = None if use.dynamic else _static(use.create.operands[0])
    if size is not None and size.size == 1:
        return add_const(graph, f"{concat.name}/lengths", np.full(int(size.reshape(())), length, np.int64),
                         DType.INT64, concat)
    count = graph.create_op("TensorListLength", graph.unique_name(f"{concat.name}/count"), [concat.operands[1]],
                            device=concat.device, before=concat).results[0]
    dims = _reshaped(graph, count, (1,), concat)
    item = add_const(graph, f"{concat.name}/length", np.asarray(length, np.int64), DType.INT64, concat)
    return graph.create_op("Fill", graph.unique_name(f"{concat.name}/lengths"), [dims, item],
                           {"T": DType.INT64, "index_type": DType.INT32}, device=concat.device,
                           before=concat).results[0]


def _reshaped(graph: Graph, value: Value, dims: tuple[int, ...], before: Op) -> Value:
    target = add_const(graph, f"{before.name}/shape", np.asarray(dims, np.int64), DType.INT64, before)
    return graph.create_op("Reshape", graph.unique_name(f"{before.name}/reshape"), [value, target],
                           {"T": value.dtype, "Tshape": DType.INT64}, device=before.device, before=before).results[0]
