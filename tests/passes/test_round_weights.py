"""round_weights against GTT: identical GraphDefs, so identical tensor bits, for several num_steps.

GTT's float32 bucket arithmetic is reproduced step by step; these tests
hold gttc to GTT's bytes on every committed fixture, on constants built to
hit the corners (ties on bucket edges, FLT_MIN, equal values, denormals)
and on this pass's lit files.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from compiler.api import transform_graph
from compiler.backends.graphdef import emit_graphdef_bytes
from compiler.errors import GttcError
from compiler.frontends.graphdef import load_graph_bytes
from compiler.ir.parser import parse_graph
from compiler.passes import run_pipeline
from compiler.passes.round_weights import round_values
from compiler.proto import graph_pb2
from tests.conftest import SMALL_MODELS, build_big_fixture, load_model_fixture
from tests.oracle import gtt_transform
from tests.passes.test_gtt_differential import assert_same_graphdef
from tests.passes.test_lit import LIT_DIR, LitCase
from tests.passes.test_quantize_weights import constants_graph, corner_constants

pytestmark = pytest.mark.tf

NUM_STEPS = (None, 1, 3, 16, 1000)


def transforms(num_steps) -> str:
    return "round_weights" if num_steps is None else f"round_weights(num_steps={num_steps})"


@pytest.mark.parametrize("num_steps", NUM_STEPS, ids=lambda n: f"num_steps={n}")
@pytest.mark.parametrize("fixture", SMALL_MODELS)
def test_same_as_gtt_on_fixtures(fixture: str, num_steps) -> None:
    model = load_model_fixture(fixture)
    ours = transform_graph(model.data, model.inputs, model.outputs, transforms(num_steps))
    assert_same_graphdef(ours, gtt_transform(model.data, model.inputs, model.outputs, transforms(num_steps)))


def finite_range_corners() -> dict[str, np.ndarray]:
    """The corner constants whose range fits in float32 (GTT's result on the others is undefined)."""
    arrays = corner_constants()
    del arrays["huge_range"]
    rng = np.random.default_rng(11)
    arrays["linspace_edges"] = np.linspace(-1.0, 1.0, 257, dtype=np.float32)
    arrays["uniform"] = rng.uniform(-4.0, 4.0, size=(64, 33)).astype(np.float32)
    return arrays


@pytest.mark.parametrize("num_steps", (1, 2, 7, 256, 65536))
def test_same_as_gtt_on_corner_constants(num_steps: int) -> None:
    data = constants_graph(finite_range_corners())
    ours = transform_graph(data, [], [], transforms(num_steps))
    assert_same_graphdef(ours, gtt_transform(data, [], [], transforms(num_steps)))


def test_rounded_values_take_at_most_num_steps_plus_one_values() -> None:
    values = np.random.default_rng(3).normal(size=5000).astype(np.float32)
    rounded = round_values(values, 16)
    assert rounded is not None and len(np.unique(rounded)) <= 17
    assert np.abs(rounded - values).max() <= (values.max() - values.min()) / 16


def test_undefined_inputs_are_left_and_reported() -> None:
    arrays = {"nan": np.full(20, np.nan, np.float32), "overflow": np.array([-3e38, 3e38] * 10, np.float32),
              "fine": np.arange(20, dtype=np.float32)}
    report = run_pipeline(load_graph_bytes(constants_graph(arrays)), "round_weights")
    values = {op.name: op.attrs["value"].numpy() for op in report.graph}
    assert np.isnan(values["nan"]).all()
    assert values["overflow"].tobytes() == arrays["overflow"].tobytes()
    assert not np.array_equal(values["fine"], arrays["fine"])
    table = report.format()
    assert "rounded 1 of 3 float constants to 256 steps (0 with fewer than 16 elements left as they are)" in table
    assert "left 2 unrounded because they hold NaN/infinity or their range overflows float32: nan, overflow" in table


@pytest.mark.parametrize("num_steps", (0, -4))
def test_num_steps_below_one_is_rejected(num_steps: int) -> None:
    model = load_model_fixture("tf1_fused_bn")
    with pytest.raises(GttcError, match=f"num_steps must be at least 1, got {num_steps}") as failure:
        transform_graph(model.data, model.inputs, model.outputs, transforms(num_steps))
    assert failure.value.exit_code == 2


def test_structure_is_untouched() -> None:
    model = load_model_fixture("keras_mobilenet_v2_small")
    before = graph_pb2.GraphDef.FromString(model.data)
    after = graph_pb2.GraphDef.FromString(transform_graph(model.data, model.inputs, model.outputs, "round_weights"))
    assert [(n.name, n.op, list(n.input)) for n in after.node] == [(n.name, n.op, list(n.input)) for n in before.node]


LIT_FILES = sorted(LIT_DIR.glob("round_weights*.ir"))


@pytest.mark.parametrize("path", LIT_FILES, ids=[p.stem for p in LIT_FILES])
def test_lit_graph_same_as_gtt(path: Path) -> None:
    """The lit files pin GTT's own output (control inputs aside, which gttc keeps and GTT drops)."""
    case = LitCase.load(path)
    data = emit_graphdef_bytes(parse_graph(case.graph_text, str(path)))
    ours = graph_pb2.GraphDef.FromString(transform_graph(data, case.inputs, case.outputs, case.pipeline))
    gtt = graph_pb2.GraphDef.FromString(gtt_transform(data, case.inputs, case.outputs, case.pipeline))
    controls = {n.name: [i for i in n.input if i.startswith("^")] for n in graph_pb2.GraphDef.FromString(data).node
                if n.op == "Const"}
    for node in gtt.node:
        if node.op == "Const" and not node.input:
            node.input.extend(controls.get(node.name, []))
    assert_same_graphdef(ours.SerializeToString(), gtt.SerializeToString())


@pytest.mark.slow
def test_full_size_mobilenet_v2_same_as_gtt() -> None:
    model = build_big_fixture("keras_mobilenet_v2")
    ours = transform_graph(model.data, model.inputs, model.outputs, "round_weights")
    assert_same_graphdef(ours, gtt_transform(model.data, model.inputs, model.outputs, "round_weights"))
