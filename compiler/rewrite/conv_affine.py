"""Per-channel affine maps after convolutions and matmuls, folded into the weights.

Batch normalization at inference is `y = x * scale + shift` per output
channel, whether it is spelled as Mul/Add/Sub/BiasAdd arithmetic on
constants (Keras 3, TF's `tf.nn.batch_normalization`) or as one
FusedBatchNorm / BatchNormWithGlobalNormalization op.  After a Conv2D,
DepthwiseConv2dNative or MatMul with constant weights, any chain of such
steps composes into one affine map: the scale goes into the weights and the
shift becomes a single BiasAdd.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from compiler.ir.attrs import attr_text
from compiler.ir.dtypes import DType
from compiler.ir.graph import Graph, Op, Value
from compiler.ir.tensor import Tensor
from compiler.limits import check_tensor_size
from compiler.rewrite.constants import const_array, const_op, is_exclusive
from compiler.rewrite.edit import erase_dead, inherit_control_deps, take_over
from compiler.runtime.op_eval import FORWARDING_OPS

CONV_TYPES = frozenset({"Conv2D", "DepthwiseConv2dNative", "MatMul"})
FUSED_CONV_TYPES = frozenset({"FusedPadConv2D", "FusedResizeAndPadConv2D"})
BN_TYPES = frozenset({"FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3", "BatchNormWithGlobalNormalization"})
BIAS_TYPES = frozenset({"BiasAdd", "BiasAddV1"})
ARITH_TYPES = frozenset({"Mul", "Add", "AddV2", "Sub", "RealDiv"}) | BIAS_TYPES
FLOAT_TYPES = frozenset({DType.FLOAT, DType.HALF, DType.DOUBLE, DType.BFLOAT16})


@dataclass(frozen=True)
class Layout:
    """Where channels sit in the conv's output: a negative axis, and the output rank."""

    channel_axis: int
    rank: int


@dataclass
class ConvSite:
    """A conv/matmul whose weights are a Const: what folding needs to know about it."""

    conv: Op
    weights: Op
    layout: Layout
    channels: int


@dataclass
class Step:
    """One op of a chain and its own per-channel map `x * scale + shift` (float64)."""

    op: Op
    scale: np.ndarray
    shift: np.ndarray
    negate: bool = False  # `c - x`: the incoming value is negated before `shift` is added

    @property
    def is_bn(self) -> bool:
        return self.op.type in BN_TYPES


def conv_layout(op: Op) -> Layout:
    if op.type == "MatMul":
        return Layout(-1, 2)
    return Layout(-3, 4) if attr_text(op.attr("data_format", "NHWC")) == "NCHW" else Layout(-1, 4)


def conv_site(op: Op) -> Optional[ConvSite]:
    """The site if `op` is a conv/matmul over float Const weights (possibly read through Identity)."""
    if op.type not in CONV_TYPES or len(op.operands) != 2:
        return None
    weights = const_op(op.operands[1])
    if weights is None or op.attr("T") not in FLOAT_TYPES:
        return None
    tensor = weights.attrs["value"] if "value" in weights.attrs else None
    if tensor is None or tensor.dtype not in FLOAT_TYPES or not tensor.is_decodable:
        return None
    channels = _weight_channels(op, tensor.shape)
    return None if channels is None else ConvSite(op, weights, conv_layout(op), channels)


def _weight_channels(op: Op, shape: tuple[int, ...]) -> Optional[int]:
    if op.type == "MatMul":
        if len(shape) != 2:
            return None
        return shape[0] if op.attr("transpose_b", False) else shape[1]
    if len(shape) != 4:
        return None
    return shape[2] * shape[3] if op.type == "DepthwiseConv2dNative" else shape[3]


