"""Where a value is a known constant: the Const behind Identity-like chains.

Frozen graphs often read weights through `Identity` (`w/read`, Keras'
`ReadVariableOp`); rewrites treat those values as the constant itself.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from compiler.ir.graph import Op, Value
from compiler.runtime.kernels.array import SLICE_MASKS
from compiler.runtime.op_eval import FORWARDING_OPS


def const_op(value: Value, through_identity: bool = True) -> Optional[Op]:
    """The Const op whose value `value` is, or None (control deps on the chain disqualify it)."""
    op = value.op
    while through_identity and op.type in FORWARDING_OPS and value.index == 0 and not op.control_deps_view:
        if len(op.operands) != 1:
            return None
        value = op.operands[0]
        op = value.op
    if op.type != "Const" or value.index != 0 or op.control_deps_view:
        return None
    return op


def identity_path(value: Value) -> list[Op]:
    """The Identity-like ops between `value` and its Const (nearest first)."""
    path = []
    op = value.op
    while op.type in FORWARDING_OPS and len(op.operands) == 1:
        path.append(op)
        op = op.operands[0].op
    return path


def const_array(value: Value) -> Optional[np.ndarray]:
    """The constant's elements, or None if `value` is not a decodable constant."""
    found = const_op(value)
    if found is None or "value" not in found.attrs:
        return None
    tensor = found.attrs["value"]
    if not getattr(tensor, "is_decodable", False):
        return None
    return tensor.numpy()


def same_constant(x: Value, y: Value) -> bool:
    """Both are decodable constants of one type, shape and bit pattern (a -0.0 weight is not a 0.0
    one: a rewrite that treats them as one could flip an infinity's sign)."""
    left, right = const_op(x), const_op(y)
    if left is None or right is None:
        return False
    a, b = left.attrs.get("value"), right.attrs.get("value")
    return (getattr(a, "is_decodable", False) and getattr(b, "is_decodable", False)
            and a.same_value(b))


def ordered_const_array(value: Value) -> Optional[np.ndarray]:
    """A decodable Const's elements, also when it waits on control inputs: in a loop body every
    constant waits on the frame's pivot, which orders it but leaves its value the same."""
    op = value.op
    if op.type != "Const" or value.index != 0 or not getattr(op.attrs.get("value"), "is_decodable", False):
        return None
    return np.asarray(op.attrs["value"].numpy())


def is_integer(array: Optional[np.ndarray], number: int) -> bool:
    """Whether a constant's elements (`const_array`'s or `ordered_const_array`'s; None: not a constant)
    are one integer equal to `number`."""
    return array is not None and array.size == 1 and array.dtype.kind in "iu" and int(array.reshape(())) == number


def picks_element(op: Op, index: int) -> bool:
    """`op` is StridedSlice(x, [index], [index + 1], [1]) shrinking that axis away, all constant:
    `x[index]` (how TF writes a step of a sequence, or `tf.shape(x)[0]`)."""
    if op.type != "StridedSlice" or any(int(op.attr(m, 0)) != (m == "shrink_axis_mask") for m in SLICE_MASKS):
        return False
    return all(is_integer(const_array(v), n) for v, n in zip(op.operands[1:], (index, index + 1, 1)))


def is_exclusive(value: Value, user: Op) -> bool:
    """True if `user` is the only reader of `value` and of every op on its Identity chain to the Const."""
    current = value
    while True:
        if any(u is not user for u, _ in current.uses) or current.op.control_users:
            return False
        if current.op.type == "Const":
            return True
        user = current.op
        current = current.op.operands[0]
