"""Dense layers, einsums, biases, batch norms and softmax.

MatMul becomes Gemm so a following bias add can fold into it; BiasAdd
folds into the Conv or Gemm before it when nothing else reads that result;
batch norms become BatchNormalization on channels-first data (training mode with the
batch's own statistics).
"""
from __future__ import annotations

import re
from typing import Optional, Sequence

import numpy as np

from compiler.analysis.window import DataFormat, data_format
from compiler.backends.onnx import layout, opset
from compiler.backends.onnx.complex_pairs import COMPLEX_TYPES, einsum_complex
from compiler.backends.onnx.context import LoweringContext
from compiler.backends.onnx.dtypes import ort_computes
from compiler.backends.onnx.einsum_matmul import MatMulPlan, Operand, plan_matmul, unless_identity
from compiler.backends.onnx.errors import UnsupportedOpError
from compiler.backends.onnx.fusion import absorb_bias
from compiler.backends.onnx.ops_elementwise import emit_typed, type_name
from compiler.backends.onnx.registry import AGNOSTIC, CHANNELS_FIRST, lowers
from compiler.ir.attrs import attr_text
from compiler.ir.dtypes import DType
from compiler.ir.graph import Op
from compiler.limits import check_tensor_size


@lowers("BiasAdd", "BiasAddV1", layout=AGNOSTIC)
def _bias_add(ctx: LoweringContext, op: Op) -> None:
    x, bias = op.operands
    if absorb_bias(ctx, op, x, bias):
        return
    rank = ctx.rank(x)
    found = ctx.agnostic_operand(op)
    if rank is None:
        if found.perm is not None:
            raise UnsupportedOpError(op.type, op.name, "the input rank is unknown")
        ctx.bind(op.results[0], emit_typed(ctx, op, "Add", [found.tensor, ctx.value_in(bias)], ctx.dtype(x),
                                           wraps=True))
        return
    channel = 1 if data_format(op.attr("data_format")).name.startswith("NC") else rank - 1
    stored_channel = layout.physical_axis(channel, found.perm, rank)
    b = _channel_vector(ctx, op, stored_channel, rank)
    ctx.bind(op.results[0], emit_typed(ctx, op, "Add", [found.tensor, b], ctx.dtype(x), wraps=True), found.perm)


def _channel_vector(ctx: LoweringContext, op: Op, axis: int, rank: int) -> str:
    """The bias vector shaped to broadcast along stored axis `axis` of a rank-`rank` tensor."""
    shape = [1] * (rank - axis - 1)
    array = ctx.constant(op.operands[1])
    if array is not None:
        return ctx.initializer(array.reshape((-1,) + tuple(shape)), f"{op.operands[1].name}/axis{axis}")
    bias = ctx.value_in(op.operands[1])
    if not shape:
        return bias
    return ctx.helper1(op, "bias", "Reshape", [bias, ctx.ints([-1] + shape, f"{op.name}/bias_shape")])


@lowers("MatMul")
def _matmul(ctx: LoweringContext, op: Op) -> None:
    """Gemm, not MatMul: it transposes operands itself and takes the bias a BiasAdd may fold in.
    Gemm is float-only in onnxruntime: integers are a MatMul of the operands transposed as asked."""
    dtype = ctx.dtype(op.results[0])
    if not ort_computes("Gemm", dtype, ctx.opset):
        inputs = [_adjoint(ctx, op, i, bool(op.attr(flag, False))) for i, flag in ((0, "transpose_a"),
                                                                                   (1, "transpose_b"))]
        ctx.bind(op.results[0], emit_typed(ctx, op, "MatMul", inputs, dtype, wraps=True))
        return
    a, b = ctx.operand(op, 0), ctx.operand(op, 1)
    attrs = {k: 1 for k, flag in (("transA", "transpose_a"), ("transB", "transpose_b")) if op.attr(flag, False)}
    ctx.bind(op.results[0], ctx.emit1(op, "Gemm", [a, b], **attrs))


@lowers("BatchMatMul", "BatchMatMulV2", "BatchMatMulV3")
def _batch_matmul(ctx: LoweringContext, op: Op) -> None:
    inputs = [_adjoint(ctx, op, i, bool(op.attr(flag, False))) for i, flag in ((0, "adj_x"), (1, "adj_y"))]
    ctx.bind(op.results[0], emit_typed(ctx, op, "MatMul", inputs, ctx.dtype(op.operands[0]), wraps=True))