# -- recognising steps ------------------------------------------------------------
def per_channel(arr: np.ndarray, channels: Optional[int], layout: Layout) -> Optional[np.ndarray]:
    """`arr` as a [channels] float64 vector if broadcasting it on the output acts per channel."""
    if arr.dtype.kind not in "fiu" and not (arr.dtype.kind == "V" and "float" in arr.dtype.name):
        return None
    if arr.ndim > layout.rank:
        return None
    if arr.size == 1:
        return None if channels is None else np.full(channels, float(arr.reshape(-1)[0]))
    if channels is not None and arr.size != channels:
        return None
    axis = arr.ndim + layout.channel_axis
    if axis < 0 or any(d != 1 for i, d in enumerate(arr.shape) if i != axis):
        return None
    return arr.reshape(-1).astype(np.float64)


def affine_step(op: Op, x: Value, channels: Optional[int], layout: Layout, allow_bn: bool) -> Optional[Step]:
    """The step if `op` applies a per-channel affine map to `x` (its other operands constant)."""
    if op.type in ARITH_TYPES:
        return _arith_step(op, x, channels, layout)
    if allow_bn and op.type in BN_TYPES:
        return _bn_step(op, x, channels, layout)
    return None


def _arith_step(op: Op, x: Value, channels: Optional[int], layout: Layout) -> Optional[Step]:
    if len(op.operands) != 2:
        return None
    a, b = op.operands
    x_first = a is x
    other = b if x_first else a
    if other is x or (not x_first and b is not x):
        return None
    if op.type in BIAS_TYPES and (not x_first or _bias_axis(op, layout.rank) != layout.channel_axis):
        return None
    arr = const_array(other)
    vec = None if arr is None else per_channel(arr, channels, layout)
    if vec is None:
        return None
    n = vec.size
    if op.type == "Mul":
        return Step(op, vec, np.zeros(n))
    if op.type == "RealDiv":
        if not x_first or not np.all(vec != 0):
            return None
        return Step(op, 1.0 / vec, np.zeros(n))
    if op.type == "Sub":
        return Step(op, np.ones(n), -vec) if x_first else Step(op, np.ones(n), vec, negate=True)
    return Step(op, np.ones(n), vec)


def _bias_axis(op: Op, rank: int) -> int:
    if op.type == "BiasAddV1" or attr_text(op.attr("data_format", "NHWC")) != "NCHW":
        return -1
    return -3 if rank == 4 else -1


def _bn_step(op: Op, x: Value, channels: Optional[int], layout: Layout) -> Optional[Step]:
    if not op.operands or op.operands[0] is not x or layout.rank != 4:
        return None
    if any(v.uses for v in op.results[1:]):
        return None
    if op.type == "BatchNormWithGlobalNormalization":
        if layout.channel_axis != -1 or len(op.operands) != 5:
            return None
        _, mean, var, beta, gamma = op.operands
        eps, after = op.attr("variance_epsilon", 0.0), bool(op.attr("scale_after_normalization", True))
    else:
        fmt = -3 if attr_text(op.attr("data_format", "NHWC")) == "NCHW" else -1
        if op.attr("is_training", True) or fmt != layout.channel_axis or len(op.operands) != 5:
            return None
        _, gamma, beta, mean, var = op.operands
        eps, after = op.attr("epsilon", 1e-4), True
    arrays = [const_array(v) for v in (mean, var, beta, gamma)]
    if any(a is None or a.ndim != 1 for a in arrays):
        return None
    mean_a, var_a, beta_a, gamma_a = arrays
    n = mean_a.size
    if any(a.size != n for a in arrays) or (channels is not None and n != channels):
        return None
    scale, shift = bn_scale_shift(mean_a, var_a, beta_a, gamma_a, float(eps), after)
    return Step(op, scale, shift)


def bn_scale_shift(mean: np.ndarray, var: np.ndarray, beta: np.ndarray, gamma: np.ndarray,
                   eps: float, scale_after_normalization: bool) -> tuple[np.ndarray, np.ndarray]:
    """GTT's formula in the statistics' own precision: scale = gamma / sqrt(var + eps), shift = beta - mean * scale."""
    dt = var.dtype if var.dtype.kind == "f" else np.dtype(np.float32)
    one, eps_t = dt.type(1), dt.type(eps)
    scale = one / np.sqrt(var.astype(dt) + eps_t)
    if scale_after_normalization:
        scale = scale * gamma.astype(dt)
    shift = (-mean.astype(dt) * scale) + beta.astype(dt)
    return scale.astype(np.float64), shift.astype(np.float64)


