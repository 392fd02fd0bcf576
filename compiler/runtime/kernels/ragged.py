"""Ragged tensors (tf.ragged): RaggedRange, RaggedGather, RaggedTensorToTensor/ToSparse and the variant pair.

A ragged tensor travels between TF ops as its parts: `nested_splits` (one
vector of row boundaries per ragged dimension, outermost first) and the flat
`values`.  RaggedTensorToTensor also reads the VALUE_ROWIDS / FIRST_DIM_SIZE
encoding.  Semantics follow TF's CPU kernels; where TF reads or writes out of
bounds on malformed partitions (unsorted row ids, splits past the values) we
refuse instead of inventing an answer.

RaggedTensorToVariant / RaggedTensorFromVariant wrap a ragged tensor in a
DT_VARIANT scalar (or, batched, one scalar per row), which is how map_fn
carries ragged rows through TensorLists.  A variant here is a 0-d object
array holding a `RaggedVariant`, as a TensorList is one holding a
`TensorList`.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .common import attr, checked_shape, dtype_attr, int_vector, scalar_int
from .registry import KernelError, kernel

Array = np.ndarray
Attrs = Mapping[str, object]


# ---------------------------------------------------------------- helpers
def concat_ranges(starts: Array, limits: Array) -> Array:
    """[starts[0], limits[0]) ++ [starts[1], limits[1]) ++ ... as one int64 vector (empty ranges allowed)."""
    starts = np.asarray(starts, np.int64).reshape(-1)
    lengths = np.maximum(np.asarray(limits, np.int64).reshape(-1) - starts, 0)
    total = int(lengths.sum())
    checked_shape([total], 8, "ragged index")
    offsets = np.cumsum(lengths) - lengths
    return np.arange(total, dtype=np.int64) + np.repeat(starts - offsets, lengths)


def row_ids(splits: Array) -> Array:
    """For each value under non-decreasing `splits`, the row it belongs to."""
    splits = np.asarray(splits, np.int64)
    lengths = np.diff(splits)
    return np.repeat(np.arange(lengths.size, dtype=np.int64), lengths)


def _check_splits(splits: Array, what: str = "ragged splits") -> Array:
    splits = np.asarray(splits)
    if splits.ndim != 1:
        raise KernelError(f"{what} must be a vector, got shape {list(splits.shape)}")
    if splits.size == 0:
        raise KernelError(f"{what} may not be empty")
    if np.any(np.diff(splits.astype(np.int64)) < 0):
        raise KernelError(f"{what} must be sorted (non-decreasing)")
    return splits


# ---------------------------------------------------------------- RaggedRange
def _range_sizes(starts: Array, limits: Array, deltas: Array) -> Array:
    """Each row's element count, as TF's RaggedRange computes it (ceil in T for floats)."""
    if np.any(deltas == 0):
        raise KernelError("Requires delta != 0")
    empty = ((deltas > 0) & (limits < starts)) | ((deltas < 0) & (limits > starts))
    if starts.dtype.kind in "iu":
        span = np.abs(limits.astype(object) - starts.astype(object))
        step = np.abs(deltas.astype(object))
        sizes = np.array([(s + d - 1) // d for s, d in zip(span, step)], dtype=object)
    else:
        with np.errstate(all="ignore"):
            raw = np.ceil(np.abs((limits - starts) / deltas)).astype(np.float64)
        bad = ~empty & ~(raw <= float(np.iinfo(np.int64).max))
        if np.any(bad):
            raise KernelError(f"Requires ((limit - start) / delta) <= {np.iinfo(np.int64).max}")
        sizes = np.where(empty, 0, raw).astype(object)
    return np.array([0 if e else int(s) for e, s in zip(empty, sizes)], dtype=object)


@kernel("RaggedRange")
def _ragged_range(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    starts, limits, deltas = (np.asarray(x) for x in inputs)
    for name, x in (("starts", starts), ("limits", limits), ("deltas", deltas)):
        if x.ndim > 1:
            raise KernelError(f"{name} must be a scalar or vector")
    if starts.dtype not in (np.float32, np.float64, np.int32, np.int64):
        raise KernelError(f"no CPU kernel for T={starts.dtype}")
    sizes = {x.shape[0] for x in (starts, limits, deltas) if x.ndim == 1}
    if len(sizes) > 1:
        raise KernelError("starts, limits, and deltas must have the same shape")
    nrows = sizes.pop() if sizes else 1
    starts, limits, deltas = (np.broadcast_to(x.reshape(-1), (nrows,)) if x.ndim == 0 else x
                              for x in (starts, limits, deltas))
    counts = _range_sizes(starts, limits, deltas)
    split_type = dtype_attr(attrs, "Tsplits", np.int64)
    splits = np.concatenate([[0], np.cumsum(counts)]).astype(object) if nrows else np.zeros(1, object)
    total = int(splits[-1])
    if total > np.iinfo(split_type).max:
        raise KernelError(f"the {total} values overflow Tsplits={split_type}")
    checked_shape([total], starts.dtype.itemsize, "rt_dense_values")
    lengths = np.array([int(c) for c in counts], np.int64)
    # TF adds delta step by step in T: a running sum per row, restarted at each start.
    steps = np.repeat(deltas, lengths).astype(starts.dtype)
    firsts = np.cumsum(lengths) - lengths
    steps[firsts[lengths > 0]] = starts[lengths > 0]
    if starts.dtype.kind == "f":
        values = _segmented_running_sum(steps, lengths)
    else:
        column = np.arange(total, dtype=np.int64) - np.repeat(firsts, lengths)
        values = (np.repeat(starts, lengths).astype(np.int64)
                  + column * np.repeat(deltas, lengths).astype(np.int64)).astype(starts.dtype)
    return [np.asarray(splits.astype(np.int64), split_type), values]


def _segmented_running_sum(steps: Array, lengths: Array) -> Array:
    """Sequential sums in the steps' own float type, restarting at each row (what `value += delta` gives)."""
    out = np.empty_like(steps)
    pos = 0
    for n in lengths.tolist():
        if n:
            np.add.accumulate(steps[pos:pos + n], out=out[pos:pos + n])
            pos += n
    return out