def _adjoint(ctx: LoweringContext, op: Op, index: int, flag: bool) -> str:
    """Operand `index`, with its two innermost axes swapped when `flag` (real types only)."""
    value = op.operands[index]
    if not flag:
        return ctx.value_in(value)
    rank = ctx.rank(value)
    if rank is None:
        raise UnsupportedOpError(op.type, op.name, "adjoint of an operand of unknown rank")
    return matmul_input(ctx, op, Operand(index, list(range(rank - 2)) + [rank - 1, rank - 2], None), (), "adjoint")


_EINSUM_TERM = re.compile(r"[a-zA-Z]*(\.\.\.)?[a-zA-Z]*")
_EINSUM_TYPES = (DType.HALF, DType.FLOAT, DType.DOUBLE, DType.INT32, DType.INT64)


@lowers("Einsum")
def _einsum(ctx: LoweringContext, op: Op) -> None:
    """ONNX Einsum reads TF's (numpy's) equation as it is: letters, one ellipsis per term,
    implicit or explicit output; operands in TF order."""
    equation = attr_text(op.attr("equation")).replace(" ", "")
    inputs, arrow, output = equation.partition("->")
    terms = inputs.split(",") + ([output] if arrow else [])
    if len(terms) - bool(arrow) != len(op.operands) or not all(_EINSUM_TERM.fullmatch(t) for t in terms):
        raise UnsupportedOpError(op.type, op.name, f"equation '{equation}' is not one ONNX Einsum accepts")
    dtype = ctx.dtype(op.results[0])
    if dtype in COMPLEX_TYPES:
        einsum_complex(ctx, op, terms if arrow else terms + [_implicit_output(terms)])
        return
    if dtype not in _EINSUM_TYPES:
        raise UnsupportedOpError(op.type, op.name, f"Einsum of {type_name(dtype)}")
    summed = _summed_axes(terms) if arrow and len(op.operands) == 2 else None
    plan = None
    if summed is not None:
        kept = _without(terms, summed)
        if _is_product(kept):
            _broadcast_product(ctx, op, kept, summed)
            return
        plan = _plan(ctx, op, kept, summed)
    if plan is None:
        ctx.bind(op.results[0], ctx.emit1(op, "Einsum", [ctx.value_in(v) for v in op.operands], equation=equation))
        return
    left, right = (matmul_input(ctx, op, side, summed[side.index]) for side in (plan.left, plan.right))
    if plan.product_shape is None and plan.out_perm is None:
        ctx.bind(op.results[0], ctx.emit1(op, "MatMul", [left, right]))
        return
    product = ctx.helper1(op, "matmul", "MatMul", [left, right])
    if plan.product_shape is not None:
        target = ctx.ints(plan.product_shape, f"{op.name}/product_shape")
        if plan.out_perm is None:
            ctx.bind(op.results[0], ctx.emit1(op, "Reshape", [product, target]))
            return
        product = ctx.helper1(op, "product", "Reshape", [product, target])
    ctx.bind(op.results[0], ctx.emit1(op, "Transpose", [product], perm=plan.out_perm))


def _implicit_output(terms: list[str]) -> str:
    """numpy's output for an equation without '->': the ellipsis, then the letters used once, sorted."""
    letters = "".join(terms).replace(".", "")
    once = sorted(c for c in set(letters) if letters.count(c) == 1)
    return ("..." if any("..." in t for t in terms) else "") + "".join(once)


def _is_product(terms: list[str]) -> bool:
    """Nothing contracted ("bi,bj->bij"): an elementwise product of the operands broadcast into the
    output's letters, which onnxruntime runs faster as Mul than as Einsum."""
    a, b, out = terms
    return set(a) | set(b) == set(out) and len(set(out)) == len(out)


def _broadcast_product(ctx: LoweringContext, op: Op, terms: list[str], summed: list[list[int]]) -> None:
    """Each operand's letters moved into output order and the missing ones added as 1s (except
    leading ones: Mul broadcasts from the right), then a Mul."""
    out = terms[2]
    factors = []
    for index, letters in enumerate(terms[:2]):
        order = [c for c in out if c in letters]
        moved = matmul_input(ctx, op, Operand(index, unless_identity([letters.index(c) for c in order]), None),
                             summed[index])
        first = min(out.index(c) for c in letters) if letters else len(out)
        missing = [at - first for at, c in enumerate(out) if c not in letters and at > first]
        if missing:
            moved = ctx.helper1(op, f"spread{index}", "Unsqueeze", [moved, ctx.ints(missing, f"{op.name}/spread{index}")])
        factors.append(moved)
    ctx.bind(op.results[0], ctx.emit1(op, "Mul", factors))


