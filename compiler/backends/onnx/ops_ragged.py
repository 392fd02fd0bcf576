"""Ragged tensors (tf.ragged) in ONNX: RaggedRange, RaggedGather, RaggedTensorToSparse, RaggedTensorToTensor.

Everything rests on one construction, `_grid`: for row lengths L, the mask
`column < L[row]` over [rows, max L] and its NonZero, which lists every
(row, column) of a ragged level in row-major order -- exactly the order of
the flat values.  Row lengths come from row splits (a difference of two
slices) or from sorted value row ids (a ScatterElements count).  Lengths are
run-time tensors throughout, so nothing depends on constant partitions.

The variant pair (RaggedTensorToVariant / RaggedTensorFromVariant) has no
ONNX tensor form and no lowering here: `ragged_maps.py` rewrites the loop
`tf.map_fn` builds over ragged rows into dense loop state before lowering,
and the export error says how to avoid any other use.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import onnx
from onnx import numpy_helper

from compiler.backends.onnx import opset
from compiler.backends.onnx.context import LoweringContext
from compiler.backends.onnx.dtypes import onnx_type
from compiler.backends.onnx.errors import UnsupportedOpError
from compiler.backends.onnx.ops_array import INT64_MAX, int64_operand, shape_slice
from compiler.backends.onnx.registry import lowers
from compiler.ir.dtypes import DType
from compiler.ir.graph import Op

_I64 = onnx_type(DType.INT64)


# ---------------------------------------------------------------- shared pieces
def _lengths(ctx: LoweringContext, op: Op, splits: str, tag: str) -> str:
    """Row lengths of int64 row splits: splits[1:] - splits[:-1]."""
    tail = ctx.helper1(op, f"{tag}_tail", "Slice", [splits, ctx.ints([1], f"{op.name}/one"),
                                                    ctx.ints([INT64_MAX], f"{op.name}/end")])
    head = ctx.helper1(op, f"{tag}_head", "Slice", [splits, ctx.ints([0], f"{op.name}/zero"),
                                                    ctx.ints([-1], f"{op.name}/minus_one")])
    return ctx.helper1(op, f"{tag}_lengths", "Sub", [tail, head])


def _grid(ctx: LoweringContext, op: Op, lengths: str, tag: str) -> tuple[str, str]:
    """(NonZero of column < lengths[row] as [2, values]: rows then columns in row-major order, the
    widest row as a 1-element tensor -- the lowest int64 when there are no rows)."""
    width = ctx.helper1(op, f"{tag}_width", "ReduceMax", [lengths], keepdims=1)
    columns = ctx.helper1(op, f"{tag}_columns", "Range", [ctx.scalar(0, DType.INT64, f"{op.name}/zero_s"),
                                                          ctx.helper1(op, f"{tag}_width_s", "Squeeze", [width]),
                                                          ctx.scalar(1, DType.INT64, f"{op.name}/one_s")])
    column_of = ctx.unsqueeze(lengths, [1], 2, f"{op.name}/{tag}_lengths_col")
    inside = ctx.helper1(op, f"{tag}_inside", "Less", [columns, column_of])
    return ctx.helper1(op, f"{tag}_positions", "NonZero", [inside]), width


def _row_of(ctx: LoweringContext, op: Op, positions: str, which: int, tag: str) -> str:
    """Row (0) or column (1) of every position, as a vector."""
    return ctx.helper1(op, tag, "Gather", [positions, ctx.scalar(which, DType.INT64, f"{op.name}/axis{which}")],
                       axis=0)


def _dim(ctx: LoweringContext, op: Op, width: str, tag: str) -> str:
    """A width as an output dimension: 0, not the lowest int64, when a level has no rows."""
    return ctx.helper1(op, f"{tag}_dim", "Max", [width, ctx.ints([0], f"{op.name}/zero")])


def _cast_splits(ctx: LoweringContext, op: Op, splits: str, dtype: Optional[DType], tag: str) -> str:
    if dtype == DType.INT64:
        return splits
    return ctx.helper1(op, tag, "Cast", [splits], to=onnx_type(dtype))


def _splits_from_lengths(ctx: LoweringContext, op: Op, lengths: str, tag: str) -> str:
    ends = ctx.helper1(op, f"{tag}_ends", "CumSum", [lengths, ctx.scalar(0, DType.INT64, f"{op.name}/zero_s")])
    return ctx.helper1(op, tag, "Concat", [ctx.ints([0], f"{op.name}/zero"), ends], axis=0)


# ---------------------------------------------------------------- RaggedRange
@lowers("RaggedRange")
def _ragged_range(ctx: LoweringContext, op: Op) -> None:
    """Row sizes as TF counts them (floats: ceil((limit - start) / delta); integers: the same with
    a truncating division), then start + column * delta at every grid position."""
    dtype = ctx.dtype(op.results[1])
    ranks = [ctx.rank(v) for v in op.operands]
    if None in ranks or dtype not in (DType.FLOAT, DType.DOUBLE, DType.INT32, DType.INT64):
        raise UnsupportedOpError(op.type, op.name, "needs operands of known rank and float/double/int32/int64 type")
    start, limit, delta = (ctx.operand(op, i) for i in range(3))
    span = ctx.helper1(op, "span", "Sub", [limit, start])
    if dtype in (DType.FLOAT, DType.DOUBLE):
        steps = ctx.helper1(op, "steps_ceil", "Ceil", [ctx.helper1(op, "steps", "Div", [span, delta])])
    else:  # ceil(span / delta) for a truncating division: (span + delta - sign(delta)) / delta
        padded = ctx.helper1(op, "padded", "Sub", [ctx.helper1(op, "span_delta", "Add", [span, delta]),
                                                   ctx.helper1(op, "sign", "Sign", [delta])])
        steps = ctx.helper1(op, "steps", "Div", [padded, delta])
    sizes = ctx.helper1(op, "sizes", "Max", [ctx.helper1(op, "sizes_i64", "Cast", [steps], to=_I64),
                                             ctx.scalar(0, DType.INT64, f"{op.name}/zero_s")])
    if max(ranks) == 0:
        sizes = ctx.unsqueeze(sizes, [0], 1, f"{op.name}/sizes_row")
    positions, _ = _grid(ctx, op, sizes, "grid")
    columns = ctx.helper1(op, "column_t", "Cast", [_row_of(ctx, op, positions, 1, "column")], to=onnx_type(dtype))
    rows = _row_of(ctx, op, positions, 0, "row") if ranks[0] or ranks[2] else None
    if ranks[0]:
        start = ctx.helper1(op, "row_start", "Gather", [start, rows])
    if ranks[2]:
        delta = ctx.helper1(op, "row_delta", "Gather", [delta, rows])
    offsets = ctx.helper1(op, "offset", "Mul", [columns, delta])
    splits = _splits_from_lengths(ctx, op, sizes, "splits_i64")
    ctx.bind(op.results[0], _cast_splits(ctx, op, splits, ctx.dtype(op.results[0]), "splits"))
    ctx.bind(op.results[1], ctx.helper1(op, "values", "Add", [start, offsets]))


# ---------------------------------------------------------------- RaggedGather
@lowers("RaggedGather")
def _ragged_gather(ctx: LoweringContext, op: Op) -> None:
    """Walk the params' levels: the selected rows' lengths give each output splits, and the
    selected rows' child ranges (a grid over those lengths) select the next level's rows."""
    count = len(op.operands) - 2
    index_dims = ctx.shape(op.operands[-1]).dims
    if index_dims is None or (len(index_dims) > 1 and None in index_dims[1:]):
        raise UnsupportedOpError(op.type, op.name, "needs indices of known rank whose dims after the first are known")
    splits_type = ctx.dtype(op.operands[0])
    outputs: list[str] = []
    for dim in range(len(index_dims) - 1):  # the indices' own dims: uniform splits, known statically
        rows = int(np.prod(index_dims[:dim + 1])) if None not in index_dims[:dim + 1] else None
        if rows is None:
            raise UnsupportedOpError(op.type, op.name, "needs the leading dims of rank > 1 indices known")
        outputs.append(ctx.initializer((np.arange(rows + 1) * index_dims[dim + 1]).astype(splits_type.to_numpy()),
                                       f"{op.name}/uniform_splits{dim}"))
    indices = int64_operand(ctx, op, count + 1, flat=False)
    if len(index_dims) != 1:
        indices = ctx.helper1(op, "flat_indices", "Reshape", [indices, ctx.ints([-1], f"{op.name}/flat")])
    rows, starts, limits, lengths = indices, "", "", ""
    for level in range(count):
        splits = int64_operand(ctx, op, level)
        if level > 0:  # rows: the concatenated child ranges [starts, limits) of the rows above
            positions, _ = _grid(ctx, op, lengths, f"level{level}")
            parent = ctx.helper1(op, f"level{level}_start", "Gather", [starts, _row_of(ctx, op, positions, 0,
                                                                                     f"level{level}_item")])
            rows = ctx.helper1(op, f"level{level}_rows", "Add", [parent, _row_of(ctx, op, positions, 1,
                                                                                f"level{level}_col")])
        after = ctx.helper1(op, f"level{level}_next", "Add", [rows, ctx.ints([1], f"{op.name}/one")])
        starts = ctx.helper1(op, f"level{level}_starts", "Gather", [splits, rows])
        limits = ctx.helper1(op, f"level{level}_limits", "Gather", [splits, after])
        lengths = ctx.helper1(op, f"level{level}_lengths", "Sub", [limits, starts])
        if level + len(index_dims) - 1 >= 0:
            out = _splits_from_lengths(ctx, op, lengths, f"splits{level}_i64")
            outputs.append(_cast_splits(ctx, op, out, splits_type, f"splits{level}"))
    positions, _ = _grid(ctx, op, lengths, "values")
    parent = ctx.helper1(op, "values_start", "Gather", [starts, _row_of(ctx, op, positions, 0, "values_item")])
    taken = ctx.helper1(op, "values_rows", "Add", [parent, _row_of(ctx, op, positions, 1, "values_col")])
    values = ctx.helper1(op, "values", "Gather", [ctx.operand(op, count), taken], axis=0)
    if len(outputs) != len(op.results) - 1:
        raise UnsupportedOpError(op.type, op.name, f"OUTPUT_RAGGED_RANK {len(op.results) - 1} does not match "
                                                   f"indices of rank {len(index_dims)} over {count} splits")
    for value, tensor in zip(op.results, outputs + [values]):
        ctx.bind(value, tensor)


# ---------------------------------------------------------------- coordinates of ragged values
def _row_lengths(ctx: LoweringContext, op: Op, kind: str, index: int, parents: str, level: int) -> str:
    """One level's row lengths from its ROW_SPLITS or (sorted) VALUE_ROWIDS partition."""
    partition = int64_operand(ctx, op, index)
    if kind == "ROW_SPLITS":
        return _lengths(ctx, op, partition, f"level{level}")
    if ctx.opset < 16:
        raise UnsupportedOpError(op.type, op.name, f"VALUE_ROWIDS needs ScatterElements' add (opset 16; "
                                                   f"exporting at {ctx.opset})")
    zeros = ctx.helper1(op, f"level{level}_zeros", "ConstantOfShape", [parents], value=_filled(np.int64(0)))
    ones = ctx.helper1(op, f"level{level}_ones", "ConstantOfShape", [ctx.helper1(op, f"level{level}_ids", "Shape",
                                                                                [partition])],
                       value=_filled(np.int64(1)))
    return ctx.helper1(op, f"level{level}_lengths", "ScatterElements", [zeros, partition, ones], axis=0,
                       reduction="add")


