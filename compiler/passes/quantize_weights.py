"""quantize_weights: store large float constants in eight bits, read back through Dequantize.

Each float Const with at least `minimum_size` elements becomes three Consts
(`<name>_quantized_const` quint8, `<name>_quantized_min`,
`<name>_quantized_max`) and a `Dequantize(mode=MIN_FIRST)` that takes the
Const's name and place, so its readers are untouched.  Ranges and codes are
computed exactly as GTT computes them (float32 range arithmetic, TF's
FloatToQuantized in double precision), so the output is GTT's bit for bit.

GTT's range starts from max = FLT_MIN, not 0 or the lowest float, and is
widened to include 0, so an all-zero or all-negative weight gets a max of
1.17549435e-38; gttc keeps that quirk because the bytes must match.

Deviations, each where GTT's result would be undefined or a broken graph:
constants holding NaN or infinity stay in float (TF's conversion of those
is undefined); the new Consts keep the old Const's control dependencies
(GTT drops them, which pulls a Const out of its while-loop frame); a
negative `minimum_size` is rejected (GTT compares it unsigned and quantizes
nothing).  Like GTT, the new ops carry no device and the GraphDef's
versions are not carried over.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np

from compiler.errors import PassFailure, PipelineError
from compiler.graphutil.graphdef_header import discard_graphdef_header
from compiler.ir.dtypes import DType
from compiler.ir.graph import Graph, Op
from compiler.ir.tensor import Tensor
from compiler.passes.base import Param, Pass, PassContext, PassResult, register_pass
from compiler.proto.tensor_pb2 import TensorProto
from compiler.rewrite.edit import take_place

FLT_MIN = np.float32(np.finfo(np.float32).tiny)  # C++'s numeric_limits<float>::min()
FLT_MAX = np.float32(np.finfo(np.float32).max)
QUINT8_STEPS = 256


@register_pass
class QuantizeWeights(Pass):
    """Store float Consts with at least minimum_size elements as quint8 plus a MIN_FIRST Dequantize.

    Sites are the converted Consts.  The report counts the float constants
    converted, those below `minimum_size`, and any left in float because
    they hold NaN or infinity.
    """

    name = "quantize_weights"
    params = (
        Param("minimum_size", "int", 1024, "only float Consts with at least this many elements are quantized"),
    )

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        minimum_size = ctx.param("minimum_size")
        if minimum_size < 0:
            raise PipelineError(f"quantize_weights: minimum_size must be >= 0, got {minimum_size}")
        sweep = sweep_float_consts(graph, minimum_size, self.name)
        tally = _Tally(floats=sweep.floats, small=sweep.small)
        for op, values in sweep.large:
            if np.isfinite(values).all():
                quantize_const(graph, op, values)
                tally.converted += 1
            else:
                tally.non_finite.append(op.name)
        dropped_header = discard_graphdef_header(graph)
        result = PassResult(sites=tally.converted, changed=bool(tally.converted) or dropped_header)
        tally.report(result, minimum_size)
        return result


@dataclass
class _Tally:
    """What happened to the float constants, for the report."""

    floats: int = 0
    converted: int = 0
    small: int = 0
    non_finite: list[str] = field(default_factory=list)

    def report(self, result: PassResult, minimum_size: int) -> None:
        result.note(f"quantized {self.converted} of {self.floats} float constants "
                    f"({self.small} below minimum_size={minimum_size})")
        if self.non_finite:
            shown = ", ".join(self.non_finite[:5]) + (", ..." if len(self.non_finite) > 5 else "")
            result.note(f"left {len(self.non_finite)} in float because they hold NaN or infinity: {shown}")


@dataclass
class ConstSweep:
    """The float Consts of a graph: how many, how many are small, and the large ones with their values."""

    floats: int = 0
    small: int = 0
    large: list[tuple[Op, np.ndarray]] = field(default_factory=list)


def sweep_float_consts(graph: Graph, minimum_size: int, pass_name: str) -> ConstSweep:
    """The float Consts with at least `minimum_size` elements, in graph order, as GTT visits them.

    Every Const is checked (a Const without dtype or value fails the pass, as in GTT).
    """
    sweep = ConstSweep()
    for op in [op for op in graph if op.type == "Const"]:
        tensor = checked_const_value(op, pass_name)
        if op.attrs["dtype"] != DType.FLOAT:
            continue
        sweep.floats += 1
        if tensor.num_elements < minimum_size:
            sweep.small += 1
        else:
            sweep.large.append((op, float_elements(op, tensor, pass_name)))
    return sweep


def checked_const_value(op: Op, pass_name: str) -> Tensor:
    """The Const's tensor; like GTT, a Const without dtype or value fails the pass."""
    for key in ("dtype", "value"):
        if key not in op.attrs:
            raise PassFailure(f"{pass_name}: Const '{op.name}' has no '{key}' attribute")
    tensor = op.attrs["value"]
    if not isinstance(tensor, Tensor):
        raise PassFailure(f"{pass_name}: the value of Const '{op.name}' is not a tensor")
    return tensor


