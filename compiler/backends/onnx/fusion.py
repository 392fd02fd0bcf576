"""Emission-time peepholes: a TF op folding into an ONNX node that already exists.

ONNX's Conv takes a bias and explicit zero padding, Gemm takes an addend,
Concat takes any number of inputs; TF spells these as separate
BiasAdd/Add and Pad ops and nests ConcatV2s.  Lowerings ask here
whether the op they are lowering can ride on its producer's node instead
of becoming a node of its own.  Both rewrites need the intermediate value to
have no other reader, and never touch a value the caller must see (a graph
output).
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from compiler.backends.onnx import layout
from compiler.backends.onnx.builder import Node
from compiler.backends.onnx.context import LoweringContext
from compiler.ir.graph import Op, Value

_ZERO_PAD_OPS = ("Pad", "PadV2")


def single_use(ctx: LoweringContext, value: Value, user: Op) -> bool:
    """Whether `user` is the only reader of `value` (and the caller never sees it)."""
    return len(value.uses) == 1 and value.uses[0][0] is user and value not in ctx.keep


def sole_reader(ctx: LoweringContext, value: Value, user: Op) -> bool:
    """`single_use`, and no op waits on `value`'s op: a peephole may read past it."""
    return single_use(ctx, value, user) and not value.op.control_users


_BIASED = ("Conv", "ConvTranspose", "Gemm")
_ADDS = ("Add", "AddV2", "BiasAdd", "BiasAddV1")


def absorb_bias(ctx: LoweringContext, op: Op, x: Value, bias: Value) -> bool:
    """Fold `op` (x + constant bias) into the Conv, ConvTranspose or Gemm computing x, or into
    the Gemm under x = gemm + s; True when done."""
    array = ctx.constant(bias)
    if array is None or not _private_result(ctx, x, op):
        return False
    node = _node_making(ctx, x)
    if node is not None and node.op_type in _BIASED:
        return _into_node(ctx, op, node, x, array)
    return _across_add(ctx, op, x, node, array)


def _private_result(ctx: LoweringContext, x: Value, op: Op) -> bool:
    """x is computed (not constant), already lowered, and read by `op` alone."""
    return not ctx.is_constant(x) and ctx.is_bound(x) and single_use(ctx, x, op)


def _node_making(ctx: LoweringContext, x: Value) -> Optional[Node]:
    """The ONNX node whose first output is x's lowered tensor, if any."""
    tensor = ctx.lowered(x).tensor
    node = ctx.builder.producer(tensor)
    return node if node is not None and node.outputs[0] == tensor else None


def _across_add(ctx: LoweringContext, op: Op, x: Value, add: Optional[Node], array: np.ndarray) -> bool:
    """(a @ w + s) + bias as (a @ w + bias) + s, the bias riding on the float Gemm (as tf2onnx
    does for Keras' unrolled recurrent cells); `add` is the node making x.  This reorders one
    float addition: the sum may differ from TF's in its last bit."""
    if add is None or add.op_type != "Add" or x.op.type not in _ADDS:
        return False
    for source in x.op.operands:
        if not _private_result(ctx, source, x.op):
            continue
        gemm = _node_making(ctx, source)
        if gemm is None or gemm.op_type != "Gemm" or gemm.outputs[0] not in add.inputs:
            continue
        if _eight_bit_bias_scale(ctx, gemm) is not None:
            return False
        addend = _bias_vector(ctx, "Gemm", array, source, ctx.lowered(source).perm)
        if addend is None:
            return False
        _add_to_bias_input(ctx, gemm, addend, array.dtype, op.name)
        ctx.bind(op.results[0], add.outputs[0], ctx.lowered(x).perm)
        ctx.stats["bias_into_gemm_across_add"] += 1
        return True
    return False


def _add_to_bias_input(ctx: LoweringContext, node: Node, addend: np.ndarray, dtype: np.dtype, name: str) -> None:
    """Set the node's bias input to addend plus the bias it already has."""
    if len(node.inputs) > 2:
        addend = ctx.scope.initializers[node.inputs[2]] + addend
    node.inputs[2:] = [ctx.initializer(addend.astype(dtype), f"{name}/bias")]


def _into_node(ctx: LoweringContext, op: Op, node: Node, x: Value, array: np.ndarray) -> bool:
    lowered = ctx.lowered(x)
    addend = _bias_vector(ctx, node.op_type, array, x, lowered.perm)
    if addend is None:
        return False
    scale = _eight_bit_bias_scale(ctx, node)
    if scale is not None:
        if len(node.inputs) > 2:
            return False
        bias = _int32_bias(ctx, addend, scale, f"{op.name}/bias")
        ctx.builder.move_before(ctx.builder.producer(bias), node)  # type: ignore[arg-type]
        node.inputs[2:] = [bias]
        ctx.bind(op.results[0], lowered.tensor, lowered.perm)
        ctx.stats[f"int32_bias_into_{node.op_type.lower()}"] += 1
        return True
    _add_to_bias_input(ctx, node, addend, array.dtype, op.name)
    ctx.bind(op.results[0], lowered.tensor, lowered.perm)
    ctx.stats[f"bias_into_{node.op_type.lower()}"] += 1
    return True


def _eight_bit_bias_scale(ctx: LoweringContext, node: Node) -> Optional[np.float32]:
    """x_scale * w_scale when both operands of `node` are DequantizeLinear outputs with constant scales.

    onnxruntime fuses such a node into QLinearConv / QGemm only if its bias is
    the DequantizeLinear of int32 codes on exactly that scale.
    """
    scales = []
    for tensor in node.inputs[:2]:
        producer = ctx.builder.producer(tensor)
        if producer is None or producer.op_type != "DequantizeLinear":
            return None
        scale = ctx.scope.initializers.get(producer.inputs[1])
        if scale is None or np.size(scale) != 1:
            return None
        scales.append(np.float32(np.asarray(scale).reshape(())))
    return np.float32(scales[0] * scales[1])


