"""A Dense layer on a sequence or a feature map as one ONNX MatMul.

TF's MatMul takes matrices only, so a Keras Dense applied to x of shape
[..., K] (a transformer's projections and MLPs, ConvNeXt's pointwise layers)
freezes as `tf.tensordot`: Reshape x to [P, K], MatMul by the [K, N] weights,
Reshape back to [..., N], often with a BiasAdd between.  ONNX's MatMul
broadcasts a 2-D right operand over any leading axes, so the Reshapes are not
needed: the restoring Reshape is lowered as MatMul(x, W) (plus the bias's Add),
and the flattening Reshape and the Gemm the ops before it emitted are left
unread and pruned.  Every product is the same dot product over K, so the
numbers are the same; ConvNeXtTiny loses 72 Reshapes.

Only when the flattening Reshape keeps x's last axis and merges every leading
axis into one, the restoring one brings exactly those leading axes back, x is
stored in TF order, and no other op reads the values in between.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from compiler.backends.onnx.context import LoweringContext
from compiler.backends.onnx.fusion import sole_reader
from compiler.backends.onnx.ops_quantized import is_dequantized
from compiler.ir.attrs import attr_text
from compiler.ir.dtypes import DType
from compiler.ir.graph import Op, Value

_FLOATS = (DType.HALF, DType.FLOAT, DType.DOUBLE)
_ADDS = ("BiasAdd", "BiasAddV1", "Add", "AddV2")


@dataclass(frozen=True)
class Tensordot:
    """Reshape(x, [P, K]) -> MatMul(W) -> [+ bias] -> `restore`: x, W as [K, N], the bias."""

    x: Value
    weights: np.ndarray
    bias: Optional[np.ndarray]


def lower_tensordot(ctx: LoweringContext, restore: Op) -> bool:
    """Lower the Reshape `restore` as MatMul(x, W) [+ bias] when it ends a tensordot; True if done."""
    site = match_tensordot(ctx, restore)
    if site is None:
        return False
    dtype = ctx.dtype(restore.results[0])
    weights = ctx.initializer(site.weights.astype(dtype.to_numpy()), f"{restore.name}/weights")
    out = ctx.lowered(site.x).tensor
    if site.bias is None:
        out = ctx.emit1(restore, "MatMul", [out, weights])
    else:
        product = ctx.helper1(restore, "matmul", "MatMul", [out, weights])
        out = ctx.emit1(restore, "Add", [product, ctx.initializer(site.bias.astype(dtype.to_numpy()),
                                                                  f"{restore.name}/bias")])
    ctx.bind(restore.results[0], out)
    ctx.stats["tensordot_as_matmul"] += 1
    return True


def match_tensordot(ctx: LoweringContext, restore: Op) -> Optional[Tensordot]:
    inner, bias = _unbiased(ctx, restore.operands[0], restore)
    matmul = inner.op
    reader = restore if bias is None else restore.operands[0].op
    if matmul.type != "MatMul" or matmul.attr("transpose_a", False) or not _private(ctx, inner, reader):
        return None
    weights = ctx.constant(matmul.operands[1])
    if (weights is None or weights.ndim != 2 or ctx.dtype(inner) not in _FLOATS
            or matmul.operands[1].op.type != "Const"):  # not the Dequantize of an eight-bit graph's codes
        return None
    if matmul.attr("transpose_b", False):
        weights = weights.T
    if bias is not None and bias.shape != (weights.shape[1],):
        return None
    flat = matmul.operands[0]
    flatten = flat.op
    if flatten.type != "Reshape" or not _private(ctx, flat, matmul):
        return None
    x = flatten.operands[0]
    if (ctx.is_constant(x) or not ctx.is_bound(x) or ctx.lowered(x).perm is not None
            or is_dequantized(ctx, ctx.lowered(x).tensor)  # an eight-bit group stays as lowered
            or not _flattens_leading_axes(ctx, x, flat, weights.shape[0])
            or not _restores(ctx, x, restore.results[0], weights.shape[1])):
        return None
    return Tensordot(x, weights, bias)


def _unbiased(ctx: LoweringContext, value: Value, reader: Op) -> tuple[Value, Optional[np.ndarray]]:
    """(product, bias) when `value` is product + a constant vector read by `reader` alone, else (value, None)."""
    add = value.op
    if add.type not in _ADDS or len(add.operands) != 2 or not _private(ctx, value, reader):
        return value, None
    if attr_text(add.attr("data_format", "NHWC")).startswith("NC"):  # a channels-first BiasAdd adds on axis 1
        return value, None
    bias = ctx.constant(add.operands[1])
    if bias is None or bias.ndim != 1 or ctx.is_constant(add.operands[0]):
        return value, None
    return add.operands[0], bias


def _private(ctx: LoweringContext, value: Value, reader: Op) -> bool:
    return sole_reader(ctx, value, reader) and len(value.op.results) == 1 and not value.op.control_deps


def _flattens_leading_axes(ctx: LoweringContext, x: Value, flat: Value, depth: int) -> bool:
    """x is [d1, ..., dr, K] with r >= 2 and K the weights' depth, and `flat` is [d1 * ... * dr, K]."""
    dims, out = ctx.shape(x).dims, ctx.shape(flat).dims
    if dims is None or len(dims) < 3 or dims[-1] != depth or out is None or len(out) != 2 or out[1] != depth:
        return False
    leading = dims[:-1]
    return out[0] is None if None in leading else out[0] == int(np.prod(leading))


def _restores(ctx: LoweringContext, x: Value, restored: Value, columns: int) -> bool:
    """`restored` is [d1, ..., dr, N]: x's leading axes back, N the weights' columns."""
    dims, out = ctx.shape(x).dims, ctx.shape(restored).dims
    return out is not None and tuple(out) == tuple(dims[:-1]) + (columns,)
