"""A Keras LayerNormalization over the last axis as one ONNX LayerNormalization node.

Frozen, Keras' layer is a dozen TF ops (two Means, SquaredDifference, Rsqrt and
the scale-and-shift arithmetic), which the plain lowering turns into as many
ONNX nodes; onnxruntime's own fusion does not recognise that spelling.  The
rewrite below finds the whole pattern and replaces it with TF's `_MklLayerNorm`
(oneDNN's fused op: the last axis normalized, then scaled and shifted by vectors
of its size), which lowers to LayerNormalization from opset 17 and to the
decomposition below that.  Matched, with either operand order everywhere:

    mean  = Mean(x, [-1], keep_dims)        var = Mean(SquaredDifference(x, [StopGradient] mean), [-1], keep_dims)
    s     = Rsqrt(var + eps) [* gamma]
    out   = x * s + (-mean * s [+ beta])    or    x * s + (beta - mean * s)

Every intermediate must be read only inside the pattern, so nothing else
loses a value.  The fused op takes the name of `out`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import product
from typing import Collection, Optional

import numpy as np

from compiler.analysis import analyze
from compiler.analysis.order import reachable_ops, topological_order
from compiler.analysis.static_info import StaticInfo
from compiler.backends.onnx import opset
from compiler.backends.onnx.context import LoweringContext
from compiler.backends.onnx.registry import lowers
from compiler.ir.dtypes import DType
from compiler.ir.graph import Graph, IRError, Op, Value
from compiler.rewrite.constants import const_array
from compiler.rewrite.edit import add_const, erase_dead
from compiler.rewrite import pattern
from compiler.rewrite.pattern import OpPattern, any_value, used_outside

FUSED = "_MklLayerNorm"
_TYPES = (DType.FLOAT, DType.HALF, DType.BFLOAT16)
_ADDS = ("Add", "AddV2")
_WIDEST = 1 << 24  # a wider "last axis" is a corrupt shape, not a layer: left alone


@dataclass
class LayerNorm:
    """One matched layer norm: its input, the op producing its output, and what it computes.

    gamma, beta and eps are values found by structure; `find_layer_norms` keeps a match only
    when the static analysis proves them constant (a frozen graph not yet folded computes
    them with Reshapes of Consts), and fills in the arrays."""

    out: Op
    x: Value
    eps: Value
    gamma: Optional[Value]
    beta: Optional[Value]
    ops: set = field(default_factory=set)  # every op of the pattern but `out`
    axes: tuple = ()                        # the two Means' reduction axes (must be x's last)
    epsilon: float = 0.0
    scale: Optional[np.ndarray] = None      # gamma as a vector of x's last dimension
    offset: Optional[np.ndarray] = None     # beta likewise


# -- matching ------------------------------------------------------------------------------------
def _keeps_dims(op: Op) -> bool:
    return bool(op.attr("keep_dims", False))


def _spellings() -> tuple[OpPattern, ...]:
    """The pattern once per spelling: with or without gamma, with or without StopGradient on the
    mean, and the shift as -mean * s, -mean * s + beta or beta - mean * s.  Names bound twice
    (x, mean, s) must be the same op or value each time."""
    node = pattern.op
    x = any_value("x")
    mean = node("Mean", x, any_value(), name="mean", where=_keeps_dims)
    found = []
    for held, with_gamma, shift in product((True, False), (True, False), ("neg", "neg_beta", "sub")):
        centre = node("StopGradient", mean) if held else mean
        squared = node("SquaredDifference", x, centre, commutative=True)
        variance = node("Mean", squared, any_value(), name="variance", where=_keeps_dims)
        padded = node("Add|AddV2", variance, any_value("eps"), commutative=True)
        inverse = node("Rsqrt", padded, name=None if with_gamma else "s")
        s = node("Mul", inverse, any_value("gamma"), commutative=True, name="s") if with_gamma else inverse
        if shift == "sub":
            tail = node("Sub", any_value("beta"), node("Mul", mean, s, commutative=True))
        else:
            tail = node("Mul", node("Neg", mean), s, commutative=True)
            if shift == "neg_beta":
                tail = node("Add|AddV2", tail, any_value("beta"), commutative=True)
        found.append(node("Add|AddV2", node("Mul", x, s, commutative=True), tail, commutative=True))
    return tuple(found)


_SPELLINGS = _spellings()


def _match(out: Op, named: Collection[str]) -> Optional[LayerNorm]:
    """The layer norm `out` ends, when every op of it but `out` is read, awaited and named only
    inside it."""
    for spelling in _SPELLINGS:
        m = pattern.match(spelling, out)
        if m is None:
            continue
        ops = {covered for covered in m.ops if covered is not out}
        if used_outside(m) or any(covered.name in named or covered.control_deps for covered in ops):
            return None
        axes = (_kept_single_axis(m.op("mean")), _kept_single_axis(m.op("variance")))
        if None in axes:
            return None
        gamma, beta = (m.value(name) if name in m else None for name in ("gamma", "beta"))
        return LayerNorm(out, m.value("x"), m.value("eps"), gamma, beta, ops, axes)
    return None


def _kept_single_axis(mean: Op) -> Optional[int]:
    """The one axis a Mean reduces, when its axes are one constant integer; else None."""
    axes = const_array(mean.operands[1])
    if axes is None or axes.size != 1 or axes.dtype.kind not in "iu":
        return None
    return int(axes.reshape(()))


def _vector(array: Optional[np.ndarray], width: int) -> Optional[np.ndarray]:
    """A constant broadcast along the last axis only, as a vector of `width` (None: unusable)."""
    if array is None:
        return None
    if array.size == 1:
        return np.full(width, array.reshape(()), array.dtype)
    if array.shape[-1:] != (width,) or array.size != width:
        return None
    return array.reshape(width)


def find_layer_norms(graph: Graph, named: Collection[str] = ()) -> list[LayerNorm]:
    """Every layer norm over its input's last axis; shapes and constants are analysed only when
    the pattern occurs."""
    if not any(op.type == "SquaredDifference" for op in graph):
        return []  # every spelling has one: a graph without it is not worth trying twelve patterns on
    candidates = []
    for op in graph:
        if op.type in _ADDS and op.results[0].dtype in _TYPES:
            found = _match(op, named)
            if found is not None:
                candidates.append(found)
    if not candidates:
        return []
    wanted = [v for m in candidates for v in (m.x, m.eps, m.gamma, m.beta) if v is not None]
    try:
        info = analyze(topological_order(graph, reachable_ops(wanted)))
    except IRError:  # a cycle (TF1 loop): leave the layer norms as they are
        return []
    return [m for m in candidates if _resolved(m, info)]


def _resolved(match: LayerNorm, info: StaticInfo) -> bool:
    """The Means reduce x's last axis, of known width; eps, gamma and beta are constants that fit it."""
    dims = info.shape(match.x).dims
    if not dims or dims[-1] is None or dims[-1] > _WIDEST:
        return False
    if any(axis not in (-1, len(dims) - 1) for axis in match.axes):
        return False
    eps = info.constant(match.eps)
    if eps is None or eps.size != 1 or eps.dtype.kind != "f":
        return False
    match.epsilon = float(eps.reshape(()))
    width = dims[-1]
    match.scale = np.ones(width) if match.gamma is None else _vector(info.constant(match.gamma), width)
    match.offset = np.zeros(width) if match.beta is None else _vector(info.constant(match.beta), width)
    return match.scale is not None and match.offset is not None


