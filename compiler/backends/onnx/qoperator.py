"""Rewrite a QDQ ONNX model into the QOperator format (`--onnx-quant=qoperator`), or only into
ONNX's own integer operators (`--onnx-quant=qlinear`, the default).

    model, counts = to_qoperator(onnx.load("m_qdq.onnx"))
    # counts: Counter({"QLinearConv": 52, "QLinearAdd": 10, "QGemm": 1, "left_qdq_Softmax": 1, ...})
    model, counts = to_qoperator(onnx.load("m_qdq.onnx"), standard_only=True)
    # counts: Counter({"QLinearConv": 52, "left_qdq_Add": 10, "left_qdq_Gemm": 1, ...})

Why `qlinear` is the default: a QAT conv's weights need a DequantizeLinear of
their own in QDQ (per-channel int8 codes, `qdq_weights.py`), one node more per
conv than a converter that leaves them float and lets onnxruntime requantize
them (lossily) at load.  Writing the fused QLinearConv instead runs the same
kernel, bit for bit, in a third of the nodes, and stays in the default domain.

A QDQ model says "integer" only through DequantizeLinear -> float op ->
QuantizeLinear groups, which onnxruntime fuses when it loads the model; a
runtime that does not fuse runs every group in float.  The QOperator format
spells the integer kernels out.  A group is

    DequantizeLinear inputs -> one float op -> [Relu | Clip(min, max)] -> QuantizeLinear

and becomes one node reading the DQs' quantized inputs and writing the Q's
output tensor (same name, so every reader, graph outputs included, is
untouched):

| float op | becomes |
|---|---|
| Conv (weights a constant, per tensor or per output channel) | QLinearConv |
| MatMul | QLinearMatMul |
| Gemm (transA=0, alpha=beta=1, constant weights) | QGemm (com.microsoft) |
| Add, Mul | QLinearAdd, QLinearMul (com.microsoft) |
| GlobalAveragePool, AveragePool | QLinearGlobalAveragePool, QLinearAveragePool (com.microsoft) |
| Concat | QLinearConcat (com.microsoft) |
| MaxPool, Reshape, Transpose, Flatten, Squeeze, Pad(0), ... (same quantization in and out) | that op on the integers |

Gemm becomes QGemm, not QLinearMatMul + QLinearAdd: the pair would round the
product to eight bits before adding the bias (a second rounding and a scale
the QDQ model does not have), while QGemm adds the int32 bias to the int32
accumulator, which is what the QDQ group means and what onnxruntime itself
fuses a QDQ Gemm into.

A Relu or Clip folds away only when the output quantization already clamps
to it: Q(min) and Q(max), rounded as QuantizeLinear rounds, are the integer
type's limits (for Relu, the zero point is the lowest code).  Q is monotone,
so then Q(clip(v)) == Q(v) for every v; otherwise the group stays as it is.

A Conv/Gemm bias is a DequantizeLinear of an int32 constant whose scale is
x_scale * w_scale (zero point 0), used as it is; a float constant bias is
quantized to int32 at that scale (round half to even, the only inexact step).

Counts are keyed by the new op type (`QLinearConv`, `QGemm`, ...), by
`uint8_<op>`/`int8_<op>` for ops now run on the integers, `folded_Relu`,
`folded_Clip` and `quantized_float_bias`.  Anything not matched stays QDQ
and each op still reading a DequantizeLinear is counted as `left_qdq_<op>`.  A
DequantizeLinear is removed only when nothing reads it any more; value_info
of removed tensors is dropped.  The output is a function of the input only.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterator, Optional, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from compiler.backends.onnx.errors import OnnxExportError
from compiler.backends.onnx.report import node_bodies

MS_DOMAIN = "com.microsoft"
QUANTIZE, DEQUANTIZE = "QuantizeLinear", "DequantizeLinear"
EIGHT_BIT = {TensorProto.UINT8: (0, 255), TensorProto.INT8: (-128, 127)}
TYPE_NAMES = {TensorProto.UINT8: "uint8", TensorProto.INT8: "int8"}
BIAS_SCALE_RTOL = 1e-6  # a few float32 ulps: x_scale * w_scale rounded once more by the quantizer

# Ops that only move, select or take the maximum of elements: with the same
# scale and zero point on both sides they commute with (de)quantization exactly.
# Value: the first default-domain opset whose schema accepts eight-bit tensors.
PASS_THROUGH = {
    "MaxPool": 12, "Reshape": 5, "Transpose": 1, "Flatten": 9, "Squeeze": 1, "Unsqueeze": 1, "Pad": 11,
    "Slice": 1, "Gather": 1, "DepthToSpace": 1, "SpaceToDepth": 1, "Expand": 8, "Tile": 6, "Identity": 1,
}


@dataclass(frozen=True)
class QParams:
    """A tensor's quantization: the graph's scale and zero-point tensors and their values."""

    scale: str
    zero_point: str  # "" when the graph omits it (zero of `elem_type`)
    scale_value: np.ndarray
    zp_value: np.ndarray
    elem_type: int
    axis: int

    @property
    def per_tensor(self) -> bool:
        return self.scale_value.size == 1 and self.zp_value.size == 1

    def same_as(self, other: "QParams") -> bool:
        """Equal per-tensor quantization (by value, not by tensor name)."""
        return (self.per_tensor and other.per_tensor and self.elem_type == other.elem_type
                and self.scale_value.item() == other.scale_value.item()
                and int(self.zp_value.item()) == int(other.zp_value.item()))


@dataclass(frozen=True)
class Dq:
    """A DequantizeLinear as an input of a group: the tensor it dequantizes, and how."""

    x: str
    q: QParams


@dataclass(frozen=True)
class Tail:
    """The end of a group: optional folded Relu/Clip, then the QuantizeLinear."""

    indices: tuple[int, ...]  # node indices of the activation (if any) and the Q
    q_node: onnx.NodeProto
    out: QParams
    folded: Optional[str]

    @property
    def y(self) -> str:
        return self.q_node.output[0]


@dataclass
class Rewrite:
    """One matched group: the nodes it removes and the node taking the Q's place."""

    removes: tuple[int, ...]
    anchor: int
    node: onnx.NodeProto
    counts: list[str]


