"""Gradient ops a `tf.GradientTape` leaves in a graph that serves derivatives.

A physics-informed net exports its solution's derivatives (TanhGrad,
StridedSliceGrad, ConcatOffset), a saliency or Grad-CAM model the gradient of
a class score with respect to the image or a feature map (ReluGrad, the other
activation gradients, BiasAddGrad, inference-mode FusedBatchNormGrad).  Each is
the forward op's derivative written out: an activation gradient is elementwise
(layout-agnostic, like the activation), StridedSliceGrad puts the gradient back
where the slice came from with Pads.  The pooling and depthwise gradients are
windowed and live beside their forward ops (ops_conv.py, ops_pool_gradients.py).
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence

import numpy as np

from compiler.backends.onnx import layout
from compiler.backends.onnx.context import Lowered, LoweringContext
from compiler.backends.onnx.dtypes import onnx_type
from compiler.backends.onnx.errors import UnsupportedOpError
from compiler.backends.onnx.opset import reduce
from compiler.backends.onnx.ops_array import INT64_MIN, emit_slice
from compiler.backends.onnx.ops_elementwise import broadcast_operands
from compiler.backends.onnx.registry import AGNOSTIC, lowers
from compiler.ir.attrs import attr_text
from compiler.ir.graph import Op, Value
from compiler.runtime.kernels import KernelError
from compiler.runtime.kernels.array import SLICE_MASKS, strided_slice_index
from compiler.runtime.kernels.nn import LEAKY_RELU_DEFAULT_ALPHA, SELU_ALPHA, SELU_SCALE, channel_axis


class _Terms:
    """Emits the nodes of one gradient formula over the op's two broadcast operands."""

    def __init__(self, ctx: LoweringContext, op: Op, tensors: list[str]):
        self.ctx, self.op, self.dtype = ctx, op, ctx.dtype(op.results[0])
        self.first, self.second = tensors

    def const(self, value: float, name: str) -> str:
        return self.ctx.scalar(value, self.dtype, name)

    def node(self, name: str, op_type: str, *inputs: str) -> str:
        return self.ctx.helper1(self.op, name, op_type, list(inputs))


# Each formula returns (the op's result node type, its inputs): the last node is the op's own.
Formula = Callable[[_Terms], tuple[str, list[str]]]


def _times_one_minus_square(t: _Terms) -> tuple[str, list[str]]:
    """TanhGrad(y, dy) = dy * (1 - y^2)."""
    y, dy = t.first, t.second
    return "Mul", [dy, t.node("one_minus_y2", "Sub", t.const(1.0, "one"), t.node("y2", "Mul", y, y))]


def _sigmoid_grad(t: _Terms) -> tuple[str, list[str]]:
    """SigmoidGrad(y, dy) = dy * y * (1 - y)."""
    y, dy = t.first, t.second
    return "Mul", [t.node("dy_y", "Mul", dy, y), t.node("one_minus_y", "Sub", t.const(1.0, "one"), y)]


def _rsqrt_grad(t: _Terms) -> tuple[str, list[str]]:
    """RsqrtGrad(y, dy) = dy * (-0.5 * y^3)."""
    y, dy = t.first, t.second
    cube = t.node("y3", "Mul", t.node("y2", "Mul", y, y), y)
    return "Mul", [dy, t.node("minus_half_y3", "Mul", cube, t.const(-0.5, "minus_half"))]


def _sqrt_grad(t: _Terms) -> tuple[str, list[str]]:
    """SqrtGrad(y, dy) = dy * 0.5 / y."""
    y, dy = t.first, t.second
    return "Div", [t.node("half_dy", "Mul", dy, t.const(0.5, "half")), y]


def _reciprocal_grad(t: _Terms) -> tuple[str, list[str]]:
    """ReciprocalGrad(y, dy) = -dy * y^2."""
    y, dy = t.first, t.second
    return "Mul", [t.node("minus_dy", "Neg", dy), t.node("y2", "Mul", y, y)]


def _masked(condition: Callable[[_Terms], str]) -> Formula:
    """gradients times a 0/1 mask of the condition on the features (ReluGrad, Relu6Grad): a
    product, as TF's kernel computes it, so an infinite gradient masked out is NaN there too."""
    def formula(t: _Terms) -> tuple[str, list[str]]:
        mask = t.ctx.helper1(t.op, "mask", "Cast", [condition(t)], to=onnx_type(t.dtype))
        return "Mul", [t.first, mask]
    return formula


def _positive(t: _Terms) -> str:
    return t.node("positive", "Greater", t.second, t.const(0.0, "zero"))


