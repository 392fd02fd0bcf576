"""The ops of a TF1 input pipeline: dataset iterators and queues.

Frozen training and serving graphs often read their batch from a queue or a
dataset iterator instead of a Placeholder.  Neither ONNX nor gttc's runtime
runs a pipeline; the results of its reading ops are where such a graph is
cut (`--inputs IteratorGetNext:0,IteratorGetNext:1`) and what the caller
feeds, as tf2onnx does it.
"""
from __future__ import annotations

# Ops that hand out the next batch: their results are the graph's real inputs.
READERS = frozenset({"IteratorGetNext", "IteratorGetNextSync",
                     "QueueDequeueV2", "QueueDequeueManyV2", "QueueDequeueUpToV2"})
# Ops that make the iterator or queue a reader reads from (a resource handle, no data).
SOURCES = frozenset({"IteratorV2", "Iterator", "OneShotIterator", "FIFOQueueV2", "PaddingFIFOQueueV2",
                     "RandomShuffleQueueV2"})


def feed_hint(op_name: str, op_type: str) -> str:
    """What to do about a pipeline op the outputs depend on: feed (or cut at) what its reader returns."""
    if op_type in READERS:
        return (f"'{op_name}' ({op_type}) reads a dataset or queue at run time: list its results among the "
                f"inputs ({op_name}:0, {op_name}:1, ...) so they are fed")
    return (f"'{op_name}' ({op_type}) is part of an input pipeline: list the results of the op that reads "
            f"from it (IteratorGetNext, QueueDequeue...) among the inputs so they are fed")
