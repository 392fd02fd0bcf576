"""Conversions between GraphDef protos and IR values (attributes, tensors, shapes).

Shared by the GraphDef frontend (decode) and backend (encode).  Decoding is
lazy where it matters: a tensor's elements are read only when asked for, and
an untouched tensor or attribute is re-emitted from its original message.
"""
from __future__ import annotations

import functools
import math
import sys
from typing import Any, Callable, Optional

import numpy as np

from compiler.ir.attrs import FuncAttr, PlaceholderAttr, RawAttr
from compiler.ir.dtypes import DTYPE_BY_NUMBER, DType
from compiler.ir.shapes import Shape, UNKNOWN_SHAPE
from compiler.ir.tensor import Tensor
from compiler.proto import attr_value_pb2, tensor_pb2, tensor_shape_pb2
from compiler.proto.wire import field_bytes, field_varint, length_prefix

AttrValue = attr_value_pb2.AttrValue
TensorProto = tensor_pb2.TensorProto
TensorShapeProto = tensor_shape_pb2.TensorShapeProto

# Which repeated TensorProto field carries the elements of each dtype.
_VALUE_FIELD = {
    DType.FLOAT: "float_val", DType.DOUBLE: "double_val", DType.INT64: "int64_val",
    DType.BOOL: "bool_val", DType.STRING: "string_val", DType.HALF: "half_val",
    DType.BFLOAT16: "half_val", DType.COMPLEX64: "scomplex_val", DType.COMPLEX128: "dcomplex_val",
    DType.UINT32: "uint32_val", DType.UINT64: "uint64_val",
}
for _d in (DType.INT32, DType.INT16, DType.INT8, DType.UINT8, DType.QINT8, DType.QUINT8,
           DType.QINT32, DType.QINT16, DType.QUINT16, DType.UINT16, DType.INT4, DType.UINT4,
           DType.INT2, DType.UINT2):
    _VALUE_FIELD[_d] = "int_val"
_FLOAT8 = frozenset((DType.FLOAT8_E5M2, DType.FLOAT8_E4M3FN, DType.FLOAT8_E4M3FNUZ,
                     DType.FLOAT8_E4M3B11FNUZ, DType.FLOAT8_E5M2FNUZ))
_UNDECODABLE = frozenset((DType.RESOURCE, DType.VARIANT, DType.INVALID, DType.INT4, DType.UINT4, DType.INT2,
                          DType.UINT2))


# -- shapes -------------------------------------------------------------------
def decode_shape(proto: TensorShapeProto) -> Shape:
    if proto.unknown_rank:
        return UNKNOWN_SHAPE
    return Shape(tuple(None if d.size < 0 else d.size for d in proto.dim))


def encode_shape(shape: Shape, out: Optional[TensorShapeProto] = None) -> TensorShapeProto:
    out = TensorShapeProto() if out is None else out
    out.SetInParent()  # a scalar shape has no fields but must still be present
    if shape.dims is None:
        out.unknown_rank = True
    else:
        for d in shape.dims:
            out.dim.add().size = -1 if d is None else d
    return out


# -- tensors ------------------------------------------------------------------
def as_dtype(number: int) -> DType:
    dtype = DTYPE_BY_NUMBER.get(number)
    if dtype is None:
        raise ValueError(f"unsupported tensor dtype enum {number}")
    return dtype


def tensor_dims(proto: TensorProto) -> tuple[int, ...]:
    """The dimension sizes a TensorProto states, negative ones included.

    Read through the shape's encoding: iterating `dim` makes a message object per dimension,
    and a graph's thousands of constants share a few shapes.
    """
    return _encoded_shape_dims(proto.tensor_shape.SerializeToString())


@functools.lru_cache(maxsize=512)
def _encoded_shape_dims(encoded: bytes) -> tuple[int, ...]:
    return tuple([d.size for d in TensorShapeProto.FromString(encoded).dim])


def decode_tensor(proto: TensorProto) -> Tensor:
    """Wrap a TensorProto; its elements are decoded on first `numpy()`.  Every Const decodes here
    at load (its shape is its result's), hence the trusted constructor and the partial."""
    dtype = as_dtype(proto.dtype)
    dims = tensor_dims(proto)
    if dims and min(dims) < 0:
        raise ValueError(f"constant tensor with unknown dimension {list(dims)}")
    loader = None if dtype in _UNDECODABLE else functools.partial(_decode_elements, proto, dtype, dims)
    return Tensor.encoded(dtype, dims, loader, proto)


def _decode_elements(proto: TensorProto, dtype: DType, dims: tuple[int, ...]) -> np.ndarray:
    np_dtype = dtype.to_numpy()
    count = math.prod(dims)
    content = proto.tensor_content if dtype != DType.STRING else b""  # each read copies the bytes: read once
    if content:
        flat = np.frombuffer(content, dtype=np_dtype)
        if flat.size != count:
            raise ValueError(f"tensor_content holds {flat.size} elements, shape {list(dims)} needs {count}")
        return flat.reshape(dims)
    if dtype in _FLOAT8:
        flat = np.frombuffer(proto.float8_val, dtype=np_dtype)
    else:
        flat = _repeated_values(proto, dtype, np_dtype)
    return _splat(flat, count, dtype).reshape(dims)