def _inside_relu6(t: _Terms) -> str:
    below_six = t.node("below_six", "Less", t.second, t.const(6.0, "six"))
    return t.node("inside", "And", _positive(t), below_six)


def _leaky_relu_grad(t: _Terms) -> tuple[str, list[str]]:
    """features > 0 ? gradients : gradients * alpha."""
    alpha = float(t.op.attr("alpha", LEAKY_RELU_DEFAULT_ALPHA))
    return "Where", [_positive(t), t.first, t.node("scaled", "Mul", t.first, t.const(alpha, "alpha"))]


def _elu_grad(scale: float, alpha: float) -> Formula:
    """EluGrad/SeluGrad(gradients, outputs): outputs < 0 ? gradients * (outputs + scale * alpha)
    : gradients * scale (Elu: scale = alpha = 1)."""
    def formula(t: _Terms) -> tuple[str, list[str]]:
        negative = t.node("negative", "Less", t.second, t.const(0.0, "zero"))
        slope = t.node("slope", "Add", t.second, t.const(scale * alpha, "scale_alpha"))
        below = t.node("below", "Mul", t.first, slope)
        above = t.first if scale == 1.0 else t.node("above", "Mul", t.first, t.const(scale, "scale"))
        return "Where", [negative, below, above]
    return formula


def _softplus_grad(t: _Terms) -> tuple[str, list[str]]:
    """SoftplusGrad(gradients, features) = gradients * sigmoid(features)."""
    return "Mul", [t.first, t.node("sigmoid", "Sigmoid", t.second)]


def _softsign_grad(t: _Terms) -> tuple[str, list[str]]:
    """SoftsignGrad(gradients, features) = gradients / (1 + |features|)^2."""
    plus_one = t.node("abs_plus_one", "Add", t.node("abs", "Abs", t.second), t.const(1.0, "one"))
    return "Div", [t.first, t.node("squared", "Mul", plus_one, plus_one)]


_FORMULAS: dict[str, Formula] = {
    "TanhGrad": _times_one_minus_square, "SigmoidGrad": _sigmoid_grad, "RsqrtGrad": _rsqrt_grad,
    "SqrtGrad": _sqrt_grad, "ReciprocalGrad": _reciprocal_grad, "InvGrad": _reciprocal_grad,
    "ReluGrad": _masked(_positive), "Relu6Grad": _masked(_inside_relu6), "LeakyReluGrad": _leaky_relu_grad,
    "EluGrad": _elu_grad(1.0, 1.0), "SeluGrad": _elu_grad(SELU_SCALE, SELU_ALPHA),
    "SoftplusGrad": _softplus_grad, "SoftsignGrad": _softsign_grad,
}


@lowers(*_FORMULAS, layout=AGNOSTIC)
def _activation_grad(ctx: LoweringContext, op: Op) -> None:
    """An activation's gradient, computed in whatever layout its operands are stored in."""
    tensors, perm = broadcast_operands(ctx, op, op.operands)
    op_type, inputs = _FORMULAS[op.type](_Terms(ctx, op, tensors))
    ctx.bind(op.results[0], ctx.emit1(op, op_type, inputs), perm)


# -- StridedSliceGrad ------------------------------------------------------------------
# The size assumed for an axis known only at run time, which the slice must then read whole.
_RUN_TIME_SIZE = 1 << 40


def _slice_positions(rank: int, index: tuple[object, ...], sizes: Sequence[int]
                     ) -> tuple[list[tuple[int, int, int]], list[int], list[int]]:
    """Per input axis (first position, count, step) of what the slice `index` reads; the output
    positions of its new axes; the input axes it shrinks."""
    consuming = sum(1 for e in index if e is not None and e is not Ellipsis)
    parts: list[object] = []
    new_axes: list[int] = []
    for entry in index:
        if entry is Ellipsis:
            parts.extend([slice(None)] * (rank - consuming))
        elif entry is None:
            new_axes.append(sum(1 for p in parts if isinstance(p, slice)) + len(new_axes))
        else:
            parts.append(entry)
    parts.extend([slice(None)] * (rank - len(parts)))
    found, shrunk = [], []
    for axis, (size, part) in enumerate(zip(sizes, parts)):
        if isinstance(part, slice):
            picked = range(size)[part]
            found.append((picked.start if len(picked) else 0, len(picked), picked.step))
        else:
            found.append((int(part), 1, 1))  # type: ignore[call-overload]
            shrunk.append(axis)
    return found, new_axes, shrunk


def _element_sizes(ctx: LoweringContext, op: Op, value: Value) -> list[Optional[int]]:
    """An integer shape vector's elements, None where known only at run time."""
    sizes = ctx.info.known_ints(value)
    if sizes is None:
        raise UnsupportedOpError(op.type, op.name, "the shapes must be constants or Shapes")
    return sizes


