"""`--target=mobile-int8 --calibration`: one eight-bit model, as a GraphDef and as ONNX, on trained models.

Measured when written (digits, 360 held-out images; float top-1 99.17% cnn, 96.39% mlp):
the GraphDef in gttc's interpreter, in TensorFlow and the ONNX model in onnxruntime all
keep the float top-1 of both models, and the GraphDef in TF and the ONNX model agree to
a logit cosine above 0.99999.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from compiler.api import compile as gttc_compile
from compiler.frontends.graphdef import load_graph_bytes
from compiler.modelio import serialize_onnx
from compiler.runtime.interpreter import run_graph
from compiler.runtime.onnx_runner import run_onnx
from tests.conftest import FIXTURES, Model, load_model_fixture

MODELS = ("digits_cnn", "digits_mlp")
MAX_TOP1_DROP = 0.5  # percentage points


@lru_cache(maxsize=None)
def _built(name: str) -> tuple[Model, bytes, bytes, bytes]:
    """(model, float GraphDef, eight-bit GraphDef, eight-bit ONNX)."""
    model = load_model_fixture(name)
    float_pb = gttc_compile(model.data, model.inputs, model.outputs, 2).graph_def
    int8_pb = gttc_compile(model.data, model.inputs, model.outputs, 2, "mobile-int8",
                           calibration=str(FIXTURES / f"{name}_calibration.npz")).graph_def
    int8_onnx, _ = serialize_onnx(load_graph_bytes(int8_pb), model.inputs, model.outputs)
    return model, float_pb, int8_pb, int8_onnx


def _split(name: str) -> tuple[np.ndarray, np.ndarray]:
    data = np.load(FIXTURES / f"{name}_test.npz")
    return data["x"].astype(np.float32), data["y"]


def _per_image(run, model: Model, x: np.ndarray) -> np.ndarray:
    logits = model.outputs[0]
    return np.concatenate([run({model.inputs[0]: x[i:i + 1]}, [logits])[logits] for i in range(len(x))])


def _top1(logits: np.ndarray, labels: np.ndarray) -> float:
    return 100.0 * float(np.mean(logits.argmax(-1) == labels))


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.ravel().astype(np.float64), b.ravel().astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.mark.parametrize("name", MODELS)
def test_interpreter_and_onnxruntime_keep_float_accuracy(name: str) -> None:
    model, float_pb, int8_pb, int8_onnx = _built(name)
    x, y = _split(name)
    float_graph, int8_graph = load_graph_bytes(float_pb), load_graph_bytes(int8_pb)
    reference = _top1(_per_image(lambda f, o: run_graph(float_graph, f, o), model, x), y)
    interpreter = _per_image(lambda f, o: run_graph(int8_graph, f, o), model, x)
    onnxruntime = _per_image(lambda f, o: run_onnx(int8_onnx, f, o), model, x)
    for label, logits in (("interpreter", interpreter), ("onnxruntime", onnxruntime)):
        assert abs(_top1(logits, y) - reference) <= MAX_TOP1_DROP, (label, _top1(logits, y), reference)
    assert _cosine(interpreter, onnxruntime) >= 0.9999


@pytest.mark.tf
@pytest.mark.parametrize("name", MODELS)
def test_graphdef_runs_in_tf_and_agrees_with_onnxruntime(name: str) -> None:
    from tests.oracle import run_tf

    model, _, int8_pb, int8_onnx = _built(name)
    x, y = _split(name)
    logits = model.outputs[0]
    tf_logits = np.concatenate([run_tf(int8_pb, {model.inputs[0]: x[i:i + 32]}, [logits])[logits]
                                for i in range(0, len(x), 32)])
    onnx_logits = _per_image(lambda f, o: run_onnx(int8_onnx, f, o), model, x)
    assert _cosine(tf_logits, onnx_logits) >= 0.9999
    assert _top1(tf_logits, y) >= model_float_top1(name) - MAX_TOP1_DROP


def model_float_top1(name: str) -> float:
    """The float top-1 TF measured when the fixture was built."""
    return 100.0 * json.loads((FIXTURES / f"{name}.json").read_text())["accuracy"]["test"]


def _optimized_op_types(model_bytes: bytes, folder: Path) -> set[str]:
    """The node types onnxruntime runs after its own graph optimizations."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(folder / "optimized.onnx")
    ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])
    return {node.op_type for node in onnx.load(options.optimized_model_filepath).graph.node}


def test_every_convolution_runs_as_qlinearconv(tmp_path: Path) -> None:
    """The default export writes QLinearConv itself; the QDQ export is fused into it by onnxruntime."""
    model, _, int8_pb, int8_onnx = _built("digits_cnn")
    exported = onnx.load_model_from_string(int8_onnx)
    onnx.checker.check_model(exported, full_check=True)
    kinds = {n.op_type for n in exported.graph.node}
    assert "QLinearConv" in kinds and "Conv" not in kinds and all(n.domain == "" for n in exported.graph.node)
    qdq, _ = serialize_onnx(load_graph_bytes(int8_pb), model.inputs, model.outputs, quant_format="qdq")
    assert {n.op_type for n in onnx.load_model_from_string(qdq).graph.node} >= {"QuantizeLinear", "DequantizeLinear",
                                                                              "Conv"}
    for variant in (exported, onnx.load_model_from_string(qdq)):
        weights = [i for i in variant.graph.initializer if i.data_type == onnx.TensorProto.INT8]
        assert weights, "weights should be int8 (U8S8)"
    optimized = _optimized_op_types(qdq, tmp_path)
    assert "QLinearConv" in optimized and "Conv" not in optimized and "ConvInteger" not in optimized


def test_same_input_same_bytes() -> None:
    model = load_model_fixture("digits_cnn")
    calibration = str(FIXTURES / "digits_cnn_calibration.npz")
    builds = [gttc_compile(model.data, model.inputs, model.outputs, 2, "mobile-int8", calibration=calibration)
              for _ in range(2)]
    assert builds[0].graph_def == builds[1].graph_def
    exports = [serialize_onnx(load_graph_bytes(b.graph_def), model.inputs, model.outputs)[0] for b in builds]
    assert exports[0] == exports[1]


def test_every_onnx_format_computes_the_same() -> None:
    model, _, int8_pb, qlinear = _built("digits_cnn")
    graph = load_graph_bytes(int8_pb)
    qoperator, report = serialize_onnx(graph, model.inputs, model.outputs, quant_format="qoperator")
    qdq, _ = serialize_onnx(graph, model.inputs, model.outputs, quant_format="qdq")
    kinds = {n.op_type for n in onnx.load_model_from_string(qoperator).graph.node}
    assert {"QLinearConv", "QLinearAdd"} <= kinds and "Conv" not in kinds
    assert "left in float: Softmax 1" in report.eight_bit
    x, _ = _split("digits_cnn")
    logits = model.outputs[0]
    for i in range(0, 40):
        feed = {model.inputs[0]: x[i:i + 1]}
        expected = run_onnx(qdq, feed, [logits])[logits]
        for other in (qoperator, qlinear):
            np.testing.assert_array_equal(run_onnx(other, feed, [logits])[logits], expected)
