"""Gradient ops a `tf.GradientTape` leaves in a frozen graph that serves derivatives.

Training graphs are never run here, but some inference graphs carry a backward
pass: a physics-informed net exports du/dx (TanhGrad, StridedSliceGrad,
ConcatOffset, BroadcastGradientArgs), a saliency or Grad-CAM model the gradient
of a score with respect to the image (ReluGrad, BiasAddGrad, pool and depthwise
input gradients, inference-mode FusedBatchNormGrad).  Each kernel is TF's CPU
kernel written out: activation gradients evaluate in a wide accumulator and
round once (as the activations in nn.py do), windowed gradients fold their taps
back through the forward kernels' window helpers, and StridedSliceGrad fills
the region StridedSlice's own index reads.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from .array import strided_slice_operands
from .common import accumulator, attr, checked_shape, choice, int_list, int_vector, scalar_int
from .image_windows import first_max_taps
from .nn import (LEAKY_RELU_DEFAULT_ALPHA, SELU_ALPHA, SELU_SCALE, Pads, channel_axis, compute_type,
                 conv2d_backprop_input, fold_windows, from_nhwc, pool_geometry, to_nhwc, valid_taps)
from .registry import KernelError, kernel

Array = np.ndarray
Attrs = Mapping[str, object]


# ---------------------------------------------------------------- activation gradients


def _register_gradient(op_type: str, fn: Callable[[Array, Array, Attrs], Array], same_shape: bool) -> None:
    """A two-operand gradient evaluated in float64 (complex128, ints as themselves) and rounded once to the first
    operand's type and shape.  `same_shape`: TF requires equal shapes (the Relu family); the others (TanhGrad &
    co., TF's cwise gradients) only an equal element count."""

    @kernel(op_type)
    def gradient(attrs: Attrs, inputs: list[Array]) -> list[Array]:
        first, second = inputs
        fits = first.shape == second.shape if same_shape else first.size == second.size
        if not fits:
            raise KernelError(f"operands must have the same {'shape' if same_shape else 'number of elements'}, "
                              f"got {list(first.shape)} and {list(second.shape)}")
        acc = accumulator(first.dtype)
        wide = fn(first.astype(acc), second.reshape(first.shape).astype(acc), attrs)
        return [np.asarray(wide).astype(first.dtype)]


def _leaky_relu_grad(g: Array, features: Array, attrs: Attrs) -> Array:
    alpha = float(attr(attrs, "alpha", LEAKY_RELU_DEFAULT_ALPHA))  # type: ignore[arg-type]
    return np.where(features > 0, g, g * alpha)


# y is the forward result, dy the incoming gradient.  The complex ones TF conjugates are conjugated here.
_register_gradient("TanhGrad", lambda y, dy, a: dy * (1 - y * y), same_shape=False)
_register_gradient("SigmoidGrad", lambda y, dy, a: dy * (y * (1 - y)), same_shape=False)
_register_gradient("RsqrtGrad", lambda y, dy, a: dy * np.conj(-0.5 * y * y * y), same_shape=False)
_register_gradient("SqrtGrad", lambda y, dy, a: 0.5 * dy / np.conj(y), same_shape=False)
_register_gradient("ReciprocalGrad", lambda y, dy, a: -dy * np.conj(y * y), same_shape=False)
_register_gradient("InvGrad", lambda y, dy, a: -dy * np.conj(y * y), same_shape=False)
# g is the incoming gradient.  ReluGrad and Relu6Grad multiply by a 0/1 mask (an infinite g where the mask is 0
# gives NaN, as in TF); the others select.  Elu and Selu read their outputs: below zero is the exponential side.
_register_gradient("ReluGrad", lambda g, f, a: g * (f > 0), same_shape=True)
_register_gradient("Relu6Grad", lambda g, f, a: g * ((f > 0) & (f < 6)), same_shape=True)
_register_gradient("LeakyReluGrad", _leaky_relu_grad, same_shape=True)
_register_gradient("EluGrad", lambda g, out, a: np.where(out < 0, g * (out + 1), g), same_shape=True)
_register_gradient("SeluGrad", lambda g, out, a: np.where(out < 0, g * (out + SELU_SCALE * SELU_ALPHA),
                                                          g * SELU_SCALE), same_shape=True)
_register_gradient("SoftplusGrad", lambda g, f, a: g / (1 + np.exp(-f)), same_shape=True)
_register_gradient("SoftsignGrad", lambda g, f, a: g / np.square(1 + np.abs(f)), same_shape=True)


# ---------------------------------------------------------------- shapes and slices


