"""How the ONNX backend holds a complex value, and the ops that work on that form directly.

ONNX runtimes do not compute on complex tensors, so a complex value is a float tensor with one
more, innermost axis of size 2 holding (real, imag): the layout of ONNX's DFT operator.  The FFTs
and the part ops are in ops_complex.py; here are the pieces they share, and the lowerings of the
ops whose real forms live elsewhere (Cast and the arithmetic in ops_elementwise, Einsum in ops_nn,
Transpose, StridedSlice and Pad in ops_array):

- Cast from a real type pads a zero imaginary part; Cast to a real type keeps the real part, as
  TF does; between complex types it casts the pairs;
- Add, Sub and Neg act on the pairs as they are (the pair axes line up under broadcasting); Mul
  is x * (Re y, Re y) + (Im x, Re x) * (-Im y, Im y), with the y factors folded when y is a
  constant (tf.signal.dct scales its RFFT's bins so), and only the first term when y is real;
- Transpose moves the logical axes and keeps the pair axis innermost (kapre's STFT layer puts
  time before frequency so);
- StridedSlice slices the pairs as the logical tensor (ops_array.py): the pair axis comes after
  every axis the slice names, an ellipsis included; Pad and MirrorPad(REFLECT) with constant
  paddings pad every axis but the pair axis (tf.signal.dct of type 3 pads its spectrum so), with
  zeros only: ONNX's one fill value cannot hold both parts of a complex one;
- Einsum adds the pair axis to every term: a constant operand W becomes the real tensor
  [[Re W, Im W], [-Im W, Re W]] over (its partner's pair, the output's pair), so the complex
  product is one real Einsum (FNet's Fourier mixing); two run-time operands meet through a third,
  constant operand holding the multiplication table of (real, imag) pairs.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from compiler.backends.onnx.builder import ValueSpec
from compiler.backends.onnx.context import LoweringContext
from compiler.backends.onnx.dtypes import onnx_type
from compiler.backends.onnx.errors import UnsupportedOpError
from compiler.ir.dtypes import DType
from compiler.ir.graph import Op, Value

COMPLEX_TYPES = frozenset({DType.COMPLEX64, DType.COMPLEX128})
_PART_TYPE = {DType.COMPLEX64: DType.FLOAT, DType.COMPLEX128: DType.DOUBLE}


def bind_complex(ctx: LoweringContext, value: Value, pairs: str) -> None:
    """Bind a complex value to its (real, imag) float tensor, declared with the extra axis."""
    ctx.bind(value, pairs, describe=False)
    dims = ctx.shape(value).dims
    dtype = ctx.dtype(value)
    if dims is not None and dtype in _PART_TYPE and ctx.builder.producer(pairs) is not None:
        ctx.builder.annotate(ValueSpec(pairs, onnx_type(_PART_TYPE[dtype]), tuple(dims) + (2,)))


def as_pairs(array: np.ndarray) -> np.ndarray:
    """A complex array as its (real, imag) pairs along a new innermost axis."""
    return np.stack([array.real, array.imag], axis=-1)


def complex_operand(ctx: LoweringContext, op: Op, index: int) -> str:
    """Operand `index` as (real, imag) pairs; a constant becomes a float initializer of them."""
    found = ctx.constant(op.operands[index])
    if found is None:
        return ctx.operand(op, index)
    return ctx.initializer(as_pairs(found), f"{op.name}/operand{index}_pairs")


def part_type_of(ctx: LoweringContext, op: Op) -> DType:
    dtype = ctx.dtype(op.operands[0])
    if dtype not in _PART_TYPE:
        kind = dtype.name.lower() if dtype is not None else "unknown type"
        raise UnsupportedOpError(op.type, op.name, f"an operand of {kind} (complex64 or complex128 only)")
    return _PART_TYPE[dtype]


def cast_complex(ctx: LoweringContext, op: Op) -> None:
    """A Cast into, out of or between complex types."""
    source, target = ctx.dtype(op.operands[0]), op.attr("DstT")
    if source in COMPLEX_TYPES:
        pairs = complex_operand(ctx, op, 0)
        if target == source:
            bind_complex(ctx, op.results[0], ctx.emit1(op, "Identity", [pairs]))
            return
        if target in COMPLEX_TYPES:
            bind_complex(ctx, op.results[0], ctx.emit1(op, "Cast", [pairs], to=onnx_type(_PART_TYPE[target])))
            return
        real = ctx.helper1(op, "real", "Gather", [pairs, ctx.scalar(0, DType.INT64, f"{op.name}/real")], axis=-1)
        ctx.bind(op.results[0], ctx.emit1(op, "Cast", [real], to=onnx_type(target)))
        return
    rank = ctx.rank(op.operands[0])
    if rank is None:
        raise UnsupportedOpError(op.type, op.name, "a cast to a complex type needs the operand's rank")
    x = ctx.operand(op, 0)
    if source != _PART_TYPE[target]:
        x = ctx.helper1(op, "part", "Cast", [x], to=onnx_type(_PART_TYPE[target]))
    column = ctx.helper1(op, "column", "Unsqueeze", [x, ctx.ints([-1], f"{op.name}/innermost")])
    pads = ctx.ints([0] * (rank + 1) + [0] * rank + [1], f"{op.name}/imaginary_zero")
    bind_complex(ctx, op.results[0], ctx.emit1(op, "Pad", [column, pads]))


# out_p = sum_{q,r} a_q * b_r * _PRODUCT[q, r, p] for pairs a, b: (ar br - ai bi, ar bi + ai br).
_PRODUCT = np.zeros((2, 2, 2))
_PRODUCT[0, 0, 0], _PRODUCT[1, 1, 0], _PRODUCT[0, 1, 1], _PRODUCT[1, 0, 1] = 1, -1, 1, 1


def einsum_complex(ctx: LoweringContext, op: Op, terms: list[str]) -> None:
    """A complex two-operand einsum as a real Einsum over (real, imag) pairs (see the docstring);
    `terms` are the operands' and the output's subscripts, the output explicit."""
    part = part_type_of(ctx, op)
    if len(op.operands) != 2:
        raise UnsupportedOpError(op.type, op.name, f"a complex einsum of {len(op.operands)} operands (two only)")
    free = [c for c in "qrpstuvwxyzQRPSTUVWXYZ" if c not in "".join(terms)]
    q, r, p = free[:3]
    constants = [ctx.constant(v) for v in op.operands]
    dtype = part.to_numpy()
    for index in (0, 1):
        found = constants[index]
        if found is None:
            continue
        table = _PRODUCT if index == 0 else _PRODUCT.transpose(1, 0, 2)
        folded = np.tensordot(as_pairs(found), table, axes=([-1], [0])).astype(dtype)  # [..., partner pair, out pair]
        other = 1 - index
        subscripts = [terms[index] + q + p, terms[other] + q]
        operands = [ctx.initializer(folded, f"{op.name}/operand{index}_pair_product"), complex_operand(ctx, op, other)]
        if index == 1:
            subscripts, operands = subscripts[::-1], operands[::-1]
        equation = f"{','.join(subscripts)}->{terms[2]}{p}"
        bind_complex(ctx, op.results[0], ctx.emit1(op, "Einsum", operands, equation=equation))
        return
    equation = f"{terms[0]}{q},{terms[1]}{r},{q}{r}{p}->{terms[2]}{p}"
    operands = [complex_operand(ctx, op, 0), complex_operand(ctx, op, 1),
                ctx.initializer(_PRODUCT.astype(dtype), f"{op.name}/pair_product")]
    bind_complex(ctx, op.results[0], ctx.emit1(op, "Einsum", operands, equation=equation))


def complex_arithmetic(ctx: LoweringContext, op: Op) -> None:
    """Add, AddV2, Sub, Neg or Mul of complex values, on their pairs (see the docstring)."""
    part = part_type_of(ctx, op).to_numpy()
    if op.type != "Mul":
        onnx_op = {"Add": "Add", "AddV2": "Add", "Sub": "Sub", "Neg": "Neg"}[op.type]
        operands = [complex_operand(ctx, op, i) for i in range(len(op.operands))]
        bind_complex(ctx, op.results[0], ctx.emit1(op, onnx_op, operands))
        return
    constants = [ctx.constant(v) for v in op.operands]
    known = 1 if constants[1] is not None else 0 if constants[0] is not None else None
    if known is None:
        x, y = complex_operand(ctx, op, 0), complex_operand(ctx, op, 1)
        real_twice = ctx.helper1(op, "real_twice", "Gather", [y, ctx.ints([0, 0], f"{op.name}/real_at")], axis=-1)
        imag_twice = ctx.helper1(op, "imag_twice", "Gather", [y, ctx.ints([1, 1], f"{op.name}/imag_at")], axis=-1)
        cross = ctx.helper1(op, "cross", "Mul", [imag_twice, ctx.initializer(np.array([-1, 1], part),
                                                                             f"{op.name}/cross_signs")])
    else:
        y = constants[known]
        x = complex_operand(ctx, op, 1 - known)
        real_twice = ctx.initializer(np.stack([y.real, y.real], axis=-1).astype(part), f"{op.name}/real_twice")
        if not y.imag.any():
            bind_complex(ctx, op.results[0], ctx.emit1(op, "Mul", [x, real_twice]))
            return
        cross = ctx.initializer(np.stack([-y.imag, y.imag], axis=-1).astype(part), f"{op.name}/cross")
    swapped = ctx.helper1(op, "swapped", "Gather", [x, ctx.ints([1, 0], f"{op.name}/swap")], axis=-1)
    terms = [ctx.helper1(op, "by_real", "Mul", [x, real_twice]), ctx.helper1(op, "by_imag", "Mul", [swapped, cross])]
    bind_complex(ctx, op.results[0], ctx.emit1(op, "Add", terms))


def transpose_complex(ctx: LoweringContext, op: Op, perm: list[int]) -> None:
    """A Transpose of complex pairs: one real Transpose, the pair axis left innermost."""
    out = ctx.emit1(op, "Transpose", [complex_operand(ctx, op, 0)], perm=perm + [len(perm)])
    bind_complex(ctx, op.results[0], out)


def pad_complex(ctx: LoweringContext, op: Op, paddings: Optional[np.ndarray], mode: str) -> None:
    """Pad, PadV2 or MirrorPad of complex pairs (see the docstring)."""
    if paddings is None:
        raise UnsupportedOpError(op.type, op.name, "padding a complex value needs constant paddings")
    if mode == "symmetric":
        raise UnsupportedOpError(op.type, op.name, "SYMMETRIC mirror padding of a complex value (REFLECT only)")
    if op.type == "PadV2":
        fill = ctx.constant(op.operands[2])
        if fill is None or np.any(fill != 0):
            raise UnsupportedOpError(op.type, op.name, "a complex pad value other than a constant zero")
    rows = [(int(b), int(a)) for b, a in np.asarray(paddings).reshape(-1, 2)] + [(0, 0)]
    pads = ctx.ints([b for b, _ in rows] + [a for _, a in rows], f"{op.name}/pads")
    bind_complex(ctx, op.results[0], ctx.emit1(op, "Pad", [complex_operand(ctx, op, 0), pads], mode=mode))
