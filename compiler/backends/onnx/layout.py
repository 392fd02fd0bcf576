"""Layout propagation: which axis order each lowered tensor is stored in.

TF graphs are NHWC, ONNX's Conv, pools, BatchNormalization and Resize are
NCHW.  Instead of wrapping every such op in a pair of Transposes and hoping
an optimizer cancels them, each lowered tensor carries a *layout*: the
permutation `perm` with `physical = logical.transpose(perm)`, `None` being
TF's own order.  Ops that do not care about order (elementwise, reductions
with remapped axes, concat, pad, softmax, TF's own Transpose) keep whatever
layout their input has; an op that needs a given order asks for it, and a
conversion is emitted only then, once per tensor and layout.  A plain CNN
thus keeps one Transpose, at the input.  Constants are permuted at compile
time and never cost a node; a conversion that moves only size-1 axes is a
Reshape, not a Transpose.
"""
from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Callable, Collection, Mapping, Optional, Sequence

import numpy as np

from compiler.analysis.window import data_format
from compiler.backends.onnx.registry import AGNOSTIC, ALIAS, CHANNELS_FIRST
from compiler.ir.graph import Op, Value

if TYPE_CHECKING:  # pragma: no cover
    from compiler.backends.onnx.context import LoweringContext

Perm = Optional[tuple[int, ...]]


def channels_first(rank: int) -> tuple[int, ...]:
    """The perm storing a channels-last tensor channels-first: NHWC -> NCHW for rank 4."""
    return (0, rank - 1) + tuple(range(1, rank - 1))


def normalize(perm: Optional[Sequence[int]]) -> Perm:
    """`None` for the identity, else the perm as a tuple."""
    if perm is None or list(perm) == list(range(len(perm))):
        return None
    return tuple(int(p) for p in perm)


def full(perm: Perm, rank: int) -> tuple[int, ...]:
    return tuple(range(rank)) if perm is None else perm


def physical_axis(axis: int, perm: Perm, rank: int) -> int:
    """Where logical `axis` (possibly negative) is stored."""
    axis %= rank
    return axis if perm is None else perm.index(axis)


def physical_dims(dims: Sequence, perm: Perm) -> tuple:
    """A logical shape (or per-axis list) in stored order."""
    return tuple(dims) if perm is None else tuple(dims[p] for p in perm)


def to_physical(array: np.ndarray, perm: Perm) -> np.ndarray:
    """A constant in the layout its consumer reads it in (free: done at compile time)."""
    return array if perm is None else np.ascontiguousarray(np.transpose(array, perm))


def between(src: Perm, dst: Perm, rank: int) -> tuple[int, ...]:
    """The ONNX Transpose `perm` taking data stored as `src` to storage as `dst`."""
    src_full, dst_full = full(src, rank), full(dst, rank)
    return tuple(src_full.index(axis) for axis in dst_full)


def after_removing(perm: Perm, removed: Sequence[int], rank: int) -> Perm:
    """The layout left when logical axes `removed` are reduced or squeezed away."""
    gone = {a % rank for a in removed}
    kept = [a for a in full(perm, rank) if a not in gone]
    renumber = {a: i for i, a in enumerate(sorted(kept))}
    return normalize([renumber[a] for a in kept])


def after_transpose(perm: Perm, tf_perm: Sequence[int], rank: int) -> Perm:
    """The layout of TF `Transpose(x, tf_perm)` stored in x's own buffer: no data moves."""
    position = {int(a): i for i, a in enumerate(tf_perm)}
    return normalize([position[a] for a in full(perm, rank)])


def moves_only_unit_axes(dims: Sequence[Optional[int]], transpose: Sequence[int]) -> bool:
    """Whether a Transpose of a tensor with stored `dims` keeps its bytes in order (a Reshape).
    One unknown extent (a dynamic batch) may take part: the Reshape's target reads -1 there."""
    if sum(d is None for d in dims) > 1 or 0 in dims:
        return False
    order = [axis for axis in transpose if dims[axis] != 1]
    return order == sorted(order)


def choose(candidates: Sequence[tuple[Perm, Optional[int]]], rank: Optional[int]) -> Perm:
    """The layout a multi-input, layout-agnostic op computes in.

    `candidates` are the (layout, rank) of its non-constant operands (and of its result, when its
    readers want a layout); the most common non-TF layout among full-rank ones wins unless TF order
    has more votes, so a residual add of two NCHW branches stays NCHW and a graph input joining
    them is the one converted, while an add of one permuted and one TF-order tensor read in TF
    order converts only the permuted one.
    """
    if rank is None:
        return None
    votes = Counter(perm for perm, r in candidates if r == rank and (perm is None or len(perm) == rank))
    in_tf_order = votes.pop(None, 0)
    if not votes:
        return None
    best, count = votes.most_common(1)[0]
    return best if count >= in_tf_order else None


def preferred_layouts(ops: Sequence[Op], roles: Mapping[str, str], rank: Callable[[Value], Optional[int]],
                      sinks: Collection[Value]) -> dict[Value, Perm]:
    """The layout each result's readers want it in, swept from the outputs backwards.

    A channels-first op wants its input channels-first, a graph output
    wants TF order, a layout-agnostic op wants whatever its own result is
    wanted in.  A layout-agnostic op whose input is in TF order then computes
    in the wanted layout straight away, so an input shared by several
    convolutions (through pads, scalings...) is converted once, up front.
    Values absent from the result have no preference.
    """
    members = set(ops)
    prefs: dict[Value, Perm] = {}
    for op in reversed(ops):
        for value in op.results:
            own = rank(value)
            if own is None or own < 3:
                continue
            votes = Counter(_wanted(user, index, roles.get(user.type), own, prefs, rank)
                            for user, index in value.uses if user in members)
            votes.pop(_NO_VOTE, None)
            votes[None] += value in sinks
            best = max((p for p in votes if p is not None), key=votes.__getitem__, default=None)
            if best is not None and votes[best] > votes[None]:
                prefs[value] = best
            elif votes[None]:
                prefs[value] = None
    return prefs


