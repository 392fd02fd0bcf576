"""QDQ -> QOperator rewrite (compiler/backends/onnx/qoperator.py), checked in onnxruntime.

Fixture models: gttc's float ONNX export of each fixture, quantized by
onnxruntime's own `quantize_static` (QDQ, uint8 activations, int8 weights,
MinMax on seeded random feeds, per tensor and per channel).  onnxruntime fuses
a QDQ model's groups into the same integer kernels the rewrite spells out, so
the QOperator model must give the QDQ model's outputs (cosine >= 0.9999, at
most one output LSB apart; measured: identical), fuse every group onnxruntime's
own QOperator quantizer fuses (except Softmax, left QDQ by design), pass the
full ONNX checker and be byte-identical run to run.

Hand-built groups: each rewrite against the QDQ group's ONNX meaning
(onnxruntime with graph optimizations off, so no fusion), within one LSB.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Callable, Optional, Sequence

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.backends.onnx import export
from compiler.backends.onnx.qoperator import MS_DOMAIN, to_qoperator
from compiler.frontends.graphdef import load_graph
from tests.conftest import load_model_fixture

ort = pytest.importorskip("onnxruntime")
quantization = pytest.importorskip("onnxruntime.quantization")

MODELS = ("keras_small_cnn", "keras_mobilenet_v2_small", "digits_cnn", "digits_mlp")
QDQ_NODES = {"QuantizeLinear", "DequantizeLinear"}
# Float ops the fixtures are allowed to keep in QDQ: not in the rewrite's table.
ALLOWED_LEFT = {"left_qdq_ReduceMean", "left_qdq_Softmax", "left_qdq_Shape"}


# ---------------------------------------------------------------------------------------------
# onnxruntime helpers
# ---------------------------------------------------------------------------------------------

def _session(model: onnx.ModelProto, fuse: bool = True) -> "ort.InferenceSession":
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    if not fuse:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _run(model: onnx.ModelProto, feeds: dict[str, np.ndarray], fuse: bool = True) -> list[np.ndarray]:
    return _session(model, fuse).run(None, feeds)


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def _op_types(model: onnx.ModelProto) -> Counter:
    return Counter(node.op_type for node in model.graph.node)


# ---------------------------------------------------------------------------------------------
# Fixture models quantized by onnxruntime
# ---------------------------------------------------------------------------------------------

class _Feeds(quantization.CalibrationDataReader):
    def __init__(self, feeds: list[dict[str, np.ndarray]]) -> None:
        self._feeds = iter(feeds)

    def get_next(self) -> Optional[dict[str, np.ndarray]]:
        return next(self._feeds, None)


def _calibration(feeds: dict[str, np.ndarray], count: int = 3) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(11)
    return [{k: rng.uniform(v.min(), v.max(), v.shape).astype(v.dtype) for k, v in feeds.items()}
            for _ in range(count)]


class Quantized:
    """A fixture's float ONNX export and onnxruntime's quantizations of it, made on demand."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._cache: dict[tuple, onnx.ModelProto] = {}

    def float_path(self, name: str) -> Path:
        path = self.folder / f"{name}.onnx"
        if not path.exists():
            fixture = load_model_fixture(name)
            onnx.save(export(load_graph(fixture.path), fixture.inputs, fixture.outputs), path)
        return path

    def get(self, name: str, fmt: str = "QDQ", per_channel: bool = False,
            activations: str = "QUInt8") -> onnx.ModelProto:
        key = (name, fmt, per_channel, activations)
        if key not in self._cache:
            out = self.folder / f"{name}_{fmt}_{int(per_channel)}_{activations}.onnx"
            quantization.quantize_static(
                str(self.float_path(name)), str(out), _Feeds(_calibration(load_model_fixture(name).feeds)),
                quant_format=getattr(quantization.QuantFormat, fmt), per_channel=per_channel,
                activation_type=getattr(quantization.QuantType, activations),
                weight_type=quantization.QuantType.QInt8,
                calibrate_method=quantization.CalibrationMethod.MinMax,
                # onnxruntime's per-channel bias check fails on Gemm's [1, N] bias without this.
                extra_options={"QDQDisableWeightAdjustForInt32Bias": per_channel})
            self._cache[key] = onnx.load(str(out))
        return self._cache[key]


