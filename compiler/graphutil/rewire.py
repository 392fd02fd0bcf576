"""Moving uses from one value or op to another, keeping GTT's input spelling.

GTT rewires graphs by rewriting input strings, so a redirected input keeps
its place in the consumer's input list and takes the spelling of whatever
replaced it (`x` or `x:0`).  These helpers do the same through the IR's
use-lists: control dependencies are substituted in place (duplicates and
all), and the explicit-`:0` spelling is set deliberately.
"""
from __future__ import annotations

from typing import Optional

from compiler.ir.graph import Graph, Op, Value


def redirect_uses(old: Value, new: Value, explicit_port0: Optional[bool] = None) -> int:
    """Point every use of `old` at `new`; returns how many moved.

    `explicit_port0=None` keeps each consumer's own spelling of the slot;
    True or False spells the new input as `name:0` or `name`.
    """
    moved = list(old.uses)
    old.replace_all_uses_with(new)
    if explicit_port0 is not None:
        for consumer, slot in moved:
            set_explicit_port0(consumer, slot, explicit_port0)
    return len(moved)


def set_explicit_port0(op: Op, slot: int, explicit: bool) -> None:
    """Spell operand `slot` as `name:0` (True) or `name` (False) when it reads port 0."""
    slots = op.explicit_port0
    if explicit:
        if slot not in slots:
            op.explicit_port0 = slots | {slot}
    elif slot in slots:  # usually not: no new set made to remove nothing
        op.explicit_port0 = slots - {slot}


def substitute_control_dep(user: Op, old: Op, new: Op) -> None:
    """Replace `^old` by `^new` at the same place in `user`'s control inputs."""
    user.set_control_deps([new if dep is old else dep for dep in user.control_deps])


def move_control_users(old: Op, new: Op) -> int:
    """Make every op that control-depends on `old` depend on `new` instead, in place."""
    return old.hand_control_users_to(new)


def rename_ops(graph: Graph, new_names: dict[Op, str]) -> None:
    """Rename many ops at once, even when new names swap or reuse old ones."""
    changing = {op: name for op, name in new_names.items() if op.name != name}
    taken = {op.name for op in graph} | set(changing.values())
    for i, op in enumerate(changing):
        graph.rename(op, _free_name(f"__rename_{i}__", taken))
    for op, name in changing.items():
        graph.rename(op, name)


def _free_name(base: str, taken: set[str]) -> str:
    name, i = base, 0
    while name in taken:
        i += 1
        name = f"{base}{i}"
    taken.add(name)
    return name
