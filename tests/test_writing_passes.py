"""The WRITING_PASSES.md example, end to end: the fold_pad_into_conv plugin on a real Keras graph."""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

from compiler.cli import main
from compiler.passes.base import restored_registry
from compiler.passes.plugins import load_passes
from compiler.testing.lit import run_lit_files
from tests.oracle import run_tf

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "fold_pad_into_conv"
PLUGIN = EXAMPLE / "gttc_fold_pad" / "fold_pad_into_conv.py"
MODEL = ROOT / "tests" / "fixtures" / "keras_padded_convs.pb"


@pytest.fixture(autouse=True)
def _clean_registry():
    with restored_registry():
        yield


def compile_padded(tmp_path: Path, capsys, *extra: str) -> tuple[int, str, list[Path]]:
    outs = [tmp_path / "padded.pb", tmp_path / "padded.onnx"]
    code = main([str(MODEL), f"--load-passes={PLUGIN}", "-O2", "--transforms=fold_pad_into_conv",
                 "--outputs=Identity", *[a for out in outs for a in ("-o", str(out))], "--verify", *extra])
    captured = capsys.readouterr()
    return code, captured.err + captured.out, outs


def test_the_example_folds_both_conv_pads_and_keeps_the_numbers(tmp_path, capsys):
    code, err, outs = compile_padded(tmp_path, capsys)
    assert code == 0, err
    assert "fold_pad_into_conv" in err and "35 -> 31     2 sites  changed" in err
    assert "skipped padded_convs_1/dw_conv_1/depthwise (fold_pad_into_conv): " \
           "DepthwiseConv2dNative is not among op=Conv2D" in err
    assert err.count("PASS: 1 output(s)") == 2  # the GraphDef in the interpreter and the ONNX in onnxruntime
    from compiler.modelio import load_model

    graph = load_model(str(outs[0]))
    pad_readers = sorted(user.type for op in graph if op.type == "Pad" for user in op.result.users)
    assert pad_readers == ["DepthwiseConv2dNative", "MaxPool"]  # not a conv; a conv left out by default
    explicit = [op.attr("explicit_paddings") for op in graph if op.type == "Conv2D" and op.attr("padding") == "EXPLICIT"]
    assert sorted(explicit) == [(0, 0, 0, 1, 0, 1, 0, 0), (0, 0, 3, 3, 3, 3, 0, 0)]


@pytest.mark.tf
def test_the_rewritten_graph_runs_in_tensorflow_with_grappler(tmp_path, capsys):
    code, err, outs = compile_padded(tmp_path, capsys)
    assert code == 0, err
    reference = np.load(MODEL.with_suffix(".npz"))
    feeds = {"input": reference["input:input"]}
    got = run_tf(outs[0].read_bytes(), feeds, ["Identity"])["Identity"]
    np.testing.assert_allclose(got, reference["output:Identity"], rtol=1e-5, atol=1e-6)


def test_the_example_lit_files_pass_through_gttc_lit(capsys):
    load_passes(str(PLUGIN))
    stream = io.StringIO()
    assert run_lit_files([str(EXAMPLE / "tests")], stream) == 0, stream.getvalue()
    assert "3 passed, 0 failed (3 files)" in stream.getvalue()


def test_a_wrong_check_line_fails_readably(tmp_path, capsys):
    text = (EXAMPLE / "tests" / "fold_pad_into_conv.ir").read_text()
    wrong = tmp_path / "wrong.ir"
    wrong.write_text(text.replace("[0, 0, 3, 3, 2, 1, 0, 0]\n", "[0, 0, 3, 3, 2, 2, 0, 0]\n"))
    code = main(["lit", f"--load-passes={PLUGIN}", str(wrong)])
    out = capsys.readouterr().out
    assert code == 1
    assert "FAIL:" in out and "CHECK-SAME: explicit_paddings = [0, 0, 3, 3, 2, 2, 0, 0]" in out
    assert "Traceback" not in out and "lit: 0 passed, 1 failed (1 file" in out
