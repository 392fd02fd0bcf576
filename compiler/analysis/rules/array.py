"""Shape rules of shape-manipulating ops: reshapes, joins, splits, slices, gathers, reductions."""
from __future__ import annotations

import math
from typing import Optional

import numpy as np

from compiler.analysis.rules.elementwise import same_shape
from compiler.analysis.rules.registry import OpFacts, broadcast, normalize_axis, shape_rule, unknown_rank
from compiler.ir.attrs import attr_text
from compiler.ir.dtypes import DType
from compiler.ir.shapes import MAX_RANK, Shape, UNKNOWN_SHAPE
from compiler.runtime.kernels.array import SLICE_MASKS, strided_slice_index
from compiler.runtime.kernels.linalg import diag_size
from compiler.runtime.kernels.registry import KernelError


@shape_rule("Placeholder", "PlaceholderV2", "PlaceholderWithDefault")
def _placeholder(facts: OpFacts) -> Optional[list[Shape]]:
    shape = facts.attr("shape")
    return [shape if isinstance(shape, Shape) else UNKNOWN_SHAPE]


@shape_rule("Reshape")
def _reshape(facts: OpFacts) -> Optional[list[Shape]]:
    target = facts.known_ints(1)
    if target is None:
        return None
    if None in target:  # computed at run time around a dynamic batch: the rank and the known sizes
        return [Shape(tuple(None if d is None or d < 0 else d for d in target))]
    dims: list[Optional[int]] = [None if d < 0 else d for d in target]
    if target.count(-1) == 1:
        total = facts.shapes[0].num_elements
        known = int(np.prod([d for d in target if d >= 0], dtype=np.int64))
        if total is not None and known:
            dims[target.index(-1)] = total // known
    return [Shape(tuple(dims))]


@shape_rule("Squeeze")
def _squeeze(facts: OpFacts) -> Optional[list[Shape]]:
    dims = facts.dims(0)
    if dims is None:
        return None
    axes = {normalize_axis(a, len(dims)) for a in facts.attr("squeeze_dims", ())}
    if not axes:
        if any(d is None for d in dims):
            return None
        axes = {i for i, d in enumerate(dims) if d == 1}
    return [Shape(tuple(d for i, d in enumerate(dims) if i not in axes))]


@shape_rule("ExpandDims")
def _expand_dims(facts: OpFacts) -> Optional[list[Shape]]:
    dims, axis = facts.dims(0), facts.ints(1)
    if dims is None or axis is None:
        return None
    at = normalize_axis(axis[0], len(dims) + 1)
    return [Shape(dims[:at] + (1,) + dims[at:])]


def _concat(shapes: list[Shape], axis: Optional[int]) -> Shape:
    """Every part has the join's rank, so one part of known rank gives it; sizes come from
    the parts that know them (the joined axis only when every part does)."""
    known = [s.dims for s in shapes if s.dims is not None]
    if axis is None or not known:
        return UNKNOWN_SHAPE
    rank = len(known[0])
    at = normalize_axis(axis, rank)
    out = []
    for i in range(rank):
        column = [dims[i] for dims in known]
        if i == at:
            out.append(None if None in column or len(known) < len(shapes) else sum(column))  # type: ignore
        else:
            out.append(next((d for d in column if d is not None), None))
    return Shape(tuple(out))


@shape_rule("ConcatV2")
def _concat_v2(facts: OpFacts) -> Optional[list[Shape]]:
    axis = facts.ints(len(facts.shapes) - 1)
    return [_concat(list(facts.shapes[:-1]), None if axis is None else axis[0])]


@shape_rule("Concat")
def _concat_v1(facts: OpFacts) -> Optional[list[Shape]]:
    axis = facts.ints(0)
    return [_concat(list(facts.shapes[1:]), None if axis is None else axis[0])]


@shape_rule("Pack")
def _pack(facts: OpFacts) -> Optional[list[Shape]]:
    first = facts.dims(0)
    if first is None:
        return None
    at = normalize_axis(facts.attr("axis", 0), len(first) + 1)
    return [Shape(first[:at] + (len(facts.shapes),) + first[at:])]


