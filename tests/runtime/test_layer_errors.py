"""Per-layer SQNR of an eight-bit graph against the float graph it was quantized from."""
from __future__ import annotations

import math
import subprocess
import sys

import pytest

from compiler.api import compile as gttc_compile
from compiler.frontends.graphdef import load_graph_bytes
from compiler.runtime.layer_errors import LayerError, error_jump, format_layer_errors, layer_errors
from tests.conftest import FIXTURES, ROOT, load_model_fixture

CALIBRATION = str(FIXTURES / "digits_cnn_calibration.npz")


def graphs():
    """digits_cnn after -O2 (float) and after -O2 --target=mobile-int8 with calibration."""
    model = load_model_fixture("digits_cnn")
    float_graph = load_graph_bytes(gttc_compile(model.data, model.inputs, model.outputs, 2).graph_def)
    eight_bit = load_graph_bytes(gttc_compile(model.data, model.inputs, model.outputs, 2, "mobile-int8",
                                              calibration=CALIBRATION).graph_def)
    return model, float_graph, eight_bit


def test_every_quantized_layer_is_measured() -> None:
    model, float_graph, eight_bit = graphs()
    errors = layer_errors(float_graph, eight_bit, model.feeds)
    assert [e.op_type for e in errors] == ["QuantizedConv2D"] * 3 + ["ConcatV2", "MaxPool", "QuantizedConv2D", "AddV2",
                                                                     "AvgPool"] + ["QuantizedMatMul"] * 2
    assert all(25.0 < e.sqnr_db < 60.0 and e.cosine > 0.999 for e in errors), errors
    assert "<- largest drop" in format_layer_errors(errors)


def test_a_graph_against_itself_has_no_error() -> None:
    model, _, eight_bit = graphs()
    errors = layer_errors(eight_bit, eight_bit, model.feeds)
    assert errors == []  # its Dequantize ops stand in for nothing of a float graph
    assert "no quantized layers" in format_layer_errors(errors)


def test_error_jump_is_the_largest_drop() -> None:
    def layer(db: float) -> LayerError:
        return LayerError("x", "QuantizedConv2D", db, 1.0, 0.0)

    assert error_jump([layer(40), layer(38), layer(20), layer(30)]) == 2
    assert error_jump([layer(20), layer(30), layer(math.inf), layer(40)]) is None  # never drops
    assert error_jump([layer(40)]) is None


def gttc(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compiler.cli", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_plot_writes_an_image(tmp_path) -> None:
    pytest.importorskip("matplotlib")
    plot = tmp_path / "sqnr.png"
    result = gttc("-O2", "--target=mobile-int8", FIXTURES / "digits_cnn.pb", "-o", tmp_path / "d8.pb",
                  "--inputs=input", "--outputs=Identity,Identity_1", "--calibration", CALIBRATION,
                  "--feeds", FIXTURES / "digits_cnn.npz", "--verify", "--plot", plot, "-q")
    assert result.returncode == 0, result.stderr
    assert "per layer (10 quantized ops" in result.stdout
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_suffix_is_checked_before_anything_is_written(tmp_path) -> None:
    out = tmp_path / "d8.pb"
    result = gttc("-O2", "--target=mobile-int8", FIXTURES / "digits_cnn.pb", "-o", out, "--inputs=input",
                  "--outputs=Identity", "--verify", "--plot", tmp_path / "sqnr.gif", "-q")
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        f"gttc: error: {tmp_path / 'sqnr.gif'}: --plot writes .png, .svg or .pdf"]
    assert list(tmp_path.iterdir()) == []
