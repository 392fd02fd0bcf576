#!/usr/bin/env python
"""Sweep element types through the ONNX backend: every (op, dtype) TF's OpDef allows, as a 1-op graph.

    python tools/onnx_dtype_sweep.py [--ops Relu,Add] [--dtypes int64,uint8] [--opset 17]

A fuzz run found Relu of int64 exporting a node onnxruntime has no kernel
for: the graph runs in TF, the model does not load.  This tool looks for that
class of bug systematically.  For each op type of the elementwise, activation,
reduction, simple array and comparison-count lowerings (ops_elementwise,
ops_nn, ops_reduce, ops_array, ops_comparison_counts, ops_morphology) and each
element type its OpDef allows, it builds a one-op graph (seeded data in the
op's domain), runs it with the NumPy runtime, exports it, loads and runs the
model in onnxruntime and compares.  Each cell is one of

    ok       onnxruntime equals the runtime (integers and bools exactly, floats
             within a per-type tolerance: 1e-5 float, 1e-9 double, 1e-2 half
             of the largest reference magnitude)
    refused  the export raises a clear UnsupportedOpError/OnnxExportError (fine)
    n/a      the runtime itself refuses the type (TF registers no CPU kernel either)
    LOAD     onnxruntime cannot load the model (bug)
    RUN      onnxruntime loads it but fails running it (bug)
    WRONG    different values, shape or type (bug)
    INVALID  the exported model fails ONNX's checker or shape inference (bug)
    CRASH    the export failed with something other than a clear refusal (bug)

The table is printed per op, then every non-ok cell with its message.  The exit
status is 1 when any bug cell is found.  `sweep()` is importable (the
regression tests run it at opsets 13, 17 and 21).  Complex, string and quantized types are not
swept (they have their own lowerings), nor is bfloat16 (onnxruntime's Python API
neither feeds nor returns it).
"""
from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Optional, Sequence

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

from compiler.backends.onnx import OnnxExportError, UnsupportedOpError, export_with_report  # noqa: E402
from compiler.ir.dtypes import DType  # noqa: E402
from compiler.ir.graph import Value  # noqa: E402
from compiler.ir.op_registry import op_def  # noqa: E402
from compiler.ir.shapes import Shape  # noqa: E402
from compiler.runtime.interpreter import Interpreter  # noqa: E402
from compiler.runtime.onnx_runner import OnnxRunner, OnnxRuntimeFailure  # noqa: E402
from tests.backends.test_onnx_export import Builder  # noqa: E402

DEFAULT_DTYPES = (DType.BOOL, DType.INT8, DType.INT16, DType.INT32, DType.INT64, DType.UINT8, DType.UINT16,
                  DType.UINT32, DType.UINT64, DType.HALF, DType.FLOAT, DType.DOUBLE)
BUGS = ("LOAD", "RUN", "WRONG", "INVALID", "CRASH")
_TOLERANCE = {DType.FLOAT: 1e-5, DType.DOUBLE: 1e-9, DType.HALF: 1e-2}


