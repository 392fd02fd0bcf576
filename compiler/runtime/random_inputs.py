"""Seeded random feeds for a graph's inputs, and feeds loaded from .npz files.

Verification needs inputs when the user gives none: each input gets values
of its declared dtype and shape (unknown dimensions become 1), drawn from a
generator seeded once, so the same seed always gives the same feeds.
"""
from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Sequence

import numpy as np

from compiler.errors import InputError
from compiler.ir.dtypes import DType
from compiler.ir.graph import Graph, IRError, Value
from compiler.ir.shapes import Shape
from compiler.limits import check_tensor_size

# Integer inputs are usually indices or ids; keep them small so gathers stay in range.
INT_HIGH = 10


def make_feeds(graph: Graph, inputs: Sequence[str], seed: int = 0) -> dict[str, np.ndarray]:
    """`{input name: array}`: floats ~U(-1, 1), integers in [0, 10), bools fair coins."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for name in inputs:
        value = input_value(graph, name)
        shape = _input_shape(value, name)
        check_tensor_size(shape, 8, f"random input '{name}'")  # drawn as 64-bit numbers, then cast
        feeds[name] = _random_array(rng, _input_dtype(value, name), shape)
    return feeds


def load_feeds(path: str | Path) -> dict[str, np.ndarray]:
    """Arrays from an .npz; keys `input:<name>` (the fixture format) or plain tensor names."""
    return read_npz(path, "feeds")


def read_npz(path: str | Path, role: str) -> dict[str, np.ndarray]:
    """Every input array of an .npz, keyed by tensor name (`input:` dropped, `output:` arrays skipped).

    The arrays are read here, inside the error handling: a truncated archive
    fails on its first array, not on opening.  Any unreadable file is one
    InputError naming it and `role` (what the file was for).
    """
    try:
        with np.load(path, allow_pickle=False) as archive:
            return {key.split(":", 1)[1] if key.startswith("input:") else key: archive[key]
                    for key in archive.files if not key.startswith("output:")}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise InputError(f"{path}: not a readable .npz {role} file ({err})") from None


def input_value(graph: Graph, name: str) -> Value:
    try:
        return graph.value(name)
    except IRError as err:
        raise InputError(f"input '{name}': {err}") from None


def _input_dtype(value: Value, name: str) -> DType:
    dtype = value.dtype if value.dtype is not None else value.op.attr("dtype")
    if not isinstance(dtype, DType):
        raise InputError(f"input '{name}' has no known dtype; pass feeds explicitly")
    return dtype


def declared_shape(value: Value) -> Shape:
    """An input's shape: its Placeholder's `shape` attribute when that has a rank, else the inferred one."""
    shape = value.op.attr("shape") if value.op.type.startswith("Placeholder") else None
    if not isinstance(shape, Shape) or shape.dims is None:
        shape = value.shape
    return shape


def _input_shape(value: Value, name: str) -> tuple[int, ...]:
    shape = declared_shape(value)
    if shape.dims is None:
        raise InputError(f"input '{name}' has unknown rank; pass feeds explicitly")
    return tuple(1 if d is None else d for d in shape.dims)


def _random_array(rng: np.random.Generator, dtype: DType, shape: tuple[int, ...]) -> np.ndarray:
    if dtype == DType.BOOL:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if dtype.is_float or dtype in (DType.COMPLEX64, DType.COMPLEX128):
        return rng.uniform(-1.0, 1.0, size=shape).astype(dtype.to_numpy())
    if dtype == DType.STRING:
        raise InputError("string inputs cannot be generated; pass feeds explicitly")
    return rng.integers(0, INT_HIGH, size=shape).astype(dtype.to_numpy())
