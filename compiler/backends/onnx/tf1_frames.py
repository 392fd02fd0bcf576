"""The structure behind TF1 control flow: while frames and conds recovered from Enter/Merge/Switch dataflow.

TF1 writes `while_loop` and `cond` as plain dataflow (see
`compiler/graphutil/control_flow.py`); ONNX wants them structured, as a Loop
with a body graph and an If with two branch graphs.  This module only
recovers that structure -- which ops form each loop's condition and body,
which values it carries, which ops each cond branch runs -- so that the
ONNX lowering (`ops_tf1_control.py`), or a matcher that turns a recurrent
loop into one LSTM/GRU node, can work on regions instead of raw ops.

Only the outermost regions of a set of ops are recovered; a region's body is
itself a set of ops, whose nested regions are found when it is lowered.
Anything that does not fit the shapes TF's `while_loop`/`cond` build is
refused with an `UnsupportedOpError` naming the node and why.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Callable, Collection, Optional, Sequence, Union

import numpy as np

from compiler.analysis import StaticInfo, analyze, merge_shapes, reachable_ops, topological_order
from compiler.backends.onnx.errors import UnsupportedOpError
from compiler.ir.graph import Graph, Op, Value
from compiler.ir.shapes import Shape

ENTER = frozenset({"Enter", "RefEnter"})
EXIT = frozenset({"Exit", "RefExit"})
MERGE = frozenset({"Merge", "RefMerge"})
SWITCH = frozenset({"Switch", "RefSwitch"})
NEXT_ITERATION = frozenset({"NextIteration", "RefNextIteration"})
LOOP_COND = frozenset({"LoopCond"})
TF1_CONTROL_FLOW = ENTER | EXIT | MERGE | SWITCH | NEXT_ITERATION | LOOP_COND
# Ops that pass their operand through unchanged, looked through when matching loop variables.
FORWARDING = frozenset({"Identity", "Snapshot", "StopGradient"})
# What carries a value from outside a loop in unchanged: Enters and plain identities.
ENTER_OR_IDENTITY = ENTER | frozenset({"Identity", "Snapshot"})


@dataclass
class LoopVariable:
    """One loop-carried value: Enter -> Merge <- NextIteration, Merge -> Switch -> (Exit, body).

    A value only the condition reads has no Switch (TF prunes it: nothing in the body or after
    the loop reads it), so no body input and no Exit; the body still computes its next value."""

    enter: Op
    merge: Op
    switch: Optional[Op]
    next_iteration: Op
    exit: Optional[Op]

    initial: Value = field(init=False)                # the Enter's input, from the enclosing graph
    merged: Value = field(init=False)                 # the value each iteration (and the condition) sees
    body_input: Optional[Value] = field(init=False)   # Switch:1, what the body reads
    body_output: Value = field(init=False)            # what NextIteration hands to the next iteration

    def __post_init__(self) -> None:
        self.initial, self.merged = self.enter.operands[0], self.merge.results[0]
        self.body_input = self.switch.results[1] if self.switch is not None else None
        self.body_output = self.next_iteration.operands[0]

    @property
    def invariant(self) -> bool:
        """The body hands the value back unchanged: it need not be carried at all."""
        return forwarded_source(self.body_output) is self.body_input


@dataclass
class WhileFrame:
    """One TF1 while loop (one `frame_name`), outermost level only."""

    name: str
    invariants: list[Op]          # Enter(is_constant=true): read by every iteration, never carried
    variables: list[LoopVariable]
    loop_cond: Op
    cond_ops: list[Op]            # compute the LoopCond predicate from the merged values (topological)
    body_ops: list[Op]            # compute the NextIteration values from the Switch:1 values (topological)
    ops: set[Op] = field(default_factory=set)

    @property
    def predicate(self) -> Value:
        return self.loop_cond.operands[0]


@dataclass
class CondRegion:
    """One TF1 cond: Switches on one predicate, the ops of each branch, and the Merges joining them."""

    predicate: Value
    switches: list[Op]
    merges: list[Op]
    branches: dict[bool, list[Op]]    # True: the ops fed by Switch:1 (topological)
    ops: set[Op] = field(default_factory=set)

    def branch_input(self, merge: Op, taken: bool) -> Value:
        """The operand of `merge` that the `taken` branch delivers."""
        for value in merge.operands:
            if value.op in self.branches[taken] or (value.op in self.switches and value.index == int(taken)):
                return value
        raise UnsupportedOpError(merge.type, merge.name, f"no input from the {str(taken).lower()} branch of "
                                                         f"the cond on '{self.predicate.name}'")


Region = Union[WhileFrame, CondRegion]
Unit = Union[Op, WhileFrame, CondRegion]

# How each region kind is lowered; filled by `ops_tf1_control` (which needs the lowering driver,
# so the driver cannot import it).
REGION_LOWERINGS: dict[type, Callable] = {}


def has_tf1_control_flow(ops: Collection[Op]) -> bool:
    return any(op.type in TF1_CONTROL_FLOW for op in ops)


def export_order(graph: Graph, ops: Collection[Op], stop: Collection[Value]) -> list[Op]:
    """`ops` in topological order, loop back-edges (NextIteration -> Merge) cut."""
    back_edges = {op.results[0] for op in ops if op.type in NEXT_ITERATION}
    return topological_order(graph, ops, set(stop) | back_edges)


def schedule(ops: Sequence[Op]) -> list[Unit]:
    """`ops` (topological, back-edges cut) as lowering units: plain ops, and each outermost region as one."""
    if not has_tf1_control_flow(ops):
        return list(ops)
    regions = find_regions(ops)
    owner: dict[Op, Unit] = {}
    for region in regions:
        for op in region.ops:
            owner[op] = region
    position = {op: i for i, op in enumerate(ops)}
    return _order_units(ops, owner, position)


def find_regions(ops: Sequence[Op]) -> list[Region]:
    """The outermost while frames and conds: a loop in a cond branch, or a cond in a loop body,
    belongs to the region around it and is found again when that region's ops are lowered."""
    members = set(ops)
    frames = [_while_frame(name, enters, members) for name, enters in _enters_by_frame(ops).items()]
    candidates: list[Region] = [*frames, *_conds(ops, members, frames)]
    covered = set().union(*(r.ops for r in candidates)) if candidates else set()
    stray = [op for op in ops if op.type in TF1_CONTROL_FLOW and op not in covered]
    if stray:
        raise UnsupportedOpError(stray[0].type, stray[0].name, "it belongs to no while loop or cond that could be "
                                                               "recovered")
    return [r for r in candidates if not any(r is not o and _anchor(r) in o.ops for o in candidates)]


