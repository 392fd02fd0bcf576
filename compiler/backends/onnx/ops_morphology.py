"""Dilation2D (grayscale dilation; erosion is its negation in the graph) as ONNX, for a constant filter.

TF keeps the largest `input + filter` over a window's in-bounds taps, starting
from the type's lowest finite value.  Here the image is padded with -inf (a
padded tap then never wins) and the result is clamped below at the lowest
value, which is TF's value for a window with no tap inside the image and for
taps of -inf.  Two forms:
- spatial size known: one Gather per spatial axis picks every window's taps
  (index matrices [out, taps]), one Add of the filter and one ReduceMax over
  the two tap axes: Pad + 2 Gathers + Add + ReduceMax + Max whatever the filter
  size;
- spatial size known only at run time: a strided Slice per tap, an Add of that
  tap's filter values and one Max over all taps; SAME padding with a stride
  above 1 computes its padding at run time, as TF does from the input size.
Any layout the input is stored in is kept (the op is layout agnostic).  NaNs
are not ignored as TF ignores them (onnxruntime's ReduceMax keeps a NaN in the
first tap).

Integers: TF's sums wrap in the operand type, so no padding value stays below
every tap.  With the spatial size known, each window's taps are gathered at
clamped positions, added to the filter in the type (wrapping as TF does), and
the taps outside the image replaced by the lowest value (TF's starting value,
a constant mask) before the ReduceMax: 2 Gathers + Add + Where + ReduceMax (the
Where only with padding; 16-bit and unsigned 32-bit sums reduce in a wider type
onnxruntime has a ReduceMax for, uint64 is refused).  A run-time size is
refused for integers.

The filter must be known at export time: a constant, or ops of constants the
static analysis evaluates (tf.nn.erosion2d reverses its filter with ReverseV2).
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from compiler.backends.onnx import layout, opset
from compiler.backends.onnx.context import LoweringContext
from compiler.backends.onnx.dtypes import onnx_type
from compiler.backends.onnx.errors import UnsupportedOpError
from compiler.backends.onnx.layout import Perm
from compiler.backends.onnx.ops_array import INT64_MAX, shape_slice
from compiler.backends.onnx.ops_elementwise import carrier_of, emit_typed, in_carrier, is_integer, type_name
from compiler.backends.onnx.registry import AGNOSTIC, lowers
from compiler.ir.dtypes import DType
from compiler.ir.graph import Op
from compiler.runtime.kernels import KernelError
from compiler.runtime.kernels.morphology import dilation_attrs, lowest, windowed_size

_FLOAT_TYPES = (DType.FLOAT, DType.DOUBLE, DType.HALF)


def _checked(ctx: LoweringContext, op: Op) -> tuple[np.ndarray, list[int], list[int], str]:
    """The constant filter and (strides, rates, padding), or a refusal naming the node."""
    dtype = ctx.dtype(op.results[0])
    if dtype not in _FLOAT_TYPES and not is_integer(dtype):
        raise UnsupportedOpError(op.type, op.name, f"type {type_name(dtype)} (floats and integers only)")
    if ctx.rank(op.operands[0]) != 4:
        raise UnsupportedOpError(op.type, op.name, "the input must be known to be 4-D")
    f = ctx.constant(op.operands[1])
    if f is None:
        raise UnsupportedOpError(op.type, op.name, "the filter must be a constant")
    try:
        strides, rates, padding = dilation_attrs(op.attrs)
    except KernelError as exc:
        raise UnsupportedOpError(op.type, op.name, str(exc)) from None
    if f.ndim != 3:
        raise UnsupportedOpError(op.type, op.name, f"the filter has shape {list(f.shape)}, not [rows, cols, depth]")
    return f, strides, rates, padding


@lowers("Dilation2D", layout=AGNOSTIC)
def _dilation2d(ctx: LoweringContext, op: Op) -> None:
    f, strides, rates, padding = _checked(ctx, op)
    found = ctx.agnostic_operand(op)
    dims = ctx.shape(op.operands[0]).dims
    dtype = ctx.dtype(op.results[0])
    f = f.astype(dtype.to_numpy())
    known = dims[1] is not None and dims[2] is not None
    if is_integer(dtype):
        if not known:
            raise UnsupportedOpError(op.type, op.name, f"{type_name(dtype)} input of run-time height or width "
                                                       "(integer sums wrap: the taps outside need a static mask)")
        out = _gathered_integer(ctx, op, found.tensor, found.perm, dims[1:3], f, strides, rates, padding)
        ctx.bind(op.results[0], out, found.perm)
        return
    if known:
        out = _gathered(ctx, op, found.tensor, found.perm, dims[1:3], f, strides, rates, padding)
        ctx.bind(op.results[0], out, found.perm)
        return
    perm = found.perm
    hw = [layout.physical_axis(a, perm, 4) for a in (1, 2)]
    tensor = found.tensor
    if abs(hw[0] - hw[1]) != 1:  # run-time padding reads H and W side by side
        tensor, perm, hw = ctx.value_in(op.operands[0]), None, [1, 2]
    ctx.bind(op.results[0], _sliced(ctx, op, tensor, perm, hw, f, strides, rates, padding), perm)


def _pads(size: Optional[int], taps: int, rate: int, stride: int, padding: str, op: Op) -> tuple[int, int]:
    """(before, after) padding of a known-size axis: TF's before, and after as far as the last tap reads."""
    try:
        window = windowed_size(size, taps, rate, stride, padding)
    except KernelError as exc:
        raise UnsupportedOpError(op.type, op.name, str(exc)) from None
    last = (window.out - 1) * stride - window.pad_before + (taps - 1) * rate
    return window.pad_before, max(0, last - (size - 1))


