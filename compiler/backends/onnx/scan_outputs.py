"""Lists a TF1 while loop fills one item per iteration, as the ONNX Loop's scan outputs.

`tf.map_fn`, `tf.scan`, `dynamic_rnn` and Keras' generic RNN loop collect
their per-step results the same way: a list of n items is reserved before the
loop, carried through it, and the body sets item `i` at its iteration counter
`i`.  Carried as a dense tensor, that is a copy of the whole list and a
ScatterND every iteration.  ONNX's Loop has a cheaper form for exactly this:
a scan output, which stacks one body value per iteration.

The two agree when every item is written once, in order, and nothing else
reads the list inside the loop.  This module recognises that:

- the list's loop variable starts from a TensorListReserve of n items and its
  body value is read only by one TensorListSetItem, whose result is what the
  next iteration gets;
- the item index is an *iteration counter*: a loop variable that starts at 0
  and whose next value is itself + 1;
- the loop runs exactly n times: its predicate is a conjunction of
  `counter < limit` tests whose smallest constant limit is n, or whose limits
  are all the very tensor the list was reserved with (a `map_fn` over a batch
  of unknown size: n is known only at run time).  (With fewer
  iterations the unwritten items would have to read as zeros; such loops keep
  the carried form.)  Or the list starts empty and grows with each write
  (`resize_if_index_out_of_bounds`, a dynamic-size TensorArray): then it
  ends with one item per iteration run, however many that is.  Zero runs
  must still give [0, *item], so this form needs the item shape known.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping, Optional, Union

import numpy as np

from compiler.backends.onnx.context import LoweringContext
from compiler.backends.onnx.ops_tensor_list import static_count
from compiler.backends.onnx.tf1_frames import ENTER_OR_IDENTITY, LoopVariable, WhileFrame, forwarded_source
from compiler.ir.dtypes import DType
from compiler.ir.graph import Op, Value
from compiler.rewrite.constants import const_array

_ADDS = frozenset({"Add", "AddV2"})
# How many times a loop runs, or how many items a list holds: a number known at export time, or the
# tensor (before any Enter or identity) that holds it at run time.
Count = Union[int, Value]


@dataclass(frozen=True)
class ScannedList:
    """A list loop variable and the one SetItem that writes its item of each iteration."""

    variable: LoopVariable
    set_item: Op
    starts_empty: bool  # the Loop must declare the item's shape, or a loop that never runs stacks [0]

    @property
    def item(self) -> Value:
        return self.set_item.operands[2]


def scanned_lists(ctx: LoweringContext, frame: WhileFrame) -> list[ScannedList]:
    """The frame's list variables that can be scan outputs (see the module docstring)."""
    fixed = _invariants(frame)
    counters = {v.merged: v for v in frame.variables if _is_counter(ctx, v, fixed)}
    if not counters:
        return []
    trips = _trip_count(ctx, frame.predicate, counters, fixed)
    found = []
    for var in frame.variables:
        set_item = _only_set_item(var)
        if set_item is None:
            continue
        count, grows = _count(ctx, var.initial, fixed), bool(set_item.attr("resize_if_index_out_of_bounds", False))
        if count is None or not (count == trips or (grows and count == 0)):  # (a Value equals only itself)
            continue
        if count == 0 and not ctx.shape(set_item.operands[2]).is_fully_defined:
            continue
        index = forwarded_source(set_item.operands[1])
        if any(index in (c.merged, c.body_input) for c in counters.values()):
            found.append(ScannedList(var, set_item, count == 0))
    return found


def _count(ctx: LoweringContext, initial: Value, fixed: Mapping[Value, Value]) -> Optional[Count]:
    """How many items the list `initial` holds: known at export time, or the count a Reserve was given."""
    count = static_count(ctx, initial)
    if count is not None:
        return count
    origin = _past_carriers(initial, fixed).op
    return _limit(ctx, origin.operands[1], fixed) if origin.type == "TensorListReserve" else None


