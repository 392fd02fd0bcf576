"""Sparse-tensor ops on (indices, values, dense_shape) triples: SparseReshape, SparseFillEmptyRows.

Both follow TF's CPU kernels (reshape_util.cc, sparse_fill_empty_rows_op.cc)
step by step, including what they leave unchecked: SparseReshape does not
bound-check indices (they are linearized with C++'s truncating division), and
SparseFillEmptyRows keeps each row's entries in their input order, placing
rows in ascending order (a stable sort by row), with one default-valued entry
at column 0 for each empty row.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from compiler.ir.shapes import MAX_RANK

from .common import checked_shape
from .registry import KernelError, kernel

Array = np.ndarray
Attrs = Mapping[str, object]


def _int64_matrix(x: Array, what: str) -> Array:
    arr = np.asarray(x)
    if arr.ndim != 2:
        raise KernelError(f"{what} should be a matrix but received shape {list(arr.shape)}")
    return arr.astype(np.int64, copy=False)


def _int64_vector(x: Array, what: str) -> Array:
    arr = np.asarray(x)
    if arr.ndim != 1:
        raise KernelError(f"{what} should be a vector but received shape {list(arr.shape)}")
    return arr.astype(np.int64, copy=False)


def _strides(dims: list[int]) -> Array:
    """Row-major strides of `dims` (int64, wrapping as TF's int64 products do)."""
    strides = np.ones(len(dims), np.int64)
    for d in range(len(dims) - 2, -1, -1):
        strides[d] = strides[d + 1] * np.int64(dims[d + 1])
    return strides


def _reshaped_dims(input_dims: list[int], target: Array, dense_size: int) -> list[int]:
    """The target shape with its -1 (at most one) inferred, as TF's Reshape rule checks it."""
    if target.shape[0] > MAX_RANK:
        raise KernelError(f"Too many dimensions in tensor: the target shape has {target.shape[0]}, at most {MAX_RANK}")
    dims, product, unknown = [], 1, -1
    for d, size in enumerate(int(s) for s in target):
        if size == -1:
            if unknown != -1:
                raise KernelError(f"only one output dimension may be -1, not both {unknown} and {d}")
            unknown = d
            dims.append(1)
            continue
        if size < 0:
            raise KernelError(f"size {d} must be non-negative, not {size}")
        product *= size
        dims.append(size)
    if unknown != -1:
        if product <= 0:
            raise KernelError("reshape cannot infer the missing input size for an empty tensor unless all "
                              "specified input sizes are non-zero")
        missing = dense_size // product
        if product * missing != dense_size:
            raise KernelError(f"Input to reshape is a SparseTensor with {dense_size} dense values, but the "
                              f"requested shape requires a multiple of {product}. inputshape={input_dims} "
                              f"outputshape={dims}")
        dims[unknown] = missing
    if int(np.prod(dims, dtype=object)) != dense_size:
        raise KernelError(f"Input to reshape is a tensor with {dense_size} dense values, but the requested shape "
                          f"has {int(np.prod(dims, dtype=object))}. inputshape={input_dims} outputshape={dims}")
    return dims


def _truncating_divmod(x: Array, d: Array) -> tuple[Array, Array]:
    """C++'s / and % on int64: the quotient rounds toward zero, the remainder takes x's sign."""
    quotient = np.abs(x) // np.abs(d) * np.sign(x) * np.sign(d)
    return quotient, x - quotient * d


@kernel("SparseReshape")
def _sparse_reshape(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    indices = _int64_matrix(inputs[0], "Input indices")
    shape = _int64_vector(inputs[1], "Input shape")
    target = _int64_vector(inputs[2], "Target shape")
    if indices.shape[1] != shape.shape[0]:
        raise KernelError(f"Input tensor rank {shape.shape[0]} must match input indices rank {indices.shape[1]}")
    input_dims = [int(d) for d in shape]
    if any(d < 0 for d in input_dims):
        raise KernelError(f"Dimension {min(input_dims)} must be >= 0")
    dense_size = int(np.prod(input_dims, dtype=object))
    dims = _reshaped_dims(input_dims, target, dense_size)
    out_shape = np.asarray(dims, np.int64)
    nnz = indices.shape[0]
    if dims == input_dims:
        return [indices.copy(), out_shape]
    checked_shape([nnz, len(dims)], 8, "output indices")
    if nnz and not dense_size:
        raise KernelError(f"Input tensor has {nnz} non zero elements but input shape ({input_dims}) or output "
                          f"shape ({dims}) is empty")
    linear = indices @ _strides(input_dims) if input_dims else np.zeros(nnz, np.int64)
    out = np.empty((nnz, len(dims)), np.int64)
    for j, stride in enumerate(_strides(dims)):
        out[:, j], linear = _truncating_divmod(linear, stride)
    return [out, out_shape]


@kernel("SparseFillEmptyRows")
def _sparse_fill_empty_rows(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    indices_in, values, dense_shape, default = (np.asarray(x) for x in inputs)
    if dense_shape.ndim != 1:
        raise KernelError(f"dense_shape must be a vector, saw: {list(dense_shape.shape)}")
    if indices_in.ndim != 2:
        raise KernelError(f"indices must be a matrix, saw: {list(indices_in.shape)}")
    if values.ndim != 1:
        raise KernelError(f"values must be a vector, saw: {list(values.shape)}")
    if indices_in.shape[0] != values.shape[0]:
        raise KernelError(f"The length of `values` ({values.shape[0]}) must match the first dimension of "
                          f"`indices` ({indices_in.shape[0]}).")
    if default.ndim != 0:
        raise KernelError(f"default_value must be a scalar, saw: {list(default.shape)}")
    if dense_shape.shape[0] == 0:
        raise KernelError("Dense shape cannot be empty.")
    if indices_in.shape[1] != dense_shape.shape[0]:
        raise KernelError(f"The length of `dense_shape` ({dense_shape.shape[0]}) must match the second "
                          f"dimension of `indices` ({indices_in.shape[1]}).")
    indices = indices_in.astype(np.int64, copy=False)
    count, rank = indices.shape
    dense_rows = int(dense_shape[0])
    if dense_rows <= 0:
        if count:
            raise KernelError(f"Received SparseTensor with dense_shape[0] = 0 but indices.shape[0] = {count}")
        return [np.zeros((0, rank), np.int64), values[:0].copy(), np.zeros(0, bool), np.zeros(0, np.int64)]
    rows = indices[:, 0]
    bad = np.flatnonzero((rows < 0) | (rows >= dense_rows))
    if bad.size:
        i = int(bad[0])
        raise KernelError(f"indices({i}, 0) is invalid: {int(rows[i])} >= {dense_rows}")
    checked_shape([dense_rows], 1, "empty_row_indicator")
    per_row = np.bincount(rows, minlength=dense_rows)
    empty = per_row == 0
    # A stable sort by row; each empty row gets one entry (row, 0, ..., 0) = default at its place.
    order = np.argsort(rows, kind="stable")
    filled = np.maximum(per_row, 1)
    starts = np.concatenate([[0], np.cumsum(filled)[:-1]]).astype(np.int64)
    total = int(filled.sum())
    checked_shape([total, rank], 8, "output indices")
    out_indices = np.zeros((total, rank), np.int64)
    out_values = np.full(total, default, dtype=values.dtype) if values.dtype != object else \
        np.asarray([default.item()] * total, dtype=object)
    reverse = np.empty(count, np.int64)
    sorted_rows = rows[order]
    within = np.arange(count) - np.searchsorted(sorted_rows, sorted_rows, side="left")
    reverse[order] = starts[sorted_rows] + within
    out_indices[reverse] = indices
    out_values[reverse] = values
    out_indices[starts[empty], 0] = np.flatnonzero(empty)
    return [out_indices, out_values.reshape(total), empty, reverse]
