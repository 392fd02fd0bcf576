"""Shape rules of TF2 functional control flow: the ops state their result shapes."""
from __future__ import annotations

from typing import Optional

from compiler.analysis.rules.registry import OpFacts, shape_rule
from compiler.ir.shapes import Shape, UNKNOWN_SHAPE


def stated_shapes(facts: OpFacts) -> Optional[list[Shape]]:
    """The result shapes an op lists in its `output_shapes` attribute (None if it lists another count)."""
    stated = facts.attr("output_shapes", ())
    count = len(facts.op.results)
    if len(stated) != count:
        return None
    return [s if isinstance(s, Shape) else UNKNOWN_SHAPE for s in stated]


@shape_rule("If", "StatelessIf")
def _if(facts: OpFacts) -> Optional[list[Shape]]:
    return stated_shapes(facts)


@shape_rule("While", "StatelessWhile")
def _while(facts: OpFacts) -> Optional[list[Shape]]:
    """Loop variables keep their shape unless the loop says otherwise (shape invariants)."""
    stated = stated_shapes(facts)
    if stated is not None:
        return stated
    return list(facts.shapes[: len(facts.op.results)])
