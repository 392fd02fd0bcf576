"""Elementwise arithmetic, comparisons, casts and reductions.

Binary ops broadcast like numpy (TF's rules are the same).  Where numpy's
integer semantics differ from TF's -- truncating `Div`, C-style `Mod`, errors
on integer division by zero -- the kernels spell TF's rule out explicitly.
Transcendental functions are evaluated in float64 and rounded once to the
operand type, so the reference is at least as accurate as TF's float32 code.
"""
from __future__ import annotations

import math as _math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from .common import (accumulator, attr, axis_index, checked_shape, dtype_attr, int_vector, is_floating,
                     scalar_int)
from .registry import KernelError, kernel

Array = np.ndarray
Attrs = Mapping[str, object]

try:  # ml_dtypes knows the mantissa width of bfloat16 and the float8 types
    import ml_dtypes as _ml
except ImportError:  # pragma: no cover
    _ml = None


# ---------------------------------------------------------------- helpers


def _is_int(x: Array) -> bool:
    return x.dtype.kind in "iu"


def _check_int_divisor(y: Array) -> None:
    """TF fails integer division by zero instead of producing garbage."""
    if np.any(y == 0):
        raise KernelError("integer division by zero")


def _trunc_div(x: Array, y: Array) -> Array:
    """C-style integer division (rounds toward zero)."""
    _check_int_divisor(y)
    return (x - np.fmod(x, y)) // y


def _float_op(fn: Callable[..., Array]) -> Callable[..., Array]:
    """Evaluate `fn` in float64/complex128 and round once to the operand type."""

    def run(*args: Array) -> Array:
        dtype = args[0].dtype
        wide = [a.astype(accumulator(a.dtype), copy=False) for a in args]
        return np.asarray(fn(*wide)).astype(dtype, copy=False)

    return run


def _register_unary(op_types: tuple[str, ...], fn: Callable[[Array], Array]) -> None:
    @kernel(*op_types)
    def unary(attrs: Attrs, inputs: list[Array]) -> list[Array]:
        x = inputs[0]
        return [np.asarray(fn(x)).astype(x.dtype, copy=False)]


def _register_binary(op_types: tuple[str, ...], fn: Callable[[Array, Array], Array]) -> None:
    @kernel(*op_types)
    def binary(attrs: Attrs, inputs: list[Array]) -> list[Array]:
        x, y = inputs
        return [np.asarray(fn(x, y)).astype(x.dtype, copy=False)]


def _register_predicate(op_types: tuple[str, ...], fn: Callable[..., Array]) -> None:
    @kernel(*op_types)
    def predicate(attrs: Attrs, inputs: list[Array]) -> list[Array]:
        return [np.asarray(fn(*inputs), dtype=np.bool_)]


# ---------------------------------------------------------------- unary math


def _erf(x: Array) -> Array:
    """numpy has no erf; math.erf is correctly rounded in double precision."""
    return np.asarray(np.frompyfunc(_math.erf, 1, 1)(x), dtype=np.float64)


def _erfc(x: Array) -> Array:
    return np.asarray(np.frompyfunc(_math.erfc, 1, 1)(x), dtype=np.float64)


def _reciprocal(x: Array) -> Array:
    if _is_int(x):
        return _trunc_div(np.ones_like(x), x)
    return _float_op(lambda v: 1.0 / v)(x)


def _round(x: Array) -> Array:
    """Banker's rounding, like TF (and numpy)."""
    return x if _is_int(x) else np.round(x)


_TRANSCENDENTAL: dict[str, Callable[[Array], Array]] = {
    "Sqrt": np.sqrt, "Rsqrt": lambda v: 1.0 / np.sqrt(v), "Exp": np.exp, "Expm1": np.expm1,
    "Log": np.log, "Log1p": np.log1p, "Sin": np.sin, "Cos": np.cos, "Tan": np.tan,
    "Asin": np.arcsin, "Acos": np.arccos, "Atan": np.arctan, "Sinh": np.sinh, "Cosh": np.cosh,
    "Asinh": np.arcsinh, "Acosh": np.arccosh, "Atanh": np.arctanh, "Erf": _erf, "Erfc": _erfc,
}
for _op, _fn in _TRANSCENDENTAL.items():
    _register_unary((_op,), _float_op(_fn))

