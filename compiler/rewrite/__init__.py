"""The rewrite API: what built-in passes and user plugins write rewrites with.

Stable and documented in docs/WRITING_PASSES.md; the names in `__all__` are
the public surface (tests/rewrite/test_public_api.py pins them).

* Patterns: `op`, `const`, `any_value` build rooted op trees in Python;
  `parse_pattern("Mul(Conv2D(*, Const), Const)")` builds the same from text;
  `match`, `find_matches` and `Match` run and read them.
* Rules: `RewriteRule` (pattern, replacement, condition), `apply_rules` (one
  sweep, first accepting rule per op) and `replace_matching` (one pattern,
  GTT's ReplaceMatchingOpTypes), which wire the replacement in and sweep the
  ops left dead, with the skipped sites and their reasons in `RuleStats`.
* Constants and edits: `const_array` (a Const's value through Identity ops),
  `take_over`/`take_place` (a new op takes an old one's place and name),
  `erase_dead`, `inherit_control_deps`, `used_outside`, `node_names`.

Everything changes the graph through the IR's own mutation API
(`compiler.ir.Graph.create_op`, `Value.replace_all_uses_with`, ...).
`conv_affine` (batch-norm folding) is internal to the passes that use it.
"""
from compiler.rewrite.constants import const_array, const_op
from compiler.rewrite.edit import erase_dead, inherit_control_deps, node_names, take_over, take_place
from compiler.rewrite.pattern import Match, any_value, const, find_matches, match, op, used_outside
from compiler.rewrite.pattern_text import PatternSyntaxError, format_pattern, parse_pattern
from compiler.rewrite.rules import RewriteRule, RuleStats, Skip, apply_rules, replace_matching

__all__ = [
    "Match", "PatternSyntaxError", "RewriteRule", "RuleStats", "Skip", "any_value", "apply_rules", "const",
    "const_array", "const_op", "erase_dead", "find_matches", "format_pattern", "inherit_control_deps", "match",
    "node_names", "op", "parse_pattern", "replace_matching", "take_over", "take_place", "used_outside",
]
