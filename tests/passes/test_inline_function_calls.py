"""inline_function_calls: call bodies copied into the graph, wired through the IR.

Small GraphDefs written here as text check the wiring (arguments, results,
control edges in and out, names, nesting, recursion, the library); the
keras_grouped_calls fixture checks the numbers: the interpreter, TF and
onnxruntime all agree with TF's reference on the inlined graph.
"""
from __future__ import annotations

import numpy as np
import onnx
import pytest

from compiler.backends.graphdef import emit_graphdef_bytes
from compiler.backends.onnx import export
from compiler.errors import GttcError
from compiler.frontends.graphdef import load_graph, load_graph_bytes
from compiler.frontends.graphdef.functions import function_names
from compiler.ir.graph import Graph
from compiler.passes import run_pipeline
from compiler.passes.inline_function_calls import MAX_DEPTH
from compiler.passes.instruments import PipelineReport
from compiler.runtime.interpreter import run_graph
from compiler.runtime.onnx_runner import run_onnx
from tests.conftest import load_model_fixture
from tests.oracle import run_tf

F32 = 'attr { key: "T" value { type: DT_FLOAT } }'
FEED = {"x": np.array([1.0, -2.0, 3.0], np.float32)}


def _placeholder(name: str) -> str:
    return (f'node {{ name: "{name}" op: "Placeholder" attr {{ key: "dtype" value {{ type: DT_FLOAT }} }} '
            'attr { key: "shape" value { shape { dim { size: 3 } } } } }')


def _const(name: str, value: float) -> str:
    return (f'node {{ name: "{name}" op: "Const" attr {{ key: "dtype" value {{ type: DT_FLOAT }} }} '
            f'attr {{ key: "value" value {{ tensor {{ dtype: DT_FLOAT tensor_shape {{ }} float_val: {value} }} }} }} }}')


def _call(name: str, func: str, inputs: list[str], outputs: int = 1, op: str = "StatefulPartitionedCall") -> str:
    ins = " ".join(f'input: "{i}"' for i in inputs)
    tin = " ".join("type: DT_FLOAT" for i in inputs if not i.startswith("^"))
    tout = " ".join("type: DT_FLOAT" for _ in range(outputs))
    return (f'node {{ name: "{name}" op: "{op}" {ins} attr {{ key: "f" value {{ func {{ name: "{func}" }} }} }} '
            f'attr {{ key: "Tin" value {{ list {{ {tin} }} }} }} attr {{ key: "Tout" value {{ list {{ {tout} }} }} }} '
            'attr { key: "_XlaMustCompile" value { b: true } } }')


def _node(name: str, op: str, inputs: list[str], attrs: str = F32) -> str:
    ins = " ".join(f'input: "{i}"' for i in inputs)
    return f'node {{ name: "{name}" op: "{op}" {ins} {attrs} }}'


def _function(name: str, args: list[str], results: dict[str, str], nodes: list[str],
              control: dict[str, str] | None = None) -> str:
    ins = " ".join(f'input_arg {{ name: "{a}" type: DT_FLOAT }}' for a in args)
    outs = " ".join(f'output_arg {{ name: "{r}" type: DT_FLOAT }}' for r in results)
    ctl = " ".join(f'control_output: "{c}"' for c in (control or {}))
    rets = " ".join(f'ret {{ key: "{k}" value: "{v}" }}' for k, v in results.items())
    crets = " ".join(f'control_ret {{ key: "{k}" value: "{v}" }}' for k, v in (control or {}).items())
    return (f'function {{ signature {{ name: "{name}" {ins} {outs} {ctl} }} '
            + " ".join(n.replace("node {", "node_def {", 1) for n in nodes) + f" {rets} {crets} }}")


# scale(a, b) = a * b, with a constant added inside: a body op with no inputs.
SCALE = _function("scale", ["a", "b"], {"y": "add:z:0"},
                  [_node("m", "Mul", ["a", "b"]), _const("k", 0.5), _node("add", "AddV2", ["m:z:0", "k:output:0"])])


def _graph(nodes: list[str], functions: list[str]) -> Graph:
    text = "\n".join(nodes) + "\nlibrary {\n" + "\n".join(functions) + "\n}\n"
    return load_graph_bytes(text.encode())