def _filled(value: np.generic) -> onnx.TensorProto:
    """ConstantOfShape's one-element `value` attribute."""
    return numpy_helper.from_array(np.asarray(value).reshape(1))


def _coordinates(ctx: LoweringContext, op: Op, kinds: list[str], first: int,
                 first_rows: Optional[str]) -> tuple[str, list[str], str]:
    """Every value's index in the ragged dims as [K + 1, values] (row-major), the natural dims
    [rows], [widths...] as 1-element tensors, and how many values the partitions address (a
    1-element tensor).  `first` is the operand of the first partition; `first_rows` the row count
    when it is not implied by row splits."""
    coords: Optional[str] = None
    dims: list[str] = []
    parents = first_rows
    for level, kind in enumerate(kinds):
        lengths = _row_lengths(ctx, op, kind, first + level, parents if parents is not None else "", level)
        if level == 0:
            dims.append(first_rows if first_rows is not None else ctx.helper1(op, "rows", "Shape", [lengths]))
        positions, width = _grid(ctx, op, lengths, f"level{level}")
        dims.append(_dim(ctx, op, width, f"level{level}"))
        if coords is None:
            coords = positions
        else:
            items = _row_of(ctx, op, positions, 0, f"level{level}_item")
            column = ctx.helper1(op, f"level{level}_col", "Slice", [positions, ctx.ints([1], f"{op.name}/one"),
                                                                    ctx.ints([2], f"{op.name}/two")])
            prefix = ctx.helper1(op, f"level{level}_prefix", "Gather", [coords, items], axis=1)
            coords = ctx.helper1(op, f"level{level}_coords", "Concat", [prefix, column], axis=0)
        parents = shape_slice(ctx, op, positions, 1, 2, f"level{level}_count")
    assert coords is not None and parents is not None
    return coords, dims, parents


