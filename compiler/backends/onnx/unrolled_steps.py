"""A Keras TimeDistributed layer unrolled step by step, as one application to every step.

When the number of steps is known, Keras 3's TimeDistributed applies its
inner layer once per step: the input swapped time-major by a Transpose, a
StridedSlice per step, the layer's ops on each slice, a Pack of the results
and a Transpose back.  A TimeDistributed(Dense) over 21 steps thus freezes as
21 MatMuls and BiasAdds, which a converter emits one by one.

A layer that treats each row of its input on its own (a Dense, a conv or pool
over images, an activation, a constant bias or scale) gives the same numbers
applied once to all the steps folded into the batch: Reshape [B, T, ...] to
[B*T, ...], the layer's ops once, Reshape to [B, T, ...].  The two Transposes
cancel; a Dense then lowers as one MatMul (`tensordot.py`).  Each row is
computed by the same op on the same row as before.  Only chains whose every
op is on the row-wise list below, identical in every step (types,
attributes, constant operands), reading the slices 0..T-1 of one tensor in
order, are folded; anything else keeps its unrolled form.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Collection, Optional, Sequence

import numpy as np

from compiler.analysis.window import data_format
from compiler.backends.onnx.tf1_frames import frame_shapes
from compiler.ir.dtypes import DType
from compiler.ir.graph import Graph, Op, Value
from compiler.ir.shapes import Shape
from compiler.rewrite.constants import const_array, picks_element, same_constant
from compiler.rewrite.edit import add_const, erase_dead, take_over

# Ops that compute each row of their first (or only non-constant) operand from that row alone.
_ROW_WISE_UNARY = frozenset({
    "Relu", "Relu6", "Elu", "Selu", "LeakyRelu", "Sigmoid", "Tanh", "Softplus", "Softsign", "Exp", "Log",
    "Neg", "Abs", "Square", "Sqrt", "Rsqrt", "Erf", "Identity", "Cast", "Softmax", "LogSoftmax"})
_BROADCAST_BINARY = frozenset({"Add", "AddV2", "Sub", "Mul", "RealDiv", "Maximum", "Minimum", "BiasAdd"})
_IMAGE_WINDOWS = frozenset({"Conv2D", "DepthwiseConv2dNative", "MaxPool", "AvgPool"})


@dataclass(frozen=True)
class UnrolledSteps:
    """`pack` stacks `steps` (each a chain of ops from its slice of `source` to a Pack operand)."""

    pack: Op
    source: Value
    steps: tuple[tuple[Op, ...], ...]
    core: int                  # the chain's first `core` ops need rows on axis 0 (see `_core_length`)
    rest_in: tuple[int, ...]   # a step's input shape after its batch axis
    rest_out: tuple[int, ...]  # the core's result shape after its batch axis


def find_unrolled_steps(graph: Graph, named: Collection[str] = ()) -> list[UnrolledSteps]:
    """Every Pack whose operands are one layer unrolled over the slices of a tensor whose step count
    and per-step sizes are known (the folded form's Reshapes need them)."""
    packs = [op for op in graph if op.type == "Pack" and len(op.operands) >= 2 and op.attr("axis", 0) == 0
             and op.name not in named and not op.control_deps and not op.control_users]
    candidates = [(pack, *unrolled) for pack in packs if (unrolled := _steps(pack, named)) is not None]
    if not candidates:
        return []
    # shapes carried through TF1 loops too: a TimeDistributed layer often reads a Keras RNN's sequence
    shape_of = frame_shapes(graph, [steps[0][-1].results[0] for _, _, steps in candidates])
    found = []
    for pack, source, steps in candidates:
        core = _core_length(steps[0])
        dims_in = shape_of(source).dims
        if dims_in is None:
            continue
        dims_out = shape_of(steps[0][core - 1].results[0]).dims if core else dims_in[1:]
        if (dims_out is None or len(dims_in) < 2 or dims_in[0] != len(steps)
                or any(d is None for d in dims_in[2:]) or any(d is None for d in dims_out[1:])
                or not all(_leaves_batch_alone(op, shape_of) for op in steps[0])):
            continue
        found.append(UnrolledSteps(pack, source, steps, core, tuple(dims_in[2:]), tuple(dims_out[1:])))
    return found


def _core_length(chain: Sequence[Op]) -> int:
    """How many of the chain's ops need the rows on axis 0 of a tensor of the step's rank: up to its
    last MatMul (TF's takes matrices only), conv or pool, and a BiasAdd right after it (so a Dense
    stays Reshape -> MatMul -> BiasAdd -> Reshape, which lowers as one MatMul).  The ops after it
    act on the last axes alone and run on the restored [B, T, ...] tensor as they are."""
    core = 0
    for i, op in enumerate(chain):
        if op.type == "MatMul" or op.type in _IMAGE_WINDOWS:
            core = i + 1
            if i + 1 < len(chain) and chain[i + 1].type == "BiasAdd":
                core = i + 2
    return core


def _steps(pack: Op, named: Collection[str]) -> Optional[tuple[Value, tuple[tuple[Op, ...], ...]]]:
    """The sliced tensor and each Pack operand's chain back to its slice, when all are the same
    row-wise chain on slices 0, 1, ... of that tensor."""
    steps: list[tuple[Op, ...]] = []
    source: Optional[Value] = None
    for index, value in enumerate(pack.operands):
        chain = _chain(value, pack, named)
        if chain is None:
            return None
        sliced = chain[0].operands[0].op
        if not picks_element(sliced, index) or (source is not None and sliced.operands[0] is not source):
            return None
        source = sliced.operands[0]
        if steps and not _same_chain(steps[0], chain):
            return None
        steps.append(tuple(chain))
    return source, tuple(steps)


def _chain(value: Value, reader: Op, named: Collection[str]) -> Optional[list[Op]]:
    """The row-wise ops from a StridedSlice's reader to `value`, each read only by the next."""
    chain: list[Op] = []
    while value.op.type != "StridedSlice":
        op = value.op
        if (op.name in named or len(op.results) != 1 or [u for u, _ in value.uses] != [reader]
                or op.control_deps or op.control_users or not _row_wise(op)):
            return None
        chain.append(op)
        reader, value = op, op.operands[_flowing(op)]
    if (not chain or [u for u, _ in value.uses] != [reader] or value.op.name in named
            or value.op.control_deps or value.op.control_users):
        return None
    chain.reverse()
    return chain


def _flowing(op: Op) -> int:
    """The operand carrying the step's rows: the only non-constant one (`_row_wise` checked there is one)."""
    return next(i for i, v in enumerate(op.operands) if const_array(v) is None)


def _row_wise(op: Op) -> bool:
    variable = [i for i, v in enumerate(op.operands) if const_array(v) is None]
    if len(variable) != 1:
        return False
    if op.type in _ROW_WISE_UNARY:
        return len(op.operands) == 1
    if op.type == "MatMul":
        return variable == [0] and not op.attr("transpose_a", False)
    if op.type in _IMAGE_WINDOWS:
        return variable == [0] and data_format(op.attr("data_format")).channels_last
    if op.type in _BROADCAST_BINARY and len(op.operands) == 2:
        return op.type != "BiasAdd" or (variable == [0] and data_format(op.attr("data_format")).channels_last)
    return False


def _leaves_batch_alone(op: Op, shape_of: Callable[[Value], Shape]) -> bool:
    """A binary op's constant broadcasts over the rows, not along them: it has fewer axes than the
    rows, or a leading 1."""
    if op.type not in _BROADCAST_BINARY:
        return True
    flowing = _flowing(op)
    constant = const_array(op.operands[1 - flowing])
    rank = shape_of(op.operands[flowing]).rank
    return rank is not None and (constant.ndim < rank or constant.shape[0] == 1)


def _same_chain(first: Sequence[Op], other: Sequence[Op]) -> bool:
    if len(first) != len(other):
        return False
    for a, b in zip(first, other):
        flowing = _flowing(a)
        if a.type != b.type or len(a.operands) != len(b.operands) or _flowing(b) != flowing:
            return False
        if set(a.attrs) != set(b.attrs) or any(a.attr(k) != b.attr(k) for k in a.attrs):
            return False
        for i, (x, y) in enumerate(zip(a.operands, b.operands)):
            if i != flowing and x is not y and not same_constant(x, y):
                return False
    return True


def fold_found(graph: Graph, found: list[UnrolledSteps], named: Collection[str] = ()) -> None:
    """Replace each unrolled layer by its ops applied once to the steps folded into the batch."""
    for site in found:
        _fold(graph, site, set(named))


def _fold(graph: Graph, site: UnrolledSteps, protected: set[str]) -> None:
    swap = _cancelling_swaps(site)
    chain = site.steps[0]
    value = swap[0] if swap else site.source
    if site.core:
        value = _reshape(graph, value, [-1, *site.rest_in], f"{site.pack.name}/rows", before=site.pack)
        value = _clone(graph, chain[:site.core], value, site.pack)
        steps = [-1, len(site.steps)] if swap else [len(site.steps), -1]
        value = _reshape(graph, value, steps + list(site.rest_out), f"{site.pack.name}/steps", before=site.pack)
    value = _clone(graph, chain[site.core:], value, site.pack)
    take_over(graph, swap[1] if swap else site.pack, value)
    erase_dead(graph, [op for step in site.steps for op in step] + [site.pack, site.source.op], protected)


def _clone(graph: Graph, ops: Sequence[Op], value: Value, before: Op) -> Value:
    """`ops` (a chain) again, once, the first reading `value`; returns the last one's result."""
    for op in ops:
        operands = [value if i == _flowing(op) else v for i, v in enumerate(op.operands)]
        clone = graph.create_op(op.type, graph.unique_name(f"{op.name}/every_step"), operands, op.attrs.copy(),
                                device=op.device, before=before)
        value = clone.results[0]
    return value


def _reshape(graph: Graph, value: Value, shape: list[int], base: str, before: Op) -> Value:
    target = add_const(graph, f"{base}/shape", np.array(shape, np.int32), DType.INT32, before=before)
    return graph.create_op("Reshape", graph.unique_name(base), [value, target],
                           {"T": value.dtype, "Tshape": DType.INT32}, device=before.device, before=before).results[0]


def _cancelling_swaps(site: UnrolledSteps) -> Optional[tuple[Value, Op]]:
    """(x, the Transpose reading the Pack) when the source is x with its first two axes swapped and
    the Pack's only reader swaps them back: the folded layer then reads x batch-major as it is."""
    uses = site.pack.results[0].uses
    if len(uses) != 1 or not _swaps_leading_axes(site.source.op) or not _swaps_leading_axes(uses[0][0]):
        return None
    return site.source.op.operands[0], uses[0][0]


def _swaps_leading_axes(op: Op) -> bool:
    if op.type != "Transpose" or op.control_deps or op.control_users:
        return False
    perm = const_array(op.operands[1])
    return perm is not None and [int(p) for p in perm] == [1, 0, *range(2, perm.size)]
