"""mobile-int8 graphs exported to ONNX (ops_quantized) agree with gttc's TF-exact interpreter.

End to end the logits must keep a cosine of at least 0.9999 to the eight-bit
GraphDef run in the interpreter.  Per op, with run-time ranges
(DynamicQuantizeLinear, ConvInteger), each QuantizeV2 is given the very float
tensor onnxruntime quantized and must reproduce its codes within 1 LSB (at
least 99.9% of them); each QuantizedConv2D/QuantizedMatMul is given
onnxruntime's codes and must reproduce its int32 accumulator.  With calibrated
ranges (QDQ), `compare_quantized` recomputes every quantization point in
onnxruntime from the interpreter's codes: within 1 LSB.
"""
from __future__ import annotations

import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional
from unittest import mock

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from compiler.api import compile as gttc_compile
from compiler.backends.onnx import export
from compiler.backends.onnx.context import LoweringContext
from compiler.backends.onnx.dtypes import onnx_type
from compiler.frontends.graphdef import load_graph_bytes
from compiler.ir.graph import Graph, Value
from compiler.runtime.int8_equivalence import compare_quantized
from compiler.runtime.interpreter import run_graph
from compiler.runtime.kernels import get_kernel
from compiler.runtime.onnx_runner import run_onnx
from tests.conftest import FIXTURES, Model, calibration_for, load_model_fixture

MODELS = ("digits_cnn", "digits_mlp", "keras_small_cnn", "keras_mobilenet_v2_small")
PRODUCTS = ("QuantizedConv2D", "QuantizedMatMul")
ROOT = Path(__file__).resolve().parents[2]


def _calibration(model: Model, folder: Path) -> str:
    return calibration_for(model, folder, seed=7)


def _eight_bit(model: Model, calibration: Optional[str]) -> Graph:
    result = gttc_compile(model.data, model.inputs, model.outputs, 2, "mobile-int8", calibration=calibration)
    return load_graph_bytes(result.graph_def)


@contextmanager
def _recording_bindings() -> Iterator[dict[str, tuple[str, object]]]:
    """Which ONNX tensor (and layout) each TF value was lowered to, for per-op comparisons; keyed
    by tensor name, as the exporter may lower a rewritten copy of the graph (export_rewrites)."""
    seen: dict[str, tuple[str, object]] = {}
    original = LoweringContext.bind

    def bind(self: LoweringContext, value: Value, tensor: str, perm: object = None, describe: bool = True) -> None:
        seen[value.name] = (tensor, perm)
        original(self, value, tensor, perm, describe)

    with mock.patch.object(LoweringContext, "bind", bind):
        yield seen


def _with_outputs(model: onnx.ModelProto, tensors: dict[str, Value]) -> onnx.ModelProto:
    """A copy of `model` that also outputs the given intermediate tensors."""
    extended = onnx.ModelProto()
    extended.CopyFrom(model)
    present = {o.name for o in extended.graph.output}
    for name, value in tensors.items():
        if name not in present:
            extended.graph.output.append(helper.make_tensor_value_info(name, onnx_type(value.dtype), None))
    return extended


def _tf_layout(array: np.ndarray, perm: object) -> np.ndarray:
    return array if perm is None else np.transpose(array, np.argsort(perm))


