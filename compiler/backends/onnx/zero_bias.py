"""BiasAdd of an all-zero bias is its input: drop it before lowering.

A freshly initialised Keras layer has zero biases, and a Dense applied to a
3-D input (a transformer's projections) keeps its BiasAdd as an ONNX Add
after the reshapes, where it cannot ride on a Gemm or Conv.  BiasAdd never
broadcasts its input to a new shape, so the input stands for the result
exactly (x + 0 is x, a -0.0 element aside, which reads back as +0.0 from the
Add).  A BiasAdd named as a graph output stays, so the output keeps its name.
"""
from __future__ import annotations

from typing import Collection

import numpy as np

from compiler.ir.graph import Graph, Op
from compiler.rewrite.constants import const_array

_BIAS_ADDS = ("BiasAdd", "BiasAddV1")


def find_zero_biases(graph: Graph, named: Collection[str] = ()) -> list[Op]:
    return [op for op in graph if op.type in _BIAS_ADDS and op.name not in named and _adds_zero(op)]


def _adds_zero(op: Op) -> bool:
    if len(op.operands) != 2 or op.control_users or op.operands[0].dtype != op.results[0].dtype:
        return False
    bias = const_array(op.operands[1])
    return bias is not None and bias.ndim == 1 and bias.dtype.kind in "fiuc" and not np.any(bias)


def drop_found(graph: Graph, found: list[Op], named: Collection[str] = ()) -> None:
    """Bypass and erase the zero BiasAdds `find_zero_biases` found in `graph`."""
    for op in found:
        op.results[0].replace_all_uses_with(op.operands[0])
        graph.erase_op(op)
