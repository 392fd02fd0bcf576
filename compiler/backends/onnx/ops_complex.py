"""FFTs and complex values (Keras' MelSpectrogram, keras.ops.fft): ONNX runtimes do not compute on
complex tensors, so a complex value is lowered to a float tensor with one more, innermost axis of
size 2 holding (real, imag) -- the layout of ONNX's DFT operator.

- RFFT crops the innermost axis to fft_length (the raw op never pads) and is a one-sided DFT
  (RFFT2D/3D add full DFTs of the outer axes; FFT2D/3D and the inverses likewise);
- FFT / IFFT are a DFT / inverse DFT of the pairs (ONNX's inverse divides by the length, as TF's);
- IRFFT rebuilds the full Hermitian spectrum from the first fft_length // 2 + 1 bins (one Gather,
  one sign flip for the conjugates), inverts it and keeps the real part, which drops the imaginary
  parts of the DC and Nyquist bins exactly as TF's c2r transform ignores them;
- Real / Imag pick a component, ComplexAbs is the L2 norm of the pair, Angle the atan2 of its
  parts (kapre's Phase layer), Complex stacks the two;
- Cast, Einsum, Transpose, StridedSlice, Pad, Add, Sub, Neg and Mul of complex values are lowered by
  complex_pairs.py (their lowerings for real types live with the other elementwise, matmul and
  array ops, which hand complex operands over to it).

Any other op that reads or makes a complex value is refused, naming it: an elementwise lowering
would treat the pairs as independent floats.  Complex graph inputs and outputs are refused too.
"""
from __future__ import annotations

import numpy as np

from compiler.backends.onnx import opset
from compiler.backends.onnx.complex_pairs import (COMPLEX_TYPES, bind_complex, complex_operand,
                                                  part_type_of)
from compiler.backends.onnx.context import LoweringContext
from compiler.backends.onnx.errors import UnsupportedOpError
from compiler.backends.onnx.ops_array import emit_slice
from compiler.backends.onnx.ops_elementwise import atan2_float32, atan2_type
from compiler.backends.onnx.registry import lowers
from compiler.ir.dtypes import DType
from compiler.ir.graph import Op

_COMPLEX_LOWERINGS = frozenset({f"{kind}{suffix}" for kind in ("RFFT", "IRFFT", "FFT", "IFFT")
                                for suffix in ("", "2D", "3D")} | {"Real", "Imag", "ComplexAbs", "Angle", "Complex",
                                                                   "Cast", "Einsum", "StridedSlice", "Add",
                                                                   "AddV2", "Sub", "Mul", "Neg", "Pad", "PadV2",
                                                                   "MirrorPad", "Transpose"})
_DFT_OPSET = 17  # DFT's first version; opset 20 moved its axis from an attribute to an input


def _axis_count(op: Op) -> int:
    """How many innermost axes the transform covers: RFFT 1, RFFT2D 2, RFFT3D 3."""
    return {"2D": 2, "3D": 3}.get(op.type[-2:], 1)


def _rank(ctx: LoweringContext, op: Op) -> int:
    rank = ctx.rank(op.operands[0])
    if rank is None or rank < _axis_count(op):
        raise UnsupportedOpError(op.type, op.name, f"the input's rank must be known and at least {_axis_count(op)}")
    return rank


def _dft(ctx: LoweringContext, op: Op, signal: str, suffix: str, axis: int = -2, inverse: bool = False,
         onesided: bool = False) -> str:
    """DFT over `axis` of `signal`, a tensor of (real, imag) pairs or of one-element columns."""
    if ctx.opset < _DFT_OPSET:
        raise UnsupportedOpError(op.type, op.name, f"opset {ctx.opset}: ONNX's DFT needs opset {_DFT_OPSET}")
    flags = {"inverse": int(inverse), "onesided": int(onesided)}
    if ctx.opset >= 20:
        axis_input = ctx.scalar(axis, DType.INT64, f"{op.name}/dft_axis{-axis}")
        return ctx.helper1(op, suffix, "DFT", [signal, "", axis_input], **flags)
    return ctx.helper1(op, suffix, "DFT", [signal], axis=axis, **flags)


def _fft_lengths(ctx: LoweringContext, op: Op) -> list[int]:
    lengths = [int(n) for n in ctx.const_operand(op, 1, "fft_length").reshape(-1)]
    if len(lengths) != _axis_count(op) or min(lengths) < 1:
        raise UnsupportedOpError(op.type, op.name, f"fft_length {lengths} (one positive length per transformed axis)")
    return lengths


def _crop(ctx: LoweringContext, op: Op, x: str, wanted: list[int], axes: list[int]) -> str:
    """`x` cut to its first `wanted` entries along the operand's (negative) `axes` where their
    static size differs or is unknown (TF refuses a shorter input at run time).  When `x` holds
    (real, imag) pairs its axes sit one further from the end."""
    dims = ctx.shape(op.operands[0]).dims or ()
    shift = 1 if ctx.dtype(op.operands[0]) in COMPLEX_TYPES else 0
    specs = [(axis - shift, 0, n, 1) for n, axis in zip(wanted, axes) if dims[axis] != n]
    return emit_slice(ctx, op, x, specs, None, len(dims) + shift, main=False)


@lowers("RFFT", "RFFT2D", "RFFT3D")
def _rfft(ctx: LoweringContext, op: Op) -> None:
    """A one-sided DFT of the innermost axis, then full DFTs of the outer transformed axes."""
    _rank(ctx, op)
    lengths = _fft_lengths(ctx, op)
    count = len(lengths)
    signal = _crop(ctx, op, ctx.operand(op, 0), lengths, list(range(-count, 0)))
    column = ctx.helper1(op, "column", "Unsqueeze", [signal, ctx.ints([-1], f"{op.name}/innermost")])
    pairs = _dft(ctx, op, column, "dft", onesided=True)
    for axis in range(-3, -count - 2, -1):
        pairs = _dft(ctx, op, pairs, f"dft{-axis}", axis=axis)
    bind_complex(ctx, op.results[0], pairs)


