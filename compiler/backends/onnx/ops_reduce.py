"""Reductions: Mean/Sum/Max/Min/Prod, ArgMax/ArgMin, TopKV2 and Cumsum over remapped axes.

Reducing the spatial axes of an NCHW tensor (global average pooling) is a
ReduceMean over stored axes 2 and 3, and with keep_dims=false the result is
already in TF order: no Transpose survives a CNN's classifier head.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from compiler.backends.onnx import layout, opset
from compiler.backends.onnx.builder import GraphBuilder, ValueSpec
from compiler.backends.onnx.context import Lowered, LoweringContext
from compiler.backends.onnx.dtypes import onnx_type
from compiler.backends.onnx.errors import UnsupportedOpError
from compiler.backends.onnx.ops_array import int64_operand, kept_layout
from compiler.backends.onnx.ops_elementwise import carrier_of, cast_to, in_carrier, type_name
from compiler.backends.onnx.ops_quantized import is_dequantized
from compiler.backends.onnx.registry import AGNOSTIC, LAYOUT_ROLES, lowers
from compiler.ir.dtypes import DType
from compiler.ir.graph import Op
from compiler.ir.shapes import Shape

REDUCTIONS = {"Mean": "ReduceMean", "Sum": "ReduceSum", "Max": "ReduceMax", "Min": "ReduceMin",
              "Prod": "ReduceProd"}


@dataclass(frozen=True)
class Reduction:
    """A Mean/Sum/All/... op's input as stored, its TF axes and their stored positions."""

    found: Lowered
    rank: int
    axes: list[int]
    stored: list[int]
    keep: bool


def reduction_of(ctx: LoweringContext, op: Op) -> Optional[Reduction]:
    """The reduction operand 1 (constant) asks for, or None once a reduction over no axes has been
    bound to its input."""
    rank = ctx.rank(op.operands[0])
    if rank is None:
        raise UnsupportedOpError(op.type, op.name, "the input rank is unknown")
    axes = sorted({int(a) % rank for a in ctx.const_operand(op, 1, "the reduction axes").reshape(-1)}) if rank else []
    keep = bool(op.attr("keep_dims", False))
    found = _in_readers_layout(ctx, op) if keep else ctx.lowered(op.operands[0])
    if not axes or (keep and _all_size_one(ctx.shape(op.operands[0]), axes)):
        ctx.bind(op.results[0], found.tensor, found.perm)  # every reduction of one element is that element
        return None
    stored = sorted(layout.physical_axis(a, found.perm, rank) for a in axes)
    return Reduction(found, rank, axes, stored, keep)


def _all_size_one(shape: Shape, axes: list[int]) -> bool:
    """Whether every reduced axis is statically of size 1: a kept-dims reduction over them is its
    input (a Keras global pool after a network that shrank the image to 1x1; grappler drops it too)."""
    dims = shape.dims
    return dims is not None and all(dims[a] == 1 for a in axes)


def _in_readers_layout(ctx: LoweringContext, op: Op) -> Lowered:
    """A kept-dims reduction's input, read in the layout the result is wanted in when a
    layout-agnostic reader of the input converts it to that layout anyway: the result then
    needs no conversion (Keras AutoContrast's per-channel min and max of an image fed to a conv)."""
    value = op.operands[0]
    found = ctx.lowered(value)
    wanted = ctx.wanted(op.results[0])
    if found.perm is None and wanted is not None and any(
            user is not op and LAYOUT_ROLES.get(user.type) == AGNOSTIC and user.results
            and ctx.wanted(user.results[0]) == wanted and ctx.rank(user.results[0]) == len(wanted)
            for user, _ in value.uses):
        return ctx.agnostic_operand(op)
    return found


def bind_reduced(ctx: LoweringContext, op: Op, out: str, r: Reduction) -> None:
    """Bind the result: reduced axes kept in place, or gone from the layout."""
    ctx.bind(op.results[0], out, r.found.perm if r.keep else layout.after_removing(r.found.perm, r.axes, r.rank))


