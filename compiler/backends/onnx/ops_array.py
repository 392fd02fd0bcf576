"""Shape and data-movement ops: reshape, squeeze, concat, split, pad, slice, gather, shape.

Ops whose meaning is per-axis (concat, pad, slice, split, squeeze, TF's own
Transpose) keep their input's layout and remap the axes they name; ops that
depend on memory order (Reshape, Pack, Gather of matrices...) read their
input in TF layout.
"""
from __future__ import annotations

from typing import Optional, Sequence, Union

import numpy as np
from onnx import TensorProto

from compiler.backends.onnx import layout, opset, repeat_resize, shape_terms
from compiler.backends.onnx.complex_pairs import (COMPLEX_TYPES, bind_complex, complex_operand, pad_complex,
                                                  transpose_complex)
from compiler.backends.onnx.context import INITIALIZER_ELEMENTS, Lowered, LoweringContext
from compiler.backends.onnx.dtypes import onnx_type, ort_computes
from compiler.backends.onnx.errors import OnnxExportError, UnsupportedOpError
from compiler.backends.onnx.fusion import flatten_concat
from compiler.backends.onnx.layout import Perm
from compiler.backends.onnx.nonnegative import never_negative
from compiler.backends.onnx.ops_elementwise import (
    broadcast_operands, carrier_of, cast_to, emit_typed, emit_where, is_integer, type_name,
)
from compiler.backends.onnx.registry import AGNOSTIC, lowers
from compiler.backends.onnx.tensordot import lower_tensordot
from compiler.graphutil import input_pipeline
from compiler.ir.attrs import attr_text
from compiler.ir.dtypes import DType
from compiler.ir.graph import Op, Value
from compiler.limits import check_tensor_size
from compiler.runtime.kernels.array import SLICE_MASKS

INT64_MAX = np.iinfo(np.int64).max
INT64_MIN = np.iinfo(np.int64).min


def kept_layout(ctx: LoweringContext, op: Op, found: Lowered) -> Lowered:
    """`found` (operand 0 as stored) for an op whose result keeps its layout, or operand 0 in TF
    order when that result's rank is unknown: a permuted tensor of unknown rank cannot be
    converted back to TF order."""
    if found.perm is None or ctx.rank(op.results[0]) is not None:
        return found
    return Lowered(ctx.value_in(op.operands[0]), None)


# -- sources ------------------------------------------------------------------------
@lowers("Const")
def _const(ctx: LoweringContext, op: Op) -> None:
    """Constants become initializers when read; reaching here means the value is unreadable."""
    raise UnsupportedOpError(op.type, op.name, "its value cannot be decoded")


@lowers("Placeholder", "PlaceholderV2")
def _placeholder(ctx: LoweringContext, op: Op) -> None:
    raise OnnxExportError(f"placeholder '{op.name}' is needed by the outputs but is not among the inputs")


@lowers(*input_pipeline.READERS)
def _pipeline_reader(ctx: LoweringContext, op: Op) -> None:
    """Reached only when the graph is not cut at the reader's results (tf2onnx cuts there too)."""
    raise OnnxExportError(input_pipeline.feed_hint(op.name, op.type))


@lowers(*input_pipeline.SOURCES)
def _pipeline_source(ctx: LoweringContext, op: Op) -> None:
    """No node: a queue or iterator handle only matters to its reader, which must be cut."""


@lowers("NoOp")
def _no_op(ctx: LoweringContext, op: Op) -> None:
    """Control-only: nothing to emit."""


# -- reshapes -----------------------------------------------------------------------
@lowers("Reshape")
def _reshape(ctx: LoweringContext, op: Op) -> None:
    if repeat_resize.lower_repeat(ctx, op) or _alias_if_unchanged(ctx, op) or lower_tensordot(ctx, op):
        return
    x = ctx.reshape_source(ctx.operand(op, 0))
    dims = ctx.shape(op.results[0]).dims
    if dims is not None and dims.count(None) <= 1 and all(d is None or d > 0 for d in dims):
        # every size known but one (a dynamic batch): that one follows from the element count
        target = ctx.ints([-1 if d is None else d for d in dims], f"{op.name}/shape")
    else:
        target = _copying_target(ctx, op)
        if target is not None:
            x = ctx.operand(op, 0)  # its 0s copy this operand's sizes, not those of a source before it
        else:
            target = int64_operand(ctx, op, 1)
    ctx.bind(op.results[0], ctx.emit1(op, "Reshape", [x, target]))


def _copying_target(ctx: LoweringContext, op: Op) -> Optional[str]:
    """A run-time target whose unknown elements are the reshaped tensor's own sizes at the same
    axes, as a constant with 0 there: ONNX's Reshape copies the input's size for a 0.  TF1's
    flatten builds `concat([shape(x)[:1], [-1]])` at run time (six ONNX nodes); this is none.
    A constant 0 in the target is a size of 0 to TF, so such a target is left as it is."""
    elements = shape_terms.terms(ctx, op.operands[1])
    if elements is None:
        return None
    target = []
    for axis, element in enumerate(elements):
        if not isinstance(element, shape_terms.Term):
            if element == 0:
                return None
            target.append(int(element))
        elif element.size and element.value is op.operands[0] and element.axis == axis \
                and (element.factor, element.offset) == (1, 0):
            target.append(0)
        else:
            return None
    return ctx.ints(target, f"{op.name}/copied_shape") if 0 in target else None


def _alias_if_unchanged(ctx: LoweringContext, op: Op) -> bool:
    """A Reshape or Tile whose result has its (fully known) operand's shape is no node at all:
    the result is the operand, in whatever layout it is stored."""
    before, after = ctx.shape(op.operands[0]).dims, ctx.shape(op.results[0]).dims
    if before is None or before != after or None in before:
        return False
    found = ctx.lowered(op.operands[0])
    ctx.bind(op.results[0], found.tensor, found.perm)
    ctx.stats[f"unchanged_{op.type.lower()}_dropped"] += 1
    return True


def shape_slice(ctx: LoweringContext, op: Op, tensor: str, start: int, end: Optional[int] = None,
                name: str = "dims") -> str:
    """Dims `start` to `end` (None: the last) of `tensor`'s shape, as int64: Shape's own start and
    end from opset 15, a Slice of the whole shape before."""
    if ctx.opset >= 15:
        return ctx.helper1(op, name, "Shape", [tensor], start=start, **({} if end is None else {"end": end}))
    whole = ctx.helper1(op, f"{name}_shape", "Shape", [tensor])
    bounds = [ctx.ints([start], f"{op.name}/{name}_start"), ctx.ints([INT64_MAX if end is None else end],
                                                                     f"{op.name}/{name}_end")]
    return ctx.helper1(op, name, "Slice", [whole, *bounds])


def int64_operand(ctx: LoweringContext, op: Op, index: int, flat: bool = True) -> str:
    """An integer operand (shape, sizes, multiples, indices) as ONNX wants it: int64
    (a constant one flattened to a vector unless `flat` is false)."""
    array = ctx.constant(op.operands[index])
    if array is not None:
        if not flat:
            return ctx.initializer(array.astype(np.int64), f"{op.name}/{index}")
        return ctx.ints(array.reshape(-1), f"{op.name}/{index}")
    tensor = ctx.operand(op, index)
    if ctx.dtype(op.operands[index]) == DType.INT64:
        return tensor
    return ctx.wide_source(tensor) or ctx.helper1(op, f"in{index}_i64", "Cast", [tensor], to=onnx_type(DType.INT64))


