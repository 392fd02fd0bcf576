"""Dense linear solves: MatrixInverse, MatrixSolve, Cholesky, MatrixTriangularSolve (batched, adjoint, lower).

TF runs Eigen's decompositions in the operand's own type, and so do these
kernels, step for step in Eigen's unblocked order (numpy rounds each product
and difference as Eigen does without FMA), so that the decisions TF makes on
the numbers come out the same:
- MatrixInverse and MatrixSolve factor with partial pivoting (the first row
  of largest magnitude in the column), refuse a matrix with an exactly zero
  (or NaN) pivot as TF does ("... is not invertible"), then solve the unit
  lower and the upper triangle;
- Cholesky reads only the lower triangle; a non-positive pivot is not an
  error in TF (2.x): the lower triangle comes out all NaN (TF leaves the upper
  triangle unwritten; it is 0 here, as in a successful result);
- MatrixTriangularSolve reads one triangle, broadcasts batch dimensions, and
  divides by a zero diagonal without complaint (inf/NaN), as TF does.
`adjoint` solves with the conjugate transpose.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .common import attr
from .registry import KernelError, kernel

Array = np.ndarray
Attrs = Mapping[str, object]

# The types TF registers CPU kernels for (MatrixInverse also takes half).
_TYPES = tuple(np.dtype(t) for t in (np.float32, np.float64, np.complex64, np.complex128))
_INVERSE_TYPES = _TYPES + (np.dtype(np.float16),)


def _square(x: Array, types: tuple[np.dtype, ...] = _TYPES) -> None:
    if x.dtype not in types:
        raise KernelError(f"no kernel for type {x.dtype}")
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise KernelError(f"Input matrix must be square, got shape {list(x.shape)}")


def _adjoint(x: Array) -> Array:
    """The conjugate transpose of each matrix (the transpose for real types)."""
    swapped = np.swapaxes(x, -1, -2)
    return np.conj(swapped) if x.dtype.kind == "c" else swapped


def lu_factor(a: Array) -> tuple[Array, Array]:
    """Batched LU with partial pivoting of [B, n, n] `a`, in its own type: (L and U packed as
    Eigen packs them, the row each position was taken from).  A zero column leaves its
    entries alone, as Eigen does."""
    lu, batch = a.copy(), np.arange(a.shape[0])
    n = a.shape[-1]
    perm = np.tile(np.arange(n), (a.shape[0], 1))
    for k in range(n):
        p = k + np.argmax(np.abs(lu[:, k:, k]), axis=1)
        lu[batch, k], lu[batch, p] = lu[batch, p].copy(), lu[batch, k].copy()
        perm[batch, k], perm[batch, p] = perm[batch, p].copy(), perm[batch, k].copy()
        pivot = lu[:, k, k][:, None]
        safe = np.where(pivot == 0, np.ones_like(pivot), pivot)
        lu[:, k + 1:, k] = np.where(pivot == 0, lu[:, k + 1:, k], lu[:, k + 1:, k] / safe)
        lu[:, k + 1:, k + 1:] -= lu[:, k + 1:, k:k + 1] * lu[:, k:k + 1, k + 1:]
    return lu, perm


def triangular_solve(t: Array, b: Array, lower: bool, unit: bool = False) -> Array:
    """Solve t x = b for [B, n, n] triangular `t` (only its `lower` or upper triangle read),
    column by column as Eigen's TRSM: each unknown row scaled by the diagonal's reciprocal,
    then removed from the rows still to solve."""
    x, n = b.copy(), t.shape[-1]
    for k in (range(n) if lower else range(n - 1, -1, -1)):
        if not unit:
            x[:, k] = x[:, k] * (np.ones((), t.dtype) / t[:, k, k])[:, None]
        rest = slice(k + 1, n) if lower else slice(0, k)
        x[:, rest] -= t[:, rest, k:k + 1] * x[:, k:k + 1]
    return x


def lu_solve(a: Array, b: Array, what: str) -> Array:
    """Solve a x = b for batched [B, n, n] `a` and [B, n, k] `b` by pivoted LU, refusing zero pivots."""
    lu, perm = lu_factor(a)
    pivots = np.abs(np.diagonal(lu, axis1=-2, axis2=-1))
    if pivots.size and not (pivots > 0).all():
        raise KernelError(f"{what} is not invertible.")
    permuted = np.take_along_axis(b, perm[:, :, None], axis=1)
    return triangular_solve(lu, triangular_solve(lu, permuted, lower=True, unit=True), lower=False)


def _batched(x: Array) -> Array:
    """[..., m, n] as [B, m, n] (B given: -1 cannot be inferred for empty matrices)."""
    return x.reshape((int(np.prod(x.shape[:-2], dtype=np.int64)),) + x.shape[-2:])


@kernel("MatrixInverse")
def _matrix_inverse(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    x = inputs[0]
    _square(x, _INVERSE_TYPES)
    a = _batched(_adjoint(x) if attr(attrs, "adjoint", False) else x)
    eye = np.broadcast_to(np.eye(x.shape[-1], dtype=x.dtype), a.shape).copy()
    return [lu_solve(a, eye, "Input").reshape(x.shape)]


@kernel("MatrixSolve")
def _matrix_solve(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    matrix, rhs = inputs
    _square(matrix)
    if rhs.ndim != matrix.ndim or rhs.dtype != matrix.dtype:
        raise KernelError(f"rhs of shape {list(rhs.shape)} ({rhs.dtype}) does not go with a matrix of shape "
                          f"{list(matrix.shape)} ({matrix.dtype})")
    if rhs.shape[:-2] != matrix.shape[:-2]:
        raise KernelError("All input tensors must have the same outer dimensions.")
    if rhs.shape[-2] != matrix.shape[-1]:
        raise KernelError("Input matrix and rhs are incompatible.")
    a = _batched(_adjoint(matrix) if attr(attrs, "adjoint", False) else matrix)
    return [lu_solve(a, _batched(rhs), "Input matrix").reshape(rhs.shape)]


@kernel("Cholesky")
def _cholesky(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """Eigen's unblocked LLT of the lower triangle; a batch member with a pivot <= 0 comes out NaN."""
    x = inputs[0]
    _square(x)
    a = np.tril(_batched(x)).copy()
    n = a.shape[-1]
    failed = np.zeros(a.shape[0], bool)
    for k in range(n):
        row = a[:, k, :k]
        pivot = a[:, k, k].real - np.sum((row * np.conj(row)).real, axis=-1)
        failed |= pivot <= 0
        root = np.sqrt(pivot.astype(a.dtype))
        a[:, k, k] = root
        if k:  # no terms yet at k = 0: an einsum over an empty axis is skipped, not trusted to give zeros
            a[:, k + 1:, k] -= np.einsum("bij,bj->bi", a[:, k + 1:, :k], np.conj(row))
        a[:, k + 1:, k] /= root[:, None]
    a[failed] = np.where(np.tri(n, dtype=bool), np.asarray(np.nan, a.dtype), np.zeros((), a.dtype))
    return [a.reshape(x.shape)]


@kernel("MatrixTriangularSolve")
def _matrix_triangular_solve(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    matrix, rhs = inputs
    _square(matrix)
    if rhs.ndim < 2 or rhs.dtype != matrix.dtype or rhs.shape[-2] != matrix.shape[-1]:
        raise KernelError(f"rhs of shape {list(rhs.shape)} ({rhs.dtype}) does not go with a matrix of shape "
                          f"{list(matrix.shape)} ({matrix.dtype})")
    try:
        batch = np.broadcast_shapes(matrix.shape[:-2], rhs.shape[:-2])
    except ValueError:
        raise KernelError(f"Incompatible batch shapes {list(matrix.shape[:-2])} and {list(rhs.shape[:-2])}") from None
    lower = bool(attr(attrs, "lower", True))
    t = np.broadcast_to(matrix, batch + matrix.shape[-2:])
    t = np.tril(t) if lower else np.triu(t)
    if attr(attrs, "adjoint", False):
        t, lower = _adjoint(t), not lower
    b = np.broadcast_to(rhs, batch + rhs.shape[-2:])
    out = triangular_solve(_batched(t), _batched(b).copy(), lower)
    return [out.reshape(batch + rhs.shape[-2:])]