@lowers(*REDUCTIONS)
def _reduce(ctx: LoweringContext, op: Op) -> None:
    r = reduction_of(ctx, op)
    if r is None:
        return
    x = r.found.tensor
    if op.type in _GLOBAL_POOLS and r.rank == 4 and r.stored == [2, 3] and _global_pool_type(ctx, op, x):
        out = _global_pool(ctx, op, r)
    else:
        dtype = ctx.dtype(op.results[0])
        through = carrier_of(ctx, op, REDUCTIONS[op.type], dtype, wraps=op.type in ("Sum", "Prod"))
        axes, restored = _through_trailing_units(ctx, op, r)
        if through == dtype and restored:
            reduced = opset.reduce(ctx, op, REDUCTIONS[op.type], x, axes, r.keep, suffix="reduced")
            out = ctx.emit1(op, "Unsqueeze", [reduced, ctx.ints(restored, f"{op.name}/units")])
        elif through == dtype:
            out = opset.reduce(ctx, op, REDUCTIONS[op.type], x, axes, r.keep)
        else:
            wide = cast_to(ctx, op, x, through, type_name(through))
            reduced = opset.reduce(ctx, op, REDUCTIONS[op.type], wide, r.stored, r.keep, suffix="reduced")
            out = ctx.emit1(op, "Cast", [reduced], to=onnx_type(dtype))
    bind_reduced(ctx, op, out, r)


def _through_trailing_units(ctx: LoweringContext, op: Op, r: Reduction) -> tuple[list[int], list[int]]:
    """The stored axes to reduce, and where to put size-1 axes back after it.  When only size-1
    axes are stored after the last reduced one, they are reduced too: that changes no value, and
    onnxruntime reduces a block running to the last axis in one pass but walks any other element
    by element (ReduceMean over axis 2 of [2, 753, 187, 1]: 476 us; over 2 and 3: 19).  With kept
    dims the shape is the same; without, an Unsqueeze puts them back, worth its node on a large
    input only (layout.DETOUR_ELEMENTS)."""
    dims = ctx.shape(op.operands[0]).dims
    if dims is None:
        return r.stored, []
    stored_dims = layout.physical_dims(dims, r.found.perm)
    tail = list(range(r.stored[-1] + 1, r.rank))
    if not tail or any(stored_dims[a] != 1 for a in tail):
        return r.stored, []
    if r.keep:
        return r.stored + tail, []
    if layout.known_elements(stored_dims) < layout.DETOUR_ELEMENTS:
        return r.stored, []
    return r.stored + tail, [a - len(r.stored) for a in tail]


def _carried(ctx: LoweringContext, op: Op, onnx_op: str, tensor: str) -> str:
    """Operand 0 (`tensor`) in the type `onnx_op` computes in for it: itself, or cast to a wider type
    holding every value (order and ties kept: ArgMax, TopK)."""
    dtype = ctx.dtype(op.operands[0])
    return in_carrier(ctx, op, tensor, dtype, carrier_of(ctx, op, onnx_op, dtype))


_GLOBAL_POOLS = {"Mean": ("GlobalAveragePool", "global_average"), "Max": ("GlobalMaxPool", "global_max")}
_GLOBAL_POOL_TYPES = (DType.HALF, DType.FLOAT, DType.DOUBLE)


def _global_pool_type(ctx: LoweringContext, op: Op, x: str) -> bool:
    """Whether the spatial Mean/Max becomes a global pool: float data, or a dequantized input
    to a Mean (onnxruntime runs that as QLinearGlobalAveragePool, where ReduceMean stays float)."""
    return ctx.dtype(op.results[0]) in _GLOBAL_POOL_TYPES or (op.type == "Mean" and is_dequantized(ctx, x))


