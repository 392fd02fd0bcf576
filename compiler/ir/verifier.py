"""Structural invariants of the IR, checked after every pass.

The verifier proves the mutation API was used correctly: operands are
defined in this graph, use-lists mirror operands exactly, names are unique,
and the only cycles are TF1 loop back-edges (NextIteration feeding Merge).
"""
from __future__ import annotations

from compiler.errors import VerificationError
from compiler.ir.graph import Graph, Op

# Edges into these ops may close a cycle: TF1 while loops.
_BACK_EDGE_TARGETS = ("Merge", "RefMerge")
_BACK_EDGE_SOURCES = ("NextIteration", "RefNextIteration")


def verify(graph: Graph) -> None:
    """Raise VerificationError naming the first broken invariant.

    It runs after every pass, so it is linear: each operand slot, use-list entry
    and control edge is looked at a constant number of times.
    """
    ops = list(graph)
    members = set(map(id, ops))
    if len(ops) != len(graph):
        raise VerificationError(f"op list has {len(ops)} ops but the name table has {len(graph)}")
    for op in ops:
        if graph.get(op.name) is not op:
            raise VerificationError(f"op '{op.name}' is not registered under its name")
        if op.graph is not graph:
            raise VerificationError(f"op '{op.name}' does not point back to its graph")
        _verify_operands(op, members)
        _verify_results(op, members)
    _verify_uses_exactly_once(ops)
    _verify_control(ops, members)
    _verify_acyclic(ops)


def _verify_operands(op: Op, members: set[int]) -> None:
    for i, value in enumerate(op._operands):
        if id(value.op) not in members:
            raise VerificationError(f"op '{op.name}' operand {i} is defined by '{value.op.name}', which is not in the graph")
        if value.op.results[value.index] is not value:
            raise VerificationError(f"op '{op.name}' operand {i} is a stale value of '{value.op.name}'")


def _verify_results(op: Op, members: set[int]) -> None:
    for index, value in enumerate(op.results):
        if value.op is not op or value.index != index:
            raise VerificationError(f"result {index} of '{op.name}' is misnumbered")
        for user, i in value.uses:
            if id(user) not in members:
                raise VerificationError(f"'{value.name}' has a dangling use by erased op '{user.name}'")
            if i >= len(user._operands) or user._operands[i] is not value:
                raise VerificationError(f"'{value.name}' records a use by '{user.name}' operand {i} that does not exist")


def _verify_uses_exactly_once(ops: list[Op]) -> None:
    """Every use-list entry names a real operand slot (checked above); with as many distinct
    entries as slots, each slot is recorded exactly once."""
    recorded = {(id(user), i) for op in ops for value in op.results for user, i in value.uses}
    entries = sum(len(value.uses) for op in ops for value in op.results)
    slots = sum(len(op._operands) for op in ops)
    if len(recorded) == entries == slots:
        return
    for op in ops:  # rare: find the slot to name
        for i, value in enumerate(op._operands):
            if value.uses.count((op, i)) != 1:
                raise VerificationError(f"use-list of '{value.name}' does not record operand {i} of '{op.name}' "
                                        "exactly once")
    raise VerificationError("a use-list records an operand slot more than once")


def _verify_control(ops: list[Op], members: set[int]) -> None:
    """Control dependencies and control_users lists name the same edges."""
    deps_side: set[tuple[int, int]] = set()
    for op in ops:
        for dep in op._control_deps:
            if id(dep) not in members:
                raise VerificationError(f"op '{op.name}' control-depends on '{dep.name}', which is not in the graph")
            deps_side.add((id(dep), id(op)))
    users_side = {(id(op), id(user)) for op in ops for user in op.control_users}
    if deps_side == users_side:
        return
    by_id = {id(op): op for op in ops}
    for dep_id, user_id in sorted(deps_side - users_side):
        dep, user = by_id[dep_id], by_id[user_id]
        raise VerificationError(f"'{dep.name}' does not list '{user.name}' among its control users")
    dep_id, user_id = sorted(users_side - deps_side)[0]
    dep, user = by_id[dep_id], by_id.get(user_id)
    user_name = user.name if user is not None else "an op outside the graph"
    raise VerificationError(f"'{dep.name}' lists control user '{user_name}' that does not depend on it")


def _verify_acyclic(ops: list[Op]) -> None:
    """Kahn's algorithm over data and control edges, ignoring NextIteration -> Merge."""
    indegree: dict[int, int] = {}
    succs: dict[int, list[Op]] = {id(op): [] for op in ops}
    for op in ops:
        preds = [v.op for v in op._operands if not _is_back_edge(v.op, op)] + op._control_deps
        indegree[id(op)] = len(preds)
        for p in preds:
            succs[id(p)].append(op)
    ready = [op for op in ops if indegree[id(op)] == 0]
    seen = 0
    while ready:
        op = ready.pop()
        seen += 1
        for s in succs[id(op)]:
            indegree[id(s)] -= 1
            if indegree[id(s)] == 0:
                ready.append(s)
    if seen != len(ops):
        stuck = sorted(op.name for op in ops if indegree[id(op)] > 0)
        raise VerificationError(f"graph has a cycle through {len(stuck)} ops, e.g. '{stuck[0]}'")


def _is_back_edge(source: Op, target: Op) -> bool:
    return source.type in _BACK_EDGE_SOURCES and target.type in _BACK_EDGE_TARGETS