@shape_rule("Unpack")
def _unpack(facts: OpFacts) -> Optional[list[Shape]]:
    dims, count = facts.dims(0), facts.attr("num", 0)
    if dims is None:
        return unknown_rank(count)
    at = normalize_axis(facts.attr("axis", 0), len(dims))
    return [Shape(dims[:at] + dims[at + 1:])] * count


@shape_rule("Transpose")
def _transpose(facts: OpFacts) -> Optional[list[Shape]]:
    dims, perm = facts.dims(0), facts.ints(1)
    if dims is None or perm is None:
        return None
    return [Shape(tuple(dims[p] for p in perm))]


@shape_rule("Pad", "PadV2", "MirrorPad")
def _pad(facts: OpFacts) -> Optional[list[Shape]]:
    """Paddings known only at run time still keep the rank."""
    dims, pads = facts.dims(0), facts.ints(1)
    if dims is None:
        return None
    if pads is None:
        return [Shape((None,) * len(dims))]
    return [Shape(tuple(None if d is None else d + pads[2 * i] + pads[2 * i + 1] for i, d in enumerate(dims)))]


@shape_rule("Slice")
def _slice(facts: OpFacts) -> Optional[list[Shape]]:
    """size per axis (-1: the rest after begin); unknown where a size, or for -1 the begin or the
    dim, is known only at run time."""
    dims = facts.dims(0)
    if dims is None:
        return None
    begin, size = (_bounds(facts, i, len(dims)) for i in (1, 2))
    out = [(None if d is None or b is None else d - b) if s == -1 else s for d, b, s in zip(dims, begin, size)]
    return [Shape(tuple(out))]


@shape_rule("StridedSlice")
def _strided_slice(facts: OpFacts) -> Optional[list[Shape]]:
    """Index a zero-stride stand-in array of the input's shape: numpy does the arithmetic.

    An unknown dim is tried at several sizes, large and small; a result dim that comes out the same
    every time does not depend on it (a dynamic-batch RNN's `x[:, -1]` keeps its known feature dim,
    while `x[:1]` is 0 or 1 row).  A size at which TF would refuse the slice (an index past the end)
    is not a size the dim can have, and is skipped."""
    dims, strides = facts.shapes[0].dims, facts.ints(3)
    if dims is None or strides is None:
        return None
    begin, end = (_bounds(facts, i, len(strides)) for i in (1, 2))
    masks = {m: int(facts.attr(m, 0)) for m in SLICE_MASKS}
    stand_in = ([0 if b is None else b for b in begin], [0 if e is None else e for e in end])
    if None in dims:
        def sized(size: int) -> list[int]:
            return [size if d is None else d for d in dims]

        trials = [_sliced_shape(sized(s), *stand_in, strides, masks) for s in _STAND_INS]
        small = (_sliced_shape_or_none(sized(s), *stand_in, strides, masks) for s in _SMALL_STAND_INS)
        trials += [found for found in small if found is not None]
        out = [dim[0] if len(set(dim)) == 1 else None for dim in zip(*trials)]
    else:
        out = list(_sliced_shape(list(dims), *stand_in, strides, masks))
    for axis in _run_time_bounded(len(dims), begin, end, masks, len(strides)):
        out[axis] = None
    return [Shape(tuple(out))]


def _bounds(facts: OpFacts, index: int, length: int) -> list[Optional[int]]:
    """A begin or end vector's elements, None where known only at run time."""
    known = facts.known_ints(index)
    return known if known is not None and len(known) == length else [None] * length


