"""Chains of constant scalings and shifts export as at most one Mul and one Add.

gttc's interpreter on the unrewritten graph is the reference.  The rewrite
regroups the constants (computed in float64, rounded once), so outputs agree to
a few units in the last place of the terms: 1e-6 of the output's magnitude here.
The TF-marked case freezes Keras' Rescaling and Normalization layers.
"""
from __future__ import annotations

import numpy as np
import onnx
import pytest

from compiler.backends.onnx import export_with_report
from compiler.backends.onnx.affine_chains import find_chains
from compiler.ir.dtypes import DType
from compiler.ir.graph import Value
from compiler.runtime.interpreter import Interpreter
from compiler.runtime.onnx_runner import run_onnx
from tests.backends.keras_export import assert_matches_keras, export_keras, keras_seeded
from tests.backends.test_onnx_export import Builder

RNG = np.random.default_rng(43)


def _floats(*shape) -> np.ndarray:
    return RNG.uniform(0.5, 2.0, shape).astype(np.float32)


def _exported(b: Builder, feed: np.ndarray, out: Value):
    want = Interpreter(b.graph).run({"x": feed}, [out.name])[out.name]
    result = export_with_report(b.graph, ["x"], [out.name])
    onnx.checker.check_model(result.model, full_check=True)
    got = run_onnx(result.model, {"x": feed}, [out.name])[out.name]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6 * np.abs(want).max())
    return result


def test_rescaling_then_normalization_is_one_mul_and_one_add():
    b = Builder()
    x = b.input("x", [2, 4, 4, 3])
    h = b("AddV2", b("Mul", x, b.const(np.float32(1 / 127.5))), b.const(np.float32(-1)))
    out = b("RealDiv", b("Sub", h, b.const(_floats(1, 1, 1, 3))), b.const(_floats(1, 1, 1, 3)), name="out")
    result = _exported(b, RNG.uniform(0, 255, (2, 4, 4, 3)).astype(np.float32), out)
    assert result.report.op_counts == {"Mul": 1, "Add": 1} and result.report.stats["affine_chains"] == 1
    assert [o.name for o in result.model.graph.output] == ["out"]


def test_shifts_merge_and_a_constant_minus_x_flips_the_sign():
    b = Builder()
    x = b.input("x", [3, 5])
    shifted = b("Sub", b("AddV2", x, b.const(_floats(5))), b.const(np.float32(0.25)))
    assert _exported(b, _floats(3, 5), shifted).report.op_counts == {"Add": 1}
    b = Builder()
    x = b.input("x", [3, 5])
    flipped = b("Mul", b("Sub", b.const(np.float32(3)), b("Add", x, b.const(_floats(3, 1)))), b.const(_floats(5)))
    assert _exported(b, _floats(3, 5), flipped).report.op_counts == {"Mul": 1, "Add": 1}


def test_an_identity_that_broadcasts_keeps_the_shape():
    b = Builder()
    x = b.input("x", [2, 3])
    widened = b("Sub", b("AddV2", x, b.const(np.zeros((4, 2, 3), np.float32))), b.const(np.float32(0)))
    assert _exported(b, _floats(2, 3), widened).report.op_counts == {"Add": 1}


def test_chains_that_gain_nothing_or_leak_stay():
    b = Builder()
    x = b.input("x", [2, 3])
    b("AddV2", b("Mul", x, b.const(_floats(3))), b.const(_floats(3)))      # already x * A + B
    b("RealDiv", b.const(_floats(3)), b("AddV2", x, b.const(_floats(3))))  # c / x: not affine
    read_twice = b("AddV2", x, b.const(_floats(3)))
    b("Sub", b("AddV2", read_twice, b.const(_floats(3))), b("Relu", read_twice))
    assert not find_chains(b.graph)
    b = Builder()
    x = b.input("x", [2, 3])
    inner = b("AddV2", x, b.const(_floats(3)), name="inner")
    b("Sub", inner, b.const(_floats(3)))
    assert len(find_chains(b.graph)) == 1 and not find_chains(b.graph, {"inner"})
    b = Builder()
    i = b.input("x", [2, 3], dtype=DType.INT32)
    b("Sub", b("AddV2", i, b.const(np.int32(2))), b.const(np.int32(1)))  # integers: exact already
    assert not find_chains(b.graph)


def test_constants_that_cannot_combine_leave_the_chain_alone():
    """Shapes that do not broadcast (TF would fail at run time) or a division by zero."""
    b = Builder()
    x = b.input("x", [2, 3])
    b("Sub", b("AddV2", x, b.const(_floats(3))), b.const(_floats(4)))
    b("Mul", b("RealDiv", x, b.const(np.zeros(3, np.float32))), b.const(_floats(3)))
    assert not find_chains(b.graph)


def test_an_attention_mask_keeps_its_small_bias():
    """`bias + (1 - mask) * -1e9` (T5's decoder): folded, B = bias - 1e9 rounds the bias away
    where the mask is 1; op by op the bias is added to an exact 0 and comes out exact."""
    b = Builder()
    mask = b.input("x", [2, 1, 4, 4])
    bias = RNG.uniform(-1, 1, (1, 2, 4, 4)).astype(np.float32)
    scores = b("AddV2", b.const(bias), b("Mul", b("Sub", b.const(np.float32(1)), mask), b.const(np.float32(-1e9))))
    assert not find_chains(b.graph)
    feed = np.tril(np.ones((4, 4), np.float32))[None, None].repeat(2, 0)
    got = run_onnx(export_with_report(b.graph, ["x"], [scores.name]).model, {"x": feed}, [scores.name])[scores.name]
    np.testing.assert_array_equal(got[:, :, np.tril_indices(4)[0], np.tril_indices(4)[1]],
                                  np.broadcast_to(bias, got.shape)[:, :, np.tril_indices(4)[0], np.tril_indices(4)[1]])
    b = Builder()
    x = b.input("x", [2, 3])
    b("AddV2", b("Mul", b("Sub", b.const(np.float32(1)), x), b.const(np.float32(-4))), b.const(_floats(3)))
    assert len(find_chains(b.graph)) == 1  # terms of like size still combine


@pytest.mark.tf
def test_keras_preprocessing_frozen_matches_tf():
    keras = keras_seeded(10)
    inputs = keras.Input((6, 6, 3))
    hidden = keras.layers.Rescaling(1 / 255.0)(inputs)
    hidden = keras.layers.Normalization(mean=[0.4, 0.5, 0.6], variance=[0.05, 0.06, 0.07])(hidden)
    model = keras.Model(inputs, keras.layers.Conv2D(2, 3, padding="same")(hidden))
    exported = export_keras(model, (6, 6, 3))
    report = exported[0].report
    assert report.stats["affine_chains"] == 1 and "Sub" not in report.op_counts
    assert_matches_keras(model, exported, np.random.default_rng(5).uniform(0, 255, [1, 6, 6, 3]).astype(np.float32))
