"""`tf.map_fn` over ragged rows, rewritten into dense loop state for the export.

map_fn hands ragged rows through its loop as variants.  A ragged input
becomes one variant per row (RaggedTensorToVariant, batched), unstacked into a
TensorList; iteration i reads its row with TensorListGetItem and decodes it
with RaggedTensorFromVariant.  A ragged result is collected the other way:
each iteration encodes its row (RaggedTensorToVariant, unbatched) and writes
it with TensorListSetItem; after the loop the stacked variants decode into
row splits and values.  ONNX has no variant type, and the export keeps lists
dense rather than as ONNX sequences, so on the export's copy, once functional
loops are TF1 frames (`functional_loops.py`):

- reading row i becomes a slice of the values from splits[i] to splits[i+1],
  splits and values entering the loop as invariants; the row count (the
  Shape of the variant vector) becomes len(splits) - 1;
- a ragged result becomes two pieces of loop state: the row lengths, a list
  of scalars written where the variant was (a scan output of the Loop), and
  the values, a new loop variable each iteration appends its row to.  After
  the loop the splits are 0 followed by the running sum of the lengths.

The second needs the rows written in iteration order, so it applies only when
the write index is the loop's own counter (starting at 0, stepping by 1), as
in map_fn.  Rows must be vectors (ragged rank 1, values of rank 1).  Anything
else keeps its variants and is refused by name when lowered.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Collection, Optional

import numpy as np

from compiler.backends.onnx.ops_tensor_list import list_origin, carried_on
from compiler.backends.onnx.tf1_frames import (ENTER, EXIT, LOOP_COND, MERGE, NEXT_ITERATION, SWITCH, forwarded_source,
                                              frame_shapes)
from compiler.ir.dtypes import DType
from compiler.ir.graph import Graph, Op, Value
from compiler.ir.shapes import Shape
from compiler.rewrite.constants import is_integer, ordered_const_array
from compiler.rewrite.edit import add_const

ENCODE, DECODE = "RaggedTensorToVariant", "RaggedTensorFromVariant"
_SPLIT_TYPES = (DType.INT32, DType.INT64)


@dataclass
class RowRead:
    """One `TensorListGetItem` of an unstacked ragged tensor and the decode of the row it reads."""

    get_item: Op
    decode: Op
    enter: Optional[Op]  # the Enter the list passed to reach the read (None: read outside a loop)


@dataclass
class RaggedInput:
    """A batched RaggedTensorToVariant whose rows are only counted and read one at a time."""

    encode: Op
    counts: list[Op] = field(default_factory=list)     # Shape of the variant vector
    reads: list[RowRead] = field(default_factory=list)
    lists: list[Op] = field(default_factory=list)      # its TensorListFromTensor
    chain: list[Op] = field(default_factory=list)      # the carriers the lists pass through


@dataclass
class RaggedResult:
    """A ragged map result: rows encoded and written once per iteration, stacked and decoded after."""

    decode: Op
    stack: Op
    reserve: Op
    set_item: Op
    encode: Op
    enter: Op
    switch: Op


def find_ragged_inputs(graph: Graph, named: Collection[str] = ()) -> list[RaggedInput]:
    """Every batched ragged encode whose rows are only counted and read one at a time; `named` ops stay."""
    found = (_ragged_input(op, named) for op in graph if op.type == ENCODE and _free(op, named))
    return [site for site in found if site is not None]


def find_ragged_results(graph: Graph, named: Collection[str] = ()) -> list[RaggedResult]:
    """Every ragged map result collected row by row in iteration order.  Runs after the inputs are
    rewritten: a row computed from an input row then has a known rank."""
    candidates = [op for op in graph if op.type == DECODE and _free(op, named)]
    if not candidates:
        return []
    shape_of = frame_shapes(graph)
    found = (_ragged_result(op, named, shape_of) for op in candidates)
    return [site for site in found if site is not None]


def _free(op: Op, named: Collection[str]) -> bool:
    return op.name not in named and not op.control_users


def rewrite_inputs(graph: Graph, found: list[RaggedInput], named: Collection[str] = ()) -> None:
    for site in found:
        _rewrite_input(graph, site)


def rewrite_results(graph: Graph, found: list[RaggedResult], named: Collection[str] = ()) -> None:
    for site in found:
        _rewrite_result(graph, site)


# -- matching -------------------------------------------------------------------------------
def _ragged_input(op: Op, named: Collection[str]) -> Optional[RaggedInput]:
    if not op.attr("batched_input", False) or op.attr("RAGGED_RANK", -1) != 1 or len(op.operands) != 2:
        return None
    if op.operands[0].dtype not in _SPLIT_TYPES:
        return None
    site = RaggedInput(op)
    for user, slot in op.results[0].uses:
        if user.type == "Shape" and user.name not in named and not user.control_users:
            site.counts.append(user)
        elif user.type == "TensorListFromTensor" and slot == 0 and _follow_rows(user, site, named):
            site.lists.append(user)
        else:
            return None
    return site


def _follow_rows(unstack: Op, site: RaggedInput, named: Collection[str]) -> bool:
    """The list reaches only carriers (through at most one Enter) and row reads decoded right away."""
    pending: list[tuple[Value, Optional[Op]]] = [(unstack.results[0], None)]
    seen = {unstack.results[0]}
    while pending:
        value, enter = pending.pop()
        for user, slot in value.uses:
            if user.name in named:
                return False
            carried = carried_on(user, slot)
            if carried is not None:
                if user.control_users or (user.type in ENTER and enter is not None):
                    return False  # (a nested loop: the splits would need entering twice)
                site.chain.append(user)
                inside = user if user.type in ENTER else None if user.type in EXIT else enter
                for result in carried:
                    if result not in seen:
                        seen.add(result)
                        pending.append((result, inside))
            elif user.type == "TensorListGetItem" and slot == 0:
                decode = _row_decode(user, site.encode)
                if decode is None:
                    return False
                site.reads.append(RowRead(user, decode, enter))
            else:
                return False
    return True


def _row_decode(get_item: Op, encode: Op) -> Optional[Op]:
    """The RaggedTensorFromVariant that decodes the item `get_item` reads as one dense row."""
    uses = get_item.results[0].uses
    if len(uses) != 1 or get_item.control_users:
        return None
    decode = uses[0][0]
    if decode.type != DECODE or decode.control_users or decode.attr("output_ragged_rank", -1) != 0 \
            or decode.attr("input_ragged_rank", -1) not in (-1, 0):
        return None
    splits, values = encode.operands
    if decode.attr("Tvalues") != values.dtype or decode.attr("Tsplits", DType.INT64) != splits.dtype:
        return None
    return decode


def _ragged_result(op: Op, named: Collection[str], shape_of: Callable[[Value], Shape]) -> Optional[RaggedResult]:
    if op.attr("output_ragged_rank", -1) != 1 or op.attr("input_ragged_rank", -1) not in (-1, 0) \
            or op.attr("Tsplits", DType.INT64) not in _SPLIT_TYPES or len(op.results) != 2:
        return None
    stack = op.operands[0].op
    if stack.type != "TensorListStack" or stack.name in named or stack.control_users \
            or len(stack.results[0].uses) != 1:
        return None
    reserve = list_origin(stack.operands[0])
    if reserve is None or reserve.type != "TensorListReserve" or reserve.name in named \
            or reserve.attr("element_dtype") != DType.VARIANT:
        return None
    walk = _follow_writes(reserve, stack, named)
    if walk is None:
        return None
    set_item, enter, switch = walk
    encode = set_item.operands[2].op
    if encode.type != ENCODE or encode.attr("batched_input", False) or encode.attr("RAGGED_RANK", -1) != 0 \
            or len(encode.operands) != 1 or len(encode.results[0].uses) != 1 or encode.control_users:
        return None
    row = encode.operands[0]
    if shape_of(row).rank != 1 or row.dtype != op.attr("Tvalues") or not _counts_iterations(set_item.operands[1]):
        return None
    return RaggedResult(op, stack, reserve, set_item, encode, enter, switch)


def _follow_writes(reserve: Op, stack: Op, named: Collection[str]) -> Optional[tuple[Op, Op, Op]]:
    """The list's one SetItem, its Enter and its loop Switch, when the list reaches nothing but
    carriers, that write and `stack` (after the loop)."""
    pending, seen = [reserve.results[0]], {reserve.results[0]}
    writes, enters, switches = [], [], []
    while pending:
        value = pending.pop()
        for user, slot in value.uses:
            if user.name in named or user.control_users:
                return None
            carried = carried_on(user, slot)
            if user.type == "TensorListSetItem" and slot == 0:
                writes.append(user)
                carried = user.results[:1]
            elif user is stack:
                continue
            elif carried is None:
                return None
            enters += [user] if user.type in ENTER else []
            switches += [user] if user.type in SWITCH else []
            for result in carried:
                if result not in seen:
                    seen.add(result)
                    pending.append(result)
    if len(writes) != 1 or len(enters) != 1 or len(switches) != 1 \
            or switches[0].operands[1].op.type not in LOOP_COND:
        return None
    return writes[0], enters[0], switches[0]


def _counts_iterations(index: Value) -> bool:
    """`index` is a loop variable that starts at 0 and steps by 1: the iteration number."""
    taken = forwarded_source(index)
    if taken.op.type not in SWITCH or taken.index != 1:
        return False
    merge = taken.op.operands[0].op
    if merge.type not in MERGE or len(merge.operands) != 2:
        return False
    enter, step = sorted(merge.operands, key=lambda v: v.op.type in NEXT_ITERATION)
    if enter.op.type not in ENTER or step.op.type not in NEXT_ITERATION or not _is_number(enter.op.operands[0], 0):
        return False
    add = forwarded_source(step.op.operands[0]).op
    if add.type not in ("Add", "AddV2") or len(add.operands) != 2:
        return False
    first, second = add.operands
    return any(forwarded_source(a) is taken and _is_number(b, 1) for a, b in ((first, second), (second, first)))


def _is_number(value: Value, number: int) -> bool:
    """A constant `number`, through identities; in a loop body it waits on the frame's pivot."""
    return is_integer(ordered_const_array(forwarded_source(value)), number)