# ---------------------------------------------------------------- RaggedGather
@kernel("RaggedGather")
def _ragged_gather(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    count = int(attr(attrs, "PARAMS_RAGGED_RANK", len(inputs) - 2))
    if count < 1 or len(inputs) != count + 2:
        raise KernelError(f"expected {count} splits, the values and the indices; got {len(inputs)} inputs")
    nested = [np.asarray(s) for s in inputs[:count]]
    values, indices = np.asarray(inputs[count]), np.asarray(inputs[count + 1])
    num_params = nested[0].shape[0] - 1 if nested[0].ndim == 1 else -1
    flat = indices.reshape(-1).astype(np.int64)
    bad = np.flatnonzero((flat < 0) | (flat >= num_params))
    if bad.size:
        raise KernelError(f"indices[{int(bad[0])}] = {int(flat[bad[0]])} is not in [0, {num_params})")
    if values.ndim == 0:
        raise KernelError("params.rank must be nonzero")
    _check_gather_splits(nested, values.shape[0])
    out_rank = indices.ndim - 1 + count
    expected = int(attr(attrs, "OUTPUT_RAGGED_RANK", out_rank))
    if expected != out_rank:
        raise KernelError(f"OUTPUT_RAGGED_RANK={expected}, but indices of rank {indices.ndim} and "
                          f"{count} params splits give {out_rank}")
    split_type = nested[0].dtype
    out: list[Array] = []
    stride_rows = 1
    for dim in range(indices.ndim - 1):  # uniform splits for the indices' own dimensions
        stride_rows *= indices.shape[dim]
        out.append(np.arange(stride_rows + 1, dtype=np.int64) * indices.shape[dim + 1])
    starts, limits = flat, flat + 1
    for dim, splits in enumerate(nested):
        splits = splits.astype(np.int64)
        rows = concat_ranges(starts, limits)
        if dim + indices.ndim - 1 >= 0:
            lengths = splits[rows + 1] - splits[rows]
            out.append(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64))
        starts, limits = splits[starts], splits[limits]
    taken = values[concat_ranges(starts, limits)]
    return [s.astype(split_type) for s in out] + [taken]


