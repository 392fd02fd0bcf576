"""TF1 TensorArrays (tf.map_fn, tf.scan, tf.foldl, TensorArray in a while_loop) exported as dense
lists, checked against TF's own session.

The graphs are tests/runtime/test_tensor_array_kernels.py's (which runs them in gttc's runtime);
each is exported at -O0 and -O2, fully checked and run by onnxruntime."""
from __future__ import annotations

from typing import Callable

import numpy as np
import onnx
import pytest

from compiler.backends.onnx import UnsupportedOpError, export_with_report
from compiler.backends.onnx.tensor_arrays import find_tensor_arrays
from compiler.frontends.graphdef import load_graph_bytes
from compiler.ir.dtypes import DType
from compiler.runtime.onnx_runner import run_onnx
from tests.backends.test_onnx_tf1_control_flow import op_types
from compiler.passes import run_pipeline
from compiler.passes.levels import preset_pipeline
from tests.runtime.test_tensor_array_kernels import GRAPHS, _grown, _o2, _tf1_built, _tf1_graph

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


def test_a_tf_scan_that_is_an_rnn_step_is_one_rnn_node() -> None:
    """tf.scan of tanh(concat([h, x]) @ w) is a plain RNN: TF1 reads the steps from a TensorArray
    entered into the loop, which the recurrent matcher takes like Keras' carried list."""
    tf = pytest.importorskip("tensorflow")
    data, feed, want = _tf1_graph(tf, GRAPHS["scan"])
    result = export_with_report(_o2(data), ["x"], ["out"])
    assert result.report.stats["onnx_rnn"] == 1 and "Loop" not in op_types(result.model)
    np.testing.assert_allclose(run_onnx(result.model, {"x": feed}, ["out"])["out"], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["map_fn", "while_loop"])
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


def _until_small(tf, x):
    """A growing array written once per iteration of a loop that stops on the data: as many items
    as iterations, none for an input that is already small."""
    array = tf.TensorArray(tf.float32, size=0, dynamic_size=True, element_shape=[4])

    def body(i, array, h):
        h = h * 0.5
        return i + 1, array.write(i, tf.reduce_sum(h, 0)), h

    _, array, _ = tf.compat.v1.while_loop(lambda i, array, h: tf.reduce_max(tf.abs(h)) > 0.05, body,
                                          [tf.constant(0), array, x])
    return tf.concat([array.stack(), tf.fill([1, 4], tf.cast(array.size(), tf.float32))], 0)


def _written_past_its_size(tf, x):
    """No loop: a growing array of size 1 written at 0 and 2; item 1 reads as zeros."""
    array = tf.TensorArray(tf.float32, size=1, dynamic_size=True, element_shape=[3, 4])
    return array.write(0, x).write(2, tf.exp(x)).stack()


GROWING = {"counted_loop": _grown, "until_small": _until_small, "written_past_its_size": _written_past_its_size}


@pytest.mark.parametrize("at_o2", [False, True])
@pytest.mark.parametrize("name", sorted(GROWING))
def test_growing_arrays_export_and_match_tf(name: str, at_o2: bool) -> None:
    """dynamic_size: each write past the end pads the dense list with zero items first."""
    tf = pytest.importorskip("tensorflow")
    graph = _tf1_built(tf, GROWING[name])
    small = np.full((3, 4), 0.01, np.float32)
    feeds = [np.random.RandomState(0).uniform(-1, 1, (3, 4)).astype(np.float32), small]
    with tf.compat.v1.Session(graph=graph) as session:
        wants = [session.run("out:0", {"x:0": feed}) for feed in feeds]
    data = graph.as_graph_def().SerializeToString()
    result = export_with_report(_o2(data) if at_o2 else load_graph_bytes(data), ["x"], ["out"])
    onnx.checker.check_model(result.model, full_check=True)
    assert result.report.stats["tensor_arrays"] == 1
    for feed, want in zip(feeds, wants):
        got = run_onnx(result.model, {"x": feed}, ["out"])["out"]
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def test_a_growing_array_filled_once_per_iteration_is_a_scan_output_even_for_no_iteration() -> None:
    """However many times the loop runs, the array ends with one item per iteration: the Loop's
    scan output, declared with the item's shape so that zero iterations stack [0, 4]."""
    tf = pytest.importorskip("tensorflow")
    data, feed, want = _tf1_graph(tf, _until_small)
    result = export_with_report(_o2(data), ["x"], ["out"])
    assert result.report.stats["scan_outputs"] == 1
    assert "ScatterND" not in op_types(result.model)
    np.testing.assert_allclose(run_onnx(result.model, {"x": feed}, ["out"])["out"], want, rtol=1e-6)
    none = run_onnx(result.model, {"x": np.full((3, 4), 0.01, np.float32)}, ["out"])["out"]
    np.testing.assert_array_equal(none, np.zeros((1, 4), np.float32))  # no items, size 0