# -- rewriting --------------------------------------------------------------------------------
def _make(graph: Graph, op_type: str, base: str, operands: list[Value], attrs: dict, before: Op,
          result_types: Optional[list] = None) -> Op:
    return graph.create_op(op_type, graph.unique_name(base), operands, attrs, result_types=result_types,
                           device=before.device, before=before)


def _rewrite_input(graph: Graph, site: RaggedInput) -> None:
    encode = site.encode
    splits, values = encode.operands
    for count in site.counts:
        out_type = count.attr("out_type", DType.INT32)
        shape = _make(graph, "Shape", f"{count.name}/splits", [splits], {"T": splits.dtype, "out_type": out_type},
                      count).results[0]
        one = add_const(graph, f"{count.name}/one", np.ones(1), out_type, count)
        rows = _make(graph, "Sub", f"{count.name}/rows", [shape, one], {"T": out_type}, count)
        count.results[0].replace_all_uses_with(rows.results[0])
        graph.erase_op(count)
    entered: dict[Op, tuple[Value, Value]] = {}
    for read in site.reads:
        inside = (splits, values)
        if read.enter is not None:
            if read.enter not in entered:
                entered[read.enter] = (_enter_invariant(graph, read.enter, splits),
                                       _enter_invariant(graph, read.enter, values))
            inside = entered[read.enter]
        row = _row(graph, *inside, read.get_item.operands[1], read.decode)
        read.decode.results[0].replace_all_uses_with(row)
        graph.erase_op(read.decode)
        graph.erase_op(read.get_item)
    graph.erase_ops([*site.chain, *site.lists, encode])


