"""A repeat by a scalar count (Keras' `ops.repeat`: nearest UpSampling1D/2D/3D, RepeatVector) as a nearest Resize.

TF repeats axis `a` of a tensor by a scalar count r as three ops:

    x -> ExpandDims(x, a + 1) -> Tile(1 ... r at a + 1 ... 1) -> Reshape(x's shape, axis a times r)

Each element's r copies land next to it, so output index i along `a` reads input index
floor(i / r) (r may be 1: UpSampling3D((2, 1, 2)) repeats its middle axis once): an ONNX
Resize in nearest mode (asymmetric coordinates, floor rounding) with scale r on that axis and
1 on the others.  Lowered that way instead of as Unsqueeze, Tile, a Transpose back to TF's
layout and a Reshape:

- the Resize reads x in the layout x is stored in (a channels-first conv output stays
  channels-first for the conv after it);
- repeats in a row, each read only by the next, are one Resize: floor(floor(i / r) / s) =
  floor(i / (r s)), each axis on its own.  UpSampling2D's rows then columns, or UpSampling3D's
  three axes, are one node;
- onnxruntime's nearest Resize has fast loops up to rank 4 only (a 5-D one is 2-10x slower than
  the Tiles).  A 5-D repeat of the last three stored axes (UpSampling3D on N·C·D·H·W) resizes
  the tensor viewed as 4-D, its leading axes merged by a Reshape, and reshapes back; other 5-D
  repeats (N·D·H·W·C stored as TF has it) keep their Tiles.

Where every repeated axis has size 1 (RepeatVector), the copies are a broadcast: one Expand,
in the stored layout unless that puts the copies on its innermost axis and TF's order does not.
The ExpandDims and Tile must be read only by the repeat; their ONNX nodes are then left
without readers and pruned.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from compiler.backends.onnx import layout
from compiler.backends.onnx.context import Lowered, LoweringContext
from compiler.backends.onnx.fusion import single_use
from compiler.backends.onnx.shape_terms import Element, Term, terms
from compiler.ir.dtypes import DType
from compiler.ir.graph import Op, Value

_FAST_RANK = 4  # onnxruntime's nearest Resize loops directly up to this rank
_SHAPE_READERS = ("Shape", "ShapeN", "Size", "Rank")

_ATTRS = {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}


def lower_repeat(ctx: LoweringContext, op: Op) -> bool:
    """Lower the Reshape `op` as a nearest Resize when it ends a repeat (or a row of them); True when done."""
    found = _chain(ctx, op)
    if found is None:
        return False
    source, counts = found
    stored = ctx.lowered(source)
    rank = len(counts)
    scales = [float(counts[p]) for p in (range(rank) if stored.perm is None else stored.perm)]
    out_dims = layout.physical_dims(ctx.shape(op.results[0]).dims or (None,) * rank, stored.perm)
    dims = layout.physical_dims(ctx.shape(source).dims, stored.perm)
    if all(s == 1 or d == 1 for s, d in zip(scales, dims)):  # copies of one element: a broadcast
        _broadcast(ctx, op, source, counts, stored, scales)
        return True
    if rank <= _FAST_RANK:
        tensor = ctx.emit1(op, "Resize", [stored.tensor, "", _scales(ctx, op, scales)], **_ATTRS)
    elif _viewable_as_fast_rank(scales, dims, out_dims):
        tensor = _as_fast_rank(ctx, op, stored.tensor, scales, dims, out_dims)
    else:
        return False  # a slow Resize: the Tiles stay
    ctx.bind(op.results[0], tensor, stored.perm)
    ctx.stats["repeats_as_resize"] += 1
    return True


def _broadcast(ctx: LoweringContext, op: Op, source: Value, counts: list[int], stored: Lowered,
               scales: list[float]) -> None:
    """The repeat as one Expand, in the stored layout unless that copies element by element along
    the innermost stored axis where TF's order copies whole rows (grouped-query attention's
    key heads, stored [N, T, H, D, 1]): onnxruntime's Expand is slow there, and the Transpose
    back to TF's order would then move the larger, expanded tensor."""
    if stored.perm is not None and scales[-1] > 1 and counts[-1] == 1:
        tensor, perm, copies = ctx.value_in(source, None), None, counts
    else:
        tensor, perm, copies = stored.tensor, stored.perm, [int(s) for s in scales]
    target = ctx.ints(copies, f"{op.name}/expand")
    ctx.bind(op.results[0], ctx.emit1(op, "Expand", [tensor, target]), perm)
    ctx.stats["repeats_as_expand"] += 1


