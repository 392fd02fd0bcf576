"""freeze_requantization_ranges: replace RequantizationRange ops by Consts holding logged ranges.

The log is GTT's (see compiler/quantization/minmax_log.py for the format
and the percentile rule).  Each RequantizationRange `X` with records
becomes `X/frozen_min` and `X/frozen_max` Consts in its place; its readers
read those instead (spelled `X/frozen_min:0`, `X/frozen_max:0`, as GTT's
input renaming writes them).  Names, order, attributes and tensor bytes are
GTT's.

Deviations: GTT refuses a log naming any op that is missing from the graph
or is not a RequantizationRange; gttc freezes the ops it can and reports
the rest (it fails only when nothing in the log matches).  Records with a
NaN range are ignored (GTT's sort of them is undefined), a min_percentile
that would index past the end picks the largest min (GTT reads out of
bounds), percentiles outside [0, 100] are rejected, and control
dependencies on a frozen op move to its `/frozen_min` Const (GTT leaves
them naming the deleted op).
"""
from __future__ import annotations

import numpy as np

from compiler.errors import InputError, PipelineError
from compiler.graphutil.graphdef_header import discard_graphdef_header
from compiler.graphutil.rewire import move_control_users, redirect_uses
from compiler.ir.dtypes import DType
from compiler.ir.graph import Graph, Op
from compiler.passes.base import Param, Pass, PassContext, PassResult, register_pass
from compiler.passes.quantize_weights import new_const
from compiler.quantization.minmax_log import (
    MinMaxLog, RangeRecords, check_percentile, finite_records, percentile_range, read_log,
)

RANGE_OP = "RequantizationRange"
PASS_NAME = "freeze_requantization_ranges"


@register_pass
class FreezeRequantizationRanges(Pass):
    """Replace RequantizationRange ops by min/max Consts aggregated from a logged calibration run.

    Sites are the frozen ops.  The report says how many RequantizationRange
    ops were frozen from how many log lines, and which were left live or
    which logged names matched nothing.
    """

    name = PASS_NAME
    params = (
        Param("min_max_log_file", "str", "", "log of the ranges, written by insert_logging's Print ops (required)"),
        Param("min_percentile", "float", 5.0, "percentage of the lowest logged mins to discard"),
        Param("max_percentile", "float", 5.0, "percentage of the highest logged maxs to discard"),
    )

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        path = ctx.param("min_max_log_file")
        if not path:
            raise PipelineError(f"{PASS_NAME}: min_max_log_file is required (a log from insert_logging's Print ops)")
        low_pct, high_pct = (check_percentile(ctx.param(key), f"{PASS_NAME}: {key}")
                             for key in ("min_percentile", "max_percentile"))
        log = read_log(path)
        if not log.ranges:
            raise InputError(f"{PASS_NAME}: no min/max range lines (';NAME__print__;__requant_min_max:[MIN][MAX]') "
                             f"in '{path}' ({log.lines} lines)")
        records, nan_dropped = finite_records(log.ranges)
        frozen_ops = [op for op in graph if op.type == RANGE_OP and op.name in records]
        if not frozen_ops:
            raise InputError(f"{PASS_NAME}: none of the {len(log.ranges)} ops named in '{path}' is a "
                             f"{RANGE_OP} in the graph (first: '{next(iter(log.ranges))}')")
        total = sum(1 for op in graph if op.type == RANGE_OP)
        result = PassResult(sites=len(frozen_ops), changed=True)
        result.note(f"froze {len(frozen_ops)} of {total} {RANGE_OP} ops from {log.lines} log lines "
                    f"({log.matched} range records, min_percentile={low_pct:g}, max_percentile={high_pct:g})")
        _report_unmatched(result, graph, log, records, nan_dropped)
        for op in frozen_ops:
            freeze_op(graph, op, *percentile_range(records[op.name], low_pct, high_pct))
        discard_graphdef_header(graph)
        return result


def freeze_op(graph: Graph, op: Op, low: float, high: float) -> None:
    """Put `X/frozen_min` and `X/frozen_max` in place of RequantizationRange `X` and erase it."""
    low_const = new_const(graph, f"{op.name}/frozen_min", np.float32(low), DType.FLOAT, op)
    high_const = new_const(graph, f"{op.name}/frozen_max", np.float32(high), DType.FLOAT, op)
    redirect_uses(op.results[0], low_const.result, explicit_port0=True)
    redirect_uses(op.results[1], high_const.result, explicit_port0=True)
    move_control_users(op, low_const)
    graph.erase_op(op)


def _report_unmatched(result: PassResult, graph: Graph, log: MinMaxLog, records: RangeRecords,
                      nan_dropped: int) -> None:
    """Notes on what stays live and what in the log matched nothing (before the graph changes)."""
    live = [op.name for op in graph if op.type == RANGE_OP and op.name not in records]
    if live:
        result.note(f"left {len(live)} {RANGE_OP} ops live (no usable records in the log): {_shown(live)}")
    missing = [name for name in log.ranges if graph.get(name) is None]
    if missing:
        result.note(f"ignored records of {len(missing)} ops not in the graph: {_shown(missing)}")
    wrong = [f"{name} ({graph.op(name).type})" for name in log.ranges
             if graph.get(name) is not None and graph.op(name).type != RANGE_OP]
    if wrong:
        result.note(f"ignored records of {len(wrong)} ops that are not {RANGE_OP}: {_shown(wrong)}")
    if nan_dropped:
        only_nan = sum(1 for name in log.ranges if name not in records)
        extra = f" ({only_nan} ops had only NaN ranges)" if only_nan else ""
        result.note(f"ignored {nan_dropped} records with a NaN range{extra}")


def _shown(names: list[str]) -> str:
    return ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")


__all__ = ["FreezeRequantizationRanges", "freeze_op"]