# -- data ---------------------------------------------------------------------------------
class Data:
    """Seeded arrays of one element type in a domain: 'any' (small values, and the type's extremes when
    `extremes`), 'positive', 'nonzero', 'unit' (|x| < 1), 'shift' (0 .. bits - 1), 'small' (0 .. 3)."""

    def __init__(self, dtype: DType, seed: int, extremes: bool) -> None:
        self.dtype, self.np = dtype, dtype.to_numpy()
        self.rng = np.random.default_rng(seed)
        self.extremes = extremes

    def __call__(self, shape: Sequence[int], domain: str = "any") -> np.ndarray:
        n = int(np.prod(shape))
        if self.dtype == DType.BOOL:
            return (self.rng.random(n) < 0.5).reshape(shape)
        values = self._floats(n, domain) if self.np.kind == "f" else self._ints(n, domain)
        return np.asarray(values).astype(self.np).reshape(shape)

    def _floats(self, n: int, domain: str) -> np.ndarray:
        if domain == "positive":
            return self.rng.uniform(0.25, 4.0, n)
        if domain == "unit":
            return self.rng.uniform(-0.9, 0.9, n)
        if domain == "small":
            return self.rng.integers(0, 4, n).astype(np.float64)
        values = np.round(self.rng.uniform(-4.0, 4.0, n), 2)
        if domain == "nonzero":
            values[np.abs(values) < 0.25] = 0.5
        return values

    def _ints(self, n: int, domain: str) -> np.ndarray:
        info = np.iinfo(self.np)
        signed = info.min < 0
        if domain == "shift":
            return self.rng.integers(0, info.bits, n)
        if domain == "small":
            return self.rng.integers(0, 4, n)
        if domain == "unit":
            return self.rng.integers(-1 if signed else 0, 2, n)
        low = 1 if domain in ("positive",) or (domain == "nonzero" and not signed) else (-9 if signed else 0)
        values = self.rng.integers(low, 10, n)
        if domain == "nonzero":
            values[values == 0] = 3
        if self.extremes and domain == "any" and n >= 4:
            values = values.astype(object)
            values[:2] = [info.max, info.min if signed else info.max - 1]
        return np.asarray([int(v) for v in values], dtype=object)


# -- recipes ------------------------------------------------------------------------------
@dataclass
class Case:
    """A one-op graph under construction: the builder, its feeds and the data source."""

    b: Builder
    data: Data
    feeds: dict

    def input(self, shape: Sequence[int], domain: str = "any", dtype: Optional[DType] = None,
              value: Optional[np.ndarray] = None) -> Value:
        """A placeholder fed seeded data of `domain` (or `value`) of the swept type (or `dtype`)."""
        name = f"x{len(self.feeds)}"
        dtype = dtype or self.data.dtype
        source = self.data if dtype == self.data.dtype else Data(dtype, 7 + len(self.feeds), False)
        self.feeds[name] = source(shape, domain) if value is None else np.asarray(value).astype(dtype.to_numpy())
        return self.b.input(name, list(shape), dtype)

    def const(self, array, dtype: Optional[DType] = None) -> Value:
        return self.b.const(array, dtype)


Recipe = Callable[[Case, DType, str], list]


def _unary(domain: str = "any", shape: Sequence[int] = (3, 4), **attrs) -> Recipe:
    return lambda c, t, op: [c.b(op, c.input(shape, domain), **attrs)]


def _binary(domain1: str = "any", domain0: str = "any") -> Recipe:
    """x [3, 4] against y [4] (a broadcast), and against y [3, 4]."""
    def build(c: Case, t: DType, op: str) -> list:
        x = c.input((3, 4), domain0)
        return [c.b(op, x, c.input((4,), domain1)), c.b(op, x, c.input((3, 4), domain1))]
    return build


I32 = DType.INT32


def _axes(values) -> np.ndarray:
    return np.asarray(values, np.int32)


def _reduce(c: Case, t: DType, op: str) -> list:
    x = c.input((2, 3, 4), "small" if op == "Prod" else "any")
    return [c.b(op, x, c.const(_axes([1])), keep_dims=False, Tidx=I32),
            c.b(op, x, c.const(_axes([0, 2])), keep_dims=True, Tidx=I32)]


def _arg(c: Case, t: DType, op: str) -> list:
    x = c.input((3, 5))
    return [c.b(op, x, c.const(np.int32(1)), Tidx=I32, output_type=DType.INT64),
            c.b(op, x, c.const(np.int32(0)), Tidx=I32, output_type=DType.INT32)]


def _scan(c: Case, t: DType, op: str) -> list:
    x = c.input((3, 4), "small" if op == "Cumprod" else "any")
    return [c.b(op, x, c.const(np.int32(1)), Tidx=I32), c.b(op, x, c.const(np.int32(0)), Tidx=I32, exclusive=True,
                                                              reverse=True)]


def _top_k(c: Case, t: DType, op: str) -> list:
    values, indices = c.b("TopKV2", c.input((3, 6)), c.const(np.int32(3)), sorted=True, Tk=I32, index_type=I32)
    return [values, indices]


