"""Bucketize, sorted search (Lower/UpperBound), InTopK and Keras' Bitcast sign-bit test in ONNX (none
exists there; tf2onnx fails on Bucketize, Bitcast and Keras' searchsorted and in_top_k models).

Each export passes the full checker and matches gttc's interpreter exactly (the results are
integers and bools); the kernels themselves are tested against TF in the runtime tests.
"""
from __future__ import annotations

import numpy as np
import pytest

from compiler.backends.onnx import UnsupportedOpError, export_with_report
from compiler.backends.onnx.sign_bit import find_sign_bit_tests
from compiler.ir.dtypes import DType
from compiler.ir.graph import Value
from tests.backends.test_onnx_added_ops import check
from tests.backends.test_onnx_export import Builder

SPECIALS = [np.nan, -np.inf, np.inf, -0.0, 0.0, -0.5, 0.5, 2.0]


def _floats(shape, dtype=np.float32) -> np.ndarray:
    values = np.random.default_rng(5).uniform(-3, 3, shape).astype(dtype)
    values.reshape(-1)[:len(SPECIALS)] = SPECIALS
    return values


# -- Bucketize ---------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [DType.FLOAT, DType.DOUBLE])
def test_bucketize_counts_boundaries_including_ties_and_nan(dtype):
    b = Builder()
    y = b("Bucketize", b.input("x", [3, 5], dtype), boundaries=[-0.5, 0.0, 0.5, 2.0])
    counts = check(b, {"x": _floats((3, 5), dtype.to_numpy())}, [y])
    assert counts == {"Unsqueeze": 1, "Less": 1, "Not": 1, "Cast": 1, "ReduceSum": 1}


def test_bucketize_of_integers_compares_them_as_float():
    b = Builder()
    y = b("Bucketize", b.input("x", [7], DType.INT32), boundaries=[-1.5, 0.0, 3.0])
    check(b, {"x": np.arange(-3, 4, dtype=np.int32)}, [y])


def test_bucketize_of_a_bool_is_refused():
    b = Builder()
    y = b("Bucketize", b.input("x", [2], DType.BOOL), boundaries=[0.5])
    with pytest.raises(UnsupportedOpError, match=r"Bucketize of"):
        export_with_report(b.graph, ["x"], [y.name])


# -- sorted search and in-top-k -----------------------------------------------------------------------
@pytest.mark.parametrize("op", ["LowerBound", "UpperBound"])
@pytest.mark.parametrize("dtype, out_type", [(DType.FLOAT, DType.INT32), (DType.INT32, DType.INT64)])
def test_sorted_search_counts_like_a_binary_search(op, dtype, out_type):
    rng = np.random.default_rng(8)
    rows = np.sort(rng.integers(-4, 5, (3, 6)), axis=1).astype(dtype.to_numpy())
    values = rng.integers(-5, 6, (3, 4)).astype(dtype.to_numpy())
    if dtype == DType.FLOAT:
        values[0, :3] = [np.nan, np.inf, -np.inf]
    b = Builder()
    y = b(op, b.input("rows", [3, 6], dtype), b.input("values", [3, 4], dtype), out_type=out_type)
    counts = check(b, {"rows": rows, "values": values}, [y])
    assert counts["ReduceSum"] == 1 and counts["Less"] == 1


@pytest.mark.parametrize("opset", [13, 17])
def test_in_top_k_with_ties_non_finite_rows_and_bad_targets(opset):
    """At opset 13 too, where Shape has no start and end of its own."""
    predictions = np.asarray([[0.1, 0.5, 0.5, 0.2], [0.3, np.nan, 0.1, 0.9], [0.4, 0.3, np.inf, 0.0],
                              [0.2, 0.2, 0.2, 0.2], [0.9, 0.8, 0.7, 0.6]], np.float32)
    b = Builder()
    scores, targets = b.input("p", [None, 4]), b.input("t", [None], DType.INT64)
    dynamic = b("InTopKV2", scores, targets, b.input("k", [], DType.INT64))
    fixed = b("InTopK", scores, b("Cast", targets, SrcT=DType.INT64, DstT=DType.INT32), k=2)
    for index, k in (([2, 1, 2, 3, 3], 1), ([1, 0, 0, 0, 4], 2), ([3, 3, 1, 2, -1], 4), ([0, 0, 0, 0, 0], 0)):
        check(b, {"p": predictions, "t": np.asarray(index, np.int64), "k": np.asarray(k, np.int64)}, [dynamic, fixed],
              opset=opset)


# -- sign bit ------------------------------------------------------------------------------------
def _sign_bit(b: Builder, x: Value, int_type: DType, mask_first: bool = False) -> Value:
    bits = b("Bitcast", x, type=int_type)
    mask = b.const(np.asarray(np.iinfo(int_type.to_numpy()).min, int_type.to_numpy()))
    masked = b("BitwiseAnd", mask, bits) if mask_first else b("BitwiseAnd", bits, mask)
    return b("Less", masked, b.const(np.asarray(0, int_type.to_numpy())))


@pytest.mark.parametrize("dtype, int_type", [(DType.FLOAT, DType.INT32), (DType.DOUBLE, DType.INT64)])
@pytest.mark.parametrize("mask_first", [False, True])
def test_sign_bit_test_becomes_a_comparison(dtype, int_type, mask_first):
    b = Builder()
    x = b.input("x", [2, 6], dtype)
    y = _sign_bit(b, x, int_type, mask_first)
    assert len(find_sign_bit_tests(b.graph)) == 1
    values = _floats((2, 6), dtype.to_numpy())
    values[np.isnan(values)] = 1.0  # a NaN's sign is the one thing the comparison cannot read
    counts = check(b, {"x": values}, [y])
    assert "BitwiseAnd" not in counts and counts["Less"] == 1


def test_keras_argmax_of_negative_zero():
    """Keras' argmax: where(x == 0 and signbit(x), -tiny, x), then ArgMax."""
    b = Builder()
    x = b.input("x", [2, 4])
    negative_zero = b("LogicalAnd", b("Equal", x, b.const(np.float32(0))), _sign_bit(b, x, DType.INT32))
    moved = b("SelectV2", negative_zero, b.const(np.float32(-np.finfo(np.float32).tiny)), x)
    y = b("ArgMax", moved, b.const(np.int32(1)), output_type=DType.INT32)
    check(b, {"x": np.asarray([[-0.0, 0.0, -1.0, -0.0], [-2.0, -0.0, -3.0, -1.0]], np.float32)}, [y])


def test_a_bitcast_read_some_other_way_still_has_no_lowering():
    b = Builder()
    x = b.input("x", [3])
    y = b("BitwiseAnd", b("Bitcast", x, type=DType.INT32), b.const(np.int32(255)))
    with pytest.raises(UnsupportedOpError, match=r"'Bitcast'"):
        export_with_report(b.graph, ["x"], [y.name])
