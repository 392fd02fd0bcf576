"""quantize_activations: the float inputs of depthwise convs, adds, pools, concats and means get
QuantizeV2 -> Dequantize pairs, shared per value, with Softmax left in float unless asked."""
from __future__ import annotations

import numpy as np
import pytest

from compiler.api import compile as gttc_compile
from compiler.frontends.graphdef import load_graph_bytes
from compiler.ir.graph import Graph, Value
from compiler.passes.levels import TARGETS
from compiler.runtime.interpreter import run_graph
from tests.conftest import FIXTURES, load_model_fixture

# mobile-int8's quantizing passes (convolutions and matmuls in eight bits, the rest float), then the grid.
BEFORE = TARGETS["mobile-int8"].after.replace(" strip_unused_nodes sort_by_execution_order", "") + " symmetric_weights"


def _compiled(name: str, transforms: str, calibrated: bool = False) -> tuple[Graph, str]:
    model = load_model_fixture(name)
    calibration = str(FIXTURES / f"{name}_calibration.npz") if calibrated else None
    result = gttc_compile(model.data, model.inputs, model.outputs, 2, transforms=transforms, calibration=calibration)
    return load_graph_bytes(result.graph_def), result.report.format()


def _is_pair(value: Value) -> bool:
    """A Dequantize (MIN_FIRST) of a QuantizeV2's three results."""
    op = value.op
    if op.type != "Dequantize":
        return False
    quantize = op.operands[0].op
    return quantize.type == "QuantizeV2" and all(v.op is quantize for v in op.operands)


@pytest.mark.parametrize("name", ["keras_mobilenet_v2_small", "digits_cnn"])
def test_every_activation_of_the_listed_ops_is_quantized(name: str) -> None:
    graph, report = _compiled(name, BEFORE + " quantize_activations")
    checked = 0
    for op in graph:
        if op.type in ("DepthwiseConv2dNative", "AddV2", "MaxPool", "AvgPool", "Mean"):
            value = op.operands[0]
            if value.op.type in ("Pad", "PadV2"):
                value = value.op.operands[0]
            assert value.op.type == "Dequantize", f"{op.name}: input is {value.op.type}"  # a pair, or eight-bit op
            checked += _is_pair(value)
        if op.type == "Softmax":
            assert not _is_pair(op.operands[0])
    assert checked > 0
    assert "quantized" in report and "kept in float: Softmax" in report


def test_one_pair_per_value_and_existing_quantize_reused() -> None:
    graph, _ = _compiled("keras_mobilenet_v2_small", BEFORE + " quantize_activations")
    quantized = [op.operands[0] for op in graph if op.type == "QuantizeV2" and op.operands[0].dtype is not None]
    activations = [v for v in quantized if v.op.type not in ("Const", "Identity", "Dequantize")]
    assert len(activations) == len(set(activations)), "a value is quantized twice"


def test_softmax_quantized_when_asked() -> None:
    graph, report = _compiled("digits_cnn", BEFORE + " quantize_activations(float_op=none)")
    softmax = [op for op in graph if op.type == "Softmax"]
    assert softmax and all(_is_pair(op.operands[0]) for op in softmax)
    assert all(any(u.type == "QuantizeV2" for u in op.results[0].users) for op in softmax)
    assert "kept in float" not in report


def test_calibrated_graph_keeps_digits_accuracy() -> None:
    """The full mobile-int8 pipeline with calibration: held-out top-1 within half a point of float."""
    model = load_model_fixture("digits_cnn")
    split = np.load(FIXTURES / "digits_cnn_test.npz")
    x, y = split["x"].astype(np.float32), split["y"]
    logits = model.outputs[0]
    float_graph = load_graph_bytes(gttc_compile(model.data, model.inputs, model.outputs, 2).graph_def)
    int8 = load_graph_bytes(gttc_compile(model.data, model.inputs, model.outputs, 2, "mobile-int8",
                                         calibration=str(FIXTURES / "digits_cnn_calibration.npz")).graph_def)
    assert any(op.type == "DepthwiseConv2dNative" or _is_pair(op.results[0]) for op in int8)
    top1 = {}
    for label, graph in (("float", float_graph), ("int8", int8)):
        out = np.concatenate([run_graph(graph, {model.inputs[0]: x[i:i + 1]}, [logits])[logits]
                              for i in range(len(x))])
        top1[label] = 100.0 * float(np.mean(out.argmax(-1) == y))
    assert abs(top1["int8"] - top1["float"]) <= 0.5, top1
