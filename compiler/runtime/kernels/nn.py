"""Neural-network layers: convolutions, matmuls, pooling, normalisation, activations.

Spatial ops work internally in NHWC; NCHW operands are transposed at the
boundary.  Convolutions are im2col (a strided window view) times the filter
as one BLAS matmul, accumulated in float64 for float operands so the
reference sits closer to the exact result than TF's float32 arithmetic.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .array import mirror_pad
from .common import accumulator, attr, checked_shape, choice, dtype_attr, int_list, int_vector, is_floating
from .image import resize_bilinear
from .registry import KernelError, kernel

Array = np.ndarray
Attrs = Mapping[str, object]
Pads = tuple[tuple[int, int], tuple[int, int]]

_FORMATS_2D = ("NHWC", "NCHW")


# ---------------------------------------------------------------- layout helpers


def to_nhwc(x: Array, data_format: str) -> Array:
    return x.transpose(0, 2, 3, 1) if data_format == "NCHW" else x


def from_nhwc(x: Array, data_format: str) -> Array:
    return x.transpose(0, 3, 1, 2) if data_format == "NCHW" else x


def channel_axis(data_format: str, rank: int) -> int:
    """NC* formats put channels at dim 1 whatever the rank; the others at the last dim."""
    return 1 if data_format.startswith("NC") else rank - 1


def _hw(values: list[int], data_format: str, name: str) -> tuple[int, int]:
    """The (H, W) entries of a 4-list given in `data_format` order; the batch
    and channel entries must be 1 (TF does not stride or dilate over them)."""
    if len(values) != 4:
        raise KernelError(f"{name} must have 4 entries, got {values}")
    n, h, w, c = (values[0], values[2], values[3], values[1]) if data_format == "NCHW" \
        else values
    if n != 1 or c != 1:
        raise KernelError(f"{name} {values} over batch or channel dims is not supported")
    if h < 1 or w < 1:
        raise KernelError(f"{name} {values} must be positive")
    return h, w


def _explicit_hw(values: list[int], data_format: str) -> Pads:
    """(before, after) pairs for H and W from explicit_paddings (8 ints)."""
    if len(values) != 8:
        raise KernelError(f"explicit_paddings must have 8 entries, got {values}")
    pairs = [(values[2 * i], values[2 * i + 1]) for i in range(4)]
    n, h, w, c = (pairs[0], pairs[2], pairs[3], pairs[1]) if data_format == "NCHW" else pairs
    if n != (0, 0) or c != (0, 0):
        raise KernelError("explicit_paddings over batch or channel dims is not supported")
    if min(values) < 0:
        raise KernelError("explicit_paddings must be non-negative")
    return h, w


def axis_window_pads(size: int, window: int, stride: int, padding: str,
                 explicit: tuple[int, int] = (0, 0)) -> tuple[int, int]:
    """(before, after) padding of one spatial dim under TF's padding rules."""
    if padding == "VALID":
        before, after = 0, 0
    elif padding == "EXPLICIT":
        before, after = explicit
    else:  # SAME: output ceil(size / stride), the odd pixel of padding goes after
        out = -(-size // stride)
        total = max((out - 1) * stride + window - size, 0)
        before, after = total // 2, total - total // 2
    if size + before + after < window:
        raise KernelError(f"window {window} larger than padded input {size + before + after}")
    return before, after


def pad_or_crop(x: Array, pads: Pads, fill: object = 0) -> Array:
    """Pad H and W by `pads`; negative entries crop instead."""
    grow = [(0, 0), (max(pads[0][0], 0), max(pads[0][1], 0)),
            (max(pads[1][0], 0), max(pads[1][1], 0)), (0, 0)]
    if any(any(p) for p in grow):
        checked_shape([d + a + b for d, (a, b) in zip(x.shape, grow)], x.itemsize, "padded input")
        x = np.pad(x, grow, constant_values=fill)
    (t, b), (l, r) = pads
    h, w = x.shape[1], x.shape[2]
    return x[:, max(-t, 0):h - max(-b, 0), max(-l, 0):w - max(-r, 0)]


def windows(x: Array, kernel_hw: tuple[int, int], strides: tuple[int, int],
             dilations: tuple[int, int] = (1, 1)) -> Array:
    """Strided view (N, OH, OW, C, KH, KW) of every window of a padded NHWC tensor."""
    (kh, kw), (sh, sw), (dh, dw) = kernel_hw, strides, dilations
    eff_h, eff_w = (kh - 1) * dh + 1, (kw - 1) * dw + 1
    view = sliding_window_view(x, (eff_h, eff_w), axis=(1, 2))
    return view[:, ::sh, ::sw, :, ::dh, ::dw]


def fold_windows(taps: Array, in_hw: tuple[int, int], pads: Pads, strides: tuple[int, int],
                 dilations: tuple[int, int] = (1, 1)) -> Array:
    """The adjoint of `windows`: each window's taps (N, OH, OW, C, KH, KW) added back where `windows` read them,
    overlapping windows summing, then the padding dropped -- what every input gradient of a windowed op does."""
    n, oh, ow, c, kh, kw = taps.shape
    (t, b), (l, r) = pads
    (sh, sw), (dh, dw) = strides, dilations
    full_h = max(in_hw[0] + t + b, (oh - 1) * sh + (kh - 1) * dh + 1)
    full_w = max(in_hw[1] + l + r, (ow - 1) * sw + (kw - 1) * dw + 1)
    canvas = np.zeros(checked_shape((n, full_h, full_w, c), taps.itemsize), dtype=taps.dtype)
    for i in range(kh):
        for j in range(kw):
            canvas[:, i * dh:i * dh + (oh - 1) * sh + 1:sh, j * dw:j * dw + (ow - 1) * sw + 1:sw] += taps[..., i, j]
    return canvas[:, t:t + in_hw[0], l:l + in_hw[1]]


def valid_taps(in_hw: tuple[int, int], kernel_hw: tuple[int, int], strides: tuple[int, int], pads: Pads) -> Array:
    """(1, OH, OW, 1, KH, KW): True where a window's tap reads the input, False where it reads padding
    (average pools divide by the count of these; max pools never pick the others)."""
    inside = np.ones((1,) + tuple(in_hw) + (1,), dtype=np.bool_)
    return windows(pad_or_crop(inside, pads, fill=False), kernel_hw, strides)


def compute_type(dtype: np.dtype) -> np.dtype:
    """float64 for floats; int64 for ints (wraps back identically on the cast)."""
    return np.dtype(np.int64) if np.dtype(dtype).kind in "iu" else accumulator(dtype)


# ---------------------------------------------------------------- convolution


def conv2d_nhwc(x: Array, w: Array, strides: tuple[int, int], dilations: tuple[int, int],
                pads: Pads) -> Array:
    """Grouped-capable 2-D convolution of NHWC `x` with HWIO `w`."""
    kh, kw, cin, cout = w.shape
    if cin == 0 or x.shape[3] % cin or cout % (x.shape[3] // cin):
        raise KernelError(f"input depth {x.shape[3]} incompatible with filter {list(w.shape)}")
    groups = x.shape[3] // cin
    if cin == 1 and groups > 1:  # one input channel per group: ConvNeXt's depthwise layers
        return depthwise_nhwc(x, w.reshape(kh, kw, groups, cout // groups), strides, dilations, pads)
    acc = compute_type(x.dtype)
    xp = pad_or_crop(x.astype(acc, copy=False), pads)
    win = windows(xp, (kh, kw), strides, dilations)  # N, OH, OW, C, KH, KW
    wide_w = w.astype(acc, copy=False)
    per_group = cout // groups
    outs = [np.tensordot(win[:, :, :, g * cin:(g + 1) * cin],
                         wide_w[..., g * per_group:(g + 1) * per_group],
                         axes=([3, 4, 5], [2, 0, 1])) for g in range(groups)]
    out = outs[0] if groups == 1 else np.concatenate(outs, axis=-1)
    return out.astype(x.dtype)


class _ConvSpec:
    """Conv attributes decoded once: layout, strides, dilations, padding mode."""

    def __init__(self, attrs: Attrs):
        self.data_format = choice(attrs, "data_format", _FORMATS_2D, "NHWC")
        self.strides = _hw(int_list(attrs, "strides"), self.data_format, "strides")
        self.dilations = _hw(int_list(attrs, "dilations", [1, 1, 1, 1]), self.data_format,
                             "dilations")
        self.padding = choice(attrs, "padding", ("SAME", "VALID", "EXPLICIT"))
        self.explicit: Pads = ((0, 0), (0, 0))
        if self.padding == "EXPLICIT":
            self.explicit = _explicit_hw(int_list(attrs, "explicit_paddings", []),
                                         self.data_format)

    def pads(self, in_hw: tuple[int, int], kernel_hw: tuple[int, int]) -> Pads:
        """Padding for an NHWC input of spatial size `in_hw` and a `kernel_hw` filter."""
        eff = [(k - 1) * d + 1 for k, d in zip(kernel_hw, self.dilations)]
        h = axis_window_pads(in_hw[0], eff[0], self.strides[0], self.padding, self.explicit[0])
        w = axis_window_pads(in_hw[1], eff[1], self.strides[1], self.padding, self.explicit[1])
        return h, w


def _check_4d(x: Array, name: str) -> None:
    if x.ndim != 4:
        raise KernelError(f"{name} must be 4-D, got shape {list(x.shape)}")


@kernel("Conv2D")
def _conv2d(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    x, w = inputs
    _check_4d(x, "input")
    _check_4d(w, "filter")
    spec = _ConvSpec(attrs)
    x = to_nhwc(x, spec.data_format)
    pads = spec.pads(x.shape[1:3], w.shape[:2])
    out = conv2d_nhwc(x, w, spec.strides, spec.dilations, pads)
    return [from_nhwc(out, spec.data_format)]


def depthwise_nhwc(x: Array, w: Array, strides: tuple[int, int], dilations: tuple[int, int],
                   pads: Pads) -> Array:
    """Depthwise convolution of NHWC `x` with HW·C·M `w`: channel c with multiplier m lands on
    output channel c * M + m.  One broadcast multiply-add per filter tap keeps it vectorised
    without im2col."""
    kh, kw, c, m = w.shape
    acc = compute_type(x.dtype)
    xp = pad_or_crop(x.astype(acc, copy=False), pads)
    win = windows(xp, (kh, kw), strides, dilations)
    wide_w = w.astype(acc, copy=False)
    out = np.zeros(win.shape[:4] + (m,), dtype=acc)
    for i in range(kh):
        for j in range(kw):
            out += win[..., i, j, None] * wide_w[i, j]
    return out.reshape(out.shape[:3] + (c * m,)).astype(x.dtype)


@kernel("DepthwiseConv2dNative")
def _depthwise_conv2d(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    x, w = inputs
    _check_4d(x, "input")
    _check_4d(w, "filter")
    spec = _ConvSpec(attrs)
    x = to_nhwc(x, spec.data_format)
    kh, kw, c, _ = w.shape
    if x.shape[3] != c:
        raise KernelError(f"input depth {x.shape[3]} != filter depth {c}")
    out = depthwise_nhwc(x, w, spec.strides, spec.dilations, spec.pads(x.shape[1:3], (kh, kw)))
    return [from_nhwc(out, spec.data_format)]


def conv2d_backprop_input(attrs: Attrs, input_shape: list[int], w: Array, dy: Array,
                          depthwise: bool = False) -> Array:
    """Transposed (or, with `depthwise`, transposed depthwise) convolution: dy times the
    filter, per tap, folded back onto the padded input, then the padding dropped."""
    _check_4d(w, "filter")
    _check_4d(dy, "out_backprop")
    spec = _ConvSpec(attrs)
    if len(input_shape) == 2:  # spatial-only input_sizes
        dims = {"N": dy.shape[0], "C": w.shape[2]}
        input_shape = [dims["N"], dims["C"], *input_shape] if spec.data_format == "NCHW" \
            else [dims["N"], *input_shape, dims["C"]]
    if len(input_shape) != 4:
        raise KernelError(f"input_sizes must have 4 entries, got {input_shape}")
    checked_shape(input_shape, 8, "input_sizes")
    n, h, wd, c = to_nhwc(np.empty(input_shape, dtype=np.bool_), spec.data_format).shape
    dy = to_nhwc(dy, spec.data_format)
    kh, kw, cin, cout = w.shape
    if cin != c:
        raise KernelError(f"input depth {c} != filter depth {cin}")
    pads = spec.pads((h, wd), (kh, kw))
    (sh, sw), (dh, dw) = spec.strides, spec.dilations
    oh = ((h + sum(pads[0])) - ((kh - 1) * dh + 1)) // sh + 1
    ow = ((wd + sum(pads[1])) - ((kw - 1) * dw + 1)) // sw + 1
    expected = [n, oh, ow, cin * cout if depthwise else cout]
    if list(dy.shape) != expected:
        raise KernelError(f"out_backprop shape {list(dy.shape)} != expected {expected}")
    acc = compute_type(dy.dtype)
    wide_dy, wide_w = dy.astype(acc), w.astype(acc)
    if depthwise:  # output channel c * M + m came from input channel c through w[..., c, m]
        taps = np.einsum("nhwcm,ijcm->nhwcij", wide_dy.reshape(n, oh, ow, cin, cout), wide_w)
    else:
        taps = np.moveaxis(np.tensordot(wide_dy, wide_w, axes=([3], [3])), 5, 3)  # one BLAS call
    out = fold_windows(taps, (h, wd), pads, spec.strides, spec.dilations).astype(dy.dtype)
    return from_nhwc(out, spec.data_format)


@kernel("Conv2DBackpropInput")
def _conv2d_backprop_input_v1(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    sizes, w, dy = inputs
    return [conv2d_backprop_input(attrs, int_vector(sizes), w, dy)]


@kernel("Conv2DBackpropInputV2")
def _conv2d_backprop_input_v2(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    x, w, dy = inputs
    return [conv2d_backprop_input(attrs, list(x.shape), w, dy)]


# ---------------------------------------------------------------- fused pad / resize conv


def _fused_offset(out: int, stride: int, window: int, padded: int, padding: str) -> int:
    """TF's fused kernel positions patches with its own formula (C division,
    truncating toward zero), which for some stride/size combinations differs
    from Conv2D's padding -- reproduce it rather than Conv2D's."""
    num = (out - 1) * stride + window - padded + (1 if padding == "VALID" else 0)
    return int(num / 2)


def _fused_pad_conv(image: Array, paddings: Array, w: Array, attrs: Attrs) -> Array:
    """MirrorPad then convolve, with TF's fused-kernel patch placement."""
    mode = choice(attrs, "mode", ("REFLECT", "SYMMETRIC"))
    padding = choice(attrs, "padding", ("SAME", "VALID"))
    strides = _hw(int_list(attrs, "strides"), "NHWC", "strides")
    _check_4d(image, "input")
    _check_4d(w, "filter")
    pads = np.asarray(paddings).reshape(-1, 2)
    if pads.shape[0] != 4 or np.any(pads[[0, 3]] != 0):
        raise KernelError("fused mirror padding supports spatial padding of 4-D inputs only")
    padded = mirror_pad(image, [(int(a), int(b)) for a, b in pads], mode)
    conv_pads = []
    for axis in (0, 1):
        size, k, s = padded.shape[1 + axis], w.shape[axis], strides[axis]
        out = -(-size // s) if padding == "SAME" else -(-(size - k + 1) // s)
        if out <= 0:
            raise KernelError(f"window {k} larger than padded input {size}")
        before = _fused_offset(out, s, k, size, padding)
        conv_pads.append((before, (out - 1) * s + k - size - before))
    return conv2d_nhwc(padded, w, strides, (1, 1), (conv_pads[0], conv_pads[1]))


@kernel("FusedPadConv2D")
def _fused_pad_conv2d(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    x, paddings, w = inputs
    return [_fused_pad_conv(x, paddings, w, attrs)]


@kernel("FusedResizeAndPadConv2D")
def _fused_resize_pad_conv2d(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """Legacy bilinear resize (no half-pixel centres), MirrorPad, Conv2D."""
    x, size, paddings, w = inputs
    _check_4d(x, "input")
    height, width = int_vector(size)
    align = bool(attr(attrs, "resize_align_corners", False))
    resized = resize_bilinear(x, height, width, align, False).astype(x.dtype)
    return [_fused_pad_conv(resized, paddings, w, attrs)]


# ---------------------------------------------------------------- bias / matmul


@kernel("BiasAdd", "BiasAddV1")
def _bias_add(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """NCHW puts channels at dim 1 whatever the rank (`channel_axis`); NHWC at the last dim."""
    x, bias = inputs
    fmt = choice(attrs, "data_format", _FORMATS_2D + ("NDHWC", "NCDHW"), "NHWC")
    if x.ndim < 2 or bias.ndim != 1:
        raise KernelError(f"bad shapes value {list(x.shape)} bias {list(bias.shape)}")
    axis = channel_axis(fmt, x.ndim)
    if x.shape[axis] != bias.shape[0]:
        raise KernelError(f"bias size {bias.shape[0]} != channel dim {x.shape[axis]}")
    shaped = bias.reshape((-1,) + (1,) * (x.ndim - 1 - axis))
    return [(x + shaped).astype(x.dtype)]


def _matmul(a: Array, b: Array, out_dtype: np.dtype) -> Array:
    acc = compute_type(np.dtype(out_dtype))
    return np.matmul(a.astype(acc), b.astype(acc)).astype(out_dtype)


def _adjoint(x: Array, flag: object) -> Array:
    if not flag:
        return x
    t = np.swapaxes(x, -1, -2)
    return np.conj(t) if t.dtype.kind == "c" else t


def matmul_operands(attrs: Attrs, a: Array, b: Array) -> tuple[Array, Array]:
    """MatMul's (and QuantizedMatMul's) operands, transposed as the attributes say and checked."""
    if a.ndim != 2 or b.ndim != 2:
        raise KernelError(f"operands must be matrices, got {list(a.shape)} and {list(b.shape)}")
    a = a.T if attr(attrs, "transpose_a", False) else a
    b = b.T if attr(attrs, "transpose_b", False) else b
    if a.shape[1] != b.shape[0]:
        raise KernelError(f"inner dimensions differ: {list(a.shape)} x {list(b.shape)}")
    return a, b


@kernel("MatMul")
def _mat_mul(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    a, b = matmul_operands(attrs, *inputs)
    return [_matmul(a, b, a.dtype)]


def _batch_matmul(attrs: Attrs, inputs: list[Array], out_dtype: np.dtype,
                  broadcast: bool) -> Array:
    x, y = inputs
    if x.ndim < 2 or y.ndim < 2:
        raise KernelError("operands must have rank >= 2")
    if not broadcast and x.shape[:-2] != y.shape[:-2]:
        raise KernelError(f"batch dims differ: {list(x.shape)} vs {list(y.shape)}")
    x, y = _adjoint(x, attr(attrs, "adj_x", False)), _adjoint(y, attr(attrs, "adj_y", False))
    if x.shape[-1] != y.shape[-2]:
        raise KernelError(f"inner dimensions differ: {list(x.shape)} x {list(y.shape)}")
    return _matmul(x, y, out_dtype)


@kernel("BatchMatMul")
def _batch_mat_mul(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    return [_batch_matmul(attrs, inputs, inputs[0].dtype, broadcast=False)]


@kernel("BatchMatMulV2")
def _batch_mat_mul_v2(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    return [_batch_matmul(attrs, inputs, inputs[0].dtype, broadcast=True)]


@kernel("BatchMatMulV3")
def _batch_mat_mul_v3(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """Operands of types Ta/Tb are widened to Tout before multiplying."""
    out = dtype_attr(attrs, "Tout", inputs[0].dtype)
    return [_batch_matmul(attrs, [v.astype(out) for v in inputs], out, broadcast=True)]


# ---------------------------------------------------------------- pooling


def pool_geometry(attrs: Attrs, ksize: list[int], strides: list[int], x: Array,
                   paddings: tuple[str, ...] = ("SAME", "VALID", "EXPLICIT"),
                   ) -> tuple[str, Array, tuple[int, int], tuple[int, int], Pads]:
    """Layout, NHWC input, window, strides and padding of a pooling op."""
    fmt = choice(attrs, "data_format", _FORMATS_2D, "NHWC")
    _check_4d(x, "input")
    window = _hw(ksize, fmt, "ksize")
    stride = _hw(strides, fmt, "strides")
    padding = choice(attrs, "padding", paddings)
    explicit: Pads = ((0, 0), (0, 0))
    if padding == "EXPLICIT":
        explicit = _explicit_hw(int_list(attrs, "explicit_paddings", []), fmt)
    x = to_nhwc(x, fmt)
    pads: Pads = (axis_window_pads(x.shape[1], window[0], stride[0], padding, explicit[0]),
                  axis_window_pads(x.shape[2], window[1], stride[1], padding, explicit[1]))
    return fmt, x, window, stride, pads


def max_pool(attrs: Attrs, x: Array, ksize: list[int], strides: list[int]) -> Array:
    """Padding never wins the max: pad with the type's lowest value."""
    fmt, x, window, stride, pads = pool_geometry(attrs, ksize, strides, x)
    lowest = -np.inf if is_floating(x.dtype) else np.iinfo(x.dtype).min
    xp = pad_or_crop(x, pads, fill=np.array(lowest).astype(x.dtype))
    out = windows(xp, window, stride).max(axis=(-2, -1))
    return from_nhwc(out.astype(x.dtype), fmt)


@kernel("MaxPool")
def _max_pool_v1(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    return [max_pool(attrs, inputs[0], int_list(attrs, "ksize"), int_list(attrs, "strides"))]


@kernel("MaxPoolV2")
def _max_pool_v2(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    x, ksize, strides = inputs
    return [max_pool(attrs, x, int_vector(ksize), int_vector(strides))]


@kernel("AvgPool")
def _avg_pool(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """Each output averages only the real (unpadded) inputs under its window."""
    fmt, x, window, stride, pads = pool_geometry(attrs, int_list(attrs, "ksize"),
                                                  int_list(attrs, "strides"), inputs[0],
                                                  paddings=("SAME", "VALID"))
    acc = accumulator(x.dtype)
    total = windows(pad_or_crop(x.astype(acc), pads), window, stride).sum(axis=(-2, -1))
    count = valid_taps(x.shape[1:3], window, stride, pads).sum(axis=(-2, -1))
    return [from_nhwc((total / count).astype(x.dtype), fmt)]


# ---------------------------------------------------------------- normalisation


def _fused_batch_norm(attrs: Attrs, inputs: list[Array], formats: tuple[str, ...],
                      reserve_3: bool) -> list[Array]:
    """Inference normalises with the given statistics and echoes them back;
    training uses batch statistics and reports the Bessel-corrected variance
    (blended by exponential_avg_factor) as TF does."""
    x, scale, offset, mean, variance = inputs
    fmt = choice(attrs, "data_format", formats, "NHWC")
    eps = float(attr(attrs, "epsilon", 1e-4))  # type: ignore[arg-type]
    training = bool(attr(attrs, "is_training", True))
    stat_type = scale.dtype
    axis = channel_axis(fmt, x.ndim)
    shape = [1] * x.ndim
    shape[axis] = -1
    wide = x.astype(np.float64)
    if training:
        axes = tuple(i for i in range(x.ndim) if i != axis)
        batch_mean, batch_var = wide.mean(axis=axes), wide.var(axis=axes)
        count = x.size // max(x.shape[axis], 1)
        unbiased = batch_var * count / max(count - 1, 1)
        factor = float(attr(attrs, "exponential_avg_factor", 1.0))  # type: ignore[arg-type]
        if factor != 1.0:
            unbiased = (1 - factor) * variance.astype(np.float64) + factor * unbiased
            running_mean = (1 - factor) * mean.astype(np.float64) + factor * batch_mean
        else:
            running_mean = batch_mean
        use_mean, use_var = batch_mean, batch_var
        stats = [running_mean, unbiased, batch_mean, batch_var]
    else:
        use_mean, use_var = mean.astype(np.float64), variance.astype(np.float64)
        stats = [mean, variance, mean, variance]
    inv = scale.astype(np.float64) / np.sqrt(use_var + eps)
    y = (wide - use_mean.reshape(shape)) * inv.reshape(shape) + \
        offset.astype(np.float64).reshape(shape)
    outs = [y.astype(x.dtype)] + [np.asarray(s).astype(stat_type) for s in stats]
    if reserve_3:
        outs.append(np.zeros((0,), dtype=stat_type))
    return outs


@kernel("FusedBatchNorm")
def _fused_batch_norm_v1(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    return _fused_batch_norm(attrs, inputs, _FORMATS_2D, reserve_3=False)


@kernel("FusedBatchNormV2")
def _fused_batch_norm_v2(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    return _fused_batch_norm(attrs, inputs, _FORMATS_2D + ("NDHWC", "NCDHW"), reserve_3=False)


@kernel("FusedBatchNormV3")
def _fused_batch_norm_v3(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    return _fused_batch_norm(attrs, inputs, _FORMATS_2D + ("NDHWC", "NCDHW"), reserve_3=True)


@kernel("_MklLayerNorm")
def _layer_norm(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """oneDNN's fused layer norm (TF's remapper writes it for Keras' LayerNormalization): the last
    axis normalized with its own mean and variance, then scaled and offset by vectors of its size."""
    x, scale, offset = (a.astype(accumulator(a.dtype)) for a in inputs)
    if scale.shape != x.shape[-1:] or offset.shape != x.shape[-1:]:
        raise KernelError(f"scale {list(scale.shape)} and offset {list(offset.shape)} must be vectors of the "
                          f"input's last dimension {list(x.shape[-1:])}")
    mean = x.mean(axis=-1, keepdims=True)
    variance = np.square(x - mean).mean(axis=-1, keepdims=True)
    eps = float(attr(attrs, "epsilon", 0.001))  # type: ignore[arg-type]
    return [((x - mean) / np.sqrt(variance + eps) * scale + offset).astype(inputs[0].dtype)]


@kernel("BatchNormWithGlobalNormalization")
def _batch_norm_global(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """The pre-fused TF1 batch norm: statistics per last dimension."""
    t, m, v, beta, gamma = (a.astype(accumulator(a.dtype)) for a in inputs)
    eps = float(attr(attrs, "variance_epsilon"))  # type: ignore[arg-type]
    factor = 1.0 / np.sqrt(v + eps)
    if attr(attrs, "scale_after_normalization"):
        factor = factor * gamma
    return [((t - m) * factor + beta).astype(inputs[0].dtype)]


def _sigmoid(x: Array) -> Array:
    with np.errstate(over="ignore"):
        return (1 / (1 + np.exp(-x))).astype(x.dtype)


@kernel("LSTMBlockCell")
def _lstm_block_cell(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """One step of TF1 contrib's fused LSTM: gates (i, ci, f, o) from [x, h_prev] @ w + b, optional
    peepholes, the new cell clipped to +-cell_clip when that is positive.  Returns (i, cs, f, o,
    ci, co, h) as TF does."""
    x, cs_prev, h_prev, w, wci, wcf, wco, b = inputs
    units = cs_prev.shape[-1] if cs_prev.ndim == 2 else -1
    if x.ndim != 2 or h_prev.shape != cs_prev.shape or w.shape != (x.shape[1] + units, 4 * units) \
            or b.shape != (4 * units,):
        raise KernelError(f"shapes x {list(x.shape)}, cs_prev {list(cs_prev.shape)}, h_prev {list(h_prev.shape)}, "
                          f"w {list(w.shape)}, b {list(b.shape)} do not make an LSTM cell")
    gates = (np.concatenate([x, h_prev], axis=1) @ w + b).astype(x.dtype)
    i, ci, f, o = np.split(gates, 4, axis=1)
    peep = bool(attr(attrs, "use_peephole", False))
    i = _sigmoid(i + cs_prev * wci if peep else i)
    f = _sigmoid(f + np.asarray(attr(attrs, "forget_bias", 1.0), x.dtype) + (cs_prev * wcf if peep else 0))
    ci = np.tanh(ci)
    cs = ci * i + cs_prev * f
    clip = float(attr(attrs, "cell_clip", 3.0))  # type: ignore[arg-type]
    if clip > 0:
        cs = np.clip(cs, -clip, clip).astype(x.dtype)
    o = _sigmoid(o + cs * wco if peep else o)
    co = np.tanh(cs)
    return [i, cs, f, o, ci, co, co * o]


@kernel("LRN")
def _lrn(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """x / (bias + alpha * sum of squares over the depth window) ** beta."""
    x = inputs[0]
    _check_4d(x, "input")
    radius = int(attr(attrs, "depth_radius", 5))  # type: ignore[arg-type]
    bias = float(attr(attrs, "bias", 1.0))  # type: ignore[arg-type]
    alpha = float(attr(attrs, "alpha", 1.0))  # type: ignore[arg-type]
    beta = float(attr(attrs, "beta", 0.5))  # type: ignore[arg-type]
    wide = x.astype(np.float64)
    depth = x.shape[3]
    prefix = np.concatenate([np.zeros(x.shape[:3] + (1,)), np.cumsum(wide * wide, axis=3)], 3)
    d = np.arange(depth)
    upper, lower = np.minimum(d + radius + 1, depth), np.maximum(d - radius, 0)
    window = prefix[..., upper] - prefix[..., lower]
    return [(wide / (bias + alpha * window) ** beta).astype(x.dtype)]


# ---------------------------------------------------------------- activations


def _register_activation(op_type: str, fn: Callable[[Array, Attrs], Array]) -> None:
    """Activations evaluate in float64 (ints as themselves) and round once."""

    @kernel(op_type)
    def activation(attrs: Attrs, inputs: list[Array]) -> list[Array]:
        x = inputs[0]
        return [np.asarray(fn(x.astype(accumulator(x.dtype), copy=False), attrs)).astype(x.dtype)]


# TF's SELU constants (its kernel's, in double), shared by the gradient kernels and the ONNX lowerings.
SELU_SCALE = 1.0507009873554804934193349852946
SELU_ALPHA = 1.6732632423543772848170429916717


def _softplus(x: Array) -> Array:
    """log(1 + e^x) without overflow."""
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


def _softmax(x: Array) -> Array:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _log_softmax(x: Array) -> Array:
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


LEAKY_RELU_DEFAULT_ALPHA = float(np.float32(0.2))


def _leaky_relu(x: Array, attrs: Attrs) -> Array:
    # The OpDef's default is the float32 nearest 0.2, as a present attribute would be.
    alpha = float(attr(attrs, "alpha", LEAKY_RELU_DEFAULT_ALPHA))  # type: ignore[arg-type]
    return np.where(x > 0, x, x * alpha)


_register_activation("Relu", lambda x, a: np.maximum(x, 0))
_register_activation("Relu6", lambda x, a: np.minimum(np.maximum(x, 0), 6))
_register_activation("Elu", lambda x, a: np.where(x < 0, np.expm1(x), x))
_register_activation("Selu", lambda x, a: SELU_SCALE * np.where(x < 0, SELU_ALPHA * np.expm1(x),
                                                                 x))
_register_activation("LeakyRelu", _leaky_relu)
_register_activation("Sigmoid", lambda x, a: 1.0 / (1.0 + np.exp(-x)))
_register_activation("Tanh", lambda x, a: np.tanh(x))
_register_activation("Softplus", lambda x, a: _softplus(x))
_register_activation("Softsign", lambda x, a: x / (1 + np.abs(x)))
_register_activation("Softmax", lambda x, a: _softmax(x))
_register_activation("LogSoftmax", lambda x, a: _log_softmax(x))