class GraphIndex:
    """Producers, readers, constants and element types of a graph's tensors."""

    def __init__(self, graph: onnx.GraphProto) -> None:
        self.nodes = list(graph.node)
        self.producer: dict[str, int] = {}
        self.readers: dict[str, list[int]] = {}
        for i, node in enumerate(self.nodes):
            for name in node.output:
                if name:
                    self.producer[name] = i
            for name in node.input:
                if name:
                    self.readers.setdefault(name, []).append(i)
        self.pinned = {o.name for o in graph.output} | set(_subgraph_reads(graph))
        self.constants: dict[str, TensorProto] = {t.name: t for t in graph.initializer}
        for node in self.nodes:
            if node.op_type == "Constant" and node.domain in ("", "ai.onnx") and node.attribute:
                if node.attribute[0].name == "value":
                    self.constants[node.output[0]] = node.attribute[0].t
        self.types: dict[str, int] = {t.name: t.data_type for t in graph.initializer}
        for info in list(graph.input) + list(graph.value_info) + list(graph.output):
            if info.type.HasField("tensor_type") and info.type.tensor_type.elem_type:
                self.types.setdefault(info.name, info.type.tensor_type.elem_type)

    def constant(self, name: str) -> Optional[np.ndarray]:
        tensor = self.constants.get(name)
        return None if tensor is None else numpy_helper.to_array(tensor)

    def produced_by(self, name: str, op_type: str) -> Optional[onnx.NodeProto]:
        index = self.producer.get(name)
        if index is None:
            return None
        node = self.nodes[index]
        return node if node.op_type == op_type and node.domain in ("", "ai.onnx") else None

    def sole_reader(self, name: str) -> Optional[int]:
        """The one node reading `name`, once, if nothing else (graph output, subgraph) sees it."""
        readers = self.readers.get(name, [])
        if name in self.pinned or len(readers) != 1:
            return None
        return readers[0]

    def unread(self, name: str) -> bool:
        return not name or (name not in self.pinned and not self.readers.get(name))