def _run_time_bounded(rank: int, begin: list[Optional[int]], end: list[Optional[int]], masks: dict[str, int],
                      count: int) -> list[int]:
    """Result axes sliced by a begin or end element known only at run time (and not masked)."""
    def bit(name: str, i: int) -> bool:
        return bool(masks[name] >> i & 1)

    real = sum(1 for i in range(count) if not bit("new_axis_mask", i) and not bit("ellipsis_mask", i))
    axes, out = [], 0
    for i in range(count):
        if bit("ellipsis_mask", i):
            out += rank - real
        elif bit("new_axis_mask", i):
            out += 1
        elif not bit("shrink_axis_mask", i):
            if (begin[i] is None and not bit("begin_mask", i)) or (end[i] is None and not bit("end_mask", i)):
                axes.append(out)
            out += 1
    return axes


# Sizes standing in for an unknown dim: large, distinct, and not multiples of each other; then small
# ones, at which a slice bounded by constants comes out shorter.
_STAND_INS = (1000003, 1000033)
_SMALL_STAND_INS = (0, 1, 2)


def _sliced_shape(dims: list[int], begin, end, strides, masks: dict[str, int]) -> tuple[int, ...]:
    stand_in = np.broadcast_to(np.zeros((), np.int8), dims)
    return stand_in[strided_slice_index(dims, begin, end, strides, masks)].shape  # type: ignore[index]


def _sliced_shape_or_none(dims: list[int], begin, end, strides, masks: dict[str, int]) -> Optional[tuple[int, ...]]:
    """The sliced shape, or None when TF would refuse the slice at these dims."""
    try:
        return _sliced_shape(dims, begin, end, strides, masks)
    except (IndexError, KernelError):
        return None


@shape_rule("Gather", "GatherV2")
def _gather(facts: OpFacts) -> Optional[list[Shape]]:
    params, indices = facts.dims(0), facts.dims(1)
    axis = [0] if facts.op.type == "Gather" else facts.ints(2)
    if params is None or indices is None or axis is None:
        return None
    at = normalize_axis(axis[0], len(params))
    batch = facts.attr("batch_dims", 0)
    return [Shape(params[:at] + indices[batch:] + params[at + 1:])]


@shape_rule("Shape", "ShapeN")
def _shape(facts: OpFacts) -> Optional[list[Shape]]:
    """One vector per operand (ShapeN has several), as long as the operand's rank."""
    return [Shape((facts.rank(i),)) for i in range(len(facts.shapes))]


@shape_rule("Size", "Rank")
def _scalar(facts: OpFacts) -> Optional[list[Shape]]:
    return [Shape(())]


# Ops whose result shape is the value of one operand.
_SHAPE_OPERAND = {"Fill": 0, "BroadcastTo": 1, "RandomUniform": 0, "RandomStandardNormal": 0, "RandomUniformInt": 0,
                  "TruncatedNormal": 0, "StridedSliceGrad": 0, "ScatterNd": 2}


@shape_rule(*_SHAPE_OPERAND)
def _shape_from_operand(facts: OpFacts) -> Optional[list[Shape]]:
    """The shape operand's value; when only its length is known, that many unknown dims."""
    index = _SHAPE_OPERAND[facts.op.type]
    dims = facts.known_ints(index)
    if dims is not None:
        return [Shape(tuple(dims))]
    rank = _shape_vector_length(facts, index)
    return None if rank is None else [Shape((None,) * rank)]


def _shape_vector_length(facts: OpFacts, index: int) -> Optional[int]:
    """The static length of operand `index`, a shape vector: the result's rank, when it is one TF
    allows (a longer vector is refused at run time, and (None,) * length would not fit in memory)."""
    length = facts.dims(index)
    if length is None or len(length) != 1 or length[0] is None or length[0] > MAX_RANK:
        return None
    return length[0]


# Ops that reorder, accumulate along an axis, or overwrite some elements keep the shape.
shape_rule("ReverseV2", "Reverse", "ReverseSequence", "Roll", "Cumprod", "Cumsum", "EnsureShape", "Invert",
           "InvertPermutation", "MatrixBandPart", "MatrixSetDiag", "MatrixSetDiagV2", "MatrixSetDiagV3",
           "TensorScatterAdd", "TensorScatterMax", "TensorScatterMin", "TensorScatterSub",
           "TensorScatterUpdate", "XlaDynamicUpdateSlice")(same_shape)


