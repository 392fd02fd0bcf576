"""DenseToDenseSetOperation (tf.sets on two dense tensors) as ONNX Unique over (group, value) rows.

Values become int64 codes that keep their order: a Cast for integers, the
inverse of one sorted Unique over both operands for strings (whose sorted
values turn the codes back at the end; tf2onnx casts strings to int64 and so
cannot take them).  a-b / b-a / intersection keep an element when an Equal of
it against the other operand's group finds no match / a match, and NonZero of
that mask gives the kept elements' coordinates, so only one Unique (axis 0,
sorted) dedupes and sorts the [group index..., code] rows, as TF's std::set
does per group.  Each row's position in its group is its row number minus
its group's first row (a second Unique, over the group indices, which also
counts the widest group for dense_shape).
"""
from __future__ import annotations

import numpy as np
from onnx import numpy_helper

from compiler.backends.onnx import opset
from compiler.backends.onnx.context import LoweringContext
from compiler.backends.onnx.dtypes import onnx_type
from compiler.backends.onnx.errors import UnsupportedOpError
from compiler.backends.onnx.ops_array import shape_slice
from compiler.backends.onnx.registry import lowers
from compiler.ir.dtypes import DType
from compiler.ir.graph import Op

_INTEGERS = (DType.INT8, DType.INT16, DType.INT32, DType.INT64, DType.UINT8, DType.UINT16)
_OPERATIONS = ("a-b", "b-a", "intersection", "union")


def _string_codes(ctx: LoweringContext, op: Op, rank: int, split: bool) -> tuple[list[str], str]:
    """int64 codes in byte order of both string operands, side by side or (`split`) each, and
    the sorted strings they index."""
    a, b = ctx.operand(op, 0), ctx.operand(op, 1)
    both = ctx.helper1(op, "both", "Concat", [a, b], axis=rank - 1)
    flat = ctx.helper1(op, "flat", "Reshape", [both, ctx.ints([-1], f"{op.name}/flat_shape")])
    words, _, codes, _ = ctx.helper(op, "words", "Unique", [flat], 4, sorted=1)
    coded = ctx.helper1(op, "coded", "Reshape", [codes, ctx.helper1(op, "both_shape", "Shape", [both])])
    if not split:
        return [coded], words
    widths = [ctx.shape(op.operands[i]).dims[-1] for i in (0, 1)]
    if None in widths:
        sizes = ctx.helper1(op, "widths", "Concat", [shape_slice(ctx, op, a, rank - 1, rank, "width_a"),
                                                     shape_slice(ctx, op, b, rank - 1, rank, "width_b")], axis=0)
    else:
        sizes = ctx.ints(widths, f"{op.name}/widths")
    return ctx.helper(op, "split", "Split", [coded, sizes], 2, axis=rank - 1), words


def _int_codes(ctx: LoweringContext, op: Op, dtype: DType) -> tuple[str, str]:
    a, b = ctx.operand(op, 0), ctx.operand(op, 1)
    if dtype == DType.INT64:
        return a, b
    wide = onnx_type(DType.INT64)
    return ctx.helper1(op, "a_i64", "Cast", [a], to=wide), ctx.helper1(op, "b_i64", "Cast", [b], to=wide)


def _kept_rows(ctx: LoweringContext, op: Op, kept: str, codes: str, rank: int) -> str:
    """[count, rank] int64 rows (group index..., code) of the elements `kept` marks."""
    where = ctx.helper1(op, "where", "Transpose", [ctx.helper1(op, "kept_at", "NonZero", [kept])], perm=[1, 0])
    values = ctx.helper1(op, "kept_codes", "GatherND", [codes, where])
    groups = ctx.helper1(op, "kept_groups", "Slice", [where, ctx.ints([0], f"{op.name}/zero"),
                                                      ctx.ints([rank - 1], f"{op.name}/group_rank"),
                                                      ctx.ints([1], f"{op.name}/one")])
    return ctx.helper1(op, "rows", "Concat", [groups, ctx.unsqueeze(values, [1], 2, f"{op.name}/code_column")],
                       axis=1)


def _membership(ctx: LoweringContext, op: Op, x: str, y: str, rank: int, found: bool) -> str:
    """Whether each element of x occurs (`found`) or not in its group of y."""
    column = ctx.unsqueeze(x, [rank], rank + 1, f"{op.name}/x_column")
    row = ctx.unsqueeze(y, [rank - 1], rank + 1, f"{op.name}/y_row")
    equal = ctx.helper1(op, "match", "Cast", [ctx.helper1(op, "equal", "Equal", [column, row])],
                        to=onnx_type(DType.INT32))
    hits = opset.reduce(ctx, op, "ReduceMax", equal, [rank], False, suffix="hits")  # lowest int for an empty y
    threshold = ctx.initializer(np.asarray(0 if found else 1, np.int32), f"{op.name}/threshold")
    return ctx.helper1(op, "kept", "Greater" if found else "Less", [hits, threshold])


