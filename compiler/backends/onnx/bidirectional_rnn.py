"""Two one-way ONNX LSTM/GRU/RNN nodes over a sequence and its time reversal, merged into one
`direction=bidirectional` node.

Keras' Bidirectional wrapper runs a forward layer over x and a backward layer over
x reversed in time, reverses the backward outputs back, and concatenates the two
along features.  The recurrent lowering turns each loop into one ONNX node, so
the export first holds two nodes, the reversing Slices and a Concat; ONNX's
bidirectional node does all of it (its reverse direction reads the sequence from
the end and writes each step back at its own time).

The peephole runs on the finished ONNX graph, once dead nodes are pruned.  It
starts from a join of the two directions (a Concat along the last axis, or an
Add or Mul: Keras' other merge modes) and needs:

- both nodes of one op type with the same attributes, one-way, without sequence
  lengths or peepholes, with constant weights, and initial states given for both or
  for neither;
- the backward node's sequence to be the forward node's with the time axis
  reversed, through any Transposes, Reshapes that only move axes of size one, and
  reversing Slices;
- the two joined operands to be the same view of the forward node's every-step
  output and of the backward node's every-step output reversed in time, or of the
  two final states.

The pair becomes a Transpose and a Reshape of the merged node's output (a
ReduceSum or ReduceProd over its direction axis for Add or Mul).  Both old nodes'
outputs are recomputed from the merged node's, so any other reader still sees the
same values; unread ones are pruned.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from compiler.backends.onnx.builder import RUNS_TO_END, GraphBuilder, Node, constant_ints, slice_bounds
from compiler.backends.onnx.ops_array import INT64_MIN

_DEFAULT_ACTIVATIONS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"], "RNN": ["Tanh"]}
# Attributes each direction states for itself; the merged node lists the forward's, then the backward's.
_PER_DIRECTION = frozenset({"activations", "activation_alpha", "activation_beta"})
_SEQUENCE, _FINAL = "sequence", "final"   # every step's output [T, batch, H], the final state [batch, H]


@dataclass(frozen=True)
class View:
    """`tensor` seen as Transposes and time reversals of `base`: the tensor's axis j is base axis
    `perm[j]` (None: the identity), and base axes in `reversed_axes` run backwards."""

    base: str
    perm: Optional[tuple[int, ...]]
    reversed_axes: frozenset[int]

    def base_axis(self, axis: int) -> int:
        return axis if self.perm is None else self.perm[axis]


@dataclass(frozen=True)
class DirectionOutput:
    """A concatenated operand read from one recurrent node: which node, which output form."""

    node: Node
    form: str
    view: View


# A join of the two directions, and the reduction over ONNX's direction axis that computes it.
_JOINS = {"Concat": None, "Add": "ReduceSum", "Mul": "ReduceProd"}


def merge_bidirectional(builder: GraphBuilder) -> int:
    """Merge every forward/backward pair a join reads, here and in subgraphs; returns how many."""
    merged = sum(merge_bidirectional(sub) for node in list(builder.nodes) for sub in node.subgraphs())
    here = 0
    alive = {id(n) for n in builder.nodes}
    for join in [n for n in builder.nodes if n.op_type in _JOINS and not n.domain]:
        if id(join) in alive and _merge_at(builder, join):
            here += 1
            alive = {id(n) for n in builder.nodes}   # the rewrite prunes what only the join read
    if here:
        builder.restore_order()
    return merged + here


def _merge_at(builder: GraphBuilder, join: Node) -> int:
    """Merge the first operand pair of `join` that is a bidirectional layer's; 1 when done.
    A Concat's pair is two neighbouring operands in time order; a sum's or product's either way."""
    if join.op_type == "Concat":
        pairs = [(i, i + 1) for i in range(len(join.inputs) - 1)]
    else:
        pairs = [(0, 1), (1, 0)] if len(join.inputs) == 2 else []
    for first, second in pairs:
        pair = _direction_pair(builder, join, join.inputs[first], join.inputs[second])
        if pair is not None:
            _rewrite(builder, join, min(first, second), *pair)
            return 1
    return 0