def _inline(graph: Graph, outputs: tuple[str, ...] = ("out",)) -> PipelineReport:
    return run_pipeline(graph, "inline_function_calls", inputs=["x"], outputs=list(outputs))


def _notes(report: PipelineReport) -> list[str]:
    return report.records[0].notes


def _deps(graph: Graph, name: str) -> list[str]:
    return [dep.name for dep in graph.op(name).control_deps]


def _same_numbers(before: Graph, after: Graph, fetches: tuple[str, ...] = ("out",)) -> None:
    want, got = run_graph(before, FEED, list(fetches)), run_graph(after, FEED, list(fetches))
    for name in fetches:
        np.testing.assert_array_equal(got[name], want[name])


# -- IR level --------------------------------------------------------------------------
def test_one_call_becomes_its_body_and_the_function_goes():
    graph = _graph([_placeholder("x"), _const("c", 2.0), _call("call", "scale", ["x", "c"]),
                    _node("out", "Identity", ["call"])], [SCALE])
    report = _inline(graph)
    out = report.graph
    assert not any(op.type.endswith("PartitionedCall") for op in out)
    mul = out.op("call/m")
    assert [v.name for v in mul.operands] == ["x", "c"]
    assert out.op("out").operands[0].op is out.op("call/add")
    assert out.extras.library is None  # the only function was inlined and nothing else names it
    assert report.records[0].sites == 1
    assert _notes(report) == ["inlined 1 calls (0 nested) of 1 functions",
                              "1 of them were marked for XLA or no-inline; inlined for deployment",
                              "removed 1 functions no longer referenced from the library"]
    _same_numbers(graph, out)


def test_nothing_to_inline_says_so():
    graph = _graph([_placeholder("x"), _node("out", "Identity", ["x"])], [SCALE])
    report = _inline(graph)
    assert report.records[0].sites == 0 and not report.changed
    assert _notes(report) == ["no function calls to inline"]
    assert function_names(report.graph.extras.library) == ["scale"]  # not ours to drop


def test_nested_calls_are_inlined_under_both_names():
    outer = _function("outer", ["p"], {"r": "neg:y:0"},
                      [_const("two", 2.0), _call("inner", "scale", ["p", "two:output:0"], op="PartitionedCall"),
                       _node("neg", "Neg", ["inner:output:0"])])
    graph = _graph([_placeholder("x"), _call("call", "outer", ["x"]), _node("out", "Identity", ["call"])],
                   [outer, SCALE])
    report = _inline(graph)
    out = report.graph
    assert {"call/inner/m", "call/inner/add", "call/neg", "call/two"} <= {op.name for op in out}
    assert [v.op.name for v in out.op("call/inner/m").operands] == ["x", "call/two"]
    assert _notes(report)[0] == "inlined 2 calls (1 nested) of 2 functions"
    assert out.extras.library is None
    _same_numbers(graph, out)


def test_control_inputs_gate_the_body():
    graph = _graph([_placeholder("x"), _const("c", 2.0), _node("a", "NoOp", [], ""), _node("b", "NoOp", [], ""),
                    _call("call", "scale", ["x", "c", "^a", "^b"]), _node("out", "Identity", ["call"])], [SCALE])
    out = _inline(graph).graph
    assert _deps(out, "call/input_control_node") == ["a", "b"]
    assert _deps(out, "call/m") == ["call/input_control_node"]  # reads arguments
    assert _deps(out, "call/k") == ["call/input_control_node"]  # has no inputs
    assert _deps(out, "call/add") == []  # waits on m already
    _same_numbers(graph, out)


def test_a_single_control_input_gates_directly():
    graph = _graph([_placeholder("x"), _const("c", 2.0), _node("a", "NoOp", [], ""),
                    _call("call", "scale", ["x", "c", "^a"]), _node("out", "Identity", ["call"])], [SCALE])
    out = _inline(graph).graph
    assert _deps(out, "call/m") == ["a"] and _deps(out, "call/k") == ["a"]
    assert "call/input_control_node" not in out