def _enter_invariant(graph: Graph, enter: Op, value: Value) -> Value:
    """`value` entering `enter`'s frame as a loop invariant."""
    attrs = {"T": value.dtype, "frame_name": enter.attr("frame_name"), "is_constant": True,
             "parallel_iterations": enter.attr("parallel_iterations", 10)}
    return _make(graph, "Enter", f"{enter.name}/ragged/{value.op.name}", [value], attrs, enter,
                 [(value.dtype, value.shape)]).results[0]


def _row(graph: Graph, splits: Value, values: Value, index: Value, decode: Op) -> Value:
    """values[splits[i]:splits[i+1]]: two Gathers of the splits bound a StridedSlice of the values."""
    base = decode.name
    vector = add_const(graph, f"{base}/vector", np.ones(1), DType.INT32, decode)
    at = _make(graph, "Reshape", f"{base}/at", [index, vector], {"T": index.dtype, "Tshape": DType.INT32}, decode,
               [(index.dtype, Shape((1,)))]).results[0]
    one = add_const(graph, f"{base}/one", np.ones(1), index.dtype, decode)
    after = _make(graph, "AddV2", f"{base}/next", [at, one], {"T": index.dtype}, decode).results[0]
    axis = add_const(graph, f"{base}/axis", np.zeros(()), DType.INT32, decode)
    gather = {"Tparams": splits.dtype, "Tindices": index.dtype, "Taxis": DType.INT32, "batch_dims": 0}
    start, stop = (_make(graph, "GatherV2", f"{base}/{label}", [splits, where, axis], gather, decode,
                         [(splits.dtype, Shape((1,)))]).results[0] for label, where in (("start", at), ("stop", after)))
    step = add_const(graph, f"{base}/step", np.ones(1), splits.dtype, decode)
    sliced = {"T": values.dtype, "Index": splits.dtype, "begin_mask": 0, "end_mask": 0, "ellipsis_mask": 0,
              "new_axis_mask": 0, "shrink_axis_mask": 0}
    return _make(graph, "StridedSlice", f"{base}/row", [values, start, stop, step], sliced, decode,
                 [(values.dtype, Shape((None,)))]).results[0]