def _subgraph_reads(graph: onnx.GraphProto) -> Iterator[str]:
    """Names read inside If/Loop/Scan bodies (possibly from this graph's scope)."""
    for node in graph.node:
        for body in node_bodies(node):
            for inner in body.node:
                yield from (name for name in inner.input if name)
            yield from (o.name for o in body.output)
            yield from _subgraph_reads(body)


class Context:
    """What matching needs besides the graph: fresh names, new initializers, the opset."""

    def __init__(self, model: onnx.ModelProto, standard_only: bool = False) -> None:
        graph = model.graph
        self.standard_only = standard_only  # the `qlinear` format: no com.microsoft operators
        self.index = GraphIndex(graph)
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
        infos = list(graph.input) + list(graph.output) + list(graph.value_info)
        self.used = {t.name for t in graph.initializer} | {i.name for i in infos}
        self.used |= {name for node in graph.node for name in list(node.input) + list(node.output)}
        self.new_initializers: list[TensorProto] = []
        self._zero_points: dict[int, str] = {}

    def fresh(self, base: str) -> str:
        name, n = base, 0
        while name in self.used:
            n += 1
            name = f"{base}_{n}"
        self.used.add(name)
        return name

    def checkpoint(self) -> int:
        return len(self.new_initializers)

    def rollback(self, mark: int) -> None:
        """Forget the initializers a failed match created after `mark`."""
        for tensor in self.new_initializers[mark:]:
            self.used.discard(tensor.name)
        del self.new_initializers[mark:]
        self._zero_points = {k: v for k, v in self._zero_points.items() if v in self.used}

    def add_constant(self, base: str, array: np.ndarray) -> str:
        name = self.fresh(base)
        self.new_initializers.append(numpy_helper.from_array(array, name))
        return name

    def zero_point(self, q: QParams) -> str:
        """The zero-point tensor of `q`; one shared scalar zero when the graph omitted it."""
        if q.zero_point:
            return q.zero_point
        if q.elem_type not in self._zero_points:
            dtype = helper.tensor_dtype_to_np_dtype(q.elem_type)
            self._zero_points[q.elem_type] = self.add_constant(f"qoperator/zero_{TYPE_NAMES[q.elem_type]}",
                                                               np.zeros((), dtype))
        return self._zero_points[q.elem_type]


# ---------------------------------------------------------------------------------------------
# Quantization parameters
# ---------------------------------------------------------------------------------------------

def node_attr(node: onnx.NodeProto, name: str, default: object = None) -> object:
    for attr in node.attribute:
        if attr.name == name:
            return helper.get_attribute_value(attr)
    return default


def _elem_type(ctx: Context, name: str) -> Optional[int]:
    """Element type of a quantized tensor whose Q/DQ gives no zero point."""
    if name in ctx.index.types:
        return ctx.index.types[name]
    q = ctx.index.produced_by(name, QUANTIZE)
    if q is not None:
        params = qparams(ctx, q)
        return None if params is None else params.elem_type
    return None


def qparams(ctx: Context, node: onnx.NodeProto) -> Optional[QParams]:
    """Constant scale and zero point of a QuantizeLinear/DequantizeLinear, or None."""
    if len(node.input) < 2 or node_attr(node, "block_size", 0):
        return None
    scale_name = node.input[1]
    zp_name = node.input[2] if len(node.input) > 2 else ""
    scale = ctx.index.constant(scale_name)
    if scale is None or scale.dtype != np.float32 or scale.ndim > 1:
        return None
    if zp_name:
        zp = ctx.index.constant(zp_name)
        if zp is None or zp.size != scale.size or zp.ndim > 1:
            return None
        elem_type = helper.np_dtype_to_tensor_dtype(zp.dtype)
    else:
        if node.op_type == QUANTIZE:
            elem_type = node_attr(node, "output_dtype", 0) or TensorProto.UINT8
        else:
            elem_type = _elem_type(ctx, node.input[0])
        if elem_type not in EIGHT_BIT and elem_type != TensorProto.INT32:
            return None
        zp = np.zeros(scale.shape, helper.tensor_dtype_to_np_dtype(elem_type))
    return QParams(scale_name, zp_name, scale, zp, elem_type, int(node_attr(node, "axis", 1)))