def test_control_users_wait_on_results_and_control_outputs():
    logged = _function("logged", ["a"], {"y": "sq:y:0"},
                       [_node("sq", "Square", ["a"]), _node("side", "NoOp", ["^a"], "")], {"side": "side"})
    graph = _graph([_placeholder("x"), _call("call", "logged", ["x"]), _node("after", "NoOp", ["^call"], ""),
                    _node("out", "Identity", ["x", "^after"])], [logged])
    out = _inline(graph).graph
    assert _deps(out, "after") == ["call/output_control_node"]
    assert _deps(out, "call/output_control_node") == ["call/sq", "call/side"]
    assert _deps(out, "call/side") == []  # its only dependency was an argument, ready when the call starts
    _same_numbers(graph, out)


def test_names_stay_unique_and_follow_graph_order():
    graph = _graph([_placeholder("x"), _const("c", 2.0), _const("call/m", 1.0),
                    _call("call", "scale", ["x", "c"]), _call("again", "scale", ["call", "c"]),
                    _node("out", "AddV2", ["again", "call/m"])], [SCALE])
    out = _inline(graph).graph
    assert out.op("call/m").type == "Const" and out.op("call/m_1").type == "Mul"
    assert out.op("again/m").operands[0].op is out.op("call/add")
    names = [op.name for op in out]
    assert names.index("call/m_1") < names.index("call/add") < names.index("again/m")
    assert _notes(_inline(graph))[0] == "inlined 2 calls (0 nested) of 1 functions"
    _same_numbers(graph, out)


def test_a_call_that_is_a_graph_output_keeps_its_name():
    pair = _function("pair", ["a"], {"p": "n:y:0", "q": "a"}, [_node("n", "Neg", ["a"])])
    graph = _graph([_placeholder("x"), _const("c", 2.0), _call("call", "scale", ["x", "c"]),
                    _call("two", "pair", ["x"], outputs=2)], [SCALE, pair])
    out = _inline(graph, outputs=("call", "two:0", "two:1")).graph
    assert out.op("call").type == "Identity" and out.op("two").type == "IdentityN"
    assert out.op("two").operands[1].op is out.op("x")  # a result that is an argument reads the call's input
    _same_numbers(graph, out, ("call", "two:0", "two:1"))


def test_recursion_is_refused():
    loop = _function("loop", ["a"], {"y": "again:output:0"}, [_call("again", "loop", ["a"])])
    graph = _graph([_placeholder("x"), _call("call", "loop", ["x"]), _node("out", "Identity", ["call"])], [loop])
    with pytest.raises(GttcError, match=r"node 'call/again' \(StatefulPartitionedCall\) calls 'loop' "
                                        r"recursively \(loop -> loop\)"):
        _inline(graph)


def test_calls_nested_deeper_than_the_limit_stay():
    chain = [_function(f"f{i}", ["a"], {"y": "c:output:0"}, [_call("c", f"f{i + 1}", ["a"], op="PartitionedCall")])
             for i in range(MAX_DEPTH)]
    chain.append(_function(f"f{MAX_DEPTH}", ["a"], {"y": "n:y:0"}, [_node("n", "Neg", ["a"])]))
    graph = _graph([_placeholder("x"), _call("call", "f0", ["x"]), _node("out", "Identity", ["call"])], chain)
    report = _inline(graph)
    deepest = "call" + "/c" * MAX_DEPTH
    assert report.graph.op(deepest).type == "PartitionedCall"
    assert _notes(report)[0] == f"inlined {MAX_DEPTH} calls ({MAX_DEPTH - 1} nested) of {MAX_DEPTH} functions"
    assert _notes(report)[-1] == f"left '{deepest}' (PartitionedCall): calls nested deeper than {MAX_DEPTH}"
    assert function_names(report.graph.extras.library) == [f"f{MAX_DEPTH}"]
    _same_numbers(graph, report.graph)


def test_polymorphic_functions_are_left_with_a_note():
    poly = ('function { signature { name: "poly" input_arg { name: "a" type_attr: "T" } '
            'output_arg { name: "y" type_attr: "T" } attr { name: "T" type: "type" } } '
            'node_def { name: "n" op: "Neg" input: "a" attr { key: "T" value { placeholder: "T" } } } '
            'ret { key: "y" value: "n:y:0" } }')
    call = _call("call", "poly", ["x"]).replace('attr { key: "f" value { func { name: "poly" } } }',
                                                 'attr { key: "f" value { func { name: "poly" attr { key: "T" '
                                                 'value { type: DT_FLOAT } } } } }')
    graph = _graph([_placeholder("x"), call, _node("out", "Identity", ["call"])], [poly])
    report = _inline(graph)
    assert not report.changed and report.graph.op("call").type == "StatefulPartitionedCall"
    assert _notes(report) == ["inlined no calls",
                              "left 'call' (StatefulPartitionedCall): 'poly' has attribute placeholders"]


