"""Text patterns (GTT's OpTypePattern as text), replace_matching, and the pinned public rewrite API."""
from __future__ import annotations

import numpy as np
import pytest

import compiler.rewrite as rewrite
from compiler.ir import DType, Graph, Shape, Tensor, verify
from compiler.rewrite import (PatternSyntaxError, const, find_matches, format_pattern, match, op, parse_pattern,
                              replace_matching)


def _graph() -> Graph:
    """x -> Conv2D(x, w/read(w)) -> Mul(., scale) -> Relu."""
    graph = Graph()
    x = graph.create_op("Placeholder", "x", attrs={"dtype": DType.FLOAT, "shape": Shape.of([1, 4, 4, 1])})
    w = graph.create_op("Const", "w", attrs={"dtype": DType.FLOAT,
                                             "value": Tensor.from_numpy(np.ones((1, 1, 1, 2), np.float32))})
    read = graph.create_op("Identity", "w/read", [w.result], attrs={"T": DType.FLOAT})
    conv = graph.create_op("Conv2D", "conv", [x.result, read.result],
                           attrs={"T": DType.FLOAT, "padding": "VALID", "strides": (1, 1, 1, 1)})
    scale = graph.create_op("Const", "scale", attrs={"dtype": DType.FLOAT,
                                                     "value": Tensor.from_numpy(np.array([2, 3], np.float32))})
    mul = graph.create_op("Mul", "mul", [conv.result, scale.result], attrs={"T": DType.FLOAT})
    graph.create_op("Relu", "relu", [mul.result], attrs={"T": DType.FLOAT})
    return graph


def test_text_and_python_forms_match_the_same_ops():
    graph = _graph()
    text = parse_pattern("mul=Mul(conv=Conv2D|MatMul(x=*, w=Const), s=Const)")
    python = op("Mul", op("Conv2D|MatMul", rewrite.any_value("x"), const("w"), name="conv"), const("s"), name="mul")
    for pattern in (text, python):
        found = match(pattern, graph.op("mul"))
        assert found is not None
        assert found.op("conv").name == "conv" and found.op("w").name == "w" and found.value("x").op.name == "x"
        assert {o.name for o in found.ops} == {"w/read", "w", "conv", "scale", "mul"}
    assert format_pattern(text) == "mul=Mul(conv=Conv2D|MatMul(x=*, w=Const), s=Const)"


@pytest.mark.parametrize("text, matches", [
    ("Mul", ["mul"]),                      # operands unchecked
    ("Mul(*, *)", ["mul"]),
    ("Mul(*)", []),                        # exactly as many operands as written
    ("*(Conv2D, Const)", ["mul"]),
    ("Relu(Mul(Conv2D(*, Const), Const))", ["relu"]),
    ("Relu(Mul(Conv2D(Const, *), Const))", []),  # a Placeholder is not a constant
    ("Placeholder()", ["x"]),
    ("Conv2D(Placeholder(), Identity(Const))", ["conv"]),
])
def test_what_text_patterns_match(text, matches):
    graph = _graph()
    assert [m.root.name for m in find_matches(graph, parse_pattern(text))] == matches


@pytest.mark.parametrize("text, message", [
    ("Mul(*,", "pattern 'Mul(*,': expected an op type at column 7"),
    ("Mul(* *)", "expected ',' or ')' but found '*' at column 7"),
    ("Mul(*);", "unexpected character ';' at column 7"),
    ("Mul(*) Relu", "unexpected 'Relu' at column 8"),
    ("", "expected an op type at column 1"),
])
def test_syntax_errors_name_the_column(text, message):
    with pytest.raises(PatternSyntaxError) as failure:
        parse_pattern(text)
    assert message in str(failure.value)