# -- chains ------------------------------------------------------------------------
def follow_chain(conv: Op, channels: Optional[int], layout: Layout, allow_bn: bool,
                 protected: set[str]) -> list[Step]:
    """The longest run of single-use affine steps after `conv` whose intermediate values are not graph outputs."""
    steps: list[Step] = []
    value = chain_start(conv, layout, protected)
    conv_type = conv.attr("T")
    while len(value.uses) == 1 and value.op.name not in protected:
        user = value.uses[0][0]
        step = affine_step(user, value, channels, layout, allow_bn)
        if step is None or user.attr("T", conv_type) != conv_type:
            break
        steps.append(step)
        value = user.results[0]
    return steps


def chain_start(conv: Op, layout: Layout, protected: set[str]) -> Value:
    """Where the per-channel chain after `conv` starts: its result, or the BatchToSpaceND ending a
    dilated conv (SpaceToBatchND -> conv -> BatchToSpaceND), which moves pixels between batch and
    space and leaves every channel's values to that channel, so a per-channel map commutes with it."""
    value = conv.results[0]
    if len(value.uses) == 1 and conv.name not in protected and layout.channel_axis == -1 and layout.rank == 4:
        user, slot = value.uses[0]
        if user.type == "BatchToSpaceND" and slot == 0 and user.attr("T") == conv.attr("T"):
            return user.results[0]
    return value


def compose(steps: list[Step], channels: int) -> tuple[np.ndarray, np.ndarray]:
    """The whole chain as one (scale, shift) pair."""
    scale, shift = np.ones(channels), np.zeros(channels)
    for step in steps:
        if step.negate:
            scale, shift = -scale, -shift
        scale, shift = scale * step.scale, shift * step.scale + step.shift
    return scale, shift


def is_canonical(steps: list[Step]) -> bool:
    """Nothing to fold: no steps, or just one BiasAdd."""
    return not steps or (len(steps) == 1 and steps[0].op.type in BIAS_TYPES)


def leftover_ops(graph: Graph) -> int:
    """How many affine ops (arithmetic on constants, BN ops) still follow a conv/matmul, beyond one BiasAdd."""
    count = 0
    for op in graph:
        if op.type not in CONV_TYPES and op.type not in FUSED_CONV_TYPES:
            continue
        site = conv_site(op)
        layout = site.layout if site else (Layout(-1, 4) if op.type in FUSED_CONV_TYPES else conv_layout(op))
        steps = follow_chain(op, site.channels if site else None, layout, True, set())
        if not is_canonical(steps):
            count += len(steps)
    return count


# -- folding -----------------------------------------------------------------------
def fold_chain(graph: Graph, site: ConvSite, steps: list[Step], protected: set[str]) -> int:
    """Scale the weights, replace the chain by one BiasAdd (or by the conv itself when
    there is no shift); the result takes the last step's name.  Returns how many ops it
    added: 1 for a BiasAdd, else 0."""
    scale, shift = compose(steps, site.channels)
    scale_weights(graph, site, scale)
    last = steps[-1].op
    chain_ops = [s.op for s in steps]
    start = chain_start(site.conv, site.layout, protected)
    operand_ops = [v.op for op in chain_ops for v in op.operands if v.op not in chain_ops and v.op is not start.op]
    shifted = bool(shift.any())  # a NaN counts, -0.0 does not: as `shift != 0`
    if start.op is not site.conv:  # through a BatchToSpaceND: the bias goes before it, as GTT puts it
        if shifted:
            bias = _bias_add(graph, site, shift, start.op, f"{site.conv.name}/biasadd")
            start.op.set_operand(0, bias.results[0])
        replacement = start.op
    elif shifted:
        replacement = _bias_add(graph, site, shift, last, f"{last.name}/folded")
    else:
        replacement = site.conv
    inherit_control_deps(replacement, chain_ops, exclude=[site.conv, start.op])
    for op in reversed(chain_ops[:-1]):
        for user in list(op.control_users):
            user.remove_control_dep(op)
            user.add_control_dep(replacement)
    name = last.name
    take_over(graph, last, replacement.results[0], rename=False)
    graph.erase_ops(chain_ops[:-1])
    graph.rename(replacement, name)
    erase_dead(graph, operand_ops, protected, removable=_is_constant_source)
    return int(shifted)