def _tf2_frozen(tf, build: Callable) -> tuple[bytes, str, str, np.ndarray, np.ndarray]:
    """A tf.function `build(tf, x)`, x: float32[3, 4], frozen the way Keras models are (its while
    loop lowered to Enter/Merge/Switch frames, its TensorArray a TensorList of unknown rank):
    (bytes, the input and output names, a feed, TF's output)."""
    from tools.make_fixtures import freeze_concrete_function

    function = tf.function(lambda x: build(tf, x), input_signature=[tf.TensorSpec([3, 4], tf.float32, name="x")])
    graph_def, inputs, outputs = freeze_concrete_function(function.get_concrete_function())
    feed = np.random.RandomState(0).uniform(-1, 1, (3, 4)).astype(np.float32)
    want = function(tf.constant(feed)).numpy()
    return graph_def.SerializeToString(), inputs[0], outputs[0], feed, want


def _tf2_range_loop(tf, x):
    array = tf.TensorArray(tf.float32, size=5)
    h = x
    for i in tf.range(5):
        h = tf.tanh(h + 0.1)
        array = array.write(i, h)
    return array.stack()


def _tf2_until_small(tf, x):
    array = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
    h, i = x, tf.constant(0)
    while tf.reduce_max(tf.abs(h)) > 0.05:
        h = h * 0.5
        array = array.write(i, tf.reduce_sum(h, 1))
        i += 1
    return array.stack()


@pytest.mark.parametrize("build", [_tf2_range_loop, _tf2_until_small])
def test_tf2_tensor_arrays_of_unknown_rank_take_the_written_items_rank(build: Callable) -> None:
    """The list is reserved with an unknown element rank; the export gives it the rank of what the
    loop writes, and the loop's one write per iteration becomes a scan output."""
    tf = pytest.importorskip("tensorflow")
    data, x, out, feed, want = _tf2_frozen(tf, build)
    reserves = [op for op in load_graph_bytes(data) if op.type == "TensorListReserve"]
    assert [np.ndim(op.operands[0].op.attrs["value"].numpy()) for op in reserves] == [0]  # unknown rank
    for at_o2 in (False, True):
        graph = run_pipeline(load_graph_bytes(data), preset_pipeline(2)[0], [x], [out]).graph if at_o2 \
            else load_graph_bytes(data)
        result = export_with_report(graph, [x], [out])
        onnx.checker.check_model(result.model, full_check=True)
        assert result.report.stats["list_element_shapes"] == 1
        assert result.report.stats.get("scan_outputs", 0) == at_o2
        np.testing.assert_allclose(run_onnx(result.model, {x: feed}, [out])[out], want, rtol=1e-5, atol=1e-6)


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


def _tf2_nested(tf, x):
    """An array filled in an inner loop, stacked into an outer one's: the inner items' shape is known
    only through both loop frames."""
    outer = tf.TensorArray(tf.float32, size=3)
    for i in tf.range(3):
        inner = tf.TensorArray(tf.float32, size=2)
        for j in tf.range(2):
            inner = inner.write(j, x * tf.cast(i + j, tf.float32))
        outer = outer.write(i, tf.reduce_sum(inner.stack(), 0))
    return outer.stack()


def test_a_tf2_array_in_a_nested_loop_takes_the_rank_the_frames_carry() -> None:
    tf = pytest.importorskip("tensorflow")
    data, x, out, feed, want = _tf2_frozen(tf, _tf2_nested)
    result = export_with_report(load_graph_bytes(data), [x], [out])
    onnx.checker.check_model(result.model, full_check=True)
    assert result.report.stats["list_element_shapes"] == 2
    np.testing.assert_allclose(run_onnx(result.model, {x: feed}, [out])[out], want, rtol=1e-6)


def _tf2_greedy_decode(tf, x):
    """Autograph's `not done and i < 6` is a cond inside the loop condition: after -O2 removes the
    identities between them, the loop Merges of `done` and `i` are read by that cond's Switches too."""
    w = tf.constant(np.random.RandomState(3).standard_normal([4, 4]).astype(np.float32))
    array = tf.TensorArray(tf.int32, size=0, dynamic_size=True)
    h, i, done = x, tf.constant(0), tf.constant(False)
    while not done and i < 6:
        h = tf.tanh(tf.matmul(h, w))
        token = tf.argmax(h, 1, output_type=tf.int32)
        array = array.write(i, token)
        done = tf.reduce_all(tf.equal(token, 0))
        i += 1
    return tf.cast(array.stack(), tf.float32)


@pytest.mark.parametrize("at_o2", [False, True])
def test_a_loop_condition_with_a_cond_inside_exports_and_matches_tf(at_o2: bool) -> None:
    """Held-out probe t2_greedy_decode exported at -O0 only; zeros stop the loop after one token."""
    tf = pytest.importorskip("tensorflow")
    from compiler.crosscheck import run_in_tensorflow

    data, x, out, feed, _ = _tf2_frozen(tf, _tf2_greedy_decode)
    graph = load_graph_bytes(data)
    if at_o2:
        graph = run_pipeline(graph, preset_pipeline(2)[0], [x], [out]).graph
        merges = [op for op in graph if op.type == "Merge" and any(u.type == "NextIteration" for u in
                                                                   (v.op for v in op.operands))]
        assert any(sum(user.type == "Switch" for user, _ in m.results[0].uses) == 2 for m in merges)
    result = export_with_report(graph, [x], [out])
    onnx.checker.check_model(result.model, full_check=True)
    for values in (feed, np.zeros_like(feed)):
        want = run_in_tensorflow(data, {x: values}, [out])[out]
        np.testing.assert_array_equal(run_onnx(result.model, {x: values}, [out])[out], want)
    assert run_in_tensorflow(data, {x: np.zeros_like(feed)}, [out])[out].shape == (1, 3)