# -- matching ---------------------------------------------------------------------------------
def _direction_pair(builder: GraphBuilder, join: Node, ahead: str, back: str
                    ) -> Optional[tuple[DirectionOutput, DirectionOutput]]:
    forward, backward = _direction_output(builder, ahead), _direction_output(builder, back)
    if forward is None or backward is None or forward.node is backward.node or forward.form != backward.form:
        return None
    if forward.view.perm != backward.view.perm or forward.view.reversed_axes:
        return None
    rank = 3 if forward.form == _SEQUENCE else 2
    if join.op_type == "Concat":
        axis = join.attrs.get("axis")
        if not isinstance(axis, int) or axis % rank != rank - 1 or forward.view.base_axis(rank - 1) != rank - 1:
            return None
    time_reversed = frozenset({0}) if forward.form == _SEQUENCE else frozenset()
    if backward.view.reversed_axes != time_reversed:
        return None
    if not (_same_cell(forward.node, backward.node) and _time_reversed_input(builder, forward.node, backward.node)):
        return None
    return forward, backward


def _direction_output(builder: GraphBuilder, tensor: str) -> Optional[DirectionOutput]:
    """The recurrent node, and output form, `tensor` is a view of."""
    view = view_of(builder, tensor)
    squeeze = builder.producer(view.base)
    if squeeze is None or squeeze.op_type != "Squeeze" or len(squeeze.inputs) != 2:
        return None
    axes = constant_ints(builder, squeeze.inputs[1])
    source = squeeze.inputs[0]
    if axes == [1]:
        node = builder.producer(source)
        form = _SEQUENCE if node is not None and node.outputs.index(source) == 0 else None
    elif axes == [0]:
        source = _past_last_step(builder, source)
        node = builder.producer(source)
        form = _FINAL if node is not None and node.outputs.index(source) == 1 else None
    else:
        return None
    if form is None or node.op_type not in _DEFAULT_ACTIVATIONS:
        return None
    return DirectionOutput(node, form, view)


def _past_last_step(builder: GraphBuilder, tensor: str) -> str:
    """Through a Slice taking the last step of a one-step axis 0 (Y_h's), which changes nothing."""
    node = builder.producer(tensor)
    bounds = None if node is None else slice_bounds(builder, node)
    if bounds is None:
        return tensor
    starts, ends, axes, steps = bounds
    whole = starts in ([-1], [0]) and ends is not None and ends[0] >= 1 and axes == [0] and steps == [1]
    return node.inputs[0] if whole else tensor


def view_of(builder: GraphBuilder, tensor: str) -> View:
    """Walk back through Transposes (and Reshapes that only move axes of size one, as a transpose
    of a batch of one is exported) and reversing Slices to the tensor they rearrange."""
    perm: Optional[list[int]] = None
    flipped: set[int] = set()
    while True:
        node = builder.producer(tensor)
        moved = _unit_axis_move(builder, node) if node is not None and node.op_type == "Reshape" else None
        if moved is not None or (node is not None and node.op_type == "Transpose"
                                 and isinstance(node.attrs.get("perm"), list)):
            p = moved if moved is not None else list(node.attrs["perm"])
            if perm is not None and len(p) != len(perm):
                break
            perm = p if perm is None else [p[a] for a in perm]
            flipped = {p[a] for a in flipped}
        elif node is not None and node.op_type == "Slice" and (axes := _reversed_axes(builder, node)) is not None:
            flipped ^= axes
        else:
            break
        tensor = node.inputs[0]
    identity = perm is None or perm == sorted(perm)
    return View(tensor, None if identity else tuple(perm), frozenset(flipped))