def _bool_reduce(c: Case, t: DType, op: str) -> list:
    return [c.b(op, c.input((3, 4)), c.const(_axes([1])), keep_dims=False, Tidx=I32)]


def _clip(c: Case, t: DType, op: str) -> list:
    x = c.input((3, 4))
    lo, hi = (c.const(np.asarray(v).astype(t.to_numpy())) for v in ((1, 7) if t.to_numpy().kind == "u" else (-3, 5)))
    return [c.b(op, x, lo, hi), c.b(op, x, c.input((3, 4)), c.input((3, 4)))]


def _select(c: Case, t: DType, op: str) -> list:
    cond = c.input((3, 4), dtype=DType.BOOL)
    return [c.b(op, cond, c.input((3, 4)), c.input((3, 4)))]


def _add_n(c: Case, t: DType, op: str) -> list:
    return [c.b(op, c.input((3, 4)), c.input((3, 4)), c.input((3, 4)), N=3)]


def _pass(c: Case, t: DType, op: str) -> list:
    if op == "EnsureShape":
        return [c.b(op, c.input((3, 4)), shape=Shape.of([3, 4]))]
    return [c.b(op, c.input((3, 4)))]


def _bias_add(c: Case, t: DType, op: str) -> list:
    return [c.b(op, c.input((2, 3, 4)), c.input((4,)))]


def _matmul(c: Case, t: DType, op: str) -> list:
    if op == "MatMul":
        return [c.b(op, c.input((3, 4)), c.input((4, 2))), c.b(op, c.input((4, 3)), c.input((4, 2)), transpose_a=True)]
    if op == "BatchMatMulV3":
        return [c.b(op, c.input((2, 3, 4)), c.input((2, 4, 5)), Ta=t, Tb=t, Tout=t)]
    return [c.b(op, c.input((2, 3, 4)), c.input((2, 4, 5)))]


def _einsum(c: Case, t: DType, op: str) -> list:
    return [c.b(op, c.input((3, 4)), c.input((4, 2)), equation="ij,jk->ik", N=2)]


def _softmax(c: Case, t: DType, op: str) -> list:
    return [c.b(op, c.input((3, 4)))]


def _reshape(c: Case, t: DType, op: str) -> list:
    return [c.b(op, c.input((3, 4)), c.const(np.asarray([2, 6], np.int32)), Tshape=I32)]


def _squeeze(c: Case, t: DType, op: str) -> list:
    return [c.b(op, c.input((3, 1, 4)), squeeze_dims=[1])]


def _expand_dims(c: Case, t: DType, op: str) -> list:
    return [c.b(op, c.input((3, 4)), c.const(np.int32(1)), Tdim=I32)]


def _concat(c: Case, t: DType, op: str) -> list:
    if op == "Concat":
        return [c.b(op, c.const(np.int32(1)), c.input((3, 4)), c.input((3, 2)), N=2)]
    return [c.b(op, c.input((3, 4)), c.input((3, 2)), c.const(np.int32(1)), N=2, Tidx=I32)]


def _pack(c: Case, t: DType, op: str) -> list:
    return [c.b(op, c.input((3, 4)), c.input((3, 4)), N=2, axis=1)]


def _unpack(c: Case, t: DType, op: str) -> list:
    return list(c.b(op, c.input((3, 2)), num=2, axis=1))


def _transpose(c: Case, t: DType, op: str) -> list:
    return [c.b(op, c.input((2, 3, 4)), c.const(np.asarray([2, 0, 1], np.int32)), Tperm=I32)]


def _pad(c: Case, t: DType, op: str) -> list:
    pads = c.const(np.asarray([[1, 0], [0, 2]], np.int32))
    if op == "PadV2":
        value = c.const(np.asarray(1 if t != DType.BOOL else True).astype(t.to_numpy()))
        return [c.b(op, c.input((3, 4)), pads, value, Tpaddings=I32)]
    if op == "MirrorPad":
        return [c.b(op, c.input((3, 4)), pads, mode=mode, Tpaddings=I32) for mode in ("REFLECT", "SYMMETRIC")]
    return [c.b(op, c.input((3, 4)), pads, Tpaddings=I32)]


