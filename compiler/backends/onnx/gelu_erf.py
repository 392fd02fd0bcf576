"""GELU's Erfc as `1 - Erf`: two ONNX nodes instead of the general Erfc's thirty.

TF writes exact GELU as `0.5 * x * erfc(-x / sqrt(2))` (Keras' `gelu`,
`tf.nn.gelu`).  ONNX has no Erfc, and the general lowering is a
double-precision fit because `1 - Erf(z)` cancels to nothing for large z.
Here that does not matter: z = -k*x with k > 0 is large only where x is very
negative, and the product with x keeps the absolute error of
`x * (1 - Erf(z))` within |x| times one float ulp of 1, which is below
float32 resolution of the layer's own outputs.  So the Erfc is rewritten
only when its single reader multiplies it by x (or by x times a constant),
and its argument is -k*x for that same x.

When the argument is `Neg(x) * k` read by nothing else, the Neg goes:
erfc(-y) = 1 + erf(y) exactly (Erf is odd), so the Mul computes k*x and
the complement is an Add.  GELU is then five nodes (Mul, Erf, Add and the
two products), as in the Erf form TF writes for approximate=False.

With k = 1/sqrt(2) in float32 (TF's and Keras' GELU), k*x is written
x / sqrt(2): the spelling onnxruntime recognises and fuses into its single
Gelu kernel (it leaves the Mul form as five passes over the tensor, 2.2x
slower on a 64x56x56 activation).  The quotient may differ from the product
in its last bit.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Collection, Optional

import numpy as np

from compiler.ir.dtypes import DType
from compiler.ir.graph import Graph, Op, Value
from compiler.rewrite.constants import const_array
from compiler.rewrite.edit import add_const

_FLOATS = (DType.FLOAT, DType.DOUBLE)


@dataclass(frozen=True)
class GeluErfc:
    """An Erfc of -k*x whose only reader multiplies it by x (times a constant)."""

    erfc: Op


def find_gelu_erfcs(graph: Graph, named: Collection[str] = ()) -> list[GeluErfc]:
    return [GeluErfc(op) for op in graph if op.type == "Erfc" and op.name not in named and _is_gelu(op)]


def _is_gelu(erfc: Op) -> bool:
    if len(erfc.operands) != 1 or erfc.results[0].dtype not in _FLOATS or erfc.control_users:
        return False
    x = _negated_source(erfc.operands[0])
    uses = erfc.results[0].uses
    if x is None or len(uses) != 1 or uses[0][0].type != "Mul":
        return False
    reader, slot = uses[0]
    other = reader.operands[1 - slot]
    return other is x or _scaled_source(other) is x


def _constant_scalar(value: Value) -> Optional[float]:
    array = const_array(value)
    if array is None or array.size != 1 or not np.isfinite(array).all():
        return None
    return float(array.reshape(()))


def _split_mul(value: Value) -> Optional[tuple[Value, float]]:
    """`value` = operand * constant scalar (either order): the operand and the constant."""
    op = value.op
    if op.type != "Mul" or len(op.operands) != 2:
        return None
    for operand, scale in (op.operands, op.operands[::-1]):
        constant = _constant_scalar(scale)
        if constant is not None:
            return operand, constant
    return None


def _negated_source(z: Value) -> Optional[Value]:
    """x when z = -k*x with k > 0: `Mul(Neg(x), k)` or `Mul(x, -k)`."""
    split = _split_mul(z)
    if split is None:
        return None
    operand, constant = split
    if constant > 0 and operand.op.type == "Neg" and len(operand.op.operands) == 1:
        return operand.op.operands[0]
    return operand if constant < 0 else None


def _scaled_source(value: Value) -> Optional[Value]:
    split = _split_mul(value)
    return None if split is None else split[0]


def rewrite_found(graph: Graph, found: list[GeluErfc], named: Collection[str] = ()) -> None:
    """Rewrite the GELU Erfcs `find_gelu_erfcs` found in `graph`, in place."""
    for site in found:
        _rewrite(graph, site.erfc)


def _rewrite(graph: Graph, erfc: Op) -> None:
    z = erfc.operands[0]
    dtype = erfc.results[0].dtype
    name = erfc.name
    kind, suffix = ("Add", "one_plus_erf") if _drop_negation(graph, z) else ("Sub", "one_minus_erf")
    if kind == "Add":
        z = _divided_by_sqrt2(graph, z)
    one = add_const(graph, f"{name}/one", np.asarray(1), dtype, erfc)
    erf = graph.create_op("Erf", graph.unique_name(f"{name}/erf"), [z], attrs={"T": dtype},
                          result_types=[(dtype, z.shape)], device=erfc.device, before=erfc)
    complement = graph.create_op(kind, graph.unique_name(f"{name}/{suffix}"), [one, erf.results[0]],
                                 attrs={"T": dtype}, result_types=[(dtype, erfc.results[0].shape)],
                                 device=erfc.device, before=erfc)
    erfc.results[0].replace_all_uses_with(complement.results[0])
    graph.erase_op(erfc)
    graph.rename(complement, name)


def _drop_negation(graph: Graph, z: Value) -> bool:
    """Make z = Neg(x) * k compute k * x instead, when only the Erfc reads z; True if it did."""
    mul = z.op
    if len(z.uses) != 1 or mul.control_users or len(mul.operands) != 2:
        return False
    for slot, operand in enumerate(mul.operands):
        neg = operand.op
        if neg.type == "Neg" and len(neg.operands) == 1 and _constant_scalar(mul.operands[1 - slot]) is not None:
            mul.set_operand(slot, neg.operands[0])
            if not neg.has_uses:
                graph.erase_op(neg)
            return True
    return False


_INV_SQRT2 = np.float32(1 / np.sqrt(2))


def _divided_by_sqrt2(graph: Graph, z: Value) -> Value:
    """z = x * (1/sqrt 2), read by the Erfc alone, rewritten as x / sqrt 2; the new z."""
    mul = z.op
    for slot, operand in enumerate(mul.operands):
        constant = _constant_scalar(mul.operands[1 - slot])
        if constant is None or np.float32(constant) != _INV_SQRT2:
            continue
        dtype = z.dtype
        name = mul.name
        root2 = add_const(graph, f"{name}/sqrt2", np.asarray(np.sqrt(2)), dtype, mul)
        div = graph.create_op("RealDiv", graph.unique_name(f"{name}/div"), [operand, root2],
                              attrs={"T": dtype}, result_types=[(dtype, z.shape)], device=mul.device, before=mul)
        z.replace_all_uses_with(div.results[0])
        graph.erase_op(mul)
        graph.rename(div, name)
        return div.results[0]
    return z
