"""Export an IR graph to an ONNX model: the backend's entry point.

    model = export(graph, ["input"], ["Identity"], opset=17)

Only what the outputs need is exported (control dependencies are dropped),
cut at the given inputs.  Graph inputs and outputs keep TF's names and
layout (NHWC); everything between is free to be channels-first.
"""
from __future__ import annotations

import importlib
import os
import pkgutil
from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

import onnx

from compiler.analysis import analyze, reachable_ops
from compiler.backends.onnx import model as onnx_model
from compiler.backends.onnx.bidirectional_rnn import merge_bidirectional
from compiler.backends.onnx.builder import GraphBuilder, ModelScope, ValueSpec
from compiler.backends.onnx.common_nodes import merge_common_nodes
from compiler.backends.onnx.context import LoweringContext
from compiler.backends.onnx.dtypes import onnx_type
from compiler.backends.onnx.complex_pairs import COMPLEX_TYPES
from compiler.backends.onnx.errors import OnnxExportError
from compiler.backends.onnx.export_rewrites import rewrite_for_export
from compiler.backends.onnx.last_steps import read_last_steps
from compiler.backends.onnx.loop_scans import loops_as_scans
from compiler.backends.onnx.lowering import lower_ops
from compiler.backends.onnx.opset import DEFAULT_OPSET, check_opset
from compiler.backends.onnx.qdq_weights import complete_qdq
from compiler.backends.onnx.qoperator import to_qoperator
from compiler.backends.onnx.report import ExportReport
from compiler.backends.onnx.tf1_frames import export_order
from compiler.graphutil.names import node_names
from compiler.ir.graph import Graph, IRError, Value
from compiler.ir.shapes import Shape
from compiler.modelio import DEFAULT_QUANT_FORMAT, ONNX_QUANT_FORMATS


def _import_op_families() -> None:
    """Import every `ops_*` module of this package: each fills the lowering table as it loads,
    so a new op family needs no list edited."""
    package = __name__.rsplit(".", 1)[0]
    for info in sorted(pkgutil.iter_modules([os.path.dirname(__file__)]), key=lambda m: m.name):
        if info.name.startswith("ops_"):
            importlib.import_module(f"{package}.{info.name}")


_import_op_families()

GRAPH_NAME = "gttc"
InputShapes = Mapping[str, Sequence[Optional[int]]]


@dataclass
class ExportResult:
    model: onnx.ModelProto
    report: ExportReport


def export(graph: Graph, inputs: Sequence[str], outputs: Sequence[str], opset: int = DEFAULT_OPSET,
           input_shapes: Optional[InputShapes] = None) -> onnx.ModelProto:
    """The ONNX model computing `outputs` from `inputs` (TF node or tensor names)."""
    return export_with_report(graph, inputs, outputs, opset, input_shapes).model


def export_with_report(graph: Graph, inputs: Sequence[str], outputs: Sequence[str], opset: int = DEFAULT_OPSET,
                       input_shapes: Optional[InputShapes] = None, check: bool = True,
                       quant_format: str = DEFAULT_QUANT_FORMAT) -> ExportResult:
    """`export`, plus the report of what it produced; `check` runs the full ONNX checker."""
    check_opset(opset)
    if quant_format not in ONNX_QUANT_FORMATS:
        raise OnnxExportError(f"unknown eight-bit ONNX format '{quant_format}' "
                              f"(choose from {', '.join(ONNX_QUANT_FORMATS)})")
    graph, rewritten = rewrite_for_export(graph, node_names(inputs) | node_names(outputs))
    in_values, out_values = _resolve(graph, inputs, "input"), _resolve(graph, outputs, "output")
    if not out_values:
        raise OnnxExportError("no outputs to export")
    for values, role in ((in_values, "an input"), (out_values, "an output")):
        if len(set(values)) != len(values):
            raise OnnxExportError(f"{role} is listed twice")
    needed = reachable_ops(out_values, in_values)
    ops = export_order(graph, needed, in_values)  # TF1 loops and conds are lowered as regions (tf1_frames)
    shapes = _input_shapes(graph, in_values, input_shapes or {})
    info = analyze(ops, shapes)
    scope = ModelScope(opset, {v.name for op in graph for v in op.results} | {op.name for op in graph})
    builder = GraphBuilder(scope)
    ctx = LoweringContext(builder, info, graph.extras.library)
    ctx.keep.update(out_values)
    for value in in_values:
        builder.add_input(_spec(ctx, value, scope.tensors.claim(value.name), symbolic=True))
        ctx.bind(value, value.name)
    ctx.stats.update({name: count for name, count in rewritten.items() if count})
    lower_ops(ctx, ops)
    for value in out_values:
        _expose_output(ctx, value)
    ctx.stats["pruned_nodes"] += builder.prune()
    _run_peepholes(ctx, builder)
    long = onnx_model.long_vector(info.shape(v).dims for op in ops for v in op.results)
    model = onnx_model.finalize(onnx_model.assemble(builder, GRAPH_NAME), check, propagate_data=not long)
    model, completed = complete_qdq(model, check)
    ctx.stats.update({f"qdq_{name}": count for name, count in completed.items()})
    if quant_format != "qdq":
        model, fused = to_qoperator(model, check, standard_only=quant_format == "qlinear")
        ctx.stats.update({f"{quant_format}_{name}": count for name, count in fused.items()})
    return ExportResult(model, ExportReport.from_model(model, ctx.stats))


