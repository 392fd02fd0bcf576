"""remove_nodes: bypass pass-through ops such as Identity and CheckNumerics."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from compiler.errors import PassFailure
from compiler.graphutil.control_flow import SWITCH_OPS
from compiler.graphutil.graphdef_header import discard_graphdef_header
from compiler.graphutil.names import node_names
from compiler.graphutil.order import gtt_execution_order
from compiler.graphutil.reachability import depends_on
from compiler.graphutil.rewire import move_control_users, redirect_uses
from compiler.ir.graph import Graph, Op
from compiler.passes.base import Param, Pass, PassContext, PassResult, register_pass

COLOCATION_ATTR = "_class"
COLOCATION_PREFIX = "loc:@"


@register_pass
class RemoveNodes(Pass):
    """Remove ops of the given types that just pass their input through, rewiring users to the input.

    Follows GTT round for round (so node order matches), but never changes
    what the graph computes: it keeps graph inputs and outputs, TF1
    control-flow pivots (an op read by control edges whose input is a
    Switch output), colocation targets, ops whose other outputs are read,
    ops with control inputs their input does not already imply, and ops with
    more than one data input (GTT removes those with `max_inputs` > 1).
    Everything kept, and why, is in the notes; docs/GTT_DIFFERENCES.md
    lists where this departs from GTT.
    """

    name = "remove_nodes"
    edits_through_api = True
    params = (
        Param("op", "str", None, "op type to remove; repeat to remove several types", repeated=True),
        Param("max_inputs", "int", 1, "also match ops with up to this many data inputs "
              "(GTT compatibility: gttc keeps ops with more than one)"),
    )

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        op_types: list[str] = ctx.params("op")
        if not op_types:
            raise PassFailure("remove_nodes expects at least one 'op' argument, e.g. remove_nodes(op=Identity)")
        max_inputs: int = ctx.param("max_inputs")
        guard = RemovalGuard(node_names(ctx.inputs) | node_names(ctx.outputs), colocation_targets(graph))
        removed: dict[str, int] = {}
        for op_type in op_types:
            for num_inputs in range(1, max_inputs + 1):
                kept: list[Match] = []
                while not (kept and repeats_kept_matches(graph, op_type, num_inputs, kept)):
                    count, kept = remove_round(graph, op_type, num_inputs, guard)
                    if not count:
                        break
                    removed[op_type] = removed.get(op_type, 0) + count
        dropped_header = discard_graphdef_header(graph)
        total = sum(removed.values())
        result = PassResult(sites=total, changed=bool(total) or dropped_header)
        for op_type, count in removed.items():
            result.note(f"removed {count} {op_type} nodes")
        for note in guard.kept_notes():
            result.note(note)
        return result


@dataclass
class Match:
    """One GTT pattern match: the op to bypass and the producers of its data inputs.

    `kept` marks a graph input or output: GTT matches it like any other
    op (so it still claims its input for the round and gets reordered),
    then leaves it in place.
    """

    head: Op
    inputs: list[Op]
    kept: bool = False


@dataclass
class RemovalGuard:
    """Decides which candidates may go, and remembers why the others stay.

    Graph inputs and outputs are GTT's own exception and behave exactly as
    in GTT.  The other reasons are gttc's: such ops are not matched at all,
    so they neither move nor stop a sibling reading the same input from
    being removed.
    """

    required: set[str]
    colocated: set[str]
    kept: dict[str, dict[str, str]] = field(default_factory=dict)  # reason -> {op name: op type}

    def is_required(self, op: Op) -> bool:
        if op.name in self.required:
            self._record("graph inputs/outputs", op)
            return True
        return False

    def protects(self, op: Op) -> bool:
        """Whether removing `op` could change what the graph computes (the reason is recorded)."""
        reason = self.safety_reason(op)
        if reason is not None:
            self._record(reason, op)
        return reason is not None

    def safety_reason(self, op: Op) -> Optional[str]:
        if op.name in self.colocated:
            return "colocation targets (named by a 'loc:@' _class attribute)"
        if len(op.operands) > 1:
            return "more than one data input"
        if any(value.uses for value in op.results[1:]):
            return "outputs other than 0 are read"
        if op.control_users and op.operands[0].op.type in SWITCH_OPS:
            return "TF1 control-flow pivots (control edges from a Switch output)"
        if any(not depends_on(op.operands[0].op, dep) for dep in op.control_deps):
            return "only carriers of their control inputs"
        return None

    def _record(self, reason: str, op: Op) -> None:
        self.kept.setdefault(reason, {})[op.name] = op.type

    def kept_notes(self) -> list[str]:
        notes = []
        for reason, ops in self.kept.items():
            types = sorted(set(ops.values()))
            names = sorted(ops)
            shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
            notes.append(f"kept {len(names)} {'/'.join(types)} nodes: {reason} ({shown})")
        return notes


def colocation_targets(graph: Graph) -> set[str]:
    """Names that some op's `_class` attribute asks to be colocated with."""
    targets = set()
    for op in graph:
        if COLOCATION_ATTR not in op.attrs:
            continue
        value = op.attrs[COLOCATION_ATTR]
        for item in value if isinstance(value, tuple) else (value,):
            if isinstance(item, str) and item.startswith(COLOCATION_PREFIX):
                targets.add(item[len(COLOCATION_PREFIX):])
    return targets