class Export:
    """One eight-bit graph, its ONNX export, and both runs on the fixture's feeds."""

    def __init__(self, model: Model, graph: Graph) -> None:
        self.model, self.graph = model, graph
        with _recording_bindings() as bound:
            self.onnx = export(graph, model.inputs, model.outputs)
        self.bound = bound
        self.initializers = {i.name: numpy_helper.to_array(i) for i in self.onnx.graph.initializer}
        watched = [v for op in graph for v in op.results[:1] if op.type in ("QuantizeV2", "Dequantize") + PRODUCTS]
        watched += [op.operands[0] for op in graph if op.type == "QuantizeV2"]
        produced = {out for node in self.onnx.graph.node for out in node.output}
        runtime = {bound[v.name][0]: v for v in watched if v.name in bound and bound[v.name][0] in produced}
        fetched = run_onnx(_with_outputs(self.onnx, runtime), model.feeds, list(model.outputs) + list(runtime))
        self.outputs = {name: fetched[name] for name in model.outputs}
        self.values = {v: fetched[name] for name, v in runtime.items()}
        self.values.update({graph.value(name): np.asarray(feed) for name, feed in model.feeds.items()})
        self.reference = run_graph(graph, model.feeds, model.outputs)

    def onnx_value(self, value: Value) -> Optional[np.ndarray]:
        """The value as onnxruntime computed it (or the exporter folded it), in TF layout."""
        tensor, perm = self.bound.get(value.name, (None, None))
        if value in self.values:
            return _tf_layout(self.values[value], perm)
        if tensor in self.initializers:
            return _tf_layout(self.initializers[tensor], perm)
        return None


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def _per_op(run: Export) -> dict[str, object]:
    """Feed each quantized op what onnxruntime fed it; returns the agreement statistics."""
    code_diffs, accumulator_diffs, relative = [], [], [0.0]
    for op in run.graph:
        if op.type != "QuantizeV2" or op.results[0] not in run.values:
            continue
        x = run.onnx_value(op.operands[0])
        assert x is not None, f"no ONNX value for the input of {op.name}"
        users = [u for u, i in op.results[0].uses if u.type in PRODUCTS and i == 0]
        fetches = [v.name for v in op.results] + [v.name for u in users for v in u.operands[1:]]
        ref = run_graph(run.graph, {op.operands[0].name: x}, fetches)
        codes = run.onnx_value(op.results[0])
        code_diffs.append(np.abs(codes.astype(np.int64) - ref[op.results[0].name].astype(np.int64)).ravel())
        for user in users:
            inputs = [codes] + [ref[v.name] for v in user.operands[1:]]
            accumulator, lo, hi = get_kernel(user.type)(user.attrs, inputs)
            ours = run.onnx_value(user.results[0])
            accumulator_diffs.append(np.abs(ours.astype(np.int64) - accumulator.astype(np.int64)).ravel())
            for reader, _ in user.results[0].uses:
                got = run.onnx_value(reader.results[0]) if reader.type == "Dequantize" else None
                if got is not None:  # onnxruntime's float result against TF's Dequantize of the same codes
                    expected = get_kernel("Dequantize")(reader.attrs, [ours.astype(np.int32), lo, hi])[0]
                    relative.append(float(np.max(np.abs(got - expected)) / max(np.max(np.abs(expected)), 1e-30)))
    codes, acc = np.concatenate(code_diffs), np.concatenate(accumulator_diffs)
    assert len(relative) > 1, "no Dequantize of an accumulator was compared"
    return {"quantize_ops": len(code_diffs), "codes": codes.size, "max_lsb": int(codes.max()),
            "exact": float(np.mean(codes == 0)), "within_1": float(np.mean(codes <= 1)),
            "products": len(accumulator_diffs), "max_acc_diff": int(acc.max()), "max_rel": max(relative)}


@pytest.fixture(scope="module", params=[(m, c) for m in MODELS for c in (False, True)],
                ids=[f"{m}-{'calibrated' if c else 'dynamic'}" for m in MODELS for c in (False, True)])
def exported(request, tmp_path_factory) -> Export:
    name, calibrated = request.param
    model = load_model_fixture(name)
    calibration = _calibration(model, tmp_path_factory.mktemp(name)) if calibrated else None
    return Export(model, _eight_bit(model, calibration))


def _calibrated(run: Export) -> bool:
    """Frozen ranges leave no run-time Min/Max measurement in the graph."""
    return not any(op.type in ("Min", "Max") for op in run.graph)


