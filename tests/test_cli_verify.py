"""`--verify`, `gttc verify` and `.onnx` outputs: numbers printed per output, exit 1 past the tolerance."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest

from compiler.passes import PASS_REGISTRY

from conftest import FIXTURES, ROOT

MOBILENET = FIXTURES / "keras_mobilenet_v2_small.pb"
needs_o2 = pytest.mark.skipif(
    not {"fold_constants", "fold_batch_norms", "strip_unused_nodes", "remove_nodes"} <= set(PASS_REGISTRY),
    reason="-O2 passes not built")


def gttc(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compiler.cli", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


@needs_o2
def test_compile_writes_graphdef_and_onnx_and_verifies_both(tmp_path):
    pb, model = tmp_path / "m.pb", tmp_path / "m.onnx"
    result = gttc("-O2", MOBILENET, "-o", pb, "-o", model, "--inputs=input", "--outputs=Identity", "--verify",
                  "--feeds", FIXTURES / "keras_mobilenet_v2_small.npz")
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("PASS: 1 output(s)") == 2
    assert "Identity" in result.stdout and "cosine" in result.stdout
    onnx.checker.check_model(onnx.load(str(model)), full_check=True)
    assert pb.stat().st_size > 0


def test_verify_subcommand_against_onnx(tmp_path):
    model = tmp_path / "m.onnx"
    assert gttc(FIXTURES / "tf1_fused_bn.pb", "-o", model, "--inputs=input", "--outputs=output", "-q").returncode == 0
    result = gttc("verify", FIXTURES / "tf1_fused_bn.pb", model, "--inputs=input", "--outputs=output")
    assert result.returncode == 0, result.stderr
    assert "(onnxruntime) vs original (interpreter)" in result.stdout and "PASS" in result.stdout


def test_verify_exits_1_past_the_tolerance(tmp_path):
    """A candidate with one weight changed must fail the check."""
    from compiler.backends.graphdef import emit_graphdef_bytes
    from compiler.frontends.graphdef import load_graph
    from compiler.ir.tensor import Tensor

    graph = load_graph(FIXTURES / "tf1_fused_bn.pb")
    const = next(op for op in graph if op.type == "Const" and op.attrs["value"].num_elements > 100)
    weights = const.attrs["value"].numpy() * np.float32(1.01)
    const.attrs["value"] = Tensor.from_numpy(weights)
    bad = tmp_path / "bad.pb"
    bad.write_bytes(emit_graphdef_bytes(graph))
    result = gttc("verify", FIXTURES / "tf1_fused_bn.pb", bad, "--inputs=input", "--outputs=output")
    assert result.returncode == 1
    assert "FAIL" in result.stdout
    assert result.stderr.strip().startswith("gttc: error: outputs differ past the tolerance")


def test_unsupported_onnx_export_is_one_line_and_writes_nothing(tmp_path):
    """A TF1 loop whose Switch is not predicated on its LoopCond has no ONNX Loop form."""
    from compiler.backends.graphdef import emit_graphdef_bytes
    from compiler.frontends.graphdef import load_graph

    graph = load_graph(FIXTURES / "tf1_control_flow.pb")
    switch = next(op for op in graph if op.type == "Switch" and op.operands[1].op.type == "LoopCond")
    switch.set_operand(1, graph.op("pred_pos").results[0])
    broken = tmp_path / "broken.pb"
    broken.write_bytes(emit_graphdef_bytes(graph))
    pb, model = tmp_path / "c.pb", tmp_path / "c.onnx"
    result = gttc(broken, "-o", pb, "-o", model, "--inputs=input", "--outputs=output")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1].startswith("gttc: error: cannot export op type 'Switch'")
    assert not pb.exists() and not model.exists()


def test_guessed_io_is_said_aloud(tmp_path):
    result = gttc(FIXTURES / "devices_gather.pb", "-o", tmp_path / "d.onnx")
    assert result.returncode == 0, result.stderr
    assert "using the graph's placeholders: ids" in result.stderr
    assert "using the likely outputs: output" in result.stderr


@pytest.mark.tf
def test_reference_tf_and_against_tf2onnx(tmp_path):
    pytest.importorskip("tensorflow")
    pytest.importorskip("tf2onnx")
    model = tmp_path / "m.onnx"
    assert gttc(FIXTURES / "keras_small_cnn.pb", "-o", model, "--inputs=input", "--outputs=Identity", "-q").returncode == 0
    result = gttc("verify", FIXTURES / "keras_small_cnn.pb", model, "--inputs=input", "--outputs=Identity",
                  "--reference=tf", "--against=tf2onnx")
    assert result.returncode == 0, result.stderr
    assert "vs original (tf)" in result.stdout
    assert "tf2onnx:" in result.stdout and "latency (median, 1 thread)" in result.stdout


DIGITS = FIXTURES / "digits_cnn.pb"
DIGITS_ARGS = ("--inputs=input", "--outputs=Identity,Identity_1", "--feeds", FIXTURES / "digits_cnn.npz",
               "--calibration", FIXTURES / "digits_cnn_calibration.npz", "-q")


def test_eight_bit_candidates_are_judged_by_cosine(tmp_path):
    """An eight-bit graph cannot meet 1e-5 element-wise: --verify judges it by each output's cosine."""
    out = tmp_path / "d8.pb"
    result = gttc("-O2", "--target=mobile-int8", DIGITS, "-o", out, "--verify", *DIGITS_ARGS)
    assert result.returncode == 0, result.stderr
    assert "PASS: 2 output(s), cosine >= 0.999 (eight-bit)" in result.stdout
    cosines = [float(line.split()[4]) for line in result.stdout.splitlines() if line.startswith("Identity")]
    assert len(cosines) == 2 and min(cosines) >= 0.999


@pytest.mark.parametrize("flags", [("--rtol", "1e-5"), ("--min-cosine", "0.9999999")])
def test_eight_bit_verdict_follows_the_flags(tmp_path, flags):
    """--rtol/--atol bring back the element-wise test; --min-cosine sets the bar."""
    result = gttc("-O2", "--target=mobile-int8", DIGITS, "-o", tmp_path / "d8.pb", "--verify", *DIGITS_ARGS, *flags)
    assert result.returncode == 1 and "FAIL: 2 output(s)" in result.stdout


def test_truncated_feeds_file_is_one_line_exit_2(tmp_path):
    feeds = tmp_path / "cut.npz"
    np.savez(feeds, input=np.zeros((1, 8, 8, 1), np.float32))
    feeds.write_bytes(feeds.read_bytes()[: feeds.stat().st_size // 2])
    result = gttc("verify", DIGITS, DIGITS, "--inputs=input", "--outputs=Identity", "--feeds", feeds)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1
    assert lines[0].startswith(f"gttc: error: {feeds}: not a readable .npz feeds file (")