def _unit_axis_move(builder: GraphBuilder, node: Node) -> Optional[list[int]]:
    """A Reshape keeping the rank and the order of the axes longer than one, as the permutation
    it amounts to (output axis j is input axis perm[j]); None for any other Reshape."""
    source, target = _static_dims(builder, node.inputs[0]), constant_ints(builder, node.inputs[1])
    if source is None or target is None or len(source) != len(target) or 0 in target or -1 in target:
        return None
    long_in = [a for a, d in enumerate(source) if d != 1]
    long_out = [a for a, d in enumerate(target) if d != 1]
    if [source[a] for a in long_in] != [target[a] for a in long_out]:
        return None
    unit_in = iter(a for a, d in enumerate(source) if d == 1)
    long_in_order = iter(long_in)
    return [next(long_in_order) if d != 1 else next(unit_in) for d in target]


def _static_dims(builder: GraphBuilder, tensor: str) -> Optional[list[int]]:
    """A tensor's dims when all are known: from its annotation, or the graph input it is."""
    spec = builder.value_info.get(tensor) or next((s for s in builder.inputs if s.name == tensor), None)
    if spec is None or spec.dims is None or not all(isinstance(d, int) for d in spec.dims):
        return None
    return list(spec.dims)


def _reversed_axes(builder: GraphBuilder, node: Node) -> Optional[set[int]]:
    """The axes a Slice reverses whole, when that is all it does."""
    bounds = slice_bounds(builder, node)
    if bounds is None:
        return None
    starts, ends, axes, steps = bounds
    if None in (starts, ends, axes, steps) or not axes or min(axes) < 0 or len(set(axes)) != len(axes):
        return None
    if not len(starts) == len(ends) == len(axes) == len(steps):
        return None
    if any(s != -1 and s < RUNS_TO_END for s in starts) or any(e > -RUNS_TO_END for e in ends) or any(s != -1 for s in steps):
        return None
    return set(axes)


def _same_cell(forward: Node, backward: Node) -> bool:
    """One op type and attributes (activations and their parameters aside), both one-way, no
    sequence lengths or peepholes, constant weights, and initial states for both or neither."""
    if forward.op_type != backward.op_type or forward.domain or backward.domain:
        return False
    plain = [{k: v for k, v in n.attrs.items() if k not in _PER_DIRECTION} for n in (forward, backward)]
    if plain[0] != plain[1] or plain[0].get("direction", "forward") != "forward":
        return False
    ins = [n.inputs + [""] * (8 - len(n.inputs)) for n in (forward, backward)]
    if any(i[4] or i[7] for i in ins):   # sequence_lens, P
        return False
    return all(bool(ins[0][k]) == bool(ins[1][k]) for k in (3, 5, 6))


def _time_reversed_input(builder: GraphBuilder, forward: Node, backward: Node) -> bool:
    """The backward node reads the forward node's sequence with its time axis (0) reversed, and
    both read constant weights."""
    weights = [n.inputs[k] for n in (forward, backward) for k in (1, 2, 3) if k < len(n.inputs) and n.inputs[k]]
    if not all(name in builder.scope.initializers for name in weights):
        return False
    ahead, back = view_of(builder, forward.inputs[0]), view_of(builder, backward.inputs[0])
    return (ahead.base == back.base and ahead.perm == back.perm and not ahead.reversed_axes
            and back.reversed_axes == {ahead.base_axis(0)})


# -- rewriting --------------------------------------------------------------------------------
def _rewrite(builder: GraphBuilder, join: Node, first: int, forward: DirectionOutput,
             backward: DirectionOutput) -> None:
    fwd, bwd = forward.node, backward.node
    base = _common_base(fwd.name, bwd.name, fwd.op_type)
    merged = _merged_node(builder, fwd, bwd, base)
    rank = 3 if forward.form == _SEQUENCE else 2
    order = tuple(forward.view.base_axis(j) for j in range(rank))
    if len(join.inputs) == 2:
        builder.remove(join)
        out, order = _past_reader_transpose(builder, join.outputs[0], order, join.op_type == "Concat")
    else:
        out = builder.scope.tensors.fresh(base + "/joined")
        join.inputs[first:first + 2] = [out]
    source = merged.outputs[0 if forward.form == _SEQUENCE else 1]
    if join.op_type == "Concat":
        _emit_side_by_side(builder, merged, source, order, out, base)
    else:
        _emit_reduced(builder, _JOINS[join.op_type], source, order, out, base)
    builder.restore_order()
    builder.prune()   # what only the join read goes, so the old outputs' readers left are real
    _recompute_outputs(builder, merged, fwd, bwd, base)