def _slice(c: Case, t: DType, op: str) -> list:
    x = c.input((3, 4))
    if op == "Slice":
        return [c.b(op, x, c.const(np.asarray([1, 0], np.int32)), c.const(np.asarray([2, -1], np.int32)), Index=I32)]
    begin, end, strides = (c.const(np.asarray(v, np.int32)) for v in ([0, 3], [3, 0], [2, -1]))
    return [c.b(op, x, begin, end, strides, Index=I32, begin_mask=0, end_mask=0, ellipsis_mask=0, new_axis_mask=0,
                shrink_axis_mask=0)]


def _gather(c: Case, t: DType, op: str) -> list:
    x = c.input((4, 3))
    if op == "GatherNd":
        return [c.b(op, x, c.const(np.asarray([[1, 2], [3, 0]], np.int32)), Tparams=t, Tindices=I32)]
    indices = c.const(np.asarray([2, 0, 2], np.int32))
    if op == "Gather":
        return [c.b(op, x, indices, Tparams=t, Tindices=I32)]
    return [c.b(op, x, indices, c.const(np.int32(1)), Tparams=t, Tindices=I32, Taxis=I32)]


def _fill(c: Case, t: DType, op: str) -> list:
    return [c.b(op, c.const(np.asarray([2, 3], np.int32)), c.input(()), index_type=I32, T=t)]


def _broadcast_to(c: Case, t: DType, op: str) -> list:
    return [c.b(op, c.input((1, 4)), c.const(np.asarray([3, 4], np.int32)), Tidx=I32)]


def _tile(c: Case, t: DType, op: str) -> list:
    return [c.b(op, c.input((2, 3)), c.const(np.asarray([2, 1], np.int32)), Tmultiples=I32)]


def _reverse(c: Case, t: DType, op: str) -> list:
    return [c.b(op, c.input((3, 4)), c.const(np.asarray([1], np.int32)), Tidx=I32)]


def _roll(c: Case, t: DType, op: str) -> list:
    return [c.b(op, c.input((3, 4)), c.const(np.int32(1)), c.const(np.int32(1)), Tshift=I32, Taxis=I32)]


def _split(c: Case, t: DType, op: str) -> list:
    if op == "Split":
        return list(c.b(op, c.const(np.int32(1)), c.input((3, 4)), num_split=2))
    return list(c.b(op, c.input((3, 4)), c.const(np.asarray([1, 3], np.int32)), c.const(np.int32(1)), num_split=2,
                    Tlen=I32))


def _one_hot(c: Case, t: DType, op: str) -> list:
    on, off = (np.asarray(v).astype(t.to_numpy()) for v in (1, 0))
    indices = c.input((4,), dtype=DType.INT32)
    return [c.b(op, indices, c.const(np.int32(5)), c.const(on), c.const(off), axis=-1, T=t, TI=I32)]


def _range(c: Case, t: DType, op: str) -> list:
    start, limit, delta = (c.input((), value=v) for v in (1, 9, 2))
    return [c.b(op, start, limit, delta, Tidx=t)]


def _shape(c: Case, t: DType, op: str) -> list:
    x = c.input((3, 4))
    if op == "ShapeN":
        return list(c.b(op, x, c.input((2,)), N=2, out_type=I32))
    return [c.b(op, x, out_type=I32), c.b(op, x, out_type=DType.INT64)]


def _where(c: Case, t: DType, op: str) -> list:
    return [c.b(op, c.input((3, 4)))]


def _unique(c: Case, t: DType, op: str) -> list:
    return list(c.b(op, c.input((8,), "small"), out_idx=I32))


def _list_diff(c: Case, t: DType, op: str) -> list:
    return list(c.b(op, c.input((8,), "small"), c.input((2,), "small"), out_idx=I32))


def _reverse_sequence(c: Case, t: DType, op: str) -> list:
    return [c.b(op, c.input((3, 4)), c.const(np.asarray([1, 4, 2], np.int32)), seq_dim=1, batch_dim=0, Tlen=I32)]


