"""Element types of IR values, numbered exactly as TensorFlow's DataType enum.

The numbering is the wire format, so a DType converts to and from GraphDef
without a table lookup.  Quantized types map to the numpy integer type that
holds their bits; bfloat16 and the float8 types are held as raw integers of
the same width unless `ml_dtypes` is installed.
"""
from __future__ import annotations

import enum

import numpy as np

try:  # optional: numpy dtypes for bfloat16 / float8
    import ml_dtypes as _ml
except ImportError:  # pragma: no cover - exercised only without ml_dtypes
    _ml = None


class DType(enum.IntEnum):
    """TensorFlow's DataType; `_REF` variants are the base value plus 100."""

    INVALID = 0
    FLOAT = 1
    DOUBLE = 2
    INT32 = 3
    UINT8 = 4
    INT16 = 5
    INT8 = 6
    STRING = 7
    COMPLEX64 = 8
    INT64 = 9
    BOOL = 10
    QINT8 = 11
    QUINT8 = 12
    QINT32 = 13
    BFLOAT16 = 14
    QINT16 = 15
    QUINT16 = 16
    UINT16 = 17
    COMPLEX128 = 18
    HALF = 19
    RESOURCE = 20
    VARIANT = 21
    UINT32 = 22
    UINT64 = 23
    FLOAT8_E5M2 = 24
    FLOAT8_E4M3FN = 25
    FLOAT8_E4M3FNUZ = 26
    FLOAT8_E4M3B11FNUZ = 27
    FLOAT8_E5M2FNUZ = 28
    INT4 = 29
    UINT4 = 30
    INT2 = 31
    UINT2 = 32

    @property
    def short(self) -> str:
        """The short spelling used by the textual IR (`f32`, `qu8`, ...)."""
        return _SHORT[self]

    @property
    def tf_name(self) -> str:
        """The spelling GTT parameters use (`float`, `int32`, `quint8`)."""
        return _TF_NAME[self]

    @property
    def is_quantized(self) -> bool:
        return self in (DType.QINT8, DType.QUINT8, DType.QINT32, DType.QINT16, DType.QUINT16)

    @property
    def is_float(self) -> bool:
        return self in (DType.FLOAT, DType.DOUBLE, DType.HALF, DType.BFLOAT16)

    def to_numpy(self) -> np.dtype:
        """The numpy dtype that stores this type's values (bits for quantized types)."""
        try:
            return _NUMPY[self]
        except KeyError:
            raise TypeError(f"dtype {self.tf_name} has no numpy representation") from None

    @staticmethod
    def from_numpy(dt: np.dtype) -> "DType":
        """The natural DType of a numpy dtype (quantized types are never inferred)."""
        dt = np.dtype(dt)
        for dtype in _NATURAL:
            if _NUMPY[dtype] == dt:
                return dtype
        if dt.kind in "OSU":
            return DType.STRING
        raise TypeError(f"numpy dtype {dt} has no TensorFlow equivalent")

    @staticmethod
    def parse(text: str) -> "DType":
        """Parse `f32`, `float`, `DT_FLOAT` or `quint8` into a DType."""
        key = text.strip()
        if key.startswith("DT_"):
            key = key[3:].lower()
        found = _BY_SPELLING.get(key.lower())
        if found is None:
            raise ValueError(f"unknown dtype '{text}'")
        return found


# Wire number -> DType by dict lookup: calling the enum class (`DType(n)`) costs a few
# microseconds, and loading a graph converts thousands of type fields.
DTYPE_BY_NUMBER: dict[int, DType] = {int(d): d for d in DType}

