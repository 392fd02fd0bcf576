"""QDQ conv groups completed at export (compiler/backends/onnx/qdq_weights.py).

A folded QAT weight becomes int8 codes plus a per-channel DequantizeLinear, and a Relu6 between
the conv and its QuantizeLinear moves behind it as a Clip on the codes.  Both are exact, which
the tests check by running the graph before and after the rewrite with onnxruntime's graph
optimizations off; with them on (the default), the group must fuse into QLinearConv and still
give the interpreter's numbers.  The tests export `--onnx-quant=qdq`, the form the completion
writes; the default `qlinear` format then spells the fused group out (last test).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from compiler.backends.onnx import export_with_report
from compiler.backends.onnx.qdq_weights import channel_grid, complete_qdq
from compiler.ir.graph import Value
from compiler.runtime.interpreter import Interpreter
from tests.backends.test_onnx_export import Builder


# -- finding the grid --------------------------------------------------------------------------
def _folded_weights(rng, shape, axis: int) -> np.ndarray:
    """Per-tensor fake-quantized weights times a per-channel batch-norm scale, as -O2 folds them."""
    step = np.float32(0.013)
    codes = rng.integers(-127, 128, shape).astype(np.float32)
    channel_scale = rng.uniform(0.2, 3.0, shape[axis]).astype(np.float32)
    broadcast = [1] * len(shape)
    broadcast[axis] = -1
    return (codes * step) * channel_scale.reshape(broadcast)


@pytest.mark.parametrize("shape, axis", [((8, 3, 3, 3), 0), ((5, 7), 1), ((6, 1, 3, 3), 0)])
def test_channel_grid_recovers_folded_weights(shape, axis: int):
    weights = _folded_weights(np.random.default_rng(len(shape)), shape, axis)
    scale, codes = channel_grid(weights, axis)
    assert codes.dtype == np.int8 and codes.shape == weights.shape and scale.shape == (shape[axis],)
    broadcast = [1] * len(shape)
    broadcast[axis] = -1
    back = codes.astype(np.float32) * scale.reshape(broadcast)
    assert np.abs(back - weights).max() <= 1e-6 * np.abs(weights).max()


def test_channel_grid_keeps_zero_slices_and_refuses_float_weights():
    weights = _folded_weights(np.random.default_rng(0), (4, 2, 3, 3), 0)
    weights[2] = 0
    scale, codes = channel_grid(weights, 0)
    assert scale[2] == 1 and not codes[2].any()
    trained = np.random.default_rng(1).standard_normal((4, 2, 3, 3)).astype(np.float32)
    assert channel_grid(trained, 0) is None
    assert channel_grid(np.full((2, 2), np.nan, np.float32), 0) is None


# -- the export ----------------------------------------------------------------------------------
def _qat_conv(rng, out_range: tuple[float, float], weights: np.ndarray,
              activation: str = "Relu6") -> tuple[Builder, Value]:
    """Keras QAT's conv block after -O2: FakeQuant(x) -> Conv2D(folded weights) -> BiasAdd ->
    activation -> FakeQuant with the trained output range."""
    b = Builder()
    x = b("FakeQuantWithMinMaxVars", b.input("x", [1, 6, 6, 3]), b.const(np.float32(-2.0)), b.const(np.float32(2.5)))
    y = b("Conv2D", x, b.const(weights), strides=[1, 1, 1, 1], padding="SAME")
    y = b("BiasAdd", y, b.const(rng.uniform(-0.5, 0.5, weights.shape[-1]).astype(np.float32)))
    if activation:
        y = b(activation, y)
    lo, hi = out_range
    return b, b("FakeQuantWithMinMaxVars", y, b.const(np.float32(lo)), b.const(np.float32(hi)))


def _hwio(rng) -> np.ndarray:
    return _folded_weights(rng, (3, 3, 3, 8), 3)


def _session(model: onnx.ModelProto, optimized: bool, save_to: str = "") -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    if not optimized:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    if save_to:
        options.optimized_model_filepath = save_to
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _run(session: ort.InferenceSession, x: np.ndarray) -> np.ndarray:
    return session.run(None, {session.get_inputs()[0].name: x})[0]


def _inputs(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-2.5, 3.0, (1, 6, 6, 3)).astype(np.float32)


def test_qat_conv_gets_int8_weights_and_clips_its_codes(tmp_path: Path):
    rng = np.random.default_rng(7)
    b, out = _qat_conv(rng, (-5.9, 6.1), _hwio(rng))  # a trained range wider than Relu6: the Clip stays
    result = export_with_report(b.graph, ["x"], [out.name], quant_format="qdq")
    stats, model = result.report.stats, result.model
    assert stats["qdq_int8_weights"] == 1 and stats["qdq_activation_after_quantize"] == 1
    conv = next(n for n in model.graph.node if n.op_type == "Conv")
    weight_dq = next(n for n in model.graph.node if n.output[0] == conv.input[1])
    assert weight_dq.op_type == "DequantizeLinear"
    ops = [n.op_type for n in model.graph.node]
    assert ops[-4:] == ["QuantizeLinear", "Clip", "DequantizeLinear", "Transpose"]  # the Transpose: back to NHWC

    x = _inputs(1)
    expected = Interpreter(b.graph).run({"x": x}, [out.name])[out.name]
    optimized = tmp_path / "optimized.onnx"
    fused = _run(_session(model, True, str(optimized)), x)
    np.testing.assert_array_equal(fused, expected)
    assert "QLinearConv" in {n.op_type for n in onnx.load(optimized).graph.node}


@pytest.mark.parametrize("activation, out_range, moved", [
    ("Relu6", (-5.9, 6.1), "activation_after_quantize"), ("Relu", (-1.0, 4.0), "activation_after_quantize"),
    ("Relu6", (0.0, 6.0), "dropped_activation"), ("Relu", (0.0, 4.0), "dropped_activation"), ("", (-3.0, 3.0), "")])
def test_rewrite_is_exact(activation: str, out_range, moved: str):
    """Completed and plain models agree bit for bit when onnxruntime runs them as written."""
    rng = np.random.default_rng(3)
    b, out = _qat_conv(rng, out_range, _hwio(rng), activation)
    completed = export_with_report(b.graph, ["x"], [out.name], quant_format="qdq")
    plain = _without_completion(b, out)
    assert completed.report.stats["qdq_int8_weights"] == 1
    moves = {key: n for key, n in completed.report.stats.items() if key.endswith("activation")
             or key.endswith("after_quantize")}
    assert moves == ({f"qdq_{moved}": 1} if moved else {})
    completed_run, plain_run = _session(completed.model, False), _session(plain, False)
    for seed in range(5):
        x = _inputs(seed)
        np.testing.assert_array_equal(_run(completed_run, x), _run(plain_run, x))


def _without_completion(b: Builder, out: Value) -> onnx.ModelProto:
    """The export as it was before completion: the exporter's model with complete_qdq made a no-op."""
    import compiler.backends.onnx.exporter as exporter

    original = exporter.complete_qdq
    exporter.complete_qdq = lambda model, check=True: (model, {})
    try:
        return export_with_report(b.graph, ["x"], [out.name], quant_format="qdq").model
    finally:
        exporter.complete_qdq = original


