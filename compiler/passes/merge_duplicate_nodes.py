"""merge_duplicate_nodes: keep one copy of ops that compute the same thing."""
from __future__ import annotations

import hashlib

from compiler.errors import PassFailure
from compiler.graphutil.control_flow import SWITCH_OPS
from compiler.graphutil.graphdef_header import discard_graphdef_header
from compiler.graphutil.rewire import move_control_users, redirect_uses
from compiler.graphutil.names import canonical_inputs
from compiler.graphutil.tf_hash import attr_hashes, encoded_attr, node_hash
from compiler.ir import op_registry
from compiler.ir.graph import Graph, Op
from compiler.passes.base import Param, Pass, PassContext, PassResult, register_pass


@register_pass
class MergeDuplicateNodes(Pass):
    """Merge stateless ops with the same type, inputs, device and attributes (e.g. equal Consts).

    Works like GTT, round after round until nothing merges: ops are grouped
    by GTT's 64-bit node hash (names blanked, except graph inputs/outputs as
    given), the first op of a group survives and later stateless ones are
    redirected to it.  Each round writes the survivors in ascending hash
    order, which is GTT's output order.  Sites are the ops merged away.

    `gtt_order=false` (what -O levels use) groups by a BLAKE2 digest of the
    same fields and leaves survivors where they stand: TensorFlow's Hash64 is
    a sequential loop over every 8-byte word of every weight, which costs
    ~1.5 s on ResNet50 in Python, and only GTT's output order needs it.

    `switches=false` (-O levels) keeps every TF1 Switch: two conds on one
    predicate that read the same tensor (Longformer's layers, each asking
    whether any token attends globally) would otherwise share one Switch, and
    the cond regions the ONNX export lifts into If nodes would then feed each
    other.
    """

    name = "merge_duplicate_nodes"
    params = (Param("gtt_order", "bool", True,
                    "order survivors by TF's node hash like GTT (slow on big weights); false keeps graph order"),
              Param("switches", "bool", True,
                    "merge duplicate TF1 Switches like GTT; false keeps each cond's own"))

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        _check_registered(graph)
        named = set(ctx.inputs) | set(ctx.outputs)
        merge_round = merge_round_gtt if ctx.param("gtt_order") else merge_round_in_place
        kept = frozenset() if ctx.param("switches") else SWITCH_OPS
        attr_cache: dict[Op, list] = {}
        merged_types: dict[str, int] = {}
        while duplicates := merge_round(graph, named, attr_cache, kept):
            for op_type in duplicates:
                merged_types[op_type] = merged_types.get(op_type, 0) + 1
        dropped_header = discard_graphdef_header(graph)
        total = sum(merged_types.values())
        result = PassResult(sites=total, changed=bool(total) or dropped_header)
        if merged_types:
            listed = ", ".join(f"{t} x{n}" for t, n in sorted(merged_types.items()))
            result.note(f"merged {total} duplicate ops: {listed}")
        return result


def _check_registered(graph: Graph) -> None:
    """GTT looks up every op's definition to see whether it is stateful."""
    for op in graph:
        if op_registry.op_def(op.type) is None:
            raise PassFailure(f"Op type not registered '{op.type}' (node '{op.name}')")


def _mergeable(op: Op, kept: frozenset[str]) -> bool:
    """GTT merges only stateless ops; `kept` names types left alone besides."""
    return op.type not in kept and not op_registry.is_stateful(op.type)


def merge_round_in_place(graph: Graph, named: set[str], attr_cache: dict[Op, list],
                         kept: frozenset[str] = frozenset()) -> list[str]:
    """Group by content digest, merge later duplicates into the first; returns merged op types."""
    first_of: dict[bytes, Op] = {}
    duplicates: list[tuple[Op, Op]] = []
    for op in graph:
        digests = attr_cache.get(op)
        if digests is None:
            digests = attr_cache[op] = attr_digests(op)
        key = node_digest(op, op.name in named, digests)
        original = first_of.setdefault(key, op)
        if original is not op and _mergeable(op, kept):
            duplicates.append((op, original))
    return _merge(graph, duplicates, attr_cache)


def attr_digests(op: Op) -> list[bytes]:
    """BLAKE2 digest of each serialized attribute value, in attribute-name order."""
    return [hashlib.blake2b(encoded_attr(op, key), digest_size=16).digest() for key in sorted(op.attrs)]


def node_digest(op: Op, include_name: bool, digests: list[bytes]) -> bytes:
    """The fields GTT's node hash covers, digested: type, name if kept, inputs, device, attributes."""
    h = hashlib.blake2b(digest_size=16)
    for text in (op.type, op.name if include_name else "", *canonical_inputs(op), op.device):
        h.update(text.encode("utf-8") + b"\0")
    for digest in digests:
        h.update(digest)
    return h.digest()


def merge_round_gtt(graph: Graph, named: set[str], attr_cache: dict[Op, list],
                    kept: frozenset[str] = frozenset()) -> list[str]:
    """Group by hash, reorder survivors by hash, merge duplicates; returns merged op types."""
    groups: dict[int, list[Op]] = {}
    for op in graph:
        attrs = attr_cache.get(op)
        if attrs is None:
            attrs = attr_cache[op] = attr_hashes(op)
        groups.setdefault(node_hash(op, op.name in named, attrs), []).append(op)
    survivors: list[Op] = []
    duplicates: list[tuple[Op, Op]] = []
    for key in sorted(groups):
        first, *rest = groups[key]
        survivors.append(first)
        for op in rest:
            if _mergeable(op, kept):
                duplicates.append((op, first))
            else:
                survivors.append(op)
    graph.reorder(survivors + [dup for dup, _ in duplicates])
    return _merge(graph, duplicates, attr_cache)


def _merge(graph: Graph, duplicates: list[tuple[Op, Op]], attr_cache: dict[Op, list]) -> list[str]:
    """Redirect each duplicate's users to its original and erase the duplicates."""
    for dup, original in duplicates:
        _redirect(dup, original)
    graph.erase_ops(dup for dup, _ in duplicates)
    for dup, _ in duplicates:
        attr_cache.pop(dup, None)
    return [dup.type for dup, _ in duplicates]


def _redirect(dup: Op, original: Op) -> None:
    """Users of any output of `dup` read the same output of `original`, keeping their spelling."""
    for value in dup.results:
        if value.uses:
            if value.index >= len(original.results):
                raise PassFailure(f"'{dup.name}' duplicates '{original.name}' but its output {value.index} "
                                  "has no counterpart")
            redirect_uses(value, original.results[value.index])
    move_control_users(dup, original)
