"""TF1 control flow as ONNX: each recovered while frame becomes a Loop, each cond an If.

`tf1_frames` finds the regions; this module lowers one region at a time,
as one unit of the lowering driver.  A while frame lowers like TF2's While
(`ops_control.py`): its condition once in the enclosing graph for the first
test and once more at the end of the body for the next.  Only the values
the body changes are carried; loop invariants (`Enter(is_constant)`) and
variables the body hands back untouched are read from the enclosing graph,
so a Keras RNN's input list stays one outer tensor that the body Gathers
from.  TensorLists travel as dense tensors (`ops_tensor_list.py`).  A frame
that is exactly a Keras LSTM or GRU layer becomes one ONNX LSTM/GRU node
instead (`recurrent.py`).
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
from onnx import TensorProto

from compiler.backends.onnx.builder import GraphBuilder, ValueSpec
from compiler.backends.onnx.context import LoweringContext
from compiler.backends.onnx.dtypes import onnx_type
from compiler.backends.onnx.errors import UnsupportedOpError
from compiler.backends.onnx.loop_counters import Count, count_iterations, runs_by_count
from compiler.backends.onnx.lowering import (Argument, bind_as_stored, cond_results, lower_bound_ops, lower_subgraph,
                                           outer_argument)
from compiler.backends.onnx.ops_control import known_truth
from compiler.backends.onnx.ops_tensor_list import kept_dense_shape, list_element_dtype
from compiler.backends.onnx.recurrent import lower_recurrent
from compiler.backends.onnx.registry import lowers
from compiler.backends.onnx.scan_outputs import scanned_lists
from compiler.backends.onnx.tf1_frames import REGION_LOWERINGS, TF1_CONTROL_FLOW, CondRegion, LoopVariable, WhileFrame
from compiler.ir.dtypes import DType
from compiler.ir.graph import Op, Value


@lowers(*sorted(TF1_CONTROL_FLOW))
def _outside_region(ctx: LoweringContext, op: Op) -> None:
    """Reached only if structure recovery left the op out of every region (it refuses that first)."""
    raise UnsupportedOpError(op.type, op.name, "TF1 control flow outside any recovered while loop or cond")


def element_type(ctx: LoweringContext, value: Value) -> int:
    """The ONNX element type that carries `value`: a TensorList's is its items'."""
    dtype = ctx.dtype(value)
    if dtype == DType.VARIANT:
        dtype = list_element_dtype(value)
    elem = onnx_type(dtype)
    if not elem:
        raise UnsupportedOpError(value.op.type, value.op.name, f"its result '{value.name}' has a type ONNX "
                                                               f"cannot carry ({dtype})")
    return elem


def _emit_region_node(ctx: LoweringContext, op_type: str, inputs: Sequence[str], values: Sequence[Value],
                      base: str, **attrs: object) -> list[str]:
    """A node whose outputs are named after the TF values they become (Exit or Merge results)."""
    names = [ctx.scope.tensors.claim(ctx.prefix + v.name) for v in values]
    ctx.builder.add_node(op_type, list(inputs), names, ctx.scope.nodes.claim(ctx.prefix + base), dict(attrs))
    return names


def _expose(ctx: LoweringContext, body: GraphBuilder, tensors: Sequence[str], values: Sequence[Value],
            prefix: str) -> None:
    for tensor, value in zip(tensors, values):
        body.expose(tensor, ValueSpec(ctx.scope.tensors.fresh(prefix + value.name), element_type(ctx, value)))


# -- while -> Loop ----------------------------------------------------------------------------
def lower_while(ctx: LoweringContext, frame: WhileFrame) -> None:
    """A Keras LSTM/GRU loop as one node when it matches exactly (`recurrent`), else a Loop."""
    if lower_recurrent(ctx, frame):
        return
    prefix = f"{ctx.prefix}{frame.name}/"
    counting = count_iterations(ctx, frame)
    scanned = scanned_lists(ctx, frame, counting)
    counted = runs_by_count(ctx, frame, counting)
    counters = list(counting.counters.values()) if counted else []
    dropped = {s.variable.merged for s in scanned} | {v.merged for v in counters}
    carried = [v for v in frame.variables if not v.invariant and v.merged not in dropped]
    outer: dict[Value, Argument] = {e.results[0]: outer_argument(ctx, e.operands[0]) for e in frame.invariants}
    for var in frame.variables:
        if var.invariant:
            outer[var.merged] = outer[var.body_input] = outer_argument(ctx, var.initial)
    initial = {v.merged: outer_argument(ctx, v.initial) for v in carried}
    if not counted:
        trips, first = "", lower_bound_ops(ctx, frame.cond_ops, ctx.builder, prefix + "cond_first/",
                                           {**outer, **initial}, [frame.predicate])[0]
    else:
        trips, first = _trip_tensor(ctx, counting.trips, prefix), ""

    body = GraphBuilder(ctx.scope)
    names = ctx.scope.tensors
    iteration = names.fresh(prefix + "body/iteration")
    cond_in = names.fresh(prefix + "body/cond_in")
    body.add_input(ValueSpec(iteration, TensorProto.INT64, ()))
    body.add_input(ValueSpec(cond_in, TensorProto.BOOL, ()))
    # scanned items become scan outputs (the lists are not carried); a Loop with a trip count
    # computes no counters
    skipped = {s.set_item for s in scanned} | _counting_only(frame, counters)
    inside: dict[Value, Argument] = {}
    unlowered = skipped | set(frame.cond_ops)
    for var in counters:  # (a counter only the condition reads has no Switch: its step reads the Merge)
        inside[var.merged] = _iteration_as(ctx, body, iteration, var, unlowered)
        if var.body_input is not None:
            inside[var.body_input] = inside[var.merged]
    for var in carried:
        spec = ValueSpec(names.fresh(f"{prefix}body/in/{var.merged.name}"), element_type(ctx, var.initial),
                         _fixed_dims(ctx, var))
        body.add_input(spec)
        inside[var.merged] = Argument(spec.name, ctx.shape(var.merged))
        if var.body_input is not None:
            inside[var.body_input] = inside[var.merged]
    body_ops = [op for op in frame.body_ops if op not in skipped]
    results = lower_bound_ops(ctx, body_ops, body, prefix + "body/", {**outer, **inside},
                              [v.body_output for v in carried] + [s.item for s in scanned])
    results, items = results[:len(carried)], results[len(carried):]
    after = {v.merged: Argument(t, ctx.shape(v.merged)) for v, t in zip(carried, results)}
    again = cond_in if counted else lower_bound_ops(
        ctx, frame.cond_ops, body, prefix + "body/cond/", {**outer, **after}, [frame.predicate])[0]
    body.expose(again, ValueSpec(names.fresh(prefix + "body/cond_out"), TensorProto.BOOL, ()))
    _expose(ctx, body, results, [v.initial for v in carried], prefix + "body/out/")
    for tensor, scan in zip(items, scanned):
        dims = ctx.shape(scan.item).dims if scan.starts_empty else None
        body.expose(tensor, ValueSpec(names.fresh(f"{prefix}body/scan/{scan.item.name}"), element_type(ctx, scan.item),
                                      dims))

    exits = [v.exit.results[0] if v.exit else v.merged for v in carried]
    exits += [s.variable.exit.results[0] for s in scanned]
    outs = _emit_region_node(ctx, "Loop", [trips, first] + [initial[v.merged].tensor for v in carried], exits,
                             frame.name, body=body)
    for var, tensor in zip(carried + [s.variable for s in scanned], outs):
        if var.exit is not None:
            ctx.bind(var.exit.results[0], tensor)
    for var in frame.variables:
        if var.invariant and var.exit is not None:
            ctx.bind(var.exit.results[0], outer[var.merged].tensor)
    ctx.stats["tf1_loops"] += 1
    if scanned:
        ctx.stats["scan_outputs"] += len(scanned)
    if counted:
        ctx.stats["counted_loops"] += 1


def _fixed_dims(ctx: LoweringContext, var: LoopVariable) -> Optional[tuple[int, ...]]:
    """A carried value's stored shape when it is the same on every iteration, declared on the body
    input: a Scan holds its states in buffers of one shape (loop_scans turns only such Loops into
    Scans).  A tensor's is its Merge's static shape, which joins the initial value's shape with
    each next one's; a TensorList's, its dense tensor's when no write can grow it."""
    if ctx.dtype(var.merged) == DType.VARIANT:
        start = var.body_input if var.body_input is not None else var.merged
        return kept_dense_shape(ctx, var.initial, var.body_output, start)
    shape = ctx.shape(var.merged)
    return tuple(shape.dims) if shape.is_fully_defined else None  # type: ignore[arg-type]