def _common_base(first: str, second: str, op_type: str) -> str:
    """The two nodes' shared name scope (Keras' bidirectional layer), plus the op type."""
    shared = os.path.commonprefix([first, second]).rpartition("/")[0]
    return f"{shared or first}/{op_type.lower()}_bidirectional"


def _merged_node(builder: GraphBuilder, fwd: Node, bwd: Node, base: str) -> Node:
    """The bidirectional node: stacked weights and initial states, both nodes' attributes."""
    scope = builder.scope
    inputs = [fwd.inputs[0]]
    for k in range(1, max(len(fwd.inputs), len(bwd.inputs))):
        pair = [n.inputs[k] if k < len(n.inputs) else "" for n in (fwd, bwd)]
        if not pair[0]:
            inputs.append("")
        elif k <= 3:
            stacked = np.concatenate([scope.initializers[name] for name in pair])
            inputs.append(scope.initializer(stacked, f"{base}/{'WRB'[k - 1]}"))
        else:
            inputs.append(_node1(builder, "Concat", pair, f"{base}/initial", axis=0))
    attrs = dict(fwd.attrs, direction="bidirectional")
    if "activations" in fwd.attrs or "activations" in bwd.attrs:
        default = _DEFAULT_ACTIVATIONS[fwd.op_type]
        attrs["activations"] = [*fwd.attrs.get("activations", default), *bwd.attrs.get("activations", default)]
    for key in ("activation_alpha", "activation_beta"):  # consumed in order by the activations that take one
        if key in fwd.attrs or key in bwd.attrs:
            attrs[key] = [*fwd.attrs.get(key, []), *bwd.attrs.get(key, [])]
    names = ("Y", "Y_h", "Y_c") if fwd.op_type == "LSTM" else ("Y", "Y_h")
    outputs = [scope.tensors.fresh(f"{base}/{name}") for name in names]
    for node in (fwd, bwd):
        builder.remove(node)
    return builder.add_node(fwd.op_type, inputs, outputs, scope.nodes.fresh(base), attrs)


def _recompute_outputs(builder: GraphBuilder, merged: Node, fwd: Node, bwd: Node, base: str) -> None:
    """Each old node's outputs from the merged node's: its direction's slice, and for the backward
    node's every-step output, time reversed back to the order it ran in.  A Squeeze dropping the
    one-direction axis becomes a Gather of the direction."""
    ints = _ints_maker(builder, base)
    for direction, node in enumerate((fwd, bwd)):
        for index, tensor in enumerate(node.outputs):
            axis, run_backwards = (1 if index == 0 else 0), direction == 1 and index == 0
            if not tensor or (not run_backwards and _gather_instead(builder, tensor, merged.outputs[index],
                                                                    direction, axis, base)):
                continue
            starts, ends, axes, steps = [direction], [direction + 1], [axis], [1]
            if run_backwards:
                starts, ends, axes, steps = [-1] + starts, [INT64_MIN] + ends, [0] + axes, [-1] + steps
            builder.add_node("Slice", [merged.outputs[index], ints(starts), ints(ends), ints(axes), ints(steps)],
                             [tensor], builder.scope.nodes.fresh(f"{node.name}/from_bidirectional"))