@pytest.fixture(scope="module")
def quantized(tmp_path_factory: pytest.TempPathFactory) -> Quantized:
    return Quantized(tmp_path_factory.mktemp("qoperator"))


def _output_lsbs(model: onnx.ModelProto) -> list[float]:
    """Each graph output's step: the scale of the DequantizeLinear producing it."""
    constants = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    producer = {name: node for node in model.graph.node for name in node.output}
    lsbs = []
    for output in model.graph.output:
        node = producer[output.name]
        assert node.op_type == "DequantizeLinear", output.name
        lsbs.append(float(constants[node.input[1]]))
    return lsbs


def _feeds(name: str) -> list[dict[str, np.ndarray]]:
    fixture = load_model_fixture(name)
    return [dict(fixture.feeds)] + _calibration(fixture.feeds, 2)


@pytest.mark.parametrize("per_channel", [False, True], ids=["per_tensor", "per_channel"])
@pytest.mark.parametrize("name", MODELS)
def test_qoperator_gives_the_qdq_outputs(quantized: Quantized, name: str, per_channel: bool) -> None:
    qdq = quantized.get(name, per_channel=per_channel)
    qop, _ = to_qoperator(qdq)
    for feeds in _feeds(name):
        expected, got = _run(qdq, feeds), _run(qop, feeds)
        for lsb, want, have in zip(_output_lsbs(qdq), expected, got):
            assert _cosine(want, have) >= 0.9999
            assert np.abs(want - have).max() <= 1.0001 * lsb


def test_int8_activations(quantized: Quantized) -> None:
    """int8 activations: the same rewrite.

    onnxruntime does not fuse int8 QDQ Add, Mul and one Conv here and runs them
    in float, so the integer kernels differ from it by up to 1 LSB (cosine 0.99989
    on the 10-way softmax).
    """
    qdq = quantized.get("keras_small_cnn", per_channel=True, activations="QInt8")
    qop, counts = to_qoperator(qdq)
    assert counts == Counter({"QLinearConv": 6, "QLinearMul": 5, "QLinearAdd": 6, "QGemm": 2,
                              "QLinearGlobalAveragePool": 1, "int8_Squeeze": 1, "left_qdq_Softmax": 1})
    for feeds in _feeds("keras_small_cnn"):
        (want,), (have,) = _run(qdq, feeds), _run(qop, feeds)
        assert _cosine(want, have) >= 0.999
        assert np.abs(want - have).max() <= 1.0001 * _output_lsbs(qdq)[0]


@pytest.mark.parametrize("name", MODELS)
def test_standard_only_fuses_conv_and_matmul_into_default_domain_ops(quantized: Quantized, name: str) -> None:
    """The `qlinear` format: Conv becomes QLinearConv, Add/Mul/Gemm/pools stay QDQ, nothing from
    com.microsoft, and onnxruntime computes the QDQ model's outputs."""
    qdq = quantized.get(name, per_channel=True)
    ours, counts = to_qoperator(qdq, standard_only=True)
    onnx.checker.check_model(ours, full_check=True)
    before, after = _op_types(qdq), _op_types(ours)
    assert counts["QLinearConv"] == before["Conv"] and "Conv" not in after
    assert all(node.domain == "" for node in ours.graph.node)
    assert not any(o.domain == MS_DOMAIN for o in ours.opset_import)
    assert not any(k.startswith("Q") and k not in ("QLinearConv", "QLinearMatMul") for k in counts)
    for feeds in _feeds(name):
        for lsb, want, have in zip(_output_lsbs(qdq), _run(qdq, feeds), _run(ours, feeds)):
            assert _cosine(want, have) >= 0.9999
            assert np.abs(want - have).max() <= 1.0001 * lsb