def _anchor(region: Region) -> Op:
    """An op every region around this one owns: a cond's first Switch, a loop's first Merge."""
    return region.switches[0] if isinstance(region, CondRegion) else region.variables[0].merge


# -- while frames -------------------------------------------------------------------------
def _enters_by_frame(ops: Sequence[Op]) -> dict[str, list[Op]]:
    frames: dict[str, list[Op]] = {}
    for op in ops:
        if op.type in ENTER:
            name = _frame_name(op)
            if not name:
                raise UnsupportedOpError(op.type, op.name, "it has no frame_name")
            frames.setdefault(name, []).append(op)
    return frames


def _frame_name(enter: Op) -> str:
    name = enter.attr("frame_name", "")
    return name.decode("utf-8", "replace") if isinstance(name, bytes) else str(name)


def _while_frame(name: str, enters: list[Op], members: set[Op]) -> WhileFrame:
    invariants = [e for e in enters if bool(e.attr("is_constant", False))]
    variables = [v for e in enters if e not in invariants for v in _loop_variables(e, members)]
    if not variables:
        raise UnsupportedOpError(enters[0].type, enters[0].name, f"loop '{name}' carries no value (no Merge)")
    switched = [v for v in variables if v.switch is not None]
    if not switched:
        raise UnsupportedOpError(enters[0].type, enters[0].name, f"loop '{name}' has no Switch on its condition")
    loop_cond = switched[0].switch.operands[1].op
    for var in switched:
        if var.switch.operands[1].op is not loop_cond:
            raise UnsupportedOpError(var.switch.type, var.switch.name, f"its predicate is not the LoopCond "
                                                                       f"'{loop_cond.name}' of loop '{name}'")
    inside = {v.merged for v in variables} | {e.results[0] for e in invariants}
    cond_ops = _between([loop_cond.operands[0]], inside, members, name)
    body_inputs = ({v.body_input for v in switched} | {v.merged for v in variables}
                   | {e.results[0] for e in invariants})
    body_ops = _between([v.body_output for v in variables], body_inputs, members, name)
    frame = WhileFrame(name, invariants, variables, loop_cond, cond_ops, body_ops)
    structural = [op for v in variables for op in (v.enter, v.merge, v.switch, v.next_iteration, v.exit) if op]
    frame.ops = set(invariants) | set(structural) | {loop_cond} | set(cond_ops) | set(body_ops)
    frame.ops -= _free_constants(frame.ops)
    return frame