def _run_peepholes(ctx: LoweringContext, builder: GraphBuilder) -> None:
    """The peepholes on the finished graph, in order, each counted under its statistic and followed
    by a prune when it changed something: what it bypassed or merged leaves dead nodes, and their
    value_info, behind."""
    peepholes = (("bidirectional_rnn", merge_bidirectional), ("rnn_last_steps", read_last_steps),
                 ("loops_as_scans", lambda graph: loops_as_scans(graph, ctx.described)),
                 ("common_nodes", merge_common_nodes))
    for statistic, peephole in peepholes:
        found = peephole(builder)
        if found:
            ctx.stats[statistic] += found
            ctx.stats["pruned_nodes"] += builder.prune()


def _resolve(graph: Graph, names: Sequence[str], role: str) -> list[Value]:
    values = []
    for name in names:
        try:
            values.append(graph.value(name))
        except IRError as err:
            raise OnnxExportError(f"unknown {role} '{name}': {err}") from None
    return values


def _input_shapes(graph: Graph, values: Sequence[Value], given: InputShapes) -> dict[Value, Optional[Shape]]:
    """Caller-given shapes by input name (`x` or `x:0`), else whatever the graph states or,
    for a cut inside the graph (a dataset's IteratorGetNext), what the ops above it imply."""
    shapes: dict[Value, Optional[Shape]] = {}
    for value in values:
        dims = given.get(value.name, given.get(f"{value.name}:0") if value.index == 0 else None)
        shapes[value] = None if dims is None else Shape.of(dims)
    upstream = [v for v in values if shapes[v] is None and v.op.operands]
    if upstream:
        inferred = analyze(export_order(graph, reachable_ops(upstream), ()), {})
        shapes.update({v: inferred.shape(v) for v in upstream})
    for value in values:
        if shapes[value] is None and not value.op.operands and _is_switch_predicate(value):
            declared = value.op.attr("shape")
            if not isinstance(declared, Shape) or declared.dims is None:
                shapes[value] = Shape(())
    return shapes


def _is_switch_predicate(value: Value) -> bool:
    """`value` (through Identities) decides a Switch, which TF runs only on a scalar predicate: a
    TF1 `is_training` placeholder declared without a shape is then a scalar."""
    stack, seen = [value], {value}
    while stack:
        for op, index in stack.pop().uses:
            if op.type in ("Switch", "RefSwitch") and index == 1:
                return True
            if op.type == "Identity" and op.results[0] not in seen:
                seen.add(op.results[0])
                stack.append(op.results[0])
    return False


def _spec(ctx: LoweringContext, value: Value, name: str, symbolic: bool = False) -> ValueSpec:
    """A graph input/output declaration in TF layout; unknown input dims get symbolic names (an input
    needs its rank: ONNX declares it; an unknown output rank is left to ONNX's shape inference)."""
    elem = onnx_type(ctx.dtype(value))
    if not elem:
        raise OnnxExportError(f"'{value.name}' has a type ONNX cannot carry ({ctx.dtype(value)})")
    if ctx.dtype(value) in COMPLEX_TYPES:
        raise OnnxExportError(f"'{value.name}' is {ctx.dtype(value).name.lower()}: onnxruntime does not compute "
                              f"on complex tensors; make the graph input or output its Real/Imag parts or ComplexAbs")
    dims = ctx.shape(value).dims
    if dims is None:
        if symbolic:
            raise OnnxExportError(f"input '{value.name}' has an unknown rank, and an ONNX graph input needs "
                                  f"one: cut the graph where the shape is known")
        return ValueSpec(name, elem, None)
    declared = tuple(f"{name}_dim{i}" if d is None and symbolic else d for i, d in enumerate(dims))
    return ValueSpec(name, elem, declared)


def _expose_output(ctx: LoweringContext, value: Value) -> None:
    """Make `value`, in TF layout, the graph output named after it."""
    ctx.builder.expose(ctx.value_in(value, None), _spec(ctx, value, value.name))