_register_unary(("Neg",), np.negative)
_register_unary(("Abs",), np.abs)
_register_unary(("Square",), lambda x: x * x)
_register_unary(("Sign",), np.sign)
_register_unary(("Floor",), np.floor)
_register_unary(("Ceil",), np.ceil)
_register_unary(("Round", "Rint"), _round)
_register_unary(("Reciprocal", "Inv"), _reciprocal)

_register_predicate(("IsNan",), np.isnan)
_register_predicate(("IsInf",), np.isinf)
_register_predicate(("IsFinite",), np.isfinite)
_register_predicate(("LogicalNot",), np.logical_not)


# ---------------------------------------------------------------- binary math


def _div(x: Array, y: Array) -> Array:
    return _trunc_div(x, y) if _is_int(x) else x / y


def _truncate_div(x: Array, y: Array) -> Array:
    return _trunc_div(x, y) if _is_int(x) else np.trunc(x / y)


def _floor_div(x: Array, y: Array) -> Array:
    if _is_int(x):
        _check_int_divisor(y)
        return x // y
    return np.floor(x / y)


def _floor_mod(x: Array, y: Array) -> Array:
    """Result takes the divisor's sign (Python semantics)."""
    if _is_int(x):
        _check_int_divisor(y)
        return np.mod(x, y)
    trunc = np.fmod(x, y)
    fix = (trunc != 0) & ((y < 0) != (trunc < 0))
    return np.where(fix, trunc + y, trunc)


def _trunc_mod(x: Array, y: Array) -> Array:
    """C semantics: result takes the dividend's sign."""
    if _is_int(x):
        _check_int_divisor(y)
    return np.fmod(x, y)


def _pow(x: Array, y: Array) -> Array:
    if _is_int(x):
        if np.any(y < 0):
            raise KernelError("integers to negative integer powers are not allowed")
        return np.power(x, y)
    return _float_op(np.power)(x, y)


def _div_no_nan(x: Array, y: Array) -> Array:
    return np.where(y == 0, np.zeros((), x.dtype), x / np.where(y == 0, np.ones((), y.dtype), y))


def _mul_no_nan(x: Array, y: Array) -> Array:
    return np.where(y == 0, np.zeros((), x.dtype), x * y)


def _xdivy(x: Array, y: Array) -> Array:
    """x / y, but 0 wherever x is 0 (also where y is 0 too)."""
    return np.where(x == 0, np.zeros((), x.dtype), x / y)


def _xlogy(x: Array, y: Array) -> Array:
    """x * log(y), but 0 wherever x is 0 (also where y is 0 too)."""
    return np.where(x == 0, np.zeros((), x.dtype), x * np.log(y))


def _xlog1py(x: Array, y: Array) -> Array:
    """x * log(1 + y), but 0 wherever x is 0 (also where y is -1)."""
    return np.where(x == 0, np.zeros((), x.dtype), x * np.log1p(y))


def _squared_difference(x: Array, y: Array) -> Array:
    d = x - y
    return d * np.conj(d) if d.dtype.kind == "c" else d * d


_register_binary(("Add", "AddV2"), np.add)  # object arrays: Add concatenates strings
_register_binary(("Sub",), np.subtract)
_register_binary(("Mul",), np.multiply)
_register_binary(("RealDiv", "Div"), _div)
_register_binary(("TruncateDiv",), _truncate_div)
_register_binary(("FloorDiv",), _floor_div)
_register_binary(("FloorMod",), _floor_mod)
_register_binary(("Mod", "TruncateMod"), _trunc_mod)
_register_binary(("Maximum",), np.maximum)
_register_binary(("Minimum",), np.minimum)
_register_binary(("Pow",), _pow)
_register_binary(("SquaredDifference",), _squared_difference)
_register_binary(("DivNoNan",), _div_no_nan)
_register_binary(("MulNoNan",), _mul_no_nan)
_register_binary(("Xdivy",), _xdivy)
_register_binary(("Xlogy",), _float_op(_xlogy))
_register_binary(("Xlog1py",), _float_op(_xlog1py))
_register_binary(("Atan2",), _float_op(np.arctan2))
_register_binary(("BitwiseAnd",), np.bitwise_and)
_register_binary(("BitwiseOr",), np.bitwise_or)
_register_binary(("BitwiseXor",), np.bitwise_xor)

