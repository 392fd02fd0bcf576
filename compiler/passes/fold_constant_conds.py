"""fold_constant_conds: remove the dead branch of TF1 conds whose predicate is a constant.

A frozen TF1 graph keeps `cond(training, ...)` as Switch/Merge even when the
flag froze to a Const (Keras-1 dropout, `tf.compat.v1.layers.batch_normalization`).
TF's constant folding never looks through control flow, and neither does GTT,
so the dead branch ships, and BN folding cannot see through the Switches.

For every Switch whose predicate evaluates at compile time, the live output is
replaced by the Switch's data input, and every op the dead output reaches is
removed, with TF's dead-tensor rules (`graphutil/control_flow.py`):
- an op with a dead data or control input is dead, except
- a Merge, which is dead only when all its data inputs are, and otherwise
  becomes its one live input (and its `value_index` a Const);
- a control edge leaving a Switch is live on both branches.
A group of Switches is left alone, with the reason in the report, when its
dead set would reach a loop (Enter/Exit/NextIteration), a Merge left with two
live inputs, or a graph output; or when a Switch has control inputs (they
would stop gating anything).
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from compiler.graphutil.control_flow import MERGE_OPS, NEXT_ITERATION_OPS, SWITCH_OPS
from compiler.ir.dtypes import DType
from compiler.ir.graph import Graph, Op, Value
from compiler.ir.op_registry import is_stateful
from compiler.ir.tensor import Tensor
from compiler.passes.base import Pass, PassContext, PassResult, register_pass
from compiler.runtime.op_eval import FORWARDING_OPS, InterpreterError, evaluate_op, has_kernel

# Ops a dead branch must not reach: removing them would change a loop, not a cond.
_LOOP_OPS = frozenset({"Enter", "RefEnter", "Exit", "RefExit", "LoopCond"}) | NEXT_ITERATION_OPS
# A predicate is evaluated only through this many ops: it is a flag, not a computation.
MAX_PREDICATE_OPS = 32


@register_pass
class FoldConstantConds(Pass):
    """Remove the dead branch of TF1 conds (Switch/Merge) whose predicate is constant."""

    name = "fold_constant_conds"

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        fed = set(ctx.inputs)
        pinned = set(ctx.outputs)
        result = PassResult()
        groups: dict[Value, list[Op]] = {}
        for op in graph:
            if op.type in SWITCH_OPS and op.type != "_SwitchN" and len(op.operands) == 2:
                groups.setdefault(_forwarded_source(op.operands[1]), []).append(op)
        folded = removed = 0
        for predicate, switches in groups.items():
            switches = [s for s in switches if s.graph is graph]
            if not switches:
                continue
            flag = constant_predicate(predicate, fed)
            if flag is None:
                continue
            plan = plan_fold(switches, flag, pinned)
            if plan.blocker:
                result.note(f"left {len(switches)} Switch ops on '{predicate.name}' alone: {plan.blocker}")
                continue
            removed += apply_fold(graph, plan)
            folded += len(switches)
            result.note(f"'{predicate.name}' is always {flag}: folded {len(switches)} Switch ops, "
                        f"resolved {len(plan.merges)} Merge ops, removed {len(plan.dead)} ops of the dead branch")
        result.sites = folded
        result.changed = bool(folded)
        if not folded and not result.notes:
            result.note("no Switch has a constant predicate")
        return result


def _forwarded_source(value: Value) -> Value:
    """The value an Identity chain forwards: each TF1 cond reads its flag through its own `pred_id`,
    and the conds on one flag are reported together."""
    while value.op.type in FORWARDING_OPS and len(value.op.operands) == 1 and not value.op.control_deps:
        value = value.op.operands[0]
    return value


def constant_predicate(value: Value, fed: set[str]) -> Optional[bool]:
    """The value of a scalar boolean predicate computed from Consts only, else None."""
    cone = _predicate_cone(value.op, fed)
    if cone is None:
        return None
    arrays: dict[Value, np.ndarray] = {}
    for op in cone:
        try:
            outputs = evaluate_op(op, [arrays[v] for v in op.operands])
        except InterpreterError:
            return None
        arrays.update(zip(op.results, outputs))
    array = arrays.get(value)
    if array is None or array.dtype != np.bool_ or array.size != 1:
        return None
    return bool(array.reshape(()))


def _predicate_cone(root: Op, fed: set[str]) -> Optional[list[Op]]:
    """The ops `root` depends on, operands first, if all are evaluable and few enough."""
    order: list[Op] = []
    seen: set[Op] = set()
    stack: list[tuple[Op, bool]] = [(root, False)]
    while stack:
        op, expanded = stack.pop()
        if expanded:
            order.append(op)
            continue
        if op in seen:
            continue
        seen.add(op)
        if len(seen) > MAX_PREDICATE_OPS or not _evaluable(op, fed):
            return None
        stack.append((op, True))
        stack.extend((v.op, False) for v in op.operands if v.op not in seen)
    return order


def _evaluable(op: Op, fed: set[str]) -> bool:
    if op.name in fed or is_stateful(op.type) or any(v.dtype == DType.VARIANT for v in op.results):
        return False
    return op.type == "Const" or op.type in FORWARDING_OPS or (bool(op.operands) and has_kernel(op.type))


@dataclass
class FoldPlan:
    """What folding a group of Switches removes, computed before anything changes."""

    switches: list[Op]
    live_port: int
    dead: set[Op] = field(default_factory=set)
    # Merge -> the index of its one live data operand.
    merges: dict[Op, int] = field(default_factory=dict)
    blocker: str = ""


def plan_fold(switches: list[Op], flag: bool, pinned: set[str]) -> FoldPlan:
    """Propagate deadness from the Switches' dead outputs (TF's executor rules)."""
    plan = FoldPlan(switches, live_port=1 if flag else 0)
    blocked = [s.name for s in switches if s.control_deps]
    if blocked:
        plan.blocker = f"Switch '{blocked[0]}' has control inputs"
        return plan
    dead_operands: dict[Op, set[int]] = {}
    queue: deque[Op] = deque()

    def reach(user: Op, slot: Optional[int]) -> None:
        if user.type in MERGE_OPS:
            if slot is not None:
                dead_operands.setdefault(user, set()).add(slot)
                if len(dead_operands[user]) == len(user.operands) and user not in plan.dead:
                    plan.dead.add(user)
                    queue.append(user)
        elif user not in plan.dead:
            plan.dead.add(user)
            queue.append(user)

    for switch in switches:
        for user, slot in switch.results[1 - plan.live_port].uses:
            reach(user, slot)
    while queue:
        op = queue.popleft()
        for value in op.results:
            for user, slot in value.uses:
                reach(user, slot)
        for user in op.control_users:
            reach(user, None)
    plan.blocker = _blocker(plan, dead_operands, pinned)
    if not plan.blocker:
        plan.merges = {m: _only_live(m, slots) for m, slots in dead_operands.items() if m not in plan.dead}
    return plan


def _blocker(plan: FoldPlan, dead_operands: dict[Op, set[int]], pinned: set[str]) -> str:
    for op in sorted(plan.dead, key=lambda o: o.name):
        if op.type in _LOOP_OPS:
            return f"the dead branch reaches loop op '{op.name}' ({op.type})"
        if op.name in pinned:
            return f"the dead branch reaches graph output '{op.name}'"
    for merge, slots in sorted(dead_operands.items(), key=lambda item: item[0].name):
        if merge in plan.dead:
            continue
        if len(merge.operands) - len(slots) != 1:
            return f"Merge '{merge.name}' would keep {len(merge.operands) - len(slots)} live inputs"
        if merge.name in pinned:
            return f"Merge '{merge.name}' is a graph output"
        if any(v.op.type in NEXT_ITERATION_OPS for v in merge.operands):
            return f"Merge '{merge.name}' is a loop Merge"
    return ""


def _only_live(merge: Op, dead_slots: set[int]) -> int:
    return next(i for i in range(len(merge.operands)) if i not in dead_slots)


def apply_fold(graph: Graph, plan: FoldPlan) -> int:
    """Rewire live uses past the Switches and Merges, then erase them with the dead ops."""
    for switch in plan.switches:
        data = switch.operands[0]
        switch.results[plan.live_port].replace_all_uses_with(data)
        switch.hand_control_users_to(data.op)
    for merge, index in plan.merges.items():
        live = merge.operands[index]
        merge.results[0].replace_all_uses_with(live)
        if merge.results[1].uses:
            marker = graph.create_op("Const", graph.unique_name(f"{merge.name}/value_index"), attrs={
                "dtype": DType.INT32, "value": Tensor.from_numpy(np.asarray(index, np.int32))},
                device=merge.device, before=merge)
            merge.results[1].replace_all_uses_with(marker.result)
        merge.hand_control_users_to(live.op)
    doomed = set(plan.switches) | plan.dead | set(plan.merges)
    for op in doomed:
        for user in list(op.control_users):
            if user not in doomed:
                user.remove_control_dep(op)
    return graph.erase_ops(op for op in graph if op in doomed)
