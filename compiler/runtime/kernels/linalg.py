"""Matrix ops (bands, diagonals, determinants) and the softmax cross-entropy losses.

The diagonal ops share one map, `diagonal_map`: for a matrix of M x N and
diagonals k0..k1, where each diagonal element sits in the matrix and in the
packed [num_diags, max_len] array TF uses (top row = highest diagonal, short
diagonals padded left or right as `align` says).  V1/V2 ops are V3 with k = 0
or with LEFT_LEFT alignment.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .common import accumulator, checked_shape, choice, int_vector, scalar_int
from .registry import KernelError, kernel

Array = np.ndarray
Attrs = Mapping[str, object]

ALIGNMENTS = ("LEFT_RIGHT", "RIGHT_LEFT", "LEFT_LEFT", "RIGHT_RIGHT")


@dataclass(frozen=True)
class DiagonalMap:
    """Matrix (rows, cols) and packed (diagonal row, position) of every diagonal element."""

    rows: Array
    cols: Array
    packed_rows: Array
    packed_cols: Array
    num_diags: int
    max_len: int


def _length(rows: int, cols: int, d: int) -> int:
    return max(0, min(rows + min(0, d), cols - max(0, d)))


def diagonal_map(rows: int, cols: int, k0: int, k1: int, align: str) -> DiagonalMap:
    """Where diagonals k0..k1 of a rows x cols matrix live; a diagonal is left-aligned in the
    packed form when its side of `align` says LEFT (the main diagonal: either side)."""
    if k0 > k1:
        raise KernelError(f"lower diagonal index {k0} exceeds upper {k1}")
    if not (-rows < k0 or rows == 0) or not (k1 < cols or cols == 0):
        raise KernelError(f"diagonals {k0}..{k1} do not fit a {rows}x{cols} matrix")
    super_left, sub_left = (side == "LEFT" for side in align.split("_"))
    max_len = max(_length(rows, cols, d) for d in range(k0, k1 + 1))
    parts: list[tuple[Array, Array, Array, Array]] = []
    for d in range(k1, k0 - 1, -1):
        n = _length(rows, cols, d)
        left = (d >= 0 and super_left) or (d <= 0 and sub_left)
        j = np.arange(n)
        parts.append((j - min(d, 0), j + max(d, 0), np.full(n, k1 - d), j + (0 if left else max_len - n)))
    return DiagonalMap(*(np.concatenate([p[i] for p in parts]).astype(np.int64) for i in range(4)),
                       num_diags=k1 - k0 + 1, max_len=max_len)


def _k_range(k: Array) -> tuple[int, int]:
    values = int_vector(k)
    if len(values) not in (1, 2):
        raise KernelError(f"k must be a scalar or a pair, got {values}")
    return values[0], values[-1]


def _align(attrs: Attrs, op_version: int) -> str:
    return choice(attrs, "align", ALIGNMENTS, "RIGHT_LEFT") if op_version == 3 else "LEFT_LEFT"


def _squeezed(packed: Array, single: bool) -> Array:
    """A single diagonal drops the diagonal axis, as TF returns it."""
    return packed[..., 0, :] if single else packed


# ---------------------------------------------------------------- band


@kernel("MatrixBandPart")
def _matrix_band_part(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """Keep i - j <= num_lower and j - i <= num_upper (a negative bound keeps the whole side)."""
    x, lower_t, upper_t = inputs
    if x.ndim < 2:
        raise KernelError(f"input must be at least a matrix, got shape {list(x.shape)}")
    lower, upper = scalar_int(lower_t, "num_lower"), scalar_int(upper_t, "num_upper")
    rows, cols = x.shape[-2:]
    if lower > rows or upper > cols:
        raise KernelError(f"num_lower {lower} / num_upper {upper} exceed the matrix {rows}x{cols}")
    return [np.where(band_mask(rows, cols, lower, upper), x, np.zeros((), x.dtype))]


def band_mask(rows: int, cols: int, lower: int, upper: int) -> Array:
    offset = np.arange(cols)[None, :] - np.arange(rows)[:, None]  # j - i
    return ((lower < 0) | (-offset <= lower)) & ((upper < 0) | (offset <= upper))


# ---------------------------------------------------------------- diagonals


def diag_part(x: Array, k0: int, k1: int, padding: object, align: str) -> Array:
    if x.ndim < 2:
        raise KernelError(f"input must be at least a matrix, got shape {list(x.shape)}")
    m = diagonal_map(x.shape[-2], x.shape[-1], k0, k1, align)
    out = np.full(x.shape[:-2] + (m.num_diags, m.max_len), padding, x.dtype)
    out[..., m.packed_rows, m.packed_cols] = x[..., m.rows, m.cols]
    return _squeezed(out, k0 == k1)


def _register_diag_part(op_type: str, version: int) -> None:
    @kernel(op_type)
    def part(attrs: Attrs, inputs: list[Array]) -> list[Array]:
        x = inputs[0]
        if version == 1:
            return [diag_part(x, 0, 0, 0, "LEFT_LEFT")]
        k0, k1 = _k_range(inputs[1])
        return [diag_part(x, k0, k1, np.asarray(inputs[2]).reshape(()), _align(attrs, version))]


for _op, _version in (("MatrixDiagPart", 1), ("MatrixDiagPartV2", 2), ("MatrixDiagPartV3", 3)):
    _register_diag_part(_op, _version)


def diag_size(max_len: int, k0: int, k1: int, rows: int, cols: int) -> tuple[int, int]:
    """TF's num_rows/num_cols for MatrixDiag: the smallest fitting, square when both are -1."""
    min_rows, min_cols = max_len - min(k1, 0), max_len + max(k0, 0)
    if rows == -1 and cols == -1:
        return max(min_rows, min_cols), max(min_rows, min_cols)
    rows, cols = min_rows if rows == -1 else rows, min_cols if cols == -1 else cols
    if rows < min_rows or cols < min_cols:
        raise KernelError(f"a {rows}x{cols} matrix cannot hold diagonals {k0}..{k1} of length {max_len}")
    return rows, cols


