"""Complete a QDQ model's Conv/Gemm groups so onnxruntime runs them exactly and fused.

A quantization-aware-trained TF graph fake-quantizes its weights; at -O2 that
FakeQuant (and the batch norm after the conv) folds into a float constant, so
the exported group is

    DequantizeLinear(x) -> Conv(float W) -> [Relu | Clip] -> QuantizeLinear

onnxruntime (1.20 and later, its WeightBiasQuantization step) requantizes such
a float weight to int8 *per tensor* when it loads the model.  That is lossy:
the folded weights lie on one grid per output channel, not one per tensor,
and a QAT CNN's logits came out one quantization step off TF.  And when a
Relu/Clip sits between the conv and the Q, onnxruntime cannot fuse the group:
the conv stays float, its weights dequantized on every run, and a depthwise
conv loses the blocked layout (53 us instead of 4 us at 336 channels).

Per group this module rewrites, both exactly:

- **weights**: a float constant whose every output-channel slice is `q * s`
  with integer |q| <= 127 (found per slice; every weight reconstructs within a
  few ulps) becomes an int8 initializer and a DequantizeLinear on that axis, the
  form every QDQ producer writes.  onnxruntime then takes those codes as they
  are.  Weights on no such grid stay float (counted: onnxruntime will
  requantize them).
- **activation**: a Relu/Clip the Q already clamps to is dropped; any other
  moves behind the Q as a Clip on the codes.  QuantizeLinear is monotone, so
  Q(clip(v, lo, hi)) == clip(Q(v), Q(lo), Q(hi)) for every v.

The result is still QDQ: one more node per rewritten weight, none for a moved
activation.  Only Conv groups are completed: on a QAT Dense model the same
rewrite of its Gemms cost three nodes and 25% more onnxruntime time, and the
float weights it left gave TF's numbers anyway.
"""
from __future__ import annotations

from collections import Counter
from typing import Optional

import numpy as np
import onnx
from onnx import helper

from compiler.backends.onnx.qoperator import (
    DEQUANTIZE, Context, Dq, QParams, activation_input, check_rewritten, clamped_by, clip_bounds, group_end,
    has_dequantize, quantize_codes, rebuild_graph,
)

