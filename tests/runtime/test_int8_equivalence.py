"""compare_quantized: an eight-bit graph (interpreter) against its ONNX export (onnxruntime), in LSB.

Per op, each quantization point is recomputed by onnxruntime from the
interpreter's codes at the points it reads, so a fault shows at its own point
only; end to end, errors accumulate.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper
from onnx.utils import Extractor

from compiler.api import compile as gttc_compile
from compiler.errors import InputError
from compiler.frontends.graphdef import load_graph_bytes
from compiler.ir.graph import Graph
from compiler.modelio import serialize_onnx
from compiler.runtime.int8_equivalence import Agreement, compare_quantized, quantization_points
from compiler.runtime.interpreter import run_graph
from compiler.runtime.onnx_runner import run_onnx
from tests.conftest import Model, calibration_for, load_model_fixture

MODELS = ("digits_cnn", "keras_mobilenet_v2_small")


class Pair:
    """A fixture compiled with mobile-int8 and calibration, as GraphDef IR and as ONNX."""

    def __init__(self, model: Model, graph: Graph, onnx_model: onnx.ModelProto) -> None:
        self.model, self.graph, self.onnx = model, graph, onnx_model

    def compare(self, onnx_model: onnx.ModelProto | None = None):
        return compare_quantized(self.graph, onnx_model or self.onnx, self.model.feeds, self.model.inputs,
                                 self.model.outputs)


def _calibration(model: Model, folder: Path) -> str:
    return calibration_for(model, folder, seed=1234)


def _pair(name: str, folder: Path) -> Pair:
    model = load_model_fixture(name)
    result = gttc_compile(model.data, model.inputs, model.outputs, 2, "mobile-int8",
                          calibration=_calibration(model, folder))
    graph = load_graph_bytes(result.graph_def)
    data, _ = serialize_onnx(graph, model.inputs, model.outputs)
    return Pair(model, graph, onnx.load_from_string(data))


@pytest.fixture(scope="module", params=MODELS)
def pair(request, tmp_path_factory) -> Pair:
    return _pair(request.param, tmp_path_factory.mktemp(request.param))


@pytest.fixture(scope="module")
def digits(tmp_path_factory) -> Pair:
    return _pair("digits_cnn", tmp_path_factory.mktemp("digits"))


def test_each_point_within_one_lsb(pair: Pair) -> None:
    report = pair.compare()
    print(report.format())
    points = quantization_points(pair.graph, pair.model.inputs)
    assert len(report.rows) == len(points) > 0 and not report.unmatched
    assert report.min_share >= 0.999 and report.passed(0.999)
    assert all(r.per_op.max_lsb <= 1 for r in report.rows)
    codes = run_graph(pair.graph, pair.model.feeds, [p.results[0].name for p in points])
    for row, point in zip(report.rows, points):
        assert row.name == point.results[0].name
        assert row.elements == row.end_to_end.elements == codes[row.name].size
        assert 0 <= row.per_op.exact <= row.per_op.within_1 <= row.elements
        assert row.ops  # e.g. QuantizedConv2D+BiasAdd+Relu6
    assert report.end_to_end_share >= 0.97
    assert [o.name for o in report.outputs] == pair.model.outputs
    assert all(o.cosine >= 0.9999 and o.max_abs < 0.25 for o in report.outputs)  # digits logits reach ~20


def test_digits_rows_and_format(digits: Pair) -> None:
    report = digits.compare()
    ops = {r.name.replace("digits_cnn_1/", ""): r.ops for r in report.rows}
    assert ops["conv1_1/convolution_eightbit/input/quantize"] == "(graph input)"
    assert ops["branch_b_1/convolution_eightbit/conv1_relu_1/Relu/quantize"] == "QuantizedConv2D+BiasAdd+Relu"
    assert ops["concat_1/concat_0/activation/quantize"] == "ConcatV2"
    assert ops["res_relu6_1/Relu6_0/activation/quantize"] == "AddV2+Relu6"
    assert ops["fc1_1/MatMul_eightbit/flatten_1/Reshape/quantize"] == "AvgPool+Reshape"  # not the shape arithmetic
    text = report.format(max_rows=3)
    lines = text.splitlines()
    assert len(lines) == 1 + 3 + 1 + 2 + len(digits.model.outputs)
    assert lines[5].startswith(f"per op: {len(report.rows)} points, 100% of 3488 elements within 1 LSB")
    assert lines[6].startswith(f"end to end: {len(report.rows)} points")
    # The logits come straight from a QuantizedMatMul's Dequantize: their error is also counted in its step.
    logits = report.outputs[0]
    assert logits.step is not None and logits.lsb == pytest.approx(logits.max_abs / logits.step)
    assert report.outputs[1].step is None  # Softmax: no quantization step to count in


def test_per_op_is_the_extracted_subgraph(digits: Pair) -> None:
    """Each row equals running the subgraph Extractor cuts between the point and the points it reads."""
    report = digits.compare()
    names = [r.name for r in report.rows]
    ours = run_graph(digits.graph, digits.model.feeds, names)
    producer = {out: node for node in digits.onnx.graph.node for out in node.output}
    graph_inputs = {i.name for i in digits.onnx.graph.input}
    extractor = Extractor(digits.onnx)
    for row in report.rows:
        frontier = _frontier(row.name, set(names), graph_inputs, producer)
        feeds = {t: digits.model.feeds[t] if t in graph_inputs else _nchw(ours[t]) for t in frontier}
        got = run_onnx(extractor.extract_model(sorted(frontier), [row.name]), feeds, [row.name])[row.name]
        diff = np.abs(got.astype(np.int16) - _nchw(ours[row.name]).astype(np.int16))
        assert Agreement(diff.size, int(diff.max()), int(np.sum(diff <= 1)), int(np.sum(diff == 0))) == row.per_op


def _frontier(point: str, points: set[str], graph_inputs: set[str], producer: dict) -> set[str]:
    """The points and graph inputs `point` reads directly (through any ONNX ops)."""
    found, seen, stack = set(), set(), list(producer[point].input)
    while stack:
        tensor = stack.pop()
        if tensor in seen or not tensor:
            continue
        seen.add(tensor)
        if tensor in points or tensor in graph_inputs:
            found.add(tensor)
        elif tensor in producer:
            stack.extend(producer[tensor].input)
    return found


def _nchw(array: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(array.transpose(0, 3, 1, 2)) if array.ndim == 4 else array


def test_corrupted_zero_point_shows_at_its_point_only(digits: Pair) -> None:
    """A QuantizeLinear with its zero point off by 3: 3 LSB there, per op nowhere else."""
    target = "digits_cnn_1/concat_1/concat_0/activation/quantize"
    corrupted = onnx.ModelProto()
    corrupted.CopyFrom(digits.onnx)
    node = next(n for n in corrupted.graph.node if n.output[0] == target)
    initializers = {i.name: i for i in corrupted.graph.initializer}
    zero_point = numpy_helper.to_array(initializers[node.input[2]])
    assert int(zero_point) + 3 <= 255
    corrupted.graph.initializer.append(numpy_helper.from_array(zero_point + np.uint8(3), "corrupted_zero_point"))
    node.input[2] = "corrupted_zero_point"
    report = digits.compare(corrupted)
    rows = {r.name: r for r in report.rows}
    assert rows[target].per_op.max_lsb >= 3 and rows[target].end_to_end.max_lsb >= 3
    assert rows[target].per_op.share < 0.5
    assert all(r.per_op.max_lsb <= 1 for name, r in rows.items() if name != target)
    assert not report.passed() and report.worst().name == target
    assert f"worst {rows[target].per_op.max_lsb} LSB at {target}" in report.format()


def test_unrelated_model_is_an_input_error(digits: Pair, tmp_path: Path) -> None:
    other = _pair("digits_mlp", tmp_path)
    with pytest.raises(InputError) as caught:
        compare_quantized(digits.graph, other.onnx, digits.model.feeds, digits.model.inputs, digits.model.outputs)
    assert "\n" not in str(caught.value) and "quantization point" in str(caught.value)
