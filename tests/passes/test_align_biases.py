"""align_biases: after calibration, a bias that follows an eight-bit product is a whole number of
accumulator steps, so TF's float add and onnxruntime's int32 add of the exported model agree exactly."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from compiler.api import compile as gttc_compile
from compiler.frontends.graphdef import load_graph_bytes
from compiler.modelio import serialize_onnx
from tests.conftest import FIXTURES, load_model_fixture


def test_exported_int32_biases_are_the_graphs_biases_exactly() -> None:
    model = load_model_fixture("digits_cnn")
    result = gttc_compile(model.data, model.inputs, model.outputs, 2, "mobile-int8",
                          calibration=str(FIXTURES / "digits_cnn_calibration.npz"))
    assert "aligned 6 biases to their accumulator step" in result.report.format()
    graph = load_graph_bytes(result.graph_def)
    aligned = [op.attrs["value"].numpy() for op in graph if op.type == "Const" and "aligned_bias" in op.name]
    # the QDQ form keeps every bias as DequantizeLinear(int32 codes, step): codes and step in one place
    exported = onnx.load_model_from_string(serialize_onnx(graph, model.inputs, model.outputs, quant_format="qdq")[0])
    values = {i.name: numpy_helper.to_array(i) for i in exported.graph.initializer}
    biases = [(values[n.input[0]], values[n.input[1]]) for n in exported.graph.node
              if n.op_type == "DequantizeLinear" and values.get(n.input[0], np.zeros(0, np.uint8)).dtype == np.int32]
    assert len(biases) == len(aligned) == 6
    for codes, scale in biases:
        as_float = (codes.astype(np.float64) * float(scale)).astype(np.float32).ravel()  # Gemm's bias is [1, N]
        assert any(a.size == as_float.size and np.array_equal(a.ravel(), as_float) for a in aligned)


def test_nothing_to_align_without_frozen_ranges() -> None:
    model = load_model_fixture("digits_cnn")
    report = gttc_compile(model.data, model.inputs, model.outputs, 2, "mobile-int8",
                          transforms="align_biases").report.format()
    assert "no bias after an eight-bit product with frozen ranges" in report
