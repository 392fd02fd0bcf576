"""Which loop variables of a TF1 while frame count its iterations, and how many it runs.

A counter starts at 0 and steps by 1, so at iteration k it holds k.  A frame whose condition is
`counter < limit` tests joined by LogicalAnd runs min(limits) times: a number known at export
time, or one run-time tensor (a `map_fn` over a batch of unknown size).  `scan_outputs` uses
this to collect a list as a Loop's scan output, and `ops_tf1_control` to give the Loop its trip
count (`runs_by_count`): the counters and the condition then need not be computed at all, since
ONNX's Loop hands its body the iteration number.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping, Optional, Union

import numpy as np

from compiler.backends.onnx.context import LoweringContext
from compiler.backends.onnx.tf1_frames import ENTER_OR_IDENTITY, LoopVariable, WhileFrame, forwarded_source
from compiler.ir.dtypes import DType
from compiler.ir.graph import Value
from compiler.rewrite.constants import const_array

_ADDS = frozenset({"Add", "AddV2"})
# How many times a loop runs, or how many items a list holds: a number known at export time, or the
# tensor (before any Enter or identity) that holds it at run time.
Count = Union[int, Value]


@dataclass(frozen=True)
class IterationCount:
    """A frame's counters (by their merged value), how many times it runs (None: not known from
    its condition), and its loop invariants (each value inside -> its initial value)."""

    counters: dict[Value, LoopVariable]
    trips: Optional[Count]
    fixed: Mapping[Value, Value]


def count_iterations(ctx: LoweringContext, frame: WhileFrame) -> IterationCount:
    fixed = invariants(frame)
    counters = {v.merged: v for v in frame.variables if is_counter(ctx, v, fixed)}
    trips = trip_count(ctx, frame.predicate, counters, fixed) if counters else None
    return IterationCount(counters, trips, fixed)


def runs_by_count(ctx: LoweringContext, frame: WhileFrame, counting: IterationCount) -> bool:
    """Whether a Loop can run the frame by trip count alone: the condition is only the counter
    tests, it runs a known number of times (a scalar at run time), and no counter is read after
    the loop or anywhere but its own condition test and step."""
    trips = counting.trips
    if trips is None or (isinstance(trips, Value) and ctx.rank(trips) != 0):
        return False
    condition = set(frame.cond_ops)
    for var in counting.counters.values():
        if var.exit is not None and var.exit.results[0].uses:
            return False
        if any(op is not var.switch and op not in condition for op, _ in var.merged.uses):
            return False
    return True


def invariants(frame: WhileFrame) -> dict[Value, Value]:
    """Each loop-invariant variable's values in the loop -> its initial value.  (A TF2 `for i in
    tf.range(n)` carries the range's limit and delta this way.)"""
    fixed = {}
    for var in frame.variables:
        if var.invariant:
            fixed[var.merged] = var.initial
            if var.body_input is not None:
                fixed[var.body_input] = var.initial
    return fixed


def is_counter(ctx: LoweringContext, var: LoopVariable, fixed: Mapping[Value, Value]) -> bool:
    """Starts at 0 and steps by 1: at iteration k it holds k."""
    step = var.body_output.op
    if step.type not in _ADDS or len(step.operands) != 2 or known_int(ctx, var.initial) != 0:
        return False
    sources = [forwarded_source(v) for v in step.operands]
    reads_itself = [i for i, v in enumerate(sources) if v in (var.body_input, var.merged)]
    return len(reads_itself) == 1 and known_int(ctx, step.operands[1 - reads_itself[0]], fixed) == 1


def trip_count(ctx: LoweringContext, predicate: Value, counters: dict[Value, LoopVariable],
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
        limit = count_value(ctx, op.operands[1], fixed)
        return None if limit is None or (isinstance(limit, int) and limit < 0) else [limit]
    return None


def count_value(ctx: LoweringContext, value: Value, fixed: Mapping[Value, Value]) -> Optional[Count]:
    """A count known at export time, else the run-time scalar integer tensor it comes from."""
    number = known_int(ctx, value, fixed)
    if number is not None:
        return number
    source = past_carriers(value, fixed)
    return source if source.dtype in (DType.INT32, DType.INT64) and source.shape.rank in (0, None) else None


def past_carriers(value: Value, fixed: Mapping[Value, Value]) -> Value:
    """Where `value` comes from before the loop's invariants, Enters and identities."""
    while True:
        value = fixed.get(value, value)
        if value.op.type not in ENTER_OR_IDENTITY or not value.op.operands:
            return value
        value = value.op.operands[0]


def known_int(ctx: LoweringContext, value: Value, fixed: Mapping[Value, Value] = MappingProxyType({})) -> Optional[int]:
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