# -- rewriting -------------------------------------------------------------------------------------
def rewrite_found(graph: Graph, found: list[LayerNorm], named: Collection[str] = ()) -> None:
    """Fuse the layer norms `find_layer_norms` found in `graph`, in place."""
    replaced: dict[Value, Value] = {}  # a layer norm's output, once fused, read by the next one
    for match in found:
        match.x = replaced.get(match.x, match.x)
        old = match.out.results[0]
        replaced[old] = _rewrite(graph, match, named)


def _rewrite(graph: Graph, match: LayerNorm, named: Collection[str]) -> Value:
    out, x = match.out, match.x
    dtype, name = out.results[0].dtype, out.name

    fused = graph.create_op(FUSED, graph.unique_name(f"{name}/layer_norm"),
                            [x, add_const(graph, f"{name}/scale", match.scale, dtype, out),
                             add_const(graph, f"{name}/offset", match.offset, dtype, out)],
                            attrs={"T": dtype, "epsilon": match.epsilon}, result_types=[(dtype, out.results[0].shape)],
                            device=out.device, before=out)
    out.results[0].replace_all_uses_with(fused.results[0])
    out.hand_control_users_to(fused)  # a NoOp waiting on the output now waits on the fused op
    graph.erase_op(out)
    erase_dead(graph, list(match.ops), set(named))
    graph.rename(fused, name)
    return fused.results[0]


# -- lowering --------------------------------------------------------------------------------------
@lowers(FUSED)
def _layer_norm(ctx: LoweringContext, op: Op) -> None:
    """LayerNormalization over the last axis (opset 17+); below that, its decomposition."""
    x = ctx.operand(op, 0)
    scale, offset = ctx.operand(op, 1), ctx.operand(op, 2)
    epsilon = float(op.attr("epsilon", 0.001))
    if ctx.opset >= 17:
        ctx.bind(op.results[0], ctx.emit1(op, "LayerNormalization", [x, scale, offset], axis=-1, epsilon=epsilon))
        return
    mean = opset.reduce(ctx, op, "ReduceMean", x, [-1], True, suffix="mean")
    centred = ctx.helper1(op, "centred", "Sub", [x, mean])
    variance = opset.reduce(ctx, op, "ReduceMean", ctx.helper1(op, "squared", "Mul", [centred, centred]), [-1], True,
                            suffix="variance")
    eps = ctx.scalar(epsilon, ctx.dtype(op.results[0]), "epsilon")
    deviation = ctx.helper1(op, "deviation", "Sqrt", [ctx.helper1(op, "padded", "Add", [variance, eps])])
    normalized = ctx.helper1(op, "normalized", "Div", [centred, deviation])
    scaled = ctx.helper1(op, "scaled", "Mul", [normalized, scale])
    ctx.bind(op.results[0], ctx.emit1(op, "Add", [scaled, offset]))