# Largest code a rewritten weight uses: symmetric int8, as onnxruntime's own weight quantization.
MAX_CODE = 127
# A slice is on a grid when every weight is within this many code units of an integer...
GRID_TOLERANCE = 1e-3
# ...and the int8 codes times the scale give back every weight within this fraction of the slice's peak.
RECONSTRUCTION_TOLERANCE = 1e-6
# The float ops whose groups are completed (see the module docstring for why Gemm is not).
GROUP_OPS = ("Conv",)
# A Conv weight's output channels: [M, C/group, kernel...].
CONV_CHANNEL_AXIS = 0
# Ops onnxruntime propagates a DequantizeLinear forward through (its QDQPropagationTransformer).
DQ_PROPAGATING = frozenset({"MaxPool", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Slice"})
# Clip accepts eight-bit tensors from this default-domain opset on.
INTEGER_CLIP_OPSET = 12


def complete_qdq(model: onnx.ModelProto, check: bool = True) -> tuple[onnx.ModelProto, Counter[str]]:
    """`model` with its Conv QDQ groups completed (see the module docstring), and what changed.

    Counts: `int8_weights`, `float_weights_left`, `dropped_activation`, `activation_after_quantize`.
    The model is returned unchanged (the same object) when nothing matches.
    """
    if not has_dequantize(model):
        return model, Counter()
    result = onnx.ModelProto()
    result.CopyFrom(model)
    ctx = Context(result)
    counts: Counter[str] = Counter()
    replaced: dict[int, list[onnx.NodeProto]] = {}
    for index, node in enumerate(ctx.index.nodes):
        if node.op_type in GROUP_OPS and node.domain in ("", "ai.onnx"):
            _complete_group(ctx, index, replaced, counts)
    if not replaced:
        return model, counts
    nodes = [new for i, node in enumerate(ctx.index.nodes) for new in replaced.get(i, [node])]
    rebuild_graph(result.graph, nodes, ctx)
    if check:
        check_rewritten(result, "completed QDQ model")
    return result, counts


def _complete_group(ctx: Context, index: int, replaced: dict[int, list[onnx.NodeProto]],
                    counts: Counter[str]) -> None:
    """Rewrite one group in `replaced` (node index -> the nodes standing in its place)."""
    node = ctx.index.nodes[index]
    if _dequantized_input(ctx, node.input[0]) is None:
        return
    tail = group_end(ctx, index)
    if tail is None:
        return
    activation, q_index, out = tail
    weight = node.input[1]
    values = ctx.index.constant(weight)
    if values is not None and values.dtype == np.float32 and ctx.index.produced_by(weight, DEQUANTIZE) is None:
        grid = channel_grid(values, CONV_CHANNEL_AXIS)
        if grid is None:
            counts["float_weights_left"] += 1
        else:
            dq = _weight_dequantize(ctx, weight, CONV_CHANNEL_AXIS, *grid)
            rewired = onnx.NodeProto()
            rewired.CopyFrom(node)
            rewired.input[1] = dq.output[0]
            replaced[index] = [dq, rewired]
            counts["int8_weights"] += 1
    if activation is not None:
        _move_activation(ctx, activation, q_index, out, replaced, counts)


def _dequantized_input(ctx: Context, name: str) -> Optional[Dq]:
    """The per-tensor DequantizeLinear behind `name`: its output, or reached through ops onnxruntime
    moves Q/DQ pairs across when it loads the model (it first gives each reader of a DQ its own)."""
    dq = activation_input(ctx, name)
    while dq is None:
        producer = ctx.index.producer.get(name)
        node = None if producer is None else ctx.index.nodes[producer]
        if node is None or node.op_type not in DQ_PROPAGATING or node.domain not in ("", "ai.onnx"):
            return None
        name = node.input[0]
        dq = activation_input(ctx, name)
    return dq


def channel_grid(weights: np.ndarray, axis: int) -> Optional[tuple[np.ndarray, np.ndarray]]:
    """(float32 scale per slice along `axis`, int8 codes) with codes * scale == weights up to
    float rounding, or None when some slice lies on no grid of at most MAX_CODE steps."""
    rows = np.moveaxis(weights.astype(np.float64), axis, 0).reshape(weights.shape[axis], -1)
    peaks = np.abs(rows).max(axis=1) if rows.size else np.zeros(len(rows))
    if not np.all(np.isfinite(peaks)):
        return None
    steps = np.zeros(len(rows))
    pending = np.flatnonzero(peaks > 0)
    unit = rows[pending] / peaks[pending, None]
    for k in range(1, MAX_CODE + 1):  # the peak is k steps: the coarsest grid the slice lies on
        scaled = unit * k
        on_grid = np.abs(scaled - np.rint(scaled)).max(axis=1, initial=0.0) < GRID_TOLERANCE
        steps[pending[on_grid]] = k
        pending, unit = pending[~on_grid], unit[~on_grid]
        if not len(pending):
            break
    if len(pending):
        return None
    scale = np.where(steps > 0, peaks / np.maximum(steps, 1), 1.0).astype(np.float32)
    codes = np.rint(rows / scale[:, None].astype(np.float64))
    back = codes.astype(np.float32) * scale[:, None]
    if np.any(np.abs(back - rows) > RECONSTRUCTION_TOLERANCE * peaks[:, None]):
        return None
    shape = (weights.shape[axis],) + tuple(np.delete(weights.shape, axis))
    codes = np.moveaxis(codes.reshape(shape), 0, axis).astype(np.int8)
    return scale, codes


def _weight_dequantize(ctx: Context, weight: str, axis: int, scale: np.ndarray, codes: np.ndarray) -> onnx.NodeProto:
    """DequantizeLinear(int8 codes, per-channel scale, zero points 0) in place of float `weight`."""
    codes_name = ctx.add_constant(f"{weight}/int8", codes)
    scale_name = ctx.add_constant(f"{weight}/scale", scale)
    zero_name = ctx.add_constant(f"{weight}/zero_point", np.zeros(scale.shape, np.int8))
    out = ctx.fresh(f"{weight}/dequantized")
    return helper.make_node(DEQUANTIZE, [codes_name, scale_name, zero_name], [out], name=out, axis=axis)


def _move_activation(ctx: Context, activation: int, q_index: int, out: QParams,
                     replaced: dict[int, list[onnx.NodeProto]], counts: Counter[str]) -> None:
    """Drop a Relu/Clip the Q clamps to anyway, else clip the Q's codes instead of its input."""
    node = ctx.index.nodes[activation]
    q_node = onnx.NodeProto()
    q_node.CopyFrom(ctx.index.nodes[q_index])
    q_node.input[0] = node.input[0]
    if clamped_by(ctx, node, out):
        replaced[activation], replaced[q_index] = [], [q_node]
        counts["dropped_activation"] += 1
        return
    bounds = (0.0, np.inf) if node.op_type == "Relu" else clip_bounds(ctx, node)
    if bounds is None or ctx.opset < INTEGER_CLIP_OPSET:
        return
    dtype = helper.tensor_dtype_to_np_dtype(out.elem_type)
    low, high = (ctx.add_constant(f"{node.name}/{end}_code", np.array(code, dtype))
                 for end, code in zip(("low", "high"), quantize_codes(np.array(bounds, np.float32), out)))
    result = q_node.output[0]
    q_node.output[0] = ctx.fresh(f"{result}/unclipped")
    clip = helper.make_node("Clip", [q_node.output[0], low, high], [result], name=ctx.fresh(f"{node.name}/codes"))
    replaced[activation], replaced[q_index] = [], [q_node, clip]
    counts["activation_after_quantize"] += 1


__all__ = ["channel_grid", "complete_qdq"]