def _scaled_conv(graph: Graph, m) -> object:
    """Mul(Conv2D(x, w), s) -> Conv2D(x, w * s): fold the scale into the weights."""
    weights = m.op("w").attrs["value"].numpy() * m.op("s").attrs["value"].numpy()
    folded = graph.create_op("Const", graph.unique_name("w_scaled"),
                             attrs={"dtype": DType.FLOAT, "value": Tensor.from_numpy(weights.astype(np.float32))},
                             before=m.root)
    conv = m.op("conv")
    return graph.create_op("Conv2D", graph.unique_name("conv_scaled"), [m.value("x"), folded.result],
                           attrs=conv.attrs.copy(), before=m.root)


def test_replace_matching_wires_in_the_new_op_and_sweeps_the_dead_ones():
    graph = _graph()
    graph.op("mul").add_control_dep(graph.op("x"))
    stats = replace_matching(graph, "Mul(conv=Conv2D(x=*, w=Const), s=Const)", _scaled_conv, protected=["relu"])
    verify(graph)
    assert stats.total == 1 and stats.applied == {"replace": 1}
    assert [o.name for o in graph] == ["x", "w_scaled", "mul", "relu"]
    new = graph.op("mul")  # the replacement took the root's name
    assert new.type == "Conv2D" and graph.op("relu").operands[0] is new.result
    assert new.control_deps == (graph.op("x"),)  # ordering constraints of the covered ops survive
    np.testing.assert_array_equal(graph.op("w_scaled").attrs["value"].numpy().reshape(-1), [2, 3])


def test_a_condition_skips_with_a_reason_and_changes_nothing():
    graph = _graph()
    stats = replace_matching(graph, "Mul(Conv2D, Const)", _scaled_conv, condition=lambda m: "not today",
                             name="scale")
    assert stats.total == 0 and [str(s) for s in stats.skipped] == ["mul (scale): not today"]
    assert graph.op("mul").type == "Mul" and len(graph) == 7


def test_returning_an_existing_value_rewires_without_renaming():
    """Relu(Relu(x)) -> Relu(x): the replacement is a value already in the graph."""
    graph = _graph()
    graph.create_op("Relu", "relu2", [graph.op("relu").result], attrs={"T": DType.FLOAT})
    graph.create_op("Neg", "out", [graph.op("relu2").result], attrs={"T": DType.FLOAT})
    stats = replace_matching(graph, "Relu(inner=Relu)", lambda g, m: m.op("inner").result)
    verify(graph)
    assert stats.total == 1 and "relu2" not in graph
    assert graph.op("out").operands[0] is graph.op("relu").result


def test_a_protected_root_stays_when_the_replacement_is_an_existing_value():
    graph = _graph()
    graph.create_op("Relu", "relu2", [graph.op("relu").result], attrs={"T": DType.FLOAT})
    graph.create_op("Neg", "out", [graph.op("relu2").result], attrs={"T": DType.FLOAT})
    replace_matching(graph, "Relu(inner=Relu)", lambda g, m: m.op("inner").result, protected=["relu2"])
    verify(graph)
    assert "relu2" in graph and graph.op("out").operands[0] is graph.op("relu").result


PUBLIC = [
    "Match", "PatternSyntaxError", "RewriteRule", "RuleStats", "Skip", "any_value", "apply_rules", "const",
    "const_array", "const_op", "erase_dead", "find_matches", "format_pattern", "inherit_control_deps", "match",
    "node_names", "op", "parse_pattern", "replace_matching", "take_over", "take_place", "used_outside",
]


def test_the_public_rewrite_api_is_pinned_and_documented():
    """Removing or renaming a public name breaks plugins: it must be a deliberate change here and in the docs."""
    assert sorted(rewrite.__all__) == sorted(PUBLIC)
    from pathlib import Path

    guide = (Path(__file__).resolve().parents[2] / "docs" / "WRITING_PASSES.md").read_text()
    undocumented = [name for name in PUBLIC if f"`{name}" not in guide]
    assert not undocumented, f"public names missing from docs/WRITING_PASSES.md: {undocumented}"
