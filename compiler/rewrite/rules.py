"""Rewrite rules (pattern + condition + replacement) and a one-sweep driver.

A rule is three plain functions' worth of intent: what to match, when it is
safe, and what to build.  `apply_rules` walks the graph once in order and
applies, at each op, the first rule that matches and accepts;
`replace_matching` is the one-rule form (GTT's ReplaceMatchingOpTypes).

A replacement builds new ops through the IR API and returns what stands in
for the match's root; the driver does the rest the same way every time:

* an Op it created takes the root's place: every result's readers, the
  control users, the control dependencies of the ops the match covered, and
  the root's name (so graph outputs keep their names);
* a Value takes over the root's (single) used result; the value's op is
  renamed to the root's name only when the replacement just created it;
* None means the replacement rewired the graph itself.

Then every covered op nothing reads any more is erased, except the ops
named in `protected` (graph inputs and outputs).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Optional, Sequence, Union

from compiler.ir.graph import Graph, Op, Value
from compiler.rewrite.edit import erase_dead, inherit_control_deps, node_names, take_over, take_place
from compiler.rewrite.pattern import Match, OpPattern, match
from compiler.rewrite.pattern_text import parse_pattern

# A condition returns None to accept, or a reason to skip (reported to the user).
Condition = Callable[[Match], Optional[str]]
Replacement = Callable[[Graph, Match], Union[Op, Value, None]]


@dataclass(frozen=True)
class RewriteRule:
    """`pattern` rooted at one op; `condition` vetoes with a reason; `replace` rewrites."""

    name: str
    pattern: OpPattern
    replace: Replacement
    condition: Optional[Condition] = None


@dataclass(frozen=True)
class Skip:
    """A site a rule matched but its condition refused."""

    root: str
    rule: str
    reason: str

    def __str__(self) -> str:
        return f"{self.root} ({self.rule}): {self.reason}"


@dataclass
class RuleStats:
    """Per-rule application counts and the skipped sites with their reasons."""

    applied: dict[str, int] = field(default_factory=dict)
    skipped: list[Skip] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.applied.values())


def apply_rules(graph: Graph, rules: Sequence[RewriteRule], protected: Iterable[str] = ()) -> RuleStats:
    """One sweep in graph order; ops created or erased during the sweep are not revisited.

    `protected` names graph inputs and outputs (`node` or `node:port`): they are never erased.
    """
    keep = node_names(protected)
    stats = RuleStats({r.name: 0 for r in rules})
    for root in list(graph):
        if root.graph is not graph:
            continue
        for rule in rules:
            found = match(rule.pattern, root)
            if found is None:
                continue
            reason = rule.condition(found) if rule.condition is not None else None
            if reason is not None:
                stats.skipped.append(Skip(root.name, rule.name, reason))
                continue
            substitute(graph, found, rule.replace(graph, found), keep)
            stats.applied[rule.name] += 1
            break
    return stats


def replace_matching(graph: Graph, pattern: Union[str, OpPattern], replace: Replacement,
                     condition: Optional[Condition] = None, protected: Iterable[str] = (),
                     name: str = "replace") -> RuleStats:
    """Replace every match of `pattern` (text or Python form) with what `replace` builds, in one sweep."""
    compiled = parse_pattern(pattern) if isinstance(pattern, str) else pattern
    return apply_rules(graph, [RewriteRule(name, compiled, replace, condition)], protected)


def substitute(graph: Graph, m: Match, new: Union[Op, Value, None], protected: set[str]) -> None:
    """Put `new` in the place of the match's root (see the module docstring), then sweep dead covered ops."""
    root = m.root
    assert root is not None
    if new is None or root.graph is not graph:
        return
    new_op = new if isinstance(new, Op) else new.op
    fresh = new_op not in m.ops and not new_op.has_uses and not new_op.control_users
    if fresh:
        inherit_control_deps(new_op, m.ops)
    if isinstance(new, Op):
        take_place(graph, root, new)
    elif root.name in protected and not fresh:
        root.results[0].replace_all_uses_with(new)  # the root keeps the output's name and stays
    else:
        take_over(graph, root, new, rename=fresh)
    erase_dead(graph, [o for o in m.ops if o is not root], protected)
