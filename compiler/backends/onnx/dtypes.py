"""TensorFlow element types as ONNX TensorProto element types.

Quantized TF types map to the integer type holding their bits, which is how
ONNX's QuantizeLinear/DequantizeLinear carry them, so eight-bit lowerings can
reuse this table.
"""
from __future__ import annotations

from typing import Optional

from onnx import TensorProto

from compiler.ir.dtypes import DType

_ONNX_TYPES: dict[DType, int] = {
    DType.FLOAT: TensorProto.FLOAT, DType.DOUBLE: TensorProto.DOUBLE, DType.HALF: TensorProto.FLOAT16,
    DType.BFLOAT16: TensorProto.BFLOAT16, DType.INT8: TensorProto.INT8, DType.INT16: TensorProto.INT16,
    DType.INT32: TensorProto.INT32, DType.INT64: TensorProto.INT64, DType.UINT8: TensorProto.UINT8,
    DType.UINT16: TensorProto.UINT16, DType.UINT32: TensorProto.UINT32, DType.UINT64: TensorProto.UINT64,
    DType.BOOL: TensorProto.BOOL, DType.STRING: TensorProto.STRING,
    DType.COMPLEX64: TensorProto.COMPLEX64, DType.COMPLEX128: TensorProto.COMPLEX128,
    DType.QINT8: TensorProto.INT8, DType.QUINT8: TensorProto.UINT8, DType.QINT32: TensorProto.INT32,
    DType.QINT16: TensorProto.INT16, DType.QUINT16: TensorProto.UINT16,
    DType.FLOAT8_E4M3FN: TensorProto.FLOAT8E4M3FN, DType.FLOAT8_E5M2: TensorProto.FLOAT8E5M2,
    DType.FLOAT8_E4M3FNUZ: TensorProto.FLOAT8E4M3FNUZ, DType.FLOAT8_E5M2FNUZ: TensorProto.FLOAT8E5M2FNUZ,
}
# The eight-bit float types ONNX has, from this opset on (Cast's `saturate` attribute came with them).
FLOAT8_TYPES = frozenset({DType.FLOAT8_E4M3FN, DType.FLOAT8_E5M2, DType.FLOAT8_E4M3FNUZ, DType.FLOAT8_E5M2FNUZ})
FLOAT8_OPSET = 19


def onnx_type(dtype: Optional[DType]) -> int:
    """The ONNX element type of a TF dtype; UNDEFINED when unknown or unrepresentable."""
    if dtype is None:
        return TensorProto.UNDEFINED
    return _ONNX_TYPES.get(dtype, TensorProto.UNDEFINED)


# -- what onnxruntime computes in --------------------------------------------------------------
# Element types onnxruntime's CPU kernels take, for the ONNX operators whose kernels are narrower
# than the TF types lowered to them (tools/onnx_dtype_sweep.py finds such gaps; onnxruntime 1.2x).
# half counts where onnxruntime runs it, which for float-only kernels it does by inserting Casts
# to float itself.  Operators not listed run every type the lowerings give them.
_FLOATS = frozenset({DType.FLOAT, DType.DOUBLE, DType.HALF})
_INTS = frozenset({DType.INT8, DType.INT16, DType.INT32, DType.INT64, DType.UINT8, DType.UINT16, DType.UINT32,
                   DType.UINT64})
_NOT_16_BIT = _FLOATS | _INTS - {DType.INT16, DType.UINT16}
_WIDE_INTS = frozenset({DType.INT32, DType.INT64})
_SWEPT = _FLOATS | _INTS | {DType.BOOL}
_ORT_TYPES: dict[str, frozenset[DType]] = {
    "Relu": _FLOATS, "LeakyRelu": frozenset({DType.FLOAT, DType.HALF}),
    "Max": _NOT_16_BIT, "Min": _NOT_16_BIT, "Clip": _NOT_16_BIT, "Sum": _FLOATS, "Pow": _FLOATS | _WIDE_INTS,
    "IsInf": frozenset({DType.FLOAT, DType.DOUBLE}),
    "ReduceSum": _FLOATS | _WIDE_INTS, "ReduceMean": _FLOATS | _WIDE_INTS, "ReduceProd": _FLOATS | _WIDE_INTS,
    "ReduceMax": _FLOATS | _WIDE_INTS | {DType.INT8, DType.UINT8},
    "ReduceMin": _FLOATS | _WIDE_INTS | {DType.INT8, DType.UINT8},
    "ArgMax": _FLOATS | _WIDE_INTS | {DType.INT8, DType.UINT8},
    "ArgMin": _FLOATS | _WIDE_INTS | {DType.INT8, DType.UINT8},
    "TopK": _FLOATS | _WIDE_INTS | {DType.INT8, DType.INT16, DType.UINT8}, "CumSum": _FLOATS | _WIDE_INTS,
    "MatMul": _FLOATS | _WIDE_INTS | {DType.UINT32, DType.UINT64}, "Gemm": _FLOATS,
    "Pad": _NOT_16_BIT | {DType.BOOL}, "NonZero": frozenset({DType.FLOAT, DType.HALF, DType.INT32, DType.INT64,
                                                             DType.UINT8, DType.BOOL}),
    "Unique": frozenset({DType.FLOAT, DType.DOUBLE, DType.HALF, DType.INT8, DType.INT64, DType.STRING}),
    "Range": frozenset({DType.FLOAT, DType.DOUBLE, DType.INT16, DType.INT32, DType.INT64}),
}
# Activations and transcendental functions onnxruntime computes in float (and half) only.
_ORT_TYPES.update({op: frozenset({DType.FLOAT, DType.HALF}) for op in (
    "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "Cosh", "Sinh", "Tan", "Erf", "Elu", "Selu", "Softplus",
    "Softsign")})
