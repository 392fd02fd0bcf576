"""TensorFlow's eight-bit compute ops: QuantizedConv2D, QuantizedMatMul, QuantizedAdd, ...

Each kernel returns TF's full output list -- the codes plus the float32 min
and max they are relative to -- and reproduces TF's CPU kernel bit for bit,
including the places where it departs from the float op it stands in for:

* QuantizedConv2D positions its windows with its own offsets, so strided
  SAME/VALID convolutions can sample other pixels than Conv2D would;
* QuantizedAdd and QuantizedMul broadcast only a scalar or a tensor repeated
  over the other's flat layout ("vector by tensor"), indexing the smaller
  operand modulo its size whatever its shape;
* QuantizedAdd converts both operands into its output range with TF's quint8
  shortcut (the codes of 0 and 1, then linear), except a one-element operand,
  which goes through the float path;
* QuantizedResizeBilinear on qint32 widens each code through float32 first.

Integer accumulators are evaluated exactly and wrapped to int32 like TF's.
QuantizedAvgPool truncates the mean as TF's stock kernel does; inside
`quantized_conversion.onednn_rounding()` it rounds it as TF's x86 oneDNN
kernel does.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .common import attr, choice, dtype_attr, int_list, int_vector
from .image import resize_scale
from .nn import matmul_operands, max_pool, pad_or_crop, pool_geometry, windows
from .quantized_conversion import (F32, add_range, c_divide, dequantize_like_eigen,
                                   float_to_quantized, multiplication_range, onednn_enabled,
                                   quantize_like_eigen, quantized_limits, range_scalar,
                                   requantize_8_to_32, requantize_in_new_range,
                                   requantize_like_eigen, widen_codes, wrap_int32, zero_point)
from .registry import KernelError, get_kernel, kernel

Array = np.ndarray
Attrs = Mapping[str, object]

_INT32 = np.dtype(np.int32)
_UINT8 = np.dtype(np.uint8)
# float64 sums of integer products are exact below this magnitude.
_EXACT_IN_FLOAT64 = float(2 ** 53)


def _passthrough_range(min_in: Array, max_in: Array, what: str = "input") -> list[Array]:
    """Ops that keep their input's range return it as float32 scalars."""
    return [range_scalar(min_in, f"min_{what}"), range_scalar(max_in, f"max_{what}")]


def _largest(x: Array) -> float:
    return float(max(abs(int(x.max(initial=0))), abs(int(x.min(initial=0)))))


def _exact_contract(a: Array, b: Array, axes: tuple[list[int], list[int]],
                    a_largest: float) -> Array:
    """tensordot of int64 operands, exactly: through float64 BLAS when no
    partial sum can exceed 2**53 (`a_largest` bounds |a|), else in (wrapping)
    int64."""
    depth = int(np.prod([a.shape[i] for i in axes[0]], dtype=np.int64))
    if a_largest * _largest(b) * max(depth, 1) < _EXACT_IN_FLOAT64:
        return np.rint(np.tensordot(a.astype(np.float64), b.astype(np.float64),
                                    axes=axes)).astype(np.int64)
    return np.tensordot(a, b, axes=axes)


# ---------------------------------------------------------------- convolution / matmul


def _conv_axis(size: int, window: int, stride: int, padding: str) -> tuple[int, int, int]:
    """(output size, pad before, pad after) of one spatial dim.  The offset of
    the first window is TF's quantized-conv formula (C division, so it can be
    negative and crop instead), not Conv2D's padding rule."""
    out = (size - window + stride) // stride if padding == "VALID" else -(-size // stride)
    if out <= 0:
        raise KernelError(f"filter {window} larger than input {size} with VALID padding")
    extent = (out - 1) * stride + window - size
    before = int(c_divide(extent + (1 if padding == "VALID" else 0), 2))
    return out, before, extent - before


def _conv_padding_code(offset: int, dtype: np.dtype) -> int:
    """What a padded pixel contributes after the zero point is subtracted.  When
    0.0 is representable TF pads with its code (contributing 0); when the code
    is above the type's range TF's im2col stores it truncated to the type, so
    it contributes (code mod 2**bits) - code; below the range TF's reference
    path contributes 0."""
    if offset < 0:
        return 0
    return int(np.array(offset, dtype=np.int64).astype(dtype)) - offset


