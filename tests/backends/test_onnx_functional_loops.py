"""TF2 functional While loops carrying TensorLists (backends/onnx/functional_loops.py): frozen without
lowering control flow, as tf2onnx's loader freezes, they export through the same TF1-frame path as
TF's lowered form, and match TensorFlow.

Before the rewrite, a TensorArray written in such a loop (or tf.map_fn) was refused ("the element rank
... must be known"), where tf2onnx converts it, and a Keras LSTM took 31 ONNX nodes against tf2onnx's 5."""
from __future__ import annotations

from typing import Callable

import numpy as np
import onnx
import pytest

from compiler.backends.onnx import export_with_report
from compiler.backends.onnx.functional_loops import find_list_loops, rewrite_found
from compiler.frontends.graphdef import load_graph_bytes
from compiler.passes import run_pipeline
from compiler.passes.levels import preset_pipeline
from compiler.runtime.interpreter import run_graph
from compiler.runtime.onnx_runner import run_onnx
from tests.backends.test_onnx_tensor_arrays import _tf2_nested, _tf2_range_loop, _tf2_until_small
from tests.backends.test_onnx_tf1_control_flow import op_types

pytestmark = pytest.mark.tf


def _frozen_functional(tf, function: Callable, shape: tuple[int, ...]) -> tuple[bytes, str, str, np.ndarray, np.ndarray]:
    """`function` of x: float32[shape] frozen keeping its While ops: (bytes, input, output, feed, TF's output)."""
    from tools.make_fixtures import freeze_concrete_function

    traced = tf.function(function, input_signature=[tf.TensorSpec(shape, tf.float32, name="x")])
    graph_def, inputs, outputs = freeze_concrete_function(traced.get_concrete_function(), lower_control_flow=False)
    feed = np.random.RandomState(0).uniform(-1, 1, shape).astype(np.float32)
    return graph_def.SerializeToString(), inputs[0], outputs[0], feed, traced(tf.constant(feed)).numpy()


def _map_fn(tf, x):
    return tf.map_fn(lambda row: tf.reduce_sum(row * row), x)


@pytest.mark.parametrize("build, loops", [(_tf2_range_loop, 1), (_tf2_until_small, 1), (_tf2_nested, 2), (_map_fn, 1)])
def test_list_loops_export_as_frames_and_match_tensorflow(build: Callable, loops: int) -> None:
    tf = pytest.importorskip("tensorflow")
    data, x, out, feed, want = _frozen_functional(tf, lambda v: build(tf, v), (3, 4))
    graph = load_graph_bytes(data)
    assert len(find_list_loops(graph)) == 1  # the nested loop sits in the outer one's body function
    for at_o2 in (False, True):
        if at_o2:
            graph = run_pipeline(graph, preset_pipeline(2)[0], [x], [out]).graph
        result = export_with_report(graph, [x], [out])
        onnx.checker.check_model(result.model, full_check=True)
        assert result.report.stats["list_loops_as_frames"] == 1
        types = op_types(result.model)
        # each write per iteration is a scan output; a loop walking its input step by step is a Scan
        assert types["Loop"] + types["Scan"] == loops and "ScatterND" not in types
        np.testing.assert_allclose(run_onnx(result.model, {x: feed}, [out])[out], want, rtol=1e-5, atol=1e-6)


def test_the_rewritten_graph_runs_as_the_functional_one() -> None:
    """The frame computes what the While computed, in gttc's own interpreter too."""
    tf = pytest.importorskip("tensorflow")
    data, x, out, feed, want = _frozen_functional(tf, lambda v: _tf2_nested(tf, v), (3, 4))
    graph = load_graph_bytes(data)
    rewrite_found(graph, find_list_loops(graph))
    assert not any(op.type in ("While", "StatelessWhile") for op in graph)
    assert {"Enter", "Merge", "Switch", "LoopCond", "NextIteration", "Exit"} <= {op.type for op in graph}
    np.testing.assert_allclose(run_graph(graph, {x: feed}, [out])[out], want, rtol=1e-6)