def dq_input(ctx: Context, name: str) -> Optional[Dq]:
    """The DequantizeLinear producing `name`, with constant quantization parameters."""
    node = ctx.index.produced_by(name, DEQUANTIZE)
    if node is None:
        return None
    params = qparams(ctx, node)
    return None if params is None else Dq(node.input[0], params)


def activation_input(ctx: Context, name: str) -> Optional[Dq]:
    """A per-tensor eight-bit DequantizeLinear input."""
    dq = dq_input(ctx, name)
    if dq is None or not dq.q.per_tensor or dq.q.elem_type not in EIGHT_BIT:
        return None
    return dq


def quantize_codes(values: np.ndarray, q: QParams) -> np.ndarray:
    """QuantizeLinear as onnxruntime computes it: float32 divide, round half to even, saturate."""
    lo, hi = EIGHT_BIT[q.elem_type]
    with np.errstate(invalid="ignore", over="ignore"):
        scaled = np.rint(np.asarray(values, np.float32) / q.scale_value.astype(np.float32))
    return np.clip(scaled.astype(np.float64) + q.zp_value.astype(np.float64), lo, hi)


def clamps_to(q: QParams, low: float, high: float) -> bool:
    """Whether quantizing with `q` already clips to [low, high]: then Clip before Q is a no-op."""
    lo, hi = EIGHT_BIT[q.elem_type]
    codes = quantize_codes(np.array([low, high], np.float32), q)
    return codes[0] == lo and codes[1] == hi


# ---------------------------------------------------------------------------------------------
# The end of a group: [Relu | Clip] -> QuantizeLinear
# ---------------------------------------------------------------------------------------------

def clip_bounds(ctx: Context, node: onnx.NodeProto) -> Optional[tuple[float, float]]:
    """A Clip's constant bounds (absent ones infinite), or None when one is not constant."""
    if ctx.opset < 11:
        return float(node_attr(node, "min", -np.inf)), float(node_attr(node, "max", np.inf))
    bounds = []
    for position, default in ((1, -np.inf), (2, np.inf)):
        name = node.input[position] if len(node.input) > position else ""
        value = ctx.index.constant(name) if name else np.array(default, np.float32)
        if value is None or value.size != 1:
            return None
        bounds.append(float(value.item()))
    return bounds[0], bounds[1]


def clamped_by(ctx: Context, node: onnx.NodeProto, out: QParams) -> bool:
    if node.op_type == "Relu":
        return clamps_to(out, 0.0, np.inf)
    bounds = clip_bounds(ctx, node)
    return bounds is not None and clamps_to(out, *bounds)


def group_end(ctx: Context, index: int) -> Optional[tuple[Optional[int], int, QParams]]:
    """(Relu/Clip index or None, Q index, the Q's parameters) when node `index`'s result alone
    feeds a per-tensor eight-bit QuantizeLinear, through at most one Relu or Clip."""
    nodes = ctx.index.nodes
    node = nodes[index]
    if not node.output or not node.output[0] or not all(ctx.index.unread(o) for o in node.output[1:]):
        return None
    reader = ctx.index.sole_reader(node.output[0])
    activation = None
    if reader is not None and nodes[reader].op_type in ("Relu", "Clip") and nodes[reader].domain in ("", "ai.onnx"):
        activation = reader
        reader = ctx.index.sole_reader(nodes[reader].output[0])
    if reader is None:
        return None
    q_node = nodes[reader]
    if q_node.op_type != QUANTIZE or q_node.domain not in ("", "ai.onnx"):
        return None
    out = qparams(ctx, q_node)
    if out is None or not out.per_tensor or out.elem_type not in EIGHT_BIT:
        return None
    return activation, reader, out


def quantized_tail(ctx: Context, index: int) -> Optional[Tail]:
    """The Q (through an optional foldable Relu/Clip) that alone reads node `index`'s result."""
    end = group_end(ctx, index)
    if end is None:
        return None
    activation, reader, out = end
    nodes = ctx.index.nodes
    if activation is not None and not clamped_by(ctx, nodes[activation], out):
        return None
    indices = (reader,) if activation is None else (activation, reader)
    folded = None if activation is None else nodes[activation].op_type
    return Tail(indices, nodes[reader], out, folded)