def float_elements(op: Op, tensor: Tensor, pass_name: str) -> np.ndarray:
    """The float32 elements of a dtype=float Const (an undecodable tensor fails the pass, as in GTT)."""
    try:
        values = tensor.numpy()
    except ValueError as err:
        raise PassFailure(f"{pass_name}: cannot decode the value of Const '{op.name}': {err}") from None
    if values.dtype != np.float32:
        raise PassFailure(f"{pass_name}: Const '{op.name}' has dtype float but holds {tensor.dtype.tf_name}")
    return values


# -- GTT's arithmetic -------------------------------------------------------------


def weight_range(values: np.ndarray) -> tuple[np.float32, np.float32]:
    """GTT's (min, max) for a weight tensor: the running min/max from FLT_MAX/FLT_MIN, widened to 0.

    The running comparisons keep the first of equal values, so a minimum
    of zero keeps the sign of the first zero, as GTT's std::min does.
    """
    flat = values.reshape(-1)
    lo = FLT_MAX
    if flat.size and flat.min() < lo:
        lo = flat[int(np.argmax(flat == flat.min()))]
    hi = FLT_MIN
    if flat.size and flat.max() > hi:
        hi = flat.max()
    lo = np.float32(0.0) if np.float32(0.0) < lo else lo
    hi = hi if np.float32(0.0) < hi else np.float32(0.0)
    if lo == hi:  # unreachable while hi starts at FLT_MIN, kept as GTT has it
        hi = _degenerate_max(lo)
    return np.float32(lo), np.float32(hi)


def _degenerate_max(value: np.float32) -> np.float32:
    if abs(value) < np.float32(0.000001):
        return np.float32(value + np.float32(1.0))
    if value > 0:
        return np.float32(np.float32(2.0) * value)
    return np.float32(value / np.float32(2.0))


def round_half_away(x: np.ndarray) -> np.ndarray:
    """C's round(): halves go away from zero (numpy's round goes to even)."""
    whole = np.trunc(x)
    return whole + np.where(np.abs(x - whole) >= 0.5, np.sign(x), 0.0)


def float_to_quint8(values: np.ndarray, lo: np.float32, hi: np.float32) -> np.ndarray:
    """TF's FloatToQuantized<quint8> per element: double-precision scaling, rounded, clamped to 0..255."""
    if lo == hi:
        return np.zeros(values.shape, np.uint8)
    with np.errstate(over="ignore", invalid="ignore"):
        span = float(np.float32(hi) - np.float32(lo))  # float32 subtraction, as in TF
        scale = QUINT8_STEPS / (span * (QUINT8_STEPS / (QUINT8_STEPS - 1.0)))
        codes = round_half_away(values.astype(np.float64) * scale) - round_half_away(np.float64(lo) * scale)
    return np.clip(codes, 0, 255).astype(np.uint8)


# -- the rewrite ----------------------------------------------------------------------


def tf_encoded_tensor(array: np.ndarray, dtype: DType) -> Tensor:
    """A tensor encoded as TF's AsProtoTensorContent encodes it (the shape is always present).

    TF writes an empty `tensor_shape` for scalars; pinning the encoding as
    the tensor's source makes new scalar Consts byte-identical to GTT's.
    """
    arr = np.array(array, dtype=dtype.to_numpy(), order="C")
    proto = TensorProto(dtype=int(dtype))
    proto.tensor_shape.SetInParent()
    for size in arr.shape:
        proto.tensor_shape.dim.add().size = size
    if arr.size:
        proto.tensor_content = arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
    frozen = arr.copy()
    frozen.flags.writeable = False
    return Tensor(dtype, arr.shape, array=frozen, source=proto)


def new_const(graph: Graph, name: str, array: np.ndarray, dtype: DType, before: Optional[Op] = None,
              control_deps: Sequence[Op] = (), after: Optional[Op] = None) -> Op:
    """A Const named `name` placed before `before` (or after `after`), with GTT's attributes (dtype and value only).

    A name that is taken is a PassFailure: GTT would write two nodes of that name.
    """
    if name in graph:
        raise PassFailure(f"cannot add Const '{name}': an op with that name already exists")
    return graph.create_op("Const", name, attrs={"dtype": dtype, "value": tf_encoded_tensor(array, dtype)},
                           control_deps=control_deps, before=before, after=after)


def quantize_const(graph: Graph, const: Op, values: np.ndarray) -> Op:
    """Replace `const` by quint8/min/max Consts and a Dequantize that takes its name; returns the Dequantize."""
    lo, hi = weight_range(values)
    deps = const.control_deps
    parts = [
        new_const(graph, f"{const.name}_quantized_const", float_to_quint8(values, lo, hi), DType.QUINT8, const, deps),
        new_const(graph, f"{const.name}_quantized_min", np.float32(lo), DType.FLOAT, const, deps),
        new_const(graph, f"{const.name}_quantized_max", np.float32(hi), DType.FLOAT, const, deps),
    ]
    dequantize = graph.create_op("Dequantize", graph.unique_name(f"{const.name}/_dequantize"),
                                 operands=[p.result for p in parts],
                                 attrs={"T": DType.QUINT8, "mode": "MIN_FIRST"}, before=const)
    take_place(graph, const, dequantize)
    return dequantize


__all__ = ["QuantizeWeights", "checked_const_value", "float_elements", "float_to_quint8", "new_const",
           "quantize_const", "round_half_away", "tf_encoded_tensor", "weight_range"]
