"""Does an eight-bit ONNX export compute what its TF graph computes?  Measured in quantization steps.

The ONNX backend lowers each activation QuantizeV2 (MIN_FIRST quint8) to a
node whose uint8 output is named after the TF op's result 0, so every
QuantizeV2 of a run-time tensor is a *quantization point* present on both
sides with codes that compare directly, whatever ONNX ops sit in between.
The IR graph runs in gttc's interpreter (TF's semantics, bit for bit), the
model in onnxruntime (one thread), on the same feeds.

* End to end: both run on their own; codes at every point and the float
  outputs are compared.  Errors accumulate along the graph.
* Per op: every point is recomputed by onnxruntime from the *interpreter's*
  codes at the points it directly reads (and the graph inputs), so each row
  measures only the ops between two points.  Instead of extracting one
  subgraph per point, one model is rewired: every reader of a point's tensor
  reads a new graph input fed with the interpreter's codes, while the point
  itself is still computed and output.  Each point then depends on exactly
  the subgraph onnx.utils.Extractor would cut between it and the points it
  reads, and one session run measures all of them (ResNet50-size graphs in
  seconds).

A code differs by 1 LSB where ONNX's QuantizeLinear (divide, round half to
even) and TF's QuantizeV2 (multiply by the reciprocal, round half away)
disagree on a value within float32 ulps of a half-integer, or where a float
op between two points rounds differently; 2 LSB or more means the two
compute different things.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Optional, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper

from compiler.errors import InputError
from compiler.ir.graph import Graph, Op
from compiler.runtime.interpreter import Interpreter
from compiler.runtime.onnx_runner import OnnxNameError, OnnxRunner

Perm = tuple[int, ...]

# Ops between a point and its readers that only move codes or range scalars: not named in a row.
_PLUMBING = frozenset({"Dequantize", "Identity", "Snapshot", "StopGradient"})
# Ops an output's error may be counted in its last quantization step through (they keep units).
_UNIT_PRESERVING = frozenset({"Identity", "Snapshot", "StopGradient", "BiasAdd", "Add", "AddV2", "Sub", "Reshape",
                              "Squeeze", "ExpandDims", "Relu", "Relu6", "MaxPool", "Transpose"})
_MAX_PERMUTED_RANK = 5


# -- the report -----------------------------------------------------------------------
@dataclass(frozen=True)
class Agreement:
    """How far one point's codes are apart: the largest difference and how many are within 1 LSB."""

    elements: int
    max_lsb: int
    within_1: int
    exact: int

    @property
    def share(self) -> float:
        """The share of codes at most 1 LSB apart."""
        return self.within_1 / self.elements if self.elements else 1.0

    @property
    def exact_share(self) -> float:
        return self.exact / self.elements if self.elements else 1.0


@dataclass(frozen=True)
class PointRow:
    """One quantization point: the TF ops computing it from the previous points, per op and end to end."""

    name: str
    ops: str
    per_op: Agreement
    end_to_end: Agreement

    @property
    def elements(self) -> int:
        return self.per_op.elements

    @property
    def max_lsb(self) -> int:
        return self.per_op.max_lsb

    @property
    def share(self) -> float:
        return self.per_op.share


@dataclass(frozen=True)
class OutputRow:
    """One float graph output end to end; `lsb` is max_abs in the output's last quantization step, if known."""

    name: str
    cosine: float
    max_abs: float
    step: Optional[float] = None
    lsb: Optional[float] = None