def _space_batch(c: Case, t: DType, op: str) -> list:
    blocks = c.const(np.asarray([2], np.int32))
    pairs = c.const(np.asarray([[1, 1]], np.int32))
    if op == "SpaceToBatchND":
        return [c.b(op, c.input((1, 4, 3)), blocks, pairs, Tblock_shape=I32, Tpaddings=I32)]
    return [c.b(op, c.input((2, 3, 3)), blocks, pairs, Tblock_shape=I32, Tcrops=I32)]


def _invert_permutation(c: Case, t: DType, op: str) -> list:
    return [c.b(op, c.input((4,), value=[2, 0, 3, 1]))]


def _bucketize(c: Case, t: DType, op: str) -> list:
    return [c.b(op, c.input((3, 4)), boundaries=[-2.0, 0.0, 0.5, 3.0])]


def _bounds(c: Case, t: DType, op: str) -> list:
    rows = np.sort(c.data((2, 5)), axis=1)
    return [c.b(op, c.const(rows), c.input((2, 3)), out_type=I32)]


def _in_top_k(c: Case, t: DType, op: str) -> list:
    scores = c.input((3, 5), dtype=DType.FLOAT)
    targets = c.const(np.asarray([0, 4, 2]).astype(t.to_numpy()))
    if op == "InTopK":
        return [c.b(op, scores, targets, k=2)]
    return [c.b(op, scores, targets, c.const(np.asarray(2).astype(t.to_numpy())))]


def _nth_element(c: Case, t: DType, op: str) -> list:
    return [c.b(op, c.input((3, 5)), c.const(np.int32(1)), reverse=False)]


def _zeros_like(c: Case, t: DType, op: str) -> list:
    return [c.b(op, c.input((3, 4)))]


def _dilation(c: Case, t: DType, op: str) -> list:
    f = c.data((2, 2, 2))
    return [c.b(op, c.input((1, 5, 4, 2)), c.const(f), strides=[1, 1, 1, 1], rates=[1, 1, 1, 1], padding=padding)
            for padding in ("SAME", "VALID")]


def _cast(target: DType) -> Recipe:
    def build(c: Case, t: DType, op: str) -> list:
        domain = "positive" if target.to_numpy().kind in "ub" or t.to_numpy().kind == "u" else "any"
        if t.is_float and not target.is_float or t.to_numpy().itemsize > target.to_numpy().itemsize:
            domain = "small"  # out-of-range float -> int casts are undefined
        return [c.b("Cast", c.input((3, 4), domain), SrcT=t, DstT=target, Truncate=False)]
    return build


_DOMAINS = {"Log": "positive", "Sqrt": "positive", "Rsqrt": "positive", "Acosh": "positive",
            "Log1p": "positive", "Acos": "unit", "Asin": "unit", "Atanh": "unit", "Reciprocal": "nonzero",
            "Inv": "nonzero"}
_DIVISIONS = ("Div", "RealDiv", "TruncateDiv", "FloorDiv", "FloorMod", "DivNoNan", "Xdivy")
# Ops whose TF and ONNX results agree on the integer types' extremes (they wrap the same way or never overflow).
_EXTREMES_OK = frozenset({"Add", "AddV2", "Sub", "Mul", "Neg", "Abs", "Maximum", "Minimum", "Max", "Min", "Relu",
                          "Relu6", "Sign", "Square", "ClipByValue", "Greater", "GreaterEqual", "Less", "LessEqual",
                          "Equal", "NotEqual", "Select", "SelectV2", "Identity", "Snapshot", "StopGradient",
                          "ArgMax", "ArgMin", "TopKV2", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "Invert",
                          "LeftShift", "RightShift", "Round", "Rint", "Floor", "Ceil", "AddN", "Cumsum"})