def _check_gather_splits(nested: Sequence[Array], num_values: int) -> None:
    for dim, splits in enumerate(nested):
        if splits.ndim != 1 or splits.size == 0:
            raise KernelError("Ragged splits may not be empty")
        last = num_values if dim == len(nested) - 1 else nested[dim + 1].shape[0]
        if splits[0] < 0:
            raise KernelError("Ragged splits must be non-negative")
        if splits[-1] > last:
            raise KernelError("Ragged splits must not point past values")
        if np.any(np.diff(splits.astype(np.int64)) < 0):
            raise KernelError("Ragged splits must be sorted")


# ---------------------------------------------------------------- RaggedTensorToSparse
def _check_nested(nested: Sequence[Array], values: Array) -> None:
    """TF's validation of a ragged tensor's parts: splits start at 0, sorted, and sized by the next level."""
    if not nested:
        raise KernelError("rt_nested_splits must be non empty")
    if values.ndim == 0:
        raise KernelError("rt_dense_values must have rank >= 1")
    for i, splits in enumerate(nested):
        if splits.ndim != 1 or splits.size == 0:
            raise KernelError("ragged splits may not be empty.")
        if splits[0] != 0:
            raise KernelError("First value of ragged splits must be 0.")
        if np.any(np.diff(splits.astype(np.int64)) < 0):
            raise KernelError("Ragged splits should be non decreasing")
        if i > 0 and splits.size != int(nested[i - 1][-1]) + 1:
            raise KernelError("Final value of ragged splits must match the length the corresponding ragged values.")
    if values.shape[0] != int(nested[-1][-1]):
        raise KernelError("Final value of ragged splits must match the length the corresponding ragged values.")


def _ragged_coordinates(nested: Sequence[Array]) -> list[Array]:
    """For every value, its index in each ragged dimension: [row, col_1, ..., col_K]."""
    items = np.arange(int(nested[-1][-1]), dtype=np.int64)
    columns: list[Array] = []
    for splits in reversed(nested):
        splits = splits.astype(np.int64)
        parents = row_ids(splits)[items]
        columns.append(items - splits[parents])
        items = parents
    return [items] + columns[::-1]


