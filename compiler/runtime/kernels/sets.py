"""DenseToDenseSetOperation (tf.sets.difference / intersection / union of two dense tensors).

TF's set_kernels.cc groups each operand by all dims but the last, runs the set
operation per group on std::set (so each group's result is deduplicated and
sorted ascending; strings byte-wise), and returns a SparseTensor: indices
[group index..., position], values, and dense_shape [group dims..., largest
result].  Groups come in row-major order.  For two dense operands
validate_indices has nothing to validate.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .common import choice
from .registry import KernelError, kernel

Array = np.ndarray
Attrs = Mapping[str, object]

_OPERATIONS = ("a-b", "b-a", "intersection", "union")


def _group_result(operation: str, a: Array, b: Array) -> list:
    left, right = set(a.tolist()), set(b.tolist())
    if operation == "a-b":
        found = left - right
    elif operation == "b-a":
        found = right - left
    elif operation == "intersection":
        found = left & right
    else:
        found = left | right
    return sorted(found)


@kernel("DenseToDenseSetOperation")
def _dense_to_dense_set_operation(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    operation = choice(attrs, "set_operation", _OPERATIONS)
    a, b = np.asarray(inputs[0]), np.asarray(inputs[1])
    for x in (a, b):
        if x.ndim < 2:
            raise KernelError(f"Invalid rank {x.ndim}.")
    if a.shape[:-1] != b.shape[:-1]:
        raise KernelError(f"Shapes {list(a.shape[:-1])} and {list(b.shape[:-1])} do not match.")
    groups = a.shape[:-1]
    count = int(np.prod(groups))
    flat_a = a.reshape(count, a.shape[-1])
    flat_b = b.reshape(count, b.shape[-1])
    indices, values, widest = [], [], 0
    for g, position in enumerate(np.ndindex(*groups)):
        found = _group_result(operation, flat_a[g], flat_b[g])
        widest = max(widest, len(found))
        indices.extend(position + (k,) for k in range(len(found)))
        values.extend(found)
    out_indices = np.asarray(indices, np.int64).reshape(len(indices), len(groups) + 1)
    out_values = np.empty(len(values), a.dtype)
    out_values[:] = values
    return [out_indices, out_values, np.asarray(list(groups) + [widest], np.int64)]