# ---------------------------------------------------------------- RaggedTensorToSparse
@lowers("RaggedTensorToSparse")
def _ragged_to_sparse(ctx: LoweringContext, op: Op) -> None:
    """Coordinates of the ragged dims, then (values of rank > 1) every inner index of each value."""
    count = len(op.operands) - 1
    values_rank = ctx.rank(op.operands[-1])
    if values_rank is None:
        raise UnsupportedOpError(op.type, op.name, "needs values of known rank")
    coords, dims, _ = _coordinates(ctx, op, ["ROW_SPLITS"] * count, 0, None)
    values = ctx.operand(op, count)
    if values_rank > 1:
        every = ctx.helper1(op, "every", "NonZero", [ctx.helper1(op, "all", "ConstantOfShape", [
            ctx.helper1(op, "values_shape", "Shape", [values])], value=_filled(np.bool_(True)))])
        prefix = ctx.helper1(op, "value_prefix", "Gather", [coords, _row_of(ctx, op, every, 0, "value_index")],
                             axis=1)
        inner = ctx.helper1(op, "inner_index", "Slice", [every, ctx.ints([1], f"{op.name}/one"),
                                                         ctx.ints([INT64_MAX], f"{op.name}/end")])
        coords = ctx.helper1(op, "all_coords", "Concat", [prefix, inner], axis=0)
        dims.append(shape_slice(ctx, op, values, 1, None, "inner_dims"))
        values = ctx.helper1(op, "flat_values", "Reshape", [values, ctx.ints([-1], f"{op.name}/flat")])
    ctx.bind(op.results[0], ctx.emit1(op, "Transpose", [coords], perm=[1, 0]))
    ctx.bind(op.results[1], values)
    ctx.bind(op.results[2], ctx.helper1(op, "dense_shape", "Concat", dims, axis=0))


