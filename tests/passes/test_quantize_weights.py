"""quantize_weights against GTT: identical GraphDefs, and the quantized graph runs the same in gttc and TF.

GTT's output is the reference byte for byte: node names and order, the
Dequantize's attributes, the quint8 codes and the float32 min/max, on every
committed fixture at several minimum_size values, on constants built to hit
the corners of GTT's range arithmetic, and on this pass's lit files.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from compiler.api import transform_graph
from compiler.backends.graphdef import emit_graphdef_bytes
from compiler.errors import GttcError
from compiler.frontends.graphdef import load_graph_bytes
from compiler.ir.parser import parse_graph
from compiler.passes import run_pipeline
from compiler.passes.quantize_weights import float_to_quint8, round_half_away, weight_range
from compiler.proto import graph_pb2
from compiler.runtime.interpreter import run_graph
from tests.conftest import SMALL_MODELS, build_big_fixture, load_model_fixture
from tests.oracle import gtt_transform, run_tf
from tests.passes.test_gtt_differential import assert_same_graphdef
from tests.passes.test_lit import LIT_DIR, LitCase

pytestmark = pytest.mark.tf

MINIMUM_SIZES = (None, 1, 16, 300)


def transforms(minimum_size) -> str:
    return "quantize_weights" if minimum_size is None else f"quantize_weights(minimum_size={minimum_size})"


def with_kept_control_inputs(gtt_bytes: bytes, original: bytes) -> bytes:
    """GTT's output with each original Const's control inputs on its three new Consts (gttc's deviation)."""
    controls = {n.name: [i for i in n.input if i.startswith("^")]
                for n in graph_pb2.GraphDef.FromString(original).node if n.op == "Const"}
    out = graph_pb2.GraphDef.FromString(gtt_bytes)
    for node in out.node:
        base = re.sub(r"_quantized_(const|min|max)$", "", node.name)
        if base != node.name and node.op == "Const" and controls.get(base):
            node.input.extend(controls[base])
    return out.SerializeToString()


# -- identical to GTT ------------------------------------------------------------------------


@pytest.mark.parametrize("minimum_size", MINIMUM_SIZES, ids=lambda m: f"minimum_size={m}")
@pytest.mark.parametrize("fixture", SMALL_MODELS)
def test_same_as_gtt_on_fixtures(fixture: str, minimum_size) -> None:
    model = load_model_fixture(fixture)
    ours = transform_graph(model.data, model.inputs, model.outputs, transforms(minimum_size))
    gtt = gtt_transform(model.data, model.inputs, model.outputs, transforms(minimum_size))
    assert_same_graphdef(ours, with_kept_control_inputs(gtt, model.data))


def test_control_inputs_kept_where_gtt_drops_them() -> None:
    """tf1_control_flow's scalar float Consts in cond branches keep their control inputs."""
    model = load_model_fixture("tf1_control_flow")
    ours = graph_pb2.GraphDef.FromString(
        transform_graph(model.data, model.inputs, model.outputs, transforms(1)))
    by_name = {n.name: n for n in ours.node}
    for base, control in [("cond_pos/sub/y", "^cond_pos/switch_f"), ("cond_neg/sub/y", "^cond_neg/switch_f")]:
        for suffix in ("_quantized_const", "_quantized_min", "_quantized_max"):
            assert list(by_name[base + suffix].input) == [control]
        assert by_name[base].op == "Dequantize"


def corner_constants() -> dict[str, np.ndarray]:
    """Float constants at the corners of GTT's range and rounding arithmetic (seeded)."""
    rng = np.random.default_rng(7)
    grid = (np.arange(2048, dtype=np.float32) / np.float32(8.0)) - np.float32(100.0)
    signed_zero_first = np.abs(rng.normal(size=64)).astype(np.float32)
    signed_zero_first[[3, 9]] = [-0.0, 0.0]
    positive_zero_first = signed_zero_first.copy()
    positive_zero_first[[3, 9]] = [0.0, -0.0]
    huge = rng.uniform(-3e38, 3e38, size=40).astype(np.float32)
    huge[:2] = [-3.4e38, 3.4e38]
    return {
        "zeros": np.zeros((32, 64), np.float32),
        "negative": -np.abs(rng.normal(size=(40, 30))).astype(np.float32),
        "equal_positive": np.full((17,), 0.3, np.float32),
        "equal_tiny": np.full((20,), 1e-7, np.float32),
        "equal_negative": np.full((20,), -2.5, np.float32),
        "minus_zero_min": signed_zero_first,
        "plus_zero_min": positive_zero_first,
        "grid_ties": grid,
        "huge_range": huge,
        "denormals": (rng.normal(size=64) * 1e-39).astype(np.float32),
        "large": (rng.uniform(1e29, 1e30, size=100)).astype(np.float32),
        "tiny_scale": (rng.normal(size=(16, 16)) * 1e-3).astype(np.float32),
        "big_scale": (rng.normal(size=(8, 8, 4)) * 1e3).astype(np.float32),
        "scalar": np.array(2.75, np.float32),
        "empty": np.zeros((0, 3), np.float32),
        "ints_are_left": np.arange(2000, dtype=np.int32),
    }


def constants_graph(arrays: dict[str, np.ndarray]) -> bytes:
    """A GraphDef of Consts (packed tensor_content, as TF writes them)."""
    graph = graph_pb2.GraphDef()
    for name, array in arrays.items():
        node = graph.node.add(name=name, op="Const")
        dtype = 1 if array.dtype == np.float32 else 3
        node.attr["dtype"].type = dtype
        tensor = node.attr["value"].tensor
        tensor.dtype = dtype
        tensor.tensor_shape.SetInParent()
        for size in array.shape:
            tensor.tensor_shape.dim.add().size = size
        if array.size:
            tensor.tensor_content = array.astype(array.dtype.newbyteorder("<")).tobytes()
    return graph.SerializeToString()


@pytest.mark.parametrize("minimum_size", (0, 1, 16, 1024))
def test_same_as_gtt_on_corner_constants(minimum_size: int) -> None:
    data = constants_graph(corner_constants())
    ours = transform_graph(data, [], [], transforms(minimum_size))
    assert_same_graphdef(ours, gtt_transform(data, [], [], transforms(minimum_size)))


def test_corner_ranges_keep_gtt_quirks() -> None:
    arrays = corner_constants()
    # The max starts at FLT_MIN, so all-zero and all-negative weights end their range there.
    assert weight_range(arrays["zeros"]) == (0.0, np.finfo(np.float32).tiny)
    assert weight_range(arrays["negative"])[1] == np.finfo(np.float32).tiny
    # A zero minimum keeps the sign of the first zero seen.
    assert np.signbit(weight_range(arrays["minus_zero_min"])[0])
    assert not np.signbit(weight_range(arrays["plus_zero_min"])[0])
    assert weight_range(arrays["equal_positive"]) == (0.0, np.float32(0.3))


def test_codes_round_half_away_from_zero() -> None:
    assert list(round_half_away(np.array([-2.5, -0.5, 0.5, 1.5, 2.5, 0.49999999999999994]))) == [-3, -1, 1, 2, 3, 0]
    codes = float_to_quint8(np.array([0.0, 1.0, 2.0, -1.0], np.float32), np.float32(0.0), np.float32(1.0))
    assert list(codes) == [0, 255, 255, 0]


def test_non_finite_constants_stay_float() -> None:
    arrays = {"nan": np.full(2000, np.nan, np.float32), "inf": np.full(2000, np.inf, np.float32),
              "fine": np.ones(2000, np.float32)}
    report = run_pipeline(load_graph_bytes(constants_graph(arrays)), "quantize_weights")
    ops = {op.name: op.type for op in report.graph}
    assert ops["nan"] == ops["inf"] == "Const" and ops["fine"] == "Dequantize"
    table = report.format()
    assert "quantized 1 of 3 float constants (0 below minimum_size=1024)" in table
    assert "left 2 in float because they hold NaN or infinity: nan, inf" in table


def test_report_counts_what_was_left() -> None:
    model = load_model_fixture("keras_small_cnn")
    report = run_pipeline(load_graph_bytes(model.data), "quantize_weights", model.inputs, model.outputs)
    floats = sum(1 for n in graph_pb2.GraphDef.FromString(model.data).node
                 if n.op == "Const" and n.attr["dtype"].type == 1)
    assert f"quantized 2 of {floats} float constants ({floats - 2} below minimum_size=1024)" in report.format()


def test_negative_minimum_size_is_rejected() -> None:
    model = load_model_fixture("tf1_fused_bn")
    with pytest.raises(GttcError, match="minimum_size must be >= 0, got -1") as failure:
        transform_graph(model.data, model.inputs, model.outputs, "quantize_weights(minimum_size=-1)")
    assert failure.value.exit_code == 2


# -- lit files, cross-checked against GTT here ---------------------------------------------

LIT_FILES = sorted(LIT_DIR.glob("quantize_weights*.ir"))


@pytest.mark.parametrize("path", LIT_FILES, ids=[p.stem for p in LIT_FILES])
def test_lit_graph_same_as_gtt(path: Path) -> None:
    case = LitCase.load(path)
    data = emit_graphdef_bytes(parse_graph(case.graph_text, str(path)))
    ours = transform_graph(data, case.inputs, case.outputs, case.pipeline)
    gtt = gtt_transform(data, case.inputs, case.outputs, case.pipeline)
    assert_same_graphdef(ours, with_kept_control_inputs(gtt, data))


# -- the quantized graph runs --------------------------------------------------------------


@pytest.mark.parametrize("fixture", ["keras_mobilenet_v2_small", "tf1_fused_bn", "resize_pad_conv", "digits_cnn"])
def test_quantized_graph_runs_like_tf(fixture: str) -> None:
    """gttc's interpreter and TF agree on the quantized graph: dequantized weights bit for bit, outputs closely."""
    model = load_model_fixture(fixture)
    quantized = transform_graph(model.data, model.inputs, model.outputs, transforms(16))
    nodes = graph_pb2.GraphDef.FromString(quantized).node
    dequantized = [n.name for n in nodes if n.op == "Dequantize" and not _max_is_flt_min(nodes, n.name)]
    assert dequantized
    ours = run_graph(load_graph_bytes(quantized), model.feeds, dequantized + model.outputs)
    reference = run_tf(quantized, model.feeds, dequantized + model.outputs)
    for name in dequantized:
        assert ours[name].tobytes() == reference[name].tobytes(), name
    for name in model.outputs:
        np.testing.assert_allclose(ours[name], reference[name], rtol=1e-4, atol=1e-5)


def _max_is_flt_min(nodes, name: str) -> bool:
    """All-zero weights get max = FLT_MIN; TF's Dequantize flushes that denormal scale and yields NaN."""
    node = next(n for n in nodes if n.name == f"{name}_quantized_max")
    return np.frombuffer(node.attr["value"].tensor.tensor_content, "<f4")[0] == np.finfo(np.float32).tiny


@pytest.mark.slow
def test_full_size_mobilenet_v2_same_as_gtt_and_runs() -> None:
    model = build_big_fixture("keras_mobilenet_v2")
    ours = transform_graph(model.data, model.inputs, model.outputs, "quantize_weights")
    assert_same_graphdef(ours, gtt_transform(model.data, model.inputs, model.outputs, "quantize_weights"))
    assert sum(1 for n in graph_pb2.GraphDef.FromString(ours).node if n.op == "Dequantize") > 50
    results = run_graph(load_graph_bytes(ours), model.feeds, model.outputs)
    reference = run_tf(ours, model.feeds, model.outputs)
    for name in model.outputs:
        np.testing.assert_allclose(results[name], reference[name], rtol=1e-4, atol=1e-5)