UNARY_OPS = ("Abs", "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "Ceil", "Cos", "Cosh", "Elu", "Erf", "Erfc",
             "Exp", "Expm1", "Floor", "Inv", "IsFinite", "IsInf", "IsNan", "LeakyRelu", "Log", "Log1p", "LogicalNot",
             "Neg", "Reciprocal", "Relu", "Relu6", "Rint", "Round", "Rsqrt", "Selu", "Sigmoid", "Sign", "Sin",
             "Sinh", "Softplus", "Softsign", "Sqrt", "Square", "Tan", "Tanh", "Invert", "CheckNumerics",
             "CheckNumericsV2")
BINARY_OPS = ("Add", "AddV2", "Sub", "Mul", "RealDiv", "Div", "TruncateDiv", "FloorDiv", "FloorMod", "Maximum",
              "Minimum", "Pow", "Greater", "Less", "GreaterEqual", "LessEqual", "Equal", "NotEqual", "LogicalAnd",
              "LogicalOr", "SquaredDifference", "DivNoNan", "Xdivy", "Xlogy", "Atan2", "BitwiseAnd", "BitwiseOr",
              "BitwiseXor", "LeftShift", "RightShift")

RECIPES: dict[str, Recipe] = {}
RECIPES.update({op: _unary(_DOMAINS.get(op, "any")) for op in UNARY_OPS})
RECIPES.update({op: _binary("nonzero" if op in _DIVISIONS else "any") for op in BINARY_OPS})
RECIPES.update({"LeakyRelu": _unary(alpha=float(np.float32(0.2))),  # the float32 value a GraphDef carries
                "Pow": _binary("small", "small"), "Xlogy": _binary("positive"), "LeftShift": _binary("shift"),
                "RightShift": _binary("shift")})
RECIPES.update({op: _pass for op in ("Identity", "StopGradient", "PreventGradient", "Snapshot", "EnsureShape")})
RECIPES.update({"ClipByValue": _clip, "Select": _select, "SelectV2": _select, "AddN": _add_n})
RECIPES.update({op: _reduce for op in ("Sum", "Mean", "Max", "Min", "Prod")})
RECIPES.update({"ArgMax": _arg, "ArgMin": _arg, "Cumsum": _scan, "Cumprod": _scan, "TopKV2": _top_k,
                "All": _bool_reduce, "Any": _bool_reduce, "NthElement": _nth_element})
RECIPES.update({"BiasAdd": _bias_add, "BiasAddV1": _bias_add, "MatMul": _matmul, "BatchMatMul": _matmul,
                "BatchMatMulV2": _matmul, "BatchMatMulV3": _matmul, "Einsum": _einsum, "Softmax": _softmax,
                "LogSoftmax": _softmax})
RECIPES.update({"Reshape": _reshape, "Squeeze": _squeeze, "ExpandDims": _expand_dims, "ConcatV2": _concat,
                "Concat": _concat, "Pack": _pack, "Unpack": _unpack, "Transpose": _transpose, "Pad": _pad,
                "PadV2": _pad, "MirrorPad": _pad, "Slice": _slice, "StridedSlice": _slice, "Gather": _gather,
                "GatherV2": _gather, "GatherNd": _gather, "Fill": _fill, "BroadcastTo": _broadcast_to,
                "Tile": _tile, "ReverseV2": _reverse, "Roll": _roll, "Split": _split, "SplitV": _split,
                "OneHot": _one_hot, "Range": _range, "Shape": _shape, "ShapeN": _shape, "Size": _shape,
                "Where": _where, "Unique": _unique, "UniqueWithCounts": _unique, "ListDiff": _list_diff,
                "ReverseSequence": _reverse_sequence, "SpaceToBatchND": _space_batch,
                "BatchToSpaceND": _space_batch, "InvertPermutation": _invert_permutation,
                "ZerosLike": _zeros_like, "OnesLike": _zeros_like})
RECIPES.update({"Bucketize": _bucketize, "LowerBound": _bounds, "UpperBound": _bounds, "InTopK": _in_top_k,
                "InTopKV2": _in_top_k, "Dilation2D": _dilation})


# The type attribute each swept op is swept over, when not T.
_TYPE_ATTR = {"Range": "Tidx", "Gather": "Tparams", "GatherV2": "Tparams", "GatherNd": "Tparams",
              "BatchMatMulV3": "Ta"}


