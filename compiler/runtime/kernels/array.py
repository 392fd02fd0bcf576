"""Shape manipulation, slicing, gathering, padding and other data movement.

These ops never change values, only where they sit, so the kernels are thin
wrappers over numpy indexing.  What they add is TF's validation (numpy would
wrap negative gather indices or silently clamp a slice TF rejects) and TF's
conventions for axis arguments, masks and output index types.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .common import (accumulator, attr, axis_index, checked_shape, choice, dtype_attr, int_list, int_vector,
                     scalar_int)
from .registry import KernelError, kernel

Array = np.ndarray
Attrs = Mapping[str, object]

_INT32 = np.dtype(np.int32)
_INT64 = np.dtype(np.int64)


# ---------------------------------------------------------------- pass-through


@kernel("NoOp")
def _no_op(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    return []


@kernel("Identity", "StopGradient", "PreventGradient", "Snapshot")
def _identity(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    return [inputs[0]]


@kernel("IdentityN")
def _identity_n(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    return list(inputs)


@kernel("CheckNumerics", "CheckNumericsV2")
def _check_numerics(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """Fail like TF does when a float tensor holds NaN or Inf."""
    x = inputs[0]
    if x.dtype.kind in "fc" or "float" in x.dtype.name:
        message = attr(attrs, "message", "")
        wide = x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)
        if np.any(np.isnan(wide)):
            raise KernelError(f"{message} : Tensor had NaN values")
        if np.any(np.isinf(wide)):
            raise KernelError(f"{message} : Tensor had Inf values")
    return [x]


@kernel("Assert")
def _assert(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """Fail like TF does when the condition is false, showing the first `summarize` values of each
    data tensor; no outputs (readers wait on it through control edges)."""
    condition = np.asarray(inputs[0])
    if condition.shape != () or condition.dtype != np.bool_:
        raise KernelError(f"condition must be a scalar bool, got {condition.dtype} {list(condition.shape)}")
    if not condition:
        shown = int(attr(attrs, "summarize", 3))
        parts = [str(np.asarray(d).reshape(-1)[:shown].tolist()) for d in inputs[1:]]
        raise KernelError("assertion failed: " + " ".join(parts))
    return []


# ---------------------------------------------------------------- shapes


def _shape_type(attrs: Attrs) -> np.dtype:
    return dtype_attr(attrs, "out_type", _INT32)


@kernel("Shape")
def _shape(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    return [np.array(inputs[0].shape, dtype=_shape_type(attrs))]


@kernel("ShapeN")
def _shape_n(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    return [np.array(x.shape, dtype=_shape_type(attrs)) for x in inputs]


@kernel("Size")
def _size(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    return [np.array(inputs[0].size, dtype=_shape_type(attrs))]


@kernel("Rank")
def _rank(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    return [np.array(inputs[0].ndim, dtype=_INT32)]


@kernel("Reshape")
def _reshape(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    x, shape = inputs
    dims = int_vector(shape)
    if dims.count(-1) > 1:
        raise KernelError(f"only one input size may be -1, got {dims}")
    known = int(np.prod([d for d in dims if d != -1], dtype=np.int64))
    if -1 in dims:
        if known == 0 or x.size % known:
            raise KernelError(f"cannot reshape {list(x.shape)} to {dims}")
        dims[dims.index(-1)] = x.size // known
    elif known != x.size:
        raise KernelError(f"cannot reshape {list(x.shape)} ({x.size} elements) to {dims}")
    return [x.reshape(dims)]


@kernel("Squeeze")
def _squeeze(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    x = inputs[0]
    dims = int_list(attrs, "squeeze_dims", [])
    if not dims:
        return [x.reshape([d for d in x.shape if d != 1])]
    axes = {axis_index(d, x.ndim) for d in dims}
    for a in axes:
        if x.shape[a] != 1:
            raise KernelError(f"cannot squeeze dim {a} of size {x.shape[a]}")
    return [x.reshape([d for i, d in enumerate(x.shape) if i not in axes])]


@kernel("ExpandDims")
def _expand_dims(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    x, dim = inputs
    axis = axis_index(scalar_int(dim, "dim"), x.ndim + 1)
    return [np.expand_dims(x, axis)]


def _permuted(x: Array, perm: Array) -> Array:
    order = int_vector(perm)
    if sorted(order) != list(range(x.ndim)):
        raise KernelError(f"{order} is not a permutation of rank {x.ndim}")
    return np.transpose(x, order)


@kernel("Transpose")
def _transpose(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    return [_permuted(*inputs)]


@kernel("ConjugateTranspose")
def _conjugate_transpose(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    out = _permuted(*inputs)
    return [np.conj(out) if out.dtype.kind == "c" else out]


@kernel("InvertPermutation")
def _invert_permutation(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    x = inputs[0]
    if x.ndim != 1 or sorted(int_vector(x)) != list(range(x.size)):
        raise KernelError(f"{int_vector(x)} is not a permutation")
    y = np.empty_like(x)
    y[x] = np.arange(x.size, dtype=x.dtype)
    return [y]


@kernel("BroadcastArgs")
def _broadcast_args(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    s0, s1 = inputs
    return [np.array(np.broadcast_shapes(tuple(int_vector(s0)), tuple(int_vector(s1))),
                     dtype=s0.dtype)]


@kernel("BroadcastTo")
def _broadcast_to(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    x, shape = inputs
    return [np.broadcast_to(x, checked_shape(int_vector(shape), x.itemsize)).copy()]


# ---------------------------------------------------------------- concat / split


def _concat(values: list[Array], axis: int) -> Array:
    rank = values[0].ndim
    return np.concatenate(values, axis=axis_index(axis, rank))


@kernel("ConcatV2")
def _concat_v2(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    *values, axis = inputs
    return [_concat(values, scalar_int(axis, "axis"))]


@kernel("Concat")
def _concat_v1(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    axis, *values = inputs
    return [_concat(values, scalar_int(axis, "concat_dim"))]


@kernel("Pack")
def _pack(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    axis = int(attr(attrs, "axis", 0))  # type: ignore[arg-type]
    return [np.stack(inputs, axis=axis_index(axis, inputs[0].ndim + 1))]


@kernel("Unpack")
def _unpack(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    x = inputs[0]
    axis = axis_index(int(attr(attrs, "axis", 0)), x.ndim)  # type: ignore[arg-type]
    num = attr(attrs, "num", x.shape[axis])
    if num != x.shape[axis]:
        raise KernelError(f"num {num} != dimension {x.shape[axis]}")
    return list(np.moveaxis(x, axis, 0))


@kernel("Split")
def _split(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    split_dim, x = inputs
    axis = axis_index(scalar_int(split_dim, "split_dim"), x.ndim)
    num = int(attr(attrs, "num_split"))  # type: ignore[arg-type]
    if num <= 0 or x.shape[axis] % num:
        raise KernelError(f"dimension {x.shape[axis]} not divisible into {num} splits")
    return np.split(x, num, axis=axis)


@kernel("SplitV")
def _split_v(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    x, size_splits, split_dim = inputs
    axis = axis_index(scalar_int(split_dim, "split_dim"), x.ndim)
    sizes = int_vector(size_splits)
    if sizes.count(-1) > 1:
        raise KernelError("at most one size_splits entry may be -1")
    if -1 in sizes:
        sizes[sizes.index(-1)] = x.shape[axis] - (sum(sizes) + 1)
    if sum(sizes) != x.shape[axis] or min(sizes, default=0) < 0:
        raise KernelError(f"size_splits {sizes} do not sum to dimension {x.shape[axis]}")
    return np.split(x, np.cumsum(sizes)[:-1], axis=axis)


# ---------------------------------------------------------------- padding


def _pad_widths(x: Array, paddings: Array) -> list[tuple[int, int]]:
    pads = np.asarray(paddings).reshape(-1, 2)
    if pads.shape[0] != x.ndim:
        raise KernelError(f"paddings has {pads.shape[0]} rows for rank {x.ndim}")
    if np.any(pads < 0):
        raise KernelError("paddings must be non-negative")
    widths = [(int(a), int(b)) for a, b in pads]
    checked_shape([d + a + b for d, (a, b) in zip(x.shape, widths)], x.itemsize)
    return widths


@kernel("Pad")
def _pad(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    x, paddings = inputs
    return [np.pad(x, _pad_widths(x, paddings))]


@kernel("PadV2")
def _pad_v2(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    x, paddings, value = inputs
    return [np.pad(x, _pad_widths(x, paddings), constant_values=np.asarray(value).reshape(()))]


def mirror_pad(x: Array, widths: list[tuple[int, int]], mode: str) -> Array:
    """REFLECT excludes the edge element, SYMMETRIC repeats it; TF forbids pads
    wider than the dimension allows (numpy would reflect repeatedly)."""
    slack = 1 if mode == "REFLECT" else 0
    for dim, (before, after) in zip(x.shape, widths):
        if max(before, after) > dim - slack:
            raise KernelError(f"{mode} paddings {before, after} too large for dimension {dim}")
    return np.pad(x, widths, mode="reflect" if mode == "REFLECT" else "symmetric")


@kernel("MirrorPad")
def _mirror_pad(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    x, paddings = inputs
    mode = choice(attrs, "mode", ("REFLECT", "SYMMETRIC"))
    return [mirror_pad(x, _pad_widths(x, paddings), mode)]


# ---------------------------------------------------------------- slicing


@kernel("Slice")
def _slice(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    x, begin, size = inputs
    starts, sizes = int_vector(begin), int_vector(size)
    if len(starts) != x.ndim or len(sizes) != x.ndim:
        raise KernelError(f"begin/size length must equal rank {x.ndim}")
    index = []
    for dim, b, s in zip(x.shape, starts, sizes):
        s = dim - b if s == -1 else s
        if b < 0 or s < 0 or b + s > dim:
            raise KernelError(f"slice begin {b} size {s} out of bounds for dimension {dim}")
        index.append(slice(b, b + s))
    return [x[tuple(index)]]


def _bit(mask: int, i: int) -> bool:
    return bool(mask >> i & 1)


def strided_slice_index(shape: tuple[int, ...], begin: list[int], end: list[int],
                        strides: list[int], masks: Mapping[str, int]) -> tuple[object, ...]:
    """Translate a StridedSlice spec into a numpy basic index.

    numpy's slice clamping equals TF's canonicalisation; what needs care is
    that shrink axes use `begin` alone (masks ignored, bounds checked) and
    that TF allows at most one ellipsis."""
    index: list[object] = []
    seen_ellipsis = False
    # Spec entries that consume an input dimension; the ellipsis covers the rest.
    consuming = sum(1 for i in range(len(begin)) if not _bit(masks["new_axis_mask"], i)
                    and not _bit(masks["ellipsis_mask"], i))
    dim = 0  # the input dimension the next consuming entry applies to
    for i, (b, e, s) in enumerate(zip(begin, end, strides)):
        if _bit(masks["ellipsis_mask"], i):
            if seen_ellipsis:
                raise KernelError("multiple ellipses in slice spec not allowed")
            seen_ellipsis = True
            index.append(Ellipsis)
            dim += max(len(shape) - consuming, 0)
            continue
        if _bit(masks["new_axis_mask"], i):
            index.append(None)
            continue
        if s == 0:
            raise KernelError(f"strides[{i}] must be non-zero")
        if dim >= len(shape):
            raise KernelError(f"slice spec has more dimensions than rank {len(shape)}")
        size = shape[dim]
        if _bit(masks["shrink_axis_mask"], i):
            if s < 0:
                raise KernelError("only stride 1 allowed on non-range indexing")
            at = b + size if b < 0 else b
            if not 0 <= at < size:
                raise KernelError(f"slice index {b} of dimension {dim} out of bounds")
            index.append(at)
        else:
            start = None if _bit(masks["begin_mask"], i) else b
            stop = None if _bit(masks["end_mask"], i) else e
            index.append(slice(start, stop, s))
        dim += 1
    return tuple(index)


# StridedSlice's mask attributes, which `strided_slice_index` reads by name.
SLICE_MASKS = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")


def strided_slice_operands(attrs: Attrs, shape: tuple[int, ...], begin: Array, end: Array,
                           strides: Array) -> tuple[object, ...]:
    """The numpy index of a StridedSlice (or StridedSliceGrad: the region its gradient fills) of
    a tensor of `shape`, from the op's begin/end/strides operands and mask attributes."""
    b, e, s = int_vector(begin), int_vector(end), int_vector(strides)
    if not len(b) == len(e) == len(s):
        raise KernelError("begin, end and strides must have equal length")
    masks = {name: int(attr(attrs, name, 0)) for name in SLICE_MASKS}  # type: ignore[arg-type]
    return strided_slice_index(shape, b, e, s, masks)