@lowers("FFT", "IFFT", "FFT2D", "IFFT2D", "FFT3D", "IFFT3D")
def _fft(ctx: LoweringContext, op: Op) -> None:
    _rank(ctx, op)
    part_type_of(ctx, op)
    pairs = complex_operand(ctx, op, 0)
    for axis in range(-2, -_axis_count(op) - 2, -1):
        pairs = _dft(ctx, op, pairs, f"dft{-axis}", axis=axis, inverse=op.type.startswith("IFFT"))
    bind_complex(ctx, op.results[0], pairs)


@lowers("IRFFT", "IRFFT2D", "IRFFT3D")
def _irfft(ctx: LoweringContext, op: Op) -> None:
    """Inverse DFTs of the outer transformed axes (cropped to their lengths), then the innermost:
    its full Hermitian spectrum rebuilt from the first length // 2 + 1 bins, inverted, real part."""
    rank = _rank(ctx, op)
    part = part_type_of(ctx, op)
    lengths = _fft_lengths(ctx, op)
    count, length = len(lengths), lengths[-1]
    bins = ctx.shape(op.operands[0]).dims[rank - 1]  # type: ignore[index]
    if bins is not None and bins < length // 2 + 1:
        raise UnsupportedOpError(op.type, op.name, f"{bins} bins for fft_length {length} "
                                                   f"(TF needs at least {length // 2 + 1})")
    pairs = _crop(ctx, op, complex_operand(ctx, op, 0), lengths[:-1], list(range(-count, -1)))
    for axis in range(-3, -count - 2, -1):
        pairs = _dft(ctx, op, pairs, f"idft{-axis}", axis=axis, inverse=True)
    # Bin k of the full spectrum is bin k for k <= length // 2, else the conjugate of bin length - k.
    source = [k if k <= length // 2 else length - k for k in range(length)]
    signs = np.array([[1.0, 1.0 if k <= length // 2 else -1.0] for k in range(length)], part.to_numpy())
    full = ctx.helper1(op, "full", "Gather", [pairs, ctx.ints(source, f"{op.name}/bins")], axis=-2)
    hermitian = ctx.helper1(op, "hermitian", "Mul", [full, ctx.initializer(signs, f"{op.name}/conjugate")])
    inverted = _dft(ctx, op, hermitian, "idft", inverse=True)
    ctx.bind(op.results[0], ctx.emit1(op, "Gather", [inverted, ctx.scalar(0, DType.INT64, f"{op.name}/real")],
                                      axis=-1))


@lowers("Real", "Imag")
def _part(ctx: LoweringContext, op: Op) -> None:
    part_type_of(ctx, op)
    index = ctx.scalar(0 if op.type == "Real" else 1, DType.INT64, f"{op.name}/component")
    ctx.bind(op.results[0], ctx.emit1(op, "Gather", [complex_operand(ctx, op, 0), index], axis=-1))


@lowers("ComplexAbs")
def _complex_abs(ctx: LoweringContext, op: Op) -> None:
    part_type_of(ctx, op)
    ctx.bind(op.results[0], opset.reduce(ctx, op, "ReduceL2", complex_operand(ctx, op, 0), [-1], False))


@lowers("Angle")
def _angle(ctx: LoweringContext, op: Op) -> None:
    """atan2(imag, real) of each pair; complex64 only (onnxruntime's Atan is float32 only)."""
    part_type_of(ctx, op)
    atan2_type(ctx, op)
    pairs = complex_operand(ctx, op, 0)
    imag, real = (ctx.helper1(op, name, "Gather", [pairs, ctx.scalar(i, DType.INT64, f"{op.name}/{name}_index")],
                              axis=-1) for i, name in ((1, "imag"), (0, "real")))
    ctx.bind(op.results[0], atan2_float32(ctx, op, imag, real, last=True))


@lowers("Complex")
def _complex(ctx: LoweringContext, op: Op) -> None:
    """Stack the parts; parts of different (or unknown) shapes are expanded to their common shape
    first, since Concat does not broadcast."""
    real, imag = ctx.operand(op, 0), ctx.operand(op, 1)
    shapes = [ctx.shape(v) for v in op.operands]
    if shapes[0] != shapes[1] or shapes[0].dims is None or None in shapes[0].dims:
        real = ctx.helper1(op, "real_b", "Expand", [real, ctx.helper1(op, "imag_shape", "Shape", [imag])])
        imag = ctx.helper1(op, "imag_b", "Expand", [imag, ctx.helper1(op, "both_shape", "Shape", [real])])
    innermost = ctx.ints([-1], f"{op.name}/innermost")
    parts = [ctx.helper1(op, f"{name}_pair", "Unsqueeze", [t, innermost]) for name, t in (("real", real),
                                                                                         ("imag", imag))]
    bind_complex(ctx, op.results[0], ctx.emit1(op, "Concat", parts, axis=-1))


def check_no_complex(ctx: LoweringContext, op: Op) -> None:
    """Refuse an op outside this module that reads or makes a complex value (see the docstring)."""
    if op.type in _COMPLEX_LOWERINGS:
        return
    for value in (*op.operands, *op.results):
        dtype = ctx.dtype(value)
        if dtype in COMPLEX_TYPES:
            raise UnsupportedOpError(op.type, op.name, f"a {dtype.name.lower()} value: complex values export "
                                     f"only through {', '.join(sorted(_COMPLEX_LOWERINGS))}")