def _loop_variables(enter: Op, members: set[Op]) -> list[LoopVariable]:
    """One variable per Merge the Enter feeds (after CSE one Enter may start several)."""
    merges = [user for user, _ in enter.results[0].uses if user.type in MERGE and user in members]
    if not merges:
        raise UnsupportedOpError(enter.type, enter.name, "a loop variable's Enter feeds no Merge")
    return [_loop_variable(enter, merge, members) for merge in merges]


def _loop_variable(enter: Op, merge: Op, members: set[Op]) -> LoopVariable:
    """The variable a Merge carries; its loop Switch is the one on a LoopCond (others belong to conds
    reading the value, such as the `and` of a loop condition, which -O2's identity removal exposes)."""
    nexts = [v.op for v in merge.operands if v.op.type in NEXT_ITERATION]
    readers = [user for user, _ in merge.results[0].uses if user.type in SWITCH and user in members]
    switches = [user for user in readers if user.operands[1].op.type in LOOP_COND]
    if len(merge.operands) != 2 or len(nexts) != 1 or len(switches) > 1:
        raise UnsupportedOpError(merge.type, merge.name, "a loop Merge needs two inputs, one of them a "
                                                         "NextIteration, and at most one Switch on a LoopCond")
    if not switches:
        if readers:  # a cond reading the value, but no loop Switch to carry it on
            raise UnsupportedOpError(readers[0].type, readers[0].name, "a loop Switch must be predicated on "
                                                                       "a LoopCond")
        return LoopVariable(enter, merge, None, nexts[0], None)
    switch = switches[0]
    exits = [user for user, _ in switch.results[0].uses if user.type in EXIT and user in members]
    if len(exits) > 1:
        raise UnsupportedOpError(exits[1].type, exits[1].name, "a loop variable has more than one Exit")
    return LoopVariable(enter, merge, switch, nexts[0], exits[0] if exits else None)


def _between(roots: list[Value], inside: set[Value], members: set[Op], frame: str) -> list[Op]:
    """The ops computing `roots` from the frame's `inside` values, in topological order.

    Reaching an Enter of the same frame means a value bypasses its Merge; reaching an op that is
    not exported means the loop reads something the export cut off: both are refused.
    """
    found = reachable_ops(roots, inside)
    for op in found:
        if op.type in ENTER and _frame_name(op) == frame:
            raise UnsupportedOpError(op.type, op.name, f"loop '{frame}' reads this Enter without its Merge")
        if op not in members:
            raise UnsupportedOpError(op.type, op.name, f"loop '{frame}' depends on it, but it is not exported")
    return _topological(found) if found else []


def _topological(ops: set[Op]) -> list[Op]:
    graph = next(iter(ops)).graph
    back_edges = {op.results[0] for op in ops if op.type in NEXT_ITERATION}
    return topological_order(graph, ops, back_edges)


def _free_constants(ops: set[Op]) -> set[Op]:
    """Operand-free ops (Consts) a region reads but need not own: they may be shared with the outside."""
    return {op for op in ops if not op.operands and op.type not in TF1_CONTROL_FLOW}


def forwarded_source(value: Value) -> Value:
    while value.op.type in FORWARDING:
        value = value.op.operands[0]
    return value


# -- conds ----------------------------------------------------------------------------------
def _conds(ops: Sequence[Op], members: set[Op], frames: list[WhileFrame]) -> list[CondRegion]:
    by_predicate: dict[Value, list[Op]] = {}
    for op in ops:
        if op.type in SWITCH and op.operands[1].op.type not in LOOP_COND:
            by_predicate.setdefault(op.operands[1], []).append(op)
    return [_cond(pred, group, members, frames) for pred, switches in by_predicate.items()
            for group in _independent_conds(pred, switches, members)]


def _independent_conds(predicate: Value, switches: list[Op], members: set[Op]) -> list[list[Op]]:
    """The Switches on one predicate, split into the conds they form: two Switches belong to one
    cond when their branches meet before a join of the predicate (a Merge both sides reach).  TF1
    layers give every cond the same `is_training` placeholder; one region for all of them would
    feed itself (a layer's join feeds the next layer's Switch)."""
    side = _branch_sides(predicate, switches, members)
    group = {s: s for s in switches}

    def root(s: Op) -> Op:
        while group[s] is not s:
            group[s] = group[group[s]]
            s = group[s]
        return s

    owner: dict[Op, Op] = {}
    for switch in switches:
        stack = [u for v in switch.results for u, _ in v.uses if u in side]
        while stack:
            op = stack.pop()
            if op in owner:
                group[root(owner[op])] = root(switch)
                continue
            owner[op] = switch
            if not (op.type in MERGE and len(side[op]) == 2):
                stack.extend(u for v in op.results for u, _ in v.uses if u in side)
    groups: dict[Op, list[Op]] = {}
    for switch in switches:
        groups.setdefault(root(switch), []).append(switch)
    return list(groups.values())