def _pad(ctx: LoweringContext, op: Op, x: str, hw: Sequence[int], pairs: Sequence[tuple[int, int]],
         dtype: np.dtype) -> str:
    """`x` with -inf around its stored H and W axes (no node when nothing is added)."""
    if not any(p for pair in pairs for p in pair):
        return x
    before, after = [0] * 4, [0] * 4
    for axis, (b, a) in zip(hw, pairs):
        before[axis], after[axis] = b, a
    fill = ctx.initializer(np.asarray(-np.inf, dtype), f"{op.name}/minus_inf")
    return ctx.helper1(op, "padded", "Pad", [x, ctx.ints(before + after, f"{op.name}/pads"), fill], mode="constant")


def _clamped(ctx: LoweringContext, op: Op, taps: Sequence[str], dtype: np.dtype) -> str:
    """The largest of `taps`, never below TF's starting value (the lowest finite one)."""
    floor = ctx.initializer(np.asarray(lowest(dtype), dtype), f"{op.name}/lowest")
    return ctx.emit1(op, "Max", [*taps, floor])


def _gathered(ctx: LoweringContext, op: Op, x: str, perm: Perm, sizes: Sequence[int], f: np.ndarray,
              strides: Sequence[int], rates: Sequence[int], padding: str) -> str:
    """Known spatial size: each window's taps gathered along H then W, the filter added, the taps reduced."""
    hw = [layout.physical_axis(a, perm, 4) for a in (1, 2)]
    pairs = [_pads(sizes[k], f.shape[k], rates[k], strides[k], padding, op) for k in range(2)]
    tensor = _pad(ctx, op, x, hw, pairs, f.dtype)
    labels = list(layout.physical_dims(["n", "h", "w", "c"], perm))
    for k, name in enumerate("hw"):
        out = windowed_size(sizes[k], f.shape[k], rates[k], strides[k], padding).out
        taps = np.arange(out)[:, None] * strides[k] + np.arange(f.shape[k])[None, :] * rates[k]
        at = labels.index(name)
        tensor = ctx.helper1(op, f"{name}_taps", "Gather",
                             [tensor, ctx.initializer(taps.astype(np.int64), f"{op.name}/{name}_taps")], axis=at)
        labels[at:at + 1] = [name, "k" + name]
    summed = ctx.helper1(op, "taps_plus_filter", "Add", [tensor, _filter_weights(ctx, op, f, labels)])
    reduced = opset.reduce(ctx, op, "ReduceMax", summed, [labels.index("kh"), labels.index("kw")], False,
                           suffix="largest")
    return _clamped(ctx, op, [reduced], f.dtype)


def _filter_weights(ctx: LoweringContext, op: Op, f: np.ndarray, labels: Sequence[str]) -> str:
    """The filter as an initializer broadcasting against gathered taps whose axes are `labels`."""
    order = [label for label in labels if label in ("kh", "kw", "c")]
    weights = np.transpose(f, ["kh kw c".split().index(label) for label in order])
    weights = weights.reshape([f.shape[("kh", "kw", "c").index(label)] if label in order else 1
                               for label in labels][labels.index(order[0]):])
    return ctx.initializer(weights, f"{op.name}/filter")