@kernel("QuantizedConv2D")
def _quantized_conv2d(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """NHWC input x HWIO filter -> qint32, with zero points subtracted."""
    x, w, min_x, max_x, min_w, max_w = inputs
    if x.ndim != 4 or w.ndim != 4:
        raise KernelError(f"input and filter must be 4-D, got {list(x.shape)} and "
                          f"{list(w.shape)}")
    strides = int_list(attrs, "strides")
    if len(strides) != 4 or strides[0] != 1 or strides[3] != 1 or strides[1] != strides[2]:
        raise KernelError(f"strides {strides} unsupported: need [1, s, s, 1]")
    if any(d != 1 for d in int_list(attrs, "dilations", [1, 1, 1, 1])):
        raise KernelError("dilations other than 1 are not supported")
    padding = choice(attrs, "padding", ("SAME", "VALID"))
    if x.shape[3] != w.shape[2]:
        raise KernelError(f"input depth {x.shape[3]} != filter depth {w.shape[2]}")
    out_type = dtype_attr(attrs, "out_type", _INT32)
    lo_x, hi_x = range_scalar(min_x, "min_input"), range_scalar(max_x, "max_input")
    lo_w, hi_w = range_scalar(min_w, "min_filter"), range_scalar(max_w, "max_filter")
    x_offset, w_offset = zero_point(lo_x, hi_x, x.dtype), zero_point(lo_w, hi_w, w.dtype)
    stride = strides[1]
    _, top, bottom = _conv_axis(x.shape[1], w.shape[0], stride, padding)
    _, left, right = _conv_axis(x.shape[2], w.shape[1], stride, padding)
    shifted = x.astype(np.int64) - x_offset
    padded = pad_or_crop(shifted, ((top, bottom), (left, right)),
                          fill=_conv_padding_code(x_offset, x.dtype))
    patches = windows(padded, w.shape[:2], (stride, stride))  # N, OH, OW, C, KH, KW
    total = _exact_contract(patches, w.astype(np.int64) - w_offset, ([3, 4, 5], [2, 0, 1]),
                            _largest(padded))
    lo, hi = multiplication_range(lo_x, hi_x, lo_w, hi_w, x.dtype, w.dtype, out_type)
    return [wrap_int32(total).astype(out_type), lo, hi]


@kernel("QuantizedMatMul")
def _quantized_mat_mul(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """(a - zero_a) @ (b - zero_b) in int32; both ranges must be non-empty."""
    a, b, min_a, max_a, min_b, max_b = inputs
    lo_a, hi_a = range_scalar(min_a, "min_a", strict=True), range_scalar(max_a, "max_a")
    lo_b, hi_b = range_scalar(min_b, "min_b"), range_scalar(max_b, "max_b")
    if not hi_a > lo_a or not hi_b > lo_b:
        raise KernelError(f"ranges must satisfy max > min, got a [{lo_a}, {hi_a}] "
                          f"b [{lo_b}, {hi_b}]")
    a, b = matmul_operands(attrs, a, b)
    out_type = dtype_attr(attrs, "Toutput", _INT32)
    a_shifted = a.astype(np.int64) - zero_point(lo_a, hi_a, a.dtype)
    total = _exact_contract(a_shifted, b.astype(np.int64) - zero_point(lo_b, hi_b, b.dtype),
                            ([1], [0]), _largest(a_shifted))
    lo, hi = multiplication_range(lo_a, hi_a, lo_b, hi_b, a.dtype, b.dtype, out_type)
    return [wrap_int32(total).astype(out_type), lo, hi]


# ---------------------------------------------------------------- bias / activations


@kernel("QuantizedBiasAdd")
def _quantized_bias_add(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """Both operands are requantized (float32 path) into a symmetric qint32
    range 2**17 times the largest input magnitude, then added with the code of
    0.0 as a correction."""
    x, bias, min_x, max_x, min_b, max_b = inputs
    if x.ndim < 2 or bias.ndim != 1 or bias.shape[0] != x.shape[-1]:
        raise KernelError(f"bias {list(bias.shape)} must be 1-D and match the last dim of "
                          f"input {list(x.shape)} (rank >= 2)")
    out_type = dtype_attr(attrs, "out_type", _INT32)
    lo_x, hi_x = range_scalar(min_x, "min_input"), range_scalar(max_x, "max_input")
    lo_b, hi_b = range_scalar(min_b, "min_bias"), range_scalar(max_b, "max_bias")
    lo, hi = add_range(lo_x, hi_x, lo_b, hi_b)
    zero = int(float_to_quantized(0.0, lo, hi, out_type))
    x_total = quantize_like_eigen(dequantize_like_eigen(x, lo_x, hi_x), lo, hi, out_type)
    b_total = quantize_like_eigen(dequantize_like_eigen(bias, lo_b, hi_b), lo, hi, out_type)
    total = x_total.astype(np.int64) + wrap_int32(b_total.astype(np.int64) + zero)
    return [wrap_int32(total).astype(out_type), lo, hi]


def _clamped_activation(attrs: Attrs, inputs: list[Array], top: float | None) -> list[Array]:
    """Clamp the codes at the code of 0.0 (and of `top`); the range is unchanged."""
    x, min_x, max_x = inputs[0], inputs[-2], inputs[-1]
    lo, hi = range_scalar(min_x, "min_features"), range_scalar(max_x, "max_features")
    out = np.maximum(x, float_to_quantized(0.0, lo, hi, x.dtype))
    if top is not None:
        out = np.minimum(out, float_to_quantized(top, lo, hi, x.dtype))
    out_type = dtype_attr(attrs, "out_type", x.dtype)
    return [out.astype(out_type), lo, hi]


@kernel("QuantizedRelu")
def _quantized_relu(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    return _clamped_activation(attrs, inputs, None)


@kernel("QuantizedRelu6")
def _quantized_relu6(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    return _clamped_activation(attrs, inputs, 6.0)


# ---------------------------------------------------------------- pooling


def _pool_lists(attrs: Attrs, x: Array) -> tuple[list[int], list[int], tuple[int, ...] | None]:
    """ksize and strides, plus the output shape when it is empty: a VALID
    window larger than the input gives (C-truncated) (size - window + stride)
    // stride outputs, an error only when that is negative."""
    ksize, strides = int_list(attrs, "ksize"), int_list(attrs, "strides")
    if len(ksize) != 4 or len(strides) != 4 or x.ndim != 4 or min(strides) < 1:
        raise KernelError(f"ksize {ksize} and strides {strides} must have 4 entries (strides "
                          f"positive) and the input 4 dims, got shape {list(x.shape)}")
    if choice(attrs, "padding", ("SAME", "VALID")) == "SAME" or \
            (ksize[1] <= x.shape[1] and ksize[2] <= x.shape[2]):
        return ksize, strides, None
    dims = [int(c_divide(x.shape[i] - ksize[i] + strides[i], strides[i])) for i in (1, 2)]
    if min(dims) < 0:
        raise KernelError(f"window {ksize} larger than input {list(x.shape)}: the output size "
                          "would be negative")
    return ksize, strides, (x.shape[0], dims[0], dims[1], x.shape[3])


@kernel("QuantizedMaxPool")
def _quantized_max_pool(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """TF runs its plain MaxPool on the codes (padding never wins).  For a
    VALID window larger than the input the stock kernel returns an empty
    tensor; TF's x86 build (oneDNN) refuses it unless size - window + stride
    is <= 0 in each empty dim."""
    x, min_x, max_x = inputs
    ksize, strides, empty = _pool_lists(attrs, x)
    if empty and onednn_enabled() and any(
            x.shape[i] - ksize[i] + strides[i] > 0 for i in (1, 2) if empty[i] == 0):
        raise KernelError(f"oneDNN cannot pool a VALID window {ksize} with strides "
                          f"{strides} over input {list(x.shape)}")
    out = np.zeros(empty, x.dtype) if empty else max_pool(attrs, x, ksize, strides)
    return [out, *_passthrough_range(min_x, max_x)]


@kernel("QuantizedAvgPool")
def _quantized_avg_pool(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """Mean of the real (unpadded) codes under each window, saturated to the
    type.  TF's stock kernel truncates the integer mean toward zero; its x86
    builds run oneDNN instead, which divides in float32 and rounds half to
    even (reproduced inside `onednn_rounding()`)."""
    x, min_x, max_x = inputs
    ksize, strides, empty = _pool_lists(attrs, x)
    if empty:
        # oneDNN's kernel then returns its range outputs empty too.
        bounds = [np.zeros(0, F32)] * 2 if onednn_enabled() else _passthrough_range(min_x, max_x)
        return [np.zeros(empty, x.dtype), *bounds]
    _, x, window, stride, pads = pool_geometry(attrs, ksize, strides, x,
                                                paddings=("SAME", "VALID"))
    total = windows(pad_or_crop(x.astype(np.int64), pads), window, stride).sum(axis=(-2, -1))
    ones = np.ones((1,) + x.shape[1:3] + (1,), dtype=np.int64)
    count = windows(pad_or_crop(ones, pads), window, stride).sum(axis=(-2, -1))
    if onednn_enabled():
        mean = np.rint(total.astype(F32) / count.astype(F32))
    else:
        mean = c_divide(total, count)
    lowest, highest = quantized_limits(x.dtype)
    return [np.clip(mean, lowest, highest).astype(x.dtype), *_passthrough_range(min_x, max_x)]


# ---------------------------------------------------------------- elementwise add / mul


def _collapsed_rank(x_shape: tuple[int, ...], y_shape: tuple[int, ...]) -> int:
    """How many dims TF's BCast keeps after merging runs of dims that broadcast
    the same way (and dropping dims that are 1 in both): the quantized binary
    ops only handle one (same shape or scalar) or two (vector by tensor)."""
    if x_shape == y_shape:
        return 1
    rank = max(len(x_shape), len(y_shape))
    xs = (1,) * (rank - len(x_shape)) + tuple(x_shape)
    ys = (1,) * (rank - len(y_shape)) + tuple(y_shape)
    groups, previous = 0, None
    for a, b in zip(reversed(xs), reversed(ys)):
        if a != b and a != 1 and b != 1:
            raise KernelError(f"incompatible shapes {list(x_shape)} and {list(y_shape)}")
        if a == 1 and b == 1:
            continue
        pattern = (a == 1, b == 1)
        if pattern != previous:
            groups += 1
            previous = pattern
    return max(groups, 1)


def _binary_case(x: Array, y: Array) -> tuple[str, tuple[int, ...]]:
    """TF's dispatch for QuantizedAdd/QuantizedMul: 'scalar_x', 'scalar_y',
    'same' or 'vector' (smaller operand repeated over the larger's flat order)."""
    ndims = _collapsed_rank(x.shape, y.shape)
    out_shape = tuple(np.broadcast_shapes(x.shape, y.shape))
    if ndims == 1:
        if x.size == 1:
            return "scalar_x", out_shape
        return ("scalar_y" if y.size == 1 else "same"), out_shape
    if ndims > 2:
        raise KernelError(f"broadcast between {list(x.shape)} and {list(y.shape)} is not "
                          "supported (TF handles a scalar or a vector by a tensor only)")
    larger, smaller = (y, x) if x.size < y.size else (x, y)
    if smaller.size == 0:
        raise KernelError("vector operand must have at least 1 element")
    if larger.size != int(np.prod(out_shape)):
        raise KernelError(f"broadcast between {list(x.shape)} and {list(y.shape)} needs both "
                          "operands expanded; TF leaves part of its output unwritten")
    return "vector", out_shape


def _combine(case: str, x: Array, y: Array) -> tuple[Array, Array]:
    """Flat operands aligned as TF pairs them: (larger or full, partner)."""
    if case == "scalar_x":
        return y.reshape(-1), np.broadcast_to(x.reshape(-1), (y.size,))
    if case == "scalar_y":
        return x.reshape(-1), np.broadcast_to(y.reshape(-1), (x.size,))
    if case == "same":
        return x.reshape(-1), y.reshape(-1)
    larger, smaller = (y, x) if x.size < y.size else (x, y)
    return larger.reshape(-1), np.resize(smaller.reshape(-1), larger.size)


def _binary_ranges(inputs: list[Array]) -> tuple[float, float, float, float]:
    """QuantizedAdd/Mul's four rank-0 range operands; both ranges must be non-empty."""
    lo_x, hi_x, lo_y, hi_y = (range_scalar(v, name, strict=True) for v, name in
                              zip(inputs[2:6], ("min_x", "max_x", "min_y", "max_y")))
    if not hi_x > lo_x or not hi_y > lo_y:
        raise KernelError(f"ranges must satisfy max > min, got x [{lo_x}, {hi_x}] "
                          f"y [{lo_y}, {hi_y}]")
    return lo_x, hi_x, lo_y, hi_y


def _check_quint8(x: Array, y: Array, op: str) -> None:
    if x.dtype != _UINT8 or y.dtype != _UINT8:
        raise KernelError(f"TF's {op} kernel takes quint8 operands, got {x.dtype} and {y.dtype}")


@kernel("QuantizedAdd")
def _quantized_add(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """Output range symmetric, 2**14 times the largest input magnitude; each
    operand is moved into it with the quint8 shortcut, a one-element operand
    with the float path."""
    x, y = inputs[0], inputs[1]
    _check_quint8(x, y, "QuantizedAdd")
    lo_x, hi_x, lo_y, hi_y = _binary_ranges(inputs)
    case, out_shape = _binary_case(x, y)
    biggest = max(abs(min(lo_x, lo_y)), abs(max(hi_x, hi_y)))
    top = F32(biggest * F32(1 << 14))
    lo, hi = -top, top

    def widen(codes: Array, low: float, high: float, alone: bool) -> Array:
        if alone:
            return requantize_in_new_range(codes, low, high, lo, hi, _UINT8, _INT32)
        return requantize_8_to_32(codes, low, high, lo, hi)

    x_wide = widen(x, lo_x, hi_x, case == "scalar_x")
    y_wide = widen(y, lo_y, hi_y, case == "scalar_y")
    first, second = _combine(case, x_wide, y_wide)
    total = first.astype(np.int64) + second
    return [wrap_int32(total).reshape(out_shape).astype(dtype_attr(attrs, "Toutput", _INT32)),
            lo, hi]


@kernel("QuantizedMul")
def _quantized_mul(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """(x - zero_x) * (y - zero_y) in int32 under TF's broadcast cases."""
    x, y = inputs[0], inputs[1]
    _check_quint8(x, y, "QuantizedMul")
    lo_x, hi_x, lo_y, hi_y = _binary_ranges(inputs)
    case, out_shape = _binary_case(x, y)
    x_shift = x.astype(np.int64) - zero_point(lo_x, hi_x, x.dtype)
    y_shift = y.astype(np.int64) - zero_point(lo_y, hi_y, y.dtype)
    first, second = _combine(case, wrap_int32(x_shift), wrap_int32(y_shift))
    out_type = dtype_attr(attrs, "Toutput", _INT32)
    lo, hi = multiplication_range(lo_x, hi_x, lo_y, hi_y, x.dtype, y.dtype, out_type)
    total = first.astype(np.int64) * second
    return [wrap_int32(total).reshape(out_shape).astype(out_type), lo, hi]


# ---------------------------------------------------------------- data movement


@kernel("QuantizedConcat")
def _quantized_concat(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """Inputs whose range is not the output range are requantized (float32
    path).  The output range spans all inputs, symmetric around 0 for signed
    types.  concat_dim must be in [0, rank): TF rejects negative axes here."""
    count = int(attr(attrs, "N", (len(inputs) - 1) // 3))  # type: ignore[arg-type]
    if len(inputs) != 1 + 3 * count or count < 1:
        raise KernelError(f"expected 1 + 3 * N inputs, got {len(inputs)} for N={count}")
    axis = int(np.asarray(inputs[0]).reshape(-1)[0])
    values = inputs[1:1 + count]
    mins = [range_scalar(v, "input_mins") for v in inputs[1 + count:1 + 2 * count]]
    maxs = [range_scalar(v, "input_maxes") for v in inputs[1 + 2 * count:]]
    if not 0 <= axis < values[0].ndim:
        raise KernelError(f"concat_dim {axis} not in [0, {values[0].ndim})")
    lo, hi = min(mins), max(maxs)
    if quantized_limits(values[0].dtype)[0] < 0:
        biggest = max(abs(lo), abs(hi))
        lo, hi = -biggest, biggest
    parts = [v if (a, b) == (lo, hi) else requantize_like_eigen(v, a, b, lo, hi, v.dtype)
             for v, a, b in zip(values, mins, maxs)]
    return [np.concatenate(parts, axis=axis), lo, hi]


@kernel("QuantizedReshape")
def _quantized_reshape(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """Reshape the codes; min and max must be scalars or one-element vectors."""
    x, shape, min_x, max_x = inputs
    for value, name in ((min_x, "input_min"), (max_x, "input_max")):
        if np.ndim(value) > 1 or np.size(value) != 1:
            raise KernelError(f"{name} must be a scalar or a vector of 1 element")
    return [get_kernel("Reshape")(attrs, [x, shape])[0], *_passthrough_range(min_x, max_x)]


# ---------------------------------------------------------------- resize


def _lerp_axis(in_size: int, out_size: int, scale: F32, half_pixel: bool,
               resolution: int) -> tuple[Array, Array, Array, Array]:
    """Lower/upper source index, float32 weight and its fixed-point version
    (truncated, `resolution` fractional bits) per output index."""
    i = np.arange(out_size, dtype=F32)
    src = ((i + F32(0.5)) * scale - F32(0.5)) if half_pixel else i * scale
    floor = np.floor(src)
    upper = np.minimum(np.ceil(src).astype(np.int64), in_size - 1)
    lower = np.minimum(np.maximum(floor.astype(np.int64), 0), upper)
    lerp = (src - floor).astype(F32)
    fixed = np.trunc(lerp * F32(1 << resolution)).astype(np.int64)
    return lower, upper, lerp, fixed


def _lerp_fixed(tl: Array, tr: Array, bl: Array, br: Array, xl: Array, yl: Array,
                resolution: int, wrap: np.dtype) -> Array:
    """TF's integer bilinear step: x-lerp in fixed point, y-lerp on the
    (truncated) difference, then round half up; intermediates wrap to `wrap`."""
    one = 1 << resolution

    def held(v: Array) -> Array:
        return v.astype(wrap).astype(np.int64)

    top = held(tl * one + held((tr - tl) * xl))
    bottom = held(bl * one + held((br - bl) * xl))
    out = held(top + c_divide(bottom - top, one) * yl)
    return c_divide(out + one // 2, one)


@kernel("QuantizedResizeBilinear")
def _quantized_resize_bilinear(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """quint8 interpolates with 7 fractional bits in int16, qint32 with 30 in
    int64 (after passing each code through float32), float in float32.  TF
    does not reject align_corners together with half_pixel_centers here; the
    scale then follows align_corners."""
    images, size, min_x, max_x = inputs
    lo, hi = range_scalar(min_x, "min", strict=True), range_scalar(max_x, "max", strict=True)
    dims = int_vector(size)
    if images.ndim != 4 or len(dims) != 2 or min(dims) <= 0 or min(images.shape[1:3]) <= 0:
        raise KernelError(f"need 4-D non-empty images and two positive sizes, got "
                          f"{list(images.shape)} and {dims}")
    align = bool(attr(attrs, "align_corners", False))
    half = bool(attr(attrs, "half_pixel_centers", False))
    (height, width), (in_h, in_w) = dims, images.shape[1:3]
    if (height, width) == (in_h, in_w):
        return [images.copy(), lo, hi]
    floating = images.dtype.kind == "f"
    resolution = 0 if floating else (7 if images.dtype == _UINT8 else 30)
    y0, y1, ly, fy = _lerp_axis(in_h, height, resize_scale(in_h, height, align), half, resolution)
    x0, x1, lx, fx = _lerp_axis(in_w, width, resize_scale(in_w, width, align), half, resolution)
    rows0, rows1 = images[:, y0], images[:, y1]
    corners = (rows0[:, :, x0], rows0[:, :, x1], rows1[:, :, x0], rows1[:, :, x1])
    if floating:
        tl, tr, bl, br = (c.astype(F32) for c in corners)
        wx, wy = lx[None, None, :, None], ly[None, :, None, None]
        top, bottom = tl + (tr - tl) * wx, bl + (br - bl) * wx
        return [(top + (bottom - top) * wy).astype(images.dtype), lo, hi]
    wrap = np.dtype(np.int16) if images.dtype == _UINT8 else np.dtype(np.int64)
    widened = (widen_codes(c) for c in corners)
    out = _lerp_fixed(*widened, fx[None, None, :, None], fy[None, :, None, None],
                      resolution, wrap)
    return [wrap_int32(out).astype(images.dtype), lo, hi]
