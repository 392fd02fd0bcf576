"""A counted Loop that walks tensors step by step, as one ONNX Scan.

A recurrent frame that no LSTM/GRU/RNN node can hold (a projected LSTM cell, stacked cells, a
custom cell) is exported as a Loop with a trip count M and no condition, whose body reads
step t of each input sequence as `Gather(sequence, t)`.  That is what ONNX's Scan does, and
onnxruntime runs a Scan faster: it hands the body each step's slice and writes each step's
outputs straight into the stacked result, where a Loop runs the Gathers and concatenates its
scan outputs after the last step (TF1's MultiRNNCell frame: 56 us as a Loop, 49 us as a Scan).

The rewrite applies when the trip count is a constant equal to the length of every sequence
the body gathers from (so Scan's length, taken from its inputs, is the Loop's count), the
iteration number is read by nothing but those Gathers, and every carried value is declared with
one static shape (onnxruntime keeps a Scan's states in buffers of one shape, where a Loop's may
grow: a map_fn appending ragged rows).  The loop-carried values become Scan states and the
scan outputs stay scan outputs, in the same order.  It runs on the finished ONNX graph, nested
loops first.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

from onnx import helper

from compiler.backends.onnx.builder import GraphBuilder, Node, ValueSpec, constant_int


@dataclass(frozen=True)
class _Walk:
    """The sequences a Loop body gathers step by step, each with the Gathers that read it."""

    sequences: list[str]
    gathers: dict[str, list[Node]]


class _Specs:
    """Declared types and shapes, looked up in the graphs enclosing a Loop (innermost first),
    then in what the lowering described, then among the initializers."""

    def __init__(self, graphs: Sequence[GraphBuilder], described: Mapping[str, ValueSpec]) -> None:
        self.graphs, self.described = list(graphs), described

    def inner(self, builder: GraphBuilder) -> "_Specs":
        return _Specs([builder, *self.graphs], self.described)

    def find(self, name: str) -> Optional[ValueSpec]:
        for graph in self.graphs:
            for spec in graph.inputs:
                if spec.name == name:
                    return spec
            if name in graph.value_info:
                return graph.value_info[name]
        if name in self.described:
            return self.described[name]
        array = self.graphs[0].scope.initializers.get(name)
        if array is None:
            return None
        return ValueSpec(name, helper.np_dtype_to_tensor_dtype(array.dtype), tuple(array.shape))

    def length(self, name: str) -> Optional[int]:
        """The static extent of axis 0."""
        spec = self.find(name)
        return spec.dims[0] if spec is not None and spec.dims and isinstance(spec.dims[0], int) else None


def loops_as_scans(builder: GraphBuilder, described: Mapping[str, ValueSpec]) -> int:
    """Turn every counted, step-walking Loop here and in subgraphs into a Scan; returns how many.
    `described` holds the lowering's types and shapes of tensors value_info may not declare."""
    return _rewrite(builder, _Specs([builder], described))


def _rewrite(builder: GraphBuilder, specs: _Specs) -> int:
    found = sum(_rewrite(sub, specs.inner(sub)) for node in builder.nodes for sub in node.subgraphs())
    for node in list(builder.nodes):
        walk = _step_walk(node, specs)
        if walk is not None:
            scan = _as_scan(node, walk, specs)
            builder.substitute(node, scan)
            _absorb_transposes(builder, scan)
            found += 1
    return found


def _step_walk(node: Node, specs: _Specs) -> Optional[_Walk]:
    """What a Scan needs of `node`, when it is a Loop that a Scan computes exactly."""
    if node.op_type != "Loop" or node.domain or len(node.inputs) < 2 or node.inputs[1]:
        return None
    body = node.attrs.get("body")
    trips = constant_int(specs.graphs[0], node.inputs[0])
    if not isinstance(body, GraphBuilder) or trips is None or trips < 1 or not _passes_condition(body):
        return None
    if not all(spec.dims is not None and all(isinstance(d, int) for d in spec.dims) for spec in body.inputs[2:]):
        return None  # a state whose shape may change from step to step (appended rows) needs a Loop
    iteration = body.inputs[0].name
    readers = body.readers(iteration)
    walk = _Walk([], {})
    for reader in readers:
        sequence = _gathered(body, reader, iteration)
        if sequence is None or specs.length(sequence) != trips:
            return None
        if sequence not in walk.gathers:
            walk.sequences.append(sequence)
            walk.gathers[sequence] = []
        walk.gathers[sequence].append(reader)
    return walk if walk.sequences else None