def _plan(ctx: LoweringContext, op: Op, kept: list[str], summed: list[list[int]]) -> Optional[MatMulPlan]:
    """The MatMul plan of a two-operand einsum whose `summed` axes are gone (leaving `kept`), or None."""
    dims = []
    for value, axes in zip(op.operands, summed):
        found = ctx.shape(value).dims
        if found is None:
            return None
        dims.append([d for i, d in enumerate(found) if i not in axes])
    return plan_matmul(kept, dims, [ctx.constant(v) is not None for v in op.operands])


def _summed_axes(terms: list[str]) -> Optional[list[list[int]]]:
    """Per operand, the axes of letters in neither the other operand nor the output: they are
    summed away before the product (EinsumDense's "abcd,de->abe").  None for an ellipsis."""
    a, b, out = terms
    if "." in a + b + out or any(len(set(t)) != len(t) for t in terms):
        return None  # (a letter twice in a term takes a diagonal, not a sum)
    return [[i for i, c in enumerate(term) if c not in other and c not in out] for term, other in ((a, b), (b, a))]


def _without(terms: list[str], summed: list[list[int]]) -> list[str]:
    """The einsum once `summed` axes are gone."""
    kept = [("".join(c for i, c in enumerate(term) if i not in axes)) for term, axes in zip(terms, summed)]
    return kept + [terms[2]]


def matmul_input(ctx: LoweringContext, op: Op, side: Operand, summed: Sequence[int], suffix: str = "moved") -> str:
    """Operand `side.index` summed over the axes `summed`, transposed and reshaped as `side` says:
    a constant one as an initializer so computed (`<operand>/<suffix>`), else ReduceSum, Transpose
    and Reshape nodes (`<op>/summed<index>`, `<suffix><index>`, `flat<index>`)."""
    value, index = op.operands[side.index], side.index
    array = ctx.constant(value)
    if array is not None and (summed or side.perm is not None or side.shape is not None):
        if summed:
            array = array.sum(axis=tuple(summed), dtype=np.float64).astype(array.dtype)
        if side.perm is not None:
            array = np.transpose(array, side.perm)
        if side.shape is not None:
            array = array.reshape([array.shape[i] if d == 0 else d for i, d in enumerate(side.shape)])
        return ctx.initializer(np.ascontiguousarray(array), f"{value.name}/{suffix}")
    tensor = ctx.value_in(value)
    if summed:
        tensor = opset.reduce(ctx, op, "ReduceSum", tensor, summed, False, suffix=f"summed{index}")
    if side.perm is not None:
        tensor = ctx.helper1(op, f"{suffix}{index}", "Transpose", [tensor], perm=side.perm)
    if side.shape is not None:
        tensor = ctx.helper1(op, f"flat{index}", "Reshape", [tensor, ctx.ints(side.shape, f"{op.name}/flat{index}")])
    return tensor


# -- batch norms ---------------------------------------------------------------------
@lowers("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3", layout=CHANNELS_FIRST)
def _fused_batch_norm(ctx: LoweringContext, op: Op) -> None:
    if _read(ctx, op, 5):
        raise UnsupportedOpError(op.type, op.name, "reserve_space_3 is read")
    fmt = data_format(op.attr("data_format"))
    perm = layout.channels_first(ctx.rank(op.operands[0]) or 4) if fmt.channels_last else None
    x = ctx.operand(op, 0, perm)
    if op.attr("is_training", True):
        _training_batch_norm(ctx, op, x, perm, fmt)
        return
    stats = [ctx.operand(op, i) for i in (1, 2, 3, 4)]
    out = ctx.emit1(op, "BatchNormalization", [x] + stats, epsilon=float(op.attr("epsilon", 1e-4)))
    ctx.bind(op.results[0], out, perm)
    _bind_statistics(ctx, op)


def _training_batch_norm(ctx: LoweringContext, op: Op, x: str, perm: layout.Perm, fmt: DataFormat) -> None:
    """Training mode normalises by the batch's own mean and (biased) variance, over every axis
    but the channels: a TF1 layer's `training` branch, which an ONNX If must hold even when the
    model runs in inference.  The statistics outputs are TF's: the Bessel-corrected variance,
    both blended into the moving ones by exponential_avg_factor."""
    rank = ctx.rank(op.operands[0])
    if rank is None:
        raise UnsupportedOpError(op.type, op.name, "training-mode batch norm needs the input rank")
    axes = [0] + list(range(2, rank))
    kept = opset.reduce(ctx, op, "ReduceMean", x, axes, True, suffix="batch_mean")
    centered = ctx.helper1(op, "centered", "Sub", [x, kept])
    squares = ctx.helper1(op, "squares", "Mul", [centered, centered])
    variance = opset.reduce(ctx, op, "ReduceMean", squares, axes, False, suffix="batch_variance")
    mean = ctx.helper1(op, "mean", "Reshape", [kept, ctx.ints([-1], f"{op.name}/channels")])
    inputs = [x, ctx.operand(op, 1), ctx.operand(op, 2), mean, variance]
    out = ctx.emit1(op, "BatchNormalization", inputs, epsilon=float(op.attr("epsilon", 1e-4)))
    ctx.bind(op.results[0], out, perm)
    wanted = [index for index in (1, 2) if _read(ctx, op, index)]
    for index, value in ((3, mean), (4, variance)):
        if _read(ctx, op, index):
            ctx.bind(op.results[index], value)
    if wanted:
        _training_statistics(ctx, op, mean, variance, wanted, fmt)


