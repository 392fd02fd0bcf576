"""TF1 TensorArrays (tf.map_fn, tf.scan, tf.foldl, TensorArray in a while_loop) exported as dense
lists, checked against TF's own session.

The graphs are tests/runtime/test_tensor_array_kernels.py's (which runs them in gttc's runtime);
each is exported at -O0 and -O2, fully checked and run by onnxruntime."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

from compiler.backends.onnx import UnsupportedOpError, export_with_report
from compiler.backends.onnx.tensor_arrays import find_tensor_arrays
from compiler.frontends.graphdef import load_graph_bytes
from compiler.runtime.onnx_runner import run_onnx
from tests.backends.test_onnx_tf1_control_flow import op_types
from tests.runtime.test_tensor_array_kernels import GRAPHS, _grown, _o2, _tf1_graph

pytestmark = pytest.mark.tf


@pytest.mark.parametrize("at_o2", [False, True])
@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_tensor_arrays_export_as_dense_lists_and_match_tf(name: str, at_o2: bool) -> None:
    tf = pytest.importorskip("tensorflow")
    data, feed, want = _tf1_graph(tf, GRAPHS[name])
    graph = _o2(data) if at_o2 else load_graph_bytes(data)
    arrays = len([op for op in graph if op.type == "TensorArrayV3"])
    result = export_with_report(graph, ["x"], ["out"])
    onnx.checker.check_model(result.model, full_check=True)
    assert result.report.stats["tensor_arrays"] == arrays > 0
    assert not [t for t in op_types(result.model) if t.startswith("Sequence")]
    got = run_onnx(result.model, {"x": feed}, ["out"])["out"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert [op.type for op in graph if op.type == "TensorArrayV3"] == ["TensorArrayV3"] * arrays  # caller's IR kept


@pytest.mark.parametrize("name", ["map_fn", "scan", "while_loop"])
def test_a_list_written_once_per_iteration_is_a_scan_output(name: str) -> None:
    """Item i written at iteration i of a loop that runs exactly size times: the Loop stacks the
    items itself, with no list carried and no ScatterND in the body."""
    tf = pytest.importorskip("tensorflow")
    data, feed, want = _tf1_graph(tf, GRAPHS[name])
    result = export_with_report(_o2(data), ["x"], ["out"])
    assert result.report.stats["scan_outputs"] == 1
    assert "ScatterND" not in op_types(result.model)
    np.testing.assert_allclose(run_onnx(result.model, {"x": feed}, ["out"])["out"], want, rtol=1e-5, atol=1e-6)


def test_a_loop_that_may_stop_early_keeps_its_list_carried() -> None:
    """The predicate also tests the data, so the loop can end before every item is written; the
    items it never reaches must read as zeros, which a scan output cannot give."""
    tf = pytest.importorskip("tensorflow")

    def stops_early(tf, x):
        array = tf.TensorArray(tf.float32, size=6, element_shape=[3, 4])

        def body(i, array, h):
            return i + 1, array.write(i, h), h * 0.5

        _, array, _ = tf.compat.v1.while_loop(
            lambda i, array, h: tf.logical_and(i < 6, tf.reduce_max(h) > 0.2), body, [tf.constant(0), array, x])
        return array.stack()

    data, feed, want = _tf1_graph(tf, stops_early)
    assert 0 < np.count_nonzero(np.abs(want).reshape(6, -1).max(1)) < 6  # stopped early: zero items at the end
    result = export_with_report(_o2(data), ["x"], ["out"])
    assert result.report.stats.get("scan_outputs", 0) == 0 and "ScatterND" in op_types(result.model)
    np.testing.assert_allclose(run_onnx(result.model, {"x": feed}, ["out"])["out"], want, rtol=1e-5, atol=1e-6)


def test_a_growing_array_is_refused_by_name() -> None:
    """dynamic_size: a dense tensor cannot grow (the runtime still runs it)."""
    tf = pytest.importorskip("tensorflow")
    data, _, _ = _tf1_graph(tf, _grown)
    graph = load_graph_bytes(data)
    assert not find_tensor_arrays(graph)
    with pytest.raises(UnsupportedOpError, match="TensorArrayV3"):
        export_with_report(graph, ["x"], ["out"])


def test_an_array_whose_flow_reaches_another_op_is_left_alone() -> None:
    """The flow must reach only control flow and this array's accesses to be the list's value."""
    from compiler.ir.dtypes import DType
    from compiler.ir.shapes import Shape
    from tests.backends.test_onnx_export import Builder

    b = Builder()
    size = b.const(np.asarray(2, np.int32))
    handle, flow = b("TensorArrayV3", size, dtype=DType.FLOAT, element_shape=Shape((3,)), name="array")
    b("TensorArrayCloseV3", handle)
    assert len(find_tensor_arrays(b.graph)) == 1
    b("Relu", flow, name="reads_the_flow")
    assert not find_tensor_arrays(b.graph)


def test_an_access_mixing_two_arrays_leaves_both_alone() -> None:
    """A write through one array's handle on another array's flow (a graph TF would not build, seen
    in fuzzing) is neither array's list: both stay, and the export refuses them by name."""
    from compiler.ir.dtypes import DType
    from compiler.ir.shapes import Shape
    from tests.backends.test_onnx_export import Builder

    b = Builder()
    x = b.input("x", [3])
    size, index = b.const(np.asarray(2, np.int32)), b.const(np.asarray(0, np.int32))
    handle_a, _ = b("TensorArrayV3", size, dtype=DType.FLOAT, element_shape=Shape((3,)), name="a")
    _, flow_b = b("TensorArrayV3", size, dtype=DType.FLOAT, element_shape=Shape((3,)), name="b")
    b("TensorArrayWriteV3", handle_a, index, x, flow_b, name="mixed")
    assert not find_tensor_arrays(b.graph)
    with pytest.raises(UnsupportedOpError, match="TensorArray"):
        export_with_report(b.graph, ["x"], ["mixed"])
