"""`tf.map_fn` over a batch known only at run time, and over ragged rows (backends/onnx/ragged_maps.py,
scan_outputs.py): exported and run in onnxruntime against TensorFlow, frozen both functionally (as
tf2onnx's loader freezes) and with control flow lowered to TF1 frames.

Before: a map over a batch of unknown size was refused ("num_elements must be a constant"), and a map
over ragged rows ("no lowering for RaggedTensorToVariant"); tf2onnx converts the functional forms of
both (20, 29, 23 and 33 nodes) and none of the lowered ones."""
from __future__ import annotations

from typing import Callable

import numpy as np
import onnx
import pytest

from compiler.backends.onnx import export_with_report
from compiler.backends.onnx.errors import UnsupportedOpError
from compiler.backends.onnx.functional_loops import find_list_loops, rewrite_found
from compiler.backends.onnx.ragged_maps import find_ragged_results
from compiler.frontends.graphdef import load_graph_bytes
from compiler.ir.dtypes import DType
from compiler.passes import run_pipeline
from compiler.passes.levels import preset_pipeline
from compiler.rewrite.edit import add_const
from compiler.runtime.onnx_runner import run_onnx
from tests.backends.test_onnx_tf1_control_flow import op_types
from tests.oracle import tf1_control_flow_graph

pytestmark = pytest.mark.tf

VALUES = np.array([1, 2, 3, 4, 5, 6, 7], np.float32)
SPLITS = np.array([0, 2, 2, 5, 7], np.int64)
ROWS = np.array([[1, -2, 3, -4, 5], [-1, -1, -1, -1, -1], [0.5, 0.25, -3, 2, 1], [1, 2, 3, 4, 5]], np.float32)


def _freeze(tf, function: Callable, specs: list, lowered: bool) -> tuple[bytes, list[str], list[str]]:
    from tools.make_fixtures import freeze_concrete_function

    traced = tf.function(function, input_signature=specs)
    graph_def, inputs, outputs = freeze_concrete_function(traced.get_concrete_function(), lower_control_flow=lowered)
    return graph_def.SerializeToString(), inputs, outputs


def _ragged_specs(tf) -> list:
    return [tf.TensorSpec([None], tf.float32, name="v"), tf.TensorSpec([None], tf.int64, name="s")]


def _sums_of_ragged_rows(tf, v, s):
    rows = tf.RaggedTensor.from_row_splits(v, s)
    return tf.map_fn(lambda r: tf.reduce_sum(r * r) + tf.cast(tf.size(r), tf.float32), rows,
                     fn_output_signature=tf.float32)


def _positive_parts(tf, x):
    out = tf.map_fn(lambda r: tf.boolean_mask(r, r > 0.0) * 2.0, x,
                    fn_output_signature=tf.RaggedTensorSpec(shape=[None], dtype=tf.float32, ragged_rank=0))
    return out.flat_values, out.row_splits


def _rows_with_first_repeated(tf, v, s):
    rows = tf.RaggedTensor.from_row_splits(v, s)
    out = tf.map_fn(lambda r: tf.concat([r, r[:1] * 10.0], 0), rows,
                    fn_output_signature=tf.RaggedTensorSpec(shape=[None], dtype=tf.float32, ragged_rank=0))
    return out.flat_values, out.row_splits


RAGGED_CASES = {
    "ragged_in_dense_out": (_sums_of_ragged_rows, True),
    "dense_in_ragged_out": (_positive_parts, False),
    "ragged_in_ragged_out": (_rows_with_first_repeated, True),
}


def _export_and_compare(data: bytes, inputs: list[str], outputs: list[str], feeds_list: list[dict], want: Callable,
                        at_o2: bool) -> onnx.ModelProto:
    graph = load_graph_bytes(data)
    if at_o2:
        graph = run_pipeline(graph, preset_pipeline(2)[0], inputs, outputs).graph
    model = export_with_report(graph, inputs, outputs).model
    onnx.checker.check_model(model, full_check=True)
    for feeds in feeds_list:
        got = run_onnx(model, feeds, outputs)
        for name, expected in zip(outputs, want(feeds)):
            np.testing.assert_allclose(got[name], expected, rtol=1e-6)
            assert got[name].dtype == expected.dtype
    return model


