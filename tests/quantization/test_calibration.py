"""Calibration: reading calibration data, `gttc calibrate`, and freezing calibrated ranges in one compile.

The measured ranges are checked against TensorFlow's own: GTT's insert_logging
recipe run in TF on the same feeds must log the same (min, max) per op and run
as gttc's interpreter measures.  The log `gttc calibrate` writes must freeze
(by gttc and by GTT) to the same graph `calibrate_ranges` builds in one pass.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from compiler.api import compile as gttc_compile
from compiler.api import transform_graph
from compiler.cli import main as gttc_main
from compiler.errors import InputError
from compiler.frontends.graphdef import load_graph_bytes
from compiler.quantization.calibrate import measure_ranges
from compiler.quantization.calibration_data import load_calibration
from compiler.quantization.minmax_log import read_log
from tests.conftest import FIXTURES, load_model_fixture
from tests.oracle import gtt_transform, require_tf, run_tf
from tests.passes.test_freeze_requantization_ranges import RUNS, LoggedModel
from tests.passes.test_gtt_differential import assert_same_graphdef

DIGITS = "digits_cnn"
CALIBRATION = FIXTURES / f"{DIGITS}_calibration.npz"
HELD_OUT = FIXTURES / f"{DIGITS}_test.npz"


def quantized(name: str = DIGITS, extra: str = "") -> tuple[bytes, list[str], list[str]]:
    """gttc's -O2 graph of a fixture after quantize_weights quantize_nodes (dynamic ranges)."""
    model = load_model_fixture(name)
    data = gttc_compile(model.data, model.inputs, model.outputs, 2,
                        transforms="quantize_weights quantize_nodes" + extra).graph_def
    return data, model.inputs, model.outputs


# -- calibration data ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def digits_graph():
    data, inputs, _ = quantized()
    return load_graph_bytes(data), inputs


def test_stack_and_single_feed(digits_graph, tmp_path: Path) -> None:
    graph, inputs = digits_graph
    stack = np.load(CALIBRATION)["input"]  # [100, 1, 8, 8, 1] for a [?, 8, 8, 1] input
    assert len(load_calibration(CALIBRATION, graph, inputs)) == 100
    np.savez(tmp_path / "one.npz", input=stack[0])  # the input's own rank: one feed
    assert len(load_calibration(tmp_path / "one.npz", graph, inputs)) == 1
    np.savez(tmp_path / "batch.npz", input=stack[:10, 0])  # [10, 8, 8, 1] is one feed of batch 10
    feeds = list(load_calibration(tmp_path / "batch.npz", graph, inputs))
    assert len(feeds) == 1 and feeds[0]["input"].shape == (10, 8, 8, 1)


def test_folder_of_files_in_name_order(digits_graph, tmp_path: Path) -> None:
    graph, inputs = digits_graph
    stack = np.load(CALIBRATION)["input"]
    np.savez(tmp_path / "b.npz", input=stack[3:5])
    np.savez(tmp_path / "a.npz", **{"input:input": stack[:3]})  # the fixture spelling of keys
    feeds = list(load_calibration(tmp_path, graph, inputs))
    assert len(feeds) == 5
    np.testing.assert_array_equal(np.stack([f["input"] for f in feeds]), stack[:5])


@pytest.mark.parametrize("arrays, message", [
    ({"image": np.zeros((2, 1, 8, 8, 1), np.float32)}, "array 'image' is not a graph input"),
    ({}, "no array for input 'input'"),
    ({"input": np.zeros((2, 1, 8, 7, 1), np.float32)}, "input 'input' expects shape [?,8,8,1]"),
])
def test_mismatched_data_names_the_input(digits_graph, tmp_path: Path, arrays, message: str) -> None:
    graph, inputs = digits_graph
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(InputError, match=message.replace("[", r"\[").replace("?", r"\?")):
        load_calibration(tmp_path / "bad.npz", graph, inputs)


def truncated_npz(path: Path) -> Path:
    """A calibration file cut in half (a zip whose member is incomplete)."""
    np.savez(path, input=np.zeros((4, 1, 8, 8, 1), np.float32))
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    return path


@pytest.mark.parametrize("make, message", [
    (lambda p: p / "missing.npz", "no such calibration file or folder"),
    (lambda p: (p / "garbage.npz").write_bytes(b"not a zip") and p / "garbage.npz", "not a readable .npz"),
    (lambda p: (p / "empty").mkdir() or p / "empty", "folder holds no .npz"),
    (lambda p: truncated_npz(p / "cut.npz"), "not a readable .npz calibration file"),
])
def test_unreadable_data(digits_graph, tmp_path: Path, make, message: str) -> None:
    graph, inputs = digits_graph
    with pytest.raises(InputError, match=message):
        load_calibration(make(tmp_path), graph, inputs)


# -- the ranges are TensorFlow's --------------------------------------------------------------------