@lowers("Squeeze")
def _squeeze(ctx: LoweringContext, op: Op) -> None:
    x = op.operands[0]
    rank, dims = ctx.rank(x), ctx.shape(x).dims
    axes = list(op.attr("squeeze_dims", ()))
    if rank is None or (not axes and (dims is None or None in dims)):
        ctx.bind(op.results[0], ctx.emit1(op, "Squeeze", [ctx.value_in(x)]))
        return
    axes = [a % rank for a in axes] or [i for i, d in enumerate(dims) if d == 1]  # type: ignore[arg-type]
    found = ctx.lowered(x)
    stored = sorted(layout.physical_axis(a, found.perm, rank) for a in axes)
    out = ctx.emit1(op, "Squeeze", [found.tensor, ctx.ints(stored, f"{op.name}/axes")])
    ctx.bind(op.results[0], out, layout.after_removing(found.perm, axes, rank))


@lowers("ExpandDims")
def _expand_dims(ctx: LoweringContext, op: Op) -> None:
    """A permuted input stays put: the new axis goes where the result's readers want it (a Conv1D's
    NCW input becomes the NCHW its Conv2D reads), else last in storage."""
    x, rank = op.operands[0], ctx.rank(op.operands[0])
    axis = int(ctx.const_operand(op, 1, "the axis").reshape(-1)[0])
    if rank is None:
        raise UnsupportedOpError(op.type, op.name, "the input rank is unknown")
    at = axis % (rank + 1)
    found = ctx.lowered(x)
    stored, perm = _new_axis_layout(ctx, op.results[0], layout.normalize(found.perm), at, rank + 1)
    out = ctx.emit1(op, "Unsqueeze", [found.tensor, ctx.ints([stored], f"{op.name}/axes")])
    ctx.bind(op.results[0], out, perm)


def _new_axis_layout(ctx: LoweringContext, result: Value, inner: Perm, at: int, rank: int) -> tuple[int, Perm]:
    """Where logical axis `at` of a rank-`rank` result goes in storage when the rest is stored as
    `inner`, and the result's layout: where its readers want the axis if the rest then stays put,
    at `at` for TF order, else last."""
    wanted = ctx.wanted(result)
    if wanted is not None and layout.after_removing(wanted, [at], rank) == inner:
        return layout.full(wanted, rank).index(at), wanted
    if inner is None:
        return at, None
    shifted = [a if a < at else a + 1 for a in inner]
    return rank - 1, layout.normalize(shifted + [at])


@lowers("Transpose")
def _transpose(ctx: LoweringContext, op: Op) -> None:
    """No node: the result is the input's buffer in a different layout."""
    perm = [int(p) for p in ctx.const_operand(op, 1, "the permutation").reshape(-1)]
    rank = len(perm)
    if sorted(perm) != list(range(rank)) or ctx.rank(op.operands[0]) not in (None, rank):
        raise UnsupportedOpError(op.type, op.name, f"perm of {rank} entries is not a permutation of the input's "
                                                   f"{ctx.rank(op.operands[0])} axes")
    if ctx.dtype(op.operands[0]) in COMPLEX_TYPES:
        transpose_complex(ctx, op, perm)
        return
    found = ctx.lowered(op.operands[0])
    ctx.bind(op.results[0], found.tensor, layout.after_transpose(found.perm, perm, rank))
    ctx.stats["transpose_absorbed"] += 1


# -- joins and splits ----------------------------------------------------------------
@lowers("ConcatV2", "Concat", layout=AGNOSTIC)
def _concat(ctx: LoweringContext, op: Op) -> None:
    axis_index, values = (len(op.operands) - 1, op.operands[:-1]) if op.type == "ConcatV2" else (0, op.operands[1:])
    axis = int(ctx.const_operand(op, axis_index, "the axis").reshape(-1)[0])
    inputs, perm = broadcast_operands(ctx, op, values)
    rank = ctx.rank(op.results[0]) or ctx.rank(values[0])
    if rank is None:
        raise UnsupportedOpError(op.type, op.name, "the input rank is unknown")
    stored = layout.physical_axis(axis, perm, rank)
    out = ctx.emit1(op, "Concat", flatten_concat(ctx, op, values, inputs, stored), axis=stored)
    ctx.bind(op.results[0], out, perm)


@lowers("Pack")
def _pack(ctx: LoweringContext, op: Op) -> None:
    """Stacked in the layout most of its inputs are stored in, so per-slice convolutions (Keras
    TimeDistributed) stack channels-first and convert once, not once per slice."""
    rank = ctx.rank(op.results[0])
    if rank is None:
        raise UnsupportedOpError(op.type, op.name, "the input rank is unknown")
    at = int(op.attr("axis", 0)) % rank
    inner = layout.choose([(ctx.layout_vote(v), ctx.rank(v)) for v in op.operands if not ctx.is_constant(v)],
                          rank - 1)
    stored, perm = _new_axis_layout(ctx, op.results[0], inner, at, rank)
    lifted = [_lifted(ctx, op, i, inner, stored, rank) for i in range(len(op.operands))]
    ctx.bind(op.results[0], lifted[0] if len(lifted) == 1 else ctx.emit1(op, "Concat", lifted, axis=stored), perm)


def _lifted(ctx: LoweringContext, op: Op, index: int, inner: Perm, stored: int, rank: int) -> str:
    """Operand `index` of a Pack with its new axis: a constant scalar or vector as an initializer,
    a shrunk slice as the slice itself, else an Unsqueeze."""
    value = op.operands[index]
    array = ctx.constant(value)
    if array is not None and array.ndim <= 1:
        return ctx.initializer(np.expand_dims(array, stored), f"{op.name}/lift{index}")
    return ctx.unsqueeze(ctx.value_in(value, inner), [stored], rank, f"{op.name}/lift{index}")


@lowers("Unpack")
def _unpack(ctx: LoweringContext, op: Op) -> None:
    x, rank = op.operands[0], ctx.rank(op.operands[0])
    if rank is None:
        raise UnsupportedOpError(op.type, op.name, "the input rank is unknown")
    at = int(op.attr("axis", 0)) % rank
    count = len(op.results)
    parts = opset.split(ctx, op, ctx.value_in(x), at, count, [1] * count, suffix="split")
    axes = ctx.ints([at], f"{op.name}/axes")
    for value, part in zip(op.results, parts):
        ctx.bind(value, ctx.node("Squeeze", [part, axes], ctx.prefix + value.name)[0])