@dataclass
class Int8EquivalenceReport:
    """Per-point code agreement (per op and end to end) and per-output float agreement."""

    rows: list[PointRow]
    outputs: list[OutputRow]
    unmatched: list[str] = field(default_factory=list)  # IR points with no uint8 tensor of that name in ONNX

    @property
    def min_share(self) -> float:
        """The smallest per-op share of codes within 1 LSB over all points."""
        return min((r.per_op.share for r in self.rows), default=1.0)

    @property
    def share(self) -> float:
        """Per op, the share of all compared codes within 1 LSB."""
        return _pooled(r.per_op for r in self.rows).share

    @property
    def end_to_end_share(self) -> float:
        return _pooled(r.end_to_end for r in self.rows).share

    def worst(self, end_to_end: bool = False) -> Optional[PointRow]:
        """The point with the largest difference (then the lowest share)."""
        key = (lambda r: _badness(r.end_to_end)) if end_to_end else (lambda r: _badness(r.per_op))
        return max(self.rows, key=key, default=None)

    def passed(self, min_share: float = 0.999) -> bool:
        """Whether every point keeps at least `min_share` of its per-op codes within 1 LSB."""
        return bool(self.rows) and self.min_share >= min_share

    def format(self, max_rows: int = 20) -> str:
        """A fixed-width table, worst points first, then per-op, end-to-end and output summaries."""
        return _format(self, max_rows)


def _pooled(agreements: Iterable[Agreement]) -> Agreement:
    items = list(agreements)
    return Agreement(sum(a.elements for a in items), max((a.max_lsb for a in items), default=0),
                     sum(a.within_1 for a in items), sum(a.exact for a in items))


def _badness(agreement: Agreement) -> tuple[int, float, float]:
    return agreement.max_lsb, -agreement.share, -agreement.exact_share


# -- the comparison -------------------------------------------------------------------
def compare_quantized(graph: Graph, model: onnx.ModelProto, feeds: Mapping[str, np.ndarray],
                      inputs: Sequence[str], outputs: Sequence[str]) -> Int8EquivalenceReport:
    """Compare an eight-bit graph (interpreter) with the ONNX model exported from it (onnxruntime)."""
    points = quantization_points(graph, inputs)
    names = _common_points(points, model)
    steps = {out: _output_dequantize(graph, out, inputs) for out in outputs}
    ranges = [v.name for d in steps.values() if d is not None for v in d.operands[1:3]]
    ours = _run_interpreter(graph, feeds, names + list(outputs) + ranges)
    theirs = _run_onnx(_with_outputs(model, names), feeds, names + list(outputs))
    perms = _layouts(names, ours, theirs)
    fed = _per_op_codes(model, {n: _physical(ours[n], perm) for n, perm in perms.items()}, feeds)
    labels = _point_labels(graph, points, inputs)
    rows = [PointRow(n, labels[n], _agreement(ours[n], _logical(fed[n], perm)),
                     _agreement(ours[n], _logical(theirs[n], perm))) for n, perm in perms.items()]
    out_rows = [_output_row(out, ours, theirs[out], steps[out]) for out in outputs]
    return Int8EquivalenceReport(rows, out_rows, [p.results[0].name for p in points if p.results[0].name not in perms])


def _common_points(points: Sequence[Op], model: onnx.ModelProto) -> list[str]:
    """The points whose codes the model computes under the same name (a node output, not an initializer,
    not described as anything but uint8)."""
    produced = _node_outputs(model.graph)
    declared = {v.name: v.type.tensor_type.elem_type for v in model.graph.value_info if v.type.HasField("tensor_type")}
    names = [p.results[0].name for p in points]
    common = [n for n in names if n in produced and declared.get(n, TensorProto.UINT8) == TensorProto.UINT8]
    if not common:
        raise InputError(f"no quantization point of the graph ({len(points)} activation QuantizeV2 ops) is a "
                         "tensor of the ONNX model: the model was not exported from this graph")
    return common


def _run_interpreter(graph: Graph, feeds: Mapping[str, np.ndarray], fetches: Sequence[str]) -> dict[str, np.ndarray]:
    interpreter = Interpreter(graph)
    interpreter.initialize_tables()
    return interpreter.run(dict(feeds), list(dict.fromkeys(fetches)))


def _layouts(names: Sequence[str], ours: Mapping[str, np.ndarray],
             theirs: Mapping[str, np.ndarray]) -> dict[str, Perm]:
    """Each comparable point's storage perm in the model (points of another type or shape are left out)."""
    found = {n: _storage_perm(ours[n], theirs[n]) for n in names}
    perms = {n: perm for n, perm in found.items() if perm is not None}
    if not perms:
        raise InputError(f"none of the {len(names)} quantization points the ONNX model names holds uint8 codes of "
                         "the graph's shape: the model was not exported from this graph")
    return perms