# ---------------------------------------------------------------------------------------------
# Builders: one float op and its group -> the integer node (or None: leave it QDQ)
# ---------------------------------------------------------------------------------------------

def _triple(ctx: Context, dq: Dq) -> list[str]:
    return [dq.x, dq.q.scale, ctx.zero_point(dq.q)]


def _out_pair(ctx: Context, tail: Tail) -> list[str]:
    return [tail.out.scale, ctx.zero_point(tail.out)]


def _copy_attrs(node: onnx.NodeProto, names: Sequence[str]) -> dict[str, object]:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute if a.name in names}


def _make(node: onnx.NodeProto, op_type: str, inputs: list[str], tail: Tail, domain: str = "",
          **attrs: object) -> onnx.NodeProto:
    return helper.make_node(op_type, inputs, [tail.y], name=node.name, domain=domain or None, **attrs)


def _constant_weight(ctx: Context, name: str, ranks: Sequence[int]) -> Optional[tuple[Dq, np.ndarray]]:
    """DequantizeLinear of a constant eight-bit weight of one of the given ranks."""
    dq = dq_input(ctx, name)
    if dq is None or dq.q.elem_type not in EIGHT_BIT:
        return None
    weight = ctx.index.constant(dq.x)
    if weight is None or weight.ndim not in ranks:
        return None
    return dq, weight


def _per_channel_ok(dq: Dq, weight: np.ndarray, axis: int) -> bool:
    """Per tensor, or one scale and zero point per slice along `axis`."""
    if dq.q.per_tensor:
        return True
    count = weight.shape[axis]
    return dq.q.axis % weight.ndim == axis and dq.q.scale_value.shape == (count,)


def _int32_bias(ctx: Context, name: str, scale: np.ndarray, shapes: Sequence[tuple[int, ...]]) -> Optional[str]:
    """The int32 bias tensor for `name` at `scale` (one per output channel): "" if no bias, None if unusable.

    Either DQ(int32 constant) with that scale and zero point 0, or a float constant
    quantized here (round half to even; values beyond int32 refuse the group).
    """
    if not name:
        return ""
    channels = shapes[0][0]
    expected = np.broadcast_to(scale.astype(np.float32).reshape(-1), (channels,))
    dq = ctx.index.produced_by(name, DEQUANTIZE)
    if dq is not None:
        params = qparams(ctx, dq)
        codes = ctx.index.constant(dq.input[0])
        if params is None or codes is None or codes.dtype != np.int32 or codes.shape not in shapes:
            return None
        if params.scale_value.size not in (1, channels) or np.any(params.zp_value != 0):
            return None
        given = np.broadcast_to(params.scale_value.reshape(-1), (channels,))
        return dq.input[0] if np.allclose(given, expected, rtol=BIAS_SCALE_RTOL, atol=0.0) else None
    values = ctx.index.constant(name)
    if values is None or values.dtype != np.float32 or values.shape not in shapes:
        return None
    codes = np.rint(values.astype(np.float64) / expected.astype(np.float64))
    limits = np.iinfo(np.int32)
    if not np.all(np.isfinite(codes)) or codes.min() < limits.min or codes.max() > limits.max:
        return None
    return ctx.add_constant(f"{name}_int32", codes.astype(np.int32))


