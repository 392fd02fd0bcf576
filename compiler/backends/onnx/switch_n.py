"""A lowered `tf.switch_case` (_SwitchN and an N-way Merge) as nested two-way conds.

Freezing a TF2 function lowers its Case op the way it lowers If, but with a
_SwitchN per input: output k is live when the branch index is k, the last
output for any index out of range (TF's default branch), and one Merge of
the N branches' results.  The ONNX export knows two-way conds (Switch and
Merge on a boolean, `tf1_frames`), so this rewrite spells each _SwitchN as
a chain of Switches on `index == 0`, `index == 1`, ... (the false side of
each feeding the next, the last false side being the default), and each
N-way Merge as nested two-way Merges in branch order.  Exactly one branch
is live either way, so the values are the same; the export then finds
nested conds and lowers them to nested If nodes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Collection

import numpy as np

from compiler.backends.onnx.tf1_frames import MERGE, NEXT_ITERATION
from compiler.ir.dtypes import DType
from compiler.ir.graph import Graph, Op, Value
from compiler.rewrite.edit import add_const

# What the export can write once this rewrite has run (the N-way Merge is lowered as Merges are).
EXPORTED_OP_TYPES = frozenset({"_SwitchN"})


@dataclass(frozen=True)
class Case:
    """The _SwitchN ops of one branch index, and the N-way Merges of the graph."""

    switches: list[Op]
    merges: list[Op]


def find_switch_ns(graph: Graph, named: Collection[str] = ()) -> list[Case]:
    """The graph's _SwitchN ops grouped by branch index (with every N-way Merge, on the first group)."""
    by_index: dict[Value, list[Op]] = {}
    for op in graph:
        if op.type == "_SwitchN" and len(op.operands) == 2 and len(op.results) >= 2 and op.name not in named:
            by_index.setdefault(op.operands[1], []).append(op)
    if not by_index:
        return []
    merges = [op for op in graph if _is_n_way_merge(op, named)]
    return [Case(switches, merges if i == 0 else []) for i, switches in enumerate(by_index.values())]


def _is_n_way_merge(op: Op, named: Collection[str]) -> bool:
    return (op.type in MERGE and len(op.operands) > 2 and op.name not in named and not op.results[1].uses
            and not any(v.op.type in NEXT_ITERATION for v in op.operands))


def rewrite_found(graph: Graph, found: list[Case], named: Collection[str] = ()) -> None:
    """Each _SwitchN as a chain of Switches, each N-way Merge as nested Merges, in place."""
    for case in found:
        tests: dict[int, Value] = {}
        for switch in case.switches:
            _as_switch_chain(graph, switch, tests)
        for merge in case.merges:
            _as_nested_merges(graph, merge)


def _as_switch_chain(graph: Graph, switch_n: Op, tests: dict[int, Value]) -> None:
    data, index = switch_n.operands
    rest = data
    for k, result in enumerate(switch_n.results[:-1]):
        if k not in tests:
            tests[k] = _index_is(graph, switch_n, k)
        made = graph.create_op("Switch", graph.unique_name(f"{switch_n.name}/is_{k}"), [rest, tests[k]],
                               {"T": switch_n.attr("T")}, device=switch_n.device, before=switch_n)
        result.replace_all_uses_with(made.results[1])
        rest = made.results[0]
    switch_n.results[-1].replace_all_uses_with(rest)
    switch_n.hand_control_users_to(rest.op)
    graph.erase_op(switch_n)


def _index_is(graph: Graph, switch_n: Op, k: int) -> Value:
    """`index == k`, next to the first _SwitchN of this index."""
    index = switch_n.operands[1]
    dtype = index.dtype or DType.INT32
    number = add_const(graph, f"{switch_n.name}/branch_{k}", np.asarray(k, dtype.to_numpy()), dtype, switch_n)
    equal = graph.create_op("Equal", graph.unique_name(f"{switch_n.name}/index_is_{k}"), [index, number],
                            {"T": dtype}, device=switch_n.device, before=switch_n)
    return equal.results[0]


def _as_nested_merges(graph: Graph, merge: Op) -> None:
    """Merge(a, b, c) -> Merge(a, Merge(b, c)); the outermost keeps the name."""
    operands = merge.operands
    inner = operands[-1]
    for i in range(len(operands) - 2, 0, -1):  # the next-to-last input down to the second
        made = graph.create_op(merge.type, graph.unique_name(f"{merge.name}/from_{i}"), [operands[i], inner],
                               {"T": merge.attr("T"), "N": 2}, device=merge.device, before=merge)
        inner = made.results[0]
    merge.set_operands([operands[0], inner])
    merge.attrs["N"] = 2