def _cond(predicate: Value, switches: list[Op], members: set[Op], frames: list[WhileFrame]) -> CondRegion:
    side = _branch_sides(predicate, switches, members)
    merges = [op for op, sides in side.items() if len(sides) == 2]
    inside = {op: next(iter(sides)) for op, sides in side.items() if len(sides) == 1}
    for merge in merges:
        if merge.type not in MERGE:
            raise UnsupportedOpError(merge.type, merge.name, f"it reads both branches of the cond on "
                                                             f"'{predicate.name}' without a Merge")
        if len(merge.operands) != 2:
            raise UnsupportedOpError(merge.type, merge.name, "a cond Merge must have exactly two inputs")
    _check_contained(inside, merges, predicate, members)
    inside.update(_frames_in_branches(inside, switches, frames))
    branches = {t: _topological_or_empty([op for op, s in inside.items() if s == t]) for t in (False, True)}
    region = CondRegion(predicate, switches, merges, branches)
    region.ops = (set(switches) | set(merges) | set(inside)) - _free_constants(set(inside))
    return region


def _branch_sides(predicate: Value, switches: list[Op], members: set[Op]) -> dict[Op, set[bool]]:
    """Which branches reach each op, forward from the Switches.

    A cond Merge is held back until everything else has spread: one reached from both sides is a
    join of this cond (its result lies outside the branches); one reached from one side only, on
    all its inputs, joins a cond nested in that branch and passes the branch on.  Loop Merges
    (fed by a NextIteration) are never joins.
    """
    side: dict[Op, set[bool]] = {}
    held: set[Op] = set()
    passed: set[Op] = set()
    frontier = [(user, taken) for s in switches for taken in (False, True)
                for user, _ in s.results[int(taken)].uses if user in members]
    while True:
        while frontier:
            op, taken = frontier.pop()
            sides = side.setdefault(op, set())
            if taken in sides:
                continue
            sides.add(taken)
            if op.type in MERGE and op not in passed and not _is_loop_merge(op):
                held.add(op)
                continue
            frontier.extend(_users(op, taken, members))
        release = _releasable(held, side, switches)
        if not release:
            return side
        held.discard(release)
        passed.add(release)
        frontier.extend(_users(release, next(iter(side[release])), members))


def _is_loop_merge(op: Op) -> bool:
    return any(v.op.type in NEXT_ITERATION for v in op.operands)


def _releasable(held: set[Op], side: dict[Op, set[bool]], switches: list[Op]) -> Optional[Op]:
    """A held one-sided Merge whose inputs have all arrived, else any held one-sided Merge.  (The
    result of a Merge still held has not arrived: the join of a cond nested in one branch of another,
    as a lowered switch_case nests them, is released before the join it feeds.)"""
    one_sided = sorted((m for m in held if len(side[m]) == 1), key=lambda m: m.name)
    for merge in one_sided:
        if all((v.op in side and v.op not in held) or v.op in switches for v in merge.operands):
            return merge
    return one_sided[0] if one_sided else None


def _users(op: Op, taken: bool, members: set[Op]) -> list[tuple[Op, bool]]:
    return [(user, taken) for value in op.results for user, _ in value.uses if user in members]


def _frames_in_branches(inside: dict[Op, bool], switches: list[Op], frames: list[WhileFrame]) -> dict[Op, bool]:
    """Every op of a loop a branch runs: forward from the Switches only part of it is reached (its
    counter, started from a constant, is not)."""
    found: dict[Op, bool] = {}
    for frame in frames:
        if switches[0] in frame.ops:
            continue  # the cond lies in this loop's body, not the other way round
        taken = next((inside[op] for op in frame.ops if op in inside), None)
        if taken is not None:
            found.update((op, taken) for op in frame.ops)
    return found


