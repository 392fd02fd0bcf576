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
from typing import Mapping, Optional

from compiler.backends.onnx.context import LoweringContext
from compiler.backends.onnx.loop_counters import Count, IterationCount, count_value, past_carriers
from compiler.backends.onnx.ops_tensor_list import static_count
from compiler.backends.onnx.tf1_frames import LoopVariable, WhileFrame, forwarded_source
from compiler.ir.graph import Op, Value


@dataclass(frozen=True)
class ScannedList:
    """A list loop variable and the one SetItem that writes its item of each iteration."""

    variable: LoopVariable
    set_item: Op
    starts_empty: bool  # the Loop must declare the item's shape, or a loop that never runs stacks [0]

    @property
    def item(self) -> Value:
        return self.set_item.operands[2]


def scanned_lists(ctx: LoweringContext, frame: WhileFrame, counting: IterationCount) -> list[ScannedList]:
    """The frame's list variables that can be scan outputs (see the module docstring), given how
    it counts its iterations (`loop_counters.count_iterations`)."""
    if not counting.counters:
        return []
    fixed, counters, trips = counting.fixed, counting.counters, counting.trips
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
    origin = past_carriers(initial, fixed).op
    return count_value(ctx, origin.operands[1], fixed) if origin.type == "TensorListReserve" else None


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
