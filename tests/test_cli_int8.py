"""The headline command, as a user runs it: `gttc -O2 --target=mobile-int8 --calibration DATA -o m.pb -o m.onnx`."""
from __future__ import annotations

import subprocess
import sys

import onnx

from conftest import FIXTURES, ROOT

MODEL = FIXTURES / "digits_cnn.pb"
CALIBRATION = FIXTURES / "digits_cnn_calibration.npz"
IO = ("--inputs=input", "--outputs=Identity,Identity_1")


def gttc(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compiler.cli", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_both_outputs_verified_against_float_and_each_other(tmp_path) -> None:
    pb, model = tmp_path / "m.pb", tmp_path / "m.onnx"
    result = gttc("-O2", "--target=mobile-int8", MODEL, "--calibration", CALIBRATION, "-o", pb, "-o", model, *IO,
                  "--verify")
    assert result.returncode == 0, result.stderr
    assert pb.stat().st_size > 0
    onnx.checker.check_model(onnx.load(str(model)), full_check=True)
    out = result.stdout
    assert f"over every feed of {CALIBRATION}" in out  # the calibration data is the default dataset
    assert out.count("PASS: 2 output(s), cosine >= 0.999 (eight-bit)") == 2
    assert "vs the eight-bit graph (interpreter), per quantized op" in out
    assert "per op: 10 points, 100% of 3488 elements within 1 LSB" in out
    assert "PASS: every op >= 99.9% of codes within 1 LSB, every output cosine >= 0.9999" in out
    assert "eight-bit: QLinearConv 4, Gemm 2, Add 1, AveragePool 1, MaxPool 1" in result.stderr
    assert "left in float: Softmax 1" in result.stderr


def test_without_calibration_the_report_says_ranges_are_dynamic(tmp_path) -> None:
    model = tmp_path / "m.onnx"
    result = gttc("-O2", "--target=mobile-int8", MODEL, "-o", model, *IO)
    assert result.returncode == 0, result.stderr
    notes = [line for line in result.stderr.splitlines() if "no --calibration" in line]
    assert len(notes) == 1 and "DynamicQuantizeLinear" in notes[0]
    kinds = {node.op_type for node in onnx.load(str(model)).graph.node}
    assert {"DynamicQuantizeLinear", "ConvInteger", "MatMulInteger"} <= kinds


def test_qoperator_and_float_op_flags(tmp_path) -> None:
    model = tmp_path / "m.onnx"
    result = gttc("-O2", "--target=mobile-int8", MODEL, "--calibration", CALIBRATION, "-o", model, *IO,
                  "--onnx-quant=qoperator", "--float-op=none")
    assert result.returncode == 0, result.stderr
    kinds = {node.op_type for node in onnx.load(str(model)).graph.node}
    assert {"QLinearConv", "QLinearAdd"} <= kinds and "Conv" not in kinds
    assert "quantize_activations(float_op=none)" in result.stderr
    assert "left in float: none" in result.stderr


def test_bad_onnx_quant_and_mismatched_calibration_are_one_line_exit_2(tmp_path) -> None:
    out = tmp_path / "m.onnx"
    bad_format = gttc("-O2", "--target=mobile-int8", MODEL, "-o", out, "--onnx-quant=s8s8")
    mismatched = gttc("-O2", "--target=mobile-int8", MODEL, "--calibration", FIXTURES / "digits_mlp_calibration.npz",
                      "-o", out, *IO, "-q")
    for result in (bad_format, mismatched):
        assert result.returncode == 2
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert not out.exists()
    assert "--onnx-quant" in bad_format.stderr and "digits_mlp_calibration.npz" in mismatched.stderr


def test_verify_eight_bit_graphdef_against_its_onnx(tmp_path) -> None:
    pb, model = tmp_path / "m.pb", tmp_path / "m.onnx"
    built = gttc("-O2", "--target=mobile-int8", MODEL, "--calibration", CALIBRATION, "-o", pb, "-o", model, *IO, "-q")
    assert built.returncode == 0, built.stderr
    result = gttc("verify", pb, model, *IO, "--dataset", CALIBRATION)
    assert result.returncode == 0, result.stderr
    assert "vs the eight-bit graph (interpreter), per quantized op on the first feed" in result.stdout
    assert "PASS: every op >= 99.9% of codes within 1 LSB" in result.stdout
