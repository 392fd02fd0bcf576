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
from compiler.ir.tensor import Tensor
from compiler.rewrite.constants import const_array
from compiler.rewrite.edit import erase_dead

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
def _operand_pairs(op: Op, *types: str) -> list[tuple[Value, Value]]:
    """(a, b) and (b, a) for a two-operand op of one of `types`; nothing otherwise."""
    if op.type not in types or len(op.operands) != 2:
        return []
    a, b = op.operands
    return [(a, b), (b, a)]


def _producer(value: Value, op_type: str) -> Optional[Op]:
    op = value.op
    return op if op.type == op_type and value.index == 0 else None


@dataclass(frozen=True)
class _Part:
    """A matched piece: its ops, and the values it found."""

    ops: frozenset
    value: Optional[Value] = None      # var (of the scale), the mean (of the shift)
    operand: Optional[Value] = None    # gamma (of the scale), beta (of the shift)
    eps: Optional[Value] = None
    axes: tuple = ()


def _match(out: Op) -> Optional[LayerNorm]:
    for scaled, shift in _operand_pairs(out, *_ADDS):
        mul = _producer(scaled, "Mul")
        for x, s in _operand_pairs(mul, "Mul") if mul is not None else []:
            scale = _scale(s)
            centre = None if scale is None else _shift(shift, s)
            stats = None if centre is None else _statistics(x, centre.value, scale.value)
            if stats is not None:
                ops = {mul} | scale.ops | centre.ops | stats.ops
                return LayerNorm(out, x, scale.eps, scale.operand, centre.operand, ops, stats.axes)
    return None


def _scale(s: Value) -> Optional[_Part]:
    """s = Rsqrt(var + eps) [* gamma]: the ops, var, gamma and eps."""
    rsqrt, gamma, ops = s, None, set()
    for inv, g in _operand_pairs(s.op, "Mul"):
        if _producer(inv, "Rsqrt") is not None:
            rsqrt, gamma, ops = inv, g, {s.op}
            break
    op = _producer(rsqrt, "Rsqrt")
    if op is None:
        return None
    for var, eps in _operand_pairs(op.operands[0].op, *_ADDS):
        if _producer(var, "Mean") is not None:
            return _Part(frozenset(ops | {op, op.operands[0].op}), var, gamma, eps)
    return None


def _shift(shift: Value, s: Value) -> Optional[_Part]:
    """-mean * s [+ beta], or beta - mean * s: the ops, the mean and beta."""
    op = shift.op
    if op.type == "Sub" and len(op.operands) == 2:
        found = _mean_times(op.operands[1], s, negated=False)
        return None if found is None else _Part(found.ops | {op}, found.value, op.operands[0])
    found = _mean_times(shift, s, negated=True)
    if found is not None:
        return found
    for product, beta in _operand_pairs(op, *_ADDS):
        found = _mean_times(product, s, negated=True)
        if found is not None:
            return _Part(found.ops | {op}, found.value, beta)
    return None


def _mean_times(product: Value, s: Value, negated: bool) -> Optional[_Part]:
    """`(-)mean * s`: the ops and the mean (a Mean's result)."""
    for m, other in _operand_pairs(product.op, "Mul"):
        neg = _producer(m, "Neg") if negated else None
        source = neg.operands[0] if neg is not None else m
        if other is s and (neg is not None or not negated) and _producer(source, "Mean") is not None:
            return _Part(frozenset({product.op} | ({neg} if neg is not None else set())), source)
    return None


def _statistics(x: Value, mean: Value, var: Value) -> Optional[_Part]:
    """mean = Mean(x, axis), var = Mean(SquaredDifference(x, [StopGradient] mean), axis), one axis each
    (whether it is x's last is for `find_layer_norms` to say, which knows shapes)."""
    var_op = _producer(var, "Mean")
    if var_op is None or mean.op.operands[0] is not x:
        return None
    axes = (_kept_single_axis(mean.op), _kept_single_axis(var_op))
    if None in axes:
        return None
    diff = var_op.operands[0].op
    for a, b in _operand_pairs(diff, "SquaredDifference"):
        held = _producer(b, "StopGradient")
        if a is x and (b is mean or (held is not None and held.operands[0] is mean)):
            return _Part(frozenset({mean.op, var_op, diff} | ({held} if held is not None else set())), axes=axes)
    return None


def _kept_single_axis(op: Op) -> Optional[int]:
    """The one axis a keep_dims Mean reduces, or None."""
    axes = const_array(op.operands[1]) if len(op.operands) == 2 else None
    if axes is None or axes.size != 1 or axes.dtype.kind not in "iu" or not bool(op.attr("keep_dims", False)):
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
    candidates = []
    for op in graph:
        if op.type in _ADDS and op.results[0].dtype in _TYPES:
            match = _match(op)
            if match is not None and _self_contained(match, named):
                candidates.append(match)
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


def _self_contained(match: LayerNorm, named: Collection[str]) -> bool:
    """Nothing outside the pattern reads its intermediates."""
    for op in match.ops:
        if op.name in named or op.control_users or op.control_deps:
            return False
        if any(user not in match.ops and user is not match.out for value in op.results for user, _ in value.uses):
            return False
    return True


def count_layer_norms(graph: Graph, named: Collection[str] = ()) -> int:
    return len(find_layer_norms(graph, named))


# -- rewriting -------------------------------------------------------------------------------------
def rewrite_all(graph: Graph, named: Collection[str] = ()) -> int:
    """Fuse every matched layer norm in `graph` in place; returns how many."""
    found = find_layer_norms(graph, named)
    replaced: dict[Value, Value] = {}  # a layer norm's output, once fused, read by the next one
    for match in found:
        match.x = replaced.get(match.x, match.x)
        old = match.out.results[0]
        replaced[old] = _rewrite(graph, match, named)
    return len(found)


def _rewrite(graph: Graph, match: LayerNorm, named: Collection[str]) -> Value:
    out, x = match.out, match.x
    dtype, name = out.results[0].dtype, out.name

    def vector(values: np.ndarray, role: str) -> Value:
        tensor = Tensor.from_numpy(values.astype(dtype.to_numpy()), dtype)
        return graph.create_op("Const", graph.unique_name(f"{name}/{role}"), attrs={"dtype": dtype, "value": tensor},
                               device=out.device, before=out).results[0]

    fused = graph.create_op(FUSED, graph.unique_name(f"{name}/layer_norm"),
                            [x, vector(match.scale, "scale"), vector(match.offset, "offset")],
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