def _gathered_integer(ctx: LoweringContext, op: Op, x: str, perm: Perm, sizes: Sequence[int], f: np.ndarray,
                      strides: Sequence[int], rates: Sequence[int], padding: str) -> str:
    """Known spatial size, integers: the taps gathered at clamped positions and added to the filter
    in the type; those outside the image become the lowest value before the maximum."""
    dtype = ctx.dtype(op.results[0])
    through = carrier_of(ctx, op, "ReduceMax", dtype)
    labels = list(layout.physical_dims(["n", "h", "w", "c"], perm))
    tensor, inside = x, []
    for k, name in enumerate("hw"):
        try:
            window = windowed_size(sizes[k], f.shape[k], rates[k], strides[k], padding)
        except KernelError as exc:
            raise UnsupportedOpError(op.type, op.name, str(exc)) from None
        index = (np.arange(window.out)[:, None] * strides[k] - window.pad_before
                 + np.arange(f.shape[k])[None, :] * rates[k])
        inside.append((index >= 0) & (index < sizes[k]))
        taps = np.clip(index, 0, max(sizes[k] - 1, 0)).astype(np.int64)
        at = labels.index(name)
        tensor = ctx.helper1(op, f"{name}_taps", "Gather", [tensor, ctx.initializer(taps, f"{op.name}/{name}_taps")],
                             axis=at)
        labels[at:at + 1] = [name, "k" + name]
    summed = emit_typed(ctx, op, "Add", [tensor, _filter_weights(ctx, op, f, labels)], dtype, wraps=True,
                        suffix="taps_plus_filter")
    summed = in_carrier(ctx, op, summed, dtype, through)
    if not all(m.all() for m in inside):
        mask = np.ones([1] * len(labels), bool)
        for name, m in zip("hw", inside):
            mask = mask & m.reshape([m.shape[0] if label == name else m.shape[1] if label == "k" + name else 1
                                     for label in labels])
        floor = ctx.initializer(np.asarray(lowest(f.dtype), through.to_numpy()), f"{op.name}/lowest")
        summed = ctx.helper1(op, "inside_taps", "Where", [ctx.initializer(mask, f"{op.name}/inside"), summed, floor])
    axes = [labels.index("kh"), labels.index("kw")]
    if through == dtype:
        return opset.reduce(ctx, op, "ReduceMax", summed, axes, False)
    largest = opset.reduce(ctx, op, "ReduceMax", summed, axes, False, suffix="largest")
    return ctx.emit1(op, "Cast", [largest], to=onnx_type(dtype))


def _sliced(ctx: LoweringContext, op: Op, x: str, perm: Perm, hw: Sequence[int], f: np.ndarray,
            strides: Sequence[int], rates: Sequence[int], padding: str) -> str:
    """Spatial size known only at run time: one strided Slice per tap, each plus its filter values, then a Max."""
    effective = [f.shape[k] + (f.shape[k] - 1) * (rates[k] - 1) for k in range(2)]
    run_time = padding == "SAME" and any(s > 1 for s in strides)
    if run_time:
        tensor = _run_time_pad(ctx, op, x, hw, effective, strides, f.dtype)
    else:
        pairs = [(0, 0) if padding == "VALID" else ((e - 1) // 2, e - 1 - (e - 1) // 2) for e in effective]
        tensor = _pad(ctx, op, x, hw, pairs, f.dtype)
    channel = layout.physical_axis(3, perm, 4)
    spread = [f.shape[2]] + [1] * (3 - channel)  # a filter row broadcast along the stored channel axis
    axes, steps = ctx.ints(hw, f"{op.name}/axes"), ctx.ints(strides, f"{op.name}/steps")
    taps = []
    for i in range(f.shape[0]):
        for j in range(f.shape[1]):
            starts = [i * rates[0], j * rates[1]]
            # The last window's tap is (effective - 1 - start) before the padded end, whatever the size.
            ends = [start - e + 1 if start - e + 1 < 0 else INT64_MAX for start, e in zip(starts, effective)]
            piece = ctx.helper1(op, f"tap{i}_{j}", "Slice", [tensor, ctx.ints(starts, f"{op.name}/starts{i}_{j}"),
                                                            ctx.ints(ends, f"{op.name}/ends{i}_{j}"), axes, steps])
            weight = ctx.initializer(f[i, j].reshape(spread), f"{op.name}/filter{i}_{j}")
            taps.append(ctx.helper1(op, f"tap{i}_{j}_plus_filter", "Add", [piece, weight]))
    return _clamped(ctx, op, taps, f.dtype)


def _run_time_pad(ctx: LoweringContext, op: Op, x: str, hw: Sequence[int], effective: Sequence[int],
                  strides: Sequence[int], dtype: np.dtype) -> str:
    """SAME padding from the run-time H and W (stored side by side): total = max((-size) mod stride
    + effective - stride, 0), half of it (rounded down) before."""
    first = min(hw)
    order = [0, 1] if hw[0] < hw[1] else [1, 0]
    stride = ctx.ints([strides[k] for k in order], f"{op.name}/strides")
    sizes = shape_slice(ctx, op, x, first, first + 2, "spatial_dims")
    short = ctx.helper1(op, "short_of_stride", "Mod", [ctx.helper1(op, "minus_dims", "Neg", [sizes]), stride])
    extra = ctx.ints([effective[k] - strides[k] for k in order], f"{op.name}/extra")
    total = ctx.helper1(op, "pad_total", "Max", [ctx.helper1(op, "pad_needed", "Add", [short, extra]),
                                                 ctx.ints([0, 0], f"{op.name}/no_pad")])
    before = ctx.helper1(op, "pad_before", "Div", [total, ctx.ints([2, 2], f"{op.name}/two")])
    after = ctx.helper1(op, "pad_after", "Sub", [total, before])
    zeros = {n: ctx.ints([0] * n, f"{op.name}/zeros{n}") for n in {first, 2, 2 - first} if n}
    parts = [zeros.get(first), before, zeros[2], after, zeros.get(2 - first)]
    pads = ctx.helper1(op, "pads", "Concat", [p for p in parts if p is not None], axis=0)
    fill = ctx.initializer(np.asarray(-np.inf, dtype), f"{op.name}/minus_inf")
    return ctx.helper1(op, "padded", "Pad", [x, pads, fill], mode="constant")
