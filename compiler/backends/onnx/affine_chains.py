"""A chain of constant scalings and shifts as at most one Mul and one Add.

Keras' preprocessing layers stack elementwise arithmetic with constants:
Rescaling is `x * scale + offset`, Normalization `(x - mean) / sqrt(var)`,
EfficientNet's stem does both.  Each op becomes an ONNX node of its own, yet
any run of Mul, Div, Add and Sub with one constant operand is an affine map
`x * A + B` with constant A and B (TF's Grappler regroups such constants the
same way).  A chain is rewritten when that takes fewer ops, e.g. four ops to
two, or Add then Sub to one Add.

Numbers: A and B are computed in float64 and rounded once to the chain's type,
so the result differs from the op-by-op evaluation by rounding only (a few
units in the last place of the terms' magnitude).  B sums one term per shift,
each scaled by the steps after it; a chain is kept when one term would dwarf
another in B.  Attention masks are `bias + (1 - mask) * -1e9`: folded, the
bias (about 0.1) would be added to -1e9 and lost where the mask is 1, while
op by op it is added to an exact 0.  Only the chain's last value
is visible outside it: every intermediate must be read by the next op alone,
unnamed and without control edges.  The new Add (or Mul) takes the last op's name.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Collection, Optional

import numpy as np

from compiler.ir.dtypes import DType
from compiler.ir.graph import Graph, Op
from compiler.rewrite.constants import const_array
from compiler.rewrite.edit import add_const, erase_dead, take_over

_TYPES = (DType.FLOAT, DType.DOUBLE, DType.HALF)
_AFFINE = frozenset({"Mul", "Add", "AddV2", "Sub", "RealDiv", "Div"})
_LARGEST = 1 << 20  # elements in a combined constant; bigger ones are weights, not preprocessing
_DWARFED = 128.0  # a term this many times smaller than B keeps under 17 of float32's 24 bits in it


@dataclass
class Step:
    """One op of a chain: x (op) c, with the chain's value on side `at` (0: left)."""

    op: Op
    at: int
    constant: np.ndarray


def _step(op: Op) -> Optional[Step]:
    """`op` as one affine step: an affine op type on a float, one operand constant, the other not."""
    if op.type not in _AFFINE or len(op.operands) != 2 or op.results[0].dtype not in _TYPES:
        return None
    left, right = (const_array(v) for v in op.operands)
    if (left is None) == (right is None):
        return None
    at = 0 if left is None else 1
    constant = right if at == 0 else left
    if constant.dtype.kind != "f" or constant.size > _LARGEST:
        return None
    if at == 1 and op.type in ("RealDiv", "Div"):
        return None  # c / x is not affine
    return Step(op, at, constant)


def _links(step: Step, named: Collection[str]) -> Optional[Step]:
    """The next step, when `step`'s value is read by it alone and nothing else sees it."""
    op = step.op
    value = op.results[0]
    if len(value.uses) != 1 or op.name in named or op.control_users:
        return None
    user, slot = value.uses[0]
    following = _step(user)
    if following is None or following.at != slot or following.op.control_deps:
        return None
    return following


def find_chains(graph: Graph, named: Collection[str] = ()) -> list[list[Step]]:
    """Every maximal chain that rewrites to fewer ops, in graph order of their first op."""
    steps = {op: found for op in graph if op.type in _AFFINE for found in [_step(op)] if found is not None}
    followed: set[Op] = set()
    chains = []
    for op, step in steps.items():
        if op in followed or op.control_deps:
            continue
        chain = [step]
        while (following := _links(chain[-1], named)) is not None:
            chain.append(following)
            followed.add(following.op)
        if len(chain) > 1:
            combined = _combined(chain)
            if combined is not None and len(_ops_needed(*combined)) < len(chain):
                chains.append(chain)
    return chains


def _combined(chain: list[Step]) -> Optional[tuple[np.ndarray, np.ndarray]]:
    """(A, B) when the constants broadcast together, A and B come out finite and no shift is
    dwarfed in B; None otherwise (constants that do not fit fail at run time in TF: such a
    chain is left for it to refuse)."""
    try:
        with np.errstate(all="ignore"):
            scale, terms = _affine(chain)
            shift = sum(terms, np.zeros(()))
        np.broadcast_shapes(scale.shape, shift.shape)
    except ValueError:
        return None
    if not (np.isfinite(scale).all() and np.isfinite(shift).all()) or _dwarfs_a_term(shift, terms):
        return None
    return scale, shift


def _affine(chain: list[Step]) -> tuple[np.ndarray, list[np.ndarray]]:
    """(A, [B's terms]) with chain(x) = x * A + sum(terms), in float64: one term per shift."""
    scale, terms = np.ones(()), []
    for step in chain:
        c = step.constant.astype(np.float64)
        kind = step.op.type
        if kind == "Mul":
            scale, terms = scale * c, [t * c for t in terms]
        elif kind in ("RealDiv", "Div"):
            scale, terms = scale / c, [t / c for t in terms]
        elif kind in ("Add", "AddV2"):
            terms.append(c)
        elif step.at == 0:  # x - c
            terms.append(-c)
        else:  # c - x
            scale, terms = -scale, [-t for t in terms] + [c]
    return scale, terms


def _dwarfs_a_term(shift: np.ndarray, terms: list[np.ndarray]) -> bool:
    """Whether a nonzero term is so much smaller than B that rounding B would lose it."""
    largest = float(np.max(np.abs(shift), initial=0.0))
    return any(0 < peak < largest / _DWARFED
               for peak in (float(np.max(np.abs(t), initial=0.0)) for t in terms))


def _ops_needed(scale: np.ndarray, shift: np.ndarray) -> list[str]:
    """Which of Mul and Add the affine map needs.  One may be left out only when it is the
    identity and its constant does not widen the result by broadcasting."""
    joint = np.broadcast_shapes(scale.shape, shift.shape)
    needed = []
    if not (np.all(scale == 1) and shift.shape == joint):
        needed.append("Mul")
    if not (np.all(shift == 0) and scale.shape == joint):
        needed.append("Add")
    return needed or ["Mul"]  # the identity still has to produce the chain's value


def rewrite_found(graph: Graph, chains: list[list[Step]], named: Collection[str] = ()) -> None:
    """Rewrite the chains `find_chains` found in `graph`, in place."""
    for chain in chains:
        _rewrite(graph, chain, named)


def _rewrite(graph: Graph, chain: list[Step], named: Collection[str]) -> None:
    last = chain[-1].op
    value = chain[0].op.operands[chain[0].at]
    dtype, base = last.results[0].dtype, last.name
    scale, shift = _combined(chain)  # type: ignore[misc]  # found by find_chains: not None
    kinds = _ops_needed(scale, shift)
    for kind in kinds:
        constant = add_const(graph, f"{base}/{kind.lower()}_by", scale if kind == "Mul" else shift, dtype, last)
        stated = [(dtype, last.results[0].shape)] if kind == kinds[-1] else None  # the Mul's may be narrower
        value = graph.create_op(kind if kind == "Mul" else "AddV2", graph.unique_name(f"{base}/{kind.lower()}"),
                                [value, constant], attrs={"T": dtype}, result_types=stated,
                                device=last.device, before=last).results[0]
    take_over(graph, last, value)
    erase_dead(graph, [step.op for step in chain[:-1]], set(named))