def _repeated_values(proto: TensorProto, dtype: DType, np_dtype: np.dtype) -> np.ndarray:
    values = getattr(proto, _VALUE_FIELD[dtype])
    if dtype == DType.STRING:
        out = np.empty(len(values), dtype=object)
        out[:] = list(values)
        return out
    if dtype in (DType.HALF, DType.BFLOAT16):
        return np.asarray(values, dtype=np.uint16).view(np_dtype)
    if dtype in (DType.COMPLEX64, DType.COMPLEX128):
        pairs = np.asarray(values, dtype=np.float32 if dtype == DType.COMPLEX64 else np.float64)
        return pairs.reshape(-1, 2).view(np_dtype).reshape(-1)
    if dtype in _FLOAT_FIELDS:  # each element is exact in its type: converted straight, from a list (faster)
        return np.array(list(values), dtype=np_dtype)
    return np.asarray(values).astype(np_dtype, copy=False)


# Dtypes whose value field holds Python floats that convert exactly (a float_val is a float32's value).
_FLOAT_FIELDS = frozenset((DType.FLOAT, DType.DOUBLE))


def _splat(flat: np.ndarray, count: int, dtype: DType) -> np.ndarray:
    """TensorFlow's rule: missing trailing elements repeat the last one (zero if none)."""
    if flat.size == count:
        return flat
    if flat.size > count:
        raise ValueError(f"tensor holds {flat.size} values but its shape has {count} elements")
    if flat.size == 0:
        if dtype == DType.STRING:
            out = np.empty(count, dtype=object)
            out[:] = [b""] * count
            return out
        return np.zeros(count, dtype=flat.dtype)
    out = np.empty(count, dtype=flat.dtype)
    out[: flat.size] = flat
    out[flat.size:] = flat[-1]
    return out


def encode_tensor(tensor: Tensor, out: Optional[TensorProto] = None) -> TensorProto:
    """TensorProto for a tensor: its source if untouched, else packed `tensor_content`."""
    out = TensorProto() if out is None else out
    if isinstance(tensor.source, TensorProto):
        out.CopyFrom(tensor.source)
        return out
    out.dtype = int(tensor.dtype)
    for d in tensor.shape:
        out.tensor_shape.dim.add().size = d
    arr = tensor.numpy()
    if tensor.dtype == DType.STRING:
        out.string_val.extend(_as_bytes(x) for x in arr.reshape(-1))
    elif arr.size:
        out.tensor_content = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
    return out


def tensor_attr_chunks(tensor: Tensor) -> Optional[list[Any]]:
    """A serialized AttrValue holding `tensor`, as chunks whose last is a view of the elements,
    byte for byte what `attr_bytes(tensor)` returns; None where that path must be taken (an
    encoded source, string elements).

    A tensor a pass computed (a folded batch norm's weights) is then copied once, when the
    caller joins the chunks, rather than into a TensorProto, out of it, and again.
    """
    if tensor.source is not None or tensor.dtype == DType.STRING:
        return None
    content = _little_endian_bytes(tensor.numpy())
    return [_tensor_attr_head(int(tensor.dtype), tensor.shape, content.nbytes), content]


@functools.lru_cache(maxsize=1024)
def _tensor_attr_head(dtype: int, shape: tuple[int, ...], size: int) -> bytes:
    """What precedes `size` bytes of elements in an AttrValue holding a tensor: its tag and length,
    then TensorProto's dtype (1), tensor_shape (2: TensorShapeProto.dim (2): Dim.size (1)) and
    tensor_content's (4) tag and length.  Folded constants repeat a few types and shapes."""
    head = field_varint(1, dtype) if dtype else b""
    if shape:
        head += field_bytes(2, b"".join(field_bytes(2, field_varint(1, d) if d else b"") for d in shape))
    if size:
        head += length_prefix(4, size)
    return length_prefix(8, len(head) + size) + head  # AttrValue.tensor (8)