@shape_rule("NthElement")
def _nth_element(facts: OpFacts) -> Optional[list[Shape]]:
    dims = facts.dims(0)
    return None if not dims else [Shape(dims[:-1])]


@shape_rule("Multinomial")
def _multinomial(facts: OpFacts) -> Optional[list[Shape]]:
    """[batch, num_samples]: one row of class indices per row of logits."""
    logits = facts.dims(0)
    samples = facts.known_ints(1)
    batch = logits[0] if logits is not None and len(logits) == 2 else None
    return [Shape((batch, samples[0] if samples is not None and len(samples) == 1 else None))]


@shape_rule("LowerBound", "UpperBound", "InTopK", "InTopKV2")
def _per_second_operand_element(facts: OpFacts) -> Optional[list[Shape]]:
    """One answer per value searched for (sorted search) or per target (in-top-k)."""
    return [facts.shapes[1]]


@shape_rule("Where")
def _where(facts: OpFacts) -> Optional[list[Shape]]:
    """The coordinates of the true elements: one row each, one column per input axis."""
    return [Shape((None, facts.rank(0)))]


@shape_rule("Unique", "UniqueWithCounts")
def _unique(facts: OpFacts) -> Optional[list[Shape]]:
    """Distinct values (how many is data-dependent), each input's index among them, and counts."""
    shapes = [Shape((None,)), facts.shapes[0]]
    return shapes + [Shape((None,))] if facts.op.type == "UniqueWithCounts" else shapes


@shape_rule("DynamicPartition")
def _dynamic_partition(facts: OpFacts) -> Optional[list[Shape]]:
    """num_partitions results, each the rows (over the partitions' axes) given its number:
    how many is data-dependent, the row shape is data's beyond those axes."""
    dims, axes = facts.dims(0), facts.rank(1)
    row = None if dims is None or axes is None else dims[axes:]
    shape = UNKNOWN_SHAPE if row is None else Shape((None,) + row)
    return [shape] * len(facts.op.results)


@shape_rule("ListDiff")
def _list_diff(facts: OpFacts) -> Optional[list[Shape]]:
    """The elements of x not in y and their positions: how many is data-dependent."""
    return [Shape((None,)), Shape((None,))]


@shape_rule("BroadcastArgs")
def _broadcast_args(facts: OpFacts) -> Optional[list[Shape]]:
    """The broadcast of two shape vectors is as long as the longer one."""
    lengths = [facts.dims(i) for i in range(2)]
    if any(d is None or len(d) != 1 or d[0] is None for d in lengths):
        return [Shape((None,))]
    return [Shape((max(d[0] for d in lengths),))]  # type: ignore[index]


@shape_rule("MatrixDeterminant")
def _determinant(facts: OpFacts) -> Optional[list[Shape]]:
    dims = facts.dims(0)
    return None if dims is None or len(dims) < 2 else [Shape(dims[:-2])]


@shape_rule("GatherNd")
def _gather_nd(facts: OpFacts) -> Optional[list[Shape]]:
    """indices[..., :k] picks slices params[i0, ..., ik-1]: indices' leading dims, params' trailing."""
    params, indices = facts.dims(0), facts.dims(1)
    if params is None or indices is None or not indices or indices[-1] is None:
        return None
    return [Shape(tuple(indices[:-1]) + tuple(params[indices[-1]:]))]


@shape_rule("TopKV2", "TopK")
def _top_k(facts: OpFacts) -> Optional[list[Shape]]:
    """Values and indices: the input with its last dim cut to k."""
    dims = facts.dims(0)
    if dims is None or not dims:
        return None
    if facts.op.type == "TopK":
        k: Optional[int] = int(facts.attr("k", -1))
    else:
        given = facts.ints(1)
        k = None if given is None else given[0]
    out = Shape(tuple(dims[:-1]) + (k if k is None or k >= 0 else None,))
    return [out, out]


