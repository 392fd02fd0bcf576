"""What TF's summarize_graph prints, plus what gttc needs to know before compiling.

Like tensorflow/tools/graph_transforms/summarize_graph_main.cc: likely inputs
are Placeholders (with dtype and shape), likely outputs are nodes nothing
consumes (by data or control edge) that are not Const, Assign, NoOp or
Placeholder; op types are counted over the graph and its function bodies.
gttc adds the size of the Const parameters in bytes, control flow (TF1
Switch/Merge/... and functional If/While/...), the function library,
device placement, and a ready-to-paste `gttc` command line.
"""
from __future__ import annotations

import shlex
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

from compiler.ir.dtypes import DType
from compiler.ir.graph import Graph, Op
from compiler.ir.shapes import Shape
from compiler.ir.tensor import Tensor

# summarize_graph_main.cc's unlikely_output_types, plus side-effect sinks that never carry a model's result.
# Graph inputs; PlaceholderV2 is how GraphDefs before version 23 spelled Placeholder.
INPUT_OPS = frozenset({"Placeholder", "PlaceholderV2"})
NOT_OUTPUT_OPS = INPUT_OPS | frozenset({"Const", "Assign", "NoOp",
                            "Assert", "AssignVariableOp", "SaveV2", "Save", "SaveSlices"})
VARIABLE_OPS = frozenset({"Variable", "VariableV2", "VarHandleOp"})
TF1_CONTROL_FLOW_OPS = frozenset({"Switch", "Merge", "Enter", "Exit", "NextIteration", "LoopCond",
                                  "RefSwitch", "RefMerge", "RefEnter", "RefExit", "RefNextIteration"})
FUNCTIONAL_CONTROL_FLOW_OPS = frozenset({"If", "StatelessIf", "While", "StatelessWhile", "Case", "StatelessCase"})


@dataclass
class NodeInfo:
    """A likely input, variable or output: its name, op, and dtype/shape when declared."""

    name: str
    op: str
    dtype: Optional[str] = None
    shape: Optional[str] = None


@dataclass
class GraphSummary:
    """Facts about a graph that help choose --inputs, --outputs and a pipeline."""

    node_count: int
    inputs: list[NodeInfo]
    variables: list[NodeInfo]
    outputs: list[NodeInfo]
    op_counts: list[tuple[str, int]]              # graph and function bodies, most frequent first
    const_nodes: int
    const_elements: int
    const_bytes: int
    control_edges: int
    devices: dict[str, int]                       # device string -> node count
    functions: list[str]
    control_flow: dict[str, int] = field(default_factory=dict)   # TF1 ops, graph and functions
    functional_control_flow: dict[str, int] = field(default_factory=dict)

    @property
    def has_control_flow(self) -> bool:
        return bool(self.control_flow or self.functional_control_flow)


def summarize_graph(graph: Graph) -> GraphSummary:
    """Collect the summary of `graph` (nothing is modified)."""
    ops = list(graph)
    all_op_types = Counter(op.type for op in ops) + Counter(function_op_types(graph))
    consts = [op for op in ops if op.type == "Const"]
    const_tensors = [t for t in (op.attr("value") for op in consts) if isinstance(t, Tensor)]
    return GraphSummary(
        node_count=len(ops),
        inputs=[node_info(op) for op in ops if op.type in INPUT_OPS],
        variables=[node_info(op) for op in ops if op.type in VARIABLE_OPS],
        outputs=[node_info(op) for op in ops if not op.has_uses and op.type not in NOT_OUTPUT_OPS],
        op_counts=sorted(all_op_types.items(), key=lambda item: (-item[1], item[0])),
        const_nodes=len(consts),
        const_elements=sum(t.num_elements for t in const_tensors),
        const_bytes=sum(tensor_nbytes(t) for t in const_tensors),
        control_edges=sum(len(op.control_deps) for op in ops),
        devices=dict(sorted(Counter(op.device for op in ops if op.device).items())),
        functions=function_names(graph),
        control_flow=_count(all_op_types, TF1_CONTROL_FLOW_OPS),
        functional_control_flow=_count(all_op_types, FUNCTIONAL_CONTROL_FLOW_OPS),
    )


def node_info(op: Op) -> NodeInfo:
    dtype = op.attr("dtype")
    shape = op.attr("shape")
    return NodeInfo(op.name, op.type,
                    dtype.tf_name if isinstance(dtype, DType) else None,
                    str(shape) if isinstance(shape, Shape) else None)