def _check_contained(side: dict[Op, bool], merges: list[Op], predicate: Value, members: set[Op]) -> None:
    """A branch value may leave the cond only through one of its Merges (readers the export
    leaves out, such as the Merge of a statistic nobody reads, do not count)."""
    for op in side:
        for value in op.results:
            for user, _ in value.uses:
                if user in members and user not in side and user not in merges:
                    raise UnsupportedOpError(user.type, user.name, f"it reads '{value.name}' from one branch of "
                                                                   f"the cond on '{predicate.name}' outside a Merge")


def _topological_or_empty(ops: list[Op]) -> list[Op]:
    return _topological(set(ops)) if ops else []


# -- unit scheduling -----------------------------------------------------------------------
def _order_units(ops: Sequence[Op], owner: dict[Op, Unit], position: dict[Op, int]) -> list[Unit]:
    """Kahn's order over ops and regions, ties broken by the first op's position (deterministic)."""
    units: dict[int, Unit] = {}
    first: dict[int, int] = {}
    for op in ops:
        unit = owner.get(op, op)
        key = id(unit)
        units.setdefault(key, unit)
        first[key] = min(first.get(key, position[op]), position[op])
    preds: dict[int, set[int]] = {key: set() for key in units}
    for op in ops:
        key = id(owner.get(op, op))
        for value in op.operands:
            producer = value.op
            if producer in position and value.op.type not in NEXT_ITERATION:
                pkey = id(owner.get(producer, producer))
                if pkey != key:
                    preds[key].add(pkey)
    users: dict[int, list[int]] = {key: [] for key in units}
    for key, before in preds.items():
        for p in before:
            users[p].append(key)
    indegree = {key: len(before) for key, before in preds.items()}
    ready = [(first[k], k) for k, n in indegree.items() if n == 0]
    heapq.heapify(ready)
    order: list[Unit] = []
    while ready:
        _, key = heapq.heappop(ready)
        order.append(units[key])
        for user in users[key]:
            indegree[user] -= 1
            if indegree[user] == 0:
                heapq.heappush(ready, (first[user], user))
    if len(order) != len(units):
        stuck = min((k for k, n in indegree.items() if n), key=first.__getitem__)
        unit = units[stuck]
        op = unit if isinstance(unit, Op) else min(unit.ops, key=position.__getitem__)
        raise UnsupportedOpError(op.type, op.name, "its while loop or cond depends on its own results "
                                                   "(regions that cannot be ordered)")
    return order


# -- static shapes through frames and lists -----------------------------------------------
_LIST_OPS_WITH_SHAPES = frozenset({"TensorListGetItem", "TensorListStack", "TensorListGather"})
_REFINE_ROUNDS = 8


def needs_shape_refinement(ops: Collection[Op]) -> bool:
    return any(op.type in TF1_CONTROL_FLOW or op.type.startswith("TensorList") for op in ops)


def frame_shapes(graph: Graph, roots: Optional[Sequence[Value]] = None) -> Callable[[Value], Shape]:
    """Shapes as the export derives them, through Enter/Merge/Switch/Exit and TensorLists, for the
    ops `roots` need (default: the whole graph): for rewrites that run before the lowering does."""
    ops = export_order(graph, graph.ops if roots is None else reachable_ops(roots), ())
    info = analyze(ops)
    return (refine_shapes(info, ops) if needs_shape_refinement(ops) else info).shape


def refine_shapes(info: StaticInfo, ops: Sequence[Op]) -> StaticInfo:
    """`info` re-derived with shapes flowing through Enter/Merge/Switch/Exit and TensorLists.

    The shape rules stop at control flow and at variant-typed lists; a loop's results and the
    stacked outputs of a Keras RNN would otherwise reach the ops after the loop with unknown rank.
    A loop variable whose body changes its shape is relaxed to what both iterations agree on;
    rounds repeat until nothing changes (a few: one per level of nesting or chained loop).
    """
    members = set(ops)
    external = {v for op in ops for v in op.operands if v.op not in members}
    inputs = {v: info.shape(v) for v in external if not info.is_constant(v)}
    constants = {v: info.constants[v] for v in external if info.is_constant(v)}
    seeds: dict[Value, Shape] = {}
    refined = info
    for _ in range(_REFINE_ROUNDS):
        refined = analyze(ops, {**inputs, **seeds}, constants)
        found = _flow_shapes(ops, refined)
        if found == seeds:
            break
        seeds = found
    return refined