@pytest.mark.parametrize("lowered", [False, True], ids=["functional", "lowered"])
@pytest.mark.parametrize("case", sorted(RAGGED_CASES))
def test_a_map_over_ragged_rows_exports_and_matches_tensorflow(case: str, lowered: bool) -> None:
    tf = pytest.importorskip("tensorflow")
    build, ragged_input = RAGGED_CASES[case]
    specs = _ragged_specs(tf) if ragged_input else [tf.TensorSpec([4, 5], tf.float32, name="x")]
    function = (lambda v, s: build(tf, v, s)) if ragged_input else (lambda x: build(tf, x))
    data, inputs, outputs = _freeze(tf, function, specs, lowered)
    if ragged_input:  # also no rows at all, and empty rows first
        feeds_list = [{"v": VALUES, "s": SPLITS}, {"v": VALUES[:0], "s": SPLITS[:1]},
                      {"v": VALUES[:2], "s": np.array([0, 0, 0, 2], np.int64)}]
    else:
        feeds_list = [{"x": ROWS}]
    traced = tf.function(function, input_signature=specs)

    def want(feeds: dict) -> list[np.ndarray]:
        found = traced(*(tf.constant(feeds[name]) for name in inputs))
        return [t.numpy() for t in (found if isinstance(found, tuple) else (found,))]

    for at_o2 in (False, True):
        model = _export_and_compare(data, inputs, outputs, feeds_list, want, at_o2)
        types = op_types(model)
        assert types["Loop"] + types["Scan"] == 1  # a Scan when the loop walks its input row by row
        if at_o2 or not lowered:  # -O0 keeps the lowered form's identities, so the list stays carried
            assert "ScatterND" not in types


def test_the_rewrite_reports_what_it_changed() -> None:
    tf = pytest.importorskip("tensorflow")
    data, inputs, outputs = _freeze(tf, lambda v, s: _rows_with_first_repeated(tf, v, s), _ragged_specs(tf), False)
    stats = export_with_report(load_graph_bytes(data), inputs, outputs).report.stats
    assert stats["ragged_map_inputs"] == 1 and stats["ragged_map_results"] == 1


def test_a_ragged_result_not_written_at_the_iteration_number_is_refused_by_name() -> None:
    """Rows appended per iteration are in index order only when the write index is the iteration
    number: written anywhere else, the variant list stays, and the export names it."""
    tf = pytest.importorskip("tensorflow")
    data, inputs, outputs = _freeze(tf, lambda x: _positive_parts(tf, x), [tf.TensorSpec([4, 5], tf.float32, name="x")],
                                    False)
    graph = load_graph_bytes(data)
    rewrite_found(graph, find_list_loops(graph))
    write = next(op for op in graph if op.type == "TensorListSetItem")
    write.set_operand(1, add_const(graph, "always_first", np.zeros((), np.int32), DType.INT32, write))
    assert find_ragged_results(graph) == []
    with pytest.raises(UnsupportedOpError, match="RaggedTensor(To|From)Variant"):
        export_with_report(graph, inputs, outputs)


@pytest.mark.parametrize("lowered", [False, True], ids=["functional", "lowered"])
def test_a_map_over_a_batch_of_unknown_size_is_a_scan_output(lowered: bool) -> None:
    tf = pytest.importorskip("tensorflow")
    specs = [tf.TensorSpec([None, 5], tf.float32, name="x")]
    function = lambda x: tf.map_fn(lambda r: tf.reduce_sum(r * r), x)  # noqa: E731
    data, inputs, outputs = _freeze(tf, function, specs, lowered)
    traced = tf.function(function, input_signature=specs)
    feeds_list = [{"x": ROWS}, {"x": ROWS[:1]}, {"x": ROWS[:0]}]
    for at_o2 in (False, True):
        model = _export_and_compare(data, inputs, outputs, feeds_list,
                                    lambda feeds: [traced(tf.constant(feeds["x"])).numpy()], at_o2)
        if at_o2 or not lowered:
            assert "ScatterND" not in op_types(model)


@pytest.mark.parametrize("name", ["map_fn", "foldl"])
def test_a_tf1_map_or_fold_over_a_batch_of_unknown_size_exports_and_matches_tf(name: str) -> None:
    """TF1's TensorArrays sized and unstacked by `tf.shape(x)[0]` (tensor_arrays.py reads the
    unstack's range and the array's size as the same run-time count): refused before, where
    tf2onnx converts both (8 nodes each)."""
    tf = pytest.importorskip("tensorflow")
    from tests.runtime.test_tensor_array_kernels import GRAPHS

    with tf1_control_flow_graph(tf) as graph:
        x = tf.compat.v1.placeholder(tf.float32, [None, 4], name="x")
        tf.identity(GRAPHS[name](tf, x), name="out")
    data = graph.as_graph_def().SerializeToString()

    def want(feeds: dict) -> list[np.ndarray]:
        with tf.compat.v1.Session(graph=graph) as session:
            return [session.run("out:0", {"x:0": feeds["x"]})]

    feeds_list = [{"x": ROWS[:, :4]}, {"x": ROWS[:1, :4]}]
    for at_o2 in (False, True):
        model = _export_and_compare(data, ["x"], ["out"], feeds_list, want, at_o2)
        if at_o2:  # (-O0 keeps the loop's identities, so the list stays carried: a ScatterND a step)
            assert "ScatterND" not in op_types(model)
