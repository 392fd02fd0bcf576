"""The reference interpreter against TensorFlow's own outputs, plus its semantics on hand-built graphs."""
from __future__ import annotations

import numpy as np
import pytest

from compiler.frontends.graphdef import load_graph, load_graph_bytes
from compiler.frontends.graphdef import functions as functions_module
from compiler.ir.dtypes import DType
from compiler.ir.graph import Graph
from compiler.ir.parser import parse_graph
from compiler.ir.tensor import Tensor
from compiler.runtime import Interpreter, InterpreterError, MissingKernelError, run_graph
from tests.conftest import build_big_fixture, load_model_fixture
from tests.oracle import require_tf, run_tf, tf1_control_flow_graph

RTOL = 1e-4


def assert_matches(got: dict, expected: dict, rtol: float = RTOL) -> float:
    """Every output within `rtol` of TF relative to its magnitude; returns the worst ratio."""
    worst = 0.0
    for name, ref in expected.items():
        assert got[name].shape == ref.shape, name
        assert got[name].dtype == ref.dtype, name
        scale = max(float(np.max(np.abs(ref))), 1e-30)
        err = float(np.max(np.abs(got[name].astype(np.float64) - ref))) / scale
        assert err <= rtol, f"{name}: relative error {err:.3e}"
        worst = max(worst, err)
    return worst


def test_small_fixture_matches_tf(small_model):
    out = Interpreter(load_graph(small_model.path)).run(small_model.feeds, small_model.outputs)
    assert_matches(out, small_model.expected)


def test_run_graph_and_tensor_names():
    m = load_model_fixture("tf1_fused_bn")
    graph = load_graph(m.path)
    by_port = run_graph(graph, {"input:0": m.feeds["input"]}, ["output:0", "output"])
    np.testing.assert_array_equal(by_port["output:0"], by_port["output"])
    assert_matches({"output": by_port["output"]}, m.expected)


def test_feed_of_intermediate_tensor_cuts_the_graph():
    """Feeding an inner node means its producers are not needed (nor run)."""
    m = load_model_fixture("keras_small_cnn")
    graph = load_graph(m.path)
    interp = Interpreter(graph)
    relu = interp.run(m.feeds, ["small_cnn_1/fc1_relu_1/Relu"])["small_cnn_1/fc1_relu_1/Relu"]
    again = interp.run({"small_cnn_1/fc1_relu_1/Relu": relu}, m.outputs)
    np.testing.assert_allclose(again["Identity"], m.expected["Identity"], rtol=RTOL, atol=1e-7)


# -- hand-built graphs -------------------------------------------------------------------
def _graph(text: str) -> Graph:
    return parse_graph(text, "<test>")


ADD_GRAPH = """
graph {
  %x = Placeholder() {dtype = f32, shape = shape<2>} : f32[2]
  %one = Const() {dtype = f32, value = dense<f32[2], [1.0, 2.0]>} : f32[2]
  %y = AddV2(%x, %one) {T = f32} : f32[*]
  %unused = Mystery(%x) : f32[*]
}
"""


def test_only_needed_ops_run_and_missing_kernel_is_named():
    graph = _graph(ADD_GRAPH)
    out = Interpreter(graph).run({"x": np.array([1, 1], np.float32)}, ["y"])
    np.testing.assert_array_equal(out["y"], [2.0, 3.0])
    with pytest.raises(MissingKernelError, match=r"op type 'Mystery' \(node 'unused'\)"):
        Interpreter(graph).run({"x": np.array([1, 1], np.float32)}, ["unused"])


def test_unfed_placeholder_and_unknown_names_are_errors():
    graph = _graph(ADD_GRAPH)
    with pytest.raises(InterpreterError, match="placeholder 'x'"):
        Interpreter(graph).run({}, ["y"])
    with pytest.raises(InterpreterError, match="fetch 'nope'"):
        Interpreter(graph).run({"x": np.zeros(2, np.float32)}, ["nope"])


def test_feeds_are_cast_to_the_declared_type():
    out = run_graph(_graph(ADD_GRAPH), {"x": [0.5, 0.25]}, ["y"])
    assert out["y"].dtype == np.float32
    np.testing.assert_array_equal(out["y"], [1.5, 2.25])