def allowed_types(op_type: str, candidates: Iterable[DType]) -> list[DType]:
    """The swept types the op's type attribute allows (T or the one named above; else its data
    operand's fixed type: All, Any, LogicalAnd take bools)."""
    definition = op_def(op_type)
    attr_name = _TYPE_ATTR.get(op_type, "T")
    if not any(a.name == attr_name for a in definition.attr):
        fixed = {DType(definition.input_arg[0].type)}
        return [t for t in candidates if t in fixed]
    attr = next(a for a in definition.attr if a.name == attr_name)
    allowed = {DType(v) for v in attr.allowed_values.list.type}
    return [t for t in candidates if not allowed or t in allowed]


# -- one cell ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Cell:
    op: str
    dtype: DType
    status: str
    detail: str = ""


def run_case(op: str, dtype: DType, opset: int = 17, seed: int = 0) -> Cell:
    """Build, reference-run, export, load and compare one (op, dtype)."""
    kind, target = (op.split(":") + [""])[:2]
    recipe = _cast(DType[target.upper()]) if kind == "Cast" else RECIPES[kind]
    case = Case(Builder(), Data(dtype, seed, extremes=kind in _EXTREMES_OK), {})
    try:
        outputs = recipe(case, dtype, kind)
    except Exception as err:  # noqa: BLE001 - the IR refuses the graph itself (a type the op cannot take)
        return Cell(op, dtype, "n/a", f"graph: {type(err).__name__}: {err}")
    names = [v.name for v in outputs]
    try:
        want = Interpreter(case.b.graph).run(dict(case.feeds), names)
    except Exception as err:  # noqa: BLE001 - the runtime refuses the type, as TF's kernels do
        return Cell(op, dtype, "n/a", f"runtime: {_line(err)}")
    try:
        model = export_with_report(case.b.graph, list(case.feeds), names, opset=opset).model
    except UnsupportedOpError as err:
        return Cell(op, dtype, "refused", _line(err))
    except OnnxExportError as err:
        text = _line(err)
        return Cell(op, dtype, "INVALID" if "fails the ONNX checker" in text or "shape inference" in text
                    else "refused", text)
    except Exception as err:  # noqa: BLE001 - anything else is an exporter bug
        return Cell(op, dtype, "CRASH", f"{type(err).__name__}: {_line(err)}")
    try:
        runner = OnnxRunner(model)
    except OnnxRuntimeFailure as err:
        return Cell(op, dtype, "LOAD", _line(err))
    try:
        got = runner.run(case.feeds, names)
    except OnnxRuntimeFailure as err:
        return Cell(op, dtype, "RUN", _line(err))
    for name in names:
        problem = _difference(np.asarray(want[name]), np.asarray(got[name]))
        if problem:
            return Cell(op, dtype, "WRONG", f"{name}: {problem}")
    return Cell(op, dtype, "ok")


def _difference(want: np.ndarray, got: np.ndarray) -> str:
    """Why `got` is not `want` ('' when it is)."""
    if want.shape != got.shape:
        return f"shape {list(got.shape)}, want {list(want.shape)}"
    if want.dtype != got.dtype:
        return f"type {got.dtype}, want {want.dtype}"
    if want.dtype.kind not in "fc":
        bad = np.flatnonzero(want.reshape(-1) != got.reshape(-1))
        return f"{bad.size} elements differ, e.g. {got.reshape(-1)[bad[0]]} for {want.reshape(-1)[bad[0]]}" \
            if bad.size else ""
    a, b = want.astype(np.float64), got.astype(np.float64)
    if (np.isnan(a) != np.isnan(b)).any():
        return "NaNs differ"
    finite = ~np.isnan(a)
    if (np.isinf(a[finite]) | np.isinf(b[finite])).any() and (a[finite] != b[finite])[np.isinf(a[finite])].any():
        return "infinities differ"
    ok = finite & np.isfinite(a)
    scale = max(float(np.abs(a[ok]).max()) if ok.any() else 0.0, 1e-30)
    error = float(np.abs(a[ok] - b[ok]).max() / scale) if ok.any() else 0.0
    tolerance = _TOLERANCE.get(_dtype_of(want), 1e-5)
    return f"max error {error:.2e} of the largest value (tolerance {tolerance:g})" if error > tolerance else ""