def remove_round(graph: Graph, op_type: str, num_inputs: int, guard: RemovalGuard) -> tuple[int, list[Match]]:
    """One GTT round: match in execution order, reorder, bypass; returns how many ops went, and the
    matches the round kept in place (graph inputs and outputs)."""
    if not has_candidates(graph, op_type, num_inputs):
        return 0, []  # nothing to match: skip ordering the whole graph
    matches = find_matches(graph, op_type, num_inputs, guard)
    if not matches:
        return 0, []
    order = order_after_round(graph, matches)
    removed = [m.head for m in matches if not m.kept]
    # Control users go first, all at once: a hub waiting on many of the removed ops is rebuilt once.
    graph.hand_over_control_users([(op, op.operands[0].op) for op in removed])
    for op in removed:
        bypass(graph, op)
    graph.reorder(order)
    return len(removed), [m for m in matches if m.kept]


def repeats_kept_matches(graph: Graph, op_type: str, num_inputs: int, kept: list[Match]) -> bool:
    """Whether the next round would match just `kept`, the graph inputs/outputs the last round matched
    and left in place, and so remove nothing and keep the order: then it need not order the graph.

    That holds when the ops of the type are exactly those heads, with the inputs they had, no op
    in two of these matches: each is then matched whatever the order visits first, and the
    guard is asked nothing new.  The execution order places every op it placed before (a
    bypass ends no dependency), so none is left out; and the last round's reorder wrote each
    head followed by its inputs, where this round would write them again."""
    heads = {m.head for m in kept}
    for op in graph:
        if op.type == op_type and len(op.operands) == num_inputs and op not in heads:
            return False
    claimed: set[Op] = set()
    for match in kept:
        inputs = [value.op for value in match.head.operands]
        if inputs != match.inputs:
            return False
        for op in (match.head, *inputs):
            if op in claimed:
                return False
            claimed.add(op)
    return True


def has_candidates(graph: Graph, op_type: str, num_inputs: int) -> bool:
    """Whether any op could match this round."""
    for op in graph:
        if op.type == op_type and len(op.operands) == num_inputs:
            return True
    return False


def find_matches(graph: Graph, op_type: str, num_inputs: int, guard: RemovalGuard) -> list[Match]:
    """GTT's greedy matcher: each op joins at most one match, heads visited in execution order."""
    order = gtt_execution_order(graph)
    unreachable = set(order.stuck)
    matched: set[Op] = set()
    matches = []
    for op in order.ordered:
        if op.type != op_type or op in matched or len(op.operands) != num_inputs:
            continue
        if op.name not in guard.required and guard.protects(op):
            continue
        inputs = [value.op for value in op.operands]
        if any(p in matched or p in unreachable for p in inputs):
            continue
        matched.add(op)
        matched.update(inputs)
        matches.append(Match(op, inputs, kept=guard.is_required(op)))
    return matches


def order_after_round(graph: Graph, matches: list[Match]) -> list[Op]:
    """Where GTT puts nodes after a round: each match is written out at its head's place.

    A bypassed head is replaced by its input's producer (and left out, since
    it is about to be erased); a kept head is written followed by its input
    producers.  Producers leave their old place.
    """
    by_head = {m.head: m for m in matches}  # ops hash and compare by identity
    in_match = {p for m in matches for p in m.inputs}
    order: list[Op] = []
    for op in graph:
        match = by_head.get(op)
        if match is None:
            if op not in in_match:
                order.append(op)
        elif match.kept:
            order.extend(dict.fromkeys([op] + match.inputs))
        else:
            order.append(match.inputs[0])
    return order


def bypass(graph: Graph, op: Op) -> None:
    """Rewire users of `op` to its input (spelled as `op` spelled it) and erase `op`.

    Control users now depend on the input's producer, in place (already done for a
    whole round by `remove_round`, which leaves nothing to move here).
    """
    source = op.operands[0]
    redirect_uses(op.results[0], source, explicit_port0=source.index == 0 and 0 in op.explicit_port0)
    move_control_users(op, source.op)
    graph.erase_op(op)
