"""Shape rules of ops that bring data in from outside the graph: dataset iterators and queues.

A frozen TF1 training or serving graph often reads its batch from one of
these; cut there (`--inputs IteratorGetNext:0,...`), the results become graph
inputs, and ONNX needs their ranks.  The ops state the shapes: an iterator in
`output_shapes`, a queue in its own `shapes`, a dequeue of many adding the count.
"""
from __future__ import annotations

from typing import Optional

from compiler.analysis.rules.control import stated_shapes
from compiler.analysis.rules.registry import OpFacts, shape_rule
from compiler.ir.shapes import Shape, UNKNOWN_SHAPE


@shape_rule("IteratorGetNext", "IteratorGetNextSync")
def _iterator_get_next(facts: OpFacts) -> Optional[list[Shape]]:
    return stated_shapes(facts)


@shape_rule("QueueDequeueV2")
def _queue_dequeue(facts: OpFacts) -> Optional[list[Shape]]:
    return _queue_item_shapes(facts)


@shape_rule("QueueDequeueManyV2", "QueueDequeueUpToV2")
def _queue_dequeue_many(facts: OpFacts) -> Optional[list[Shape]]:
    """Items stacked: the count leads, known for DequeueMany, at most it for DequeueUpTo."""
    items = _queue_item_shapes(facts)
    count = facts.ints(1) if facts.op.type == "QueueDequeueManyV2" else None
    lead = count[0] if count is not None and len(count) == 1 and count[0] >= 0 else None
    if items is None:
        return None
    return [UNKNOWN_SHAPE if s.dims is None else Shape((lead,) + s.dims) for s in items]


def _queue_item_shapes(facts: OpFacts) -> Optional[list[Shape]]:
    """The queue's declared item shapes, when it declares one per component dequeued."""
    queue = facts.op.operands[0].op if facts.op.operands else None
    shapes = queue.attrs.get("shapes", ()) if queue is not None else ()
    if len(shapes) != len(facts.op.results):
        return None
    return [s if isinstance(s, Shape) else UNKNOWN_SHAPE for s in shapes]
