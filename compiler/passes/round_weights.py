"""round_weights: snap large float constants to a few evenly spaced values, so they compress.

Each float Const with more than 15 elements keeps its name, type and shape,
but every element becomes the centre of one of `num_steps` equal buckets
between the tensor's min and max.  The arithmetic is GTT's, in float32
step by step, so the bits match GTT's output: the running max starts at
FLT_MIN (so an all-negative tensor's range ends at 1.17549435e-38, not at
its own max), an element equal to the max lands in bucket `num_steps`, half
a bucket above the max, and an all-equal positive tensor gets the range
[v, 2v].

Deviations, where GTT's result is undefined or breaks the graph: tensors
holding NaN or infinity, or whose range overflows float32, stay as they
are (TF's float-to-int conversion of those is undefined); the Const keeps
its control dependencies (GTT rebuilds the node without them, which pulls
it out of a while-loop frame); `num_steps` below 1 is rejected.  Like GTT,
the rebuilt Const keeps only its `dtype` and `value` attributes and no
device, and the GraphDef's versions are not carried over.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from compiler.errors import PipelineError
from compiler.graphutil.graphdef_header import discard_graphdef_header
from compiler.ir.dtypes import DType
from compiler.ir.graph import Graph, Op
from compiler.passes.base import Param, Pass, PassContext, PassResult, register_pass
from compiler.passes.quantize_weights import (
    FLT_MAX, FLT_MIN, sweep_float_consts, tf_encoded_tensor,
)

# GTT leaves constants with fewer elements alone: they tend to be accuracy-sensitive and tiny.
MIN_ELEMENTS = 16


@register_pass
class RoundWeights(Pass):
    """Round float Consts with more than 15 elements to num_steps evenly spaced values (same graph, compresses well).

    Sites are the rounded Consts.  The report counts the float constants
    rounded, those too small, and any left alone because their values are
    not finite.
    """

    name = "round_weights"
    params = (Param("num_steps", "int", 256, "how many distinct values each rounded constant keeps"),)

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        num_steps = ctx.param("num_steps")
        if num_steps < 1:
            raise PipelineError(f"round_weights: num_steps must be at least 1, got {num_steps}")
        sweep = sweep_float_consts(graph, MIN_ELEMENTS, self.name)
        counts = _Counts(floats=sweep.floats, small=sweep.small)
        for op, values in sweep.large:
            new_values = round_values(values, num_steps)
            if new_values is None:
                counts.skipped.append(op.name)
            else:
                _rebuild_const(op, new_values)
                counts.rounded += 1
        dropped_header = discard_graphdef_header(graph)
        result = PassResult(sites=counts.rounded, changed=bool(counts.rounded) or dropped_header)
        counts.report(result, num_steps)
        return result


@dataclass
class _Counts:
    """What happened to the float constants, for the report."""

    floats: int = 0
    rounded: int = 0
    small: int = 0
    skipped: list[str] = field(default_factory=list)

    def report(self, result: PassResult, num_steps: int) -> None:
        result.note(f"rounded {self.rounded} of {self.floats} float constants to {num_steps} steps "
                    f"({self.small} with fewer than {MIN_ELEMENTS} elements left as they are)")
        if self.skipped:
            shown = ", ".join(self.skipped[:5]) + (", ..." if len(self.skipped) > 5 else "")
            result.note(f"left {len(self.skipped)} unrounded because they hold NaN/infinity or their range "
                        f"overflows float32: {shown}")


def rounding_range(values: np.ndarray) -> tuple[np.float32, np.float32]:
    """GTT's (min, max): running min from FLT_MAX and max from FLT_MIN, widened when they meet."""
    flat = values.reshape(-1)
    lo = flat.min() if flat.size and flat.min() < FLT_MAX else FLT_MAX
    hi = flat.max() if flat.size and flat.max() > FLT_MIN else FLT_MIN
    lo, hi = np.float32(lo), np.float32(hi)
    if lo == hi:
        if abs(lo) < np.float32(0.000001):
            hi = np.float32(lo + np.float32(1.0))
        elif lo > 0:
            hi = np.float32(np.float32(2.0) * lo)
        else:
            lo = np.float32(np.float32(2.0) * hi)
    return lo, hi


def round_values(values: np.ndarray, num_steps: int) -> Optional[np.ndarray]:
    """Each value replaced by its bucket's centre, in GTT's float32 arithmetic; None where that is undefined."""
    if not np.isfinite(values).all():
        return None
    lo, hi = rounding_range(values)
    with np.errstate(over="ignore", invalid="ignore"):
        width = np.float32((hi - lo) / np.float32(num_steps))
        if not np.isfinite(width) or width == 0:
            return None
        buckets = np.floor((values - lo) / width)
        centres = lo + width * (buckets + np.float32(0.5))
    return centres.astype(np.float32)


def _rebuild_const(op: Op, values: np.ndarray) -> None:
    """Give the Const GTT's fresh node: only dtype and the new value, no device (control deps stay)."""
    for key in [k for k in op.attrs if k not in ("dtype", "value")]:
        del op.attrs[key]
    op.attrs["dtype"] = DType.FLOAT
    op.attrs["value"] = tf_encoded_tensor(values, DType.FLOAT)
    op.device = ""


__all__ = ["RoundWeights", "round_values", "rounding_range"]