def _read(ctx: LoweringContext, op: Op, index: int) -> bool:
    """Result `index` exists and an op or the graph's outputs read it."""
    return index < len(op.results) and ctx.is_read(op.results[index])


def _training_statistics(ctx: LoweringContext, op: Op, mean: str, variance: str, wanted: list[int],
                         fmt: DataFormat) -> None:
    """batch_mean and batch_variance as TF reports them in training: the variance scaled by
    n / (n - 1), then each blended as (1 - f) * moving + f * batch."""
    dims = ctx.shape(op.operands[0]).dims
    counted = None if dims is None else [d for i, d in enumerate(dims) if i != fmt.channel_axis(len(dims))]
    if counted is None or None in counted:
        raise UnsupportedOpError(op.type, op.name, "training-mode batch statistics need a known input shape")
    count = int(np.prod(counted))
    stat_type = ctx.dtype(op.operands[1])
    bessel = ctx.scalar(count / max(count - 1, 1), stat_type, f"{op.name}/bessel")
    stats = {1: mean, 2: ctx.helper1(op, "unbiased", "Mul", [variance, bessel])}
    factor = float(op.attr("exponential_avg_factor", 1.0))
    if factor != 1.0:
        keep = ctx.scalar(1.0 - factor, stat_type, f"{op.name}/keep")
        blend = ctx.scalar(factor, stat_type, f"{op.name}/factor")
    for index in wanted:
        value = stats[index]
        if factor != 1.0:
            moving = ctx.helper1(op, f"moving{index}", "Mul", [ctx.operand(op, index + 2), keep])
            batch = ctx.helper1(op, f"batch{index}", "Mul", [value, blend])
            value = ctx.helper1(op, f"blended{index}", "Add", [moving, batch])
        ctx.bind(op.results[index], value)


def _bind_statistics(ctx: LoweringContext, op: Op) -> None:
    """In inference TF passes the moving mean and variance through as batch statistics."""
    for index, source in ((1, 3), (2, 4), (3, 3), (4, 4)):
        if _read(ctx, op, index):
            ctx.bind(op.results[index], ctx.operand(op, source))


@lowers("BatchNormWithGlobalNormalization", layout=CHANNELS_FIRST)
def _global_batch_norm(ctx: LoweringContext, op: Op) -> None:
    """Inputs t, mean, variance, beta, gamma; gamma is ignored unless scale_after_normalization."""
    t, mean, variance, beta, gamma = op.operands
    rank = ctx.rank(t)
    if rank is not None and rank != 4:
        raise UnsupportedOpError(op.type, op.name, f"input 't' has rank {rank}, the op takes 4-D input")
    perm = layout.channels_first(4)
    if op.attr("scale_after_normalization", False):
        scale = ctx.value_in(gamma)
    else:
        channels = ctx.shape(beta).dims
        if channels is None or channels[0] is None:
            raise UnsupportedOpError(op.type, op.name, "needs a known channel count")
        check_tensor_size([channels[0]], 8, "a batch norm's unit scale")
        scale = ctx.initializer(np.ones(channels[0], ctx.dtype(t).to_numpy()), f"{op.name}/unit_scale")
    inputs = [ctx.value_in(t, perm), scale, ctx.value_in(beta), ctx.value_in(mean), ctx.value_in(variance)]
    out = ctx.emit1(op, "BatchNormalization", inputs, epsilon=float(op.attr("variance_epsilon", 1e-3)))
    ctx.bind(op.results[0], out, perm)


# -- softmax -------------------------------------------------------------------------
@lowers("Softmax", "LogSoftmax", layout=AGNOSTIC)
def _softmax(ctx: LoweringContext, op: Op) -> None:
    """Over TF's last axis, wherever the layout stores it."""
    found = ctx.agnostic_operand(op)
    rank = ctx.rank(op.operands[0])
    axis = -1 if rank is None or found.perm is None else layout.physical_axis(-1, found.perm, rank)
    ctx.bind(op.results[0], ctx.emit1(op, op.type, [found.tensor], axis=axis), found.perm)
