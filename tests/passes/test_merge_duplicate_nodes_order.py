"""merge_duplicate_nodes(gtt_order=false) merges exactly what GTT's hash merges, keeping graph order."""
from __future__ import annotations

import pytest

from compiler.frontends.graphdef import load_graph
from compiler.passes import run_pipeline

from conftest import FIXTURES


@pytest.mark.parametrize("name", ["keras_mobilenet_v2_small", "tf1_control_flow", "keras_small_cnn"])
def test_fast_mode_merges_the_same_ops(name):
    graph = load_graph(FIXTURES / f"{name}.pb")
    gtt = run_pipeline(graph, "merge_duplicate_nodes", stream=None)
    fast = run_pipeline(graph, "merge_duplicate_nodes(gtt_order=false)", stream=None)
    assert {op.name for op in fast.graph} == {op.name for op in gtt.graph}
    assert fast.records[-1].sites == gtt.records[-1].sites > 0
    survivors = [op.name for op in graph if op.name in fast.graph]
    assert [op.name for op in fast.graph] == survivors


@pytest.mark.parametrize("switches, merged", [("true", 1), ("false", 0)])
def test_switches_false_keeps_each_conds_own_switch(switches, merged):
    """Two conds on one predicate reading one tensor: GTT merges their Switches (default); -O levels
    keep both, so each cond stays a region of its own for the ONNX export."""
    from compiler.ir.dtypes import DType
    from tests.backends.test_onnx_export import Builder

    b = Builder()
    x, flag = b.input("x", [2]), b.input("flag", [], DType.BOOL)
    first, second = (b("Switch", x, flag, name=f"cond{i}/Switch") for i in (1, 2))
    for i, (false, true) in enumerate((first, second)):
        b("Identity", b("Merge", b("Neg", false), true, N=2)[0], name=f"out{i}")
    result = run_pipeline(b.graph, f"merge_duplicate_nodes(gtt_order=false, switches={switches})",
                          ["x", "flag"], ["out0", "out1"], stream=None)
    assert sum(op.type == "Switch" for op in result.graph) == 2 - merged
    assert (result.records[-1].sites > 0) == bool(merged)  # merged Switches let the Neg and Merge merge too

