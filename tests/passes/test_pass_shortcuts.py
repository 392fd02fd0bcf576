"""The shortcuts passes take give what the long way gives: same graph bytes, same report.

Each shortcut is switched off with monkeypatch and the pass run again on the same input.
"""
from __future__ import annotations

import pytest

from compiler.backends.graphdef import emit_graphdef_bytes
from compiler.frontends.graphdef import load_graph_bytes
from compiler.ir.parser import parse_graph
from compiler.passes import remove_nodes, run_pipeline
from compiler.passes.base import PassResult
from compiler.passes.fold_old_batch_norms import fold_conv_chains
from compiler.rewrite.conv_affine import BN_TYPES
from tests.conftest import SMALL_MODELS, load_model_fixture
from tests.oracle import gtt_deployment_recipe


def _outcome(graph_bytes: bytes, transforms: str, inputs: list[str], outputs: list[str]) -> tuple[bytes, list]:
    report = run_pipeline(load_graph_bytes(graph_bytes), transforms, inputs, outputs)
    records = [(r.label, r.nodes_before, r.nodes_after, r.sites, r.changed, r.notes, r.error) for r in report.records]
    return emit_graphdef_bytes(report.graph), records


@pytest.mark.parametrize("name", SMALL_MODELS)
def test_remove_nodes_skips_only_rounds_that_change_nothing(name, monkeypatch):
    model = load_model_fixture(name)
    recipe = gtt_deployment_recipe(model.inputs, model.feeds)
    fast = _outcome(model.data, recipe, model.inputs, model.outputs)
    monkeypatch.setattr(remove_nodes, "only_settled_outputs", lambda candidates, guard: False)
    assert _outcome(model.data, recipe, model.inputs, model.outputs) == fast


SETTLED = """graph {
  %x = Placeholder() {dtype = f32, shape = shape<2>} : f32[2]
  %a = Relu(%x) {T = f32} : f32[2]
  %out = Identity(%a) {T = f32} : f32[2]
  %b = Relu(%x) {T = f32} : f32[2]
  %i = Identity(%b) {T = f32} : f32[2]
  %c = AddV2(%i, %out) {T = f32} : f32[2]
  %y = Identity(%c) {T = f32} : f32[2]
}
"""

@pytest.mark.parametrize("outputs", [["out", "y"], ["y", "i"], ["y"]])
def test_a_round_left_with_only_kept_outputs_is_skipped_with_the_same_result(outputs, monkeypatch):
    data = emit_graphdef_bytes(parse_graph(SETTLED))
    calls: list[bool] = []
    real = remove_nodes.only_settled_outputs

    def spy(candidates, guard):
        calls.append(real(candidates, guard))
        return calls[-1]

    monkeypatch.setattr(remove_nodes, "only_settled_outputs", spy)
    fast = _outcome(data, "remove_nodes(op=Identity)", ["x"], outputs)
    assert True in calls  # the last round, over outputs already in place, took the shortcut
    monkeypatch.setattr(remove_nodes, "only_settled_outputs", lambda candidates, guard: False)
    assert _outcome(data, "remove_nodes(op=Identity)", ["x"], outputs) == fast


@pytest.mark.parametrize("name", ["keras_mobilenet_v2_small", "keras_small_cnn", "keras_padded_convs"])
def test_without_batch_norm_ops_no_conv_chain_folds(name):
    """fold_old_batch_norms looks at no conv when the graph has no BN op: looking finds nothing."""
    model = load_model_fixture(name)
    recipe = gtt_deployment_recipe(model.inputs, model.feeds).replace(" fold_old_batch_norms", "")
    graph = run_pipeline(load_graph_bytes(model.data), recipe, model.inputs, model.outputs).graph
    assert not any(op.type in BN_TYPES for op in graph)
    before = emit_graphdef_bytes(graph)
    result = PassResult()
    assert fold_conv_chains(graph, set(model.inputs) | set(model.outputs), result) == 0
    assert result.sites == 0 and emit_graphdef_bytes(graph) == before