def _global_pool(ctx: LoweringContext, op: Op, r: Reduction) -> str:
    """GlobalAveragePool/GlobalMaxPool (+ Squeeze) over a channels-first tensor's two spatial axes:
    onnxruntime keeps them in its blocked NCHWc layout, which a ReduceMean/ReduceMax leaves
    (MobileNetV2's head: about 1% of its latency).  The pooled [N, C, 1, 1] tensor's shape is
    declared, so Keras' reshape of the squeezed result back to it is no node (ctx.reshape)."""
    kind, suffix = _GLOBAL_POOLS[op.type]
    if r.keep:
        return ctx.emit1(op, kind, [r.found.tensor])
    pooled = ctx.helper1(op, suffix, kind, [r.found.tensor])
    dims = ctx.shape(op.operands[0]).dims
    if dims is not None:
        n, c = layout.physical_dims(dims, r.found.perm)[:2]
        ctx.builder.annotate(ValueSpec(pooled, onnx_type(ctx.dtype(op.results[0])), (n, c, 1, 1)))
    return ctx.emit1(op, "Squeeze", [pooled, ctx.ints([2, 3], "spatial_axes")])


@lowers("ArgMax", "ArgMin")
def _arg_reduce(ctx: LoweringContext, op: Op) -> None:
    x, rank = op.operands[0], ctx.rank(op.operands[0])
    if rank is None:
        raise UnsupportedOpError(op.type, op.name, "the input rank is unknown")
    axis = int(ctx.const_operand(op, 1, "the axis").reshape(-1)[0]) % rank
    found = ctx.lowered(x)
    out_type = op.attr("output_type", DType.INT64)
    stored = layout.physical_axis(axis, found.perm, rank)
    data = _carried(ctx, op, op.type, found.tensor)
    if out_type == DType.INT64:
        out = ctx.emit1(op, op.type, [data], axis=stored, keepdims=0)
    else:
        index = ctx.helper1(op, "index", op.type, [data], axis=stored, keepdims=0)
        out = ctx.narrowed(ctx.emit1(op, "Cast", [index], to=onnx_type(out_type)), index)
    ctx.bind(op.results[0], out, layout.after_removing(found.perm, [axis], rank))


@lowers("TopKV2")
def _top_k(ctx: LoweringContext, op: Op) -> None:
    """ONNX TopK over TF's last axis, wherever it is stored; both put equal values in index order.
    TF leaves the order unspecified when sorted=false, so always sorting is one exact answer."""
    _check_k(ctx, op)
    found = kept_layout(ctx, op, ctx.lowered(op.operands[0]))
    k = int64_operand(ctx, op, 1)
    if not ctx.is_constant(op.operands[1]):
        k = ctx.helper1(op, "k", "Reshape", [k, ctx.ints([1], f"{op.name}/k_shape")])
    rank = ctx.rank(op.operands[0])
    axis = -1 if found.perm is None or rank is None else layout.physical_axis(-1, found.perm, rank)
    dtype = ctx.dtype(op.results[0])
    data = _carried(ctx, op, "TopK", found.tensor)
    if data == found.tensor:
        values, indices = ctx.emit(op, "TopK", [data, k], 2, axis=axis, largest=1, sorted=1)
    else:
        wide, indices = ctx.helper(op, "top", "TopK", [data, k], 2, axis=axis, largest=1, sorted=1)
        values = ctx.emit1(op, "Cast", [wide], to=onnx_type(dtype))
    index_type = ctx.dtype(op.results[1]) or DType.INT32
    if index_type != DType.INT64:
        indices = ctx.narrowed(ctx.helper1(op, "indices", "Cast", [indices], to=onnx_type(index_type)), indices)
    ctx.bind(op.results[0], values, found.perm)
    ctx.bind(op.results[1], indices, found.perm)


def _check_k(ctx: LoweringContext, op: Op) -> None:
    """A constant k that TF refuses at run time (negative, or past a known last axis) is refused
    here: ONNX would give TopK's results that length, and onnx's shape inference aborts the
    process on a negative one."""
    found = ctx.constant(op.operands[1])
    if found is None or np.size(found) != 1:
        return
    k = int(np.asarray(found).reshape(()))
    dims = ctx.shape(op.operands[0]).dims
    last = dims[-1] if dims else None
    if k < 0 or (last is not None and k > last):
        raise UnsupportedOpError(op.type, op.name, f"k {k} for a last axis of {last if last is not None else '?'} "
                                                   f"(TF refuses k < 0 or past the axis)")


