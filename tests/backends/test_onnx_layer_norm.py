"""Keras' LayerNormalization exports as one ONNX LayerNormalization node.

The IR cases spell the frozen pattern by hand (every variant the matcher takes,
and the ones it must leave alone); gttc's interpreter on the unfused graph is
the reference, to 1e-5 of the output's magnitude (the fused op sums in another
order).  The TF-marked case freezes real Keras layers and compares with TF.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import onnx
import pytest

from compiler.backends.onnx import export_with_report
from compiler.backends.onnx.layer_norm import find_layer_norms
from compiler.ir.graph import Value
from compiler.runtime.interpreter import Interpreter
from compiler.runtime.onnx_runner import run_onnx
from tests.backends.test_onnx_added_ops import ints
from tests.backends.keras_export import assert_matches_keras, export_keras, keras_seeded
from tests.backends.test_onnx_export import Builder

RNG = np.random.default_rng(31)
TOLERANCE = 1e-5


def _layer_norm(b: Builder, x: Value, axis: int, gamma: Optional[np.ndarray], beta: Optional[np.ndarray],
                subtract: bool = False, stop_gradient: bool = True) -> Value:
    """The frozen Keras spelling: x * s + (beta - mean * s), s = rsqrt(var + eps) * gamma."""
    mean = b("Mean", x, ints(b, [axis]), keep_dims=True, name="mean")
    centre = b("StopGradient", mean) if stop_gradient else mean
    var = b("Mean", b("SquaredDifference", x, centre), ints(b, [axis]), keep_dims=True, name="variance")
    s = b("Rsqrt", b("AddV2", var, b.const(np.float32(1e-3))))
    if gamma is not None:
        s = b("Mul", s, b.const(gamma))
    if subtract:
        shift = b("Sub", b.const(beta), b("Mul", mean, s))
    else:
        shift = b("Mul", b("Neg", mean), s)
        if beta is not None:
            shift = b("AddV2", shift, b.const(beta))
    return b("AddV2", b("Mul", x, s), shift, name="out")


def _export(b: Builder, x_shape, out: Value, opset: int = 17) -> dict[str, int]:
    feeds = {"x": RNG.standard_normal(x_shape).astype(np.float32) * 3 + 1}
    want = Interpreter(b.graph).run(feeds, [out.name])[out.name]
    result = export_with_report(b.graph, ["x"], [out.name], opset=opset)
    onnx.checker.check_model(result.model, full_check=True)
    got = run_onnx(result.model, feeds, [out.name])[out.name]
    np.testing.assert_allclose(got, want, rtol=0, atol=TOLERANCE * np.abs(want).max())
    return result.report.op_counts


@pytest.mark.parametrize("axis", [-1, 2])
@pytest.mark.parametrize("subtract", [False, True])
def test_keras_layer_norm_is_one_node(axis, subtract):
    b = Builder()
    x = b.input("x", [2, 5, 8])
    gamma = RNG.uniform(0.5, 2, (1, 1, 8)).astype(np.float32)
    beta = RNG.standard_normal(8).astype(np.float32)
    out = _layer_norm(b, x, axis, gamma, beta, subtract)
    assert _export(b, [2, 5, 8], out) == {"LayerNormalization": 1}


@pytest.mark.parametrize("gamma, beta", [(None, None), (np.float32(2.0), None), (None, np.ones(6, np.float32))])
def test_without_scale_or_centre(gamma, beta):
    b = Builder()
    out = _layer_norm(b, b.input("x", [3, 6]), -1, gamma, beta, stop_gradient=False)
    assert _export(b, [3, 6], out) == {"LayerNormalization": 1}


def test_below_opset_17_it_is_the_decomposition():
    b = Builder()
    out = _layer_norm(b, b.input("x", [2, 4]), -1, np.full(4, 1.5, np.float32), np.zeros(4, np.float32))
    counts = _export(b, [2, 4], out, opset=13)
    assert "LayerNormalization" not in counts and counts["ReduceMean"] == 2


def test_a_norm_over_another_axis_is_left_alone():
    b = Builder()
    out = _layer_norm(b, b.input("x", [2, 5, 8]), 1, None, None)
    assert not find_layer_norms(b.graph)
    assert "LayerNormalization" not in _export(b, [2, 5, 8], out)


def test_an_intermediate_read_elsewhere_keeps_the_pattern():
    b = Builder()
    x = b.input("x", [2, 8])
    out = _layer_norm(b, x, -1, np.ones(8, np.float32), np.zeros(8, np.float32))
    peek = b("Identity", b.graph.op("variance").results[0], name="peek")
    assert not find_layer_norms(b.graph)
    assert find_layer_norms(b.graph) == [] and peek.op.type == "Identity"
    assert "LayerNormalization" not in _export(b, [2, 8], out)


def test_the_output_keeps_its_name_and_the_caller_graph_is_untouched():
    b = Builder()
    out = _layer_norm(b, b.input("x", [2, 8]), -1, np.ones(8, np.float32), np.zeros(8, np.float32))
    before = sorted(op.type for op in b.graph)
    result = export_with_report(b.graph, ["x"], [out.name])
    assert [o.name for o in result.model.graph.output] == ["out"]
    assert result.report.stats["layer_norms"] == 1
    assert sorted(op.type for op in b.graph) == before


@pytest.mark.tf
def test_keras_layers_frozen_match_tf():
    keras = keras_seeded(8)
    inputs = keras.Input((5, 6))
    hidden = keras.layers.Dense(6)(inputs)
    hidden = keras.layers.LayerNormalization(epsilon=1e-5)(hidden)
    hidden = keras.layers.LayerNormalization(center=False)(keras.layers.Dense(4)(hidden))
    model = keras.Model(inputs, keras.layers.LayerNormalization(scale=False)(hidden))
    for layer in model.layers:  # non-trivial gamma and beta
        for weight in layer.weights:
            weight.assign(np.random.default_rng(len(weight.path)).uniform(0.5, 1.5, weight.shape))
    exported = export_keras(model, (5, 6))
    assert exported[0].report.op_counts["LayerNormalization"] == 3
    assert_matches_keras(model, exported, np.random.default_rng(3).uniform(-2, 2, [1, 5, 6]).astype(np.float32),
                         TOLERANCE)


def test_the_fused_op_runs_in_the_interpreter_as_the_pattern_does():
    """`_MklLayerNorm` has a runtime kernel: a graph TF's remapper already fused runs too."""
    b = Builder()
    x = b.input("x", [2, 5, 8])
    gamma, beta = RNG.uniform(0.5, 2, 8).astype(np.float32), RNG.standard_normal(8).astype(np.float32)
    pattern = _layer_norm(b, x, -1, gamma, beta)
    fused = b("_MklLayerNorm", x, b.const(gamma), b.const(beta), epsilon=1e-3)
    feeds = {"x": RNG.standard_normal((2, 5, 8)).astype(np.float32) * 3 + 1}
    got = Interpreter(b.graph).run(feeds, [pattern.name, fused.name])
    np.testing.assert_allclose(got[fused.name], got[pattern.name], rtol=0,
                               atol=TOLERANCE * np.abs(got[pattern.name]).max())


def test_an_output_other_ops_wait_on_hands_them_to_the_fused_op():
    """Fuzz case 2656 (seed 11): a NoOp control-depends on the layer norm's output."""
    b = Builder()
    out = _layer_norm(b, b.input("x", [2, 8]), -1, np.ones(8, np.float32), np.zeros(8, np.float32))
    b.graph.create_op("NoOp", "wait", control_deps=[out.op])
    assert find_layer_norms(b.graph)
    assert _export(b, [2, 8], out) == {"LayerNormalization": 1}