_NO_VOTE = ("no vote",)
# Readers that take their operand in TF order whatever its layout: they vote for it.
_READ_IN_TF_ORDER = frozenset(("Reshape",))
# Batched matmuls read an operand in TF order unless its adjoint flag asks for the last two
# axes swapped. Their vote keeps attention scores in TF order from the product through the
# softmax to the next product, instead of following a small permuted bias added on the way.
_BATCH_MATMULS = frozenset(("BatchMatMul", "BatchMatMulV2", "BatchMatMulV3"))
_ADJOINT_FLAGS = ("adj_x", "adj_y")
# Slices that keep every axis cut their operand where it is stored (ops_array), so they vote like
# a layout-agnostic op: a space-to-depth "focus" stem (four strided slices of the image joined
# on channels) then converts the image once instead of each slice.
_SLICES = frozenset(("Slice", "StridedSlice"))
_AXIS_MASKS = ("shrink_axis_mask", "new_axis_mask")


def _wanted(user: Op, index: int, role: Optional[str], own: int, prefs: Mapping[Value, Perm],
            rank: Callable[[Value], Optional[int]]) -> object:
    if role == CHANNELS_FIRST:
        wants = index == 0 and own == 4 and data_format(user.attr("data_format")).channels_last
        return channels_first(own) if wants else _NO_VOTE
    if user.type in _READ_IN_TF_ORDER and index == 0:
        return None
    if user.type in _BATCH_MATMULS and index < 2:
        return _NO_VOTE if user.attr(_ADJOINT_FLAGS[index], False) else None
    if role == AGNOSTIC and user.results and rank(user.results[0]) == own:
        return prefs.get(user.results[0], _NO_VOTE)
    if user.type in _SLICES and index == 0 and not any(user.attr(mask, 0) for mask in _AXIS_MASKS):
        return prefs.get(user.results[0], _NO_VOTE)
    if role == ALIAS and index < len(user.results):
        return prefs.get(user.results[index], _NO_VOTE)
    return _NO_VOTE


def convert(ctx: "LoweringContext", tensor: str, src: Perm, dst: Perm, logical: Sequence[Optional[int]]) -> str:
    """Emit the conversion of a runtime tensor between layouts: a Reshape when only
    unit axes move and the shape is known (but for one extent), else a Transpose."""
    rank = len(logical)
    transpose = between(src, dst, rank)
    stored = physical_dims(logical, src)
    tag = "nchw" if dst == channels_first(rank) else ("tf" if dst is None else "p" + "".join(map(str, dst)))
    if moves_only_unit_axes(stored, transpose):
        target = ctx.ints([-1 if d is None else d for d in physical_dims(logical, dst)], f"{tensor}/{tag}_shape")
        return ctx.reshape(tensor, target, f"{tensor}/{tag}")
    detour = _unit_axes_detour(stored, transpose)
    if detour is not None:
        units, moved, placed = detour
        base = f"{tensor}/{tag}"
        squeezed = ctx.node("Squeeze", [tensor, ctx.ints(units, f"{base}_units")], f"{base}_squeezed")[0]
        turned = ctx.node("Transpose", [squeezed], f"{base}_moved", perm=moved)[0]
        return ctx.node("Unsqueeze", [turned, ctx.ints(placed, f"{base}_placed")], base)[0]
    return ctx.node("Transpose", [tensor], f"{tensor}/{tag}", perm=list(transpose))[0]


# Past this many elements (the known extents' product) a Transpose onnxruntime would copy element
# by element is spelled as three nodes that copy in runs (at 4,096 floats the two ways cost the same).
DETOUR_ELEMENTS = 4096


def known_elements(dims: Sequence[Optional[int]]) -> int:
    """The product of the known extents: a lower bound on the element count."""
    return int(np.prod([extent for extent in dims if extent is not None], dtype=np.int64))


def moves_one_axis(perm: Sequence[int]) -> bool:
    """Whether `perm` moves at most one axis, the others keeping their order: onnxruntime copies
    such a Transpose in contiguous runs, and any other one element by element."""
    perm = list(perm)
    return any(perm[:k] + perm[k + 1:] == sorted(perm[:k] + perm[k + 1:]) for k in range(len(perm)))


def _unit_axes_detour(stored: Sequence[Optional[int]],
                      transpose: Sequence[int]) -> Optional[tuple[list[int], list[int], list[int]]]:
    """For a Transpose that moves more than one axis only because size-1 axes move too (NCHW
    [N, C, T, 1] to [N, 1, T, C]): the stored unit axes to squeeze, the Transpose of what is left
    (one axis moved) and where the unit axes go back.  [2, 561, 187, 1] to [2, 1, 187, 561]
    takes onnxruntime 1.32 459 us as one Transpose and 48 us this way."""
    units = [axis for axis, extent in enumerate(stored) if extent == 1]
    if not units or known_elements(stored) < DETOUR_ELEMENTS or moves_one_axis(transpose):
        return None
    kept = [axis for axis in range(len(stored)) if axis not in units]
    moved = [kept.index(axis) for axis in transpose if axis not in units]
    if not moves_one_axis(moved):
        return None
    return units, moved, [position for position, axis in enumerate(transpose) if axis in units]