def _little_endian_bytes(arr: np.ndarray) -> memoryview:
    """The elements as little-endian bytes in C order: a view of `arr` itself where it already is
    that (numpy's conversions cost microseconds per small tensor), else of a converted copy."""
    if arr.size and arr.flags.c_contiguous and (arr.dtype.byteorder in "<|" or
                                                (arr.dtype.byteorder == "=" and sys.byteorder == "little")):
        try:
            return memoryview(arr).cast("B")
        except (TypeError, ValueError):  # a format memoryview cannot cast (complex, bfloat16...)
            pass
    return memoryview(np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<"), copy=False).reshape(-1).view(np.uint8))


def _as_bytes(x: Any) -> bytes:
    return x if isinstance(x, bytes) else str(x).encode("utf-8")


# -- attributes ---------------------------------------------------------------
def decode_attr(proto: AttrValue) -> Any:
    """AttrValue -> the IR's Python value (see compiler.ir.attrs)."""
    decode = _ATTR_DECODERS.get(proto.WhichOneof("value"))
    return RawAttr(proto.SerializeToString()) if decode is None else decode(proto)


def _decode_string(raw: bytes) -> str | bytes:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw


def _decode_type(proto: AttrValue) -> Any:
    dtype = DTYPE_BY_NUMBER.get(proto.type)
    if dtype is None:  # reference types and future enums stay opaque
        return RawAttr(proto.SerializeToString())
    return dtype


_LIST_KINDS = ("s", "i", "f", "b", "type", "shape", "tensor", "func")

# How each kind of AttrValue decodes (a table, not a chain of tests: thousands of attributes decode at load).
_ATTR_DECODERS: dict[str, Callable[[AttrValue], Any]] = {
    "type": _decode_type,
    "tensor": lambda proto: decode_tensor(proto.tensor),
    "s": lambda proto: _decode_string(proto.s),
    "i": lambda proto: proto.i,
    "f": lambda proto: proto.f,
    "b": lambda proto: proto.b,
    "shape": lambda proto: decode_shape(proto.shape),
    "list": lambda proto: _decode_list(proto),
    "func": lambda proto: FuncAttr(proto.func.name, {k: decode_attr(v) for k, v in sorted(proto.func.attr.items())}),
    "placeholder": lambda proto: PlaceholderAttr(proto.placeholder),
}


def _decode_list(proto: AttrValue) -> Any:
    lst = proto.list
    present = [k for k in _LIST_KINDS if len(getattr(lst, k))]
    if not present:
        return ()
    if len(present) > 1:
        return RawAttr(proto.SerializeToString())
    kind = present[0]
    items = getattr(lst, kind)
    if kind == "s":
        return tuple(_decode_string(x) for x in items)
    if kind == "type":
        if not all(t in DTYPE_BY_NUMBER for t in items):
            return RawAttr(proto.SerializeToString())
        return tuple(DTYPE_BY_NUMBER[t] for t in items)
    if kind == "shape":
        return tuple(decode_shape(x) for x in items)
    if kind == "tensor":
        return tuple(decode_tensor(x) for x in items)
    if kind == "func":
        return tuple(FuncAttr(f.name, {k: decode_attr(v) for k, v in sorted(f.attr.items())}) for f in items)
    return tuple(items)


def encode_attr(value: Any, out: Optional[AttrValue] = None) -> AttrValue:
    """The IR's Python value -> AttrValue."""
    out = AttrValue() if out is None else out
    if isinstance(value, RawAttr):
        out.ParseFromString(value.encoded)
    elif isinstance(value, (tuple, list)):
        out.list.SetInParent()
        for item in value:
            _append_list_item(out.list, item)
    else:
        _set_scalar(out, value)
    return out


def _set_scalar(out: AttrValue, value: Any) -> None:
    if isinstance(value, (bool, np.bool_)):
        out.b = bool(value)
    elif isinstance(value, DType):
        out.type = int(value)
    elif isinstance(value, (int, np.integer)):
        out.i = int(value)
    elif isinstance(value, (float, np.floating)):
        out.f = float(value)
    elif isinstance(value, str):
        out.s = value.encode("utf-8")
    elif isinstance(value, bytes):
        out.s = value
    elif isinstance(value, Shape):
        encode_shape(value, out.shape)
    elif isinstance(value, Tensor):
        encode_tensor(value, out.tensor)
    elif isinstance(value, FuncAttr):
        _encode_func(value, out.func)
    elif isinstance(value, PlaceholderAttr):
        out.placeholder = value.name
    else:
        raise TypeError(f"cannot encode attribute value {value!r}")


def _encode_func(value: FuncAttr, out: Any) -> None:
    out.name = value.name
    for k, v in value.attrs.items():
        encode_attr(v, out.attr[k])


def _append_list_item(lst: Any, item: Any) -> None:
    if isinstance(item, (bool, np.bool_)):
        lst.b.append(bool(item))
    elif isinstance(item, DType):
        lst.type.append(int(item))
    elif isinstance(item, (int, np.integer)):
        lst.i.append(int(item))
    elif isinstance(item, (float, np.floating)):
        lst.f.append(float(item))
    elif isinstance(item, str):
        lst.s.append(item.encode("utf-8"))
    elif isinstance(item, bytes):
        lst.s.append(item)
    elif isinstance(item, Shape):
        encode_shape(item, lst.shape.add())
    elif isinstance(item, Tensor):
        encode_tensor(item, lst.tensor.add())
    elif isinstance(item, FuncAttr):
        _encode_func(item, lst.func.add())
    else:
        raise TypeError(f"cannot encode list attribute element {item!r}")


def attr_bytes(value: Any) -> bytes:
    """Serialized AttrValue for an IR value."""
    kind = type(value)
    if kind is DType or kind is str:  # what passes assign most (T, dtype, data_format): a few values
        return _repeated_attr_bytes(kind, value)
    return encode_attr(value).SerializeToString(deterministic=True)


@functools.lru_cache(maxsize=1024)
def _repeated_attr_bytes(kind: type, value: Any) -> bytes:
    """`attr_bytes` of a type or a string, kept by kind and value."""
    return encode_attr(value).SerializeToString(deterministic=True)