@lowers("StridedSliceGrad")
def _strided_slice_grad(ctx: LoweringContext, op: Op) -> None:
    """A zero tensor of `shape` holding dy where StridedSlice read it: dy with its new axes
    squeezed and its shrunk ones back, reversed along negative steps, spread along steps over one
    with zeros between, padded out to `shape`.  An axis known only at run time must be read
    whole (a PINN's `du[:, :1]` over a batch of points)."""
    sizes = _element_sizes(ctx, op, op.operands[0])
    begin, end, strides = ([int(v) for v in ctx.const_operand(op, i, name).reshape(-1)]
                           for i, name in ((1, "begin"), (2, "end"), (3, "strides")))
    masks = {name: int(op.attr(name, 0)) for name in SLICE_MASKS}
    stand_in = [_RUN_TIME_SIZE if s is None else s for s in sizes]
    try:
        index = strided_slice_index(tuple(stand_in), begin, end, strides, masks)
    except KernelError as err:
        raise UnsupportedOpError(op.type, op.name, str(err)) from None
    positions, new_axes, shrunk = _slice_positions(len(sizes), index, stand_in)
    for axis, size in enumerate(sizes):
        if size is None and positions[axis] != (0, _RUN_TIME_SIZE, 1):
            raise UnsupportedOpError(op.type, op.name, f"axis {axis} has a size known only at run time "
                                                       "and the slice does not read it whole")
    if any(count == 0 for _, count, _ in positions):
        if None in sizes:
            raise UnsupportedOpError(op.type, op.name, "an empty slice of an input known only at run time")
        zeros = np.zeros(sizes, ctx.dtype(op.results[0]).to_numpy())
        ctx.bind(op.results[0], ctx.initializer(zeros, f"{op.name}/zeros"))
        return
    out = ctx.value_in(op.operands[4])
    for op_type, axes in (("Squeeze", new_axes), ("Unsqueeze", shrunk)):
        if axes:
            out = ctx.helper1(op, op_type.lower(), op_type, [out, ctx.ints(axes, f"{op.name}/{op_type.lower()}_axes")])
    # read backwards along the axes the slice stepped back over (ReverseV2's Slice)
    backwards = [(a, -1, INT64_MIN, -1) for a, (_, _, step) in enumerate(positions) if step < 0]
    out = emit_slice(ctx, op, out, backwards, None, len(sizes), main=False)
    counts = [count for _, count, _ in positions]
    pairs = []
    for axis, (first, count, step) in enumerate(positions):
        low = first if step > 0 else first + (count - 1) * step
        if abs(step) > 1 and count > 1:
            if None in sizes:
                raise UnsupportedOpError(op.type, op.name, "a step over one on an input known only at run time")
            out = _spread(ctx, op, out, axis, counts, abs(step))
        span = (count - 1) * abs(step) + 1
        pairs.append((0, 0) if sizes[axis] is None else (low, sizes[axis] - low - span))
    if any(pair != (0, 0) for pair in pairs):
        out = _zero_pad(ctx, op, out, pairs, None)
    ctx.bind(op.results[0], out)


def _zero_pad(ctx: LoweringContext, op: Op, x: str, pairs: Sequence[tuple[int, int]], suffix: Optional[str]) -> str:
    """A constant Pad: the op's own node when `suffix` is None."""
    pads = ctx.ints([b for b, _ in pairs] + [a for _, a in pairs], f"{op.name}/{suffix or 'placed'}_pads")
    if suffix is None:
        return ctx.emit1(op, "Pad", [x, pads])
    return ctx.helper1(op, suffix, "Pad", [x, pads])


def _spread(ctx: LoweringContext, op: Op, x: str, axis: int, counts: list[int], step: int) -> str:
    """x with step - 1 zeros after each element along `axis`, the trailing ones cut: a new axis
    after `axis` padded to `step`, merged back, sliced to (count - 1) * step + 1."""
    rank, count = len(counts), counts[axis]
    grown = counts[:axis + 1] + [1] + counts[axis + 1:]
    lifted = ctx.helper1(op, f"lift{axis}", "Reshape", [x, ctx.ints(grown, f"{op.name}/lift{axis}")])
    pads = [(0, 0)] * (rank + 1)
    pads[axis + 1] = (0, step - 1)
    padded = _zero_pad(ctx, op, lifted, pads, f"spread{axis}")
    merged = list(counts)
    merged[axis] = count * step
    flat = ctx.helper1(op, f"merge{axis}", "Reshape", [padded, ctx.ints(merged, f"{op.name}/merge{axis}")])
    counts[axis] = (count - 1) * step + 1
    return ctx.helper1(op, f"cut{axis}", "Slice", [flat, ctx.ints([0], f"{op.name}/cut_start"),
                                                   ctx.ints([counts[axis]], f"{op.name}/cut{axis}_end"),
                                                   ctx.ints([axis], f"{op.name}/cut{axis}_axis")])


