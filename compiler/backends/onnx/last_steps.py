"""A forward recurrent node's last step, read from its final-state output instead of sliced
from its every-step output.

TF1's `dynamic_rnn` and Keras' `return_sequences=True` hand back every step, and models then
keep only the last (`outputs[:, -1]`).  Exported, that is a Slice of the squeezed every-step
output Y.  For a forward ONNX LSTM/GRU/RNN without sequence lengths, the last step of Y is
exactly its Y_h output, which the node computes anyway: the Slice's readers read Y_h, the
Slice goes, and so do the Squeeze and the Y output when nothing else reads them.  A reverse or bidirectional node's Y_h holds
the state after the *first* step, and a node given sequence lengths stops early per batch row,
so neither is touched.

The peephole runs on the finished ONNX graph, after dead nodes are pruned.
"""
from __future__ import annotations

from typing import Optional

from compiler.backends.onnx.builder import RUNS_TO_END, GraphBuilder, Node, constant_ints, slice_bounds

_RECURRENT = frozenset({"LSTM", "GRU", "RNN"})


def read_last_steps(builder: GraphBuilder) -> int:
    """Point every last-step Slice of a forward recurrent node at its Y_h, here and in subgraphs;
    returns how many Slices were bypassed."""
    found = sum(read_last_steps(sub) for node in list(builder.nodes) for sub in node.subgraphs())
    outputs = {spec.name for spec in builder.outputs}
    for node in list(builder.nodes):
        found_cell = _last_step_of(builder, node)
        if found_cell is None or node.outputs[0] in outputs:
            continue
        squeeze, cell = found_cell
        builder.replace_uses(node.outputs[0], cell.outputs[1])
        builder.remove(node)
        found += 1
        if not builder.readers(squeeze.outputs[0]) and squeeze.outputs[0] not in outputs:
            builder.remove(squeeze)
            if not builder.readers(cell.outputs[0]) and cell.outputs[0] not in outputs:
                builder.drop_output(cell, cell.outputs[0])
    return found


def _last_step_of(builder: GraphBuilder, node: Node) -> Optional[tuple[Node, Node]]:
    """The Squeeze and the recurrent node when `node` is a Slice of a forward node's squeezed Y
    keeping only the last time step (axis 0, kept with length one: Y_h's [1, batch, hidden])."""
    bounds = slice_bounds(builder, node)
    if bounds is None:
        return None
    starts, ends, axes, steps = bounds
    if starts != [-1] or ends is None or ends[0] < RUNS_TO_END or axes != [0] or steps != [1]:
        return None
    squeeze = builder.producer(node.inputs[0])
    if squeeze is None or squeeze.op_type != "Squeeze" or len(squeeze.inputs) != 2:
        return None
    if constant_ints(builder, squeeze.inputs[1]) != [1]:
        return None
    cell = builder.producer(squeeze.inputs[0])
    if cell is None or cell.op_type not in _RECURRENT or cell.domain or cell.outputs[0] != squeeze.inputs[0]:
        return None
    if cell.attrs.get("direction", "forward") != "forward" or (len(cell.inputs) > 4 and cell.inputs[4]):
        return None
    return (squeeze, cell) if len(cell.outputs) > 1 and cell.outputs[1] else None