_register_predicate(("Less",), np.less)
_register_predicate(("LessEqual",), np.less_equal)
_register_predicate(("Greater",), np.greater)
_register_predicate(("GreaterEqual",), np.greater_equal)
_register_predicate(("LogicalAnd",), np.logical_and)
_register_predicate(("LogicalOr",), np.logical_or)


def _broadcastable(x: Array, y: Array) -> bool:
    try:
        np.broadcast_shapes(x.shape, y.shape)
    except ValueError:
        return False
    return True


def _register_equality(op_type: str, negate: bool) -> None:
    """With incompatible_shape_error=False, shapes that do not broadcast
    compare unequal as a whole (a scalar result) instead of failing."""

    @kernel(op_type)
    def equality(attrs: Attrs, inputs: list[Array]) -> list[Array]:
        x, y = inputs
        if not _broadcastable(x, y) and not attr(attrs, "incompatible_shape_error", True):
            return [np.array(negate)]
        return [np.asarray(np.not_equal(x, y) if negate else np.equal(x, y), dtype=np.bool_)]


_register_equality("Equal", negate=False)
_register_equality("NotEqual", negate=True)


@kernel("ApproximateEqual")
def _approximate_equal(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    x, y = inputs
    tolerance = float(attr(attrs, "tolerance", 1e-5))  # type: ignore[arg-type]
    return [np.asarray(np.abs(x - y) < np.asarray(tolerance, x.dtype), dtype=np.bool_)]


@kernel("AddN")
def _add_n(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    if not inputs:
        raise KernelError("needs at least one input")
    dtype = inputs[0].dtype
    total = inputs[0].astype(accumulator(dtype))
    for x in inputs[1:]:
        total = total + x
    return [total.astype(dtype, copy=False)]


@kernel("ClipByValue")
def _clip_by_value(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """min(t, hi) then max(., lo): TF's order, which decides lo > hi cases."""
    t, lo, hi = inputs
    return [np.maximum(np.minimum(t, hi), lo).astype(t.dtype, copy=False)]


@kernel("Einsum")
def _einsum(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """numpy's einsum grammar (ellipses, diagonals) is the one TF accepts."""
    equation = str(attr(attrs, "equation")).replace(" ", "")
    dtype = inputs[0].dtype
    wide = [x.astype(accumulator(x.dtype), copy=False) for x in inputs]
    return [np.asarray(np.einsum(equation, *wide, optimize=len(wide) > 2)).astype(dtype)]


# ---------------------------------------------------------------- select


@kernel("Select")
def _select(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """V1 Select: a vector condition picks whole rows of higher-rank operands."""
    cond, t, e = inputs
    if cond.ndim == 1 and t.ndim > 1:
        if cond.shape[0] != t.shape[0]:
            raise KernelError(f"condition length {cond.shape[0]} != first dim {t.shape[0]}")
        cond = cond.reshape(cond.shape + (1,) * (t.ndim - 1))
    elif cond.ndim != 0 and cond.shape != t.shape:
        raise KernelError(f"condition shape {list(cond.shape)} does not match {list(t.shape)}")
    if t.shape != e.shape:
        raise KernelError(f"operand shapes differ: {list(t.shape)} vs {list(e.shape)}")
    return [np.where(cond, t, e).astype(t.dtype, copy=False)]


@kernel("SelectV2")
def _select_v2(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    cond, t, e = inputs
    return [np.where(cond, t, e).astype(t.dtype, copy=False)]


# ---------------------------------------------------------------- cast


def _mantissa_bits(dtype: np.dtype) -> int | None:
    if dtype.kind == "f":
        return int(np.finfo(dtype).nmant)
    if _ml is not None and is_floating(dtype):
        return int(_ml.finfo(dtype).nmant)
    return None


def _zero_low_mantissa(x: Array, dst: np.dtype) -> Array:
    """Truncate=True: clear the mantissa bits `dst` lacks so conversion rounds
    toward zero (TF's LSBZeroSetter; NaNs are left alone)."""
    src_bits, dst_bits = _mantissa_bits(x.dtype), _mantissa_bits(dst)
    if src_bits is None or dst_bits is None or dst_bits >= src_bits or x.dtype.kind != "f":
        return x
    uint = np.dtype(f"u{x.dtype.itemsize}")
    mask = np.array(~((1 << (src_bits - dst_bits)) - 1) & ((1 << (8 * x.dtype.itemsize)) - 1),
                    dtype=uint)
    cleared = (x.view(uint) & mask).view(x.dtype)
    return np.where(np.isnan(x), x, cleared)


def cast(x: Array, dst: np.dtype, truncate: bool = False) -> Array:
    """Convert like TF's Cast: bool is `!= 0`, complex drops the imaginary part,
    and float -> int32/int64 maps NaN and out-of-range values to INT_MIN (the
    x86 conversion TF's CPU kernel compiles to)."""
    dst = np.dtype(dst)
    if dst == x.dtype:
        return x
    if dst == np.bool_:
        return x != 0
    if x.dtype.kind == "c" and dst.kind != "c":
        x = x.real
    if truncate:
        x = _zero_low_mantissa(x, dst)
    if is_floating(x.dtype) and dst in (np.dtype(np.int32), np.dtype(np.int64)):
        wide = x.astype(np.float64)
        info = np.iinfo(dst)
        bad = ~((wide >= info.min) & (wide < -float(info.min)))
        out = np.where(bad, 0, wide).astype(dst)
        return np.where(bad, info.min, out).astype(dst)
    return x.astype(dst)


@kernel("Cast")
def _cast(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    dst = dtype_attr(attrs, "DstT")
    return [np.asarray(cast(inputs[0], dst, bool(attr(attrs, "Truncate", False))))]


# ---------------------------------------------------------------- reductions


def _reduction_axes(x: Array, axis: Array) -> tuple[int, ...]:
    return tuple(sorted({axis_index(a, x.ndim) for a in int_vector(axis)}))


def _keep(attrs: Attrs) -> bool:
    return bool(attr(attrs, "keep_dims", False))


def _lowest(dtype: np.dtype) -> object:
    return -np.inf if is_floating(dtype) else np.iinfo(dtype).min


def _highest(dtype: np.dtype) -> object:
    return np.inf if is_floating(dtype) else np.iinfo(dtype).max


def _sum(x: Array, axes: tuple[int, ...], keep: bool) -> Array:
    return np.sum(x, axis=axes, keepdims=keep, dtype=accumulator(x.dtype)).astype(x.dtype)


def _prod(x: Array, axes: tuple[int, ...], keep: bool) -> Array:
    return np.prod(x, axis=axes, keepdims=keep, dtype=accumulator(x.dtype)).astype(x.dtype)


def _mean(x: Array, axes: tuple[int, ...], keep: bool) -> Array:
    """Integer means divide the (wrapping) integer sum with truncation, like TF."""
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    total = np.sum(x, axis=axes, keepdims=keep, dtype=accumulator(x.dtype))
    if _is_int(x):
        wrapped = total.astype(x.dtype).astype(np.int64)
        return _trunc_div(wrapped, np.asarray(count, np.int64)).astype(x.dtype)
    return (total / count).astype(x.dtype)


def _max(x: Array, axes: tuple[int, ...], keep: bool) -> Array:
    return np.max(x, axis=axes, keepdims=keep, initial=_lowest(x.dtype)).astype(x.dtype)


def _min(x: Array, axes: tuple[int, ...], keep: bool) -> Array:
    return np.min(x, axis=axes, keepdims=keep, initial=_highest(x.dtype)).astype(x.dtype)


def _any(x: Array, axes: tuple[int, ...], keep: bool) -> Array:
    return np.any(x, axis=axes, keepdims=keep)


def _all(x: Array, axes: tuple[int, ...], keep: bool) -> Array:
    return np.all(x, axis=axes, keepdims=keep)


def _euclidean_norm(x: Array, axes: tuple[int, ...], keep: bool) -> Array:
    wide = x.astype(accumulator(x.dtype))
    return np.sqrt(np.sum(wide * np.conj(wide), axis=axes, keepdims=keep)).astype(x.dtype)


_REDUCTIONS = {
    "Sum": _sum, "Prod": _prod, "Mean": _mean, "Max": _max, "Min": _min,
    "Any": _any, "All": _all, "EuclideanNorm": _euclidean_norm,
}


def _register_reduction(op_type: str, fn: Callable[[Array, tuple[int, ...], bool], Array]) -> None:
    @kernel(op_type)
    def reduce(attrs: Attrs, inputs: list[Array]) -> list[Array]:
        x, axis = inputs
        return [np.asarray(fn(x, _reduction_axes(x, axis), _keep(attrs)))]


for _op, _fn in _REDUCTIONS.items():
    _register_reduction(_op, _fn)


def _arg_reduce(attrs: Attrs, inputs: list[Array], fn: Callable[..., Array]) -> list[Array]:
    x, dimension = inputs
    axis = axis_index(scalar_int(dimension, "dimension"), x.ndim)
    if x.shape[axis] == 0:
        raise KernelError("reduction dimension is empty")
    out_type = dtype_attr(attrs, "output_type", np.dtype(np.int64))
    return [np.asarray(fn(x, axis=axis)).astype(out_type)]


@kernel("ArgMax")
def _argmax(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    return _arg_reduce(attrs, inputs, np.argmax)


@kernel("ArgMin")
def _argmin(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    return _arg_reduce(attrs, inputs, np.argmin)


# ---------------------------------------------------------------- range


@kernel("Range")
def _range(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """Element i is `start + T(i) * delta` computed in T, and the length is
    computed in T as well -- both exactly as TF's CPU kernel does."""
    start, limit, delta = (np.asarray(v).reshape(()) for v in inputs)
    dtype = start.dtype
    if delta == 0:
        raise KernelError("requires delta != 0")
    if (delta > 0 and start > limit) or (delta < 0 and start < limit):
        raise KernelError(f"requires start {'<=' if delta > 0 else '>='} limit for delta {delta}")
    if _is_int(start):
        span, step = abs(int(limit) - int(start)), abs(int(delta))
        size = (span + step - 1) // step
    else:
        size = int(np.ceil(np.abs((limit - start) / delta)))
    index = np.arange(checked_shape([size], 8)[0]).astype(dtype)
    return [(start + index * delta).astype(dtype, copy=False)]


# ---------------------------------------------------------------- bits


def _clamped_shift(x: Array, y: Array) -> Array:
    """TF clamps the shift to [0, bits - 1] (C++ leaves wider shifts undefined)."""
    return np.clip(y.astype(np.int64), 0, 8 * x.dtype.itemsize - 1).astype(x.dtype)


_register_binary(("LeftShift",), lambda x, y: np.left_shift(x, _clamped_shift(x, y)))
_register_binary(("RightShift",), lambda x, y: np.right_shift(x, _clamped_shift(x, y)))
_register_unary(("Invert",), np.invert)


@kernel("Bitcast")
def _bitcast(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """The same bits read as `type`: a narrower type adds an innermost axis, a wider one consumes
    an innermost axis of exactly the width ratio (Keras' signbit reads a float's sign this way)."""
    x = np.ascontiguousarray(inputs[0])
    target = dtype_attr(attrs, "type")
    wide, narrow = x.dtype.itemsize, target.itemsize
    if wide == narrow:
        return [x.view(target)]
    if wide > narrow:
        return [x.reshape(x.shape + (1,)).view(target)]
    if not x.shape or x.shape[-1] != narrow // wide:
        raise KernelError(f"cannot bitcast {x.dtype} of shape {list(x.shape)} to the wider {target}: "
                          f"the innermost dimension must be {narrow // wide}")
    return [x.view(target).reshape(x.shape[:-1])]


@kernel("Bucketize")
def _bucketize(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """The index of the bucket each value falls in: how many boundaries are <= it (Keras'
    Discretization layer)."""
    boundaries = np.asarray(attr(attrs, "boundaries"), dtype=np.float64)
    if np.any(np.diff(boundaries) < 0):
        raise KernelError("boundaries must be sorted")
    return [np.searchsorted(boundaries, inputs[0].astype(np.float64), side="right").astype(np.int32)]


def _sorted_search(inputs: list[Array], attrs: Attrs, lower: bool) -> Array:
    """Per row, where each value lands in the sorted row: the count of elements below it (lower)
    or not above it (upper), as std::lower_bound/upper_bound find on a sorted row, NaN included."""
    rows, values = inputs
    if rows.ndim != 2 or values.ndim != 2 or rows.shape[0] != values.shape[0]:
        raise KernelError(f"sorted_inputs {list(rows.shape)} and values {list(values.shape)} must be matrices "
                          "with as many rows")
    checked_shape([rows.shape[0], values.shape[1], rows.shape[1]], 1)
    row, column = rows[:, None, :], values[:, :, None]
    hits = (row < column) if lower else ~(column < row)
    return hits.sum(axis=2).astype(dtype_attr(attrs, "out_type", np.dtype(np.int32)))


@kernel("LowerBound")
def _lower_bound(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    return [_sorted_search(inputs, attrs, lower=True)]


@kernel("UpperBound")
def _upper_bound(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    return [_sorted_search(inputs, attrs, lower=False)]


def _in_top_k(predictions: Array, targets: Array, k: int) -> Array:
    """Whether fewer than k classes score strictly above each target's class (ties at the k-th
    place are all in); false for a target out of range and for a row holding NaN or infinity."""
    if predictions.ndim != 2 or targets.shape != predictions.shape[:1]:
        raise KernelError(f"predictions {list(predictions.shape)} and targets {list(targets.shape)} must be "
                          "[batch, classes] and [batch]")
    batch, classes = predictions.shape
    valid = (targets >= 0) & (targets < classes)
    picked = predictions[np.arange(batch), np.where(valid, targets, 0)] if classes else np.zeros(batch)
    above = (predictions > picked[:, None]).sum(axis=1)
    return valid & np.isfinite(predictions).all(axis=1) & (above < k)


@kernel("InTopKV2")
def _in_top_k_v2(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    predictions, targets, k = inputs
    return [_in_top_k(predictions, targets, scalar_int(k, "k"))]


@kernel("InTopK")
def _in_top_k_v1(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    return [_in_top_k(inputs[0], inputs[1], int(attr(attrs, "k")))]  # type: ignore[arg-type]


# ---------------------------------------------------------------- spectral


def _fft_lengths(x: Array, length: Array, count: int) -> list[int]:
    """fft_length of a transform over the `count` innermost axes."""
    lengths = int_vector(length)
    if len(lengths) != count or x.ndim < count or min(lengths) < 0:
        raise KernelError(f"fft_length {lengths} does not fit {count} innermost axes of shape {list(x.shape)}")
    return lengths


def _innermost(count: int, lengths: Sequence[int]) -> tuple[slice, ...]:
    """An index keeping the first `lengths` of the `count` innermost axes."""
    return (Ellipsis,) + tuple(slice(0, n) for n in lengths[-count:])


def _real_fft(count: int) -> Callable[[Attrs, list[Array]], list[Array]]:
    """RFFT over the `count` innermost axes, each cropped to fft_length (the raw ops never pad;
    tf.signal does that with a Pad before them)."""

    def run(attrs: Attrs, inputs: list[Array]) -> list[Array]:
        x, length = inputs
        lengths = _fft_lengths(x, length, count)
        if any(have < want for have, want in zip(x.shape[-count:], lengths)):
            raise KernelError(f"fft_length {lengths} is longer than the innermost axes of {list(x.shape)}")
        out_type = dtype_attr(attrs, "Tcomplex", np.dtype(np.complex64))
        if 0 in lengths:
            bins = lengths[-1] // 2 + 1 if lengths[-1] else 0
            return [np.zeros(x.shape[:-count] + tuple(lengths[:-1]) + (bins,), out_type)]
        cropped = x[_innermost(count, lengths)].astype(np.float64)
        return [np.fft.rfftn(cropped, axes=range(-count, 0)).astype(out_type)]

    return run


def _inverse_real_fft(count: int) -> Callable[[Attrs, list[Array]], list[Array]]:
    """Inverse of the RFFTs: the first fft_length entries of the outer transformed axes and the
    first fft_length // 2 + 1 bins of the innermost (at least that many must be there) to real
    samples; the imaginary parts of the DC and Nyquist bins are ignored, as TF's c2r transform
    ignores them."""

    def run(attrs: Attrs, inputs: list[Array]) -> list[Array]:
        x, length = inputs
        lengths = _fft_lengths(x, length, count)
        needed = lengths[:-1] + [lengths[-1] // 2 + 1]
        if 0 in lengths or any(have < want for have, want in zip(x.shape[-count:], needed)):
            raise KernelError(f"fft_length {lengths} needs at least {needed} in the innermost axes of "
                              f"{list(x.shape)}")
        out_type = dtype_attr(attrs, "Treal", np.dtype(np.float32))
        spectrum = x[_innermost(count, needed)].astype(np.complex128)
        return [np.fft.irfftn(spectrum, s=lengths, axes=range(-count, 0)).astype(out_type)]

    return run


def _complex_fft(count: int, transform: Callable[..., Array]) -> Callable[[Attrs, list[Array]], list[Array]]:
    """A complex FFT (or IFFT, which divides by the size as TF's does) of the `count` innermost
    axes, computed in complex128 and rounded once."""

    def run(attrs: Attrs, inputs: list[Array]) -> list[Array]:
        x = inputs[0]
        if x.ndim < count:
            raise KernelError(f"the input must have rank >= {count}, got shape {list(x.shape)}")
        if x.size == 0:
            return [x.copy()]
        return [transform(x.astype(np.complex128), axes=range(-count, 0)).astype(x.dtype)]

    return run


for _count, _suffix in ((1, ""), (2, "2D"), (3, "3D")):
    kernel(f"RFFT{_suffix}")(_real_fft(_count))
    kernel(f"IRFFT{_suffix}")(_inverse_real_fft(_count))
    kernel(f"FFT{_suffix}")(_complex_fft(_count, np.fft.fftn))
    kernel(f"IFFT{_suffix}")(_complex_fft(_count, np.fft.ifftn))


def _part_type(attrs: Attrs, x: Array) -> np.dtype:
    """The real type of a complex operand's parts (Tout; float32 for complex64, float64 for complex128)."""
    return dtype_attr(attrs, "Tout", np.dtype(np.float32 if x.dtype == np.complex64 else np.float64))


@kernel("Real")
def _real(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    return [np.real(inputs[0]).astype(_part_type(attrs, inputs[0]))]


@kernel("Imag")
def _imag(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    return [np.imag(inputs[0]).astype(_part_type(attrs, inputs[0]))]


@kernel("ComplexAbs")
def _complex_abs(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """|x| without overflow in the squares (TF uses hypot too)."""
    x = inputs[0]
    return [np.hypot(np.real(x), np.imag(x)).astype(_part_type(attrs, x))]


@kernel("Angle")
def _angle(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """atan2(imag, real) (TF's Angle takes complex operands only)."""
    x = inputs[0]
    if x.dtype.kind != "c":
        raise KernelError(f"Angle takes complex64 or complex128, got {x.dtype}")
    return [np.angle(x).astype(_part_type(attrs, x))]


@kernel("Complex")
def _complex(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    """real + i * imag, broadcast like any binary op."""
    re, im = inputs
    out_type = dtype_attr(attrs, "Tout", np.dtype(np.complex64 if re.dtype == np.float32 else np.complex128))
    re, im = np.broadcast_arrays(re, im)
    out = np.empty(re.shape, out_type)
    out.real, out.imag = re, im
    return [out]
