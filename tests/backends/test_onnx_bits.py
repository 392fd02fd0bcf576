"""Bucketize and Keras' Bitcast sign-bit test in ONNX (neither exists there; tf2onnx fails on both).

Each export passes the full checker and matches gttc's interpreter exactly (the results are
integers and bools); the kernels themselves are tested against TF in the runtime tests.
"""
from __future__ import annotations

import numpy as np
import pytest

from compiler.backends.onnx import UnsupportedOpError, export_with_report
from compiler.backends.onnx.sign_bit import count_sign_bit_tests
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
    assert count_sign_bit_tests(b.graph) == 1
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