def tensor_nbytes(tensor: Tensor) -> int:
    """Storage size of a constant: elements times item size, or the string lengths."""
    if tensor.dtype == DType.STRING:
        if not tensor.is_decodable:
            return 0
        return sum(len(item) for item in tensor.numpy().ravel())
    try:
        return tensor.num_elements * tensor.dtype.to_numpy().itemsize
    except TypeError:  # 4-bit and 2-bit types have no numpy storage type
        return 0


def function_names(graph: Graph) -> list[str]:
    library = graph.extras.library
    return [] if library is None else [f.signature.name for f in library.function]


def function_op_types(graph: Graph) -> Iterable[str]:
    library = graph.extras.library
    if library is None:
        return []
    return [node.op for function in library.function for node in function.node_def]


def _count(counts: Counter[str], wanted: frozenset[str]) -> dict[str, int]:
    return {op: n for op, n in sorted(counts.items()) if op in wanted}


# -- text -------------------------------------------------------------------------


def format_summary(summary: GraphSummary, path: str, command: Optional[str] = None) -> str:
    """The summary as text, ending with a `gttc` command line when one is given."""
    lines = [f"{path}: {summary.node_count} nodes"]
    lines.append(_node_list("possible inputs", summary.inputs, "No inputs spotted."))
    if summary.variables:
        lines.append(_node_list("variables", summary.variables, ""))
    lines.append(_node_list("possible outputs", summary.outputs, "No outputs spotted."))
    lines.append(f"Found {summary.const_nodes} Const nodes holding {summary.const_elements} parameters "
                 f"({human_bytes(summary.const_bytes)}), and {summary.control_edges} control edges")
    scope = f" (graph and {len(summary.functions)} function bodies)" if summary.functions else ""
    lines.append(f"Op types used{scope}: " + ", ".join(f"{n} {op}" for op, n in summary.op_counts))
    lines.append(_control_flow_line(summary))
    lines.append(_functions_line(summary))
    lines.append(_devices_line(summary))
    if command:
        lines.append("To compile with gttc try:")
        lines.append(command)
    return "\n".join(lines) + "\n"


def _node_list(title: str, nodes: list[NodeInfo], empty: str) -> str:
    if not nodes:
        return empty
    return f"Found {len(nodes)} {title}: " + " ".join(_describe(node) for node in nodes)


def _describe(node: NodeInfo) -> str:
    parts = [f"name={node.name}", f"op={node.op}"]
    if node.dtype is not None:
        parts.append(f"type={node.dtype}")
    if node.shape is not None:
        parts.append(f"shape={node.shape}")
    return "(" + ", ".join(parts) + ")"


def _control_flow_line(summary: GraphSummary) -> str:
    if not summary.has_control_flow:
        return "Control flow: none"
    kinds = []
    if summary.control_flow:
        kinds.append("TF1 (" + _counts(summary.control_flow) + ")")
    if summary.functional_control_flow:
        kinds.append("functional (" + _counts(summary.functional_control_flow) + ")")
    return "Control flow: " + "; ".join(kinds)


def _functions_line(summary: GraphSummary) -> str:
    if not summary.functions:
        return "Function library: none"
    return f"Function library: {len(summary.functions)} functions: " + ", ".join(summary.functions)


def _devices_line(summary: GraphSummary) -> str:
    if not summary.devices:
        return "Devices: none assigned"
    assigned = sum(summary.devices.values())
    listing = ", ".join(f"{n} on '{device}'" for device, n in summary.devices.items())
    return f"Devices: {assigned} of {summary.node_count} nodes assigned ({listing})"


def _counts(counts: dict[str, Any]) -> str:
    return ", ".join(f"{n} {op}" for op, n in counts.items())


def human_bytes(count: int) -> str:
    """`1234567` -> `1.2 MB` (decimal units, like file sizes)."""
    if count < 1000:
        return f"{count} bytes"
    size = count / 1000
    for unit in ("kB", "MB"):
        if size < 1000:
            return f"{size:.1f} {unit}"
        size /= 1000
    return f"{size:.1f} GB"


def suggested_command(summary: GraphSummary, path: str, level: Optional[int]) -> str:
    """A `gttc` command line for this graph: its likely inputs and outputs, at `level`."""
    source = Path(path)
    words = ["gttc", path, "-o", str(source.with_name(source.stem + ".opt.pb"))]
    if summary.inputs:
        words.append("--inputs=" + ",".join(node.name for node in summary.inputs))
    if summary.outputs:
        words.append("--outputs=" + ",".join(node.name for node in summary.outputs))
    if level is not None:
        words.append(f"-O{level}")
    return " ".join(shlex.quote(word) for word in words)


__all__ = ["GraphSummary", "NodeInfo", "format_summary", "human_bytes", "suggested_command", "summarize_graph"]
