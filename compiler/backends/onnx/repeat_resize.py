"""Keras' nearest UpSampling2D (a repeat along H, then along W) as one nearest resize.

Keras 3 spells `UpSampling2D(interpolation="nearest")` as two `ops.repeat`s, and
TF repeats a tensor by a scalar count as three ops:

    x[N,H,W,C] -> ExpandDims(x, a + 1) -> Tile(1 ... r at a + 1 ... 1) -> Reshape([N, H*r, W, C])

(a = 1 repeats rows, a = 2 columns).  Each element's r copies land next to it,
so output row i reads input row floor(i / r): exactly TF's ResizeNearestNeighbor
without aligned corners or half-pixel centres, which lowers to one ONNX Resize
(asymmetric, floor) instead of Unsqueeze, Tile, a five-axis Transpose and a
Reshape.  Two such resizes in a row (rows, then columns) are one: every axis
reads its own source index, and an integer scale applied twice is the product
of the scales.  The intermediate ExpandDims and Tile must be read only by the
repeat; the resize takes the name of the Reshape it replaces.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Collection, Optional

import numpy as np

from compiler.analysis import analyze
from compiler.analysis.order import reachable_ops, topological_order
from compiler.analysis.static_info import StaticInfo
from compiler.ir.dtypes import DType
from compiler.ir.graph import Graph, IRError, Op, Value
from compiler.rewrite import pattern
from compiler.rewrite.edit import add_const, erase_dead, take_over
from compiler.rewrite.pattern import any_value, used_outside

RESIZE = "ResizeNearestNeighbor"
_TYPES = (DType.FLOAT, DType.HALF, DType.DOUBLE)  # what the Resize lowering takes
_REPEAT = pattern.op("Reshape",
                     pattern.op("Tile", pattern.op("ExpandDims", any_value("x"), any_value("axis"), name="expand"),
                                any_value("multiples"), name="tile"),
                     any_value("shape"))


@dataclass
class Repeat:
    """One matched repeat of `x`: the ExpandDims axis, Tile multiples and Reshape shape as values,
    and once the static analysis proves them constant, the image axis (1: rows, 2: columns)
    repeated and the output's height and width."""

    out: Op
    x: Value
    inner: tuple[Op, Op]  # the ExpandDims and the Tile
    operands: tuple[Value, Value, Value]  # the inserted axis, the multiples, the target shape
    size: tuple[int, int] = (0, 0)


# -- matching ------------------------------------------------------------------------------------
def _match(op: Op, named: Collection[str]) -> Optional[Repeat]:
    """The repeat `op` (a Reshape) ends, when its ExpandDims and Tile are read only by it."""
    m = pattern.match(_REPEAT, op)
    if m is None or op.results[0].dtype not in _TYPES:
        return None
    inner = (m.op("expand"), m.op("tile"))
    if used_outside(m) or any(o.name in named or o.control_deps or o.control_users for o in inner):
        return None
    return Repeat(op, m.value("x"), inner, (m.value("axis"), m.value("multiples"), m.value("shape")))


def _ints(info: StaticInfo, value: Value) -> Optional[np.ndarray]:
    array = info.constant(value)
    return array if array is not None and array.dtype.kind in "iu" else None


def _resolved(repeat: Repeat, info: StaticInfo) -> bool:
    """x is an NHWC image of known H, W and C; the ExpandDims and Tile copy rows (or columns)
    r times, and the Reshape folds the copies into that axis."""
    dims = info.shape(repeat.x).dims
    axis, multiples = (_ints(info, value) for value in repeat.operands[:2])
    target = info.known_ints(repeat.operands[2])  # the batch may be read at run time (Shape)
    if dims is None or len(dims) != 4 or None in dims[1:] or axis is None or axis.size != 1:
        return False
    inserted = int(axis.reshape(()))
    inserted = inserted + 5 if inserted < 0 else inserted  # ExpandDims of a rank-4 tensor: -5..4
    if inserted not in (2, 3) or multiples is None or multiples.shape != (5,) or target is None or len(target) != 4:
        return False
    count = int(multiples[inserted])
    if count < 2 or np.any(np.delete(multiples, inserted) != 1):
        return False
    wanted = list(dims)
    wanted[inserted - 1] *= count
    if any(t != w and not (i == 0 and (t is None or t == -1)) for i, (t, w) in enumerate(zip(target, wanted))):
        return False  # only the batch may be left to run time (-1, or read with Shape)
    repeat.size = (wanted[1], wanted[2])
    return True


def find_repeats(graph: Graph, named: Collection[str] = ()) -> list[Repeat]:
    """Every image-axis repeat in `graph`; shapes and constants are analysed only when one occurs."""
    candidates = [found for op in graph if op.type == "Reshape"
                  for found in [_match(op, named)] if found is not None]
    if not candidates:
        return []
    wanted = [value for r in candidates for value in (r.x, *r.operands)]
    try:
        info = analyze(topological_order(graph, reachable_ops(wanted)))
    except IRError:  # a cycle (TF1 loop): leave the repeats as they are
        return []
    return [r for r in candidates if _resolved(r, info)]


def count_repeats(graph: Graph, named: Collection[str] = ()) -> int:
    return len(find_repeats(graph, named))


# -- rewriting -------------------------------------------------------------------------------------
def rewrite_all(graph: Graph, named: Collection[str] = ()) -> int:
    """Turn every repeat in `graph` into a nearest resize, merging resizes in a row; returns how many repeats."""
    found = find_repeats(graph, named)
    made: dict[Value, Op] = {}  # a rewritten repeat's old output -> the resize now standing for it
    for repeat in found:
        made[repeat.out.results[0]] = _rewrite(graph, repeat, made.get(repeat.x), named)
    return len(found)


def _rewrite(graph: Graph, repeat: Repeat, previous: Optional[Op], named: Collection[str]) -> Op:
    """Replace `repeat` with a resize; `previous` is the resize an earlier repeat of x became."""
    out = repeat.out
    x = repeat.x if previous is None else previous.results[0]
    size = add_const(graph, f"{out.name}/size", np.array(repeat.size), DType.INT32, out)
    dtype = out.results[0].dtype
    resize = graph.create_op(RESIZE, graph.unique_name(f"{out.name}/resize"), [x, size],
                             attrs={"T": dtype, "align_corners": False, "half_pixel_centers": False},
                             result_types=[(dtype, out.results[0].shape)], device=out.device, before=out)
    target = out.operands[1].op  # with a dynamic batch, computed from Shape(x): dead once `out` goes
    take_over(graph, out, resize.results[0])
    erase_dead(graph, list(repeat.inner) + [target], set(named))
    if previous is not None and len(x.uses) == 1 and not previous.control_users and previous.name not in named:
        resize.set_operand(0, previous.operands[0])  # its sizes are this one's on the other axis
        erase_dead(graph, [previous], set(named))
    return resize
