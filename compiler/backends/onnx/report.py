"""What an export produced: node counts per op type, Transposes left, rewrites applied.

`from_model` works on any ONNX model, so gttc's output and tf2onnx's are
counted the same way (nodes inside If/Loop bodies included).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Iterator, Mapping, Optional

import onnx


@dataclass
class ExportReport:
    """Counts describing one ONNX model; `stats` holds the exporter's own rewrite counters."""

    node_count: int
    op_counts: dict[str, int]
    transposes: list[str]
    initializer_count: int
    opset: int
    stats: dict[str, int] = field(default_factory=dict)
    eight_bit: Optional[str] = None

    @property
    def transpose_count(self) -> int:
        return len(self.transposes)

    @classmethod
    def from_model(cls, model: onnx.ModelProto, stats: Optional[Mapping[str, int]] = None) -> "ExportReport":
        nodes = list(iter_nodes(model.graph))
        counts = Counter(n.op_type for n in nodes)
        opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
        return cls(len(nodes), dict(sorted(counts.items())), [n.name for n in nodes if n.op_type == "Transpose"],
                   len(model.graph.initializer), opset, dict(sorted((stats or {}).items())),
                   eight_bit_summary(model.graph))

    def summary(self) -> str:
        """One line: total nodes, Transposes, then per-op counts, most frequent first."""
        ops = ", ".join(f"{k} {v}" for k, v in sorted(self.op_counts.items(), key=lambda kv: (-kv[1], kv[0])))
        return f"{self.node_count} nodes ({self.transpose_count} Transpose): {ops}"


def iter_nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    """Every node of `graph` and of the subgraphs its nodes hold."""
    for node in graph.node:
        yield node
        for body in node_bodies(node):
            yield from iter_nodes(body)


def node_bodies(node: onnx.NodeProto) -> list[onnx.GraphProto]:
    """The subgraphs `node` holds: If's branches, Loop's and Scan's bodies."""
    bodies: list[onnx.GraphProto] = []
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            bodies.append(attr.g)
        elif attr.type == onnx.AttributeProto.GRAPHS:
            bodies.extend(attr.graphs)
    return bodies


# Nodes that only convert, move or describe data: neither eight-bit computation nor float left behind.
_PLUMBING = frozenset({"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "Transpose", "Reshape",
                       "Squeeze", "Unsqueeze", "Flatten", "Identity", "Shape", "Gather", "Slice", "Concat", "Cast",
                       "Constant"})
_INTEGER = frozenset({"ConvInteger", "MatMulInteger", "QGemm"})
# Activations onnxruntime folds into the quantization of the op before them.
_FUSED_ACTIVATIONS = frozenset({"Relu", "Clip"})


def eight_bit_summary(graph: onnx.GraphProto) -> Optional[str]:
    """Which compute nodes read only eight-bit values (codes, or their DequantizeLinear) and which
    read float activations, by op type; None for a model with no quantization at all."""
    nodes = list(graph.node)
    if not any(n.op_type in ("QuantizeLinear", "DynamicQuantizeLinear") for n in nodes):
        return None
    constants = {i.name for i in graph.initializer}
    produced = {out: node for node in nodes for out in node.output}
    codes: set[str] = set()  # tensors holding eight-bit codes
    from_codes: set[str] = set()  # float results computed from codes (a Conv on DequantizeLinear inputs)
    eight_bit: Counter = Counter()
    left: Counter = Counter()
    for node in nodes:
        inputs = [name for name in node.input if name and name not in constants]
        if node.op_type in ("QuantizeLinear", "DynamicQuantizeLinear"):
            codes.add(node.output[0])
            continue
        if node.op_type == "DequantizeLinear":
            continue
        on_codes = bool(inputs) and all(name in codes for name in inputs)
        if node.op_type in _PLUMBING:
            if on_codes:
                codes.update(node.output)
            continue
        dequantized = bool(inputs) and all(name in codes or _dequantized(produced.get(name)) for name in inputs)
        if _is_integer(node.op_type) or dequantized:
            eight_bit[node.op_type] += 1
            (codes if on_codes or _writes_codes(node) else from_codes).add(node.output[0])
        elif node.op_type in _FUSED_ACTIVATIONS and inputs and inputs[0] in from_codes:
            from_codes.add(node.output[0])
        else:
            left[node.op_type] += 1
    return (f"eight-bit: {_counted(eight_bit) or 'none'} (their Relu/Clip included); "
            f"left in float: {_counted(left) or 'none'}")


def _is_integer(op_type: str) -> bool:
    return op_type in _INTEGER or op_type.startswith("QLinear")


def _writes_codes(node: onnx.NodeProto) -> bool:
    """QLinear* ops write codes; QGemm only when given an output scale; ConvInteger int32 sums."""
    if node.op_type == "QGemm":
        return len(node.input) > 7 and bool(node.input[7])
    return node.op_type.startswith("QLinear")


def _dequantized(source: Optional[onnx.NodeProto]) -> bool:
    return source is not None and source.op_type == "DequantizeLinear"


def _counted(counts: Counter) -> str:
    return ", ".join(f"{op} {n}" for op, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