def build_conv(ctx: Context, node: onnx.NodeProto, tail: Tail) -> Optional[onnx.NodeProto]:
    x = activation_input(ctx, node.input[0])
    found = _constant_weight(ctx, node.input[1], (3, 4, 5))
    if x is None or found is None or x.q.elem_type != tail.out.elem_type:
        return None
    w, weight = found
    if not _per_channel_ok(w, weight, 0):
        return None
    channels = weight.shape[0]
    bias = _int32_bias(ctx, node.input[2] if len(node.input) > 2 else "",
                       x.q.scale_value * w.q.scale_value, [(channels,)])
    if bias is None:
        return None
    inputs = _triple(ctx, x) + _triple(ctx, w) + _out_pair(ctx, tail) + ([bias] if bias else [])
    attrs = _copy_attrs(node, ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"))
    return _make(node, "QLinearConv", inputs, tail, **attrs)


def build_matmul(ctx: Context, node: onnx.NodeProto, tail: Tail) -> Optional[onnx.NodeProto]:
    a = activation_input(ctx, node.input[0])
    b = dq_input(ctx, node.input[1])
    if a is None or b is None or b.q.elem_type not in EIGHT_BIT or a.q.elem_type != tail.out.elem_type:
        return None
    if not b.q.per_tensor:
        weight = ctx.index.constant(b.x)
        if weight is None or weight.ndim != 2 or not _per_channel_ok(b, weight, 1):
            return None
    return _make(node, "QLinearMatMul", _triple(ctx, a) + _triple(ctx, b) + _out_pair(ctx, tail), tail)


def build_gemm(ctx: Context, node: onnx.NodeProto, tail: Tail) -> Optional[onnx.NodeProto]:
    has_bias = len(node.input) > 2 and bool(node.input[2])
    scaled_bias = has_bias and node_attr(node, "beta", 1.0) != 1.0
    if node_attr(node, "transA", 0) or node_attr(node, "alpha", 1.0) != 1.0 or scaled_bias:
        return None
    a = activation_input(ctx, node.input[0])
    found = _constant_weight(ctx, node.input[1], (2,))
    if a is None or found is None or a.q.elem_type != tail.out.elem_type:
        return None
    b, weight = found
    trans_b = int(node_attr(node, "transB", 0))
    out_axis = 0 if trans_b else 1
    if not _per_channel_ok(b, weight, out_axis):
        return None
    channels = weight.shape[out_axis]
    bias = _int32_bias(ctx, node.input[2] if has_bias else "", a.q.scale_value * b.q.scale_value,
                       [(channels,), (1, channels)])
    if bias is None:
        return None
    inputs = _triple(ctx, a) + _triple(ctx, b) + [bias] + _out_pair(ctx, tail)
    return _make(node, "QGemm", inputs, tail, MS_DOMAIN, **({"transB": trans_b} if trans_b else {}))


def _binary(op_type: str) -> Callable[[Context, onnx.NodeProto, Tail], Optional[onnx.NodeProto]]:
    def build(ctx: Context, node: onnx.NodeProto, tail: Tail) -> Optional[onnx.NodeProto]:
        a, b = activation_input(ctx, node.input[0]), activation_input(ctx, node.input[1])
        if a is None or b is None or not a.q.elem_type == b.q.elem_type == tail.out.elem_type:
            return None
        return _make(node, op_type, _triple(ctx, a) + _triple(ctx, b) + _out_pair(ctx, tail), tail, MS_DOMAIN)
    build.__doc__ = f"Add/Mul of two DequantizeLinear inputs -> {op_type} (com.microsoft)."
    return build


def build_global_average_pool(ctx: Context, node: onnx.NodeProto, tail: Tail) -> Optional[onnx.NodeProto]:
    x = activation_input(ctx, node.input[0])
    if x is None or x.q.elem_type != tail.out.elem_type:
        return None
    return _make(node, "QLinearGlobalAveragePool", _triple(ctx, x) + _out_pair(ctx, tail), tail, MS_DOMAIN,
                 channels_last=0)


def build_average_pool(ctx: Context, node: onnx.NodeProto, tail: Tail) -> Optional[onnx.NodeProto]:
    x = activation_input(ctx, node.input[0])
    if x is None or x.q.elem_type != tail.out.elem_type or any(d != 1 for d in node_attr(node, "dilations", [])):
        return None
    attrs = _copy_attrs(node, ("auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads", "strides"))
    return _make(node, "QLinearAveragePool", _triple(ctx, x) + _out_pair(ctx, tail), tail, MS_DOMAIN, **attrs)


def build_concat(ctx: Context, node: onnx.NodeProto, tail: Tail) -> Optional[onnx.NodeProto]:
    parts = [activation_input(ctx, name) for name in node.input]
    if not parts or any(p is None or p.q.elem_type != tail.out.elem_type for p in parts):
        return None
    inputs = _out_pair(ctx, tail) + [name for p in parts for name in _triple(ctx, p)]
    return _make(node, "QLinearConcat", inputs, tail, MS_DOMAIN, axis=node_attr(node, "axis"))


def build_pass_through(ctx: Context, node: onnx.NodeProto, tail: Tail) -> Optional[onnx.NodeProto]:
    """The op itself on the integers, when input and output quantization are equal."""
    x = activation_input(ctx, node.input[0])
    if x is None or not x.q.same_as(tail.out) or ctx.opset < PASS_THROUGH[node.op_type]:
        return None
    inputs = [x.x] + list(node.input[1:])
    if node.op_type == "Pad":
        pad_value = _integer_pad_value(ctx, node, x)
        if pad_value is None:
            return None
        inputs[2:3] = [pad_value]
    rebuilt = onnx.NodeProto()
    rebuilt.CopyFrom(node)
    del rebuilt.input[:], rebuilt.output[:]
    rebuilt.input.extend(inputs)
    rebuilt.output.append(tail.y)
    return rebuilt


def _integer_pad_value(ctx: Context, node: onnx.NodeProto, x: Dq) -> Optional[str]:
    """Float 0 padding is the zero point on the integers; other modes and values are refused."""
    if node_attr(node, "mode", b"constant") not in (b"constant", "constant"):
        return None
    name = node.input[2] if len(node.input) > 2 else ""
    if name:
        value = ctx.index.constant(name)
        if value is None or value.size != 1 or float(value.item()) != 0.0:
            return None
    zp = ctx.zero_point(x.q)
    if x.q.zero_point and x.q.zp_value.ndim != 0:
        zp = ctx.add_constant(f"{zp}_scalar", x.q.zp_value.reshape(()))
    return zp


BUILDERS: dict[str, Callable[[Context, onnx.NodeProto, Tail], Optional[onnx.NodeProto]]] = {
    "Conv": build_conv,
    "MatMul": build_matmul,
    "Gemm": build_gemm,
    "Add": _binary("QLinearAdd"),
    "Mul": _binary("QLinearMul"),
    "GlobalAveragePool": build_global_average_pool,
    "AveragePool": build_average_pool,
    "Concat": build_concat,
    **{op_type: build_pass_through for op_type in PASS_THROUGH},
}


# ---------------------------------------------------------------------------------------------
# Matching and applying
# ---------------------------------------------------------------------------------------------

def match_group(ctx: Context, index: int) -> Optional[Rewrite]:
    """The rewrite of the group whose float op is node `index`, or None."""
    node = ctx.index.nodes[index]
    builder = BUILDERS.get(node.op_type)
    if builder is None or node.domain not in ("", "ai.onnx"):
        return None
    tail = quantized_tail(ctx, index)
    if tail is None:
        return None
    mark = ctx.checkpoint()
    built = builder(ctx, node, tail)
    if built is None or not _format_takes(ctx, node, built, tail):
        ctx.rollback(mark)
        return None
    label = built.op_type if built.op_type != node.op_type else f"{TYPE_NAMES[tail.out.elem_type]}_{node.op_type}"
    counts = [label] + ([f"folded_{tail.folded}"] if tail.folded else [])
    if node.op_type in ("Conv", "Gemm") and len(node.input) > 2 and node.input[2] \
            and ctx.index.produced_by(node.input[2], DEQUANTIZE) is None:
        counts.append("quantized_float_bias")
    return Rewrite((index,) + tail.indices, tail.indices[-1], built, counts)


def _format_takes(ctx: Context, node: onnx.NodeProto, built: onnx.NodeProto, tail: Tail) -> bool:
    """Whether the chosen format writes this rewrite.  `qlinear` keeps onnxruntime's own choices:
    only default-domain operators, and an integer kernel only for uint8 activations; onnxruntime
    leaves int8-activation convolutions in float on x86, which measured 2.3x faster than the
    int8 x int8 QLinearConv (six 3x3 convs, 32x32x32)."""
    if not ctx.standard_only:
        return True
    fused = built.op_type != node.op_type
    return built.domain != MS_DOMAIN and (not fused or tail.out.elem_type == TensorProto.UINT8)


def _prune_dequantize(nodes: list[onnx.NodeProto], index: GraphIndex) -> list[onnx.NodeProto]:
    """Drop the DequantizeLinear nodes whose every reader was fused away."""
    read = index.pinned | {name for node in nodes for name in node.input}

    def orphaned(node: onnx.NodeProto) -> bool:
        out = node.output[0]
        is_dq = node.op_type == DEQUANTIZE and node.domain in ("", "ai.onnx")
        return is_dq and out not in read and out in index.readers

    return [n for n in nodes if not orphaned(n)]


def _left_qdq(nodes: Sequence[onnx.NodeProto]) -> Counter[str]:
    """Ops still reading dequantized (float) data."""
    dq_outputs = {n.output[0] for n in nodes if n.op_type == DEQUANTIZE}
    return Counter(f"left_qdq_{node.op_type}" for node in nodes
                   if node.op_type not in (QUANTIZE, DEQUANTIZE) and any(name in dq_outputs for name in node.input))


def rebuild_graph(graph: onnx.GraphProto, nodes: list[onnx.NodeProto], ctx: Context) -> None:
    """Install `nodes`; drop the initializers and value_info of tensors the rewrite left unread or removed."""
    read_before = set(ctx.index.readers)
    produced_before = set(ctx.index.producer)
    del graph.node[:]
    graph.node.extend(nodes)
    read = ctx.index.pinned | {name for node in nodes for name in node.input}
    inputs = {i.name for i in graph.input}
    kept = [t for t in graph.initializer if t.name in read or t.name in inputs or t.name not in read_before]
    del graph.initializer[:]
    graph.initializer.extend(kept + ctx.new_initializers)
    gone = produced_before - {name for node in nodes for name in node.output}
    infos = [v for v in graph.value_info if v.name not in gone]
    del graph.value_info[:]
    graph.value_info.extend(infos)


def to_qoperator(model: onnx.ModelProto, check: bool = True,
                 standard_only: bool = False) -> tuple[onnx.ModelProto, Counter[str]]:
    """A QOperator copy of QDQ `model`, and counts of what was fused, folded and left QDQ.

    `standard_only` fuses only groups that become default-domain operators
    (QLinearConv, QLinearMatMul, eight-bit pass-through ops): the `qlinear`
    format, which any ONNX runtime can load.  `check` runs onnx.checker (full) on
    the result; custom-domain nodes are not checked by ONNX (it has no schema for
    them), onnxruntime validates them on load.  A model without DequantizeLinear
    (any float model, the default format's common case) is returned as it is.
    """
    if not has_dequantize(model):
        return model, Counter()
    result = onnx.ModelProto()
    result.CopyFrom(model)
    ctx = Context(result, standard_only)
    rewrites = [r for i in range(len(ctx.index.nodes)) if (r := match_group(ctx, i)) is not None]
    removed = {i for r in rewrites for i in r.removes}
    at_anchor = {r.anchor: r.node for r in rewrites}
    nodes = [at_anchor.get(i, node) for i, node in enumerate(ctx.index.nodes) if i in at_anchor or i not in removed]
    nodes = _prune_dequantize(nodes, ctx.index)
    rebuild_graph(result.graph, nodes, ctx)
    if any(n.domain == MS_DOMAIN for n in nodes) and not any(o.domain == MS_DOMAIN for o in result.opset_import):
        result.opset_import.append(helper.make_opsetid(MS_DOMAIN, 1))
    counts: Counter[str] = Counter(label for r in rewrites for label in r.counts)
    counts.update(_left_qdq(nodes))
    if check:
        check_rewritten(result, "QOperator model")
    return result, counts


def has_dequantize(model: onnx.ModelProto) -> bool:
    """Whether any top-level node is a DequantizeLinear: otherwise no QDQ group can match."""
    return any(n.op_type == DEQUANTIZE for n in model.graph.node)


def check_rewritten(model: onnx.ModelProto, what: str) -> None:
    """The full ONNX checker on a model a rewrite produced; a failure is the exporter's error."""
    try:
        onnx.checker.check_model(model, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as err:
        raise OnnxExportError(f"{what} fails the ONNX checker: {err}") from None