def _int32_bias(ctx: LoweringContext, bias: np.ndarray, scale: np.float32, base: str) -> str:
    """DequantizeLinear(round(bias / scale) as int32, scale): the bias within half a product step."""
    limits = np.iinfo(np.int32)
    codes = np.clip(np.rint(bias.astype(np.float64) / float(scale)), limits.min, limits.max).astype(np.int32)
    inputs = [ctx.initializer(codes, f"{base}_int32"), ctx.initializer(scale, f"{base}_scale")]
    return ctx.node("DequantizeLinear", inputs, f"{ctx.prefix}{base}/dequantize")[0]


def _bias_vector(ctx: LoweringContext, op_type: str, array: np.ndarray, x: Value, perm: layout.Perm
                 ) -> Optional[np.ndarray]:
    """The bias as the node's bias input, or None if it is not per output channel."""
    rank = ctx.rank(x)
    dims = ctx.shape(x).dims
    if rank is None or array.ndim > rank or dims is None:
        return None
    full = array.reshape((1,) * (rank - array.ndim) + array.shape)
    if op_type == "Gemm":
        fits = all(c == 1 or d is None or c == d for c, d in zip(full.shape, dims))
        return full if fits else None
    stored = layout.to_physical(full, perm)
    if any(d != 1 for i, d in enumerate(stored.shape) if i != 1):
        return None
    channels = dims[layout.full(perm, rank)[1]]
    if channels is None:
        return None
    return np.broadcast_to(stored.reshape(-1), (channels,)).copy()


def zero_pad_source(ctx: LoweringContext, conv: Op, x: Value, spatial_axes: tuple[int, ...], rank: int = 4
                    ) -> Optional[tuple[Value, list[tuple[int, int]]]]:
    """If `x` is a zero Pad of only spatial axes of a rank-`rank` tensor, read only by `conv` or
    only by convolutions that fold it too: its input and the pads. A chain of such Pads (Keras'
    ZeroPadding2D before a layer's own pad, as in keras-hub's HGNetV2) is read through, the
    amounts added up."""
    pad = x.op
    if pad.type not in _ZERO_PAD_OPS or ctx.is_constant(x):
        return None
    if not single_use(ctx, x, conv) and not _read_by_pad_folding_convs(ctx, x, conv):
        return None
    amounts = ctx.constant(pad.operands[1])
    if amounts is None or amounts.shape != (rank, 2) or (amounts < 0).any():
        return None
    if pad.type == "PadV2":
        fill = ctx.constant(pad.operands[2])
        if fill is None or fill.size != 1 or float(fill.reshape(())) != 0.0:
            return None
    if any(amounts[a].any() for a in range(rank) if a not in spatial_axes):
        return None
    inner, pads = pad.operands[0], [(int(amounts[a][0]), int(amounts[a][1])) for a in spatial_axes]
    further = zero_pad_source(ctx, pad, inner, spatial_axes, rank)
    return (inner, pads) if further is None else (further[0], _added(pads, further[1]))


# Ops whose lowerings fold a zero Pad of their input into their own pads (fold_zero_pad).
_PAD_FOLDING = frozenset(("Conv2D", "DepthwiseConv2dNative", "Conv3D"))


def _read_by_pad_folding_convs(ctx: LoweringContext, x: Value, conv: Op) -> bool:
    """Whether `conv` and every other reader of `x` are convolutions taking it as their input, so
    each folds the Pad and no Pad node is left (keras-cv YOLOv8's box and class heads and the next
    downsampling conv read one padded map). A reader that cannot fold it reads the Pad node."""
    return (conv.type in _PAD_FOLDING and x not in ctx.keep
            and all(user.type in _PAD_FOLDING and index == 0 for user, index in x.uses))


def _added(pads: list[tuple[int, int]], extra: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Two paddings of the same axes, one after the other, as one."""
    return [(b + eb, a + ea) for (b, a), (eb, ea) in zip(pads, extra)]


def fold_zero_pad(ctx: LoweringContext, conv: Op, x: Value, spatial_axes: tuple[int, ...],
                  pads: Optional[list[tuple[int, int]]], rank: int = 4
                  ) -> tuple[Value, Optional[list[tuple[int, int]]]]:
    """`x` and the conv's `pads`, or, when the padding is known and `x` is a zero Pad `conv` alone
    reads (`zero_pad_source`), the Pad's input and the pads grown by the Pad's."""
    source = zero_pad_source(ctx, conv, x, spatial_axes, rank) if pads is not None else None
    if source is None:
        return x, pads
    inner, extra = source
    ctx.stats["pad_into_conv"] += 1
    return inner, _added(pads, extra)  # type: ignore[arg-type]


def flatten_concat(ctx: LoweringContext, op: Op, values: Sequence[Value], tensors: Sequence[str], axis: int
                   ) -> list[str]:
    """Concat inputs with any inner Concat along the same stored axis spliced in (Inception's
    concat-of-concats is one node)."""
    flat: list[str] = []
    for value, tensor in zip(values, tensors):
        inner = ctx.builder.producer(tensor)
        if (inner is not None and inner.op_type == "Concat" and inner.attrs.get("axis") == axis
                and not ctx.is_constant(value) and single_use(ctx, value, op)):
            flat.extend(inner.inputs)
            ctx.stats["concat_merged"] += 1
        else:
            flat.append(tensor)
    return flat