def _bias_add(graph: Graph, site: ConvSite, shift: np.ndarray, before: Op, name: str) -> Op:
    """The conv's result plus `shift`, per channel, placed before `before`."""
    dtype = site.conv.attr("T")
    bias = graph.create_op(
        "Const", graph.unique_name(site.conv.name + "_bn_offset"),
        attrs={"dtype": dtype, "value": Tensor.from_numpy(shift.astype(dtype.to_numpy()), dtype, owned=True)},
        device=site.conv.device, before=before)
    attrs = {"T": dtype}
    if "data_format" in site.conv.attrs:
        attrs["data_format"] = site.conv.attrs["data_format"]
    return graph.create_op("BiasAdd", graph.unique_name(name), [site.conv.results[0], bias.results[0]],
                           attrs=attrs, device=before.device, before=before)


def scale_weights(graph: Graph, site: ConvSite, scale: np.ndarray) -> None:
    """Multiply the weights per output channel; in place when this conv is their only reader."""
    tensor = site.weights.attrs["value"]
    w = _weight_elements(graph, site.weights, tensor)
    factor = _weight_broadcast(site, w.shape, scale)
    if w.dtype in (np.float32, np.float64):
        scaled = w * factor.astype(w.dtype)  # one rounding of the factor, one of the product (as GTT)
    else:
        scaled = (w.astype(np.float64) * factor).astype(w.dtype)
    new = Tensor.from_numpy(scaled, tensor.dtype, owned=True)
    operand = site.conv.operands[1]
    if is_exclusive(operand, site.conv):
        site.weights.attrs["value"] = new
        return
    copy = graph.create_op("Const", graph.unique_name(site.weights.name + "_folded"),
                           attrs={"dtype": tensor.dtype, "value": new}, device=site.weights.device, before=site.conv)
    site.conv.set_operand(1, copy.results[0])


def _weight_elements(graph: Graph, weights: Op, tensor: Tensor) -> np.ndarray:
    """The weights' elements.  Large weights not decoded yet are read from the input's bytes
    (`GraphExtras.tensor_encodings`) rather than copied out of protobuf, so the scaled product
    is the one copy made.  The view may be unaligned, which changes no product: every element
    is multiplied on its own."""
    source = weights.attrs.source("value")
    known = None if source is None or tensor.is_decoded else graph.extras.tensor_encodings.get(id(source))
    if known is None:
        return tensor.numpy()
    check_tensor_size(tensor.shape, tensor.dtype.to_numpy().itemsize, lambda: f"constant {tensor!r}")
    flat = np.frombuffer(known.content, dtype=tensor.dtype.to_numpy())
    if flat.size != tensor.num_elements:
        return tensor.numpy()  # which refuses it, naming the sizes
    return flat.reshape(tensor.shape)


def _weight_broadcast(site: ConvSite, shape: tuple[int, ...], scale: np.ndarray) -> np.ndarray:
    if site.conv.type == "DepthwiseConv2dNative":
        return scale.reshape(1, 1, shape[2], shape[3])
    if site.conv.type == "MatMul" and site.conv.attr("transpose_b", False):
        return scale.reshape(-1, 1)
    return scale


def _is_constant_source(op: Op) -> bool:
    return op.type == "Const" or op.type in FORWARDING_OPS

