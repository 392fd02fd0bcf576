"""Calibration: the ranges an eight-bit graph measures at run time, measured once on real inputs.

quantize_nodes leaves two kinds of run-time range measurement in a graph:
a RequantizationRange before every 32-to-8-bit Requantize, and a Min/Max
pair over every float tensor entering a QuantizeV2.  GTT's answer for the
first kind is to log the ranges from a TF run (insert_logging) and freeze
them (freeze_requantization_ranges).  Here the graph runs in gttc's own
interpreter, with TF's eight-bit kernels, on every calibration feed; the
per-run (min, max) pairs are what GTT's log holds, so they can be written in
its format or aggregated and frozen straight away.
"""
from __future__ import annotations

import sys
from typing import Optional, TextIO

import numpy as np
from tqdm import tqdm

from compiler.errors import InputError
from compiler.ir.graph import Graph, Op, Value
from compiler.quantization.calibration_data import CalibrationSet
from compiler.runtime.interpreter import Interpreter

RANGE_OP = "RequantizationRange"
# Reductions quantize_nodes puts before a QuantizeV2 to measure its float input.
_REDUCTIONS = {"Min": 1, "Max": 2}

# Per measuring op (a RequantizationRange, or a QuantizeV2 for its Min/Max), the
# (min, max) seen on each run, in run order.
RangeRecords = dict[str, list[tuple[float, float]]]


def range_ops(graph: Graph) -> list[Op]:
    """The graph's RequantizationRange ops, in graph order."""
    return [op for op in graph if op.type == RANGE_OP]


def measured_quantizes(graph: Graph) -> list[Op]:
    """QuantizeV2 ops whose range comes from a Min and a Max of their float input, in graph order."""
    return [op for op in graph if op.type == "QuantizeV2" and len(op.operands) == 3
            and all(op.operands[i].op.type == kind for kind, i in _REDUCTIONS.items())]


def range_values(op: Op) -> tuple[Value, Value]:
    """The two values holding the (min, max) that `op` measures."""
    if op.type == RANGE_OP:
        return op.results[0], op.results[1]
    return op.operands[1], op.operands[2]


def measure_ranges(graph: Graph, data: CalibrationSet, ops: Optional[list[Op]] = None, progress: bool = True,
                   stream: Optional[TextIO] = None) -> RangeRecords:
    """Run `graph` on every feed of `data` and record the range each of `ops` measures.

    `ops` defaults to every RequantizationRange.  Progress and an ETA go to
    `stream` (stderr) while `progress` is true.
    """
    ops = range_ops(graph) if ops is None else ops
    if not ops:
        raise InputError("the graph has no RequantizationRange ops to calibrate "
                         "(run quantize_nodes first, without fallback_min/fallback_max)")
    pairs = {op.name: range_values(op) for op in ops}
    fetches = list(dict.fromkeys(value.name for pair in pairs.values() for value in pair))
    interpreter = Interpreter(graph)
    records: RangeRecords = {name: [] for name in pairs}
    with tqdm(total=len(data), desc="calibrating", unit="feed", file=stream or sys.stderr,
              disable=not progress, dynamic_ncols=True) as bar:
        for feeds in data:
            values = interpreter.run(feeds, fetches)
            for name, (low, high) in pairs.items():
                records[name].append((_scalar(values[low.name]), _scalar(values[high.name])))
            bar.update(1)
    return records


def _scalar(array: np.ndarray) -> float:
    return float(np.asarray(array, dtype=np.float32).reshape(-1)[0])


__all__ = ["RANGE_OP", "RangeRecords", "measure_ranges", "measured_quantizes", "range_ops", "range_values"]