@kernel("RaggedTensorToSparse")
def _ragged_to_sparse(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    nested, values = [np.asarray(s) for s in inputs[:-1]], np.asarray(inputs[-1])
    _check_nested(nested, values)
    coords = _ragged_coordinates(nested)
    inner = values.shape[1:]
    per_value = int(np.prod(inner, dtype=np.int64))
    checked_shape([values.shape[0] * per_value, len(nested) + values.ndim], 8, "sparse_indices")
    prefix = np.repeat(np.stack(coords, axis=1), per_value, axis=0)
    suffix = np.tile(np.indices(inner).reshape(len(inner), per_value).T, (values.shape[0], 1))
    indices = np.concatenate([prefix, suffix.astype(np.int64)], axis=1)
    widths = [int(np.max(np.diff(s.astype(np.int64)), initial=0)) for s in nested]
    shape = np.array([nested[0].size - 1] + widths + list(inner), np.int64)
    return [indices.reshape(-1, len(nested) + values.ndim), values.reshape(-1), shape]


# ---------------------------------------------------------------- RaggedTensorToTensor
_PARTITION_TYPES = ("FIRST_DIM_SIZE", "VALUE_ROWIDS", "ROW_SPLITS")


def _partition_types(attrs: Attrs, count: int) -> list[str]:
    types = [t.decode() if isinstance(t, bytes) else str(t) for t in attr(attrs, "row_partition_types")]
    for t in types:
        if t not in _PARTITION_TYPES:
            raise KernelError(f"Unknown string for partition info type: {t}")
    if len(types) != count:
        raise KernelError(f"{len(types)} row_partition_types for {count} row_partition_tensors")
    if not types:
        raise KernelError("No row_partition_types given.")
    return types


def _shape_operand(shape: Array) -> list[int] | None:
    """The requested shape: None for unknown rank (the scalar -1), -1 for an unknown dimension."""
    if shape.ndim == 0:
        if int(shape) != -1:
            raise KernelError("The only valid scalar shape tensor is the fully unknown shape specified as -1.")
        return None
    dims = int_vector(shape)
    for d in dims:
        if d < -1:
            raise KernelError(f"Dimension {d} must be >= -1")
    return dims


def _check_default(default: Array, values: Array) -> None:
    """TF checks the default's dims left-aligned against values.shape[1:], then broadcasts right-aligned."""
    if default.ndim >= values.ndim:
        raise KernelError(f"default_value.shape={list(default.shape)} and rt_input.flat_values.shape="
                          f"{list(values.shape)} are incompatible: default_value.rank = {default.ndim} must be "
                          f"less than rt_input.flat_values.rank = {values.ndim}")
    for d, v in zip(default.shape, values.shape[1:]):
        if d != 1 and d != v:
            raise KernelError(f"default_value.shape={list(default.shape)} and rt_input.flat_values.shape="
                              f"{list(values.shape)} are incompatible")


def _max_width(kind: str, partition: Array) -> int:
    if kind == "ROW_SPLITS":
        return int(np.max(np.diff(partition.astype(np.int64)), initial=0))
    if partition.size == 0:
        return 0
    return int(np.max(np.diff(np.flatnonzero(np.diff(partition) != 0), prepend=-1, append=partition.size - 1),
                      initial=0))


def _output_index(kind: str, partition: Array, parent: Array, multiplier: int, size: int) -> Array:
    """Where each item of this level lands in the flat output (-1: cut off), from its parent's slot."""
    partition = partition.astype(np.int64)
    if kind == "ROW_SPLITS":
        if partition.size - 1 > parent.size:
            raise KernelError(f"Row partition size is greater than output size: {partition.size - 1} > {parent.size}")
        if partition.size == 0:
            return np.zeros(0, np.int64)
        lengths = np.diff(partition)
        if np.any(lengths < 0) or partition[0] != 0:
            raise KernelError("Invalid row split size.")
        rows = row_ids(partition)
        column = np.arange(rows.size, dtype=np.int64) - partition[rows]
    else:
        if partition.size == 0:
            return np.zeros(0, np.int64)
        bad = np.flatnonzero((partition < 0) | (partition >= parent.size))
        if bad.size:
            raise KernelError(f"Got value_rowid={int(partition[bad[0]])} which is not less than {parent.size}")
        if np.any(np.diff(partition) < 0):
            raise KernelError("value_rowids must be sorted (TF's kernel writes out of bounds otherwise)")
        rows = partition
        run_start = np.flatnonzero(np.concatenate([[True], np.diff(partition) != 0]))
        run_len = np.diff(np.append(run_start, partition.size))
        column = np.arange(partition.size, dtype=np.int64) - np.repeat(run_start, run_len)
    base = parent[rows]
    return np.where((base >= 0) & (column < size), base + column * multiplier, -1)


@kernel("RaggedTensorToTensor")
def _ragged_to_tensor(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    shape, values, default = (np.asarray(x) for x in inputs[:3])
    partitions = [np.asarray(p) for p in inputs[3:]]
    types = _partition_types(attrs, len(partitions))
    if partitions[0].size == 0:
        raise KernelError("Invalid first partition input. Tensor requires at least one element.")
    if types[0] == "FIRST_DIM_SIZE":
        first_dim = scalar_int(partitions[0], "FIRST_DIM_SIZE")
        types, partitions = types[1:], partitions[1:]
    elif types[0] == "VALUE_ROWIDS":
        raise KernelError("Cannot handle VALUE_ROWIDS in first dimension.")
    else:
        first_dim = partitions[0].shape[0] - 1
    if "FIRST_DIM_SIZE" in types:
        raise KernelError("Cannot handle partition type FIRST_DIM_SIZE after the first dimension")
    ragged_rank = len(types)
    if values.ndim == 0:
        raise KernelError("values must have rank >= 1")
    _check_default(default, values)
    dims = _output_dims(_shape_operand(shape), values, ragged_rank, first_dim)
    for level in range(1, ragged_rank + 1):
        if dims[level] < 0:
            dims[level] = _max_width(types[level - 1], partitions[level - 1])
    if dims[0] < 0:
        raise KernelError(f"Dimension {dims[0]} must be >= 0")
    checked_shape(dims, values.dtype.itemsize, "result")
    element = dims[ragged_rank + 1:]
    multipliers = [int(np.prod(dims[level + 1:ragged_rank + 1], dtype=np.int64)) for level in range(ragged_rank + 1)]
    fill = np.broadcast_to(default, element) if element else default.reshape(())
    out = np.empty([int(np.prod(dims[:ragged_rank + 1], dtype=np.int64))] + element, values.dtype)
    out[...] = fill
    if out.shape[0] == 0:
        return [out.reshape(dims)]
    kept = min(first_dim, dims[0])
    index = np.where(np.arange(max(first_dim, 0)) < kept, np.arange(max(first_dim, 0)) * multipliers[0], -1)
    for level in range(1, ragged_rank + 1):
        index = _output_index(types[level - 1], partitions[level - 1], index, multipliers[level], dims[level])
    if index.size > values.shape[0]:
        raise KernelError(f"the row partitions address {index.size} values but there are {values.shape[0]} "
                          "(TF's kernel reads out of bounds)")
    taken = np.flatnonzero(index >= 0)
    if np.any(np.diff(index[taken]) <= 0):
        raise KernelError("row partitions must be sorted (TF's kernel writes out of bounds otherwise)")
    out[index[taken]] = values[taken]
    return [out.reshape(dims)]


def _output_dims(requested: list[int] | None, values: Array, ragged_rank: int, first_dim: int) -> list[int]:
    """TF's CombineRaggedTensorToTensorShapes: the requested shape with the values' uniform dims filled in."""
    rank = ragged_rank + values.ndim
    dims = [-1] * rank if requested is None else list(requested)
    if len(dims) != rank:
        raise KernelError(f"rt_input.shape and shape={requested} are incompatible: rt_input.rank = {rank} "
                          f"but shape.rank = {len(dims)}")
    for i in range(1, values.ndim):
        at = rank - values.ndim + i
        if dims[at] >= 0 and dims[at] != values.shape[i]:
            raise KernelError(f"rt_input.shape and shape={requested} are incompatible: rt_input.shape[{at}] = "
                              f"{values.shape[i]} but shape[{at}] = {dims[at]}")
        dims[at] = values.shape[i]
    if dims[0] < 0:
        dims[0] = first_dim
    return dims


# ---------------------------------------------------------------- variants
@dataclass(frozen=True)
class RaggedVariant:
    """One encoded ragged tensor: its nested splits (maybe none) and its flat values."""

    splits: tuple[Array, ...]
    values: Array


def _variant_array(items: Sequence[RaggedVariant], shape: tuple[int, ...]) -> Array:
    out = np.empty(len(items), dtype=object)
    for i, item in enumerate(items):
        out[i] = item
    return out.reshape(shape)


def _components(attrs: Attrs, inputs: list[Array]) -> tuple[list[Array], Array]:
    count = int(attr(attrs, "RAGGED_RANK", len(inputs) - 1))
    if count < 0 or len(inputs) != count + 1:
        raise KernelError(f"RAGGED_RANK={count} but {len(inputs) - 1} splits were given")
    return [np.asarray(s) for s in inputs[:-1]], np.asarray(inputs[-1])


@kernel("RaggedTensorToVariant")
def _to_variant(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    nested, values = _components(attrs, inputs)
    if nested:
        _check_nested(nested, values)
    if not attr(attrs, "batched_input", False):
        return [_variant_array([RaggedVariant(tuple(nested), values)], ())]
    if not nested:
        raise KernelError("ragged_rank must be greater than 0 when batched_input is true")
    rows: list[RaggedVariant] = []
    splits0 = nested[0].astype(np.int64)
    for r in range(splits0.size - 1):
        start, limit = int(splits0[r]), int(splits0[r + 1])
        inner: list[Array] = []
        for splits in nested[1:]:
            part = splits[start:limit + 1]
            inner.append((part - part[0]).astype(splits.dtype))
            start, limit = int(splits[start]), int(splits[limit])
        rows.append(RaggedVariant(tuple(inner), values[start:limit]))
    return [_variant_array(rows, (len(rows),))]


def _decoded(item: object, ragged_rank: int, split_type: np.dtype, value_type: np.dtype) -> RaggedVariant:
    if not isinstance(item, RaggedVariant):
        raise KernelError("encoded_ragged does not hold ragged tensors")
    if len(item.splits) != ragged_rank:
        raise KernelError(f"Encoded input RaggedVariant has ragged_rank={len(item.splits)}.  "
                          f"Expected ragged_rank={ragged_rank}.")
    if any(s.dtype != split_type for s in item.splits):
        raise KernelError(f"Expected row_splits Tensor dtype: {split_type}")
    if item.values.dtype != value_type:
        raise KernelError(f"Expected values Tensor dtype: {value_type}, found: {item.values.dtype}")
    return item


@kernel("RaggedTensorFromVariant")
def _from_variant(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    encoded = np.asarray(inputs[0])
    output_rank = int(attr(attrs, "output_ragged_rank"))
    input_rank = int(attr(attrs, "input_ragged_rank", -1))
    if input_rank == -1:
        input_rank = output_rank - encoded.ndim
    if input_rank < 0 or input_rank + encoded.ndim != output_rank:
        raise KernelError(f"output_ragged_rank ({output_rank}) must equal input_ragged_rank ({input_rank}) + "
                          f"encoded_ragged.dims() ({encoded.ndim})")
    split_type = dtype_attr(attrs, "Tsplits", np.int64)
    value_type = dtype_attr(attrs, "Tvalues")
    items = [_decoded(x, input_rank, split_type, value_type) for x in encoded.reshape(-1)]
    if encoded.ndim == 0:
        return [*items[0].splits, items[0].values]
    return _stacked(items, encoded.shape, split_type, value_type)


def _stacked(items: list[RaggedVariant], batch: tuple[int, ...], split_type: np.dtype,
             value_type: np.dtype) -> list[Array]:
    """A batch of ragged tensors as one with a ragged dimension per batch axis (the uniform ones as splits)."""
    out: list[Array] = []
    rows = 1
    for dim in range(len(batch) - 1):
        rows *= batch[dim]
        out.append((np.arange(rows + 1, dtype=np.int64) * batch[dim + 1]).astype(split_type))
    levels = len(items[0].splits) if items else 0
    if not levels and any(x.values.ndim == 0 for x in items):
        raise KernelError("a batch of ragged_rank-0 components needs values of rank >= 1")
    firsts = [len(x.splits[0]) - 1 if levels else x.values.shape[0] for x in items]
    out.append(np.concatenate([[0], np.cumsum(firsts, dtype=np.int64)]).astype(split_type))
    for level in range(levels):
        pieces, offset = [np.zeros(1, np.int64)], 0
        for x in items:
            pieces.append(x.splits[level][1:].astype(np.int64) + offset)
            offset += int(x.splits[level][-1])
        out.append(np.concatenate(pieces).astype(split_type))
    inner = {x.values.shape[1:] for x in items}
    if len(inner) > 1:
        raise KernelError("Expected all ragged components to have the same inner shape")
    if items:
        values = np.concatenate([x.values for x in items])
    else:
        values = np.zeros((0,), value_type)
    return out + [values]