def test_model_is_valid_onnx(exported: Export) -> None:
    """Frozen ranges give QDQ around float ops (onnxruntime fuses them); run-time ranges give
    DynamicQuantizeLinear with the integer products."""
    onnx.checker.check_model(exported.onnx, full_check=True)
    kinds = {n.op_type for n in exported.onnx.graph.node}
    if _calibrated(exported):
        assert {"QuantizeLinear", "DequantizeLinear"} <= kinds and not kinds & {"ConvInteger", "MatMulInteger"}
    else:
        assert "DynamicQuantizeLinear" in kinds and kinds & {"ConvInteger", "MatMulInteger"}


def test_logits_match_interpreter(exported: Export) -> None:
    for name in exported.model.outputs:
        cosine = _cosine(exported.outputs[name], exported.reference[name])
        print(f"{exported.model.name} {name}: cosine {cosine:.9f}")
        assert cosine >= 0.9999, f"{name}: cosine {cosine}"


def test_each_op_matches_interpreter(exported: Export) -> None:
    if _calibrated(exported):  # QDQ: each quantization point recomputed from the interpreter's codes
        report = compare_quantized(exported.graph, exported.onnx, exported.model.feeds, exported.model.inputs,
                                   exported.model.outputs)
        print(report.format())
        assert report.passed(0.999) and report.rows
        assert all(row.per_op.max_lsb <= 1 for row in report.rows)
        return
    stats = _per_op(exported)
    print(f"{exported.model.name}: {stats}")
    assert stats["quantize_ops"] > 0 and stats["products"] > 0
    assert stats["max_lsb"] <= 1 and stats["within_1"] >= 0.999
    assert stats["max_acc_diff"] == 0  # same codes in, so the integer accumulator is exact
    assert stats["max_rel"] <= 1e-6


def test_frozen_ranges_fold(tmp_path: Path) -> None:
    """With --calibration every scale and zero point is an initializer: no range arithmetic runs."""
    model = load_model_fixture("digits_cnn")
    graph = _eight_bit(model, _calibration(model, tmp_path))
    kinds = {n.op_type for n in export(graph, model.inputs, model.outputs).graph.node}
    assert not kinds & {"ReduceMin", "ReduceMax", "Floor", "Div"}


def test_digits_accuracy_matches_float(tmp_path: Path) -> None:
    model = load_model_fixture("digits_cnn")
    data = np.load(FIXTURES / "digits_cnn_test.npz")
    logits = model.outputs[0]
    accuracy = {}
    for label, graph in (("float", load_graph_bytes(gttc_compile(model.data, model.inputs, model.outputs, 2).graph_def)),
                         ("int8", _eight_bit(model, _calibration(model, tmp_path)))):
        onnx_model = export(graph, model.inputs, model.outputs, input_shapes={model.inputs[0]: [None, 8, 8, 1]})
        out = run_onnx(onnx_model, {model.inputs[0]: data["x"].astype(np.float32)}, [logits])[logits]
        accuracy[label] = 100.0 * float(np.mean(out.argmax(-1) == data["y"]))
    print(f"digits_cnn held-out accuracy: {accuracy}")
    assert abs(accuracy["int8"] - accuracy["float"]) <= 0.5


def test_cli_writes_graphdef_and_onnx(tmp_path: Path) -> None:
    model = load_model_fixture("digits_cnn")
    pb, onnx_path = tmp_path / "m.pb", tmp_path / "m.onnx"
    done = subprocess.run([sys.executable, "-m", "compiler.cli", "-O2", "--target=mobile-int8", str(model.path),
                           "-o", str(pb), "-o", str(onnx_path), f"--inputs={','.join(model.inputs)}",
                           f"--outputs={','.join(model.outputs)}"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    onnx.checker.check_model(onnx.load(str(onnx_path)), full_check=True)
    graph = load_graph_bytes(pb.read_bytes())
    assert any(op.type == "QuantizedConv2D" for op in graph)
    expected = run_graph(graph, model.feeds, model.outputs)
    got = run_onnx(str(onnx_path), model.feeds, model.outputs)
    assert _cosine(got[model.outputs[0]], expected[model.outputs[0]]) >= 0.9999