def quantization_points(graph: Graph, inputs: Sequence[str] = ()) -> list[Op]:
    """Every QuantizeV2 of a run-time tensor (one that depends on a graph input), in graph order."""
    variable = _variable_ops(graph, inputs)
    return [op for op in graph if op.type == "QuantizeV2" and op.operands and op.operands[0].op in variable]


def _variable_ops(graph: Graph, inputs: Sequence[str]) -> set[Op]:
    """Ops whose results depend, through data operands, on a graph input (Placeholder or a named input)."""
    named = {name.split(":")[0].lstrip("^") for name in inputs}
    stack = [op for op in graph if op.type in ("Placeholder", "PlaceholderV2") or op.name in named]
    seen: set[Op] = set()
    while stack:
        op = stack.pop()
        if op in seen:
            continue
        seen.add(op)
        stack.extend(user for value in op.results for user, _ in value.uses if user not in seen)
    return seen


def _node_outputs(graph: onnx.GraphProto) -> set[str]:
    return {out for node in graph.node for out in node.output if out}


# -- onnxruntime ----------------------------------------------------------------------
def _run_onnx(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray], fetches: Sequence[str]) -> dict[str, np.ndarray]:
    """One single-threaded session, one run; feeds and fetches by TF name (`x` or `x:0`)."""
    try:
        runner = OnnxRunner(model, threads=1)
        return runner.run(feeds, list(dict.fromkeys(fetches)))
    except OnnxNameError as err:
        raise InputError(f"the ONNX model does not match the graph: {err}") from None


def _with_outputs(model: onnx.ModelProto, tensors: Sequence[str]) -> onnx.ModelProto:
    """A copy of `model` that also outputs the given uint8 tensors."""
    extended = onnx.ModelProto()
    extended.CopyFrom(model)
    present = {o.name for o in extended.graph.output}
    extended.graph.output.extend(helper.make_tensor_value_info(name, TensorProto.UINT8, None)
                                 for name in tensors if name not in present)
    return extended