@kernel("BroadcastGradientArgs")
def _broadcast_gradient_args(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """The axes each operand of a broadcasting op was stretched along: those where it is 1 (padded on the left),
    including axes where both are 1; nothing at all when the shapes are equal."""
    s0, s1 = inputs
    first, second = int_vector(s0), int_vector(s1)
    if first == second:
        return [np.zeros(0, s0.dtype), np.zeros(0, s1.dtype)]
    rank = max(len(first), len(second))
    a, b = [1] * (rank - len(first)) + first, [1] * (rank - len(second)) + second
    if any(x != y and 1 not in (x, y) for x, y in zip(a, b)):
        raise KernelError(f"Incompatible shapes: {first} vs. {second}")
    return [np.array([i for i, d in enumerate(dims) if d == 1], dtype=s.dtype) for dims, s in ((a, s0), (b, s1))]


@kernel("ConcatOffset")
def _concat_offset(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """Where each concatenated operand starts in the result (ConcatV2's gradient slices it back out there):
    zeros but along the axis, where the sizes before it add up.  The other sizes must match the first's."""
    axis_operand, *shapes = inputs
    dims = [int_vector(s) for s in shapes]
    rank = len(dims[0])
    axis = scalar_int(axis_operand, "concat_dim")
    if not -rank <= axis < rank:
        raise KernelError(f"Concat dim is out of range: {axis} vs. {rank}")
    axis %= rank
    offsets, start = [], 0
    for i, d in enumerate(dims):
        if len(d) != rank or any(a != b for j, (a, b) in enumerate(zip(d, dims[0])) if j != axis):
            raise KernelError(f"All dimensions except {axis} must match. Input {i} has shape {d} and doesn't match "
                              f"input 0 with shape {dims[0]}")
        offsets.append(np.array([start if j == axis else 0 for j in range(rank)], dtype=shapes[i].dtype))
        start += d[axis]
    return offsets


def _zeros(dims: list[int], dtype: np.dtype) -> Array:
    """TF's zero of `dtype`: the empty string for strings."""
    dims = checked_shape(dims, np.dtype(dtype).itemsize)
    return np.full(dims, b"", dtype=object) if dtype == object else np.zeros(dims, dtype=dtype)


@kernel("StridedSliceGrad")
def _strided_slice_grad(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """dy written into a zero tensor of `shape`, where StridedSlice of such a tensor would have read it."""
    shape, begin, end, strides, dy = inputs
    out = _zeros(int_vector(shape), dy.dtype)
    index = strided_slice_operands(attrs, out.shape, begin, end, strides)
    region = np.shape(out[index])
    if region != dy.shape:
        raise KernelError(f"shape of dy was {list(dy.shape)} instead of {list(region)}")
    out[index] = dy
    return [out]


@kernel("BiasAddGrad")
def _bias_add_grad(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """The sum over every axis but the channel one (NCHW: axis 1 whatever the rank, as BiasAdd)."""
    dy = inputs[0]
    fmt = choice(attrs, "data_format", ("NHWC", "NCHW"), "NHWC")
    if dy.ndim < 2:
        raise KernelError(f"Input tensor must be at least 2D: {list(dy.shape)}")
    axis = channel_axis(fmt, dy.ndim)
    others = tuple(i for i in range(dy.ndim) if i != axis)
    return [dy.sum(axis=others, dtype=accumulator(dy.dtype)).astype(dy.dtype)]


# ---------------------------------------------------------------- windows


def _pool_grad_geometry(attrs: Attrs, x: Array, dy: Array, ksize: list[int], strides: list[int],
                        paddings: tuple[str, ...]) -> tuple[str, Array, Array, tuple[int, int], tuple[int, int], Pads]:
    """The forward pool's layout, NHWC input, window, strides and padding over `x`, and `dy` checked against
    the pool's output shape and made NHWC."""
    fmt, x, window, stride, pads = pool_geometry(attrs, ksize, strides, x, paddings)
    out_hw = valid_taps(x.shape[1:3], window, stride, pads).shape[1:3]
    expected = from_nhwc(np.broadcast_to(np.zeros((), np.bool_), (x.shape[0], *out_hw, x.shape[3])), fmt).shape
    if dy.shape != expected:
        raise KernelError(f"grad shape {list(dy.shape)} != pool output shape {list(expected)}")
    return fmt, x, to_nhwc(dy, fmt), window, stride, pads


def _max_pool_grad(attrs: Attrs, inputs: list[Array], ksize: list[int], strides: list[int]) -> Array:
    """Each gradient element goes to where its window's maximum sits in orig_input, picked as TF's CPU kernel picks
    it (`first_max_taps`); overlapping windows add up.  orig_output is not read: TF recomputes the maxima too."""
    x, orig_output, grad = inputs
    if orig_output.shape != grad.shape:
        raise KernelError(f"orig_output shape {list(orig_output.shape)} != grad shape {list(grad.shape)}")
    fmt, x, dy, window, stride, pads = _pool_grad_geometry(attrs, x, grad, ksize, strides,
                                                          ("SAME", "VALID", "EXPLICIT"))
    _, best = first_max_taps(x, window, stride, pads)
    chosen = best[..., None, None] == np.arange(window[0] * window[1]).reshape(window)
    acc = compute_type(dy.dtype)
    taps = np.where(chosen, dy.astype(acc)[..., None, None], np.zeros((), acc))
    return from_nhwc(fold_windows(taps, x.shape[1:3], pads, stride).astype(dy.dtype), fmt)


@kernel("MaxPoolGrad")
def _max_pool_grad_v1(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    return [_max_pool_grad(attrs, inputs, int_list(attrs, "ksize"), int_list(attrs, "strides"))]


@kernel("MaxPoolGradV2")
def _max_pool_grad_v2(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    *tensors, ksize, strides = inputs
    return [_max_pool_grad(attrs, tensors, int_vector(ksize), int_vector(strides))]


@kernel("AvgPoolGrad")
def _avg_pool_grad(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """Each gradient element spread evenly over its window's input elements (SAME padding is not counted)."""
    sizes, dy = inputs
    dims = checked_shape(int_vector(sizes), dy.itemsize, "orig_input_shape")
    if len(dims) != 4:
        raise KernelError(f"orig_input_shape must have 4 entries, got {dims}")
    shaped = np.broadcast_to(np.zeros((), np.bool_), dims)  # the forward input's shape, without its memory
    fmt, x, dy, window, stride, pads = _pool_grad_geometry(attrs, shaped, dy, int_list(attrs, "ksize"),
                                                          int_list(attrs, "strides"), ("SAME", "VALID"))
    inside = valid_taps(x.shape[1:3], window, stride, pads)
    share = dy.astype(accumulator(dy.dtype)) / inside.sum(axis=(-2, -1))
    taps = np.where(inside, share[..., None, None], 0)
    return [from_nhwc(fold_windows(taps, x.shape[1:3], pads, stride).astype(dy.dtype), fmt)]


@kernel("DepthwiseConv2dNativeBackpropInput")
def _depthwise_backprop_input(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """Honours dilations, which TF's CPU kernel ignores (XLA and the forward op do not)."""
    sizes, w, dy = inputs
    return [conv2d_backprop_input(attrs, int_vector(sizes), w, dy, depthwise=True)]


# ---------------------------------------------------------------- batch norm


def _fused_batch_norm_grad(attrs: Attrs, inputs: list[Array], formats: tuple[str, ...]) -> list[Array]:
    """x, scale and offset gradients of FusedBatchNorm, in float64.  reserve_space_1/2 are the statistics the
    forward op normalised with: the population mean and variance in inference, the batch mean and (biased)
    variance in training, where the batch statistics' own dependence on x joins x's gradient.  The last two
    results are empty placeholders, as TF's kernel leaves them (its oneDNN build gives scalar zeros instead)."""
    dy, x, scale, mean, variance = inputs[:5]
    fmt = choice(attrs, "data_format", formats, "NHWC")
    if x.ndim != len(fmt) or dy.shape != x.shape:
        raise KernelError(f"x {list(x.shape)} and y_backprop {list(dy.shape)} must be one {len(fmt)}-D shape")
    axis = channel_axis(fmt, x.ndim)
    if any(v.shape != (x.shape[axis],) for v in (scale, mean, variance)):
        raise KernelError(f"scale {list(scale.shape)}, mean {list(mean.shape)} and variance {list(variance.shape)} "
                          f"must be vectors of the {x.shape[axis]} channels")
    column = [1] * x.ndim
    column[axis] = -1
    wide_dy = dy.astype(np.float64)
    centered = x.astype(np.float64) - mean.astype(np.float64).reshape(column)
    var = variance.astype(np.float64) + float(attr(attrs, "epsilon", 1e-4))  # type: ignore[arg-type]
    others = tuple(i for i in range(x.ndim) if i != axis)
    offset_grad, projection = wide_dy.sum(axis=others), (wide_dy * centered).sum(axis=others)
    if attr(attrs, "is_training", True):
        count = x.size // max(x.shape[axis], 1)
        wide_dy = wide_dy - (offset_grad / count).reshape(column) - \
            centered * (projection / count / var).reshape(column)
    x_grad = wide_dy * (scale.astype(np.float64) / np.sqrt(var)).reshape(column)
    stat = scale.dtype
    return [x_grad.astype(x.dtype), (projection / np.sqrt(var)).astype(stat), offset_grad.astype(stat),
            np.zeros(0, stat), np.zeros(0, stat)]


@kernel("FusedBatchNormGrad")
def _fused_batch_norm_grad_v1(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    return _fused_batch_norm_grad(attrs, inputs, ("NHWC", "NCHW"))


@kernel("FusedBatchNormGradV2", "FusedBatchNormGradV3")
def _fused_batch_norm_grad_v2(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """V3 adds a reserve_space_3 operand, which TF's CPU kernel does not read."""
    return _fused_batch_norm_grad(attrs, inputs, ("NHWC", "NCHW", "NDHWC", "NCDHW"))