def _rewrite_result(graph: Graph, site: RaggedResult) -> None:
    decode, row = site.decode, site.encode.operands[0]
    split_type = decode.attr("Tsplits", DType.INT64)
    axis = add_const(graph, f"{decode.name}/axis", np.zeros(()), DType.INT32, site.reserve)  # for all three joins
    values = _values_variable(graph, site, row, axis)  # first: it places its append beside the write
    lengths = _lengths_list(graph, site, split_type, row)
    running = _make(graph, "Cumsum", f"{decode.name}/ends", [lengths, axis],
                    {"T": split_type, "Tidx": DType.INT32, "exclusive": False, "reverse": False}, decode).results[0]
    zero = add_const(graph, f"{decode.name}/first", np.zeros(1), split_type, decode)
    splits = _make(graph, "ConcatV2", f"{decode.name}/splits", [zero, running, axis],
                   {"N": 2, "T": split_type, "Tidx": DType.INT32}, decode, [(split_type, Shape((None,)))])
    decode.results[0].replace_all_uses_with(splits.results[0])
    decode.results[1].replace_all_uses_with(values)
    graph.erase_op(decode)
    graph.erase_op(site.stack)


def _lengths_list(graph: Graph, site: RaggedResult, split_type: DType, row: Value) -> Value:
    """The variant list retyped to hold each row's length: created, written and stacked where it was."""
    reserve, set_item = site.reserve, site.set_item
    scalar = add_const(graph, f"{reserve.name}/item_shape", np.zeros(0), DType.INT32, reserve)
    made = _make(graph, "TensorListReserve", f"{reserve.name}/lengths", [scalar, reserve.operands[1]],
                 {"element_dtype": split_type, "shape_type": DType.INT32}, reserve)
    reserve.results[0].replace_all_uses_with(made.results[0])
    graph.erase_op(reserve)
    length = _make(graph, "Size", f"{set_item.name}/length", [row], {"T": row.dtype, "out_type": split_type},
                   set_item, [(split_type, Shape(()))]).results[0]
    write = _make(graph, "TensorListSetItem", f"{set_item.name}/length_write",
                  [set_item.operands[0], set_item.operands[1], length],
                  {"element_dtype": split_type, "resize_if_index_out_of_bounds": False}, set_item)
    set_item.results[0].replace_all_uses_with(write.results[0])
    graph.erase_op(set_item)
    graph.erase_op(site.encode)
    stack = site.stack
    stacked = _make(graph, "TensorListStack", f"{stack.name}/lengths", [stack.operands[0], scalar],
                    {"element_dtype": split_type, "num_elements": -1}, site.decode, [(split_type, Shape((None,)))])
    return stacked.results[0]


def _values_variable(graph: Graph, site: RaggedResult, row: Value, axis: Value) -> Value:
    """A new loop variable, empty on entry, to which every iteration appends its row: the values."""
    enter, switch, dtype = site.enter, site.switch, row.dtype
    frame = {"frame_name": enter.attr("frame_name"), "parallel_iterations": enter.attr("parallel_iterations", 10)}
    flat = [(dtype, Shape((None,)))]
    empty = add_const(graph, f"{site.decode.name}/no_values", np.zeros(0), dtype, enter)
    entered = _make(graph, "Enter", f"{enter.name}/values", [empty], {"T": dtype, "is_constant": False, **frame},
                    enter, flat)
    merge = _make(graph, "Merge", f"{switch.name}/values_merge", [entered.results[0]], {"T": dtype, "N": 2}, switch,
                  [flat[0], (DType.INT32, Shape(()))])
    switched = _make(graph, "Switch", f"{switch.name}/values", [merge.results[0], switch.operands[1]], {"T": dtype},
                     switch, flat * 2)
    write = site.set_item
    grown = _make(graph, "ConcatV2", f"{site.decode.name}/append", [switched.results[1], row, axis],
                  {"N": 2, "T": dtype, "Tidx": DType.INT32}, write, flat)
    step = _make(graph, "NextIteration", f"{switch.name}/values_next", [grown.results[0]], {"T": dtype}, write, flat)
    merge.append_operand(step.results[0])
    return _make(graph, "Exit", f"{switch.name}/values_exit", [switched.results[0]], {"T": dtype}, site.decode,
                 flat).results[0]