def _trip_tensor(ctx: LoweringContext, trips: Count, prefix: str) -> str:
    """The Loop's trip count M: int64, a scalar."""
    if isinstance(trips, int):
        return ctx.initializer(np.array(trips, np.int64), prefix + "trips")
    return ctx.node("Cast", [ctx.value_in(trips)], prefix + "trips", to=TensorProto.INT64)[0]


def _iteration_as(ctx: LoweringContext, body: GraphBuilder, iteration: str, counter: LoopVariable,
                  unlowered: set[Op]) -> Argument:
    """A counter inside the body: the Loop's iteration number, in the counter's type, or as it is
    (int64) when the counter only picks list items (a Gather takes either index type)."""
    shape = ctx.shape(counter.merged)
    reads = counter.merged.uses + (counter.body_input.uses if counter.body_input is not None else [])
    readers = [(op, i) for op, i in reads if op not in unlowered and op is not counter.switch]
    if ctx.dtype(counter.initial) == DType.INT64 or all(op.type == "TensorListGetItem" and i == 1
                                                        for op, i in readers):
        return Argument(iteration, shape)
    tensor = ctx.scope.tensors.fresh(f"{iteration}/{counter.merged.name}")
    body.add_node("Cast", [iteration], [tensor], ctx.scope.nodes.fresh(tensor),
                  {"to": onnx_type(ctx.dtype(counter.initial))})
    return Argument(tensor, shape)