@lowers("Split", "SplitV")
def _split(ctx: LoweringContext, op: Op) -> None:
    if op.type == "Split":
        x, axis_index, sizes = op.operands[1], 0, None
    else:
        x, axis_index = op.operands[0], 2
        sizes = [int(s) for s in ctx.const_operand(op, 1, "the split sizes").reshape(-1)]
    rank = ctx.rank(x)
    if rank is None:
        raise UnsupportedOpError(op.type, op.name, "the input rank is unknown")
    axis = int(ctx.const_operand(op, axis_index, "the axis").reshape(-1)[0]) % rank
    dim = ctx.shape(x).dims[axis]  # type: ignore[index]
    count = len(op.results)
    if sizes is None and dim is not None:
        sizes = [dim // count] * count
    if sizes is not None and -1 in sizes:
        if dim is None:
            raise UnsupportedOpError(op.type, op.name, "a -1 split size needs a known dimension")
        sizes[sizes.index(-1)] = dim - sum(s for s in sizes if s != -1)
    found = _split_input(ctx, op, x)
    parts = opset.split(ctx, op, found.tensor, layout.physical_axis(axis, found.perm, rank), count, sizes)
    for value, part in zip(op.results, parts):
        ctx.bind(value, part, found.perm)


def _split_input(ctx: LoweringContext, op: Op, x: Value) -> Lowered:
    """The input as stored, or converted up front when the readers of two or more parts all want
    them in one other layout: one conversion instead of one per part (BoTNet's query, key and
    value, split from one convolution and reshaped in TF order)."""
    found = ctx.lowered(x)
    used = [value for value in op.results if value.uses]
    if len(used) < 2 or not all(ctx.has_preference(value) for value in used):
        return found
    wanted = {ctx.wanted(value) for value in used}
    perm = wanted.pop()
    return found if wanted or perm == found.perm else Lowered(ctx.value_in(x, perm), perm)


# -- padding -------------------------------------------------------------------------
def emit_pad(ctx: LoweringContext, op: Op, x: str, pairs: Sequence[tuple[int, int]], mode: str,
             fill: Optional[str] = None, suffix: Optional[str] = None,
             dims: Optional[Sequence[Optional[int]]] = None) -> str:
    """Pad stored axes by (before, after) `pairs`; mode constant, reflect or symmetric.  `dims`,
    the stored sizes where known, let a symmetric pad gather its outer axes.  `x` has operand 0's
    type (16-bit integers pad as int32: onnxruntime's Pad has no kernel for them)."""
    if mode == "symmetric" and all(p in (0, 1) for pair in pairs for p in pair):
        mode = "edge"  # one mirrored pixel including the edge is the edge pixel
    if mode == "symmetric":
        return _symmetric_pad(ctx, op, x, pairs, suffix, dims or (None,) * len(pairs))
    pads = ctx.ints([b for b, _ in pairs] + [a for _, a in pairs], f"{op.name}/pads")
    inputs = [x, pads] + ([fill] if fill else [])
    return emit_typed(ctx, op, "Pad", inputs, ctx.dtype(op.operands[0]), typed=(0, 2), back=True, suffix=suffix,
                      mode=mode)


def _symmetric_pad(ctx: LoweringContext, op: Op, x: str, pairs: Sequence[tuple[int, int]],
                   suffix: Optional[str], dims: Sequence[Optional[int]]) -> str:
    """SYMMETRIC mirror padding (edge included), which ONNX Pad lacks.  An outer axis of known
    (and sane) size is one Gather of mirrored positions; the innermost axis, where onnxruntime's
    Gather copies element by element, is reversed slices concatenated."""
    padded_axes = [a for a, (b, e) in enumerate(pairs) if b or e]
    for n, axis in enumerate(padded_axes):
        before, after = pairs[axis]
        last = n == len(padded_axes) - 1
        name = suffix if last else f"mirror{axis}"
        size = dims[axis]
        if size is not None and axis < len(pairs) - 1 and before + size + after <= INITIALIZER_ELEMENTS:
            positions = np.r_[before - 1:-1:-1, 0:size, size - 1:size - 1 - after:-1].astype(np.int64)
            inputs = [x, ctx.initializer(positions, f"{op.name}/mirror{axis}_positions")]
            x = ctx.emit1(op, "Gather", inputs, axis=axis) if last and suffix is None else \
                ctx.helper1(op, name, "Gather", inputs, axis=axis)
            continue
        at = ctx.ints([axis], f"{op.name}/axis{axis}")
        back = ctx.ints([-1], f"{op.name}/step_back")
        parts = []
        if before:
            parts.append(ctx.helper1(op, f"mirror{axis}_before", "Slice",
                                     [x, ctx.ints([before - 1], "start"), ctx.ints([INT64_MIN], "to_start"), at, back]))
        parts.append(x)
        if after:
            parts.append(ctx.helper1(op, f"mirror{axis}_after", "Slice",
                                     [x, ctx.ints([-1], "last"), ctx.ints([-after - 1], "stop"), at, back]))
        x = ctx.emit1(op, "Concat", parts, axis=axis) if last and suffix is None else \
            ctx.helper1(op, name, "Concat", parts, axis=axis)
    return x


def stored_pairs(paddings: np.ndarray, perm: Perm) -> list[tuple[int, int]]:
    pairs = [(int(b), int(a)) for b, a in np.asarray(paddings).reshape(-1, 2)]
    return list(layout.physical_dims(pairs, perm))


@lowers("Pad", "PadV2", "MirrorPad", layout=AGNOSTIC)
def _pad(ctx: LoweringContext, op: Op) -> None:
    mode = str(op.attr("mode")).lower() if op.type == "MirrorPad" else "constant"
    paddings = ctx.constant(op.operands[1])
    if ctx.dtype(op.operands[0]) in COMPLEX_TYPES:
        pad_complex(ctx, op, paddings, mode)
        return
    if paddings is None:
        _pad_by_tensor(ctx, op, mode)
        return
    found = ctx.agnostic_operand(op)
    if not np.any(paddings):  # Sonnet's Conv2D pads by nothing ahead of a 1x1 conv: an identity
        ctx.bind(op.results[0], found.tensor, found.perm)
        ctx.stats["empty_pads_removed"] += 1
        return
    fill = None
    if op.type == "PadV2":
        fill = ctx.initializer(ctx.const_operand(op, 2, "the pad value").reshape(()), f"{op.name}/value")
    dims = ctx.shape(op.operands[0]).dims
    stored = None if dims is None else layout.physical_dims(dims, found.perm)
    out = emit_pad(ctx, op, found.tensor, stored_pairs(paddings, found.perm), mode, fill, dims=stored)
    ctx.bind(op.results[0], out, found.perm)


def _pad_by_tensor(ctx: LoweringContext, op: Op, mode: str) -> None:
    """Paddings the graph computes (a detection head padding its kept boxes to a fixed count): ONNX
    Pad reads them as a tensor, TF's [rank, 2] rows of (before, after) transposed and flattened to
    all befores then all afters.  In TF order, since the rows cannot be permuted at export time."""
    if mode == "symmetric":
        raise UnsupportedOpError(op.type, op.name, "SYMMETRIC mirror padding needs constant paddings "
                                                   "(REFLECT or a constant Pad take them at run time)")
    rows = ctx.helper1(op, "paddings_by_side", "Transpose", [int64_operand(ctx, op, 1)], perm=[1, 0])
    pads = ctx.helper1(op, "pads", "Reshape", [rows, ctx.ints([-1], "flat")])
    fill = [ctx.operand(op, 2)] if op.type == "PadV2" else []
    out = emit_typed(ctx, op, "Pad", [ctx.operand(op, 0), pads] + fill, ctx.dtype(op.operands[0]), typed=(0, 2),
                     back=True, mode=mode)
    ctx.bind(op.results[0], out)


# -- slicing and gathering ------------------------------------------------------------
@lowers("Slice")
def _slice(ctx: LoweringContext, op: Op) -> None:
    """begin and size per axis; an element known only at run time (a size read with Shape under a
    dynamic batch) is read from its operand, and the end then computed as begin + size (-1: to the end)."""
    rank = ctx.rank(op.operands[0])
    if rank is None:
        raise UnsupportedOpError(op.type, op.name, "the input rank is unknown")
    begin, size = (_known_bounds(ctx, op.operands[i], rank) for i in (1, 2))
    found = ctx.lowered(op.operands[0])
    specs = [(a, ("begin", a) if b is None else b, _slice_end(a, b, s), 1) for a, (b, s) in enumerate(zip(begin, size))
             if not (b == 0 and s == -1)]
    ctx.bind(op.results[0], emit_slice(ctx, op, found.tensor, specs, found.perm, rank, main=True), found.perm)


def _slice_end(axis: int, begin: Optional[int], size: Optional[int]) -> Bound:
    if size == -1:
        return INT64_MAX
    return begin + size if begin is not None and size is not None else ("slice_end", axis)


# A slice bound known only at run time: ("begin" | "end" | "shrink_end" | "slice_end", its index in the vector).
Bound = Union[int, tuple[str, int]]


def emit_slice(ctx: LoweringContext, op: Op, x: str, specs: Sequence[tuple[int, Bound, Bound, int]], perm: Perm,
                rank: Optional[int], main: bool) -> str:
    """ONNX Slice of (logical axis, start, end, step) specs on a tensor stored as `perm`
    (no node when nothing is cut off); in TF order the axes may be negative and the rank unknown.
    A StridedSlice's start or end may be read from its begin or end operand at run time."""
    if not specs:
        return x
    axes = [a if perm is None else layout.physical_axis(a, perm, rank) for a, _, _, _ in specs]  # type: ignore[arg-type]
    inputs = [x, _bound_vector(ctx, op, [s[1] for s in specs], "starts"),
              _bound_vector(ctx, op, [s[2] for s in specs], "ends"),
              ctx.ints(axes, f"{op.name}/axes"), ctx.ints([s[3] for s in specs], f"{op.name}/steps")]
    return ctx.emit1(op, "Slice", inputs) if main else ctx.helper1(op, "slice", "Slice", inputs)


def _bound_vector(ctx: LoweringContext, op: Op, bounds: Sequence[Bound], name: str) -> str:
    """Slice starts or ends: a constant, or a Concat of constants and elements read at run time."""
    if all(isinstance(b, int) for b in bounds):
        return ctx.ints(bounds, f"{op.name}/{name}")  # type: ignore[arg-type]
    pieces = [ctx.ints([b], f"{op.name}/{name}{n}") if isinstance(b, int) else _run_time_bound(ctx, op, *b)
              for n, b in enumerate(bounds)]
    return pieces[0] if len(pieces) == 1 else ctx.helper1(op, name, "Concat", pieces, axis=0)


def _run_time_bound(ctx: LoweringContext, op: Op, kind: str, index: int) -> str:
    """Element `index` of the begin (operand 1) or end (operand 2) vector as int64 [1].  For a shrunk
    axis the end after its begin, where TF's begin -1 (the last element) ends past the end; for a
    Slice begin + size (operand 2), size -1 ending past the end."""
    if kind == "shrink_end":
        return _past_or(ctx, op, _element(ctx, op, 1, index), ctx.ints([1], f"{op.name}/one"), -1, f"shrunk_end{index}")
    if kind == "slice_end":
        size = _element(ctx, op, 2, index)
        return _past_or(ctx, op, size, _element(ctx, op, 1, index), -1, f"slice_end{index}")
    return _element(ctx, op, 2 if kind == "end" else 1, index)


def _element(ctx: LoweringContext, op: Op, source: int, index: int) -> str:
    """Element `index` of integer operand `source` as an int64 [1]."""
    if ctx.shape(op.operands[source]).dims == (1,):  # the vector is that one element
        element = ctx.operand(op, source)
    else:
        at = [ctx.ints([index], f"{op.name}/at{index}"), ctx.ints([index + 1], f"{op.name}/at{index + 1}")]
        element = ctx.helper1(op, f"in{source}_{index}", "Slice", [ctx.operand(op, source)] + at)
    if ctx.dtype(op.operands[source]) != DType.INT64:
        element = ctx.helper1(op, f"in{source}_{index}_i64", "Cast", [element], to=onnx_type(DType.INT64))
    return element


def _past_or(ctx: LoweringContext, op: Op, x: str, addend: str, sentinel: int, name: str) -> str:
    """x + addend, or past the end (INT64_MAX) where x is `sentinel`."""
    hit = ctx.helper1(op, f"{name}_sentinel", "Equal", [x, ctx.ints([sentinel], f"{op.name}/sentinel{sentinel}")])
    total = ctx.helper1(op, f"{name}_sum", "Add", [x, addend])
    return ctx.helper1(op, name, "Where", [hit, ctx.ints([INT64_MAX], f"{op.name}/past_end"), total])


def _strided_specs(op: Op, rank: int, begin: list[Optional[int]], end: list[Optional[int]], strides: list[int]
                   ) -> tuple[list[tuple[int, Bound, Bound, int]], list[int], list[int]]:
    """(slice specs, input axes to shrink, output positions of new axes) of a StridedSlice; a begin
    or end element None is read at run time."""
    masks = {m: int(op.attr(m, 0)) for m in SLICE_MASKS}

    def bit(name: str, i: int) -> bool:
        return bool(masks[name] >> i & 1)

    specs, shrink, new_axes = [], [], []
    real = sum(1 for i in range(len(begin)) if not bit("new_axis_mask", i) and not bit("ellipsis_mask", i))
    axis = out = 0
    for i, (known_b, known_e, s) in enumerate(zip(begin, end, strides)):
        b: Bound = ("begin", i) if known_b is None else known_b
        e: Bound = ("end", i) if known_e is None else known_e
        if bit("ellipsis_mask", i):
            covered = rank - real
            axis, out = axis + covered, out + covered
        elif bit("new_axis_mask", i):
            new_axes.append(out)
            out += 1
        elif bit("shrink_axis_mask", i):
            stop: Bound = ("shrink_end", i) if not isinstance(b, int) else INT64_MAX if b == -1 else b + 1
            specs.append((axis, b, stop, 1))
            shrink.append(axis)
            axis += 1
        else:
            start = (0 if s > 0 else INT64_MAX) if bit("begin_mask", i) else b
            stop = (INT64_MAX if s > 0 else INT64_MIN) if bit("end_mask", i) else e
            if (start, stop, s) != (0, INT64_MAX, 1):
                specs.append((axis, start, stop, s))
            axis, out = axis + 1, out + 1
    return specs, shrink, new_axes


def _known_bounds(ctx: LoweringContext, value: Value, length: int) -> list[Optional[int]]:
    """A begin or end vector's elements, None for those known only at run time."""
    array = ctx.constant(value)
    if array is not None:
        return [int(v) for v in array.reshape(-1)]
    known = ctx.info.known_ints(value)
    return known if known is not None and len(known) == length else [None] * length


@lowers("StridedSlice")
def _strided_slice(ctx: LoweringContext, op: Op) -> None:
    x, rank = op.operands[0], ctx.rank(op.operands[0])
    if rank is None:
        raise UnsupportedOpError(op.type, op.name, "the input rank is unknown")
    strides = [int(v) for v in ctx.const_operand(op, 3, "strides").reshape(-1)]
    begin, end = (_known_bounds(ctx, op.operands[i], len(strides)) for i in (1, 2))
    specs, shrink, new_axes = _strided_specs(op, rank, begin, end, strides)
    dims = ctx.shape(x).dims or ()
    # the one element of an axis of length one needs no Slice to pick (an RNN's last step of one)
    specs = [s for s in specs if not (s[0] in shrink and s[0] < len(dims) and dims[s[0]] == 1 and s[1] in (0, -1))]
    pairs = ctx.dtype(x) in COMPLEX_TYPES  # sliced like the logical tensor: the (real, imag) axis is past them all
    if not pairs:
        found = ctx.lowered(x)
        if not shrink and not new_axes:
            ctx.bind(op.results[0], emit_slice(ctx, op, found.tensor, specs, found.perm, rank, main=True), found.perm)
            return
        if not new_axes and found.perm is not None and layout.after_removing(found.perm, shrink, rank) is None:
            _shrink_stored(ctx, op, found, specs, shrink, rank)
            return
    source = complex_operand(ctx, op, 0) if pairs else ctx.value_in(x)
    out = emit_slice(ctx, op, source, specs, None, rank, main=not (shrink or new_axes))
    stages = [(op_type, axes) for op_type, axes in (("Squeeze", shrink), ("Unsqueeze", new_axes)) if axes]
    for n, (op_type, axes) in enumerate(stages):
        inputs = [out, ctx.ints(axes, f"{op.name}/{op_type.lower()}_axes")]
        last = n == len(stages) - 1
        out = ctx.emit1(op, op_type, inputs) if last else ctx.helper1(op, op_type.lower(), op_type, inputs)
    if pairs:
        bind_complex(ctx, op.results[0], out)
    else:
        ctx.bind(op.results[0], out)


def _shrink_stored(ctx: LoweringContext, op: Op, found: Lowered, specs: list[tuple[int, Bound, Bound, int]],
                   shrink: list[int], rank: int) -> None:
    """A StridedSlice dropping the axes that keep a transposed tensor from TF order (a time-major
    RNN output read as `outputs[:, -1]`, a channels-first map's `x[..., 0]`): sliced and squeezed
    where it is stored, with no Transpose.  Where what is left would still be transposed, the
    caller slices TF order instead: that one Transpose serves every such reader."""
    sliced = emit_slice(ctx, op, found.tensor, specs, found.perm, rank, main=False)
    axes = sorted(layout.physical_axis(a, found.perm, rank) for a in shrink)
    ctx.bind(op.results[0], ctx.emit1(op, "Squeeze", [sliced, ctx.ints(axes, f"{op.name}/squeeze_axes")]))


@lowers("Gather", "GatherV2")
def _gather(ctx: LoweringContext, op: Op) -> None:
    params, indices = op.operands[0], op.operands[1]
    axis = 0 if op.type == "Gather" else int(ctx.const_operand(op, 2, "the axis").reshape(-1)[0])
    rank = ctx.rank(params)
    if rank is None:
        raise UnsupportedOpError(op.type, op.name, "the params rank is unknown")
    axis %= rank
    index_rank = ctx.rank(indices)
    batch_dims = int(op.attr("batch_dims", 0))
    if batch_dims < 0 and index_rank is not None:
        batch_dims += index_rank  # TF counts a negative batch_dims from the indices' rank
    if batch_dims:
        _batched_gather(ctx, op, axis, batch_dims, index_rank)
        return
    if index_rank in (0, 1):
        found = ctx.lowered(params)
        tensor, perm = found.tensor, found.perm
    else:
        tensor, perm = ctx.value_in(params), None
    out = ctx.emit1(op, "Gather", [tensor, ctx.value_in(indices)], axis=layout.physical_axis(axis, perm, rank))
    ctx.bind(op.results[0], out, layout.after_removing(perm, [axis], rank) if index_rank == 0 else perm)


def _batched_gather(ctx: LoweringContext, op: Op, axis: int, batch_dims: int, index_rank: Optional[int]) -> None:
    """GatherV2 with batch_dims b gathering along axis b (Keras' take_along_axis): ONNX GatherND
    with the same batch_dims, each index a one-element tuple, or GatherElements when the params
    have no axes past the gathered one (indices then name one element each).  Other axes would need the params
    transposed around the gather, and are refused."""
    if index_rank is None:
        raise UnsupportedOpError(op.type, op.name, f"batch_dims {batch_dims} with indices of unknown rank")
    if not 0 < batch_dims <= index_rank:
        raise UnsupportedOpError(op.type, op.name, f"batch_dims {op.attr('batch_dims')} with indices of rank "
                                                   f"{index_rank}")
    if axis != batch_dims:
        raise UnsupportedOpError(op.type, op.name, f"gathering along axis {axis} past batch_dims {batch_dims} "
                                                   f"(only the first axis after the batch axes lowers to GatherND)")
    if ctx.rank(op.operands[0]) == index_rank == batch_dims + 1:  # one index per element: take_along_axis
        ctx.bind(op.results[0], ctx.emit1(op, "GatherElements", [ctx.operand(op, 0), ctx.operand(op, 1)],
                                          axis=batch_dims))
        return
    tuples = ctx.helper1(op, "tuples", "Unsqueeze", [int64_operand(ctx, op, 1, flat=False),
                                                     ctx.ints([-1], f"{op.name}/innermost")])
    ctx.bind(op.results[0], ctx.emit1(op, "GatherND", [ctx.operand(op, 0), tuples], batch_dims=batch_dims))


@lowers("GatherNd")
def _gather_nd(ctx: LoweringContext, op: Op) -> None:
    """ONNX GatherND (batch_dims 0) on params in TF order: index tuples name TF axes."""
    policy = attr_text(op.attr("bad_indices_policy", ""))
    if policy not in ("", "DEFAULT", "ERROR"):
        raise UnsupportedOpError(op.type, op.name,
                                 f"bad_indices_policy {policy} (ONNX GatherND cannot zero bad indices)")
    dims = ctx.shape(op.operands[1]).dims
    if dims is not None and (not dims or dims[-1] == 0):
        raise UnsupportedOpError(op.type, op.name, "indices must have a non-empty last axis for ONNX GatherND")
    inputs = [ctx.operand(op, 0), int64_operand(ctx, op, 1, flat=False)]
    ctx.bind(op.results[0], ctx.emit1(op, "GatherND", inputs))


@lowers("ReverseV2", layout=AGNOSTIC)
def _reverse_v2(ctx: LoweringContext, op: Op) -> None:
    """A Slice stepping back over each reversed axis, in whatever layout the input is stored
    (an input of unknown rank is in TF order, where ONNX takes negative axes as TF does)."""
    rank = ctx.rank(op.operands[0])
    axes = {int(a) for a in ctx.const_operand(op, 1, "the axes").reshape(-1)}
    specs = [(a, -1, INT64_MIN, -1) for a in sorted(axes if rank is None else {a % rank for a in axes})]
    found = kept_layout(ctx, op, ctx.agnostic_operand(op))
    ctx.bind(op.results[0], emit_slice(ctx, op, found.tensor, specs, found.perm, rank, main=True), found.perm)


# -- shapes and fills ------------------------------------------------------------------
@lowers("Shape")
def _shape(ctx: LoweringContext, op: Op) -> None:
    _bind_int(ctx, op, _tf_shape(ctx, op, 0))


@lowers("ShapeN")
def _shape_n(ctx: LoweringContext, op: Op) -> None:
    """One Shape per operand (tf.image.ssim asks for two at once); a static one is a constant."""
    for index, result in enumerate(op.results):
        if ctx.is_constant(result):
            ctx.bind(result, ctx.constant_tensor(result, None))
        else:
            _bind_int(ctx, op, _tf_shape(ctx, op, index), index)


def _tf_shape(ctx: LoweringContext, op: Op, index: int) -> str:
    """Shape of operand `index`, which may be permuted: its stored shape, gathered back into TF order."""
    x, rank = op.operands[index], ctx.rank(op.operands[index])
    found = ctx.lowered(x)
    suffix = "" if index == 0 else str(index)
    shape = ctx.helper1(op, "stored" + suffix, "Shape", [found.tensor])
    if found.perm is not None and rank is not None:
        order = ctx.ints([found.perm.index(i) for i in range(rank)], f"{op.name}/order{suffix}")
        shape = ctx.helper1(op, "tf_order" + suffix, "Gather", [shape, order], axis=0)
    return shape


@lowers("Size")
def _size(ctx: LoweringContext, op: Op) -> None:
    _bind_int(ctx, op, ctx.helper1(op, "count", "Size", [ctx.lowered(op.operands[0]).tensor]))


def _bind_int(ctx: LoweringContext, op: Op, int64_tensor: str, index: int = 0) -> None:
    """Bind int64 result `index`, cast to the op's declared type (TF defaults to int32)."""
    out_type = op.attr("out_type", DType.INT32)
    if out_type == DType.INT64:
        ctx.bind(op.results[index], int64_tensor)
        return
    to = onnx_type(out_type)
    cast = ctx.emit1(op, "Cast", [int64_tensor], to=to) if index == 0 else \
        ctx.helper1(op, f"cast{index}", "Cast", [int64_tensor], to=to)
    ctx.bind(op.results[index], ctx.narrowed(cast, int64_tensor))


@lowers("Fill")
def _fill(ctx: LoweringContext, op: Op) -> None:
    ctx.bind(op.results[0], ctx.emit1(op, "Expand", [ctx.operand(op, 1), int64_operand(ctx, op, 0)]))


@lowers("BroadcastTo")
def _broadcast_to(ctx: LoweringContext, op: Op) -> None:
    ctx.bind(op.results[0], ctx.emit1(op, "Expand", [ctx.operand(op, 0), int64_operand(ctx, op, 1)]))


@lowers("Tile")
def _tile(ctx: LoweringContext, op: Op) -> None:
    if _alias_if_unchanged(ctx, op):
        return
    multiples = ctx.constant(op.operands[1])
    if multiples is None:
        ctx.bind(op.results[0], ctx.emit1(op, "Tile", [ctx.operand(op, 0), int64_operand(ctx, op, 1)]))
        return
    found = ctx.lowered(op.operands[0])
    stored = layout.physical_dims([int(m) for m in multiples.reshape(-1)], found.perm)
    out = ctx.emit1(op, "Tile", [found.tensor, ctx.ints(stored, f"{op.name}/multiples")])
    ctx.bind(op.results[0], out, found.perm)


@lowers("ZerosLike", "OnesLike")
def _filled_like(ctx: LoweringContext, op: Op) -> None:
    found = ctx.lowered(op.operands[0])
    dtype = ctx.dtype(op.results[0])
    fill = ctx.scalar(1 if op.type == "OnesLike" else 0, dtype, "one" if op.type == "OnesLike" else "zero")
    shape = ctx.helper1(op, "shape", "Shape", [found.tensor])
    ctx.bind(op.results[0], ctx.emit1(op, "Expand", [fill, shape]), found.perm)


@lowers("OneHot")
def _one_hot(ctx: LoweringContext, op: Op) -> None:
    """Where(index == position, on, off) with the positions along the new axis: ONNX OneHot
    would wrap negative indices, which TF leaves all off."""
    rank = ctx.rank(op.operands[0])
    if rank is None:
        raise UnsupportedOpError(op.type, op.name, "the indices rank is unknown")
    axis = int(op.attr("axis", -1))
    at = rank if axis == -1 else axis
    if not 0 <= at <= rank:
        raise UnsupportedOpError(op.type, op.name, f"axis {axis} is out of range for indices of rank {rank}")
    indices = int64_operand(ctx, op, 0, flat=False)
    if _lower_as_onnx_one_hot(ctx, op, indices, at):
        return
    lifted = ctx.helper1(op, "lifted", "Unsqueeze", [indices, ctx.ints([at], f"{op.name}/axis")])
    hot = ctx.helper1(op, "hot", "Equal", [lifted, depth_positions(ctx, op, rank - at)])
    picked = emit_where(ctx, op, [hot, ctx.operand(op, 2), ctx.operand(op, 3)], ctx.dtype(op.results[0]))
    ctx.bind(op.results[0], picked)


# Value types onnxruntime's OneHot kernel takes with int64 indices and depth.
_ONE_HOT_VALUES = (DType.FLOAT, DType.HALF, DType.INT64)


def _lower_as_onnx_one_hot(ctx: LoweringContext, op: Op, indices: str, at: int) -> bool:
    """ONNX OneHot, one node, when it means what TF means: indices that are never negative
    (TopK's, ArgMax's...; ONNX would count a negative one from the end) and constant on/off
    values of a type onnxruntime's kernel takes."""
    on, off = ctx.constant(op.operands[2]), ctx.constant(op.operands[3])
    dtype = ctx.dtype(op.results[0])
    if on is None or off is None or dtype not in _ONE_HOT_VALUES or not never_negative(op.operands[0]):
        return False
    values = ctx.initializer(np.array([off.reshape(-1)[0], on.reshape(-1)[0]], dtype.to_numpy()), f"{op.name}/values")
    ctx.bind(op.results[0], ctx.emit1(op, "OneHot", [indices, int64_operand(ctx, op, 1), values], axis=at))
    ctx.stats["one_hot_as_onnx_one_hot"] += 1
    return True


def depth_positions(ctx: LoweringContext, op: Op, trailing: int) -> str:
    """0 .. depth-1 (int64) along the leading axis of a tensor with `trailing` unit axes after it."""
    depth = ctx.constant(op.operands[1])
    if depth is not None:
        check_tensor_size([int(depth.reshape(-1)[0])], 8, "OneHot's depth positions")
        return ctx.initializer(np.arange(int(depth.reshape(-1)[0]), dtype=np.int64).reshape((-1,) + (1,) * trailing),
                               f"{op.name}/positions")
    count = counting(ctx, op, int64_operand(ctx, op, 1, flat=False), "count")
    if not trailing:
        return count
    shape = ctx.ints([-1] + [1] * trailing, f"{op.name}/positions_shape")
    return ctx.helper1(op, "positions", "Reshape", [count, shape])


def counting(ctx: LoweringContext, op: Op, count: str, suffix: str) -> str:
    """0, 1, ..., count - 1 (int64) for a run-time int64 scalar `count`."""
    zero, one = ctx.scalar(0, DType.INT64, "zero"), ctx.scalar(1, DType.INT64, "one")
    return ctx.helper1(op, suffix, "Range", [zero, count, one])


_FLOAT_RANGE = (DType.FLOAT, DType.DOUBLE)


@lowers("Range")
def _range(ctx: LoweringContext, op: Op) -> None:
    """Integers: ONNX Range.  Floats: ONNX Range adds delta over and over, drifting from TF's
    start + T(i) * delta, so TF's count ceil((limit - start) / delta) and formula are spelled out."""
    dtype = ctx.dtype(op.results[0])
    start, limit, delta = (ctx.operand(op, i) for i in range(3))
    if is_integer(dtype):
        ctx.bind(op.results[0], emit_typed(ctx, op, "Range", [start, limit, delta], dtype))  # int8, uint16/32 wider
        return
    if dtype not in _FLOAT_RANGE:
        raise UnsupportedOpError(op.type, op.name, f"Range of {type_name(dtype)} (ONNX Range takes int16/32/64, "
                                                   "float, double)")
    span = ctx.helper1(op, "steps", "Div", [ctx.helper1(op, "span", "Sub", [limit, start]), delta])
    count = ctx.helper1(op, "count", "Cast", [ctx.helper1(op, "ceil", "Ceil", [span])], to=onnx_type(DType.INT64))
    index = counting(ctx, op, count, "index")
    scaled = ctx.helper1(op, "scaled", "Mul", [ctx.helper1(op, "index_t", "Cast", [index], to=onnx_type(dtype)), delta])
    ctx.bind(op.results[0], ctx.emit1(op, "Add", [start, scaled]))


# -- space <-> batch -------------------------------------------------------------------
def _block_operands(ctx: LoweringContext, op: Op, what: str) -> tuple[list[int], list[tuple[int, int]], list[int]]:
    """(block shape, (before, after) pairs of paddings or crops, the input's non-batch dims),
    all of which the Reshapes spelling these ops out need statically."""
    blocks = [int(b) for b in ctx.const_operand(op, 1, "the block shape").reshape(-1)]
    pairs = [(int(b), int(a)) for b, a in ctx.const_operand(op, 2, f"the {what}").reshape(-1, 2)]
    dims = ctx.shape(op.operands[0]).dims
    if dims is None or any(d is None for d in dims[1:]):
        raise UnsupportedOpError(op.type, op.name, "the input dims after the batch must be static")
    if any(b < 1 for b in blocks) or any(n < 0 for pair in pairs for n in pair):
        raise UnsupportedOpError(op.type, op.name, f"block shape {blocks} and {what} {pairs} must be positive "
                                 "and non-negative")
    if len(pairs) != len(blocks) or len(dims) <= len(blocks):
        raise UnsupportedOpError(op.type, op.name, f"block shape {blocks} does not fit the input or the {what}")
    return blocks, pairs, [int(d) for d in dims[1:]]  # type: ignore[arg-type]


@lowers("SpaceToBatchND")
def _space_to_batch_nd(ctx: LoweringContext, op: Op) -> None:
    """Pad, split each spatial axis into (size / block, block), move the blocks in front of the
    batch and merge them into it: Pad, Reshape, Transpose, Reshape on TF-ordered data."""
    blocks, pairs, dims = _block_operands(ctx, op, "paddings")
    m = len(blocks)
    padded = [d + b + a for d, (b, a) in zip(dims, pairs)]
    if any(p % b for p, b in zip(padded, blocks)):
        raise UnsupportedOpError(op.type, op.name, f"padded spatial dims {padded} are not multiples of {blocks}")
    x = ctx.operand(op, 0)
    if any(b or a for b, a in pairs):
        x = emit_pad(ctx, op, x, [(0, 0)] + pairs + [(0, 0)] * (len(dims) - m), "constant", suffix="pad")
    split = [0] + [n for p, b in zip(padded, blocks) for n in (p // b, b)] + dims[m:]
    x = ctx.helper1(op, "split", "Reshape", [x, ctx.ints(split, f"{op.name}/split")])
    order = [2 + 2 * i for i in range(m)] + [0] + [1 + 2 * i for i in range(m)] + list(range(1 + 2 * m, len(split)))
    x = ctx.helper1(op, "blocks_first", "Transpose", [x], perm=order)
    merged = [-1] + [p // b for p, b in zip(padded, blocks)] + dims[m:]
    ctx.bind(op.results[0], ctx.emit1(op, "Reshape", [x, ctx.ints(merged, f"{op.name}/shape")]))


@lowers("BatchToSpaceND")
def _batch_to_space_nd(ctx: LoweringContext, op: Op) -> None:
    """SpaceToBatchND undone: split the blocks out of the batch, interleave each with its spatial
    axis, merge, then crop with a Slice (TF-ordered data)."""
    blocks, crops, dims = _block_operands(ctx, op, "crops")
    m = len(blocks)
    split = blocks + [-1] + dims
    x = ctx.helper1(op, "split", "Reshape", [ctx.operand(op, 0), ctx.ints(split, f"{op.name}/split")])
    order = [m] + [a for i in range(m) for a in (m + 1 + i, i)] + list(range(2 * m + 1, len(split)))
    x = ctx.helper1(op, "interleaved", "Transpose", [x], perm=order)
    grown = [d * b for d, b in zip(dims, blocks)]
    x = ctx.helper1(op, "merged", "Reshape", [x, ctx.ints([-1] + grown + dims[m:], f"{op.name}/merged")])
    specs = [(1 + i, b, g - a, 1) for i, ((b, a), g) in enumerate(zip(crops, grown)) if b or a]
    ctx.bind(op.results[0], emit_slice(ctx, op, x, specs, None, len(dims) + 1, main=True))


# -- indexing and reordering ------------------------------------------------------------
@lowers("Where")
def _where(ctx: LoweringContext, op: Op) -> None:
    """Coordinates of the true (non-zero) elements, one row each: ONNX NonZero gives them one
    column each, in the same row-major order, so a Transpose turns them around."""
    x = ctx.operand(op, 0)
    if not ort_computes("NonZero", ctx.dtype(op.operands[0]), ctx.opset):
        x = cast_to(ctx, op, x, DType.BOOL, "nonzero_test")  # exact: what is not zero (NaN too) is true
    coords = ctx.helper1(op, "nonzero", "NonZero", [x])
    ctx.bind(op.results[0], ctx.emit1(op, "Transpose", [coords], perm=[1, 0]))


@lowers("Roll")
def _roll(ctx: LoweringContext, op: Op) -> None:
    """Per rolled axis, its tail then its head (Slice, Slice, Concat); shifts of one axis add up."""
    axes = [int(a) for a in ctx.const_operand(op, 2, "the axis").reshape(-1)]
    dims = ctx.shape(op.operands[0]).dims
    if ctx.constant(op.operands[1]) is None and dims is not None:
        _roll_at_run_time(ctx, op, axes, len(dims))
        return
    shifts = [int(s) for s in ctx.const_operand(op, 1, "the shift").reshape(-1)]
    if dims is None or len(shifts) != len(axes):
        raise UnsupportedOpError(op.type, op.name, "needs a known input rank and one shift per axis")
    total: dict[int, int] = {}
    for shift, axis in zip(shifts, axes):
        total[axis % len(dims)] = total.get(axis % len(dims), 0) + shift
    if any(dims[a] is None for a in total):
        raise UnsupportedOpError(op.type, op.name, "a rolled axis has an unknown size")
    rolled = {a: s % dims[a] for a, s in total.items() if dims[a] and s % dims[a]}  # type: ignore[operator]
    found = ctx.lowered(op.operands[0])
    x = found.tensor
    for n, (axis, shift) in enumerate(sorted(rolled.items())):
        at = ctx.ints([layout.physical_axis(axis, found.perm, len(dims))], f"{op.name}/axis{axis}")
        cut = ctx.ints([dims[axis] - shift], f"{op.name}/cut{axis}")  # type: ignore[operator]
        stored = layout.physical_axis(axis, found.perm, len(dims))
        x = _tail_then_head(ctx, op, x, cut, at, stored, axis, last=n == len(rolled) - 1)
    ctx.bind(op.results[0], x if rolled else found.tensor, found.perm)


def _tail_then_head(ctx: LoweringContext, op: Op, x: str, cut: str, at: str, stored: int, axis: int,
                    last: bool) -> str:
    """`x` rolled on one axis: its items from `cut` on, then those before (the last axis rolled
    makes the op's own node)."""
    tail = ctx.helper1(op, f"tail{axis}", "Slice", [x, cut, ctx.ints([INT64_MAX], "to_end"), at])
    head = ctx.helper1(op, f"head{axis}", "Slice", [x, ctx.ints([0], "zero_1d"), cut, at])
    if last:
        return ctx.emit1(op, "Concat", [tail, head], axis=stored)
    return ctx.helper1(op, f"rolled{axis}", "Concat", [tail, head], axis=stored)


def _roll_at_run_time(ctx: LoweringContext, op: Op, axes: list[int], rank: int) -> None:
    """A shift known only at run time (a Roll in a loop, by its counter): per axis, the cut point
    size - shift mod size computed in the graph.  Each axis must appear once."""
    wrapped = [a % rank if rank else a for a in axes]
    if not rank or len(set(wrapped)) != len(wrapped) or any(not 0 <= a < rank for a in wrapped):
        raise UnsupportedOpError(op.type, op.name, "a shift known only at run time needs a known input rank "
                                                   "and each axis once")
    found = ctx.lowered(op.operands[0])
    shifts = ctx.helper1(op, "shifts", "Cast", [ctx.helper1(op, "shift_vector", "Reshape", [
        ctx.operand(op, 1), ctx.ints([-1], f"{op.name}/flat")])], to=TensorProto.INT64)
    x = found.tensor
    for n, axis in enumerate(wrapped):
        stored = layout.physical_axis(axis, found.perm, rank)
        at = ctx.ints([stored], f"{op.name}/axis{axis}")
        size = ctx.helper1(op, f"size{axis}", "Max", [shape_slice(ctx, op, x, stored, stored + 1, f"dim{axis}"),
                                                      ctx.ints([1], f"{op.name}/one")])  # an empty axis: no roll
        shift = ctx.helper1(op, f"shift{axis}", "Gather", [shifts, ctx.ints([n], f"{op.name}/entry{n}")], axis=0)
        cut = ctx.helper1(op, f"cut{axis}", "Sub", [size, ctx.helper1(op, f"mod{axis}", "Mod", [shift, size])])
        x = _tail_then_head(ctx, op, x, cut, at, stored, axis, last=n == len(wrapped) - 1)
    ctx.bind(op.results[0], x, found.perm)


@lowers("ReverseSequence")
def _reverse_sequence(ctx: LoweringContext, op: Op) -> None:
    """ONNX ReverseSequence names batch and time axes among 0 and 1 only: other axes are
    transposed there and back."""
    rank = ctx.rank(op.operands[0])
    if rank is None or rank < 2:
        raise UnsupportedOpError(op.type, op.name, "needs an input of known rank >= 2")
    seq, batch = int(op.attr("seq_dim")) % rank, int(op.attr("batch_dim", 0)) % rank
    lengths = int64_operand(ctx, op, 1)
    x = ctx.operand(op, 0)
    if {seq, batch} == {0, 1}:
        out = ctx.emit1(op, "ReverseSequence", [x, lengths], batch_axis=batch, time_axis=seq)
        ctx.bind(op.results[0], out)
        return
    order = [batch, seq] + [a for a in range(rank) if a not in (batch, seq)]
    moved = ctx.helper1(op, "batch_time_first", "Transpose", [x], perm=order)
    reversed_ = ctx.helper1(op, "reversed", "ReverseSequence", [moved, lengths], batch_axis=0, time_axis=1)
    back = [order.index(a) for a in range(rank)]
    ctx.bind(op.results[0], ctx.emit1(op, "Transpose", [reversed_], perm=back))


@lowers("Unique", "UniqueWithCounts")
def _unique(ctx: LoweringContext, op: Op) -> None:
    """ONNX Unique unsorted keeps first-appearance order, as TF does; types onnxruntime's kernel
    does not take are compared as int64 (bools and narrower integers widened, uint64 as its bits:
    either way equal values stay equal and distinct ones distinct)."""
    dtype = ctx.dtype(op.operands[0])
    x = ctx.operand(op, 0)
    through = carrier_of(ctx, op, "Unique", dtype, wraps=True)  # wraps: equal bits are equal values
    widened = through != dtype
    if widened:
        x = ctx.helper1(op, "wide", "Cast", [x], to=onnx_type(through))
    values, _, inverse, counts = ctx.helper(op, "unique", "Unique", [x], 4, sorted=0)
    index_type = op.attr("out_idx", DType.INT32)
    results = [(values, dtype), (inverse, index_type), (counts, index_type)][:len(op.results)]
    for n, (value, (tensor, to)) in enumerate(zip(op.results, results)):
        if n == 0 and widened or n > 0 and to != DType.INT64:
            cast = ctx.node("Cast", [tensor], ctx.prefix + value.name, to=onnx_type(to))[0]
            ctx.bind(value, cast if to == DType.UINT64 else ctx.narrowed(cast, tensor))  # uint64 held as its bits
        else:
            ctx.bind(value, tensor)


@lowers("ListDiff")
def _list_diff(ctx: LoweringContext, op: Op) -> None:
    """tf.setdiff1d: x[i] is kept when it equals no element of y, which an Equal of x as a column
    against y as a row, summed along the row (0 for an empty y), tells; NonZero lists the kept
    positions in order."""
    x, y = ctx.operand(op, 0), ctx.operand(op, 1)
    column = ctx.helper1(op, "column", "Unsqueeze", [x, ctx.ints([1], f"{op.name}/axis1")])
    row = ctx.helper1(op, "row", "Unsqueeze", [y, ctx.ints([0], f"{op.name}/axis0")])
    equal = ctx.helper1(op, "equal", "Cast", [ctx.helper1(op, "match", "Equal", [column, row])],
                        to=onnx_type(DType.INT32))
    found = opset.reduce(ctx, op, "ReduceSum", equal, [1], False, suffix="found")  # 0 for an empty y
    kept = ctx.helper1(op, "kept", "Equal", [found, ctx.initializer(np.zeros((), np.int32), f"{op.name}/zero")])
    positions = ctx.helper1(op, "positions", "Squeeze", [ctx.helper1(op, "nonzero", "NonZero", [kept]),
                                                          ctx.ints([0], f"{op.name}/axis0")])
    ctx.bind(op.results[0], ctx.emit1(op, "Gather", [x, positions], axis=0))
    index_type = op.attr("out_idx", DType.INT32)
    ctx.bind(op.results[1], ctx.narrowed(ctx.node("Cast", [positions], ctx.prefix + op.results[1].name,
                                                  to=onnx_type(index_type))[0], positions))


@lowers("InvertPermutation")
def _invert_permutation(ctx: LoweringContext, op: Op) -> None:
    """The inverse of a permutation is its argsort: the indices of an ascending TopK over all of
    it (no ties in a permutation), cast back to its type."""
    x = ctx.operand(op, 0)
    count = ctx.shape(op.operands[0]).num_elements
    k = ctx.ints([count], f"{op.name}/k") if count is not None else \
        ctx.helper1(op, "k", "Shape", [x])
    _, order = ctx.helper(op, "argsort", "TopK", [x, k], 2, axis=0, largest=0, sorted=1)
    dtype = ctx.dtype(op.results[0])
    out = ctx.emit1(op, "Identity" if dtype == DType.INT64 else "Cast", [order],
                    **({} if dtype == DType.INT64 else {"to": onnx_type(dtype)}))
    ctx.bind(op.results[0], out)


@lowers("EnsureShape")
def _ensure_shape(ctx: LoweringContext, op: Op) -> None:
    """A run-time shape assertion: the exported model assumes it holds (no node)."""
    found = kept_layout(ctx, op, ctx.lowered(op.operands[0]))
    ctx.bind(op.results[0], found.tensor, found.perm)