# ---------------------------------------------------------------- RaggedTensorToTensor
def _partition_kinds(op: Op) -> tuple[list[str], bool]:
    types = [t.decode() if isinstance(t, bytes) else str(t) for t in op.attrs.get("row_partition_types", ())]
    if len(types) != len(op.operands) - 3:
        raise UnsupportedOpError(op.type, op.name, "row_partition_types does not match the partition operands")
    first_size = bool(types) and types[0] == "FIRST_DIM_SIZE"
    kinds = types[1:] if first_size else types
    if not kinds or any(k not in ("ROW_SPLITS", "VALUE_ROWIDS") for k in kinds) or (
            not first_size and kinds[0] != "ROW_SPLITS"):
        raise UnsupportedOpError(op.type, op.name, f"row_partition_types {types} (TF's kernel refuses them too)")
    return kinds, first_size


@lowers("RaggedTensorToTensor")
def _ragged_to_tensor(ctx: LoweringContext, op: Op) -> None:
    """ScatterND of the values at their ragged coordinates into the default broadcast to the output
    shape: the natural one (widest rows), or the requested one, whose smaller dims drop what falls
    outside (a Compress of the coordinates and values).  Values past the last addressed one are
    dropped (the Compress's shorter condition, or a Slice), as TF's kernel never reads them."""
    kinds, first_size = _partition_kinds(op)
    ragged = len(kinds)
    values_rank = ctx.rank(op.operands[1])
    if values_rank is None:
        raise UnsupportedOpError(op.type, op.name, "needs values of known rank")
    first_rows = None
    if first_size:
        first_rows = ctx.helper1(op, "first_dim", "Reshape", [int64_operand(ctx, op, 3),
                                                              ctx.ints([1], f"{op.name}/one")])
    coords, dims, addressed = _coordinates(ctx, op, kinds, 4 if first_size else 3, first_rows)
    coords = ctx.helper1(op, "coords", "Transpose", [coords], perm=[1, 0])
    values = ctx.operand(op, 1)
    natural = ctx.helper1(op, "natural_shape", "Concat", dims, axis=0)
    requested = _requested(ctx, op, ragged)
    if requested is not None:
        shape = ctx.helper1(op, "ragged_shape", "Where", [
            ctx.helper1(op, "unknown", "Less", [requested, ctx.ints([0], f"{op.name}/zero")]), natural, requested])
        margin = ctx.helper1(op, "margin", "Sub", [shape, coords])
        room = opset.reduce(ctx, op, "ReduceMin", margin, [1], False, "room")
        kept = ctx.helper1(op, "kept", "Greater", [room, ctx.scalar(0, DType.INT64, f"{op.name}/zero_s")])
        coords = ctx.helper1(op, "kept_coords", "Compress", [coords, kept], axis=0)
        values = ctx.helper1(op, "kept_values", "Compress", [values, kept], axis=0)
    else:  # TF ignores values past the ones the partitions address; ScatterND takes one per coordinate
        shape = natural
        values = ctx.helper1(op, "addressed_values", "Slice", [values, ctx.ints([0], f"{op.name}/zero"), addressed])
    if values_rank > 1:
        shape = ctx.helper1(op, "shape", "Concat", [shape, shape_slice(ctx, op, ctx.operand(op, 1), 1, None,
                                                                       "inner_dims")], axis=0)
    filled = ctx.helper1(op, "filled", "Expand", [ctx.operand(op, 2), shape])
    ctx.bind(op.results[0], ctx.emit1(op, "ScatterND", [filled, coords, values]))


def _requested(ctx: LoweringContext, op: Op, ragged: int) -> Optional[str]:
    """The requested sizes of the ragged dims (-1: natural) as int64 [ragged + 1], or None when
    they are all natural (a scalar -1 shape, or -1 in every ragged dim)."""
    known = ctx.constant(op.operands[0])
    if known is not None:
        if known.ndim == 0:
            return None
        head = known.reshape(-1)[:ragged + 1].astype(np.int64)
        return None if np.all(head < 0) else ctx.ints(head.tolist(), f"{op.name}/requested")
    rank = ctx.rank(op.operands[0])
    if rank is None or rank == 0:
        raise UnsupportedOpError(op.type, op.name, "a run-time shape operand needs a known rank of 1")
    shape = int64_operand(ctx, op, 0)
    return ctx.helper1(op, "requested", "Slice", [shape, ctx.ints([0], f"{op.name}/zero"),
                                                  ctx.ints([ragged + 1], f"{op.name}/ragged_dims")])