def _gather_instead(builder: GraphBuilder, tensor: str, source: str, direction: int, axis: int, base: str) -> bool:
    """Turn every reader of `tensor` (a one-direction output) into a Gather of `direction` from
    `source`, when each of them is a Squeeze of that axis alone; False leaves them."""
    readers = builder.readers(tensor)
    if not readers or builder.is_exposed(tensor):
        return False
    if any(r.op_type != "Squeeze" or r.inputs[:1] != [tensor] or len(r.inputs) != 2
           or constant_ints(builder, r.inputs[1]) != [axis] for r in readers):
        return False
    index = builder.scope.initializer(np.asarray(direction, np.int64), base + "/direction")
    for reader in readers:
        reader.op_type, reader.inputs, reader.attrs = "Gather", [source, index], {"axis": axis}
    return True


def _past_reader_transpose(builder: GraphBuilder, tensor: str, order: tuple[int, ...], features_last: bool
                           ) -> tuple[str, tuple[int, ...]]:
    """Where to write the join, and its axes' order: the join's own tensor, or the output of a
    Transpose that is its only reader (keeping features last after a Concat), which the join's
    own Transpose then does."""
    readers = builder.readers(tensor)
    if builder.is_exposed(tensor) or len(readers) != 1:
        return tensor, order
    reader = readers[0]
    perm = reader.attrs.get("perm")
    if (reader.op_type != "Transpose" or reader.inputs != [tensor] or not isinstance(perm, list)
            or sorted(perm) != list(range(len(order))) or (features_last and perm[-1] != len(order) - 1)):
        return tensor, order
    builder.remove(reader)
    return reader.outputs[0], tuple(order[a] for a in perm)


def _direction_axis_places(source_rank: int) -> dict[int, list[int]]:
    """Where each axis of a one-direction output sits in the merged output: Y is [T, 2, batch, H]
    for a [T, batch, H] direction, Y_h is [2, batch, H] for a [batch, H] one; the features carry
    the direction axis before them."""
    return {0: [0], 1: [2], 2: [1, 3]} if source_rank == 4 else {0: [1], 1: [0, 2]}


def _emit_side_by_side(builder: GraphBuilder, merged: Node, source: str, order: tuple[int, ...], out: str,
                       base: str) -> None:
    """Both directions next to each other along features, written to `out`, whose axis j is the
    direction output's axis `order[j]` (features last): the direction axis moved just before the
    features, then joined with them by a Reshape."""
    places = _direction_axis_places(len(order) + 1)
    moved = _node1(builder, "Transpose", [source], base + "/directions_last",
                   perm=[axis for kept in order for axis in places[kept]])
    width = 2 * int(merged.attrs["hidden_size"])   # stated: a -1 cannot be inferred when a dim is 0
    shape = _ints_maker(builder, base)([0] * (len(order) - 1) + [width])
    builder.add_node("Reshape", [moved, shape], [out], builder.scope.nodes.fresh(base + "/join"))


def _emit_reduced(builder: GraphBuilder, reduction: str, source: str, order: tuple[int, ...], out: str,
                  base: str) -> None:
    """The directions summed or multiplied (a reduction over the direction axis), transposed to
    `order` when that is not the identity."""
    axis = 1 if len(order) == 3 else 0
    name = builder.scope.nodes.fresh(base + "/join")
    identity = order == tuple(range(len(order)))
    reduced = out if identity else builder.scope.tensors.fresh(base + "/joined")
    if reduction == "ReduceSum" or builder.scope.opset >= 18:
        axes = _ints_maker(builder, base)([axis])
        builder.add_node(reduction, [source, axes], [reduced], name, {"keepdims": 0})
    else:
        builder.add_node(reduction, [source], [reduced], name, {"axes": [axis], "keepdims": 0})
    if not identity:
        builder.add_node("Transpose", [reduced], [out], builder.scope.nodes.fresh(base + "/order"),
                         {"perm": list(order)})


def _node1(builder: GraphBuilder, op_type: str, inputs: Sequence[str], base: str, **attrs: object) -> str:
    tensor = builder.scope.tensors.fresh(base)
    builder.add_node(op_type, list(inputs), [tensor], builder.scope.nodes.fresh(base), dict(attrs))
    return tensor


def _ints_maker(builder: GraphBuilder, base: str):
    return lambda values: builder.scope.initializer(np.asarray(values, np.int64), base + "/ints")