def test_standard_only_leaves_int8_activations_to_onnxruntime(quantized: Quantized) -> None:
    """onnxruntime keeps int8-activation convolutions in float on x86 (faster than an int8 x int8
    QLinearConv), so `qlinear` leaves those groups QDQ; data movement still runs on the codes."""
    qdq = quantized.get("keras_small_cnn", per_channel=True, activations="QInt8")
    ours, counts = to_qoperator(qdq, standard_only=True)
    assert "QLinearConv" not in counts and counts["left_qdq_Conv"] == 6
    assert counts["int8_Squeeze"] == 1
    assert _op_types(ours)["Conv"] == 6


@pytest.mark.parametrize("per_channel", [False, True], ids=["per_tensor", "per_channel"])
@pytest.mark.parametrize("name", MODELS)
def test_every_group_is_fused(quantized: Quantized, name: str, per_channel: bool) -> None:
    qdq = quantized.get(name, per_channel=per_channel)
    qop, counts = to_qoperator(qdq)
    onnx.checker.check_model(qop, full_check=True)
    before, after = _op_types(qdq), _op_types(qop)
    assert counts["QLinearConv"] == before["Conv"] and "Conv" not in after
    assert counts["QGemm"] == before["Gemm"] and counts["QLinearMatMul"] == before["MatMul"]
    assert counts["QLinearAdd"] == before["Add"] and counts["QLinearMul"] == before["Mul"]
    assert {k for k in counts if k.startswith("left_qdq_")} <= ALLOWED_LEFT
    assert [(i.name, i.type) for i in qop.graph.input] == [(i.name, i.type) for i in qdq.graph.input]
    assert [o.name for o in qop.graph.output] == [o.name for o in qdq.graph.output]
    assert sum(after[t] for t in QDQ_NODES) <= 6  # the input's Q/DQ, the outputs' DQ, around Softmax
    assert any(o.domain == MS_DOMAIN and o.version == 1 for o in qop.opset_import)


def test_counts_on_keras_small_cnn(quantized: Quantized) -> None:
    _, counts = to_qoperator(quantized.get("keras_small_cnn"))
    assert counts == Counter({"QLinearConv": 6, "QLinearMul": 5, "QLinearAdd": 6, "QGemm": 2,
                              "QLinearGlobalAveragePool": 1, "uint8_Squeeze": 1, "left_qdq_Softmax": 1})


def test_counts_on_digits_cnn(quantized: Quantized) -> None:
    """Concat, pools, and data movement between equal quantizations run on uint8."""
    qop, counts = to_qoperator(quantized.get("digits_cnn", per_channel=True))
    assert counts == Counter({"QLinearConv": 4, "QLinearMul": 2, "QLinearAdd": 3, "QGemm": 2, "QLinearConcat": 1,
                              "QLinearAveragePool": 1, "uint8_MaxPool": 1, "uint8_Transpose": 1,
                              "uint8_Reshape": 1, "left_qdq_Softmax": 1})  # the flatten's target: a constant
    graph_output = {o.name for o in qop.graph.output}
    producer = {name: node for node in qop.graph.node for name in node.output}
    # "Identity" is a graph output and Softmax's input: its DequantizeLinear stays.
    assert "Identity" in graph_output and producer["Identity"].op_type == "DequantizeLinear"


@pytest.mark.parametrize("name", MODELS)
def test_same_fusions_as_onnxruntime_qoperator(quantized: Quantized, name: str) -> None:
    """Node types equal onnxruntime's QOperator output, but for its QLinearSoftmax."""
    ours, _ = to_qoperator(quantized.get(name))
    theirs = quantized.get(name, fmt="QOperator")
    ignored = QDQ_NODES | {"Softmax", "QLinearSoftmax"}
    assert (Counter({k: v for k, v in _op_types(ours).items() if k not in ignored})
            == Counter({k: v for k, v in _op_types(theirs).items() if k not in ignored}))


