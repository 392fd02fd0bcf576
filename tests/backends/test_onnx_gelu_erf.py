"""GELU's Erfc exports as `1 - Erf` (2 nodes, not the general Erfc's ~30), or as `1 + Erf` without
the Neg in front, within float32 resolution of the layer's output; an Erfc that is not GELU's keeps
the exact lowering."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

from compiler.backends.onnx import export_with_report
from compiler.backends.onnx.gelu_erf import find_gelu_erfcs
from compiler.runtime.interpreter import Interpreter
from compiler.runtime.onnx_runner import run_onnx
from tests.backends.test_onnx_export import Builder

SQRT_HALF = np.float32(np.sqrt(0.5))


def _gelu(b: Builder, x, form: str):
    """TF's exact GELU, 0.5 * x * erfc(-x / sqrt(2)), in the spellings TF and Keras emit."""
    if form == "neg":   # tf.nn.gelu: Mul(Neg(x), 1/sqrt2)
        z = b("Mul", b("Neg", x), b.const(SQRT_HALF))
    else:               # a negative constant instead of Neg
        z = b("Mul", b.const(-SQRT_HALF), x)
    return b("Mul", b("Mul", x, b.const(np.float32(0.5))), b("Erfc", z, name="erfc"), name="gelu")


def _export_and_run(b: Builder, out, feeds):
    want = Interpreter(b.graph).run(feeds, [out.name])[out.name]
    result = export_with_report(b.graph, list(feeds), [out.name])
    onnx.checker.check_model(result.model, full_check=True)
    return want, run_onnx(result.model, feeds, [out.name])[out.name], result.report


@pytest.mark.parametrize("form", ["neg", "negative_constant"])
def test_gelu_matches_across_the_range(form: str) -> None:
    b = Builder()
    x = b.input("x", [4001])
    out = _gelu(b, x, form)
    feeds = {"x": np.linspace(-12, 12, 4001, dtype=np.float32)}
    want, got, report = _export_and_run(b, out, feeds)
    assert report.stats["gelu_erf"] == 1
    assert report.op_counts.get("Erf") == 1 and report.node_count == 5, report.summary()
    assert "Neg" not in report.op_counts and report.op_counts.get("Add" if form == "neg" else "Sub") == 1
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6 * np.abs(want).max())


def test_tf_gelu_is_the_division_onnxruntime_fuses(tmp_path) -> None:
    """x * (1/sqrt 2) is written x / sqrt 2, which onnxruntime fuses into its one Gelu kernel."""
    import onnxruntime as ort
    from onnx import numpy_helper

    b = Builder()
    x = b.input("x", [3, 64])
    out = _gelu(b, x, "neg")
    feeds = {"x": np.linspace(-12, 12, 192, dtype=np.float32).reshape(3, 64)}
    want, got, report = _export_and_run(b, out, feeds)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6 * np.abs(want).max())
    model = export_with_report(b.graph, ["x"], [out.name]).model
    constants = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    div = next(n for n in model.graph.node if n.op_type == "Div")
    assert div.input[0] == "x" and constants[div.input[1]] == np.float32(np.sqrt(2))
    options = ort.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    options.log_severity_level = 3
    ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    assert [n.op_type for n in onnx.load(options.optimized_model_filepath).graph.node] == ["Gelu"]


def test_a_negation_read_elsewhere_stays() -> None:
    b = Builder()
    x = b.input("x", [401])
    negated = b("Neg", x)
    z = b("Mul", negated, b.const(SQRT_HALF))
    gelu = b("Mul", b("Mul", x, b.const(np.float32(0.5))), b("Erfc", z))
    out = b("Add", gelu, negated)
    want, got, report = _export_and_run(b, out, {"x": np.linspace(-9, 9, 401, dtype=np.float32)})
    assert report.op_counts.get("Neg") == 1 and report.op_counts.get("Add") == 2
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6 * np.abs(want).max())


def test_an_erfc_read_by_something_else_keeps_the_exact_lowering() -> None:
    b = Builder()
    x = b.input("x", [64])
    out = b("Mul", b("Erfc", x), b.const(np.float32(3.0)))
    feeds = {"x": np.linspace(0, 9, 64, dtype=np.float32)}
    want, got, report = _export_and_run(b, out, feeds)
    assert "gelu_erf" not in report.stats and "Erf" not in report.op_counts
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=0)  # erfc(9) ~ 4e-37 still has its digits


def test_the_argument_must_be_minus_k_times_the_same_x() -> None:
    b = Builder()
    x, y = b.input("x", [4]), b.input("y", [4])
    z = b("Mul", b("Neg", y), b.const(SQRT_HALF))
    b("Mul", x, b("Erfc", z))
    positive = b("Mul", x, b.const(SQRT_HALF))
    b("Mul", x, b("Erfc", positive))
    assert len(find_gelu_erfcs(b.graph)) == 0
    gelu = _gelu(b, x, "neg")
    assert len(find_gelu_erfcs(b.graph)) == 1
    assert len(find_gelu_erfcs(b.graph, {gelu.op.operands[1].op.name})) == 0  # a named output stays
