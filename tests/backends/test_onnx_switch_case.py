"""tf.switch_case, frozen both ways: lowered (a _SwitchN per input and an N-way Merge) and functional
(StatelessCase with a function library).  The interpreter and the ONNX export (nested Ifs) must pick
the branch TF picks, including the last branch for an index out of range."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

from compiler.backends.onnx import export_with_report
from compiler.frontends.graphdef import load_graph_bytes
from compiler.ir.dtypes import DType
from compiler.rewrite.edit import add_const
from compiler.runtime.interpreter import run_graph
from compiler.runtime.onnx_runner import run_onnx
from tests.backends.test_onnx_tf1_control_flow import op_types

pytestmark = pytest.mark.tf

INDICES = (0, 1, 2, 3, -1, 7)  # 3, -1 and 7 are out of range: the last branch runs


def _branches(tf, x) -> list:
    return [lambda: x * 2.0, lambda: tf.tanh(x), lambda: x - 1.0, lambda: tf.square(x)]


def _case_graph(tf, lowered: bool):
    """(GraphDef bytes, input names, output name, run(x, k) -> TF's output) of a four-branch
    switch_case: a frozen tf.function (lowered to _SwitchN) or a TF1 graph (a StatelessCase)."""
    from tools.make_fixtures import freeze_concrete_function

    if lowered:
        function = tf.function(lambda x, k: tf.switch_case(k, _branches(tf, x)),
                               input_signature=[tf.TensorSpec([2, 3], tf.float32, name="x"),
                                                tf.TensorSpec([], tf.int32, name="k")])
        graph_def, inputs, outputs = freeze_concrete_function(function.get_concrete_function())
        return (graph_def.SerializeToString(), inputs, outputs[0],
                lambda x, k: function(tf.constant(x), tf.constant(k)).numpy())
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 3], name="x")
        k = tf.compat.v1.placeholder(tf.int32, [], name="k")
        tf.identity(tf.switch_case(k, _branches(tf, x)), name="out")

    def run(x_value, k_value):
        with tf.compat.v1.Session(graph=graph) as session:
            return session.run("out:0", {"x:0": x_value, "k:0": k_value})

    return graph.as_graph_def().SerializeToString(), ["x", "k"], "out", run


@pytest.mark.parametrize("lowered", [True, False], ids=["switch_n", "stateless_case"])
def test_switch_case_runs_and_exports_as_tf_picks_its_branch(lowered: bool) -> None:
    tf = pytest.importorskip("tensorflow")
    data, inputs, out, run = _case_graph(tf, lowered)
    graph = load_graph_bytes(data)
    assert any(op.type == ("_SwitchN" if lowered else "StatelessCase") for op in graph)
    result = export_with_report(graph, inputs, [out])
    onnx.checker.check_model(result.model, full_check=True)
    assert op_types(result.model)["If"] == 3  # nested: index 0, else 1, else 2, else the last
    if lowered:
        assert result.report.stats["switch_cases"] == 1
    x = np.random.RandomState(0).uniform(-1, 1, (2, 3)).astype(np.float32)
    for k in INDICES:
        want = run(x, np.int32(k))
        feed = dict(zip(inputs, (x, np.int32(k))))
        np.testing.assert_allclose(run_graph(graph, feed, [out])[out], want, rtol=1e-6, err_msg=f"index {k}")
        np.testing.assert_allclose(run_onnx(result.model, feed, [out])[out], want, rtol=1e-6, err_msg=f"index {k}")


@pytest.mark.parametrize("k", [1, 9])
def test_a_case_on_an_index_known_at_export_is_the_branch_it_runs(k: int) -> None:
    tf = pytest.importorskip("tensorflow")
    data, inputs, out, run = _case_graph(tf, lowered=False)
    graph = load_graph_bytes(data)
    case = next(op for op in graph if op.type == "StatelessCase")
    case.set_operand(0, add_const(graph, "known_index", np.asarray(k, np.int32), DType.INT32, case))
    result = export_with_report(graph, inputs[:1], [out])
    assert "If" not in op_types(result.model) and result.report.stats["conds_with_known_predicate"] == 1
    x = np.random.RandomState(1).uniform(-1, 1, (2, 3)).astype(np.float32)
    want = run(x, np.int32(k))
    np.testing.assert_allclose(run_onnx(result.model, {inputs[0]: x}, [out])[out], want, rtol=1e-6)
