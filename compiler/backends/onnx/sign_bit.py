"""A float's sign bit read through Bitcast, as a comparison ONNX can express.

Keras' `signbit` (and through it `argmax`/`argmin`, which move -0.0 out of the
way first) spells "is the sign bit set" as
`Less(BitwiseAnd(Bitcast(x, int), INT_MIN), 0)`.  ONNX has no bit cast, so
tf2onnx fails on every Keras model that takes an argmax.  The same bit is
`min(x, 1 / x) < 0`: true for negative numbers, for -0.0 (whose reciprocal is
-inf) and for -inf (itself).  Only the sign of a NaN is lost: a NaN with its
sign bit set reads as positive.  The Less stays (with its name) and reads the
new comparison; the Bitcast and BitwiseAnd go once nothing else reads them.
"""
from __future__ import annotations

from typing import Collection, Optional

import numpy as np

from compiler.ir.dtypes import DType
from compiler.ir.graph import Graph, Op, Value
from compiler.rewrite.constants import const_array, is_integer
from compiler.rewrite.edit import add_const, erase_dead

# float type -> the signed integer type of its width
_SAME_WIDTH_INT = {DType.FLOAT: DType.INT32, DType.DOUBLE: DType.INT64, DType.HALF: DType.INT16,
                   DType.BFLOAT16: DType.INT16}


def find_sign_bit_tests(graph: Graph, named: Collection[str] = ()) -> list[tuple[Op, Value]]:
    """(the Less, the float whose sign bit it tests) for every match.  The Less itself may be
    named: it stays, reading the new comparison."""
    found = []
    for op in graph:
        if op.type == "Less":
            source = _tested_float(op)
            if source is not None:
                found.append((op, source))
    return found


def _tested_float(less: Op) -> Optional[Value]:
    """x when `less` is Less(BitwiseAnd(Bitcast(x), INT_MIN), 0) (the mask on either side)."""
    if len(less.operands) != 2 or not is_integer(const_array(less.operands[1]), 0):
        return None
    masked = less.operands[0].op
    if masked.type != "BitwiseAnd" or len(masked.operands) != 2:
        return None
    for bits, mask in (masked.operands, masked.operands[::-1]):
        cast = bits.op
        if cast.type != "Bitcast" or len(cast.operands) != 1:
            continue
        x = cast.operands[0]
        wanted = _SAME_WIDTH_INT.get(x.dtype)
        if wanted is not None and bits.dtype == wanted \
                and is_integer(const_array(mask), np.iinfo(wanted.to_numpy()).min):
            return x
    return None


def rewrite_found(graph: Graph, found: list[tuple[Op, Value]], named: Collection[str] = ()) -> None:
    """Rewrite the sign-bit tests `find_sign_bit_tests` found in `graph`, in place."""
    for less, x in found:
        _rewrite(graph, less, x, named)


def _rewrite(graph: Graph, less: Op, x: Value, named: Collection[str]) -> None:
    dtype, base, device = x.dtype, less.name, less.device
    masked = less.operands[0].op
    zero = add_const(graph, f"{base}/zero", np.zeros(()), dtype, less)
    inverse = graph.create_op("Reciprocal", graph.unique_name(f"{base}/reciprocal"), [x], attrs={"T": dtype},
                              result_types=[(dtype, x.shape)], device=device, before=less)
    lesser = graph.create_op("Minimum", graph.unique_name(f"{base}/lesser"), [x, inverse.results[0]],
                             attrs={"T": dtype}, result_types=[(dtype, x.shape)], device=device, before=less)
    less.set_operands([lesser.results[0], zero])
    less.attrs["T"] = dtype
    erase_dead(graph, [masked], set(named))