def test_conv_behind_a_max_pool_is_completed():
    """onnxruntime moves a Q/DQ pair across MaxPool (and gives each reader of a DQ its own) before it
    requantizes weights, so a conv reading a pooled DequantizeLinear is a group too."""
    rng = np.random.default_rng(13)
    b = Builder()
    x = b("FakeQuantWithMinMaxVars", b.input("x", [1, 6, 6, 3]), b.const(np.float32(-2.0)), b.const(np.float32(2.5)))
    pooled = b("MaxPool", x, ksize=[1, 2, 2, 1], strides=[1, 1, 1, 1], padding="SAME")
    y = b("Relu6", b("Conv2D", pooled, b.const(_hwio(rng)), strides=[1, 1, 1, 1], padding="SAME"))
    out = b("FakeQuantWithMinMaxVars", y, b.const(np.float32(-5.9)), b.const(np.float32(6.1)))
    skip = b("Relu", x)  # a second reader of the input's DequantizeLinear
    result = export_with_report(b.graph, ["x"], [out.name, skip.name], quant_format="qdq")
    assert result.report.stats["qdq_int8_weights"] == 1
    x_value = _inputs(2)
    expected = Interpreter(b.graph).run({"x": x_value}, [out.name])[out.name]
    session = _session(result.model, True)
    got = session.run(None, {session.get_inputs()[0].name: x_value})[0]
    np.testing.assert_array_equal(got, expected)


def test_folded_activation_is_dropped():
    """A trained Relu6 range of exactly [0, 6] quantizes to the type's limits: the Clip is a no-op."""
    rng = np.random.default_rng(5)
    b, out = _qat_conv(rng, (0.0, 6.0), _hwio(rng))
    result = export_with_report(b.graph, ["x"], [out.name], quant_format="qdq")
    assert result.report.stats["qdq_dropped_activation"] == 1
    assert "Clip" not in result.report.op_counts


def test_weights_on_no_grid_stay_float():
    rng = np.random.default_rng(9)
    trained = rng.standard_normal((3, 3, 3, 8)).astype(np.float32)
    b, out = _qat_conv(rng, (-5.9, 6.1), trained)
    result = export_with_report(b.graph, ["x"], [out.name], quant_format="qdq")
    stats = result.report.stats
    assert stats["qdq_float_weights_left"] == 1 and "qdq_int8_weights" not in stats
    assert result.report.op_counts["DequantizeLinear"] == 2  # the two activations only


def test_float_models_are_untouched():
    rng = np.random.default_rng(2)
    b = Builder()
    y = b("Conv2D", b.input("x", [1, 6, 6, 3]), b.const(_hwio(rng)), strides=[1, 1, 1, 1], padding="SAME")
    model = export_with_report(b.graph, ["x"], [b("Relu6", y).name], quant_format="qdq").model
    completed, counts = complete_qdq(model)
    assert completed is model and not counts


@pytest.mark.parametrize("quant_format", ["qlinear", "qoperator"])
def test_qlinear_formats_fuse_the_completed_group(quant_format: str):
    """The default format writes the completed group as one QLinearConv (ONNX's own operator)."""
    rng = np.random.default_rng(11)
    b, out = _qat_conv(rng, (-5.9, 6.1), _hwio(rng))
    result = export_with_report(b.graph, ["x"], [out.name], quant_format=quant_format)
    assert result.report.stats[f"{quant_format}_QLinearConv"] == 1
    assert result.report.op_counts == {"QuantizeLinear": 1, "QLinearConv": 1, "Clip": 1, "DequantizeLinear": 1,
                                       "Transpose": 2}
    x = _inputs(4)
    expected = Interpreter(b.graph).run({"x": x}, [out.name])[out.name]
    np.testing.assert_array_equal(_run(_session(result.model, True), x), expected)
