"""calibrate_ranges: measure an eight-bit graph's ranges on real inputs and freeze them, in one pass.

GTT freezes requantization ranges in three steps: insert_logging, a TF run
per input that logs to stderr, then freeze_requantization_ranges over the
log.  This pass does the same in one go: it runs the graph in gttc's
interpreter on every feed of `data` (see `compiler.quantization.calibration_data`),
aggregates each RequantizationRange's per-run (min, max) with GTT's
percentile rule, and replaces it with Consts exactly as
freeze_requantization_ranges would from the equivalent log.

With `activations=true` (the default) it also freezes the other run-time
measurement quantize_nodes leaves behind, which GTT cannot freeze: the
Min/Max reductions over every float tensor entering a QuantizeV2.  Each
reduction becomes a Const of the same name, so the QuantizeV2 no longer scans
its input on every run.  (Not a GTT transform.)
"""
from __future__ import annotations

import sys

import numpy as np

from compiler.errors import PipelineError
from compiler.ir.dtypes import DType
from compiler.ir.graph import Graph, Op
from compiler.ir.tensor import Tensor
from compiler.passes.base import Param, Pass, PassContext, PassResult, register_pass
from compiler.passes.freeze_requantization_ranges import freeze_op
from compiler.quantization.calibrate import RangeRecords, measure_ranges, measured_quantizes, range_ops
from compiler.quantization.calibration_data import load_calibration
from compiler.quantization.minmax_log import aggregate_records, check_percentile
from compiler.rewrite.edit import erase_dead, node_names, take_over


@register_pass
class CalibrateRanges(Pass):
    """Run the eight-bit graph on calibration data and freeze the ranges it measures (gttc extension)."""

    name = "calibrate_ranges"
    params = (
        Param("data", "str", None, "calibration inputs: an .npz keyed by input name, or a folder of them"),
        Param("min_percentile", "float", 5.0, "percentage of the lowest per-run minimums to discard, as GTT"),
        Param("max_percentile", "float", 5.0, "percentage of the highest per-run maximums to discard, as GTT"),
        Param("activations", "bool", True, "also freeze the Min/Max measured before every QuantizeV2"),
    )

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        path = ctx.param("data")
        if not path:
            raise PipelineError("calibrate_ranges: parameter 'data' (calibration .npz or folder) is required")
        percentiles = [check_percentile(ctx.param(name), name) for name in ("min_percentile", "max_percentile")]
        requantization = range_ops(graph)
        quantizes = measured_quantizes(graph) if ctx.param("activations") else []
        result = PassResult()
        if not requantization and not quantizes:
            result.note("nothing to calibrate: no RequantizationRange ops and no measured QuantizeV2 inputs")
            return result
        data = load_calibration(path, graph, ctx.inputs)
        records = measure_ranges(graph, data, requantization + quantizes, progress=sys.stderr.isatty())
        ranges = aggregate_records(records, *percentiles)
        measured = [op for op in requantization if op.name in ranges]  # all-NaN records give no range
        for op in measured:
            freeze_op(graph, op, *ranges[op.name])
        frozen = len(measured)
        leftovers = [op for quantize in quantizes if quantize.name in ranges
                     for op in _freeze_measured_input(graph, quantize, ranges[quantize.name])]
        fixed = sum(1 for quantize in quantizes if quantize.name in ranges)
        erased = erase_dead(graph, leftovers, node_names(ctx.inputs) | node_names(ctx.outputs))
        result.sites = frozen + fixed
        result.changed = result.sites > 0
        result.note(f"measured {len(records)} ranges on {len(data)} feeds from {path}")
        result.note(f"froze {frozen} of {len(requantization)} RequantizationRange ops")
        if ctx.param("activations"):
            result.note(f"froze the input ranges of {fixed} of {len(quantizes)} QuantizeV2 ops (their Min/Max "
                        f"reductions became Consts; {erased} ops that fed them erased)")
        _note_degenerate(result, records)
        return result


def _freeze_measured_input(graph: Graph, quantize: Op, bounds: tuple[float, float]) -> list[Op]:
    """Replace the Min and Max feeding `quantize` with Consts of the same names.

    Returns the ops that fed the reductions, which may now be dead.
    """
    fed: list[Op] = []
    for value, bound in zip(quantize.operands[1:3], bounds):
        reduction = value.op
        if reduction.type == "Const":  # shared with an earlier QuantizeV2 and already frozen
            continue
        fed.extend(v.op for v in reduction.operands)
        const = graph.create_op("Const", graph.unique_name(f"{reduction.name}/frozen"),
                                attrs={"dtype": DType.FLOAT, "value": Tensor.from_numpy(np.float32(bound))},
                                before=reduction)
        take_over(graph, reduction, const.results[0])
    return fed


def _note_degenerate(result: PassResult, records: RangeRecords) -> None:
    """Say which measured ranges were empty (min == max on every run): their tensors were constant."""
    flat = [name for name, runs in records.items() if all(low == high for low, high in runs)]
    if flat:
        result.note(f"{len(flat)} ranges were a single value on every feed (e.g. '{flat[0]}')")


__all__ = ["CalibrateRanges"]