def test_control_dependencies_order_but_do_not_feed():
    graph = _graph("""
graph {
  %a = Const() {dtype = f32, value = dense<f32[], [3.0]>} : f32[]
  %b = Const(^%a) {dtype = f32, value = dense<f32[], [4.0]>} : f32[]
  %n[0] = NoOp(^%a, ^%b)
  %y = Identity(%b, ^%n) {T = f32} : f32[*]
}
""")
    assert run_graph(graph, {}, ["y"])["y"] == 4.0


SWITCH_GRAPH = """
graph {
  %x = Placeholder() {dtype = f32, shape = shape<>} : f32[]
  %p = Placeholder() {dtype = bool, shape = shape<>} : bool[]
  %s[2] = Switch(%x, %p) {T = f32} : f32[*], f32[*]
  %two = Const(^%s) {dtype = f32, value = dense<f32[], [2.0]>} : f32[]
  %t = Mul(%s:1, %two) {T = f32} : f32[*]
  %f = Neg(%s) {T = f32} : f32[*]
  %m[2] = Merge(%f, %t) {N = 2, T = f32} : f32[*], i32[*]
}
"""


@pytest.mark.parametrize("pred, value, index", [(True, 6.0, 1), (False, -3.0, 0)])
def test_switch_merge_takes_the_live_branch(pred, value, index):
    out = run_graph(_graph(SWITCH_GRAPH), {"x": np.float32(3), "p": np.bool_(pred)}, ["m", "m:1"])
    assert out["m"] == value and out["m:1"] == index


def test_a_predicate_of_other_than_one_element_is_an_error():
    """Fuzz seed 17, case 2415: a mutated shape left the predicate empty; TF wants a scalar."""
    with pytest.raises(InterpreterError, match=r"Switch 's': its predicate has shape \[0\]"):
        run_graph(_graph(SWITCH_GRAPH), {"x": np.float32(3), "p": np.zeros(0, bool)}, ["m"])


def test_fetching_a_dead_branch_is_an_error():
    graph = _graph(SWITCH_GRAPH)
    with pytest.raises(InterpreterError, match="dead"):
        run_graph(graph, {"x": np.float32(3), "p": np.bool_(False)}, ["t"])


def test_tf1_control_flow_both_branches():
    """The fixture's conds take opposite branches; a negated input swaps them, TF is the judge."""
    m = load_model_fixture("tf1_control_flow")
    interp = Interpreter(load_graph(m.path))
    for feed in (m.feeds["input"], -m.feeds["input"]):
        got = interp.run({"input": feed}, m.outputs)
        if feed is m.feeds["input"]:
            assert_matches(got, m.expected)
        else:
            pytest.importorskip("tensorflow")
            assert_matches(got, run_tf(m.data, {"input": feed}, m.outputs))


def _tf1_graph(build) -> bytes:
    tf = require_tf()
    with tf1_control_flow_graph(tf) as graph:
        x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
        tf.identity(build(tf, x), name="out")
    return graph.as_graph_def().SerializeToString()


def _nested_loops(tf, x):
    cv1 = tf.compat.v1

    def outer(i, acc):
        inner = cv1.while_loop(lambda j, a: j < i, lambda j, a: (j + 1, a + tf.cast(j, tf.float32) * x), [0, acc])
        return i + 1, inner[1]
    return cv1.while_loop(lambda i, a: i < 4, outer, [0, tf.zeros_like(x)])[1]


def _loop_in_cond(tf, x):
    cv1 = tf.compat.v1
    loop = lambda: cv1.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * 2.0), [0, x])[1]  # noqa: E731
    return cv1.cond(tf.reduce_sum(x) > 0, loop, lambda: x - 1.0)


def _cond_in_loop(tf, x):
    cv1 = tf.compat.v1

    def body(i, v):
        return i + 1, cv1.cond(tf.equal(i % 2, 0), lambda: v + 1.0, lambda: v * 3.0)
    return cv1.while_loop(lambda i, v: i < 5, body, [0, x])[1]


