"""Matrix ops and softmax cross-entropy losses.

Bands and diagonals are data movement fixed at export time: with the matrix
size and the diagonal range known, the runtime's `diagonal_map` says where
every diagonal element goes, so each op is one Gather over the flattened
last two axes plus a Where with a constant mask (padding where no element
lands).  Everything computes in TF order.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from compiler.backends.onnx import opset
from compiler.backends.onnx.bands import (TRILU_OPSET, TRILU_TYPES, Band, band_part_diagonals, emit_band,
                                          run_time_diagonal)
from compiler.backends.onnx.context import LoweringContext
from compiler.backends.onnx.dtypes import onnx_type
from compiler.backends.onnx.errors import UnsupportedOpError
from compiler.backends.onnx.ops_array import int64_operand
from compiler.backends.onnx.ops_elementwise import emit_where
from compiler.backends.onnx.registry import lowers
from compiler.ir.dtypes import DType
from compiler.ir.graph import Op
from compiler.limits import check_tensor_size
from compiler.runtime.kernels.linalg import DiagonalMap, band_mask, diag_size, diagonal_map
from compiler.runtime.kernels.registry import KernelError


def _matrix_dims(ctx: LoweringContext, op: Op, index: int) -> tuple[int, int]:
    dims = ctx.shape(op.operands[index]).dims
    if dims is None or len(dims) < 2 or dims[-2] is None or dims[-1] is None:
        raise UnsupportedOpError(op.type, op.name, "the matrix dims must be static")
    rows, cols = int(dims[-2]), int(dims[-1])  # type: ignore[arg-type]
    check_tensor_size([rows, cols], 8, "the index tables of a diagonal")  # built here, one entry per element
    return rows, cols


def _const_ints(ctx: LoweringContext, op: Op, index: int, what: str) -> list[int]:
    return [int(v) for v in ctx.const_operand(op, index, what).reshape(-1)]


def _diagonal_map(op: Op, rows: int, cols: int, k: list[int], align: str) -> DiagonalMap:
    if len(k) not in (1, 2):
        raise UnsupportedOpError(op.type, op.name, f"k must be a scalar or a pair, got {k}")
    try:
        return diagonal_map(rows, cols, k[0], k[-1], align)
    except KernelError as err:
        raise UnsupportedOpError(op.type, op.name, str(err)) from None


def _mapped(ctx: LoweringContext, op: Op, version: int, k_index: int) -> tuple[int, int, list[int], DiagonalMap]:
    """(rows, cols, k, map) for an op reading a matrix as operand 0 and k as operand `k_index`."""
    rows, cols = _matrix_dims(ctx, op, 0)
    k = [0] if version == 1 else _const_ints(ctx, op, k_index, "k")
    return rows, cols, k, _diagonal_map(op, rows, cols, k, _align(op, version))


def _packed(ctx: LoweringContext, op: Op, index: int, k: list[int], m: DiagonalMap) -> str:
    """Operand `index` (packed diagonals) as Gather reads it: one diagonal as is, several flattened."""
    if k[0] == k[-1]:
        return ctx.operand(op, index)
    return _flatten_last(ctx, op, index, m.num_diags * m.max_len)


def _align(op: Op, version: int) -> str:
    if version == 1:
        return "LEFT_LEFT"
    align = op.attr("align", "RIGHT_LEFT") if version == 3 else "LEFT_LEFT"
    return align.decode() if isinstance(align, bytes) else str(align)


def _flatten_last(ctx: LoweringContext, op: Op, index: int, count: int) -> str:
    """Operand `index` with its last two axes merged (of `count` elements): a constant Reshape
    target whose zeros copy the batch dims, so shape inference keeps the rank."""
    rank = ctx.rank(op.operands[index])
    if rank is None:
        raise UnsupportedOpError(op.type, op.name, f"the rank of operand {index} is unknown")
    target = ctx.ints([0] * (rank - 2) + [count], f"{op.name}/flat_shape{index}")
    return ctx.helper1(op, f"flat{index}", "Reshape", [ctx.operand(op, index), target])


def _gathered(ctx: LoweringContext, op: Op, flat: str, positions: np.ndarray, mask: np.ndarray,
              otherwise: str) -> None:
    """Bind the result: `flat` gathered at `positions` where `mask`, `otherwise` elsewhere."""
    picked = ctx.helper1(op, "picked", "Gather", [flat, ctx.initializer(positions, f"{op.name}/positions")], axis=-1)
    inputs = [ctx.initializer(mask, f"{op.name}/mask"), picked, otherwise]
    ctx.bind(op.results[0], emit_where(ctx, op, inputs, ctx.dtype(op.results[0])))


def _padding(ctx: LoweringContext, op: Op, index: Optional[int]) -> str:
    if index is None:
        return ctx.scalar(0, ctx.dtype(op.results[0]), "zero")
    return ctx.initializer(ctx.const_operand(op, index, "the padding value").reshape(()), f"{op.name}/padding")


@lowers("MatrixBandPart")
def _band_part(ctx: LoweringContext, op: Op) -> None:
    """Trilu from opset 14 (bands.py), its bounds constant or read at run time; else Where
    with the band as a constant mask."""
    if ctx.opset >= TRILU_OPSET and ctx.dtype(op.results[0]) in TRILU_TYPES:
        ctx.bind(op.results[0], emit_band(ctx, op, ctx.operand(op, 0), _band_diagonals(ctx, op)))
        return
    lower = _const_ints(ctx, op, 1, "num_lower")[0]
    upper = _const_ints(ctx, op, 2, "num_upper")[0]
    rows, cols = _matrix_dims(ctx, op, 0)
    mask = ctx.initializer(band_mask(rows, cols, lower, upper), f"{op.name}/band")
    dtype = ctx.dtype(op.results[0])
    if dtype == DType.BOOL:  # a causal attention mask: outside the band is False
        ctx.bind(op.results[0], ctx.emit1(op, "And", [mask, ctx.operand(op, 0)]))
        return
    ctx.bind(op.results[0], emit_where(ctx, op, [mask, ctx.operand(op, 0), _padding(ctx, op, None)], dtype))


def _band_diagonals(ctx: LoweringContext, op: Op) -> Band:
    """band_part's (lowest, highest) diagonals: numbers for constant bounds, tensors otherwise."""
    lower, upper = (None if ctx.constant(op.operands[i]) is None else _const_ints(ctx, op, i, what)[0]
                    for i, what in ((1, "num_lower"), (2, "num_upper")))
    lowest, highest = band_part_diagonals(lower or 0, upper or 0)
    if lower is None:
        lowest = run_time_diagonal(ctx, op, int64_operand(ctx, op, 1), below=True)
    if upper is None:
        highest = run_time_diagonal(ctx, op, int64_operand(ctx, op, 2), below=False)
    return lowest, highest