@pytest.mark.parametrize("name", ["keras_small_cnn", "digits_cnn"])
def test_deterministic(quantized: Quantized, name: str) -> None:
    data = quantized.get(name, per_channel=True).SerializeToString()
    first, counts_a = to_qoperator(onnx.load_from_string(data))
    second, counts_b = to_qoperator(onnx.load_from_string(data))
    assert first.SerializeToString() == second.SerializeToString()
    assert list(counts_a.items()) == list(counts_b.items())


def test_input_model_untouched(quantized: Quantized) -> None:
    qdq = quantized.get("keras_small_cnn")
    before = qdq.SerializeToString()
    to_qoperator(qdq)
    assert qdq.SerializeToString() == before


# ---------------------------------------------------------------------------------------------
# Hand-built QDQ groups
# ---------------------------------------------------------------------------------------------

class Qdq:
    """Small QDQ graphs: uint8 graph inputs dequantized, float ops, quantized uint8 outputs."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[TensorProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.outputs: list[onnx.ValueInfoProto] = []
        self.value_info: list[onnx.ValueInfoProto] = []
        self.shapes: dict[str, tuple[int, ...]] = {}

    def _name(self, base: str) -> str:
        return f"{base}{len(self.nodes) + len(self.initializers)}"

    def const(self, value: object, dtype: type = np.float32) -> str:
        name = self._name("c")
        self.initializers.append(numpy_helper.from_array(np.asarray(value, dtype), name))
        return name

    def dq(self, x: str, scale: object, zp: object, zp_dtype: type = np.uint8, axis: Optional[int] = None) -> str:
        inputs = [x, self.const(scale), self.const(zp, zp_dtype)]
        return self.op("DequantizeLinear", inputs, **({} if axis is None else {"axis": axis}))

    def input(self, name: str, shape: Sequence[int], scale: float, zp: int) -> str:
        self.inputs.append(helper.make_tensor_value_info(name, TensorProto.UINT8, list(shape)))
        self.shapes[name] = tuple(shape)
        return self.dq(name, scale, zp)

    def weight(self, codes: np.ndarray, scale: object, zp: object, axis: Optional[int] = None) -> str:
        return self.dq(self.const(codes, codes.dtype), scale, zp, codes.dtype.type, axis)

    def op(self, op_type: str, inputs: Sequence[str], **attrs: object) -> str:
        out = self._name(op_type.lower())
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], name=f"{op_type}_{out}", **attrs))
        return out

    def q(self, x: str, scale: float, zp: int, name: str = "y") -> str:
        self.nodes.append(helper.make_node("QuantizeLinear", [x, self.const(scale), self.const(zp, np.uint8)], [name],
                                           name=f"Q_{name}"))
        self.outputs.append(helper.make_tensor_value_info(name, TensorProto.UINT8, None))
        return name

    def model(self, opset: int = 17) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, "qdq", self.inputs, self.outputs, self.initializers,
                                  value_info=self.value_info)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = 8
        inferred = onnx.shape_inference.infer_shapes(model)  # output shapes only; value_info stays ours
        for output, typed in zip(model.graph.output, inferred.graph.output):
            output.type.CopyFrom(typed.type)
        onnx.checker.check_model(model, full_check=True)
        return model

    def feeds(self, seed: int = 0) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(seed)
        return {name: rng.integers(0, 256, shape).astype(np.uint8) for name, shape in self.shapes.items()}


def _rng(seed: int = 3) -> np.random.Generator:
    return np.random.default_rng(seed)


def _conv(g: Qdq, bias: str = "int32", weights: str = "int8", per_channel: bool = False) -> str:
    x = g.input("x", (1, 3, 8, 8), 0.02, 128)
    if weights == "int8":
        codes = _rng().integers(-127, 128, (4, 3, 3, 3)).astype(np.int8)
        zp = np.zeros(4 if per_channel else (), np.int8)
    else:
        codes = _rng().integers(0, 256, (4, 3, 3, 3)).astype(np.uint8)
        zp = np.array([120, 128, 131, 127], np.uint8) if per_channel else np.uint8(128)
    w_scale = np.array([0.01, 0.02, 0.015, 0.005], np.float32) if per_channel else np.float32(0.01)
    w = g.weight(codes, w_scale, zp, 0 if per_channel else None)
    inputs = [x, w]
    if bias == "int32":
        scale = np.float32(0.02) * w_scale
        inputs.append(g.dq(g.const(_rng().integers(-500, 500, 4), np.int32), scale, np.zeros(np.shape(scale), np.int32),
                           np.int32, 0 if per_channel else None))
    elif bias == "float":
        inputs.append(g.const(_rng().normal(0, 0.3, 4)))
    elif bias == "wrong_scale":
        inputs.append(g.dq(g.const(_rng().integers(-500, 500, 4), np.int32), 0.001, 0, np.int32))
    return g.op("Conv", inputs, kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1])


def _build_conv(bias: str, weights: str, per_channel: bool) -> Callable[[Qdq], None]:
    def build(g: Qdq) -> None:
        g.q(_conv(g, bias, weights, per_channel), 0.05, 120)
    return build


def _build_matmul(per_channel: bool) -> Callable[[Qdq], None]:
    def build(g: Qdq) -> None:
        a = g.input("a", (5, 16), 0.03, 100)
        codes = _rng().integers(-127, 128, (16, 6)).astype(np.int8)
        scale = np.linspace(0.01, 0.02, 6).astype(np.float32) if per_channel else np.float32(0.01)
        b = g.weight(codes, scale, np.zeros(np.shape(scale), np.int8), 1 if per_channel else None)
        g.q(g.op("MatMul", [a, b]), 0.08, 128)
    return build


def _build_gemm(trans_b: int, bias: str) -> Callable[[Qdq], None]:
    def build(g: Qdq) -> None:
        a = g.input("a", (2, 16), 0.03, 100)
        shape = (6, 16) if trans_b else (16, 6)
        b = g.weight(_rng().integers(-127, 128, shape).astype(np.int8), 0.01, np.int8(0))
        if bias == "int32":
            c = g.dq(g.const(_rng().integers(-900, 900, (1, 6)), np.int32), np.float32(0.03) * np.float32(0.01),
                     0, np.int32)
        else:
            c = g.const(_rng().normal(0, 0.5, 6))
        g.q(g.op("Gemm", [a, b, c], transB=trans_b), 0.08, 128)
    return build


def _build_binary(op_type: str) -> Callable[[Qdq], None]:
    def build(g: Qdq) -> None:
        a = g.input("a", (1, 4, 5, 5), 0.02, 130)
        b = g.input("b", (1, 4, 1, 1), 0.05, 7)
        g.q(g.op(op_type, [a, b]), 0.06 if op_type == "Add" else 0.2, 125)
    return build


def _build_global_average_pool(g: Qdq) -> None:
    g.q(g.op("GlobalAveragePool", [g.input("x", (1, 3, 7, 7), 0.02, 128)]), 0.004, 120)


def _build_average_pool(g: Qdq) -> None:
    x = g.input("x", (1, 3, 7, 7), 0.02, 128)
    pool = g.op("AveragePool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=1)
    g.q(pool, 0.01, 126)


def _build_concat(g: Qdq) -> None:
    a = g.input("a", (1, 2, 4, 4), 0.02, 128)
    b = g.input("b", (1, 3, 4, 4), 0.05, 0)
    g.q(g.op("Concat", [a, b], axis=1), 0.04, 60)


GROUPS: dict[str, tuple[Callable[[Qdq], None], str]] = {
    "conv_int32_bias": (_build_conv("int32", "int8", False), "QLinearConv"),
    "conv_per_channel": (_build_conv("int32", "int8", True), "QLinearConv"),
    "conv_uint8_per_channel_zero_points": (_build_conv("none", "uint8", True), "QLinearConv"),
    "conv_float_bias": (_build_conv("float", "int8", True), "QLinearConv"),
    "matmul": (_build_matmul(False), "QLinearMatMul"),
    "matmul_per_column": (_build_matmul(True), "QLinearMatMul"),
    "gemm_int32_bias": (_build_gemm(0, "int32"), "QGemm"),
    "gemm_trans_b_float_bias": (_build_gemm(1, "float"), "QGemm"),
    "add": (_build_binary("Add"), "QLinearAdd"),
    "mul": (_build_binary("Mul"), "QLinearMul"),
    "global_average_pool": (_build_global_average_pool, "QLinearGlobalAveragePool"),
    "average_pool": (_build_average_pool, "QLinearAveragePool"),
    "concat": (_build_concat, "QLinearConcat"),
}


def _fuse(build: Callable[[Qdq], None]) -> tuple[Qdq, onnx.ModelProto, onnx.ModelProto, Counter]:
    g = Qdq()
    build(g)
    qdq = g.model()
    qop, counts = to_qoperator(qdq)
    return g, qdq, qop, counts


def _codes_close(qdq: onnx.ModelProto, qop: onnx.ModelProto, g: Qdq, lsbs: int = 1) -> int:
    """Largest code difference between the QDQ meaning (no fusion) and the QOperator model."""
    worst = 0
    for seed in range(3):
        want, got = _run(qdq, g.feeds(seed), fuse=False), _run(qop, g.feeds(seed))
        for a, b in zip(want, got):
            assert a.dtype == b.dtype == np.uint8 and a.shape == b.shape
            worst = max(worst, int(np.abs(a.astype(int) - b.astype(int)).max()))
    assert worst <= lsbs
    return worst


@pytest.mark.parametrize("case", list(GROUPS))
def test_group_becomes_one_integer_node(case: str) -> None:
    build, op_type = GROUPS[case]
    g, qdq, qop, counts = _fuse(build)
    assert [n.op_type for n in qop.graph.node] == [op_type]
    assert counts[op_type] == 1 and not [k for k in counts if k.startswith("left_qdq_")]
    assert counts["quantized_float_bias"] == int("float_bias" in case)
    uses_ms = any(n.domain == MS_DOMAIN for n in qop.graph.node)
    assert any(o.domain == MS_DOMAIN for o in qop.opset_import) == uses_ms
    onnx.checker.check_model(qop, full_check=True)
    _codes_close(qdq, qop, g)


def test_global_average_pool_is_channels_first() -> None:
    _, _, qop, _ = _fuse(_build_global_average_pool)
    node = qop.graph.node[0]
    assert node.domain == MS_DOMAIN and helper.get_attribute_value(node.attribute[0]) == 0


def test_float_bias_is_quantized_at_x_scale_times_w_scale() -> None:
    _, qdq, qop, _ = _fuse(_build_conv("float", "int8", True))
    constants = {t.name: numpy_helper.to_array(t) for t in qop.graph.initializer}
    bias = constants[qop.graph.node[0].input[8]]
    float_bias = [numpy_helper.to_array(t) for t in qdq.graph.initializer if t.dims == [4] and t.data_type == 1][-1]
    scale = np.float32(0.02) * np.array([0.01, 0.02, 0.015, 0.005], np.float32)
    assert bias.dtype == np.int32
    np.testing.assert_array_equal(bias, np.rint(float_bias.astype(np.float64) / scale.astype(np.float64)))


def _pass_through(op_type: str, zp: int = 0, out_scale: float = 0.02, out_zp: Optional[int] = None,
                  **attrs: object) -> Callable[[Qdq], None]:
    def build(g: Qdq) -> None:
        x = g.input("x", (1, 4, 6, 6), 0.02, zp)
        extra = {
            "Reshape": lambda: [g.const([1, 24, 6], np.int64)],
            "Squeeze": lambda: [g.const([0], np.int64)],
            "Pad": lambda: [g.const([0, 0, 1, 2, 0, 0, 1, 0], np.int64)],
        }.get(op_type, lambda: [])()
        g.q(g.op(op_type, [x] + extra, **attrs), out_scale, zp if out_zp is None else out_zp)
    return build


PASS_THROUGH_CASES = {
    "MaxPool": dict(kernel_shape=[2, 2], strides=[2, 2]),
    "Reshape": {},
    "Transpose": dict(perm=[0, 2, 3, 1]),
    "Flatten": dict(axis=1),
    "Squeeze": {},
    "Pad": {},
}


@pytest.mark.parametrize("op_type", list(PASS_THROUGH_CASES))
def test_data_movement_runs_on_uint8(op_type: str) -> None:
    g, qdq, qop, counts = _fuse(_pass_through(op_type, zp=9, **PASS_THROUGH_CASES[op_type]))
    assert [n.op_type for n in qop.graph.node] == [op_type]
    assert counts == Counter({f"uint8_{op_type}": 1})
    assert not any(o.domain == MS_DOMAIN for o in qop.opset_import)
    onnx.checker.check_model(qop, full_check=True)
    assert _codes_close(qdq, qop, g, lsbs=0) == 0


def test_pad_fills_with_the_zero_point() -> None:
    g, qdq, qop, _ = _fuse(_pass_through("Pad", zp=9))
    feeds = g.feeds()
    (padded,) = _run(qop, feeds)
    assert padded.shape == (1, 4, 8, 8)  # pads: H 1 before and after, W 2 before
    assert np.all(padded[:, :, 0, :] == 9) and np.all(padded[:, :, 7, :] == 9) and np.all(padded[:, :, :, :2] == 9)
    np.testing.assert_array_equal(padded[:, :, 1:7, 2:], feeds["x"])


@pytest.mark.parametrize("op_type", ["MaxPool", "Transpose"])
def test_data_movement_between_different_quantizations_stays(op_type: str) -> None:
    _, qdq, qop, counts = _fuse(_pass_through(op_type, zp=9, out_scale=0.03, **PASS_THROUGH_CASES[op_type]))
    assert _op_types(qop) == _op_types(qdq)
    assert counts == Counter({f"left_qdq_{op_type}": 1})


def _activation(kind: str, out_scale: float, out_zp: int) -> Callable[[Qdq], None]:
    def build(g: Qdq) -> None:
        y = _conv(g)
        if kind == "Relu":
            y = g.op("Relu", [y])
        else:
            y = g.op("Clip", [y, g.const(0.0), g.const(6.0)])
        g.q(y, out_scale, out_zp)
    return build


@pytest.mark.parametrize("kind, scale, zp", [("Relu", 0.05, 0), ("Clip", 6.0 / 255, 0), ("Clip", 0.02, 0)])
def test_activation_folds_when_the_range_clamps(kind: str, scale: float, zp: int) -> None:
    g, qdq, qop, counts = _fuse(_activation(kind, scale, zp))
    assert [n.op_type for n in qop.graph.node] == ["QLinearConv"]
    assert counts == Counter({"QLinearConv": 1, f"folded_{kind}": 1})
    _codes_close(qdq, qop, g)


@pytest.mark.parametrize("kind, scale, zp", [("Relu", 0.05, 10), ("Clip", 0.05, 0), ("Clip", 6.0 / 255, 3)])
def test_activation_that_still_clips_keeps_the_group(kind: str, scale: float, zp: int) -> None:
    _, qdq, qop, counts = _fuse(_activation(kind, scale, zp))
    assert qop.SerializeToString() == qdq.SerializeToString()
    assert counts == Counter({"left_qdq_Conv": 1})


def test_bias_at_another_scale_keeps_the_group() -> None:
    _, qdq, qop, counts = _fuse(_build_conv("wrong_scale", "int8", False))
    assert qop.SerializeToString() == qdq.SerializeToString()
    assert counts == Counter({"left_qdq_Conv": 1})


def test_shared_tensors_survive() -> None:
    """A DQ read by a fused and an unfused op, a Q read by two DQs and the graph, a float output seen twice."""
    g = Qdq()
    x = g.input("x", (1, 3, 8, 8), 0.02, 128)
    w = g.weight(_rng().integers(-127, 128, (4, 3, 1, 1)).astype(np.int8), 0.01, np.int8(0))
    g.value_info.append(helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 3, 8, 8]))
    conv = g.op("Conv", [x, w], kernel_shape=[1, 1])
    g.value_info.append(helper.make_tensor_value_info(conv, TensorProto.FLOAT, [1, 4, 8, 8]))
    sigmoid = g.op("Sigmoid", [x])                         # reads the same DQ, no rewrite for it
    g.q(sigmoid, 1 / 255, 0, "sig")
    y = g.q(conv, 0.05, 120, "y")                          # graph output, and read by two DQs:
    pool = g.op("MaxPool", [g.dq(y, 0.05, 120)], kernel_shape=[2, 2], strides=[2, 2])
    g.q(pool, 0.05, 120, "pooled")
    w2 = g.weight(_rng().integers(-127, 128, (4, 4, 1, 1)).astype(np.int8), 0.01, np.int8(0))
    side = g.op("Conv", [g.dq(y, 0.05, 120), w2], kernel_shape=[1, 1])
    g.outputs.append(helper.make_tensor_value_info(side, TensorProto.FLOAT, None))  # float output: no fusion
    g.q(side, 0.05, 120, "side_q")
    qdq = g.model()
    qop, counts = to_qoperator(qdq)
    onnx.checker.check_model(qop, full_check=True)
    assert counts == Counter({"QLinearConv": 1, "uint8_MaxPool": 1, "left_qdq_Sigmoid": 1, "left_qdq_Conv": 1})
    assert [o.name for o in qop.graph.output] == [o.name for o in qdq.graph.output]
    types = _op_types(qop)
    # x's (Sigmoid reads it), and y's and w2's (the unfused Conv reads them)
    assert types["DequantizeLinear"] == 3
    assert [v.name for v in qop.graph.value_info] == [x]  # the fused Conv's float result is gone
    for seed in range(2):
        want, got = _run(qdq, g.feeds(seed), fuse=False), _run(qop, g.feeds(seed))
        for a, b in zip(want, got):  # uint8 outputs in codes, the float one in its Q's steps
            lsb = 1.0 if a.dtype == np.uint8 else 0.05
            assert np.abs(a.astype(np.float64) - b.astype(np.float64)).max() <= 1.0001 * lsb


def test_missing_zero_points_become_one_shared_zero() -> None:
    g = Qdq()
    g.inputs.append(helper.make_tensor_value_info("a", TensorProto.UINT8, [1, 4]))
    g.shapes["a"] = (1, 4)
    a = g.op("DequantizeLinear", ["a", g.const(0.1)])
    b = g.op("DequantizeLinear", ["a", g.const(0.2)])
    g.nodes.append(helper.make_node("QuantizeLinear", [g.op("Add", [a, b]), g.const(0.3)], ["y"]))
    g.outputs.append(helper.make_tensor_value_info("y", TensorProto.UINT8, None))
    qdq = g.model()
    qop, counts = to_qoperator(qdq)
    assert counts == Counter({"QLinearAdd": 1})
    (node,) = qop.graph.node
    zero_points = {node.input[2], node.input[5], node.input[7]}
    assert len(zero_points) == 1
    _codes_close(qdq, qop, g)