# -- BiasAddGrad and FusedBatchNormGrad -------------------------------------------------
def _stored_channel_axis(ctx: LoweringContext, op: Op, found: Lowered) -> tuple[int, int]:
    """(rank, channel axis) of the gradient, operand 0, as `found` stores it: TF's channel axis
    (NC* formats: 1 whatever the rank) read as the runtime's kernels read it, then permuted."""
    rank = ctx.rank(op.operands[0])
    if rank is None:
        raise UnsupportedOpError(op.type, op.name, "the gradient's rank is unknown")
    channel = channel_axis(attr_text(op.attr("data_format", "NHWC")), rank)
    return rank, channel if found.perm is None else layout.physical_axis(channel, found.perm, rank)


def _sum_but_channels(ctx: LoweringContext, op: Op, suffix: Optional[str]) -> str:
    """The gradient summed over every axis but the channel one, as stored."""
    found = ctx.lowered(op.operands[0])
    rank, channel = _stored_channel_axis(ctx, op, found)
    axes = [a for a in range(rank) if a != channel]
    return reduce(ctx, op, "ReduceSum", found.tensor, axes, False, suffix=suffix)


@lowers("BiasAddGrad")
def _bias_add_grad(ctx: LoweringContext, op: Op) -> None:
    ctx.bind(op.results[0], _sum_but_channels(ctx, op, None))


@lowers("FusedBatchNormGrad", "FusedBatchNormGradV2", "FusedBatchNormGradV3", layout=AGNOSTIC)
def _fused_batch_norm_grad(ctx: LoweringContext, op: Op) -> None:
    """Inference mode (reserve spaces 1 and 2 are the population mean and variance):
    x_backprop = dy * scale / sqrt(var + epsilon), the offset's gradient the sum of dy.  The
    scale's gradient and the reserve-space results are training's; read, they are refused."""
    if op.attr("is_training", True):
        raise UnsupportedOpError(op.type, op.name, "training mode (only inference-mode gradients are lowered)")
    if any(ctx.is_read(result) for index, result in enumerate(op.results) if index not in (0, 2)):
        raise UnsupportedOpError(op.type, op.name, "only x_backprop and offset_backprop are lowered")
    scale, variance = (ctx.const_operand(op, i, name).astype(np.float64) for i, name in ((2, "scale"), (4, "variance")))
    epsilon = float(op.attr("epsilon", 1e-4))
    factor = (scale / np.sqrt(variance + epsilon)).astype(ctx.dtype(op.results[0]).to_numpy())
    found = ctx.agnostic_operand(op)
    rank, channel = _stored_channel_axis(ctx, op, found)
    shaped = factor.reshape([-1] + [1] * (rank - 1 - channel))
    product = ctx.emit1(op, "Mul", [found.tensor, ctx.initializer(shaped, f"{op.name}/factor")])
    ctx.bind(op.results[0], product, found.perm)
    if ctx.is_read(op.results[2]):
        ctx.bind(op.results[2], _sum_but_channels(ctx, op, "offset_backprop"))


# -- ConcatOffset ---------------------------------------------------------------------------
@lowers("ConcatOffset")
def _concat_offset(ctx: LoweringContext, op: Op) -> None:
    """Where each ConcatV2 input starts in the result, for the concat's gradient to Slice it back
    out: zero on every axis but the concat axis, where it is the sizes before it summed.  Those
    sizes are usually static even over a dynamic batch, and then every offset is a constant."""
    axis = int(ctx.const_operand(op, 0, "the concat axis"))
    sizes = [_element_sizes(ctx, op, value) for value in op.operands[1:]]
    rank = len(sizes[0])
    if axis < 0:
        axis += rank
    if not 0 <= axis < rank or any(len(s) != rank for s in sizes):
        raise UnsupportedOpError(op.type, op.name, f"concat axis {axis} does not fit shapes of rank {rank}")
    along = [s[axis] for s in sizes]
    if None in along[:-1]:
        raise UnsupportedOpError(op.type, op.name, "the inputs' sizes along the concat axis must be static")
    dtype = ctx.dtype(op.results[0]).to_numpy()
    start = 0
    for result, size in zip(op.results, along):
        offset = np.zeros(rank, dtype)
        offset[axis] = start
        ctx.bind(result, ctx.initializer(offset, f"{result.name}/offset"))
        start += size or 0
