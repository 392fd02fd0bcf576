"""symmetric_weights: product weights move onto the int8 grid both TF and onnxruntime run exactly."""
from __future__ import annotations

import re

import numpy as np
import pytest

from compiler.api import transform_graph
from compiler.frontends.graphdef import load_graph_bytes
from compiler.ir.graph import Graph
from compiler.passes.symmetric_weights import dequantized, is_symmetric, symmetric_grid
from compiler.rewrite.constants import const_array
from compiler.runtime.interpreter import run_graph
from compiler.runtime.kernels.quantized_conversion import zero_point
from tests.conftest import FIXTURES, load_model_fixture

EIGHT_BIT = "quantize_weights quantize_nodes fold_requantize_dequantize"


def _compiled(name: str, transforms: str) -> tuple[Graph, object]:
    model = load_model_fixture(name)
    graph = load_graph_bytes(transform_graph(model.data, model.inputs, model.outputs, transforms))
    return graph, model


def test_grid_puts_zero_on_code_128_and_rounds_to_nearest() -> None:
    values = np.random.default_rng(3).normal(size=(3, 3, 8, 16)).astype(np.float32)
    grid = symmetric_grid(values)
    assert zero_point(grid.lo, grid.hi, np.uint8) == 128
    assert grid.codes.min() >= 1 and is_symmetric(float(grid.lo), float(grid.hi), grid.codes)
    error = np.abs(dequantized(grid.codes, grid.lo, grid.hi) - values)
    assert float(error.max()) <= 0.5 * float(grid.step) * (1 + 1e-5)
    assert float(np.abs(values).max()) == pytest.approx(127 * float(grid.step), rel=1e-6)


def test_all_zero_weights_stay_zero() -> None:
    grid = symmetric_grid(np.zeros((4, 4), np.float32))
    assert (grid.codes == 128).all() and not dequantized(grid.codes, grid.lo, grid.hi).any()


@pytest.mark.parametrize("name", ["digits_cnn", "keras_mobilenet_v2_small"])
def test_every_product_weight_is_symmetric_and_outputs_barely_move(name: str) -> None:
    before, model = _compiled(name, EIGHT_BIT)
    after, _ = _compiled(name, EIGHT_BIT + " symmetric_weights")
    weights = 0
    for op in after:
        if op.type in ("QuantizedConv2D", "QuantizedMatMul"):
            codes, lo, hi = (const_array(op.operands[i]) for i in (1, 4, 5))
        elif op.type in ("DepthwiseConv2dNative", "Conv2D") and op.operands[1].op.type == "Dequantize":
            codes, lo, hi = (const_array(v) for v in op.operands[1].op.operands)
        else:
            continue
        assert codes is not None, f"{op.name}: weight codes are not constant"
        assert is_symmetric(float(lo), float(hi), codes), op.name
        weights += 1
    assert weights > 0
    out = model.outputs[0]
    feeds = _real_feeds(name, model)
    reference = run_graph(load_graph_bytes(model.data), feeds, [out])[out]
    gtt_grid = _cosine(reference, run_graph(before, feeds, [out])[out])
    symmetric = _cosine(reference, run_graph(after, feeds, [out])[out])
    assert symmetric >= 0.999 and symmetric >= gtt_grid - 1e-4, (gtt_grid, symmetric)


def _real_feeds(name: str, model) -> dict:
    """digits_cnn gets held-out digits (its fixture feed is noise); others their fixture feed."""
    if name == "digits_cnn":
        return {model.inputs[0]: np.load(FIXTURES / "digits_cnn_test.npz")["x"][:8].astype(np.float32)}
    return model.feeds


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.ravel().astype(np.float64), b.ravel().astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_report_states_the_cost_in_lsb() -> None:
    model = load_model_fixture("digits_cnn")
    from compiler.api import compile as gttc_compile

    report = gttc_compile(model.data, model.inputs, model.outputs, 0,
                          transforms=EIGHT_BIT + " symmetric_weights").report.format()
    assert re.search(r"re-gridded 6 eight-bit weights to symmetric int8: each element moved at most \d\.\d+ LSB "
                     r"\(mean 0\.\d+ LSB over \d+ elements\) of its previous grid", report), report


def test_float_weights_are_rounded_once_and_the_cost_is_against_gtts_grid() -> None:
    model = load_model_fixture("digits_mlp")
    from compiler.api import compile as gttc_compile

    report = gttc_compile(model.data, model.inputs, model.outputs, 0, transforms="symmetric_weights").report.format()
    found = re.search(r"quantized 2 float weights onto the symmetric grid: each element is at most (\d\.\d+) LSB", report)
    assert found, report
    assert float(found.group(1)) < 1.0  # GTT's own grid: at most 0.5; symmetric steps are at most twice as wide


def test_nothing_to_do_is_said() -> None:
    from compiler.api import compile as gttc_compile

    model = load_model_fixture("tf2_functional_control_flow")
    report = gttc_compile(model.data, model.inputs, model.outputs, 0, transforms="symmetric_weights").report.format()
    assert "no convolution or matmul weights to put on the symmetric grid" in report