def _passes_condition(body: GraphBuilder) -> bool:
    """Whether the body's condition output is its condition input, passed through: the Loop
    runs exactly M times."""
    condition_in, condition_out = body.inputs[1].name, body.outputs[0].name
    if condition_out == condition_in:
        return True
    producer = body.producer(condition_out)
    return producer is not None and producer.op_type == "Identity" and producer.inputs == [condition_in]


def _gathered(body: GraphBuilder, reader: Node, iteration: str) -> Optional[str]:
    """The outer sequence `reader` takes step `iteration` of (axis 0), or None for any other read."""
    if reader.op_type != "Gather" or reader.domain or reader.inputs[1:] != [iteration]:
        return None
    if reader.attrs.get("axis", 0) != 0 or reader.inputs[0] == iteration:
        return None
    sequence = reader.inputs[0]
    inner = body.producer(sequence) is not None or any(spec.name == sequence for spec in body.inputs)
    return None if inner else sequence


def _as_scan(loop: Node, walk: _Walk, specs: _Specs) -> Node:
    """The Scan computing what `loop` computed, its body edited in place."""
    body: GraphBuilder = loop.attrs["body"]
    steps = []
    for sequence in walk.sequences:
        first, *others = walk.gathers[sequence]
        spec = specs.find(sequence)
        steps.append(ValueSpec(first.outputs[0], spec.elem_type, spec.dims[1:]))  # type: ignore[union-attr,index]
        body.remove(first)
        for other in others:
            body.remove(other)
            body.replace_uses(other.outputs[0], first.outputs[0])
    condition = body.producer(body.outputs[0].name)
    if condition is not None:
        body.remove(condition)
    body.inputs = body.inputs[2:] + steps
    body.outputs = body.outputs[1:]
    attrs = {"body": body, "num_scan_inputs": len(steps)}
    return Node("Scan", loop.inputs[2:] + walk.sequences, list(loop.outputs), loop.name, attrs)


def _absorb_transposes(builder: GraphBuilder, scan: Node) -> None:
    """Read a sequence along the axis a Transpose brought to the front, and write a scan output
    along the axis a Transpose takes it to, when that Transpose does nothing else and serves only
    the Scan (TF1's time-major Transposes around `dynamic_rnn`): Scan's axes attributes do the
    same, two nodes fewer."""
    states = len(scan.inputs) - scan.attrs["num_scan_inputs"]
    input_axes = [_front_axis(builder, scan, name) for name in scan.inputs[states:]]
    for index, axis in enumerate(input_axes):
        if axis:
            name = scan.inputs[states + index]
            scan.inputs[states + index] = builder.producer(name).inputs[0]  # type: ignore[union-attr]
    output_axes = []
    for index in range(states, len(scan.outputs)):  # (the final states come first)
        reader = _moving_front_away(builder, scan.outputs[index])
        output_axes.append(0 if reader is None else reader[1])
        if reader is not None:
            transposed = reader[0].outputs[0]
            spec = builder.value_info.get(transposed)
            builder.remove(reader[0])
            builder.rename(scan.outputs[index], transposed)
            builder.value_info.pop(transposed, None)  # (rename moved the step-major declaration here)
            if spec is not None:
                builder.value_info[transposed] = spec
    if any(input_axes):
        scan.attrs["scan_input_axes"] = input_axes
    if any(output_axes):
        scan.attrs["scan_output_axes"] = output_axes


def _front_axis(builder: GraphBuilder, scan: Node, name: str) -> int:
    """k when `name` is a Transpose bringing axis k to the front, the rest in order, that only
    `scan` reads; else 0."""
    producer = builder.producer(name)
    if producer is None or producer.op_type != "Transpose" or producer.domain or builder.is_exposed(name):
        return 0
    perm = list(producer.attrs.get("perm", ()))
    if not perm or perm[1:] != sorted(perm[1:]) or builder.readers(name) != [scan]:
        return 0
    return perm[0]


def _moving_front_away(builder: GraphBuilder, name: str) -> Optional[tuple[Node, int]]:
    """The Transpose reading `name` and its k, when it is `name`'s only reader and moves axis 0 to
    position k, the rest in order."""
    readers = builder.readers(name)
    if len(readers) != 1 or builder.is_exposed(name):
        return None
    reader = readers[0]
    perm = list(reader.attrs.get("perm", ())) if reader.op_type == "Transpose" and not reader.domain else []
    if 0 not in perm or perm.index(0) == 0:
        return None
    rest = [axis for axis in perm if axis != 0]
    return (reader, perm.index(0)) if rest == sorted(rest) else None
