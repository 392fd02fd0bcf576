"""quantize_nodes: compute in eight bits wherever TensorFlow has a quantized kernel (GTT's quantize_nodes).

The steps are GTT's, in GTT's order, so the output matches it node for node
(names, inputs, attributes and order):

1. With `input_min`/`input_max`, float Placeholders become quint8 and are
   read through `<name>_eightbit/{min,max,dequantize}`.
2. FakeQuantWithMinMaxVars ops are hoisted up to three ops towards the op
   that computes their input, then become QuantizeV2(qint32) -> Requantize
   -> Dequantize with the trained range.
3. Every op of the table in `compiler/quantization/eightbit_ops.py` becomes
   a sandwich: each float input is measured and quantized
   (`<op>_eightbit/<input>/{reshape_dims,reduction_dims,reshape,min,max,quantize}`),
   `<op>/eightbit` computes in eight bits, a 32-bit result is narrowed by
   `<op>/eightbit/{requant_range,requantize}` (or by the constant
   `fallback_min`/`fallback_max`), and a Dequantize takes the op's name.
4. A Requantize with a dynamic range that is dequantized, requantized to
   qint32 and requantized with trained constants collapses into one.
5. Duplicates merge, round after round, in GTT's hash order.
6. Every QuantizeV2 of a Dequantize is bypassed: its readers read the
   Dequantize's eight-bit input and range directly.  Like GTT, the
   measuring ops stay in the graph (strip_unused_nodes removes them).

Where GTT's result would not load or would compute something else, gttc
differs, and the report says so: ops the quantized kernels cannot express
(NCHW data, dilations, explicit padding, broadcasts QuantizedMul/Add get
wrong) stay in float; QuantizedResizeBilinear keeps `half_pixel_centers`
and QuantizedReshape an int64 `Tshape`; control inputs stay control inputs
of the quantized op (GTT quantizes them as data); only float Placeholders
are quantized; an input read twice is quantized once; FakeQuants are
hoisted only across ops they commute with.

Weights whose range is too narrow for TensorFlow are repaired first.
quantize_weights (like GTT's) gives an all-zero weight the range
[0, FLT_MIN]; TF's kernels divide that range by 255, the quotient is
denormal, TF flushes it to zero, and 0/0 makes every element NaN (a
QuantizedBiasAdd turns the NaN into INT32_MIN, wraps around, and the
error grows 2^17-fold per layer until a Requantize sees NaN; this is why
GTT's eight-bit ResNet50 does not run).  Such weights get the range GTT
means them to have, [min, min + 1], with every element at min.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Optional, Sequence

import numpy as np

from compiler.analysis.static_info import StaticInfo, analyze
from compiler.errors import PassFailure, PipelineError
from compiler.graphutil.graphdef_header import discard_graphdef_header
from compiler.graphutil.names import node_name
from compiler.graphutil.order import gtt_execution_order
from compiler.graphutil.rewire import set_explicit_port0
from compiler.ir import op_registry
from compiler.ir.dtypes import DType
from compiler.ir.attrs import AttrMap
from compiler.ir.graph import Graph, Op, Value
from compiler.ir.shapes import Shape
from compiler.passes.base import Param, Pass, PassContext, PassResult, register_pass
from compiler.passes.merge_duplicate_nodes import merge_round_gtt
from compiler.passes.quantize_weights import FLT_MIN, new_const, tf_encoded_tensor
from compiler.quantization.eightbit_ops import (
    EIGHTBIT_OPS, EightBitOp, attribute_fixes, kernel_problem, non_float_reason,
)
from compiler.rewrite.constants import const_array
from compiler.rewrite.edit import take_place

FAKE_QUANT = "FakeQuantWithMinMaxVars"
# Single-input ops that give the same result before or after a FakeQuant: they commute with any
# non-decreasing function of each element that keeps 0 at 0 (FakeQuant's nudged grid holds 0).
HOISTABLE = frozenset({"Identity", "Snapshot", "StopGradient", "Relu", "MaxPool", "Squeeze"})
# Ops whose float outputs are plumbing, not computation; the report does not list them as left in float.
_NOT_COMPUTE = frozenset({
    "Const", "Placeholder", "PlaceholderWithDefault", "Identity", "IdentityN", "NoOp", "Dequantize", "QuantizeV2",
    "Shape", "Enter", "Exit", "Merge", "Switch", "NextIteration", "LoopCond",
})


@register_pass
class QuantizeNodes(Pass):
    """Replace float ops that have eight-bit kernels by quantized ops, converting at their edges (GTT's steps).

    Sites are the ops converted.  The report lists them per type, the ops
    of those types left in float and why, the float ops that have no
    eight-bit form, duplicates merged, conversions bypassed and weight
    ranges repaired.
    """

    name = "quantize_nodes"
    requires = ("quantize_weights",)
    params = (
        Param("input_min", "float", None, "lowest value of quantized placeholder inputs (with input_max)"),
        Param("input_max", "float", None, "highest value of quantized placeholder inputs (with input_min)"),
        Param("fallback_min", "float", None, "constant min for narrowing 32-bit results (with fallback_max)"),
        Param("fallback_max", "float", None, "constant max for narrowing 32-bit results (with fallback_min)"),
        Param("ignore_op", "str", None, "leave ops of this type in float (repeatable)", repeated=True),
    )

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        input_range = range_param(ctx, "input_min", "input_max")
        fallback = range_param(ctx, "fallback_min", "fallback_max")
        table = {t: info for t, info in EIGHTBIT_OPS.items() if t not in set(ctx.params("ignore_op"))}
        report = Report()
        report.repaired = repair_weight_ranges(graph)
        if input_range is not None:
            report.placeholders = quantize_placeholders(graph, *input_range)
        report.hoisted = hoist_fake_quants(graph)
        report.fake_quants = convert_fake_quants(graph)
        quantize_ops(graph, table, fallback, report)
        report.merged_requantizes = merge_adjacent_requantizes(graph)
        report.merged = merge_duplicates(graph, set(ctx.inputs) | set(ctx.outputs))
        report.bypassed = remove_redundant_quantizations(graph, {node_name(o) for o in ctx.outputs})
        dropped_header = discard_graphdef_header(graph)
        return report.result(dropped_header)


def range_param(ctx: PassContext, low: str, high: str) -> Optional[tuple[float, float]]:
    """Both ends of a range parameter pair, None if neither is given; one alone is an error, as in GTT."""
    if not ctx.has(low) and not ctx.has(high):
        return None
    if not (ctx.has(low) and ctx.has(high)):
        raise PipelineError(f"quantize_nodes: you must pass both {low} and {high}")
    return float(np.float32(ctx.param(low))), float(np.float32(ctx.param(high)))


# -- the report ---------------------------------------------------------------------


@dataclass
class Report:
    """What each step did, turned into the pass's notes."""

    converted: Counter = field(default_factory=Counter)
    kept: dict[str, list[str]] = field(default_factory=dict)    # reason -> op names
    no_kernel: Counter = field(default_factory=Counter)
    repaired: list[str] = field(default_factory=list)
    placeholders: list[str] = field(default_factory=list)
    hoisted: int = 0
    fake_quants: int = 0
    merged_requantizes: int = 0
    merged: Counter = field(default_factory=Counter)
    bypassed: int = 0

    def keep(self, op: Op, reason: str) -> None:
        self.kept.setdefault(f"{op.type}: {reason}", []).append(op.name)

    def result(self, dropped_header: bool) -> PassResult:
        total = sum(self.converted.values())
        changed = bool(total or self.repaired or self.placeholders or self.hoisted or self.fake_quants
                       or self.merged or self.bypassed or dropped_header)
        result = PassResult(sites=total, changed=changed)
        result.note(f"converted {total} ops to eight bit" + (f": {_counts(self.converted)}" if total else ""))
        for reason, names in self.kept.items():
            result.note(f"left {len(names)} in float, {reason}: {_names(names)}")
        if self.no_kernel:
            result.note(f"float ops with no eight-bit form in GTT's table: {_counts(self.no_kernel)}")
        if self.repaired:
            result.note(f"repaired {len(self.repaired)} weight ranges too narrow for TF (NaN when dequantized), "
                        f"now [min, min+1]: {_names(self.repaired)}")
        if self.placeholders:
            result.note(f"quantized {len(self.placeholders)} float placeholders: {_names(self.placeholders)}")
        if self.hoisted or self.fake_quants or self.merged_requantizes:
            result.note(f"FakeQuant ops: {self.hoisted} hoisted, {self.fake_quants} turned into Requantize, "
                        f"{self.merged_requantizes} merged into the preceding Requantize")
        if self.merged:
            result.note(f"merged {sum(self.merged.values())} duplicate ops: {_counts(self.merged)}")
        result.note(f"bypassed {self.bypassed} Dequantize -> QuantizeV2 round trips")
        return result


def _counts(counter: Counter) -> str:
    return ", ".join(f"{kind} x{n}" for kind, n in sorted(counter.items()))


def _names(names: Sequence[str]) -> str:
    return ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")


# -- spelling of inputs, for GTT's node names -------------------------------------------


def spelled_with_port(op: Op, slot: int) -> bool:
    """Whether GraphDef spells operand `slot` with its port (`a:0`, `a:1`) rather than `a`."""
    return op.operands[slot].index != 0 or slot in op.explicit_port0


def input_label(op: Op, slot: int) -> str:
    """GTT's UniqueNodeNameFromInput for operand `slot`: `node`, or `node__port__N` when spelled with a port."""
    value = op.operands[slot]
    return f"{value.op.name}__port__{value.index}" if spelled_with_port(op, slot) else value.op.name


def _wire(op: Op, slot: int, value: Value, explicit: bool) -> None:
    """Point operand `slot` at `value`, spelled `name:0` when `explicit` and the port is 0."""
    op.set_operand(slot, value)
    set_explicit_port0(op, slot, explicit)


def _create(graph: Graph, op_type: str, name: str, operands: Sequence[Value], attrs: dict | AttrMap, *,
            before: Optional[Op] = None, after: Optional[Op] = None, explicit: Iterable[int] = (),
            control_deps: Sequence[Op] = ()) -> Op:
    """create_op, with operands in `explicit` spelled `name:0`; a name GTT would duplicate is a PassFailure."""
    if name in graph:
        raise PassFailure(f"cannot add '{name}': an op with that name already exists")
    op = graph.create_op(op_type, name, operands=operands, attrs=attrs, control_deps=control_deps,
                         before=before, after=after)
    for slot in explicit:
        set_explicit_port0(op, slot, True)
    return op


def _users_outside(op: Op, inside: Iterable[Op]) -> bool:
    """Whether anything outside `inside` reads `op` or control-depends on it."""
    members = set(inside)
    return any(user not in members for user in [*op.users, *op.control_users])


# -- GTT's pattern matcher and output order ---------------------------------------------


@dataclass(frozen=True)
class Pattern:
    """GTT's OpTypePattern: `A|B` or `*`, and patterns for every data input (none: inputs unchecked)."""

    types: str
    inputs: tuple["Pattern", ...] = ()

    def accepts(self, op: Op) -> bool:
        return self.types == "*" or op.type in self.types.split("|")


@dataclass
class Found:
    """GTT's NodeMatch: the op and the matches of its data inputs."""

    op: Op
    inputs: list["Found"]

    def nodes(self) -> list[Op]:
        """Every matched op once, breadth first (GTT's MatchedNodesAsArray order)."""
        seen: dict[Op, None] = {}
        level = [self]
        while level:
            following = []
            for found in level:
                if found.op not in seen:
                    seen[found.op] = None
                    following.extend(found.inputs)
            level = following
        return list(seen)


def gtt_matches(graph: Graph, pattern: Pattern) -> list[Found]:
    """Matches in GTT's order: execution order, each op in at most one match."""
    taken: set[Op] = set()
    found = []
    for op in gtt_execution_order(graph).ordered:
        if op in taken:
            continue
        match = _match(op, pattern, taken)
        if match is not None:
            taken.update(match.nodes())
            found.append(match)
    return found


def _match(op: Op, pattern: Pattern, taken: set[Op]) -> Optional[Found]:
    if op in taken or not pattern.accepts(op):
        return None
    if not pattern.inputs:
        return Found(op, [])
    if len(op.operands) != len(pattern.inputs):
        return None
    inputs = []
    for value, sub in zip(op.operands, pattern.inputs):
        found = _match(value.op, sub, taken)
        if found is None:
            return None
        inputs.append(found)
    return Found(op, inputs)


def _place(graph: Graph, placements: dict[Op, list[Op]]) -> None:
    """GTT's order after a replacement: each anchor's ops where the anchor stood, placed ops nowhere else."""
    if not placements:
        return
    placed = {op for ops in placements.values() for op in ops}
    order: list[Op] = []
    for op in graph:
        if op in placements:
            order.extend(dict.fromkeys(placements[op]))
        elif op not in placed:
            order.append(op)
    graph.reorder(order)


# -- step 0: weight ranges TF cannot dequantize -------------------------------------------


def repair_weight_ranges(graph: Graph) -> list[str]:
    """Give eight-bit constants whose range step (max - min) / 255 is denormal a usable range.

    TensorFlow flushes that step to zero and dequantizing then computes 0/0.
    The elements of such a constant all lie within 3e-36 of min, so the
    repaired constant holds min exactly: codes 0 over [min, min + 1].
    """
    repaired = []
    for dequantize in [op for op in graph if op.type == "Dequantize" and len(op.operands) == 3]:
        found = _degenerate_range(dequantize)
        if found is not None:
            _set_range(graph, dequantize, *found)
            repaired.append(dequantize.name)
    return repaired


def _degenerate_range(dequantize: Op) -> Optional[tuple[np.ndarray, np.float32]]:
    """(codes, min) of a Dequantize of constant eight-bit codes whose range step is denormal, else None."""
    if dequantize.operands[0].dtype not in (DType.QUINT8, DType.QINT8):
        return None
    low, high = (const_array(v) for v in dequantize.operands[1:])
    if low is None or high is None or low.size != 1 or high.size != 1:
        return None
    lo, hi = np.float32(low.reshape(())), np.float32(high.reshape(()))
    with np.errstate(all="ignore"):
        step = np.float32(np.float32(hi - lo) / np.float32(255.0))
    if not (hi > lo and step < FLT_MIN):
        return None
    codes = const_array(dequantize.operands[0])
    return None if codes is None else (codes, lo)


def _set_range(graph: Graph, dequantize: Op, codes: np.ndarray, lo: np.float32) -> None:
    """Point the Dequantize at zero codes over [lo, lo + 1], editing its Consts in place when only it reads them."""
    data_type = dequantize.operands[0].dtype
    parts = ((0, np.zeros(codes.shape, codes.dtype), data_type),
             (1, np.float32(lo), DType.FLOAT), (2, np.float32(lo + np.float32(1.0)), DType.FLOAT))
    for slot, array, dtype in parts:
        value = dequantize.operands[slot]
        if value.op.type == "Const" and value.op.users == [dequantize] and not value.op.control_users:
            value.op.attrs["value"] = tf_encoded_tensor(array, dtype)
        else:
            name = graph.unique_name(f"{dequantize.name}_repaired_{slot}")
            dequantize.set_operand(slot, new_const(graph, name, array, dtype, before=dequantize).result)


# -- step 1: quantized placeholders -------------------------------------------------------


def quantize_placeholders(graph: Graph, low: float, high: float) -> list[str]:
    """Make float Placeholders quint8, read through `<name>_eightbit/dequantize` with the given range.

    GTT turns every Placeholder, which breaks graphs with integer inputs;
    only float ones are turned here.
    """
    done = []
    for placeholder in [op for op in graph if op.type == "Placeholder" and op.attr("dtype") == DType.FLOAT]:
        prefix = f"{placeholder.name}_eightbit"
        low_op = new_const(graph, f"{prefix}/min", np.float32(low), DType.FLOAT, after=placeholder)
        high_op = new_const(graph, f"{prefix}/max", np.float32(high), DType.FLOAT, after=low_op)
        readers = list(placeholder.result.uses)
        placeholder.attrs["dtype"] = DType.QUINT8
        placeholder.result.dtype = DType.QUINT8
        dequantize = _create(graph, "Dequantize", f"{prefix}/dequantize",
                             [placeholder.result, low_op.result, high_op.result],
                             {"T": DType.QUINT8, "mode": "MIN_FIRST"}, after=high_op)
        for reader, slot in readers:
            _wire(reader, slot, dequantize.result, False)
        done.append(placeholder.name)
    return done


# -- step 2: FakeQuant ops ----------------------------------------------------------------


def hoist_fake_quants(graph: Graph) -> int:
    """Move FakeQuants up chains of three, two, then one single-input ops, as GTT does.

    The chain's top op takes the FakeQuant's name, and `<fake quant>_hoisted`
    now sits below the chain's lowest moved op.  gttc only crosses ops the
    FakeQuant commutes with (HOISTABLE); GTT crosses any single-input op.
    """
    if not any(op.type == FAKE_QUANT for op in graph):
        return 0
    hoisted = 0
    for depth in (3, 2, 1):
        chain = Pattern("*")
        for _ in range(depth):
            chain = Pattern("*", (chain,))
        placements: dict[Op, list[Op]] = {}
        for match in gtt_matches(graph, Pattern(FAKE_QUANT, (chain, Pattern("Const"), Pattern("Const")))):
            linear = [match.inputs[0]]
            for _ in range(depth):
                linear.append(linear[-1].inputs[0])
            chain_ops = [found.op for found in linear]
            if any(op.type not in HOISTABLE for op in chain_ops[:-1]):
                continue
            if _users_outside(chain_ops[0], [match.op]):
                placements[match.op] = match.nodes()  # GTT gives up and writes the match back
                continue
            anchor = _hoist(graph, match.op, chain_ops)
            placements[anchor] = [anchor, *(found.op for found in match.inputs[1:]), *chain_ops]
            hoisted += 1
        _place(graph, placements)
    return hoisted


def _hoist(graph: Graph, fake_quant: Op, chain: list[Op]) -> Op:
    """`<fq>_hoisted` reads what the chain's last moved op read; the chain's top takes the FakeQuant's place."""
    lowest = chain[-2]
    explicit = [0] if 0 in lowest.explicit_port0 else []
    explicit += [slot for slot in (1, 2) if slot in fake_quant.explicit_port0]
    moved = _create(graph, FAKE_QUANT, f"{fake_quant.name}_hoisted",
                    [lowest.operands[0], *fake_quant.operands[1:]], fake_quant.attrs.copy(),
                    before=fake_quant, explicit=explicit, control_deps=fake_quant.control_deps)
    _wire(lowest, 0, moved.result, False)
    take_place(graph, fake_quant, chain[0])
    return moved


def convert_fake_quants(graph: Graph) -> int:
    """Turn FakeQuant(x, min, max) into QuantizeV2(qint32) -> Requantize(min, max) -> Dequantize, as GTT does."""
    if not any(op.type == FAKE_QUANT for op in graph):
        return 0
    pattern = Pattern(FAKE_QUANT, (Pattern("*"), Pattern("Const"), Pattern("Const")))
    placements: dict[Op, list[Op]] = {}
    for match in gtt_matches(graph, pattern):
        fake_quant = match.op
        source, low, high = (found.op for found in match.inputs)
        prefix = f"{fake_quant.name}_eightbit"
        explicit = [0] if 0 in fake_quant.explicit_port0 else []
        quantize = _create(graph, "QuantizeV2", f"{prefix}/quantize",
                           [fake_quant.operands[0], low.result, high.result],
                           {"T": DType.QINT32, "mode": "MIN_FIRST"}, before=fake_quant, explicit=explicit)
        requantize = _create(graph, "Requantize", f"{prefix}/requantize",
                             [*quantize.results, low.result, high.result],
                             {"Tinput": DType.QINT32, "out_type": DType.QUINT8}, before=fake_quant, explicit=[0])
        dequantize = _create(graph, "Dequantize", graph.unique_name(f"{fake_quant.name}/_dequantize"),
                             requantize.results[:3], {"T": DType.QUINT8, "mode": "MIN_FIRST"},
                             before=fake_quant, explicit=[0])
        take_place(graph, fake_quant, dequantize)
        placements[quantize] = [source, low, high, quantize, requantize, dequantize]
    _place(graph, placements)
    return len(placements)


_ADJACENT_REQUANTIZES = Pattern("Requantize", (
    Pattern("QuantizeV2", (
        Pattern("Dequantize", (
            Pattern("Requantize", (Pattern("*"), Pattern("*"), Pattern("*"),
                                   Pattern("RequantizationRange"), Pattern("RequantizationRange"))),
            Pattern("Requantize"), Pattern("Requantize"))),
        Pattern("Const"), Pattern("Const"))),
    Pattern("QuantizeV2"), Pattern("QuantizeV2"), Pattern("Const"), Pattern("Const")))


def merge_adjacent_requantizes(graph: Graph) -> int:
    """A Requantize with trained constants reads the 32-bit result directly, skipping the dynamic Requantize.

    GTT's pattern: Requantize(QuantizeV2(Dequantize(Requantize(op, range))), min, max)
    becomes Requantize(op, min, max); unless the ops in between are read
    elsewhere, in which case GTT (and gttc) only reorders them.
    """
    placements: dict[Op, list[Op]] = {}
    merged = 0
    for match in gtt_matches(graph, _ADJACENT_REQUANTIZES):
        requantize = match.op
        source = match.inputs[0].inputs[0].inputs[0].inputs[0].op
        low, high = match.inputs[3].op, match.inputs[4].op
        kept = [source, low, high, requantize]
        nodes = match.nodes()
        doomed = [op for op in nodes if op not in kept]
        if any(_users_outside(op, nodes) for op in doomed):
            placements[requantize] = nodes
            continue
        requantize.set_operands([*source.results[:3], low.result, high.result])
        set_explicit_port0(requantize, 0, True)
        requantize.set_control_deps(())
        graph.erase_ops(doomed)
        placements[requantize] = kept
        merged += 1
    _place(graph, placements)
    return merged


# -- step 3: the eight-bit sandwiches -------------------------------------------------------


def quantize_ops(graph: Graph, table: dict[str, EightBitOp], fallback: Optional[tuple[float, float]],
                 report: Report) -> None:
    """Convert every op of `table` that is float and that TF's quantized kernel computes faithfully."""
    shapes = _checked_operand_shapes(graph, table)
    for op in list(graph):
        info = table.get(op.type)
        if info is None:
            if op.type in EIGHTBIT_OPS:
                report.keep(op, "ignore_op")
            elif _computes_in_float(op):
                report.no_kernel[op.type] += 1
            continue
        reason = non_float_reason(op, info) or kernel_problem(op, shapes.get(op, ()))
        if reason is not None:
            report.keep(op, reason)
            continue
        convert_op(graph, op, info, fallback)
        report.converted[op.type] += 1


def _computes_in_float(op: Op) -> bool:
    return op.type not in _NOT_COMPUTE and any(v.dtype == DType.FLOAT for v in op.results)


def _checked_operand_shapes(graph: Graph, table: dict[str, EightBitOp]) -> dict[Op, list[Shape]]:
    """Static operand shapes of the ops to convert whose kernels depend on them: Mul/Add broadcast
    only some ways, Conv2D's window placement depends on the input size."""
    checked = [op for op in graph if op.type in ("Mul", "Add", "Conv2D") and op.type in table]
    if not checked:
        return {}
    info: StaticInfo = analyze(gtt_execution_order(graph).ordered)
    return {op: [info.shape(v) for v in op.operands] for op in checked}


def convert_op(graph: Graph, op: Op, info: EightBitOp, fallback: Optional[tuple[float, float]]) -> Op:
    """Replace `op` by quantized inputs, its Quantized* twin, narrowing if 32-bit, and a Dequantize named `op`."""
    quantized: dict[str, Op] = {}   # by GTT's input label, so an input read twice is quantized once
    order = []
    for slot in range(len(op.operands)):
        if slot not in info.float_inputs:
            label = input_label(op, slot)
            if label not in quantized:
                quantized[label] = _quantize_input(graph, op, slot, f"{op.name}_eightbit/{label}")
            order.append(quantized[label])
    main = _quantized_twin(graph, op, info, order)
    narrow = _narrow(graph, op, main, fallback) if info.wide_output else main
    dequantize = _create(graph, "Dequantize", graph.unique_name(f"{op.name}/_dequantize"), narrow.results[:3],
                         {"T": DType.QUINT8, "mode": "MIN_FIRST"}, before=op, explicit=[0])
    take_place(graph, op, dequantize)
    return dequantize


def _quantize_input(graph: Graph, op: Op, slot: int, base: str) -> Op:
    """Measure operand `slot` and quantize it with that range; returns the QuantizeV2."""
    return measured_quantize(graph, op.operands[slot], base, op, slot in op.explicit_port0)


def measured_quantize(graph: Graph, value: Value, base: str, before: Op, explicit: bool = False) -> Op:
    """QuantizeV2 of `value` over the range measured on every run (reshape to 1-D, Min, Max), in GTT's
    form and names under `base`, placed before `before`; `explicit` spells the reads of `value` `name:0`."""
    ports = [0] if explicit else []
    dims = new_const(graph, f"{base}/reshape_dims", np.array([-1], np.int32), DType.INT32, before=before,
                     control_deps=[value.op])
    axes = new_const(graph, f"{base}/reduction_dims", np.array([0], np.int32), DType.INT32, before=before,
                     control_deps=[value.op])
    flat = _create(graph, "Reshape", f"{base}/reshape", [value, dims.result], {"T": DType.FLOAT}, before=before,
                   explicit=ports)
    reduced = [_create(graph, kind, f"{base}/{kind.lower()}", [flat.result, axes.result],
                       {"T": DType.FLOAT, "keep_dims": False}, before=before) for kind in ("Min", "Max")]
    return _create(graph, "QuantizeV2", f"{base}/quantize", [value, *(r.result for r in reduced)],
                   {"T": DType.QUINT8, "mode": "MIN_FIRST"}, before=before, explicit=ports)


def _quantized_twin(graph: Graph, op: Op, info: EightBitOp, quantized: list[Op]) -> Op:
    """`<op>/eightbit`: eight-bit data inputs in place, float inputs as they were, then the ranges."""
    operands: list[Value] = []
    explicit = []
    pending = iter(quantized)
    for slot, value in enumerate(op.operands):
        if slot in info.float_inputs:
            if slot in op.explicit_port0:
                explicit.append(len(operands))
            operands.append(value)
        else:
            explicit.append(len(operands))
            operands.append(next(pending).results[0])
    if info.separate_min_max:
        operands += [q.results[1] for q in quantized] + [q.results[2] for q in quantized]
    else:
        operands += [r for q in quantized for r in q.results[1:3]]
    # GTT treats control inputs as data inputs to quantize; they stay control inputs here.
    return _create(graph, info.quantized_type, f"{op.name}/eightbit", operands, _twin_attrs(op, info), before=op,
                   explicit=explicit, control_deps=op.control_deps)


def _twin_attrs(op: Op, info: EightBitOp) -> AttrMap:
    """The copied attributes (their original encoding kept; op defaults where absent), the dtypes, the fixes."""
    attrs = op.attrs.copy()
    for key in list(attrs):
        if key not in info.copied_attrs:
            del attrs[key]
    defaults = op_registry.attr_defaults(op.type)
    for key in info.copied_attrs:
        if key not in attrs and key in defaults:
            attrs[key] = defaults[key]
    for key, dtype in info.set_dtypes:
        attrs[key] = dtype
    for key, value in attribute_fixes(op).items():
        attrs[key] = value
    return attrs


def _narrow(graph: Graph, op: Op, main: Op, fallback: Optional[tuple[float, float]]) -> Op:
    """Requantize the qint32 result to quint8, over the fallback range or the range measured each run."""
    if fallback is not None:
        bounds = [new_const(graph, f"{main.name}/fallback_{end}", np.float32(value), DType.FLOAT, before=op).result
                  for end, value in zip(("min", "max"), fallback)]
        explicit = [0]
    else:
        measured = _create(graph, "RequantizationRange", f"{main.name}/requant_range", main.results[:3],
                           {"Tinput": DType.QINT32}, before=op, explicit=[0])
        bounds = measured.results[:2]
        explicit = [0, 3]
    return _create(graph, "Requantize", f"{main.name}/requantize", [*main.results[:3], *bounds],
                   {"Tinput": DType.QINT32, "out_type": DType.QUINT8}, before=op, explicit=explicit)


# -- step 5: duplicates ---------------------------------------------------------------------


def merge_duplicates(graph: Graph, named: set[str]) -> Counter:
    """GTT's MergeDuplicateNodes, run inside quantize_nodes: rounds until nothing merges, hash order."""
    for op in graph:
        if op_registry.op_def(op.type) is None:
            raise PassFailure(f"Op type not registered '{op.type}' (node '{op.name}')")
    merged: Counter = Counter()
    cache: dict[Op, list] = {}
    while duplicates := merge_round_gtt(graph, named, cache):
        merged.update(duplicates)
    return merged


# -- step 6: Dequantize -> QuantizeV2 round trips ---------------------------------------------

_ROUND_TRIP = Pattern("QuantizeV2", (Pattern("Dequantize"), Pattern("Min"), Pattern("Max")))


def remove_redundant_quantizations(graph: Graph, outputs: set[str]) -> int:
    """Readers of QuantizeV2(Dequantize(x, lo, hi)) read x, lo and hi; returns how many were bypassed.

    As in GTT the matched ops stay (moved next to the QuantizeV2) while the
    Dequantize has other readers or is a graph output, which is always the
    case for the sandwiches quantize_nodes builds.
    """
    matches = gtt_matches(graph, _ROUND_TRIP)
    targets: dict[Value, tuple[Value, bool]] = {}
    placements: dict[Op, list[Op]] = {}
    unused: list[Op] = []
    for match in matches:
        quantize, dequantize = match.op, match.inputs[0].op
        for port in range(3):
            targets[quantize.results[port]] = (dequantize.operands[port], spelled_with_port(dequantize, port))
        if _users_outside(dequantize, match.nodes()) or dequantize.name in outputs:
            placements[quantize] = match.nodes()
        else:
            unused.extend(match.nodes())
    for old in list(targets):
        new, explicit = _final_target(old, targets)
        for reader, slot in list(old.uses):
            _wire(reader, slot, new, explicit)
    _place(graph, placements)
    _erase_unused(graph, unused)
    return len(matches)


def _final_target(value: Value, targets: dict[Value, tuple[Value, bool]]) -> tuple[Value, bool]:
    """Follow bypasses until a value that is not itself bypassed (GTT's renaming loop)."""
    seen = {value}
    current, explicit = targets[value]
    while current in targets:
        if current in seen:
            raise PassFailure(f"bypassing quantizations loops through '{current.name}'")
        seen.add(current)
        current, explicit = targets[current]
    return current, explicit


def _erase_unused(graph: Graph, ops: list[Op]) -> None:
    """Erase ops of bypassed round trips that nothing reads any more (GTT drops them outright)."""
    pending = list(dict.fromkeys(ops))
    progress = True
    while pending and progress:
        progress = False
        for op in list(pending):
            if not op.has_uses:
                graph.erase_op(op)
                pending.remove(op)
                progress = True


__all__ = ["QuantizeNodes", "convert_op", "quantize_placeholders", "remove_redundant_quantizations",
           "repair_weight_ranges"]
