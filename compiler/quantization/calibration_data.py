"""Calibration data: representative inputs for an eight-bit graph, read from `.npz` files.

A calibration source is one `.npz` file or a folder of them (read in name
order).  Each file holds one array per graph input, keyed by the input's node
name (`input:<name>`, the fixture spelling, is accepted too).  An array of
the input's own rank is one feed; an array whose rank is one more is a stack
of feeds along axis 0.  Every mismatch is a one-line `InputError` naming the
file and the input, raised before anything runs.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional, Sequence

import numpy as np

from compiler.errors import InputError
from compiler.ir.graph import Graph
from compiler.runtime.random_inputs import declared_shape, input_value, read_npz
from compiler.summarize import INPUT_OPS


@dataclass(frozen=True)
class InputSpec:
    """What a graph input accepts: its node name and declared shape (dims may be None)."""

    name: str
    dims: Optional[tuple[Optional[int], ...]]

    def matches(self, shape: tuple[int, ...]) -> bool:
        if self.dims is None:
            return True
        return len(shape) == len(self.dims) and all(d is None or d == s for d, s in zip(self.dims, shape))

    def describe(self) -> str:
        if self.dims is None:
            return "unknown rank"
        return "[" + ",".join("?" if d is None else str(d) for d in self.dims) + "]"


@dataclass
class CalibrationSet:
    """Feeds from one or more files: `len()` of them, produced lazily in file order."""

    inputs: list[InputSpec]
    files: list[Path]
    counts: list[int]

    def __len__(self) -> int:
        return sum(self.counts)

    def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
        for path in self.files:
            arrays = read_npz(path, "calibration")
            stacks = {spec.name: _as_stack(spec, arrays[spec.name], path) for spec in self.inputs}
            count = len(next(iter(stacks.values()))) if stacks else 0
            for i in range(count):
                yield {name: stack[i] for name, stack in stacks.items()}


def input_specs(graph: Graph, inputs: Sequence[str]) -> list[InputSpec]:
    """The given input nodes, or every Placeholder when none are given."""
    names = list(inputs) or [op.name for op in graph if op.type in INPUT_OPS]
    if not names:
        raise InputError("the graph has no Placeholder inputs to calibrate with; give --inputs")
    return [InputSpec(name, _declared_dims(graph, name)) for name in names]


def load_calibration(path: str | Path, graph: Graph, inputs: Sequence[str] = ()) -> CalibrationSet:
    """Check every file against the graph's inputs and count the feeds (arrays are re-read when iterated)."""
    specs = input_specs(graph, inputs)
    files = _calibration_files(Path(path))
    counts = [_count_feeds(specs, file) for file in files]
    if sum(counts) == 0:
        raise InputError(f"{path}: calibration data holds no feeds")
    return CalibrationSet(specs, files, counts)


def _calibration_files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix == ".npz" and p.is_file())
        if not files:
            raise InputError(f"{path}: folder holds no .npz calibration files")
        return files
    if not path.is_file():
        raise InputError(f"{path}: no such calibration file or folder")
    return [path]


def _count_feeds(specs: list[InputSpec], path: Path) -> int:
    arrays = read_npz(path, "calibration")
    wanted = {spec.name for spec in specs}
    for key in arrays:
        if key not in wanted:
            raise InputError(f"{path}: array '{key}' is not a graph input (inputs: {', '.join(sorted(wanted))})")
    counts = {}
    for spec in specs:
        if spec.name not in arrays:
            raise InputError(f"{path}: no array for input '{spec.name}' (keys: {', '.join(sorted(arrays)) or 'none'})")
        counts[spec.name] = len(_as_stack(spec, arrays[spec.name], path))
    if len(set(counts.values())) > 1:
        detail = ", ".join(f"'{name}' {n}" for name, n in counts.items())
        raise InputError(f"{path}: inputs hold different numbers of feeds ({detail})")
    return next(iter(counts.values()))


def _as_stack(spec: InputSpec, array: np.ndarray, path: Path) -> np.ndarray:
    """The array as a stack of feeds: one feed gets a leading axis of 1."""
    if spec.matches(array.shape):
        return array[np.newaxis]
    if array.ndim >= 1 and spec.matches(array.shape[1:]):
        return array
    raise InputError(f"{path}: input '{spec.name}' expects shape {spec.describe()} (or a stack of them), "
                     f"got {list(array.shape)}")


def _declared_dims(graph: Graph, name: str) -> Optional[tuple[Optional[int], ...]]:
    dims = declared_shape(input_value(graph, name)).dims
    return None if dims is None else tuple(dims)


__all__ = ["CalibrationSet", "InputSpec", "input_specs", "load_calibration"]