def _only_set_item(var: LoopVariable) -> Optional[Op]:
    """The SetItem that alone reads the variable in the body and alone makes its next value."""
    if var.body_input is None or var.exit is None or var.merged.uses != [(var.switch, 0)]:
        return None
    uses = var.body_input.uses
    if len(uses) != 1 or uses[0][1] != 0 or uses[0][0].type != "TensorListSetItem":
        return None
    set_item = uses[0][0]
    if set_item.results[0] is not var.body_output or len(set_item.results[0].uses) != 1:
        return None
    if set_item.control_deps or set_item.control_users:
        return None
    return set_item


def _invariants(frame: WhileFrame) -> dict[Value, Value]:
    """Each loop-invariant variable's values in the loop -> its initial value.  (A TF2 `for i in
    tf.range(n)` carries the range's limit and delta this way.)"""
    fixed = {}
    for var in frame.variables:
        if var.invariant:
            fixed[var.merged] = var.initial
            if var.body_input is not None:
                fixed[var.body_input] = var.initial
    return fixed


def _is_counter(ctx: LoweringContext, var: LoopVariable, fixed: Mapping[Value, Value]) -> bool:
    """Starts at 0 and steps by 1: at iteration k it holds k."""
    step = var.body_output.op
    if step.type not in _ADDS or len(step.operands) != 2 or _number(ctx, var.initial) != 0:
        return False
    sources = [forwarded_source(v) for v in step.operands]
    reads_itself = [i for i, v in enumerate(sources) if v in (var.body_input, var.merged)]
    return len(reads_itself) == 1 and _number(ctx, step.operands[1 - reads_itself[0]], fixed) == 1


def _trip_count(ctx: LoweringContext, predicate: Value, counters: dict[Value, LoopVariable],
                fixed: Mapping[Value, Value]) -> Optional[Count]:
    """How many times the loop runs, when its predicate is `counter < limit` tests joined by
    LogicalAnd with limits known at export time (the smallest one), or all one run-time tensor."""
    limits = _counter_limits(ctx, forwarded_source(predicate), counters, fixed)
    if not limits:
        return None
    numbers = [n for n in limits if isinstance(n, int)]
    if len(numbers) == len(limits):
        return min(numbers)
    return limits[0] if not numbers and all(n is limits[0] for n in limits) else None


def _counter_limits(ctx: LoweringContext, value: Value, counters: dict[Value, LoopVariable],
                    fixed: Mapping[Value, Value]) -> Optional[list[Count]]:
    op = value.op
    if op.type == "LogicalAnd" and len(op.operands) == 2:
        parts = [_counter_limits(ctx, forwarded_source(v), counters, fixed) for v in op.operands]
        return None if None in parts else [n for part in parts for n in part]  # type: ignore[union-attr]
    if op.type == "Less" and len(op.operands) == 2 and forwarded_source(op.operands[0]) in counters:
        limit = _limit(ctx, op.operands[1], fixed)
        return None if limit is None or (isinstance(limit, int) and limit < 0) else [limit]
    return None


def _limit(ctx: LoweringContext, value: Value, fixed: Mapping[Value, Value]) -> Optional[Count]:
    """A count known at export time, else the run-time scalar integer tensor it comes from."""
    number = _number(ctx, value, fixed)
    if number is not None:
        return number
    source = _past_carriers(value, fixed)
    return source if source.dtype in (DType.INT32, DType.INT64) and source.shape.rank in (0, None) else None


def _past_carriers(value: Value, fixed: Mapping[Value, Value]) -> Value:
    """Where `value` comes from before the loop's invariants, Enters and identities."""
    while True:
        value = fixed.get(value, value)
        if value.op.type not in ENTER_OR_IDENTITY or not value.op.operands:
            return value
        value = value.op.operands[0]


def _number(ctx: LoweringContext, value: Value, fixed: Mapping[Value, Value] = MappingProxyType({})) -> Optional[int]:
    """A scalar integer known at export time, looked for through Enters, identities and `fixed`
    loop invariants."""
    while True:
        value = fixed.get(value, value)
        found = const_array(value)
        found = ctx.constant(value) if found is None else found
        if found is not None:
            arr = np.asarray(found)
            return int(arr.reshape(())) if arr.size == 1 and arr.dtype.kind in "iu" else None
        if value.op.type not in ENTER_OR_IDENTITY or not value.op.operands:
            return None
        value = value.op.operands[0]
