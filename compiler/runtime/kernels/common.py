"""Attribute and operand helpers shared by the kernel modules.

Attributes come in the IR's Python form and may be absent (TF then uses the
OpDef default), so every read goes through a helper that supplies the default
and turns a bad value into a `KernelError` instead of a numpy traceback.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from compiler.ir.dtypes import DType
from compiler.limits import check_tensor_size

from .registry import KernelError

_REQUIRED = object()


def attr(attrs: Mapping[str, object], name: str, default: object = _REQUIRED) -> object:
    """`attrs[name]`, or the OpDef default when absent."""
    if name in attrs and attrs[name] is not None:
        return attrs[name]
    if default is _REQUIRED:
        raise KernelError(f"missing required attribute '{name}'")
    return default


def choice(attrs: Mapping[str, object], name: str, allowed: Sequence[str],
           default: object = _REQUIRED) -> str:
    """A string attribute restricted to `allowed`."""
    value = attr(attrs, name, default)
    if isinstance(value, bytes):
        value = value.decode()
    if value not in allowed:
        raise KernelError(f"unsupported {name} '{value}' (expected one of {', '.join(allowed)})")
    return str(value)


def int_list(attrs: Mapping[str, object], name: str, default: object = _REQUIRED) -> list[int]:
    """A list(int) attribute as Python ints."""
    return [int(v) for v in attr(attrs, name, default)]  # type: ignore[union-attr]


def dtype_attr(attrs: Mapping[str, object], name: str, default: object = _REQUIRED) -> np.dtype:
    """A type attribute as the numpy dtype that stores it."""
    value = attr(attrs, name, default)
    if isinstance(value, DType):
        return value.to_numpy()
    if isinstance(value, int):
        return DType(value).to_numpy()
    return np.dtype(value)  # type: ignore[arg-type]


def checked_shape(dims: Sequence[int], itemsize: int, what: str = "result") -> list[int]:
    """A shape a kernel is about to allocate: non-negative and within the tensor size limit."""
    dims = [int(d) for d in dims]
    if any(d < 0 for d in dims):
        raise KernelError(f"{what} shape {dims} has a negative dimension")
    check_tensor_size(dims, itemsize, what)
    return dims


def object_handle(held: object) -> np.ndarray:
    """A 0-d object array holding `held`: how a table, a list or an array's spec travels between kernels."""
    handle = np.empty((), dtype=object)
    handle[()] = held
    return handle


def held_object(handle: np.ndarray, kind: type) -> object:
    """What `object_handle` put in `handle` when it is a `kind`, else None (the caller names the error)."""
    arr = np.asarray(handle)
    held = arr.reshape(())[()] if arr.size == 1 and arr.dtype == object else None
    return held if isinstance(held, kind) else None


def require_rank(x: np.ndarray, rank: int, what: str) -> None:
    """TF's shape check of an operand that must have exactly `rank` dimensions."""
    if x.ndim != rank:
        raise KernelError(f"{what} must be {rank}-dimensional, got shape {list(x.shape)}")


def scalar_int(x: np.ndarray, what: str = "value") -> int:
    """A scalar (or one-element) integer operand as a Python int."""
    arr = np.asarray(x)
    if arr.size != 1:
        raise KernelError(f"{what} must be a scalar, got shape {list(arr.shape)}")
    return int(arr.reshape(()))


def int_vector(x: np.ndarray) -> list[int]:
    """An integer operand flattened to a list of Python ints."""
    return [int(v) for v in np.asarray(x).reshape(-1)]


def axis_index(axis: int, rank: int) -> int:
    """Normalise a possibly negative axis into [0, rank), as TF validates it."""
    if not -rank <= axis < rank:
        raise KernelError(f"axis {axis} out of range for rank {rank}")
    return axis % rank


def accumulator(dtype: np.dtype) -> np.dtype:
    """Type to compute in: float64 for real floats and complex128 for complex,
    so the reference never loses bits TF keeps; other types compute as
    themselves (TF's integer arithmetic wraps in the operand type)."""
    dtype = np.dtype(dtype)
    if is_floating(dtype):
        return np.dtype(np.float64)
    if dtype.kind == "c":
        return np.dtype(np.complex128)
    return dtype


def is_floating(dtype: np.dtype) -> bool:
    """True for float types numpy knows, including ml_dtypes' bfloat16 & co."""
    dtype = np.dtype(dtype)
    return dtype.kind == "f" or (dtype.kind == "V" and "float" in dtype.name)