@lowers("DenseToDenseSetOperation")
def _dense_to_dense_set_operation(ctx: LoweringContext, op: Op) -> None:
    operation = op.attr("set_operation", b"")
    operation = operation.decode() if isinstance(operation, bytes) else str(operation)
    if operation not in _OPERATIONS:
        raise UnsupportedOpError(op.type, op.name, f"set_operation '{operation}' is not one of {_OPERATIONS}")
    dtype = ctx.dtype(op.operands[0])
    ranks = {ctx.rank(op.operands[0]), ctx.rank(op.operands[1])}
    rank = ranks.pop() if len(ranks) == 1 else None
    if rank is None or rank < 2:
        raise UnsupportedOpError(op.type, op.name, "both operands need the same known rank, at least 2")
    words = None
    if dtype == DType.STRING:
        codes, words = _string_codes(ctx, op, rank, split=operation != "union")
    elif dtype in _INTEGERS:
        codes = list(_int_codes(ctx, op, dtype))
        if operation == "union":
            codes = [ctx.helper1(op, "union", "Concat", codes, axis=rank - 1)]
    else:
        raise UnsupportedOpError(op.type, op.name, f"sets of {dtype}")
    if operation == "union":
        source = codes[0]
        true = numpy_helper.from_array(np.ones(1, bool))
        kept = ctx.helper1(op, "all", "ConstantOfShape", [ctx.helper1(op, "union_shape", "Shape", [source])],
                           value=true)
    else:
        source, other = codes[::-1] if operation == "b-a" else codes
        kept = _membership(ctx, op, source, other, rank, operation == "intersection")
    rows = ctx.helper1(op, "set_rows", "Unique", [_kept_rows(ctx, op, kept, source, rank)], axis=0, sorted=1)
    groups = ctx.helper1(op, "groups", "Slice", [rows, ctx.ints([0], f"{op.name}/start"),
                                                 ctx.ints([rank - 1], f"{op.name}/stop"), ctx.ints([1], f"{op.name}/axis")])
    codes = ctx.helper1(op, "codes", "Gather", [rows, ctx.initializer(np.asarray(rank - 1, np.int64),
                                                                      f"{op.name}/code_at")], axis=1)
    _, first, group_of, sizes = ctx.helper(op, "group_rows", "Unique", [groups], 4, axis=0, sorted=1)
    count = ctx.helper1(op, "count", "Shape", [codes])
    ones = ctx.helper1(op, "ones", "ConstantOfShape", [count], value=numpy_helper.from_array(np.ones(1, np.int64)))
    row_number = ctx.helper1(op, "row_number", "CumSum", [ones, ctx.initializer(np.asarray(0, np.int64),
                                                                                  f"{op.name}/axis0")], exclusive=1)
    place = ctx.helper1(op, "place", "Sub", [row_number, ctx.helper1(op, "group_start", "Gather", [first, group_of])])
    ctx.bind(op.results[0], ctx.node("Concat", [groups, ctx.unsqueeze(place, [1], 2, f"{op.name}/place_column")],
                                     ctx.prefix + op.results[0].name, axis=1)[0])
    if words is not None:
        values = ctx.node("Gather", [words, codes], ctx.prefix + op.results[1].name, axis=0)[0]
    elif dtype != DType.INT64:
        values = ctx.node("Cast", [codes], ctx.prefix + op.results[1].name, to=onnx_type(dtype))[0]
    else:
        values = codes
    ctx.bind(op.results[1], values)
    widest = opset.reduce(ctx, op, "ReduceMax", sizes, [0], True, suffix="widest")  # lowest int when empty
    widest = ctx.helper1(op, "widest_or_zero", "Max", [widest, ctx.ints([0], f"{op.name}/none")])
    group_dims = ctx.shape(op.operands[0]).dims[:-1]
    if None in group_dims:
        group_shape = shape_slice(ctx, op, ctx.operand(op, 0), 0, rank - 1, "group_shape")
    else:
        group_shape = ctx.ints(group_dims, f"{op.name}/group_shape")
    ctx.bind(op.results[2], ctx.node("Concat", [group_shape, widest], ctx.prefix + op.results[2].name, axis=0)[0])