def _dtype_of(array: np.ndarray) -> Optional[DType]:
    for dtype in DEFAULT_DTYPES:
        if dtype.to_numpy() == array.dtype:
            return dtype
    return None


def _line(err: Exception) -> str:
    text = str(err).strip().splitlines()
    return text[0][:240] if text else type(err).__name__


# -- the sweep ----------------------------------------------------------------------------------
def case_names(ops: Optional[Sequence[str]] = None, dtypes: Sequence[DType] = DEFAULT_DTYPES) -> list[str]:
    """Every swept op (Cast once per target type, as `Cast:<type>`), or those named."""
    names = list(RECIPES) + [f"Cast:{t.name.lower()}" for t in dtypes]
    if ops is None:
        return names
    wanted = set(ops)
    return [n for n in names if n in wanted or n.split(":")[0] in wanted]


def sweep(ops: Optional[Sequence[str]] = None, dtypes: Sequence[DType] = DEFAULT_DTYPES, opset: int = 17) -> list[Cell]:
    cells = []
    for name in case_names(ops, dtypes):
        kind = name.split(":")[0]
        for dtype in (dtypes if kind == "Cast" else allowed_types(kind, dtypes)):
            cells.append(run_case(name, dtype, opset))
    return cells


def unswept_lowerings() -> list[str]:
    """Op types the swept modules lower that have no recipe (sources, queues: nothing to compute)."""
    from compiler.backends.onnx.registry import LOWERINGS

    modules = ("ops_elementwise", "ops_nn", "ops_reduce", "ops_array", "ops_comparison_counts", "ops_morphology")
    return sorted(op for op, fn in LOWERINGS.items()
                  if fn.__module__.rsplit(".", 1)[-1] in modules and op not in RECIPES and op != "Cast")


_SHORT = {"ok": "ok", "refused": "ref", "n/a": ".", "LOAD": "LOAD", "RUN": "RUN", "WRONG": "WRONG",
          "INVALID": "INVAL", "CRASH": "CRASH"}


def table(cells: Sequence[Cell], dtypes: Sequence[DType]) -> str:
    by_op: dict[str, dict[DType, Cell]] = {}
    for cell in cells:
        by_op.setdefault(cell.op, {})[cell.dtype] = cell
    width = max(len(op) for op in by_op) if by_op else 4
    header = "op".ljust(width) + " " + " ".join(t.name.lower()[:7].rjust(7) for t in dtypes)
    rows = [header]
    for op, found in by_op.items():
        rows.append(op.ljust(width) + " " + " ".join((_SHORT[found[t].status] if t in found else "-").rjust(7)
                                                     for t in dtypes))
    return "\n".join(rows)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", help="comma-separated op types (default: every swept op)")
    parser.add_argument("--dtypes", help="comma-separated type names (default: ints, bool, half, float, double)")
    parser.add_argument("--opset", type=int, default=17)
    args = parser.parse_args(argv)
    dtypes = DEFAULT_DTYPES
    if args.dtypes:
        dtypes = tuple(DType[name.strip().upper()] for name in args.dtypes.split(","))
    cells = sweep(args.ops.split(",") if args.ops else None, dtypes, args.opset)
    print(table(cells, dtypes))
    print()
    for cell in cells:
        if cell.status not in ("ok", "n/a"):
            print(f"{cell.status:8} {cell.op} {cell.dtype.name.lower()}: {cell.detail}")
    counts = {s: sum(c.status == s for c in cells) for s in ("ok", "refused", "n/a") + BUGS}
    print("\n" + ", ".join(f"{k}: {v}" for k, v in counts.items() if v))
    if not args.ops:
        print("not swept (nothing to compute): " + ", ".join(unswept_lowerings()))
    return 1 if any(c.status in BUGS for c in cells) else 0


if __name__ == "__main__":
    sys.exit(main())