@kernel("StridedSlice")
def _strided_slice(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    x, begin, end, strides = inputs
    return [np.array(x[strided_slice_operands(attrs, x.shape, begin, end, strides)])]


# ---------------------------------------------------------------- construction


@kernel("Fill")
def _fill(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    dims, value = inputs
    value = np.asarray(value)
    if value.ndim != 0:
        raise KernelError("value must be a scalar")
    return [np.full(checked_shape(int_vector(dims), value.itemsize), value, dtype=value.dtype)]


@kernel("ZerosLike")
def _zeros_like(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    return [np.zeros_like(inputs[0])]


@kernel("OnesLike")
def _ones_like(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    return [np.ones_like(inputs[0])]


@kernel("Tile")
def _tile(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    x, multiples = inputs
    reps = int_vector(multiples)
    if len(reps) != x.ndim or min(reps, default=0) < 0:
        raise KernelError(f"multiples {reps} invalid for rank {x.ndim}")
    checked_shape([d * r for d, r in zip(x.shape, reps)], x.itemsize)
    return [np.tile(x, reps) if reps else x.copy()]


@kernel("OneHot")
def _one_hot(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """Out-of-range (including negative) indices give an all-`off` row."""
    indices, depth, on_value, off_value = inputs
    n = scalar_int(depth, "depth")
    if n < 0:
        raise KernelError(f"depth must be non-negative, got {n}")
    axis = int(attr(attrs, "axis", -1))  # type: ignore[arg-type]
    if not -1 <= axis <= indices.ndim:
        raise KernelError(f"axis {axis} out of range for rank {indices.ndim}")
    checked_shape([*indices.shape, n], 8)
    hot = indices[..., None].astype(np.int64) == np.arange(n)
    out = np.where(hot, np.asarray(on_value).reshape(()), np.asarray(off_value).reshape(()))
    out = out.astype(on_value.dtype, copy=False)
    return [out if axis == -1 else np.moveaxis(out, -1, axis)]


@kernel("Where")
def _where(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """Coordinates of true (non-zero) elements, row-major, as int64."""
    return [np.argwhere(inputs[0]).astype(_INT64)]


# ---------------------------------------------------------------- gathers


def _check_indices(indices: Array, limit: int, what: str) -> None:
    if indices.size and (indices.min() < 0 or indices.max() >= limit):
        bad = indices[(indices < 0) | (indices >= limit)].reshape(-1)[0]
        raise KernelError(f"{what} index {bad} is not in [0, {limit})")


def gather(params: Array, indices: Array, axis: int, batch_dims: int) -> Array:
    """`params` gathered along `axis`, the first `batch_dims` dims paired up."""
    if batch_dims < 0:
        batch_dims += indices.ndim
    if axis < 0:
        axis += params.ndim
    if not 0 <= batch_dims <= axis < params.ndim or batch_dims > indices.ndim:
        raise KernelError(f"invalid axis {axis} / batch_dims {batch_dims}")
    if params.shape[:batch_dims] != indices.shape[:batch_dims]:
        raise KernelError("params and indices batch dimensions differ")
    _check_indices(indices, params.shape[axis], "gather")
    if batch_dims == 0:
        return np.take(params, indices, axis=axis)
    batch = params.shape[:batch_dims]
    flat_p = params.reshape((-1,) + params.shape[batch_dims:])
    flat_i = indices.reshape((-1,) + indices.shape[batch_dims:])
    parts = [np.take(p, i, axis=axis - batch_dims) for p, i in zip(flat_p, flat_i)]
    tail = params.shape[batch_dims:axis] + indices.shape[batch_dims:] + params.shape[axis + 1:]
    return np.stack(parts).reshape(batch + tail) if parts else np.zeros(batch + tail, params.dtype)


@kernel("Gather")
def _gather_v1(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    params, indices = inputs
    return [gather(params, indices, 0, 0)]


@kernel("GatherV2")
def _gather_v2(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    params, indices, axis = inputs
    batch_dims = int(attr(attrs, "batch_dims", 0))  # type: ignore[arg-type]
    return [gather(params, indices, scalar_int(axis, "axis"), batch_dims)]


@kernel("GatherNd")
def _gather_nd(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """Bad indices fail, unless bad_indices_policy is IGNORE (zeros instead)."""
    params, indices = inputs
    policy = choice(attrs, "bad_indices_policy", ("", "DEFAULT", "ERROR", "IGNORE"), "")
    depth = indices.shape[-1] if indices.ndim else 0
    if indices.ndim == 0 or depth > params.ndim:
        raise KernelError(f"index depth {depth} exceeds params rank {params.ndim}")
    flat = indices.reshape(-1, depth).astype(np.int64)
    limits = np.array(params.shape[:depth], dtype=np.int64)
    bad = np.any((flat < 0) | (flat >= limits), axis=1)
    if np.any(bad) and policy != "IGNORE":
        raise KernelError(f"index {flat[bad][0].tolist()} does not index into {list(params.shape)}")
    safe = np.where(bad[:, None], 0, flat)
    out = params[tuple(safe.T)] if depth else np.broadcast_to(params, (len(flat),) + params.shape)
    out = np.where(bad.reshape((-1,) + (1,) * (out.ndim - 1)), np.zeros((), params.dtype), out)
    return [out.reshape(indices.shape[:-1] + params.shape[depth:]).astype(params.dtype)]


# ---------------------------------------------------------------- reorder


@kernel("ReverseV2")
def _reverse_v2(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    x, axis = inputs
    axes = {axis_index(a, x.ndim) for a in int_vector(axis)}
    return [np.flip(x, tuple(sorted(axes))).copy() if axes else x]


def _scan(attrs: Attrs, inputs: list[Array], product: bool) -> Array:
    x, axis_t = inputs
    axis = axis_index(scalar_int(axis_t, "axis"), x.ndim)
    reverse, exclusive = bool(attr(attrs, "reverse", False)), bool(attr(attrs, "exclusive", False))
    v = np.flip(x, axis) if reverse else x
    fn = np.cumprod if product else np.cumsum
    out = fn(v, axis=axis, dtype=accumulator(x.dtype))
    if exclusive:
        first = np.ones_like(np.take(out, [0], axis=axis)) if product else \
            np.zeros_like(np.take(out, [0], axis=axis))
        out = np.concatenate([first, np.take(out, np.arange(x.shape[axis] - 1), axis=axis)], axis)
    return (np.flip(out, axis) if reverse else out).astype(x.dtype)


@kernel("Cumsum")
def _cumsum(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    return [_scan(attrs, inputs, product=False)]


@kernel("Cumprod")
def _cumprod(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    return [_scan(attrs, inputs, product=True)]


def top_k(x: Array, k: int, index_type: np.dtype) -> list[Array]:
    """Largest k along the last axis; equal values keep ascending index order,
    as TF's stable CPU kernel returns them."""
    if x.ndim < 1 or not 0 <= k <= x.shape[-1]:
        raise KernelError(f"k {k} out of range for input shape {list(x.shape)}")
    n = x.shape[-1]
    order = (n - 1) - np.argsort(x[..., ::-1], axis=-1, kind="stable")[..., ::-1]
    indices = order[..., :k]
    return [np.take_along_axis(x, indices, axis=-1), indices.astype(index_type)]


@kernel("TopKV2")
def _top_k_v2(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    x, k = inputs
    return top_k(x, scalar_int(k, "k"), dtype_attr(attrs, "index_type", _INT32))


@kernel("TopK")
def _top_k_v1(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    return top_k(inputs[0], int(attr(attrs, "k")), _INT32)  # type: ignore[arg-type]


@kernel("NthElement")
def _nth_element(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """The n-th smallest (reverse: largest) value along the last axis, which goes away."""
    x, n = np.asarray(inputs[0]), scalar_int(inputs[1], "n")
    if x.ndim < 1 or not 0 <= n < x.shape[-1]:
        raise KernelError(f"n {n} must lie in [0, {x.shape[-1] if x.ndim else 0}) for input {list(x.shape)}")
    ordered = np.sort(x, axis=-1)
    return [ordered[..., -1 - n] if attr(attrs, "reverse", False) else ordered[..., n]]


# ---------------------------------------------------------------- space/depth/batch


def _to_nhwc(x: Array, data_format: str) -> Array:
    return x.transpose(0, 2, 3, 1) if data_format == "NCHW" else x


def _from_nhwc(x: Array, data_format: str) -> Array:
    return x.transpose(0, 3, 1, 2) if data_format == "NCHW" else x


def _block(attrs: Attrs) -> int:
    b = int(attr(attrs, "block_size"))  # type: ignore[arg-type]
    if b < 2:
        raise KernelError(f"block_size must be at least 2, got {b}")
    return b


@kernel("SpaceToDepth")
def _space_to_depth(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """Output depth index is (row_in_block * b + col_in_block) * C + c."""
    fmt = choice(attrs, "data_format", ("NHWC", "NCHW"), "NHWC")
    b, x = _block(attrs), _to_nhwc(inputs[0], fmt)
    n, h, w, c = x.shape
    if h % b or w % b:
        raise KernelError(f"spatial dims {h}x{w} not divisible by block_size {b}")
    y = x.reshape(n, h // b, b, w // b, b, c).transpose(0, 1, 3, 2, 4, 5)
    return [_from_nhwc(y.reshape(n, h // b, w // b, b * b * c), fmt)]


@kernel("DepthToSpace")
def _depth_to_space(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    fmt = choice(attrs, "data_format", ("NHWC", "NCHW"), "NHWC")
    b, x = _block(attrs), _to_nhwc(inputs[0], fmt)
    n, h, w, c = x.shape
    if c % (b * b):
        raise KernelError(f"depth {c} not divisible by block_size^2 {b * b}")
    y = x.reshape(n, h, w, b, b, c // (b * b)).transpose(0, 1, 3, 2, 4, 5)
    return [_from_nhwc(y.reshape(n, h * b, w * b, c // (b * b)), fmt)]


@kernel("SpaceToBatchND")
def _space_to_batch_nd(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    x, block_shape, paddings = inputs
    blocks = int_vector(block_shape)
    m = len(blocks)
    pads = np.asarray(paddings).reshape(m, 2).tolist()
    padded = [d + sum(p) for d, p in zip(x.shape[1:1 + m], pads)]
    checked_shape([x.shape[0], *padded, *x.shape[1 + m:]], x.itemsize)
    x = np.pad(x, [(0, 0)] + [tuple(p) for p in pads] + [(0, 0)] * (x.ndim - 1 - m))
    spatial = x.shape[1:1 + m]
    if any(s % b for s, b in zip(spatial, blocks)):
        raise KernelError(f"padded spatial shape {list(spatial)} not divisible by {blocks}")
    split = [x.shape[0]]
    for s, b in zip(spatial, blocks):
        split += [s // b, b]
    y = x.reshape(split + list(x.shape[1 + m:]))
    perm = [2 + 2 * i for i in range(m)] + [0] + [1 + 2 * i for i in range(m)]
    perm += list(range(1 + 2 * m, y.ndim))
    y = y.transpose(perm)
    out_shape = [x.shape[0] * int(np.prod(blocks))] + [s // b for s, b in zip(spatial, blocks)]
    return [y.reshape(out_shape + list(x.shape[1 + m:]))]


@kernel("BatchToSpaceND")
def _batch_to_space_nd(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    x, block_shape, crops = inputs
    blocks = int_vector(block_shape)
    m = len(blocks)
    total = int(np.prod(blocks))
    if x.shape[0] % total:
        raise KernelError(f"batch {x.shape[0]} not divisible by block product {total}")
    batch = x.shape[0] // total
    y = x.reshape(blocks + [batch] + list(x.shape[1:]))
    perm = [m]
    for i in range(m):
        perm += [m + 1 + i, i]
    perm += list(range(2 * m + 1, y.ndim))
    y = y.transpose(perm)
    spatial = [s * b for s, b in zip(x.shape[1:1 + m], blocks)]
    y = y.reshape([batch] + spatial + list(x.shape[1 + m:]))
    cuts = np.asarray(crops).reshape(m, 2).tolist()
    index = [slice(None)] + [slice(a, s - b) for (a, b), s in zip(cuts, spatial)]
    return [y[tuple(index)]]


@kernel("Roll")
def _roll(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """Shifts add up when an axis is named twice, as TF sums them."""
    x, shift, axis = inputs
    shifts, axes = int_vector(shift), int_vector(axis)
    if len(shifts) != len(axes):
        raise KernelError(f"shift {shifts} and axis {axes} differ in length")
    if not axes:
        return [x]
    return [np.roll(x, shifts, [axis_index(a, x.ndim) for a in axes])]


@kernel("ReverseSequence")
def _reverse_sequence(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """The first seq_lengths[b] steps along seq_dim of each batch entry b, reversed."""
    x, lengths = inputs
    seq = axis_index(int(attr(attrs, "seq_dim")), x.ndim)  # type: ignore[arg-type]
    batch = axis_index(int(attr(attrs, "batch_dim", 0)), x.ndim)  # type: ignore[arg-type]
    counts = int_vector(lengths)
    if seq == batch or len(counts) != x.shape[batch]:
        raise KernelError(f"seq_dim {seq}, batch_dim {batch} and {len(counts)} lengths do not fit {list(x.shape)}")
    if any(not 0 <= n <= x.shape[seq] for n in counts):
        raise KernelError(f"seq_lengths {counts} must lie in [0, {x.shape[seq]}]")
    out = np.moveaxis(x, (batch, seq), (0, 1)).copy()
    for b, n in enumerate(counts):
        out[b, :n] = out[b, :n][::-1]
    return [np.moveaxis(out, (0, 1), (batch, seq))]


def _unique(x: Array, index_type: np.dtype) -> tuple[Array, Array, Array]:
    """(values in order of first appearance, each element's position among them, counts)."""
    if x.ndim != 1:
        raise KernelError(f"input must be a vector, got shape {list(x.shape)}")
    values, first, inverse, counts = np.unique(x, return_index=True, return_inverse=True, return_counts=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return values[order], rank[inverse.reshape(-1)].astype(index_type), counts[order].astype(index_type)


@kernel("Unique")
def _unique_kernel(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    values, index, _ = _unique(inputs[0], dtype_attr(attrs, "out_idx", _INT32))
    return [values, index]


@kernel("UniqueWithCounts")
def _unique_with_counts(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    return list(_unique(inputs[0], dtype_attr(attrs, "out_idx", _INT32)))


@kernel("ListDiff")
def _list_diff(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """tf.setdiff1d: the elements of x not in y, in x's order (repeats kept), and their positions."""
    x, y = inputs
    if x.ndim != 1 or y.ndim != 1:
        raise KernelError(f"x and y must be vectors, got shapes {list(x.shape)} and {list(y.shape)}")
    keep = ~np.isin(x, y)
    return [x[keep], np.flatnonzero(keep).astype(dtype_attr(attrs, "out_idx", _INT32))]


@kernel("EnsureShape")
def _ensure_shape(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """The input, when its shape is compatible with the stated one."""
    x, stated = inputs[0], attr(attrs, "shape")
    dims = getattr(stated, "dims", stated)
    if dims is not None and (len(dims) != x.ndim or any(d not in (None, -1, n) for d, n in zip(dims, x.shape))):
        raise KernelError(f"shape {list(x.shape)} is not compatible with the expected shape {list(dims)}")
    return [x]