def diag(diagonal: Array, k0: int, k1: int, rows: int, cols: int, padding: object, align: str) -> Array:
    packed = diagonal if k0 != k1 else diagonal[..., None, :]
    if packed.ndim < 2 or packed.shape[-2] != k1 - k0 + 1:
        raise KernelError(f"diagonal shape {list(diagonal.shape)} does not hold diagonals {k0}..{k1}")
    rows, cols = diag_size(packed.shape[-1], k0, k1, rows, cols)
    m = diagonal_map(rows, cols, k0, k1, align)
    if m.max_len != packed.shape[-1]:
        raise KernelError(f"diagonals of length {packed.shape[-1]} do not fit a {rows}x{cols} matrix")
    out = np.full(checked_shape(packed.shape[:-2] + (rows, cols), packed.itemsize), padding, packed.dtype)
    out[..., m.rows, m.cols] = packed[..., m.packed_rows, m.packed_cols]
    return out


def _register_diag(op_type: str, version: int) -> None:
    @kernel(op_type)
    def build(attrs: Attrs, inputs: list[Array]) -> list[Array]:
        diagonal = inputs[0]
        if version == 1:
            return [diag(diagonal, 0, 0, -1, -1, 0, "LEFT_LEFT")]
        k0, k1 = _k_range(inputs[1])
        rows, cols = scalar_int(inputs[2], "num_rows"), scalar_int(inputs[3], "num_cols")
        return [diag(diagonal, k0, k1, rows, cols, np.asarray(inputs[4]).reshape(()), _align(attrs, version))]


for _op, _version in (("MatrixDiag", 1), ("MatrixDiagV2", 2), ("MatrixDiagV3", 3)):
    _register_diag(_op, _version)


def set_diag(x: Array, diagonal: Array, k0: int, k1: int, align: str) -> Array:
    if x.ndim < 2:
        raise KernelError(f"input must be at least a matrix, got shape {list(x.shape)}")
    m = diagonal_map(x.shape[-2], x.shape[-1], k0, k1, align)
    packed = diagonal if k0 != k1 else diagonal[..., None, :]
    if packed.shape != x.shape[:-2] + (m.num_diags, m.max_len):
        raise KernelError(f"diagonal shape {list(diagonal.shape)} does not fit input {list(x.shape)}")
    out = x.copy()
    out[..., m.rows, m.cols] = packed[..., m.packed_rows, m.packed_cols]
    return out


def _register_set_diag(op_type: str, version: int) -> None:
    @kernel(op_type)
    def replace(attrs: Attrs, inputs: list[Array]) -> list[Array]:
        x, diagonal = inputs[:2]
        k0, k1 = (0, 0) if version == 1 else _k_range(inputs[2])
        return [set_diag(x, diagonal, k0, k1, _align(attrs, version))]


for _op, _version in (("MatrixSetDiag", 1), ("MatrixSetDiagV2", 2), ("MatrixSetDiagV3", 3)):
    _register_set_diag(_op, _version)


@kernel("MatrixDeterminant")
def _matrix_determinant(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    x = inputs[0]
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise KernelError(f"input must be square matrices, got shape {list(x.shape)}")
    return [np.linalg.det(x.astype(accumulator(x.dtype))).astype(x.dtype)]


# ---------------------------------------------------------------- losses


def _log_softmax(logits: Array) -> Array:
    wide = logits.astype(np.float64)
    shifted = wide - wide.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


@kernel("SoftmaxCrossEntropyWithLogits")
def _softmax_cross_entropy(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """(loss per row, softmax - labels); features and labels broadcast against each other."""
    features, labels = inputs
    if features.ndim > 2 or labels.ndim > 2:
        raise KernelError("features and labels must be at most matrices")
    features, labels = np.broadcast_arrays(np.atleast_2d(features), np.atleast_2d(labels))
    log_p = _log_softmax(features)
    loss = -(labels.astype(np.float64) * log_p).sum(axis=-1)
    return [loss.astype(features.dtype), (np.exp(log_p) - labels).astype(features.dtype)]


@kernel("SparseSoftmaxCrossEntropyWithLogits")
def _sparse_softmax_cross_entropy(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    features, labels = inputs
    if features.ndim != 2 or labels.shape != features.shape[:1]:
        raise KernelError(f"features {list(features.shape)} and labels {list(labels.shape)} do not fit")
    classes = features.shape[1]
    if labels.size and (labels.min() < 0 or labels.max() >= classes):
        raise KernelError(f"labels must lie in [0, {classes})")
    log_p = _log_softmax(features)
    rows = np.arange(labels.size)
    hot = np.zeros(features.shape)
    hot[rows, labels] = 1
    return [(-log_p[rows, labels]).astype(features.dtype), (np.exp(log_p) - hot).astype(features.dtype)]

