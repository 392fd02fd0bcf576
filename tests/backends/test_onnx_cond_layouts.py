"""Layouts across an ONNX If: a cond between NCHW convs reads its operands as stored and hands its
results back in the layout its branches computed them in, so no Transpose pair wraps the If (TF1
conds: `test_onnx_tf1_control_flow`'s batch-norm test).  Where the branches disagree, the one whose
layout the readers do not want converts inside its own subgraph."""
from __future__ import annotations

from typing import Callable

import numpy as np
import onnx
import pytest

from compiler.backends.onnx import export_with_report
from compiler.frontends.graphdef import load_graph_bytes
from compiler.runtime.onnx_runner import run_onnx
from tests.backends.test_onnx_tf1_control_flow import op_types

pytestmark = pytest.mark.tf


def _conv_cond_conv(tf, branches: Callable) -> tuple[bytes, Callable]:
    """x -> conv -> relu -> tf.cond(flag, *branches(h)) -> conv, built in a TF2 graph (a StatelessIf
    with its branches in the function library); (GraphDef bytes, run(x, flag) -> TF's output)."""
    rng = np.random.RandomState(4)
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 6, 6, 3], name="x")
        flag = tf.compat.v1.placeholder(tf.bool, [], name="flag")
        h = tf.nn.relu(tf.nn.conv2d(x, rng.randn(3, 3, 3, 4).astype(np.float32), 1, "SAME"))
        then_branch, else_branch = branches(tf, h)
        y = tf.cond(flag, then_branch, else_branch)
        tf.identity(tf.nn.conv2d(y, rng.randn(1, 1, 4, 5).astype(np.float32), 1, "VALID"), name="out")

    def run(x_value: np.ndarray, flag_value: bool) -> np.ndarray:
        with tf.compat.v1.Session(graph=graph) as session:
            return session.run("out:0", {"x:0": x_value, "flag:0": flag_value})

    return graph.as_graph_def().SerializeToString(), run


def _exported(data: bytes) -> onnx.ModelProto:
    graph = load_graph_bytes(data)
    assert any(op.type == "StatelessIf" for op in graph)
    model = export_with_report(graph, ["x", "flag"], ["out"]).model
    onnx.checker.check_model(model, full_check=True)
    return model


def _check_both_ways(model: onnx.ModelProto, run: Callable) -> None:
    feed = np.random.RandomState(5).uniform(-1, 1, (2, 6, 6, 3)).astype(np.float32)
    for flag in (True, False):
        got = run_onnx(model, {"x": feed, "flag": np.array(flag)}, ["out"])["out"]
        np.testing.assert_allclose(got, run(feed, flag), rtol=1e-5, atol=1e-5, err_msg=f"flag={flag}")


def test_pooling_branches_keep_the_convs_layout() -> None:
    """Max pool or doubled average pool: both branches compute NCHW from the NCHW operand, so the
    model's only Transposes are the input's and the output's (before: one out of the first conv,
    one into and one out of each branch, one into the second conv)."""
    tf = pytest.importorskip("tensorflow")
    data, run = _conv_cond_conv(tf, lambda tf, h: (lambda: tf.nn.max_pool2d(h, 2, 2, "VALID"),
                                                   lambda: tf.nn.avg_pool2d(h, 2, 2, "VALID") * 2.0))
    model = _exported(data)
    assert op_types(model)["If"] == 1
    assert op_types(model)["Transpose"] == 2
    _check_both_ways(model, run)


def test_branches_in_different_layouts_agree_on_the_one_the_reader_wants() -> None:
    """The then branch scales the NCHW operand (stored NCHW), the else branch swaps its height and
    width (a TF Transpose only relabels the stored axes, so its result is in neither order): the If
    hands back NCHW, which the second conv reads, and only the else branch converts."""
    tf = pytest.importorskip("tensorflow")
    data, run = _conv_cond_conv(tf, lambda tf, h: (lambda: h * 2.0, lambda: tf.transpose(h, [0, 2, 1, 3]) - 1.0))
    model = _exported(data)
    (if_node,) = [n for n in model.graph.node if n.op_type == "If"]
    branch_transposes = {a.name: sum(n.op_type == "Transpose" for n in a.g.node) for a in if_node.attribute}
    assert branch_transposes == {"then_branch": 0, "else_branch": 1}
    assert op_types(model)["Transpose"] == 2 + branch_transposes["else_branch"]
    _check_both_ways(model, run)