def _flow_shapes(ops: Sequence[Op], info: StaticInfo) -> dict[Value, Shape]:
    shapes: dict[Value, Shape] = {}
    lists: dict[Value, tuple[Optional[int], Shape]] = {}
    growing = _growing_lists(ops)

    def shape(value: Value) -> Shape:
        return shapes.get(value, info.shape(value))

    for op in ops:
        if op.type in MERGE:
            known = [shape(v) for v in op.operands if v.op.type not in NEXT_ITERATION or v in shapes]
            back = [shape(v) for v in op.operands if v.op.type in NEXT_ITERATION and v not in shapes]
            merged = _relax(known + [s for s in back if s.dims is not None])
            shapes[op.results[0]], shapes[op.results[1]] = merged, Shape(())
        elif op.type in ENTER | EXIT | NEXT_ITERATION | SWITCH:
            for value in op.results:
                shapes[value] = shape(op.operands[0])
        elif op.type in LOOP_COND:
            shapes[op.results[0]] = Shape(())
        _track_list(op, info, lists, growing)
        if op.type in _LIST_OPS_WITH_SHAPES:
            shapes[op.results[0]] = _list_read_shape(op, info, lists)
    return {value: found for value, found in shapes.items() if found.dims is not None}


def _relax(shapes: list[Shape]) -> Shape:
    """The shape every one of `shapes` has: dims that differ become unknown, ranks that differ unknown."""
    known = [s for s in shapes if s.dims is not None]
    if not known or len(known) != len(shapes) or len({len(s.dims) for s in known}) != 1:
        return Shape(None)
    dims = [d[0] if len(set(d)) == 1 else None for d in zip(*(s.dims for s in known))]
    return Shape(tuple(dims))


def _growing_lists(ops: Sequence[Op]) -> set[Op]:
    """The TensorListReserves of lists some write may grow (`resize_if_index_out_of_bounds`): their
    item count is not known at export time anywhere, in a loop or after it."""
    pending = [op.operands[0] for op in ops if op.type == "TensorListSetItem" and op.operands
               and bool(op.attr("resize_if_index_out_of_bounds", False))]
    seen: set[Value] = set()
    found: set[Op] = set()
    while pending:
        value = pending.pop()
        if value in seen:
            continue
        seen.add(value)
        source = value.op
        if source.type == "TensorListReserve":
            found.add(source)
        elif source.type in MERGE:
            pending.extend(source.operands)
        elif source.operands and (source.type in TF1_CONTROL_FLOW or source.type in FORWARDING
                                  or source.type == "TensorListSetItem"):
            pending.append(source.operands[0])
    return found


def _track_list(op: Op, info: StaticInfo, lists: dict[Value, tuple[Optional[int], Shape]],
                growing: set[Op]) -> None:
    """How many items each list value holds and their shape, as far as known at export time."""
    if op.type == "TensorListFromTensor":
        dims = info.shape(op.operands[0]).dims
        if dims:
            lists[op.results[0]] = (dims[0], merge_shapes(Shape(tuple(dims[1:])), _const_shape(info, op.operands[1])))
    elif op.type == "TensorListReserve":
        count = info.constant(op.operands[1])
        known = count is not None and np.size(count) == 1 and op not in growing  # TF refuses other num_elements
        lists[op.results[0]] = (int(np.asarray(count).reshape(())) if known else None,
                                _const_shape(info, op.operands[0]))
    elif op.operands and op.operands[0] in lists and (op.type in TF1_CONTROL_FLOW or op.type in FORWARDING
                                                       or op.type == "TensorListSetItem"):
        for value in op.results[: 2 if op.type in SWITCH else 1]:
            lists[value] = lists[op.operands[0]]


def _list_read_shape(op: Op, info: StaticInfo, lists: dict[Value, tuple[Optional[int], Shape]]) -> Shape:
    count, element = lists.get(op.operands[0], (None, Shape(None)))
    element = merge_shapes(element, _const_shape(info, op.operands[-1 if op.type != "TensorListGather" else 2]))
    if op.type == "TensorListGetItem":
        return element
    if op.type == "TensorListGather":
        count = info.shape(op.operands[1]).dims[0] if info.shape(op.operands[1]).rank == 1 else None
    else:
        declared = int(op.attr("num_elements", -1))
        count = declared if declared >= 0 else count
    return Shape(None) if element.dims is None else Shape((count,) + tuple(element.dims))


def _const_shape(info: StaticInfo, value: Value) -> Shape:
    """A constant element-shape operand (-1: unknown dim, scalar -1: unknown rank)."""
    found = info.constant(value)
    if found is None or np.asarray(found).ndim == 0:
        return Shape(None)
    return Shape.of(int(d) for d in np.asarray(found).reshape(-1))