@pytest.mark.tf
@pytest.mark.parametrize("fixture, rtol", [("digits_cnn", 0.0), ("keras_small_cnn", 2e-7)])
def test_measured_ranges_equal_tensorflows_log(fixture: str, rtol: float, tmp_path: Path) -> None:
    """GTT's logging recipe in TF and gttc's interpreter see the same range per op and run.

    TF runs with its stock kernels (TF_ENABLE_ONEDNN_OPTS=0), which the runtime
    reproduces bit for bit; the graph is gttc's -O2 output.  digits_cnn's float
    ops between the eight-bit ones agree with TF's to the bit, so its ranges are
    identical; keras_small_cnn's DepthwiseConv2dNative is an ulp off TF's here
    and there, and so are 2 of its 14 logged values (by 1.3e-7 relative).
    """
    require_tf()
    logged = LoggedModel(fixture, tmp_path, quantized(fixture)[0])
    logged.record_log({"TF_ENABLE_ONEDNN_OPTS": "0"})
    tf_ranges = read_log(logged.log_path).ranges
    feeds = np.load(logged.write_feeds())
    for name in logged.inputs:
        np.savez(tmp_path / f"{name}_stack.npz",
                 **{name: np.stack([feeds[f"{run}:{name}"] for run in range(RUNS)])})
    graph = load_graph_bytes(logged.quantized)
    data = load_calibration(tmp_path / f"{logged.inputs[0]}_stack.npz", graph, logged.inputs)
    ours = measure_ranges(graph, data, progress=False)
    assert set(ours) == set(tf_ranges)
    for name, pairs in ours.items():
        np.testing.assert_allclose(np.array(pairs), np.array(tf_ranges[name], dtype=np.float64),
                                   rtol=rtol, atol=0.0, err_msg=name)


# -- gttc calibrate, then freeze, is calibrate_ranges ---------------------------------------------


@pytest.mark.tf
def test_calibrate_log_freezes_like_calibrate_ranges(tmp_path: Path, capsys) -> None:
    data, inputs, outputs = quantized()
    model_path, log_path = tmp_path / "q.pb", tmp_path / "ranges.log"
    model_path.write_bytes(data)
    assert gttc_main(["calibrate", str(model_path), "--calibration", str(CALIBRATION), "-o", str(log_path)]) == 0
    err = capsys.readouterr().err
    assert "calibrating" in err and "100/100" in err  # tqdm's progress bar, with the count
    log = read_log(log_path)
    assert len(log.ranges) == 12 and all(len(pairs) == 100 for pairs in log.ranges.values())
    freeze = f'freeze_requantization_ranges(min_max_log_file="{log_path}")'
    by_log = transform_graph(data, inputs, outputs, freeze)
    assert_same_graphdef(by_log, gtt_transform(data, inputs, outputs, freeze))
    in_one_pass = transform_graph(data, inputs, outputs,
                                  f'calibrate_ranges(data="{CALIBRATION}", activations=false)')
    assert_same_graphdef(in_one_pass, by_log, ("calibrate_ranges", "calibrate + freeze"))


def test_calibrate_refuses_a_graph_without_ranges(tmp_path: Path, capsys) -> None:
    out = tmp_path / "ranges.log"
    code = gttc_main(["calibrate", str(FIXTURES / f"{DIGITS}.pb"), "--calibration", str(CALIBRATION), "-o", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "no RequantizationRange ops" in err[0] and not out.exists()


def test_calibration_mismatch_is_one_line_exit_2_and_no_output(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.npz"
    np.savez(bad, pixels=np.zeros((3, 1, 8, 8, 1), np.float32))
    out = tmp_path / "out.pb"
    code = gttc_main(["-O2", "--target=mobile-int8", str(FIXTURES / f"{DIGITS}.pb"), "-o", str(out),
                      "--inputs=input", "--outputs=Identity", "--calibration", str(bad), "-q"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "array 'pixels' is not a graph input" in err[0]
    assert not out.exists() and list(tmp_path.iterdir()) == [bad]


def test_calibration_needs_a_quantizing_pipeline(tmp_path: Path, capsys) -> None:
    code = gttc_main(["-O2", str(FIXTURES / f"{DIGITS}.pb"), "-o", str(tmp_path / "out.pb"),
                      "--calibration", str(CALIBRATION)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--calibration needs a pipeline that runs quantize_nodes" in err[0]


# -- frozen in one compile -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def calibrated() -> bytes:
    model = load_model_fixture(DIGITS)
    return gttc_compile(model.data, model.inputs, model.outputs, 2, "mobile-int8",
                        calibration=str(CALIBRATION)).graph_def


def test_calibrated_graph_measures_nothing_at_run_time(calibrated: bytes) -> None:
    graph = load_graph_bytes(calibrated)
    kinds = {op.type for op in graph}
    assert "RequantizationRange" not in kinds and not kinds & {"Min", "Max"}
    assert {"QuantizedConv2D", "QuantizedMatMul"} <= kinds


def held_out_accuracy(logits: np.ndarray) -> float:
    labels = np.load(HELD_OUT)["y"]
    return float(np.mean(np.argmax(logits.reshape(len(labels), -1), axis=1) == labels))


@pytest.mark.tf
def test_calibrated_graph_keeps_accuracy_in_tf_and_interpreter(calibrated: bytes) -> None:
    """Top-1 on the 360 held-out digits within 0.5 points of float, in TF and in gttc's interpreter."""
    from compiler.runtime.interpreter import Interpreter

    model = load_model_fixture(DIGITS)
    images = np.load(HELD_OUT)["x"]
    float_logits = run_tf(model.data, {"input": images}, ["Identity"])["Identity"]
    interpreter = Interpreter(load_graph_bytes(calibrated))
    ours = np.concatenate([interpreter.run({"input": image[None]}, ["Identity"])["Identity"] for image in images])
    in_tf = run_tf(calibrated, {"input": images}, ["Identity"])["Identity"]  # frozen ranges: batching is exact
    base = held_out_accuracy(float_logits)
    assert base >= 0.99
    for logits in (ours, in_tf):
        assert held_out_accuracy(logits) >= base - 0.005
        cosine = np.sum(logits * float_logits, axis=1) / (
            np.linalg.norm(logits, axis=1) * np.linalg.norm(float_logits, axis=1))
        assert float(np.mean(cosine)) >= 0.999