def _counting_only(frame: WhileFrame, counters: Sequence[LoopVariable]) -> set[Op]:
    """The body ops that only compute the counters' next values, which a counted Loop never needs."""
    sinks = {v.next_iteration for v in counters}
    skipped: set[Op] = set()
    for op in reversed(frame.body_ops):
        users = [user for result in op.results for user, _ in result.uses]
        if users and not op.control_users and all(u in sinks or u in skipped for u in users):
            skipped.add(op)
    return skipped


# -- cond -> If -------------------------------------------------------------------------------
def lower_cond(ctx: LoweringContext, region: CondRegion) -> None:
    """An If whose branches read outer values in the layout they are stored in and hand each merged
    value back in the layout both computed it in: a BN layer's cond between NCHW convs costs no
    Transpose on either side of the boundary."""
    for merge in region.merges:
        if merge.results[1].uses:
            raise UnsupportedOpError(merge.type, merge.name, "its value_index output is read; only the merged "
                                                             "value has an ONNX If form")
    base = region.merges[0].name if region.merges else region.switches[0].name
    prefix = f"{ctx.prefix}{base}/"
    taken = known_truth(ctx, region.predicate)
    if taken is not None:
        _lower_taken_branch(ctx, region, taken, prefix)
        return
    bodies = [GraphBuilder(ctx.scope) for _ in range(2)]
    merged = [m.results[0] for m in region.merges]
    layouts, results = cond_results(ctx, merged, [_lower_branch(ctx, region, taken, body, prefix)
                                                  for taken, body in zip((True, False), bodies)])
    branches = {}
    for attr, label, body, tensors in zip(("then_branch", "else_branch"), ("then/", "else/"), bodies, results):
        _expose(ctx, body, tensors, merged, prefix + label + "out/")
        branches[attr] = body
    predicate = ctx.value_in(region.predicate, None)
    if ctx.dtype(region.predicate) != DType.BOOL:
        predicate = ctx.node("Cast", [predicate], prefix + "pred_bool", to=TensorProto.BOOL)[0]
    outs = _emit_region_node(ctx, "If", [predicate], merged, base + "/if", **branches)
    for value, tensor, perm in zip(merged, outs, layouts):
        ctx.bind(value, tensor, perm)
    ctx.stats["tf1_conds"] += 1


def _lower_branch(ctx: LoweringContext, region: CondRegion, taken: bool, builder: GraphBuilder,
                  prefix: str) -> tuple[LoweringContext, list[Value]]:
    """One side of a cond, its outer reads as stored; its context and the values the Merges take."""
    args = {s.results[int(taken)]: outer_argument(ctx, s.operands[0], as_stored=True) for s in region.switches}
    roots = [region.branch_input(m, taken) for m in region.merges]
    label = "then/" if taken else "else/"
    return lower_subgraph(ctx, region.branches[taken], builder, prefix + label, args, roots, as_stored=True), roots


def _lower_taken_branch(ctx: LoweringContext, region: CondRegion, taken: bool, prefix: str) -> None:
    """A cond whose predicate the exporter knows: the ops of the branch it takes, in the enclosing
    graph, and no If (why: `ops_control._inline_taken_branch`)."""
    bind_as_stored(ctx, [m.results[0] for m in region.merges], *_lower_branch(ctx, region, taken, ctx.builder, prefix))
    ctx.stats["conds_with_known_predicate"] += 1


REGION_LOWERINGS[WhileFrame] = lower_while
REGION_LOWERINGS[CondRegion] = lower_cond