@lowers("NthElement")
def _nth_element(ctx: LoweringContext, op: Op) -> None:
    """The last of the n + 1 smallest (reverse: largest) along TF's last axis: TopK, then that column."""
    n = int(ctx.const_operand(op, 1, "n").reshape(()))
    rank = ctx.rank(op.operands[0])
    if rank is None or n < 0:
        raise UnsupportedOpError(op.type, op.name, "needs the input rank and a non-negative n")
    found = kept_layout(ctx, op, ctx.lowered(op.operands[0]))
    axis = layout.physical_axis(-1, found.perm, rank)
    largest = int(bool(op.attr("reverse", False)))
    data = _carried(ctx, op, "TopK", found.tensor)
    values, _ = ctx.helper(op, "top", "TopK", [data, ctx.ints([n + 1], f"{op.name}/k")], 2, axis=axis,
                           largest=largest, sorted=1)
    n_th = [values, ctx.scalar(n, DType.INT64, f"{op.name}/n")]
    if data == found.tensor:
        out = ctx.emit1(op, "Gather", n_th, axis=axis)
    else:
        out = ctx.emit1(op, "Cast", [ctx.helper1(op, "nth", "Gather", n_th, axis=axis)],
                        to=onnx_type(ctx.dtype(op.results[0])))
    ctx.bind(op.results[0], out, layout.after_removing(found.perm, [rank - 1], rank))


_CUMSUM_TYPES_14 = (DType.HALF, DType.BFLOAT16)


@lowers("Cumsum", layout=AGNOSTIC)
def _cumsum(ctx: LoweringContext, op: Op) -> None:
    """ONNX CumSum has TF's exclusive and reverse flags; a constant axis is remapped to the
    stored layout, else the input is read in TF order, where ONNX takes TF's axis operand as is.
    Integers onnxruntime has no kernel for add up in a type that wraps alike (int32 for 8 and 16
    bits, int64 for unsigned 32 and 64)."""
    dtype = ctx.dtype(op.results[0])
    if dtype in _CUMSUM_TYPES_14 and ctx.opset < 14:
        raise UnsupportedOpError(op.type, op.name, f"ONNX CumSum (opset {ctx.opset}) does not take {type_name(dtype)}")
    through = carrier_of(ctx, op, "CumSum", dtype, wraps=True)
    flags = {"exclusive": int(bool(op.attr("exclusive", False))), "reverse": int(bool(op.attr("reverse", False)))}
    axis, rank = ctx.constant(op.operands[1]), ctx.rank(op.operands[0])
    if axis is None or rank is None:
        found, axis_input = Lowered(ctx.operand(op, 0)), ctx.operand(op, 1)
    else:
        found = kept_layout(ctx, op, ctx.agnostic_operand(op))
        stored = layout.physical_axis(int(axis.reshape(-1)[0]), found.perm, rank)
        axis_input = ctx.scalar(stored, DType.INT64, f"{op.name}/axis")
    if through == dtype:
        out = ctx.emit1(op, "CumSum", [found.tensor, axis_input], **flags)
    else:
        wide = cast_to(ctx, op, found.tensor, through, type_name(through))
        summed = ctx.helper1(op, "summed", "CumSum", [wide, axis_input], **flags)
        out = ctx.emit1(op, "Cast", [summed], to=onnx_type(dtype))
    ctx.bind(op.results[0], out, found.perm)


@lowers("All", "Any")
def _all_any(ctx: LoweringContext, op: Op) -> None:
    """ONNX has no boolean reductions: count the true (Any) or false (All) elements in int64,
    which is also right for empty inputs (Any false, All true)."""
    r = reduction_of(ctx, op)
    if r is None:
        return
    counted = r.found.tensor if op.type == "Any" else ctx.helper1(op, "false", "Not", [r.found.tensor])
    ones = ctx.helper1(op, "as_int", "Cast", [counted], to=onnx_type(DType.INT64))
    total = opset.reduce(ctx, op, "ReduceSum", ones, r.stored, r.keep, suffix="count")
    zero = ctx.scalar(0, DType.INT64, "zero")
    bind_reduced(ctx, op, ctx.emit1(op, "Greater" if op.type == "Any" else "Equal", [total, zero]), r)