@shape_rule("SegmentSum", "SegmentMean", "SegmentMax", "SegmentMin", "SegmentProd")
def _segment(facts: OpFacts) -> Optional[list[Shape]]:
    """As many rows as the largest segment id says (data-dependent), each a slice of the data."""
    dims = facts.dims(0)
    return None if dims is None else [Shape((None,) + tuple(dims[1:]))]


@shape_rule(*(f"SparseSegment{k}{n}" for k in ("Sum", "Mean", "SqrtN") for n in ("", "WithNumSegments")))
def _sparse_segment(facts: OpFacts) -> Optional[list[Shape]]:
    """One row per segment (num_segments, or the largest id + 1), each a slice of the data."""
    dims = facts.dims(0)
    if dims is None:
        return None
    count = facts.ints(3) if facts.op.type.endswith("WithNumSegments") else None
    return [Shape((None if count is None else count[0],) + tuple(dims[1:]))]


@shape_rule("UnsortedSegmentSum", "UnsortedSegmentMax", "UnsortedSegmentMin", "UnsortedSegmentProd")
def _unsorted_segment(facts: OpFacts) -> Optional[list[Shape]]:
    """num_segments rows; the ids' dims are replaced by that one."""
    dims, ids, count = facts.dims(0), facts.dims(1), facts.ints(2)
    if dims is None or ids is None:
        return None
    return [Shape((None if count is None else count[0],) + tuple(dims[len(ids):]))]


@shape_rule("NonMaxSuppression", "NonMaxSuppressionV2", "NonMaxSuppressionV3", "NonMaxSuppressionV4",
            "NonMaxSuppressionV5")
def _non_max_suppression(facts: OpFacts) -> Optional[list[Shape]]:
    """Selected box indices (padded to max_output_size when asked), scores (V5) and the valid count."""
    limit = facts.ints(2)
    padded = bool(facts.attr("pad_to_max_output_size", False)) and limit is not None
    selected = Shape((limit[0] if padded else None,))
    shapes = {"NonMaxSuppressionV4": [selected, Shape(())], "NonMaxSuppressionV5": [selected, selected, Shape(())]}
    return shapes.get(facts.op.type, [selected])


@shape_rule("CombinedNonMaxSuppression")
def _combined_non_max_suppression(facts: OpFacts) -> Optional[list[Shape]]:
    """Boxes [batch, rows, 4], scores and classes [batch, rows], valid counts [batch]; rows is
    max_total_size, or with pad_per_class at most max_output_size_per_class * classes."""
    scores, per_class, total = facts.dims(1), facts.ints(2), facts.ints(3)
    batch = scores[0] if scores is not None and len(scores) == 3 else None
    rows = None
    if total is not None and not facts.attr("pad_per_class", False):
        rows = total[0]
    elif total is not None and per_class is not None and scores is not None and scores[-1] is not None:
        rows = min(total[0], per_class[0] * scores[-1])
    return [Shape((batch, rows, 4)), Shape((batch, rows)), Shape((batch, rows)), Shape((batch,))]


@shape_rule("MatrixDiag", "MatrixDiagV2", "MatrixDiagV3")
def _matrix_diag(facts: OpFacts) -> Optional[list[Shape]]:
    """Batch dims, then TF's num_rows x num_cols (computed from the diagonals' length when -1)."""
    dims = facts.dims(0)
    if not dims:
        return None
    if facts.op.type == "MatrixDiag":
        return [Shape(dims + (dims[-1],))]
    k, rows, cols = facts.ints(1), facts.ints(2), facts.ints(3)
    if k is None or rows is None or cols is None or not k or dims[-1] is None:
        return None
    batch = dims[:-1] if k[0] == k[-1] else dims[:-2]
    try:
        return [Shape(batch + diag_size(dims[-1], k[0], k[-1], rows[0], cols[0]))]
    except KernelError:
        return None  # TF refuses it at run time