# Opset-dependent registrations: (operator, first opset, types added there).
_ADDED = (("Relu", 14, frozenset({DType.INT8, DType.INT32})), ("LeakyRelu", 16, frozenset({DType.DOUBLE})),
          ("IsInf", 20, frozenset({DType.HALF})), ("ReduceMax", 20, frozenset({DType.BOOL})),
          ("ReduceMin", 20, frozenset({DType.BOOL})))
_REMOVED = (("LeakyRelu", 20, frozenset({DType.DOUBLE})),)
# Add/Sub/Mul/Div take 8- and 16-bit integers from opset 14 only.
_NARROW_INTS = frozenset({DType.INT8, DType.INT16, DType.UINT8, DType.UINT16})
_ARITHMETIC = ("Add", "Sub", "Mul", "Div")

# Wider types holding every value of a type (the first onnxruntime has a kernel for carries it).
_WIDER: dict[DType, tuple[DType, ...]] = {
    DType.BOOL: (DType.UINT8, DType.INT32, DType.INT64), DType.INT8: (DType.INT32, DType.INT64),
    DType.UINT8: (DType.INT32, DType.INT64), DType.INT16: (DType.INT32, DType.INT64),
    DType.UINT16: (DType.INT32, DType.INT64), DType.UINT32: (DType.INT64,), DType.INT32: (DType.INT64,),
    DType.HALF: (DType.FLOAT,),
}
# For results taken modulo 2^bits (TF's integer +, -, *), the same-width signed type carries too.
_SAME_WIDTH = {DType.UINT32: DType.INT32, DType.UINT64: DType.INT64}


def ort_computes(onnx_op: str, dtype: Optional[DType], opset: int) -> bool:
    """Whether onnxruntime has a CPU kernel for ONNX `onnx_op` on `dtype` operands at `opset`."""
    if dtype not in _SWEPT:
        return True  # strings, complex pairs, bfloat16: left to the lowerings that handle them
    if onnx_op in _ARITHMETIC:
        return opset >= 14 or dtype not in _NARROW_INTS
    types = _ORT_TYPES.get(onnx_op)
    if types is None:
        return True
    added = any(op == onnx_op and opset >= since and dtype in extra for op, since, extra in _ADDED)
    removed = any(op == onnx_op and opset >= since and dtype in gone for op, since, gone in _REMOVED)
    return (dtype in types or added) and not removed


def carrier(onnx_op: str, dtype: Optional[DType], opset: int, wraps: bool = False) -> Optional[DType]:
    """The type to compute `onnx_op` in for `dtype` operands: `dtype` itself when onnxruntime has
    the kernel, else the first wider type holding every value that it has one for (the result cast
    back is exact for ops whose result is a value of the operands' type: a comparison, a maximum, a
    sum that does not overflow).  With `wraps` the result is wanted modulo 2^bits, as TF's integer
    +, -, * wrap, and a same-width integer type may carry too (uint64 as int64).  None: no type."""
    if ort_computes(onnx_op, dtype, opset):
        return dtype
    candidates = _WIDER.get(dtype, ())  # type: ignore[arg-type]
    if wraps and dtype in _SAME_WIDTH:
        candidates += (_SAME_WIDTH[dtype],)  # type: ignore[index]
    return next((t for t in candidates if ort_computes(onnx_op, t, opset)), None)
