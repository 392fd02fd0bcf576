"""Small integer tensors computed at run time, read as affine terms of run-time quantities.

Keras and TF build shapes they cannot know when they trace (a repeat's Reshape target, a
transposed conv's output size, a dilated conv's SpaceToBatchND paddings) from `Shape(x)` with a
few integer ops.  The static analysis sees only that such an element is unknown; read op by op,
it is `factor * q + offset`, q the size of one of x's axes or one element of some other integer
tensor.  That is enough to prove a Reshape is a repeat, that a transposed conv's padding is the
same whatever the input size, or that a dilated conv's paddings less its crops are constant.
Only the ops TF and Keras use for this are read; anything else is a term of its own or None.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Protocol, Union

import numpy as np

from compiler.ir.dtypes import DType
from compiler.ir.graph import Op, Value
from compiler.ir.shapes import Shape
from compiler.runtime.kernels.array import SLICE_MASKS, strided_slice_index
from compiler.runtime.kernels.registry import KernelError

_INTEGERS = (DType.INT32, DType.INT64)
_LARGEST = 16  # integer tensors past this many elements are not shapes
_DEPTH = 16  # ops followed back from the tensor


class Facts(Protocol):
    """What the reading needs to know statically (a LoweringContext or a StaticInfo)."""

    def constant(self, value: Value) -> Optional[np.ndarray]: ...

    def shape(self, value: Value) -> Shape: ...


@dataclass(frozen=True)
class Term:
    """factor * q + offset, q known at run time: the size of `value`'s axis `axis`, or with `size`
    false element `axis` of the integer tensor `value`."""

    value: Value
    axis: int
    factor: int = 1
    offset: int = 0
    size: bool = True

    def affine(self, factor: int, offset: int) -> Union["Term", int]:
        """factor * self + offset (an int once no q is left)."""
        if self.factor * factor == 0:
            return self.offset * factor + offset
        return Term(self.value, self.axis, self.factor * factor, self.offset * factor + offset, self.size)

    def same_q(self, other: "Term") -> bool:
        return self.value is other.value and self.axis == other.axis and self.size == other.size


Element = Union[int, Term]


def terms(facts: Facts, value: Value) -> Optional[list[Element]]:
    """The elements of a small integer tensor, flattened, or None."""
    found = _read(facts, value, _DEPTH)
    return None if found is None else list(found.reshape(-1))


def _read(facts: Facts, value: Value, depth: int) -> Optional[np.ndarray]:
    """The tensor as an object array of elements, or None."""
    array = facts.constant(value)
    if array is not None:
        return array.astype(object) if array.dtype.kind in "iu" and array.size <= _LARGEST else None
    op = value.op
    if depth == 0:
        return _opaque(facts, value)
    if op.type == "Shape":
        dims = facts.shape(op.operands[0]).dims
        return None if dims is None else _held([Term(op.operands[0], i) for i in range(len(dims))])
    reader = _READERS.get(op.type)
    found = reader(facts, op, depth - 1) if reader is not None else None
    return found if found is not None else _opaque(facts, value)


def _held(elements: list[Element]) -> np.ndarray:
    """An object vector of these elements (one by one: numpy would unpack the terms)."""
    held = np.empty(len(elements), dtype=object)
    for i, element in enumerate(elements):
        held[i] = element
    return held


def _opaque(facts: Facts, value: Value) -> Optional[np.ndarray]:
    """A small integer tensor of known shape read no further: each element a term of its own."""
    dims = facts.shape(value).dims
    if value.dtype not in _INTEGERS or dims is None or None in dims:
        return None
    count = int(np.prod(dims, dtype=np.int64))
    if count > _LARGEST:
        return None
    return _held([Term(value, i, size=False) for i in range(count)]).reshape(dims)


def _passed(facts: Facts, op: Op, depth: int) -> Optional[np.ndarray]:
    """Cast and Identity keep the elements; ExpandDims and Reshape regroup them."""
    found = _read(facts, op.operands[0], depth)
    if found is None or op.type in ("Cast", "Identity"):
        return found
    dims = facts.shape(op.results[0]).dims
    if dims is None or None in dims or int(np.prod(dims, dtype=np.int64)) != found.size:
        return None
    return found.reshape(dims)


def _packed(facts: Facts, op: Op, depth: int) -> Optional[np.ndarray]:
    joined = op.type == "ConcatV2"
    parts = [_read(facts, part, depth) for part in (op.operands[:-1] if joined else op.operands)]
    axis = facts.constant(op.operands[-1]) if joined else np.asarray(op.attr("axis", 0))
    if axis is None or any(p is None for p in parts):
        return None
    try:
        return (np.concatenate if joined else np.stack)(parts, axis=int(axis.reshape(())))  # type: ignore[arg-type]
    except (ValueError, IndexError):  # (numpy's AxisError is both)
        return None


def _sliced(facts: Facts, op: Op, depth: int) -> Optional[np.ndarray]:
    found = _read(facts, op.operands[0], depth)
    bounds = [facts.constant(v) for v in op.operands[1:4]]
    if found is None or any(b is None for b in bounds):
        return None
    masks = {m: int(op.attr(m, 0)) for m in SLICE_MASKS}
    try:
        index = strided_slice_index(found.shape, *(b.reshape(-1).tolist() for b in bounds), masks)  # type: ignore
    except (ValueError, IndexError, TypeError, KernelError):
        return None
    picked = found[index]
    return picked if isinstance(picked, np.ndarray) else _held([picked]).reshape(())


def _arithmetic(facts: Facts, op: Op, depth: int) -> Optional[np.ndarray]:
    """Elementwise, with broadcasting, where every result stays affine."""
    a, b = (_read(facts, operand, depth) for operand in op.operands[:2])
    if a is None or b is None:
        return None
    combine = np.frompyfunc(lambda x, y: _combine(op.type, x, y), 2, 1)
    try:
        out = combine(a, b)
    except ValueError:
        return None
    out = np.asarray(out, dtype=object)
    return None if any(e is None for e in out.reshape(-1)) else out


def _combine(kind: str, x: Element, y: Element) -> Optional[Element]:
    sign = -1 if kind == "Sub" else 1
    if isinstance(x, int) and isinstance(y, int):
        return x * y if kind == "Mul" else x + sign * y
    if kind == "Mul":
        term, k = (x, y) if isinstance(x, Term) else (y, x)
        return term.affine(k, 0) if isinstance(k, int) else None  # type: ignore[union-attr]
    if isinstance(x, Term) and isinstance(y, int):
        return x.affine(1, sign * y)
    if isinstance(x, int) and isinstance(y, Term):
        return y.affine(sign, x)
    if isinstance(x, Term) and isinstance(y, Term) and x.same_q(y):
        return _sum(x, y, sign)
    return None


def difference(x: Element, y: Element) -> Optional[Element]:
    """x - y, where it stays affine (the same run-time amount in both cancels)."""
    return _combine("Sub", x, y)


def _sum(x: Term, y: Term, sign: int) -> Element:
    """x + sign * y, both of the same q."""
    factor, offset = x.factor + sign * y.factor, x.offset + sign * y.offset
    return offset if factor == 0 else Term(x.value, x.axis, factor, offset, x.size)


_READERS = {"Cast": _passed, "Identity": _passed, "ExpandDims": _passed, "Reshape": _passed,
            "Pack": _packed, "ConcatV2": _packed, "StridedSlice": _sliced,
            "Mul": _arithmetic, "Add": _arithmetic, "AddV2": _arithmetic, "Sub": _arithmetic}