def _chain(ctx: LoweringContext, op: Op) -> Optional[tuple[Value, list[int]]]:
    """The tensor the repeats ending at `op` start from, and the product of their counts per axis;
    an earlier repeat joins when only the next one reads it."""
    found = _match(ctx, op)
    if found is None:
        return None
    x, axis, count, expand = found
    counts = [1] * len(ctx.shape(x).dims)  # type: ignore[arg-type]
    counts[axis] = count
    while x.op.type == "Reshape" and _read_only_by(ctx, x, expand):
        earlier = _match(ctx, x.op)
        if earlier is None:
            break
        x, axis, count, expand = earlier
        counts[axis] *= count
    return x, counts


def _target_repeats(target: Optional[list[Element]], x: Value, dims: tuple, axis: int, count: int) -> bool:
    """Whether the Reshape target is x's shape with `axis` times `count`, element by element (sizes
    read at run time included); one -1 may stand for a size the element count fixes."""
    if target is None or len(target) != len(dims):
        return False
    wild = 0
    for i, (element, d) in enumerate(zip(target, dims)):
        factor = count if i == axis else 1
        static = isinstance(element, int) and d is not None and element == d * factor
        if element == -1 and i != axis:
            wild += 1
        elif element != Term(x, i, factor) and not static:
            return False
    return wild <= 1


def _read_only_by(ctx: LoweringContext, x: Value, expand: Op) -> bool:
    """Whether `expand` is the only reader of x's elements: other readers may read only its shape
    (with a dynamic batch, the next repeat's Reshape target is computed from Shape(x))."""
    return x not in ctx.keep and all(user is expand or user.type in _SHAPE_READERS for user, _ in x.uses)


def _scales(ctx: LoweringContext, op: Op, scales: list[float]) -> str:
    return ctx.initializer(np.asarray(scales, np.float32), f"{op.name}/scales")


def _viewable_as_fast_rank(scales: list[float], dims: tuple, out_dims: tuple) -> bool:
    """Whether only the last three stored axes are scaled, their sizes known, and at most one
    output size (a dynamic batch) left to run time."""
    lead = len(scales) - (_FAST_RANK - 1)
    return all(s == 1 for s in scales[:lead]) and None not in dims[lead:] and list(out_dims).count(None) <= 1


def _as_fast_rank(ctx: LoweringContext, op: Op, tensor: str, scales: list[float], dims: tuple, out_dims: tuple) -> str:
    """The Resize on the tensor viewed as 4-D (the leading axes merged), reshaped back."""
    lead = len(scales) - (_FAST_RANK - 1)
    flat = ctx.helper1(op, "as4d", "Reshape", [tensor, ctx.ints([-1, *dims[lead:]], f"{op.name}/as4d")])
    grown = ctx.helper1(op, "resize", "Resize", [flat, "", _scales(ctx, op, [1.0, *scales[lead:]])], **_ATTRS)
    target = ctx.ints([-1 if d is None else d for d in out_dims], f"{op.name}/shape")
    return ctx.emit1(op, "Reshape", [grown, target])


def _match(ctx: LoweringContext, op: Op) -> Optional[tuple[Value, int, int, Op]]:
    """(x, axis, count, the ExpandDims) when `op` = Reshape(Tile(ExpandDims(x, axis + 1))) repeats one
    axis of a float tensor of known rank, its ExpandDims and Tile read only by the repeat."""
    tiled = op.operands[0]
    if tiled.op.type != "Tile" or not single_use(ctx, tiled, op) or op.results[0].dtype != DType.FLOAT:
        return None
    expanded = tiled.op.operands[0]
    if expanded.op.type != "ExpandDims" or not single_use(ctx, expanded, tiled.op):
        return None
    x = expanded.op.operands[0]
    dims, out = ctx.shape(x).dims, ctx.shape(op.results[0]).dims
    inserted, multiples = ctx.constant(expanded.op.operands[1]), ctx.constant(tiled.op.operands[1])
    if dims is None or inserted is None or inserted.size != 1:
        return None
    rank = len(dims)
    axis = int(inserted.reshape(())) % (rank + 1) - 1  # ExpandDims takes -rank-1..rank
    if axis < 0 or multiples is None or multiples.shape != (rank + 1,):
        return None
    count = int(multiples[axis + 1])
    if count < 1 or np.any(np.delete(multiples, axis + 1) != 1):
        return None
    folds = out is not None and len(out) == rank and _copies_fold_into(dims, out, axis, count)
    if not folds and not _target_repeats(terms(ctx, op.operands[1]), x, dims, axis, count):
        return None
    return x, axis, count, expanded.op


def _copies_fold_into(dims: tuple, out: tuple, axis: int, count: int) -> bool:
    """Whether the Reshape to `out` folds the copies into `axis`: every other axis keeps its size
    and `axis` grows `count` times, at most one size (a dynamic batch) left for run time, which
    the element count then fixes."""
    if out.count(None) > 1:
        return False
    for i, (d, o) in enumerate(zip(dims, out)):
        if o is not None and (d is None or o != d * (count if i == axis else 1)):
            return False
    return True