_SHORT = {
    DType.INVALID: "invalid", DType.FLOAT: "f32", DType.DOUBLE: "f64", DType.INT32: "i32",
    DType.UINT8: "u8", DType.INT16: "i16", DType.INT8: "i8", DType.STRING: "str",
    DType.COMPLEX64: "c64", DType.INT64: "i64", DType.BOOL: "bool", DType.QINT8: "qi8",
    DType.QUINT8: "qu8", DType.QINT32: "qi32", DType.BFLOAT16: "bf16", DType.QINT16: "qi16",
    DType.QUINT16: "qu16", DType.UINT16: "u16", DType.COMPLEX128: "c128", DType.HALF: "f16",
    DType.RESOURCE: "resource", DType.VARIANT: "variant", DType.UINT32: "u32",
    DType.UINT64: "u64", DType.FLOAT8_E5M2: "f8e5m2", DType.FLOAT8_E4M3FN: "f8e4m3fn",
    DType.FLOAT8_E4M3FNUZ: "f8e4m3fnuz", DType.FLOAT8_E4M3B11FNUZ: "f8e4m3b11fnuz",
    DType.FLOAT8_E5M2FNUZ: "f8e5m2fnuz", DType.INT4: "i4", DType.UINT4: "u4",
    DType.INT2: "i2", DType.UINT2: "u2",
}

_TF_NAME = {d: d.name.lower() for d in DType}
_TF_NAME.update({DType.FLOAT: "float", DType.DOUBLE: "double", DType.HALF: "half"})

_BY_SPELLING: dict[str, DType] = {}
for _d in DType:
    _BY_SPELLING[_SHORT[_d]] = _d
    _BY_SPELLING[_TF_NAME[_d]] = _d
    _BY_SPELLING[_d.name.lower()] = _d
_BY_SPELLING.update({"float32": DType.FLOAT, "float64": DType.DOUBLE, "float16": DType.HALF})

_NUMPY: dict[DType, np.dtype] = {
    DType.FLOAT: np.dtype(np.float32), DType.DOUBLE: np.dtype(np.float64),
    DType.INT32: np.dtype(np.int32), DType.UINT8: np.dtype(np.uint8),
    DType.INT16: np.dtype(np.int16), DType.INT8: np.dtype(np.int8),
    DType.STRING: np.dtype(object), DType.COMPLEX64: np.dtype(np.complex64),
    DType.INT64: np.dtype(np.int64), DType.BOOL: np.dtype(np.bool_),
    DType.QINT8: np.dtype(np.int8), DType.QUINT8: np.dtype(np.uint8),
    DType.QINT32: np.dtype(np.int32), DType.QINT16: np.dtype(np.int16),
    DType.QUINT16: np.dtype(np.uint16), DType.UINT16: np.dtype(np.uint16),
    DType.COMPLEX128: np.dtype(np.complex128), DType.HALF: np.dtype(np.float16),
    DType.UINT32: np.dtype(np.uint32), DType.UINT64: np.dtype(np.uint64),
    DType.BFLOAT16: np.dtype(_ml.bfloat16) if _ml else np.dtype(np.uint16),
    DType.FLOAT8_E5M2: np.dtype(_ml.float8_e5m2) if _ml else np.dtype(np.uint8),
    DType.FLOAT8_E4M3FN: np.dtype(_ml.float8_e4m3fn) if _ml else np.dtype(np.uint8),
    DType.FLOAT8_E4M3FNUZ: np.dtype(_ml.float8_e4m3fnuz) if _ml else np.dtype(np.uint8),
    DType.FLOAT8_E4M3B11FNUZ: np.dtype(_ml.float8_e4m3b11fnuz) if _ml else np.dtype(np.uint8),
    DType.FLOAT8_E5M2FNUZ: np.dtype(_ml.float8_e5m2fnuz) if _ml else np.dtype(np.uint8),
}

# Types a plain numpy array may be lowered to, in preference order.
_NATURAL = (
    DType.FLOAT, DType.DOUBLE, DType.INT32, DType.INT64, DType.UINT8, DType.INT8,
    DType.INT16, DType.UINT16, DType.UINT32, DType.UINT64, DType.BOOL, DType.HALF,
    DType.COMPLEX64, DType.COMPLEX128,
)