@shape_rule("MatrixDiagPart", "MatrixDiagPartV2", "MatrixDiagPartV3")
def _matrix_diag_part(facts: OpFacts) -> Optional[list[Shape]]:
    """Batch dims, the number of diagonals when k is a band, then the longest diagonal's length."""
    dims = facts.dims(0)
    if dims is None or len(dims) < 2:
        return None
    k = [0] if facts.op.type == "MatrixDiagPart" else facts.ints(1)
    rows, cols = dims[-2:]
    if not k or rows is None or cols is None:
        return None
    length = max(min(rows + min(k[-1], 0), cols - max(k[0], 0)), 0)
    return [Shape(dims[:-2] + (() if k[0] == k[-1] else (k[-1] - k[0] + 1,)) + (length,))]


@shape_rule("Einsum")
def _einsum(facts: OpFacts) -> Optional[list[Shape]]:
    """The output subscripts' dims, each read from an input that names it (`...`: broadcast dims)."""
    equation = attr_text(facts.attr("equation", ""))
    if "->" not in equation:
        return None
    inputs, output = equation.replace(" ", "").split("->")
    terms = inputs.split(",")
    if len(terms) != len(facts.shapes) or any(s.dims is None for s in facts.shapes):
        return None
    sizes: dict[str, Optional[int]] = {}
    ellipses: list[tuple[Optional[int], ...]] = []
    for term, shape in zip(terms, facts.shapes):
        head, _, tail = term.partition("...")
        dims = shape.dims
        if "..." in term:
            ellipses.append(tuple(dims[len(head):len(dims) - len(tail)]))
            named = list(zip(head, dims[:len(head)])) + list(zip(tail, dims[len(dims) - len(tail):]))
        elif len(term) == len(dims):
            named = list(zip(term, dims))
        else:
            return None
        for letter, dim in named:
            if dim is not None and dim != 1:
                sizes[letter] = dim
            sizes.setdefault(letter, dim)
    head, dots, tail = output.partition("...")
    middle = broadcast([Shape(e) for e in ellipses]).dims if dots and ellipses else ()
    if middle is None:
        return None
    return [Shape(tuple(sizes.get(c) for c in head) + tuple(middle) + tuple(sizes.get(c) for c in tail))]