@pytest.mark.tf
@pytest.mark.parametrize("build", [_nested_loops, _loop_in_cond, _cond_in_loop], ids=lambda f: f.__name__)
def test_tf1_control_flow_graphs_built_by_tf(build):
    """Nested frames, a loop on an untaken branch (dead Exit), a cond in every iteration."""
    data = _tf1_graph(build)
    interp = Interpreter(load_graph_bytes(data))
    for feed in ([1.0, 2.0, 3.0], [-1.0, -2.0, 0.5]):
        x = np.array(feed, np.float32)
        assert_matches(interp.run({"x": x}, ["out"]), run_tf(data, {"x": x}, ["out"]), rtol=1e-6)


def test_functional_control_flow_lowers_each_function_once(monkeypatch):
    m = load_model_fixture("tf2_functional_control_flow")
    calls: list[str] = []
    real = functions_module.lower_function

    def counting(library, name):
        calls.append(name)
        return real(library, name)

    monkeypatch.setattr("compiler.runtime.functions.lower_function", counting)
    interp = Interpreter(load_graph(m.path))
    assert_matches(interp.run(m.feeds, m.outputs), m.expected)
    interp.run({"input": -m.feeds["input"]}, m.outputs)
    assert len(calls) == len(set(calls)) and "while_body_frozen" in calls


@pytest.mark.tf
def test_functional_while_trip_count_follows_the_input():
    """The fixture's loop runs 5 or 3 times depending on the input's mean; check the other count too."""
    m = load_model_fixture("tf2_functional_control_flow")
    feed = {"input": -m.feeds["input"]}
    assert_matches(Interpreter(load_graph(m.path)).run(feed, m.outputs), run_tf(m.data, feed, m.outputs))


def _case_and_call_graph() -> bytes:
    """A tf.function graph with StatelessCase (switch_case) and a PartitionedCall of a nested function."""
    tf = require_tf()

    @tf.function
    def inner(x):
        return tf.nn.relu(x) * 2.0

    @tf.function(input_signature=[tf.TensorSpec([3], tf.float32, name="x"), tf.TensorSpec([], tf.int32, name="k")])
    def outer(x, k):
        y = tf.switch_case(k, [lambda: x + 1.0, lambda: x * 3.0, lambda: -x])
        return tf.identity(inner(y), name="out")

    return outer.get_concrete_function().graph.as_graph_def().SerializeToString()


@pytest.mark.tf
def test_case_and_partitioned_call():
    data = _case_and_call_graph()
    graph = load_graph_bytes(data)
    assert {op.type for op in graph} >= {"StatelessCase", "PartitionedCall"}
    interp = Interpreter(graph)
    for k in (0, 1, 2, 7):  # 7 is out of range: TF runs the last branch
        feeds = {"x": np.array([1.0, -2.0, 3.0], np.float32), "k": np.int32(k)}
        assert_matches(interp.run(feeds, ["out"]), run_tf(data, feeds, ["out"]), rtol=0.0)


def test_identity_n_and_multiple_outputs():
    graph = _graph("""
graph {
  %a = Const() {dtype = f32, value = dense<f32[2], [1.0, 2.0]>} : f32[2]
  %b = Const() {dtype = i32, value = dense<i32[], [7]>} : i32[]
  %n[2] = IdentityN(%a, %b) {T = [f32, i32]} : f32[*], i32[*]
}
""")
    out = run_graph(graph, {}, ["n", "n:1"])
    np.testing.assert_array_equal(out["n"], [1.0, 2.0])
    assert out["n:1"] == 7


def test_const_values_come_from_the_attribute():
    graph = Graph()
    graph.create_op("Const", "c", attrs={"dtype": DType.INT64,
                                          "value": Tensor.from_numpy(np.arange(6).reshape(2, 3), DType.INT64)})
    out = run_graph(graph, {}, ["c"])["c"]
    assert out.dtype == np.int64 and out.shape == (2, 3)


# -- full-size models --------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.tf
@pytest.mark.parametrize("name", ["keras_mobilenet_v2", "keras_resnet50"])
def test_big_model_matches_tf(name):
    m = build_big_fixture(name)
    worst = assert_matches(Interpreter(load_graph(m.path)).run(m.feeds, m.outputs), m.expected)
    assert worst < RTOL