def _per_op_codes(model: onnx.ModelProto, codes: Mapping[str, np.ndarray],
                  feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every point recomputed from the given codes (stored layout) at the points it reads, in one run."""
    taken = _node_outputs(model.graph) | {i.name for i in model.graph.input} | {i.name for i in model.graph.initializer}
    renamed = {point: _fresh(f"{point}/interpreter_codes", taken) for point in codes}
    rewired = _rewired(model, renamed, {point: codes[point].shape for point in codes})
    return _run_onnx(rewired, {**feeds, **{renamed[p]: array for p, array in codes.items()}}, list(codes))


def _fresh(base: str, taken: set[str]) -> str:
    """`base`, or `base_N`: a name no tensor of the model has."""
    name, i = base, 1
    while name in taken:
        name, i = f"{base}_{i}", i + 1
    taken.add(name)
    return name


def _rewired(model: onnx.ModelProto, renamed: Mapping[str, str],
             shapes: Mapping[str, tuple[int, ...]]) -> onnx.ModelProto:
    """A copy of `model` whose readers of each point read a new graph input instead; outputs: the points.

    Each point then depends on exactly the subgraph onnx.utils.Extractor would
    cut between it and the points it reads.
    """
    rewired = onnx.ModelProto()
    rewired.CopyFrom(model)
    _rename_inputs(rewired.graph, renamed)
    rewired.graph.input.extend(helper.make_tensor_value_info(fed, TensorProto.UINT8, list(shapes[point]))
                               for point, fed in renamed.items())
    del rewired.graph.output[:]
    rewired.graph.output.extend(helper.make_tensor_value_info(p, TensorProto.UINT8, None) for p in renamed)
    return rewired


def _rename_inputs(graph: onnx.GraphProto, renamed: Mapping[str, str]) -> None:
    """Point every node input (in subgraphs too, which may read outer tensors) at the renamed tensor."""
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name in renamed:
                node.input[i] = renamed[name]
        for attribute in node.attribute:
            for body in ([attribute.g] if attribute.HasField("g") else []) + list(attribute.graphs):
                _rename_inputs(body, renamed)


# -- layouts ---------------------------------------------------------------------------
def _storage_perm(ours: np.ndarray, theirs: np.ndarray) -> Optional[Perm]:
    """The perm with theirs == ours.transpose(perm) (the exporter stores some tensors NCHW), or
    None when the two cannot hold the same tensor (not uint8, or no perm fits the shapes).

    Decided from the shapes; where several perms fit (equal dimensions), the one
    whose codes agree best, TF order first on a tie.
    """
    if theirs.dtype != np.uint8 or ours.ndim != theirs.ndim:
        return None
    fitting = [p for p in _candidate_perms(ours.ndim) if tuple(ours.shape[a] for a in p) == theirs.shape]
    if len(fitting) <= 1:
        return fitting[0] if fitting else None
    wide = theirs.astype(np.int16)
    return min(fitting, key=lambda p: float(np.abs(ours.transpose(p).astype(np.int16) - wide).mean()))


def _candidate_perms(rank: int) -> list[Perm]:
    identity = tuple(range(rank))
    if rank < 3:
        return [identity] + [p for p in itertools.permutations(identity) if p != identity]
    channels_first = (0, rank - 1) + tuple(range(1, rank - 1))
    rest = itertools.permutations(identity) if rank <= _MAX_PERMUTED_RANK else iter(())
    return [identity, channels_first] + [p for p in rest if p not in (identity, channels_first)]


def _physical(array: np.ndarray, perm: Perm) -> np.ndarray:
    return array if perm == tuple(sorted(perm)) else np.ascontiguousarray(array.transpose(perm))


def _logical(array: np.ndarray, perm: Perm) -> np.ndarray:
    return array if perm == tuple(sorted(perm)) else array.transpose(np.argsort(perm))


def _agreement(ours: np.ndarray, theirs: np.ndarray) -> Agreement:
    diff = np.abs(ours.astype(np.int16) - theirs.reshape(ours.shape).astype(np.int16))
    return Agreement(int(diff.size), int(diff.max(initial=0)), int(np.count_nonzero(diff <= 1)),
                     int(np.count_nonzero(diff == 0)))


# -- naming ----------------------------------------------------------------------------
def _point_labels(graph: Graph, points: Sequence[Op], inputs: Sequence[str]) -> dict[str, str]:
    """Per point, the TF op types between the points it reads and it, e.g. `QuantizedConv2D+BiasAdd+Relu6`."""
    variable = _variable_ops(graph, inputs)
    position = {op: i for i, op in enumerate(graph)}
    is_point = set(points)
    labels = {}
    for point in points:
        ops = _ops_between(point, is_point, variable)
        types = [op.type for op in sorted(ops, key=position.__getitem__) if _computes_data(op)]
        labels[point.results[0].name] = "+".join(dict.fromkeys(types)) or "(graph input)"
    return labels


def _computes_data(op: Op) -> bool:
    """Whether an op is worth naming: not plumbing, and not shape arithmetic (no float or quantized result)."""
    return op.type not in _PLUMBING and any(v.dtype is not None and (v.dtype.is_float or v.dtype.is_quantized)
                                            for v in op.results)


def _ops_between(point: Op, points: set[Op], variable: set[Op]) -> set[Op]:
    """The run-time ops `point`'s input is computed by, not looking past other points or graph inputs."""
    found: set[Op] = set()
    stack = [point.operands[0].op]
    while stack:
        op = stack.pop()
        if op in found or op in points or op not in variable or op.type in ("Placeholder", "PlaceholderV2"):
            continue
        found.add(op)
        stack.extend(v.op for v in op.operands)
    return found


# -- float outputs ----------------------------------------------------------------------
def _output_dequantize(graph: Graph, output: str, inputs: Sequence[str]) -> Optional[Op]:
    """The Dequantize whose step an output's error is counted in, through ops that keep its units."""
    variable = _variable_ops(graph, inputs)
    op: Optional[Op] = graph.value(output).op
    while op is not None and op.type != "Dequantize":
        if op.type not in _UNIT_PRESERVING:
            return None
        runtime = [v for v in op.operands if v.op in variable]
        op = runtime[0].op if len(runtime) == 1 else None
    return op if op is not None and len(op.operands) == 3 else None


def _step(dequantize: Op, values: Mapping[str, np.ndarray]) -> Optional[float]:
    """One code step of a Dequantize's range: (max - min) / (number of codes - 1)."""
    lo, hi = (float(np.asarray(values[v.name]).reshape(-1)[0]) for v in dequantize.operands[1:3])
    dtype = dequantize.attr("T")
    try:
        info = np.iinfo(dtype.to_numpy())
    except (AttributeError, TypeError, ValueError):
        return None
    step = (hi - lo) / (float(info.max) - float(info.min))
    return step if step > 0 and math.isfinite(step) else None


def _output_row(name: str, ours: Mapping[str, np.ndarray], theirs: np.ndarray, dequantize: Optional[Op]) -> OutputRow:
    a, b = np.asarray(ours[name], np.float64).ravel(), np.asarray(theirs, np.float64).ravel()
    norms = float(np.linalg.norm(a) * np.linalg.norm(b))
    cosine = float(a @ b / norms) if norms > 0 else float(np.array_equal(a, b))
    max_abs = float(np.max(np.abs(a - b), initial=0.0)) if a.size == b.size else math.inf
    step = _step(dequantize, ours) if dequantize is not None else None
    return OutputRow(name, cosine, max_abs, step, None if step is None else max_abs / step)


# -- formatting ------------------------------------------------------------------------
def _clip(text: str, width: int) -> str:
    """`text` in `width` characters, keeping its end (a TF name's most telling part)."""
    return text if len(text) <= width else "..." + text[len(text) - width + 3:]


def _percent(share: float) -> str:
    """Rounded down, so that only an exact 100% reads as one."""
    return f"{math.floor(10000.0 * share) / 100.0:.2f}%" if share < 1.0 else "100%"


def _format(report: Int8EquivalenceReport, max_rows: int) -> str:
    lines = [f"  {'point':<48} {'ops':<28} {'elements':>9} {'op LSB':>6} {'op <=1':>8} {'e2e LSB':>7} {'e2e <=1':>8}"]
    ordered = sorted(report.rows, key=lambda r: (_badness(r.per_op), _badness(r.end_to_end)), reverse=True)
    for row in ordered[:max_rows]:
        lines.append(f"  {_clip(row.name, 48):<48} {_clip(row.ops, 28):<28} {row.elements:>9} "
                     f"{row.per_op.max_lsb:>6} {_percent(row.per_op.share):>8} "
                     f"{row.end_to_end.max_lsb:>7} {_percent(row.end_to_end.share):>8}")
    if len(ordered) > max_rows:
        lines.append(f"  ... {len(ordered) - max_rows} more points")
    lines.append(_summary("per op", report, end_to_end=False))
    lines.append(_summary("end to end", report, end_to_end=True))
    if report.unmatched:
        lines.append(f"not in the ONNX model: {len(report.unmatched)} points ({_clip(report.unmatched[0], 60)}, ...)")
    for out in report.outputs:
        in_steps = "" if out.lsb is None else f" = {out.lsb:.3g} x its last quantization step {out.step:.3g}"
        lines.append(f"output {out.name}: cosine {out.cosine:.6f}, max abs {out.max_abs:.3e}{in_steps}")
    return "\n".join(lines) + "\n"


def _summary(label: str, report: Int8EquivalenceReport, end_to_end: bool) -> str:
    pooled = _pooled(r.end_to_end if end_to_end else r.per_op for r in report.rows)
    worst = report.worst(end_to_end)
    where = "" if worst is None or pooled.max_lsb == 0 else f" (worst {pooled.max_lsb} LSB at {_clip(worst.name, 60)})"
    return (f"{label}: {len(report.rows)} points, {_percent(pooled.share)} of {pooled.elements} elements "
            f"within 1 LSB, {_percent(pooled.exact_share)} equal{where}")


__all__ = ["Agreement", "Int8EquivalenceReport", "OutputRow", "PointRow", "compare_quantized", "quantization_points"]
