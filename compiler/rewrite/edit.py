"""Small graph edits that rewrites share: take over an op's identity, sweep dead ops.

They are compositions of the IR mutation API, kept here so every pass
replaces ops and cleans up after itself the same way.
"""
from __future__ import annotations

from typing import Callable, Iterable, Optional

import numpy as np

from compiler.graphutil.rewire import move_control_users
from compiler.ir.dtypes import DType
from compiler.ir.graph import Graph, IRError, Op, Value
from compiler.ir.tensor import Tensor


def take_over(graph: Graph, old: Op, new: Value, rename: bool = True) -> None:
    """Make `new` stand in for `old`: its uses, its control users and (with `rename`) its name; erase `old`.

    Only `old`'s first result may still be in use.
    """
    for extra in old.results[1:]:
        if extra.uses:
            raise IRError(f"cannot replace '{old.name}': its output {extra.index} is still used")
    old.results[0].replace_all_uses_with(new)
    for user in list(old.control_users):
        user.remove_control_dep(old)
        if user is not new.op:
            user.add_control_dep(new.op)
    name = old.name
    graph.erase_op(old)
    if rename:
        graph.rename(new.op, name)


def take_place(graph: Graph, old: Op, new: Op) -> None:
    """`new` takes over every result's readers, the control users and the name of `old`; `old` is erased.

    Unlike `take_over`, readers keep their spelling and each control user keeps
    its dependency where it stood (replaced in place), as GTT's renaming of
    inputs does, so rewrites that must match GTT's output byte for byte use this.
    """
    for value, replacement in zip(old.results, new.results):
        value.replace_all_uses_with(replacement)
    move_control_users(old, new)
    name = old.name
    graph.erase_op(old)
    graph.rename(new, name)


def add_const(graph: Graph, base: str, array: np.ndarray, dtype: DType, before: Op,
              device: Optional[str] = None) -> Value:
    """A Const of `array` (as `dtype`) named fresh from `base`, placed before `before` and on its
    device unless `device` says otherwise: the constants rewrites add beside the ops they build."""
    value = Tensor.from_numpy(np.asarray(array), dtype)
    return graph.create_op("Const", graph.unique_name(base), attrs={"dtype": dtype, "value": value},
                           device=before.device if device is None else device, before=before).results[0]


def inherit_control_deps(target: Op, sources: Iterable[Op], exclude: Iterable[Op] = ()) -> None:
    """Give `target` every control dependency of `sources` (ordering survives a merge of ops)."""
    skip = set(exclude) | {target}
    for source in sources:
        for dep in source.control_deps:
            if dep not in skip:
                target.add_control_dep(dep)


def erase_dead(graph: Graph, candidates: Iterable[Op], protected: set[str],
               removable: Optional[Callable[[Op], bool]] = None) -> int:
    """Erase candidates nobody uses any more, then their producers that become unused; returns the count.

    Ops named in `protected` (graph inputs and outputs) and ops `removable`
    rejects are kept.
    """
    stack = list(candidates)
    erased = 0
    while stack:
        op = stack.pop()
        if op.graph is not graph or op.has_uses or op.name in protected:
            continue
        if removable is not None and not removable(op):
            continue
        producers = [v.op for v in op.operands] + op.control_deps_view  # a new list: erasing leaves it be
        graph.erase_op(op)
        erased += 1
        stack.extend(producers)
    return erased


def node_names(names: Iterable[str]) -> set[str]:
    """Node parts of tensor names (`a:1` -> `a`), for protecting inputs and outputs."""
    out = set()
    for name in names:
        head, sep, tail = name.rpartition(":")
        out.add(head if sep and tail.isdigit() else name)
    return out
