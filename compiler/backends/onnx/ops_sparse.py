"""SparseReshape and SparseFillEmptyRows on (indices, values, dense_shape) triples.

- SparseReshape linearizes each index row with the input's row-major strides
  (one MatMul) and splits the linear position by the output's strides: Div,
  then Mod with C's remainder (fmod=1) by each output dim, the first by
  INT64_MAX, which is TF's sequence of / and % exactly, even for the indices it
  does not check.  Constant shapes make the strides and the -1 constants.
- SparseFillEmptyRows marks the rows holding an entry by one ScatterElements
  over 0..rows-1, appends one (row, 0, ...) entry with the default for each
  other row, and orders everything by row with an ascending TopK, whose ties
  keep input order: TF's stable order (tf2onnx leaves the rows unsorted and
  cannot give reverse_index_map, which here is the TopK of that order).
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from compiler.backends.onnx import opset
from compiler.backends.onnx.context import LoweringContext
from compiler.backends.onnx.errors import OnnxExportError, UnsupportedOpError
from compiler.backends.onnx.ops_array import INT64_MAX, int64_operand, shape_slice
from compiler.backends.onnx.registry import lowers
from compiler.ir.graph import Op
from compiler.ir.shapes import MAX_RANK
from compiler.runtime.kernels import KernelError, get_kernel


def _length(ctx: LoweringContext, op: Op, index: int, what: str) -> int:
    """The static length of 1-D operand `index` (a shape vector): a rank, so at most TF's 254 dims
    (the strides' [rank, rank] mask is built from it)."""
    dims = ctx.shape(op.operands[index]).dims
    if dims is None or len(dims) != 1 or dims[0] is None:
        raise UnsupportedOpError(op.type, op.name, f"the length of {what} must be known")
    if dims[0] > MAX_RANK:
        raise OnnxExportError(f"node '{op.name}' ({op.type}): {what} has {dims[0]} dims, over TF's {MAX_RANK}")
    return int(dims[0])


def _strides(ctx: LoweringContext, op: Op, dims: str, rank: int, name: str, column: bool = False) -> str:
    """Row-major strides of the int64 vector `dims` of static length `rank`: the product of the
    entries after each one, as a ReduceProd of the vector with the others masked to 1 (a
    [rank, 1] column if `column`)."""
    after = ctx.initializer(np.tri(rank, rank, dtype=bool), f"{op.name}/{name}_before")
    terms = ctx.helper1(op, f"{name}_terms", "Where", [after, ctx.ints([1], f"{op.name}/one"), dims])
    return opset.reduce(ctx, op, "ReduceProd", terms, [1], column, suffix=name)


def _constant_strides(dims: np.ndarray) -> np.ndarray:
    strides = np.ones(len(dims), np.int64)
    for d in range(len(dims) - 2, -1, -1):
        strides[d] = strides[d + 1] * dims[d + 1]
    return strides


def _output_shape(ctx: LoweringContext, op: Op, rank_out: int) -> tuple[str, Optional[np.ndarray]]:
    """The output shape (an ONNX tensor) and its value when known now, -1 filled in as
    dense size / product of the other target dims (TF's rule; TF refuses a bad target)."""
    shape, target = ctx.constant(op.operands[1]), ctx.constant(op.operands[2])
    if shape is not None and target is not None:
        indices = np.zeros((0, len(shape.reshape(-1))), np.int64)
        try:
            _, dims = get_kernel("SparseReshape")({}, [indices, shape.astype(np.int64), target.astype(np.int64)])
        except KernelError as exc:
            raise OnnxExportError(f"node '{op.name}' (SparseReshape): {exc}") from exc
        return ctx.ints(dims, f"{op.name}/shape"), dims
    if target is not None and -1 not in target.reshape(-1).tolist():
        dims = target.astype(np.int64).reshape(-1)
        return ctx.ints(dims, f"{op.name}/shape"), dims
    dense = opset.reduce(ctx, op, "ReduceProd", int64_operand(ctx, op, 1), [0], True, suffix="dense_size")
    if target is not None:  # one -1: the others are known
        known = target.astype(np.int64).reshape(-1)
        at = int(np.flatnonzero(known == -1)[0])
        product = int(np.prod(known[known != -1]))
        if product <= 0:
            raise OnnxExportError(f"node '{op.name}' (SparseReshape): reshape cannot infer the missing input size "
                                  f"for an empty tensor unless all specified input sizes are non-zero")
        missing = ctx.helper1(op, "missing", "Div", [dense, ctx.ints([product], f"{op.name}/product")])
        if rank_out == 1:
            return missing, None
        parts = [ctx.ints(known[:at], f"{op.name}/before"), missing, ctx.ints(known[at + 1:], f"{op.name}/after")]
        return ctx.helper1(op, "shape", "Concat", [p for p, n in zip(parts, (at, 1, rank_out - at - 1)) if n], axis=0), None
    new = int64_operand(ctx, op, 2)
    product = opset.reduce(ctx, op, "ReduceProd", new, [0], True, suffix="product")  # negative with a -1
    divisor = ctx.helper1(op, "divisor", "Min", [product, ctx.ints([-1], f"{op.name}/minus_one")])
    minus_missing = ctx.helper1(op, "minus_missing", "Div", [dense, divisor])
    unknown = ctx.helper1(op, "unknown", "Less", [new, ctx.ints([0], f"{op.name}/zero")])
    missing = ctx.helper1(op, "missing", "Neg", [minus_missing])
    return ctx.helper1(op, "shape", "Where", [unknown, missing, new]), None


@lowers("SparseReshape")
def _sparse_reshape(ctx: LoweringContext, op: Op) -> None:
    rank_in, rank_out = _length(ctx, op, 1, "input_shape"), _length(ctx, op, 2, "new_shape")
    out_shape, out_dims = _output_shape(ctx, op, rank_out)
    ctx.bind(op.results[1], out_shape)
    in_dims = ctx.constant(op.operands[1])
    indices = int64_operand(ctx, op, 0, flat=False)
    if in_dims is not None and out_dims is not None and in_dims.reshape(-1).tolist() == out_dims.tolist():
        ctx.bind(op.results[0], indices)  # TF returns the indices as they are
        return
    if in_dims is not None:
        in_strides = ctx.initializer(_constant_strides(in_dims.astype(np.int64).reshape(-1)).reshape(-1, 1),
                                     f"{op.name}/in_strides")
    else:
        in_strides = _strides(ctx, op, int64_operand(ctx, op, 1), rank_in, "in_strides", column=True)
    column = ctx.helper1(op, "linear", "MatMul", [indices, in_strides])  # [entries, 1]
    # Dims of 0 count as 1 in the divisors: the dense size is then 0, where TF refuses any entry and
    # an entry-free run must not divide by zero (onnxruntime checks integer divisors even then).
    if out_dims is not None:
        bounded = np.maximum(out_dims, 1)
        out_strides = ctx.ints(_constant_strides(bounded), f"{op.name}/out_strides")
        modulus = ctx.ints([INT64_MAX] + bounded[1:].tolist(), f"{op.name}/modulus")
    else:
        first = ctx.ints([INT64_MAX] + [1] * (rank_out - 1), f"{op.name}/first_unbounded")
        modulus = ctx.helper1(op, "modulus", "Max", [out_shape, first])
        out_strides = _strides(ctx, op, modulus, rank_out, "out_strides")  # a stride never reads dim 0
    steps = ctx.helper1(op, "steps", "Div", [column, out_strides])
    ctx.bind(op.results[0], ctx.emit1(op, "Mod", [steps, modulus], fmod=1))


def _fill_entries(ctx: LoweringContext, op: Op, empty_rows: str) -> str:
    """[E, rank] indices (row, 0, ..., 0) of the empty rows."""
    rank = None
    for index, axis in ((0, 1), (2, 0)):
        dims = ctx.shape(op.operands[index]).dims
        if dims is not None and len(dims) > axis and dims[axis] is not None:
            rank = int(dims[axis])
    column = ctx.unsqueeze(empty_rows, [1], 2, f"{op.name}/fill_column")
    if rank == 1:
        return column
    if rank is not None:
        pads = ctx.ints([0, 0, 0, rank - 1], f"{op.name}/fill_pads")
    else:
        rank_t = shape_slice(ctx, op, ctx.operand(op, 0), 1, 2, "rank")
        more = ctx.helper1(op, "more_columns", "Sub", [rank_t, ctx.ints([1], f"{op.name}/one")])
        pads = ctx.helper1(op, "fill_pads", "Concat", [ctx.ints([0, 0, 0], f"{op.name}/no_pads"), more], axis=0)
    return ctx.helper1(op, "fill_indices", "Pad", [column, pads])


@lowers("SparseFillEmptyRows")
def _sparse_fill_empty_rows(ctx: LoweringContext, op: Op) -> None:
    indices = int64_operand(ctx, op, 0, flat=False)
    rows = ctx.helper1(op, "rows", "Gather", [indices, ctx.initializer(np.asarray(0, np.int64), f"{op.name}/zero")],
                       axis=1)
    dense_shape = ctx.constant(op.operands[2])
    if dense_shape is not None:
        count = ctx.initializer(np.asarray(int(dense_shape.reshape(-1)[0]), np.int64), f"{op.name}/dense_rows")
    else:
        count = ctx.helper1(op, "dense_rows", "Gather",
                            [int64_operand(ctx, op, 2), ctx.initializer(np.asarray(0, np.int64), f"{op.name}/first")])
    every_row = ctx.helper1(op, "every_row", "Range", [ctx.initializer(np.asarray(0, np.int64), f"{op.name}/start"),
                                                       count, ctx.initializer(np.asarray(1, np.int64), f"{op.name}/step")])
    # Rows holding an entry are moved past the row count; the others stay below it.
    moved = ctx.helper1(op, "moved", "Add", [rows, count])
    marked = ctx.helper1(op, "marked", "ScatterElements", [every_row, rows, moved])
    empty = ctx.helper1(op, "empty", "Less", [marked, count])
    ctx.bind(op.results[2], empty)
    empty_rows = ctx.helper1(op, "empty_rows", "Compress", [every_row, empty], axis=0)
    defaults = ctx.helper1(op, "defaults", "Expand", [ctx.operand(op, 3), ctx.helper1(op, "fills", "Shape", [empty_rows])])
    keys = ctx.helper1(op, "keys", "Concat", [rows, empty_rows], axis=0)
    every = ctx.helper1(op, "entries", "Concat", [indices, _fill_entries(ctx, op, empty_rows)], axis=0)
    values = ctx.helper1(op, "values", "Concat", [ctx.operand(op, 1), defaults], axis=0)
    total = ctx.helper1(op, "total", "Shape", [keys])
    _, order = ctx.helper(op, "by_row", "TopK", [keys, total], 2, axis=0, largest=0, sorted=1)
    ctx.bind(op.results[0], ctx.node("Gather", [every, order], ctx.prefix + op.results[0].name, axis=0)[0])
    ctx.bind(op.results[1], ctx.node("Gather", [values, order], ctx.prefix + op.results[1].name, axis=0)[0])
    if ctx.is_read(op.results[3]):
        _, places = ctx.helper(op, "places", "TopK", [order, total], 2, axis=0, largest=0, sorted=1)
        given = ctx.helper1(op, "given", "Shape", [rows])
        start = ctx.ints([0], f"{op.name}/from")
        ctx.bind(op.results[3], ctx.node("Slice", [places, start, given], ctx.prefix + op.results[3].name)[0])