@pytest.mark.parametrize("layer, fused", [("LSTM", "LSTM"), ("GRU", "GRU"), ("SimpleRNN", "RNN")])
def test_a_keras_recurrent_layer_frozen_functionally_becomes_one_onnx_node(layer: str, fused: str) -> None:
    """tf2onnx's own loader freezes Keras models this way; the cell matcher sees the same frame as in
    the lowered form, so the loop is one ONNX recurrent node."""
    tf = pytest.importorskip("tensorflow")
    keras = pytest.importorskip("keras")
    keras.utils.set_random_seed(3)
    inputs = keras.Input((5, 4), batch_size=2)
    model = keras.Model(inputs, getattr(keras.layers, layer)(6)(inputs))
    data, x, out, feed, want = _frozen_functional(tf, lambda v: model(v), (2, 5, 4))
    result = export_with_report(load_graph_bytes(data), [x], [out])
    onnx.checker.check_model(result.model, full_check=True)
    types = op_types(result.model)
    assert types[fused] == 1 and "Loop" not in types
    np.testing.assert_allclose(run_onnx(result.model, {x: feed}, [out])[out], want, rtol=1e-4, atol=1e-5)


def test_loops_without_lists_keep_their_functional_lowering() -> None:
    tf = pytest.importorskip("tensorflow")
    data, x, out, feed, want = _frozen_functional(
        tf, lambda v: tf.while_loop(lambda i, h: i < 3, lambda i, h: (i + 1, h * 0.9), (0, v))[1], (3, 4))
    graph = load_graph_bytes(data)
    assert not find_list_loops(graph)
    result = export_with_report(graph, [x], [out])
    assert "list_loops_as_frames" not in result.report.stats
    np.testing.assert_allclose(run_onnx(result.model, {x: feed}, [out])[out], want, rtol=1e-6)


def _loop_nodes(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    return [n for n in model.graph.node if n.op_type == "Loop"]


def test_loop_invariants_are_read_from_outside_not_carried() -> None:
    """TF2 carries every value a loop reads (the bound, a captured tensor) as a loop variable the body
    returns unchanged; ONNX's body reads them from the enclosing graph, so only i and h are carried."""
    tf = pytest.importorskip("tensorflow")

    def loop(v):
        step, bound = v * 0.5, tf.shape(v)[0] + 2
        return tf.while_loop(lambda i, h: i < bound, lambda i, h: (i + 1, h * 0.9 + step), (0, v))[1]

    data, x, out, feed, want = _frozen_functional(tf, loop, (3, 4))
    graph = load_graph_bytes(data)
    carried = {len(op.operands) for op in graph if op.type in ("While", "StatelessWhile")}
    model = export_with_report(graph, [x], [out]).model
    (node,) = _loop_nodes(model)
    # TF's six: loop counter, maximum iterations, i, h, step, bound; three change
    assert carried == {6} and len(node.input) - 2 == len(node.output) == 3
    np.testing.assert_allclose(run_onnx(model, {x: feed}, [out])[out], want, rtol=1e-6)


def test_a_loop_whose_variables_all_pass_through_keeps_one_carried() -> None:
    """ONNX's Loop needs a carried value: a While (raw, without TF's loop counter) whose body returns
    its argument unchanged still carries it."""
    tf = pytest.importorskip("tensorflow")
    spec = tf.TensorSpec((3,), tf.float32)
    cond = tf.function(lambda h: tf.reduce_sum(h) > 1e9).get_concrete_function(spec)
    body = tf.function(lambda h: tf.identity(h)).get_concrete_function(spec)
    data, x, out, feed, want = _frozen_functional(
        tf, lambda v: tf.raw_ops.While(input=[v], cond=cond, body=body, output_shapes=[[3]])[0], (3,))
    model = export_with_report(load_graph_bytes(data), [x], [out]).model
    assert [len(n.output) for n in _loop_nodes(model)] == [1]
    np.testing.assert_array_equal(run_onnx(model, {x: feed}, [out])[out], want)