def test_functions_still_referenced_stay():
    """`scale` is inlined but an If still names it; `unused` was never called, so it is not this pass's to drop."""
    other = _function("other", ["a", "b"], {"y": "s:z:0"}, [_node("s", "Sub", ["a", "b"])])
    unused = _function("unused", ["a"], {"y": "a"}, [])
    branch = ('node { name: "cond" op: "If" input: "flag" input: "x" input: "c" '
              'attr { key: "Tcond" value { type: DT_BOOL } } '
              'attr { key: "Tin" value { list { type: DT_FLOAT type: DT_FLOAT } } } '
              'attr { key: "Tout" value { list { type: DT_FLOAT } } } '
              'attr { key: "then_branch" value { func { name: "scale" } } } '
              'attr { key: "else_branch" value { func { name: "other" } } } }')
    flag = ('node { name: "flag" op: "Const" attr { key: "dtype" value { type: DT_BOOL } } '
            'attr { key: "value" value { tensor { dtype: DT_BOOL tensor_shape { } bool_val: true } } } }')
    inner = _function("twice", ["a", "b"], {"y": "in:output:0"}, [_call("in", "other", ["a", "b"])])
    graph = _graph([_placeholder("x"), _const("c", 2.0), flag, _call("call", "scale", ["x", "c"]), branch,
                    _call("t", "twice", ["x", "c"]), _node("out", "AddN", ["call", "cond", "t"],
                                                          F32 + ' attr { key: "N" value { i: 3 } }')],
                   [SCALE, other, unused, inner])
    report = _inline(graph)
    assert sorted(function_names(report.graph.extras.library)) == ["other", "scale", "unused"]
    assert _notes(report)[-1] == "removed 1 functions no longer referenced from the library"
    assert function_names(graph.extras.library) == ["scale", "other", "unused", "twice"]  # the input is untouched
    _same_numbers(graph, report.graph)


# -- the Keras fixture ---------------------------------------------------------------
@pytest.fixture(scope="module")
def grouped():
    model = load_model_fixture("keras_grouped_calls")
    original = load_graph(model.path)
    report = run_pipeline(original, "inline_function_calls", inputs=model.inputs, outputs=model.outputs)
    return model, original, report


def test_fixture_has_no_calls_left_and_the_interpreter_agrees(grouped):
    model, original, report = grouped
    assert sum(op.type == "StatefulPartitionedCall" for op in original) == 2
    assert not any(op.type == "StatefulPartitionedCall" for op in report.graph)
    assert sum(op.type == "Conv2D" for op in report.graph) == 2
    assert report.graph.extras.library is None
    want = run_graph(original, model.feeds, model.outputs)
    got = run_graph(report.graph, model.feeds, model.outputs)
    for name in model.outputs:
        np.testing.assert_allclose(got[name], want[name], rtol=0, atol=1e-6)
        np.testing.assert_allclose(got[name], model.expected[name], rtol=0, atol=1e-5)


@pytest.mark.tf
def test_fixture_inlined_reloads_in_tf_with_the_same_numbers(grouped):
    pytest.importorskip("tensorflow")
    model, _, report = grouped
    got = run_tf(emit_graphdef_bytes(report.graph), model.feeds, model.outputs)
    for name in model.outputs:
        np.testing.assert_allclose(got[name], model.expected[name], rtol=0, atol=1e-6)


def test_fixture_exports_to_onnx_matching_tf(grouped):
    """Against TF's stored reference outputs, so TensorFlow need not be installed."""
    model, _, report = grouped
    exported = export(report.graph, model.inputs, model.outputs)
    onnx.checker.check_model(exported, full_check=True)
    groups = sorted(a.i for n in exported.graph.node if n.op_type == "Conv" for a in n.attribute if a.name == "group")
    assert groups == [2, 8]
    got = run_onnx(exported, model.feeds)
    for name in model.outputs:
        np.testing.assert_allclose(got[name], model.expected[name], rtol=0, atol=1e-4)