@shape_rule("Range")
def _range(facts: OpFacts) -> Optional[list[Shape]]:
    """Always a vector; its length is known when the operands are: TF's ceil(|(limit - start) /
    delta|), exact for integers, in double for floats (a range too long to evaluate keeps it)."""
    bounds = [facts.constant(i) for i in range(3)]
    if any(b is None or np.size(b) != 1 for b in bounds):
        return [Shape((None,))]
    start, limit, delta = (np.asarray(b).reshape(()).item() for b in bounds)
    if delta == 0 or (limit - start) * delta < 0:
        return [Shape((None,))]  # TF refuses these at run time
    if all(isinstance(v, int) for v in (start, limit, delta)):
        return [Shape((-(-abs(limit - start) // abs(delta)),))]
    steps = abs((limit - start) / delta)
    return [Shape((math.ceil(steps),))] if math.isfinite(steps) else [Shape((None,))]


@shape_rule("Tile")
def _tile(facts: OpFacts) -> Optional[list[Shape]]:
    """The input's rank; a size where both it and its multiple are known (a batch read with
    Shape leaves its multiple unknown)."""
    dims = facts.dims(0)
    if dims is None:
        return None
    multiples = facts.known_ints(1)
    if multiples is None or len(multiples) != len(dims):  # TF refuses the latter at run time
        multiples = [None] * len(dims)
    return [Shape(tuple(None if d is None or m is None else d * m for d, m in zip(dims, multiples)))]


@shape_rule("Split")
def _split(facts: OpFacts) -> Optional[list[Shape]]:
    count = facts.attr("num_split", 1)
    dims, axis = facts.dims(1), facts.ints(0)
    if dims is None or axis is None:
        return unknown_rank(count)
    at = normalize_axis(axis[0], len(dims))
    part = None if dims[at] is None else dims[at] // count
    return [Shape(dims[:at] + (part,) + dims[at + 1:])] * count


@shape_rule("SplitV")
def _split_v(facts: OpFacts) -> Optional[list[Shape]]:
    count = facts.attr("num_split", 1)
    dims, sizes, axis = facts.dims(0), facts.ints(1), facts.ints(2)
    if dims is None or sizes is None or axis is None:
        return unknown_rank(count)
    at = normalize_axis(axis[0], len(dims))
    if -1 in sizes and dims[at] is not None:
        sizes[sizes.index(-1)] = dims[at] - sum(s for s in sizes if s != -1)
    return [Shape(dims[:at] + (None if s < 0 else s,) + dims[at + 1:]) for s in sizes]


def reduced_shape(dims: tuple[Optional[int], ...], axes: list[int], keep: bool) -> Shape:
    """The shape left after reducing `axes` (already validated) of `dims`."""
    wanted = {normalize_axis(a, len(dims)) for a in axes}
    if keep:
        return Shape(tuple(1 if i in wanted else d for i, d in enumerate(dims)))
    return Shape(tuple(d for i, d in enumerate(dims) if i not in wanted))


@shape_rule("Mean", "Sum", "Max", "Min", "Prod", "All", "Any", "EuclideanNorm")
def _reduce(facts: OpFacts) -> Optional[list[Shape]]:
    dims, axes = facts.dims(0), facts.ints(1)
    if dims is None or axes is None:
        return None
    return [reduced_shape(dims, axes, bool(facts.attr("keep_dims", False)))]


@shape_rule("ArgMax", "ArgMin")
def _arg_reduce(facts: OpFacts) -> Optional[list[Shape]]:
    dims, axis = facts.dims(0), facts.ints(1)
    if dims is None or axis is None:
        return None
    return [reduced_shape(dims, axis[:1], False)]


@shape_rule("OneHot")
def _one_hot(facts: OpFacts) -> Optional[list[Shape]]:
    dims, depth = facts.dims(0), facts.ints(1)
    if dims is None or depth is None:
        return None
    axis = facts.attr("axis", -1)
    at = len(dims) if axis == -1 else axis
    return [Shape(dims[:at] + (depth[0],) + dims[at:])]


@shape_rule("Bincount")
def _bincount(facts: OpFacts) -> Optional[list[Shape]]:
    size = facts.ints(1)
    return [Shape((None if size is None else size[0],))]


@shape_rule("SparseToDense")
def _sparse_to_dense(facts: OpFacts) -> Optional[list[Shape]]:
    """The output_shape operand's value; its length gives the rank when only that is known."""
    dims = facts.ints(1)
    if dims is not None:
        return [Shape(tuple(dims))]
    rank = _shape_vector_length(facts, 1)
    return None if rank is None else [Shape((None,) * rank)]


@shape_rule("DenseBincount")
def _dense_bincount(facts: OpFacts) -> Optional[list[Shape]]:
    """One row of `size` counts per row of a 2-D input, one row in all for a vector."""
    dims, size = facts.dims(0), facts.ints(1)
    if dims is None or len(dims) not in (1, 2):
        return None
    return [Shape(dims[:-1] + (None if size is None else size[0],))]


@shape_rule("Bitcast")
def _bitcast(facts: OpFacts) -> Optional[list[Shape]]:
    """A narrower type adds an innermost axis of the width ratio; a wider one drops it."""
    dims, source, target = facts.dims(0), facts.dtypes[0], facts.attr("type")
    if dims is None or source is None or not isinstance(target, DType):
        return None
    try:
        wide, narrow = source.to_numpy().itemsize, target.to_numpy().itemsize
    except TypeError:
        return None
    if wide == narrow:
        return [Shape(dims)]
    if wide > narrow:
        return [Shape(dims + (wide // narrow,))]
    return [Shape(dims[:-1])] if dims else None