def _split_evenly_concat(tf, x, dynamic: bool = False):
    """TensorArray.split into rows, concat (with the lengths read) and a read: x is [3, 4]."""
    array = tf.TensorArray(tf.float32, size=0 if dynamic else 3, dynamic_size=dynamic, infer_shape=False,
                           clear_after_read=False).split(x * 2.0, [1, 1, 1])
    joined, lengths = tf.raw_ops.TensorArrayConcatV3(handle=array.handle, flow_in=array.flow, dtype=tf.float32)
    return joined + array.read(1) + tf.cast(tf.reduce_sum(lengths), tf.float32)


def _concat_in_a_loop(tf, x):
    array = tf.TensorArray(tf.float32, size=3)
    _, array, _ = tf.compat.v1.while_loop(lambda i, *_: i < 3, lambda i, a, h: (i + 1, a.write(i, tf.sin(h)), tf.sin(h)),
                                          [tf.constant(0), array, x])
    return array.concat()


SPLIT_CONCAT = {"split_evenly": _split_evenly_concat,
                "split_evenly_growing": lambda tf, x: _split_evenly_concat(tf, x, dynamic=True),
                "concat_in_a_loop": _concat_in_a_loop}


@pytest.mark.parametrize("at_o2", [False, True])
@pytest.mark.parametrize("name", sorted(SPLIT_CONCAT))
def test_split_into_equal_pieces_and_concat_export_and_match_tf(name: str, at_o2: bool) -> None:
    """A split into pieces of one length is the list of the reshaped tensor; a concat of items of one
    shape is the stacked list reshaped.  (Held-out probe: tf2onnx fails on both.)"""
    tf = pytest.importorskip("tensorflow")
    data, feed, want = _tf1_graph(tf, SPLIT_CONCAT[name])
    result = export_with_report(_o2(data) if at_o2 else load_graph_bytes(data), ["x"], ["out"])
    onnx.checker.check_model(result.model, full_check=True)
    assert result.report.stats["tensor_arrays"] == 1
    assert result.report.stats.get("scan_outputs", 0) == (name == "concat_in_a_loop" and at_o2)
    np.testing.assert_allclose(run_onnx(result.model, {"x": feed}, ["out"])["out"], want, rtol=1e-6)


def test_a_split_into_pieces_of_different_lengths_is_refused_by_name() -> None:
    """Items of different shapes have no dense list: the array stays and is named."""
    tf = pytest.importorskip("tensorflow")
    from tests.runtime.test_tensor_array_kernels import _split_concat_closed

    data, _, _ = _tf1_graph(tf, _split_concat_closed)
    with pytest.raises(UnsupportedOpError, match=r"TensorArrayV3.*TensorArrayConcatV3"):
        export_with_report(load_graph_bytes(data), ["x"], ["out"])


def _tf2_split_concat(tf, x):
    """A TF2 TensorArray split into rows and concatenated back: TensorListSplit and TensorListConcatV2."""
    array = tf.TensorArray(tf.float32, size=3, infer_shape=False, element_shape=tf.TensorShape([None, 4]))
    array = array.split(x * 2.0, [1, 1, 1])
    return array.concat() + array.read(1)


def test_tf2_split_and_concat_export_and_match_tf() -> None:
    tf = pytest.importorskip("tensorflow")
    data, x, out, feed, want = _tf2_frozen(tf, _tf2_split_concat)
    assert {"TensorListSplit", "TensorListConcatV2"} <= {op.type for op in load_graph_bytes(data)}
    for graph in (load_graph_bytes(data), run_pipeline(load_graph_bytes(data), preset_pipeline(2)[0], [x], [out]).graph):
        model = export_with_report(graph, [x], [out]).model
        onnx.checker.check_model(model, full_check=True)
        np.testing.assert_array_equal(run_onnx(model, {x: feed}, [out])[out], want)


def test_a_tf2_split_into_pieces_of_different_lengths_is_refused_by_name() -> None:
    from tests.backends.test_onnx_export import Builder

    b = Builder()
    x = b.input("x", [3, 4])
    pieces = b("TensorListSplit", x, b.const(np.asarray([-1, 4], np.int32)), b.const(np.asarray([1, 2], np.int64)),
               element_dtype=DType.FLOAT, shape_type=DType.INT32, name="pieces")
    b("TensorListLength", pieces, name="count")
    with pytest.raises(UnsupportedOpError, match=r"'TensorListSplit' \(node 'pieces'\).*pieces of one length.*\[1, 2\]"):
        export_with_report(b.graph, ["x"], ["count"])