@lowers("Cumprod")
def _cumprod(ctx: LoweringContext, op: Op) -> None:
    """ONNX has no CumProd, and exp(cumsum(log x)) is inexact (and wrong for x <= 0): an ONNX Scan
    multiplies slice by slice in TF's order instead, emitting the running product after the
    multiply (inclusive) or before it (exclusive), walking backward when reversed."""
    rank = ctx.rank(op.operands[0])
    if rank is None or rank == 0:
        raise UnsupportedOpError(op.type, op.name, "needs an input of known rank >= 1")
    axis = int(ctx.const_operand(op, 1, "the axis").reshape(-1)[0]) % rank
    dtype = ctx.dtype(op.results[0])
    tensor = ctx.operand(op, 0)
    if 0 in (ctx.shape(op.operands[0]).dims or ()):
        ctx.bind(op.results[0], tensor)  # nothing to multiply; onnxruntime's Scan divides by zero on it
        return
    work = carrier_of(ctx, op, "Mul", dtype, wraps=True)  # 8- and 16-bit integers before opset 14: in int32
    tensor = in_carrier(ctx, op, tensor, dtype, work)
    others = ctx.ints([a for a in range(rank) if a != axis], f"{op.name}/other_axes")
    slice_shape = ctx.helper1(op, "slice_shape", "Gather", [ctx.helper1(op, "shape", "Shape", [tensor]), others])
    ones = ctx.helper1(op, "ones", "Expand", [ctx.scalar(1, work, "one"), slice_shape])
    dims = ctx.shape(op.operands[0]).dims or (None,) * rank
    body = _product_step(ctx, op, bool(op.attr("exclusive", False)), dims[:axis] + dims[axis + 1:], work)
    backward = int(bool(op.attr("reverse", False)))
    _, out = ctx.helper(op, "scan", "Scan", [ones, tensor], 2, body=body, num_scan_inputs=1, scan_input_axes=[axis],
                      scan_output_axes=[axis], scan_input_directions=[backward], scan_output_directions=[backward])
    ctx.bind(op.results[0], out if work == dtype else ctx.emit1(op, "Cast", [out], to=onnx_type(dtype)))


def _product_step(ctx: LoweringContext, op: Op, exclusive: bool, dims: tuple, dtype: DType) -> GraphBuilder:
    """Scan body (product so far, next slice of `dims`) -> (new product, the slice's output)."""
    return cumulative_step(ctx, op, dtype, exclusive, dims, lambda node, so_far, piece: node("Mul", so_far, piece))


StepNode = Callable[..., str]


def cumulative_step(ctx: LoweringContext, op: Op, dtype: DType, exclusive: bool, dims: tuple,
                    combine: Callable[[StepNode, str, str], str]) -> GraphBuilder:
    """The Scan body of a cumulative op: (value so far, next slice of `dims`) -> (new value, the
    slice's output, which is the value before it when `exclusive`).  `combine(node, so_far, piece)`
    builds the new value with `node(op_type, *inputs) -> output name`.  The inputs declare their
    shapes, which the checker wants below IR version 8."""
    body = GraphBuilder(ctx.scope)
    names, elem = ctx.scope.tensors, onnx_type(dtype)
    base = f"{ctx.prefix}{op.name}/step/"
    so_far, piece = (ValueSpec(names.fresh(base + n), elem, tuple(dims)) for n in ("so_far", "slice"))
    body.add_input(so_far)
    body.add_input(piece)

    def node(op_type: str, *inputs: str) -> str:
        out = names.fresh(base + op_type.lower())
        body.add_node(op_type, list(inputs), [out], ctx.scope.nodes.fresh(base + op_type.lower()))
        return out

    value = combine(node, so_far.name, piece.name)
    body.expose(value, ValueSpec(names.fresh(base + "carried"), elem))
    body.expose(so_far.name if exclusive else value, ValueSpec(names.fresh(base + "out"), elem))
    return body