_DIAG_PARTS = {"MatrixDiagPart": 1, "MatrixDiagPartV2": 2, "MatrixDiagPartV3": 3}


@lowers(*_DIAG_PARTS)
def _diag_part(ctx: LoweringContext, op: Op) -> None:
    version = _DIAG_PARTS[op.type]
    rows, cols, k, m = _mapped(ctx, op, version, 1)
    positions = np.zeros((m.num_diags, m.max_len), np.int64)
    mask = np.zeros(positions.shape, bool)
    positions[m.packed_rows, m.packed_cols] = m.rows * cols + m.cols
    mask[m.packed_rows, m.packed_cols] = True
    if k[0] == k[-1]:
        positions, mask = positions[0], mask[0]
    flat = _flatten_last(ctx, op, 0, rows * cols)
    _gathered(ctx, op, flat, positions, mask, _padding(ctx, op, None if version == 1 else 2))


def _into_matrix(m: DiagonalMap, rows: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
    """(position in the flattened packed diagonals, on a diagonal?) for each matrix element."""
    positions = np.zeros((rows, cols), np.int64)
    mask = np.zeros((rows, cols), bool)
    positions[m.rows, m.cols] = m.packed_rows * m.max_len + m.packed_cols
    mask[m.rows, m.cols] = True
    return positions, mask


_DIAGS = {"MatrixDiag": 1, "MatrixDiagV2": 2, "MatrixDiagV3": 3}


@lowers(*_DIAGS)
def _diag(ctx: LoweringContext, op: Op) -> None:
    version = _DIAGS[op.type]
    dims = ctx.shape(op.operands[0]).dims
    if dims is None or not dims or dims[-1] is None:
        raise UnsupportedOpError(op.type, op.name, "the diagonal length must be static")
    length = int(dims[-1])  # type: ignore[arg-type]
    k = [0] if version == 1 else _const_ints(ctx, op, 1, "k")
    wanted = (-1, -1) if version == 1 else (_const_ints(ctx, op, 2, "num_rows")[0], _const_ints(ctx, op, 3, "num_cols")[0])
    try:
        rows, cols = diag_size(length, k[0], k[-1], *wanted)
    except KernelError as err:
        raise UnsupportedOpError(op.type, op.name, str(err)) from None
    check_tensor_size([rows, cols], 8, "the index tables of a diagonal")
    m = _diagonal_map(op, rows, cols, k, _align(op, version))
    positions, mask = _into_matrix(m, rows, cols)
    _gathered(ctx, op, _packed(ctx, op, 0, k, m), positions, mask, _padding(ctx, op, None if version == 1 else 4))


_SET_DIAGS = {"MatrixSetDiag": 1, "MatrixSetDiagV2": 2, "MatrixSetDiagV3": 3}


@lowers(*_SET_DIAGS)
def _set_diag(ctx: LoweringContext, op: Op) -> None:
    rows, cols, k, m = _mapped(ctx, op, _SET_DIAGS[op.type], 2)
    positions, mask = _into_matrix(m, rows, cols)
    _gathered(ctx, op, _packed(ctx, op, 1, k, m), positions, mask, ctx.operand(op, 0))


@lowers("MatrixDeterminant")
def _determinant(ctx: LoweringContext, op: Op) -> None:
    """ONNX Det (onnxruntime: float32 only); other types are refused."""
    dtype = ctx.dtype(op.results[0])
    if dtype != DType.FLOAT:
        raise UnsupportedOpError(op.type, op.name, f"determinant of {dtype} (onnxruntime's Det takes float32)")
    ctx.bind(op.results[0], ctx.emit1(op, "Det", [ctx.operand(op, 0)]))


# -- losses ----------------------------------------------------------------------------------------
def _loss_and_backprop(ctx: LoweringContext, op: Op, labels: str) -> None:
    """loss = -sum(labels * log_softmax(features)), backprop = softmax(features) - labels."""
    features = ctx.operand(op, 0)
    log_p = ctx.helper1(op, "log_softmax", "LogSoftmax", [features], axis=-1)
    weighted = ctx.helper1(op, "weighted", "Mul", [labels, log_p])
    total = opset.reduce(ctx, op, "ReduceSum", weighted, [-1], False, suffix="sum")
    loss = ctx.node("Neg", [total], ctx.prefix + op.results[0].name)[0]
    probabilities = ctx.helper1(op, "softmax", "Softmax", [features], axis=-1)
    backprop = ctx.node("Sub", [probabilities, labels], ctx.prefix + op.results[1].name)[0]
    ctx.bind(op.results[0], loss)
    ctx.bind(op.results[1], backprop)


@lowers("SoftmaxCrossEntropyWithLogits")
def _softmax_cross_entropy(ctx: LoweringContext, op: Op) -> None:
    if ctx.rank(op.operands[0]) != 2 or ctx.rank(op.operands[1]) != 2:
        raise UnsupportedOpError(op.type, op.name, "features and labels must be matrices")
    _loss_and_backprop(ctx, op, ctx.operand(op, 1))


@lowers("SparseSoftmaxCrossEntropyWithLogits")
def _sparse_softmax_cross_entropy(ctx: LoweringContext, op: Op) -> None:
    """The labels as one-hot rows over the classes, then the dense loss."""
    dims = ctx.shape(op.operands[0]).dims
    if dims is None or len(dims) != 2 or dims[1] is None:
        raise UnsupportedOpError(op.type, op.name, "features must be a matrix with a static class count")
    labels = ctx.operand(op, 1)
    if ctx.dtype(op.operands[1]) != DType.INT64:
        labels = ctx.helper1(op, "labels64", "Cast", [labels], to=onnx_type(DType.INT64))
    lifted = ctx.helper1(op, "lifted", "Unsqueeze", [labels, ctx.ints([-1], "last_axis")])
    check_tensor_size([int(dims[1])], 8, "the class numbers of a loss")  # type: ignore[arg-type]
    classes = ctx.initializer(np.arange(int(dims[1]), dtype=np.int64), f"{op.name}/classes")  # type: ignore[arg-type]
    hot = ctx.helper1(op, "hot", "Equal", [lifted, classes])
    one_hot = ctx.helper1(op, "one_hot", "Cast", [hot], to=onnx_type(ctx.dtype(op.results[0])))
    _loss_and_backprop(ctx, op, one_hot)
