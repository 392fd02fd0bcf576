"""TF1 while frames and conds as ONNX Loop/If, and TensorLists as dense tensors, under onnxruntime.

The fixtures carry TF's own outputs; random-input checks compare with gttc's
interpreter, which runs the TF1 frames directly (tests/runtime/test_tensor_list.py
checks it against TF).
"""
from __future__ import annotations

from collections import Counter
from typing import Callable

import numpy as np
import onnx
import pytest

from compiler.backends.onnx import UnsupportedOpError, export, export_with_report
from compiler.frontends.graphdef import load_graph
from compiler.ir.dtypes import DType
from compiler.ir.tensor import Tensor
from compiler.runtime.interpreter import run_graph
from compiler.runtime.onnx_runner import run_onnx
from tests.backends.test_onnx_export import Builder, assert_matches_tf, optimized
from tests.conftest import load_model_fixture
from tests.oracle import tf1_control_flow_graph

MAX_REL = 1e-4
F32 = DType.FLOAT


def op_types(model: onnx.ModelProto) -> Counter:
    """Every node's type, subgraphs included."""
    found: Counter = Counter()
    stack = [model.graph]
    while stack:
        graph = stack.pop()
        for node in graph.node:
            found[node.op_type] += 1
            stack.extend(attr.g for attr in node.attribute if attr.type == onnx.AttributeProto.GRAPH)
    return found


def exported(name: str, at_o2: bool = False) -> tuple[object, onnx.ModelProto]:
    model = load_model_fixture(name)
    graph = optimized(model) if at_o2 else load_graph(model.path)
    onnx_model = export(graph, model.inputs, model.outputs)
    onnx.checker.check_model(onnx_model, full_check=True)
    return model, onnx_model


@pytest.mark.parametrize("at_o2", [False, True])
def test_tf1_cond_and_while_become_if_and_loop_and_match_tf(at_o2: bool):
    model, onnx_model = exported("tf1_control_flow", at_o2)
    types = op_types(onnx_model)
    assert types["If"] == 2 and types["Loop"] == 1
    assert_matches_tf(model, onnx_model)


@pytest.mark.parametrize("at_o2", [False, True])
def test_keras_rnn_exports_as_four_loops_without_sequences_and_matches_tf(at_o2: bool, monkeypatch):
    """The Loop form, with the LSTM/GRU matcher off (its fused form: test_onnx_recurrent.py).  At -O2
    each loop's trip count is a constant, its body reads step t of the input and its carried values
    keep one static shape (SimpleRNN's list of outputs, written in place, too), so each is a Scan."""
    from compiler.backends.onnx import ops_tf1_control

    monkeypatch.setattr(ops_tf1_control, "lower_recurrent", lambda ctx, frame: False)
    model, onnx_model = exported("keras_rnn", at_o2)
    types = op_types(onnx_model)
    assert types["Loop"] + types["Scan"] == 4  # LSTM, GRU forward and backward, SimpleRNN
    assert types["Scan"] == (4 if at_o2 else 0)
    assert not [t for t in types if t.startswith("Sequence") or t.startswith("TensorList")]
    assert_matches_tf(model, onnx_model)


def test_keras_rnn_matches_the_interpreter_on_other_inputs():
    model, onnx_model = exported("keras_rnn")
    graph = load_graph(model.path)
    shape = model.feeds[model.inputs[0]].shape
    for seed in range(3):
        feed = {model.inputs[0]: np.random.RandomState(seed).uniform(-3, 3, shape).astype(np.float32)}
        want = run_graph(graph, feed, model.outputs)[model.outputs[0]]
        got = run_onnx(onnx_model, feed, model.outputs)[model.outputs[0]]
        assert np.max(np.abs(got - want) / np.maximum(np.abs(want), 1e-3)) <= MAX_REL


def _list_graph() -> tuple[Builder, list]:
    """FromTensor/GetItem/Gather/Length/ElementShape, and Reserve/SetItem/Stack, outside any loop."""
    b = Builder()
    x = b.input("x", [4, 2, 3])
    shape = b.const(np.asarray([2, 3], np.int32))
    items = b("TensorListFromTensor", x, shape, element_dtype=F32, shape_type=DType.INT32)
    second = b("TensorListGetItem", items, b.const(np.int32(1)), shape, element_dtype=F32)
    picked = b("TensorListGather", items, b.const(np.asarray([3, 0], np.int32)), shape, element_dtype=F32)
    length = b("TensorListLength", items)
    element = b("TensorListElementShape", items, shape_type=DType.INT64)
    reserved = b("TensorListReserve", shape, b.const(np.int32(3)), element_dtype=F32, shape_type=DType.INT32)
    written = b("TensorListSetItem", reserved, b.const(np.int32(2)), b("Tanh", second), element_dtype=F32)
    stacked = b("TensorListStack", written, shape, element_dtype=F32, num_elements=3)
    return b, [second, picked, length, element, stacked]


def test_tensor_list_ops_lower_to_dense_tensors_and_match_the_interpreter():
    b, outputs = _list_graph()
    names = [v.op.name for v in outputs]
    onnx_model = export(b.graph, ["x"], names)
    onnx.checker.check_model(onnx_model, full_check=True)
    feed = {"x": np.random.RandomState(0).standard_normal([4, 2, 3]).astype(np.float32)}
    want = run_graph(b.graph, feed, names)
    got = run_onnx(onnx_model, feed, names)
    for name in names:
        assert got[name].dtype == want[name].dtype, name
        np.testing.assert_allclose(got[name], want[name], rtol=1e-6, err_msg=name)


@pytest.mark.parametrize("opset", [13, 17])
def test_tensor_list_resize_cuts_or_pads_with_zero_items(opset):
    b = Builder()
    x, size = b.input("x", [4, 2, 3]), b.input("size", [], DType.INT32)
    shape = b.const(np.asarray([2, 3], np.int32))
    items = b("TensorListFromTensor", x, shape, element_dtype=F32, shape_type=DType.INT32)
    outputs = [b("TensorListStack", b("TensorListResize", items, n), shape, element_dtype=F32)
               for n in (b.const(np.int32(2)), b.const(np.int32(6)), size)]
    names = [v.op.name for v in outputs]
    onnx_model = export(b.graph, ["x", "size"], names, opset=opset)
    onnx.checker.check_model(onnx_model, full_check=True)
    for n in (0, 4, 7):
        feed = {"x": np.random.RandomState(n).standard_normal([4, 2, 3]).astype(np.float32), "size": np.int32(n)}
        want, got = run_graph(b.graph, feed, names), run_onnx(onnx_model, feed, names)
        for name in names:
            np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    assert got[names[2]].shape == (7, 2, 3) and not got[names[2]][4:].any()


def test_a_reserved_list_with_an_unknown_dimension_takes_the_written_items_shape():
    b = Builder()
    x = b.input("x", [None, 3])
    shape = b.const(np.asarray([-1, 3], np.int32))
    lst = b("TensorListReserve", shape, b.const(np.int32(3)), element_dtype=F32, shape_type=DType.INT32)
    lst = b("TensorListSetItem", lst, b.const(np.int32(1)), x, element_dtype=F32)
    out = b("TensorListStack", b("TensorListSetItem", lst, b.const(np.int32(0)), b("Exp", x), element_dtype=F32),
            shape, element_dtype=F32, name="stacked")
    onnx_model = export(b.graph, ["x"], [out.op.name])
    onnx.checker.check_model(onnx_model, full_check=True)
    for batch in (1, 4):
        feed = {"x": np.random.RandomState(batch).standard_normal([batch, 3]).astype(np.float32)}
        np.testing.assert_allclose(run_onnx(onnx_model, feed, ["stacked"])["stacked"],
                                   run_graph(b.graph, feed, ["stacked"])["stacked"], rtol=1e-6)


def _unknown_rank_list(b: Builder, *items) -> object:
    """A list reserved with an unknown element rank (as TF2 freezes a TensorArray), `items` set at
    0, 1, ..., stacked."""
    unknown = b.const(np.int32(-1))
    lst = b("TensorListReserve", unknown, b.const(np.int32(len(items))), name="reserve", element_dtype=F32,
            shape_type=DType.INT32)
    for i, item in enumerate(items):
        lst = b("TensorListSetItem", lst, b.const(np.int32(i)), item, element_dtype=F32)
    return b("TensorListStack", lst, unknown, element_dtype=F32, name="stacked")


def test_a_reserve_of_unknown_rank_takes_the_rank_of_what_is_written():
    b = Builder()
    x = b.input("x", [2, 3])
    _unknown_rank_list(b, x, b("Exp", x))
    result = export_with_report(b.graph, ["x"], ["stacked"])
    onnx.checker.check_model(result.model, full_check=True)
    assert result.report.stats["list_element_shapes"] == 1
    feed = {"x": np.random.RandomState(0).standard_normal([2, 3]).astype(np.float32)}
    np.testing.assert_allclose(run_onnx(result.model, feed, ["stacked"])["stacked"],
                               run_graph(b.graph, feed, ["stacked"])["stacked"], rtol=1e-6)


def test_a_reserve_of_unknown_rank_whose_items_disagree_is_refused_by_name():
    b = Builder()
    _unknown_rank_list(b, b.input("x", [2, 3]), b.input("y", [6]))
    with pytest.raises(UnsupportedOpError, match=r"'TensorListReserve' \(node 'reserve'\).*element rank"):
        export(b.graph, ["x", "y"], ["stacked"])


@pytest.mark.parametrize("create", ["EmptyTensorList", "TensorListReserve"])
def test_writes_past_the_end_of_a_growing_list_pad_it_with_zero_items(create):
    """resize_if_index_out_of_bounds: a list of unknown batch grows to each index written."""
    b = Builder()
    x = b.input("x", [None, 3])
    shape = b.const(np.asarray([-1, 3], np.int32))
    second = b.const(np.int32(1))
    lst = b(create, shape, second, element_dtype=F32, shape_type=DType.INT32)
    for index, item in ((2, x), (0, b("Exp", x)), (4, b("Neg", x))):
        lst = b("TensorListSetItem", lst, b.const(np.int32(index)), item, element_dtype=F32,
                resize_if_index_out_of_bounds=True)
    b("TensorListStack", lst, shape, element_dtype=F32, name="stacked")
    b("TensorListLength", lst, name="length")
    onnx_model = export(b.graph, ["x"], ["stacked", "length"])
    onnx.checker.check_model(onnx_model, full_check=True)
    for batch in (1, 4):
        feed = {"x": np.random.RandomState(batch).standard_normal([batch, 3]).astype(np.float32)}
        want, got = run_graph(b.graph, feed, ["stacked", "length"]), run_onnx(onnx_model, feed, ["stacked", "length"])
        assert got["stacked"].shape == (5, batch, 3) and not got["stacked"][[1, 3]].any()
        for name in want:
            np.testing.assert_allclose(got[name], want[name], rtol=1e-6, err_msg=name)


def test_growing_writes_at_known_indices_outside_loops_are_concats():
    """An unrolled growing TensorArray: each write's index and the list's length are known at export,
    so appending is a Concat (from an empty list, the item alone), a gap is an initializer of zero items,
    and a write inside the list a ScatterND; only a gap too big for an initializer pads at run time."""
    b = Builder()
    x = b.input("x", [2, 3])
    shape = b.const(np.asarray([2, 3], np.int32))
    lst = b("EmptyTensorList", shape, b.const(np.int32(-1)), element_dtype=F32, shape_type=DType.INT32)
    for index, item in ((0, x), (1, b("Exp", x)), (3, b("Neg", x)), (1, b("Tanh", x))):
        lst = b("TensorListSetItem", lst, b.const(np.int32(index)), item, element_dtype=F32,
                resize_if_index_out_of_bounds=True)
    b("TensorListStack", lst, shape, element_dtype=F32, name="stacked")
    b("TensorListLength", lst, name="length")
    far = b("TensorListSetItem", lst, b.const(np.int32(1000)), x, element_dtype=F32, resize_if_index_out_of_bounds=True)
    b("TensorListLength", far, name="far_length")
    names = ["stacked", "length", "far_length"]
    onnx_model = export(b.graph, ["x"], names)
    onnx.checker.check_model(onnx_model, full_check=True)
    types = op_types(onnx_model)
    assert types["Concat"] == 2 + 2 and types["ScatterND"] == 2 and types["Expand"] == 1  # the far write: Concat x2
    feed = {"x": np.random.RandomState(0).standard_normal([2, 3]).astype(np.float32)}
    want, got = run_graph(b.graph, feed, names), run_onnx(onnx_model, feed, names)
    assert got["stacked"].shape == (4, 2, 3) and not got["stacked"][2].any() and got["far_length"] == 1001
    for name in names:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-6, err_msg=name)


@pytest.mark.tf
def test_keras_rnn_frozen_with_a_dynamic_batch_matches_tf(tmp_path):
    tf = pytest.importorskip("tensorflow")
    keras = pytest.importorskip("keras")
    from tools.make_fixtures import freeze_keras, seed_everything

    seed_everything(5)
    inputs = keras.Input((4, 3))
    hidden = keras.layers.LSTM(5, return_sequences=True)(inputs)
    hidden = keras.layers.Bidirectional(keras.layers.GRU(4, return_sequences=True))(hidden)
    model = keras.Model(inputs, keras.layers.SimpleRNN(3)(hidden))
    graph_def, names, outputs = freeze_keras(model, (4, 3), batch=None)
    path = tmp_path / "rnn.pb"
    path.write_bytes(graph_def.SerializeToString())
    onnx_model = export(load_graph(path), names, outputs)
    onnx.checker.check_model(onnx_model, full_check=True)
    with tf.Graph().as_default() as graph:
        tf.graph_util.import_graph_def(graph_def, name="")
        with tf.compat.v1.Session(graph=graph) as session:
            for batch in (1, 3):
                feed = np.random.RandomState(batch).uniform(-1, 1, [batch, 4, 3]).astype(np.float32)
                want = session.run(f"{outputs[0]}:0", {f"{names[0]}:0": feed})
                got = run_onnx(onnx_model, {names[0]: feed}, outputs)[outputs[0]]
                assert np.max(np.abs(got - want) / np.maximum(np.abs(want), 1e-3)) <= MAX_REL


def _with_known_predicate(graph, predicate: str, truth: bool) -> None:
    """Every use of `predicate` reads a constant instead (what static shapes give an exporter)."""
    tensor = Tensor.from_numpy(np.asarray(truth))
    known = graph.create_op("Const", graph.unique_name("known"), attrs={"dtype": DType.BOOL, "value": tensor})
    graph.op(predicate).results[0].replace_all_uses_with(known.results[0])


@pytest.mark.parametrize("truth", [True, False])
@pytest.mark.parametrize("fixture, predicate", [("tf1_control_flow", "pred_pos"),
                                                ("tf2_functional_control_flow", "Greater")])
def test_a_cond_on_a_predicate_known_at_export_is_its_taken_branch(fixture: str, predicate: str, truth: bool):
    """No If: onnxruntime type-checks both branches, and the one TF never runs may not fit (Keras'
    associative_scan builds a cond on a traced dimension whose other branch concatenates 3 with 4)."""
    model = load_model_fixture(fixture)
    graph = load_graph(model.path)
    ifs = op_types(export(graph, model.inputs, model.outputs))["If"]
    _with_known_predicate(graph, predicate, truth)
    report = export_with_report(graph, model.inputs, model.outputs)
    onnx.checker.check_model(report.model, full_check=True)
    folded = ifs - op_types(report.model)["If"]
    assert folded >= 1 and report.report.stats["conds_with_known_predicate"] == folded
    want = run_graph(graph, model.feeds, model.outputs)
    got = run_onnx(report.model, model.feeds, model.outputs)
    for name in model.outputs:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6)


def test_a_read_merge_value_index_is_refused_by_name():
    model = load_model_fixture("tf1_control_flow")
    graph = load_graph(model.path)
    merge = graph.op("cond_pos/Merge")
    graph.create_op("Identity", "peek", [merge.results[1]], {"T": DType.INT32})
    with pytest.raises(UnsupportedOpError, match=r"'Merge' \(node 'cond_pos/Merge'\).*value_index"):
        export(graph, model.inputs, model.outputs + ["peek"])


def test_a_loop_switch_not_on_its_loop_cond_is_refused_by_name():
    model = load_model_fixture("tf1_control_flow")
    graph = load_graph(model.path)
    loop_switches = [op for op in graph if op.type == "Switch" and op.operands[1].op.type == "LoopCond"]
    switch = loop_switches[0]
    switch.set_operand(1, graph.op("pred_pos").results[0])
    with pytest.raises(UnsupportedOpError, match=rf"node '{switch.name}'"):
        export(graph, model.inputs, model.outputs)


def _loops_in_a_loop(tf, x):
    """A while loop in a while body, with a cond in the inner body."""
    def inner(j, a):
        return j + 1, tf.cond(tf.reduce_sum(a) > 3.0, lambda: a * 0.5, lambda: a + x)

    def outer(i, acc):
        _, a = tf.compat.v1.while_loop(lambda j, a: j < 3, inner, [tf.constant(0), acc])
        return i + 1, tf.tanh(a)

    return tf.compat.v1.while_loop(lambda i, acc: i < 4, outer, [tf.constant(0), tf.zeros([2, 3])])[1], 2


def _loop_in_a_cond(tf, x):
    """A while loop in one branch of a cond."""
    def looped():
        return tf.compat.v1.while_loop(lambda j, a: j < 3, lambda j, a: (j + 1, tf.tanh(a + x)),
                                       [tf.constant(0), x])[1]

    return tf.compat.v1.cond(tf.reduce_sum(x) > 0.0, looped, lambda: x * 2.0), 1


def _growing_loop(tf, x):
    """A loop variable whose shape changes every iteration (shape_invariants [None, 3])."""
    def body(i, a):
        return i + 1, tf.concat([a, tf.sin(a[-1:]) + x], 0)

    _, grown = tf.compat.v1.while_loop(lambda i, a: i < 3, body, [tf.constant(0), x],
                                       shape_invariants=[tf.TensorShape([]), tf.TensorShape([None, 3])])
    return tf.reduce_sum(grown, 0, keepdims=True) + tf.reduce_sum(x), 1


def export_tf1_graph(tf, build: Callable[[], object], tmp_path, inputs: list[str],
                     outputs: list[str]) -> tuple[object, object, onnx.ModelProto]:
    """A graph `build` makes with TF1 control flow (Switch/Merge, Enter/Exit frames), as a file
    gttc loads and exports: (the TF graph, what `build` returned, the fully checked ONNX model)."""
    with tf1_control_flow_graph(tf) as graph:
        built = build()
    path = tmp_path / "tf1_graph.pb"
    path.write_bytes(graph.as_graph_def().SerializeToString())
    onnx_model = export(load_graph(path), inputs, outputs)
    onnx.checker.check_model(onnx_model, full_check=True)
    return graph, built, onnx_model


@pytest.mark.tf
@pytest.mark.parametrize("build", [_loops_in_a_loop, _loop_in_a_cond, _growing_loop])
def test_nested_tf1_regions_match_tf(build, tmp_path):
    tf = pytest.importorskip("tensorflow")

    def body():
        x = tf.compat.v1.placeholder(tf.float32, [1, 3] if build is _growing_loop else [2, 3], name="x")
        out, loops = build(tf, x)
        tf.identity(out, name="out")
        return x, loops

    graph, (x, loops), onnx_model = export_tf1_graph(tf, body, tmp_path, ["x"], ["out"])
    assert op_types(onnx_model)["Loop"] == loops
    for sign in (1.0, -1.0):  # both branches of a cond on the input's sum
        feed = sign * np.abs(np.random.RandomState(0).uniform(-1, 1, x.shape.as_list())).astype(np.float32)
        with tf.compat.v1.Session(graph=graph) as session:
            want = session.run("out:0", {"x:0": feed})
        got = run_onnx(onnx_model, {"x": feed}, ["out"])["out"]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.tf
def test_a_loop_variable_only_the_condition_reads_is_carried(tmp_path):
    """`done` is computed by the body and read only by the condition.  Once -O2 strips its unread
    Switch and Exit (TF's freezing prunes them the same way in tf-models-official's NMS loops), its
    Merge has no Switch reader; it is still carried, so the next test sees the body's value."""
    tf = pytest.importorskip("tensorflow")
    from compiler.passes import run_pipeline
    from tests.backends.test_onnx_export import o2_pipeline

    def body():
        x = tf.compat.v1.placeholder(tf.float32, [2, 3], name="x")

        def step(i, done, a):
            a = tf.tanh(a + x)
            return i + 1, tf.logical_or(i + 1 >= 6, tf.reduce_max(a) > 0.95), a

        _, _, out = tf.compat.v1.while_loop(lambda i, done, a: tf.logical_not(done), step,
                                            [tf.constant(0), tf.constant(False), tf.zeros([2, 3])])
        tf.identity(out, name="out")

    graph, _, _ = export_tf1_graph(tf, body, tmp_path, ["x"], ["out"])
    stripped = run_pipeline(load_graph(tmp_path / "tf1_graph.pb"), o2_pipeline(), ["x"], ["out"]).graph
    lone = [op for op in stripped if op.type == "Merge" and all(u.type != "Switch" for u in op.users)]
    assert len(lone) == 1
    onnx_model = export(stripped, ["x"], ["out"])
    onnx.checker.check_model(onnx_model, full_check=True)
    for scale in (0.1, 1.0):  # stops on the count, then on the value
        feed = scale * np.random.RandomState(1).uniform(-1, 1, (2, 3)).astype(np.float32)
        with tf.compat.v1.Session(graph=graph) as session:
            want = session.run("out:0", {"x:0": feed})
        np.testing.assert_allclose(run_onnx(onnx_model, {"x": feed}, ["out"])["out"], want, rtol=1e-5, atol=1e-6)


def test_a_reserve_whose_count_is_not_a_scalar_is_not_a_crash():
    """Fuzz case (seed 7, case 9893): a TensorListReserve's num_elements mutated into a vector.  TF
    refuses it at run time; the shape refinement must treat the count as unknown, not crash on it."""
    from compiler.errors import GttcError
    from compiler.ir.tensor import Tensor

    model = load_model_fixture("keras_rnn")
    graph = load_graph(model.path)
    reserve = next(op for op in graph if op.type == "TensorListReserve")
    count = reserve.operands[1].op
    count.attrs["value"] = Tensor.from_numpy(np.asarray([4, 4], np.int32))
    try:
        export(graph, model.inputs, model.outputs)
    except GttcError:
        pass


@pytest.mark.tf
@pytest.mark.parametrize("at_o2", [False, True])
def test_batch_norm_layers_on_one_shapeless_training_flag_match_tf_both_ways(tmp_path, at_o2: bool):
    """A TF1 model's batch norms each cond on one `is_training` placeholder declared without a shape
    (musicnn's layers): the flag is a scalar because Switches read it; the training branch
    normalises by the batch's statistics, whose outputs TF reports too.  At -O2, with the
    Identities gone, every Switch reads the placeholder itself: still two conds (two Ifs), though
    the first one's result feeds the second's Switches.  The branches read the conv's NCHW result
    as stored and hand theirs back NCHW: the only Transposes are the input's and the output's."""
    tf = pytest.importorskip("tensorflow")
    rng = np.random.RandomState(9)

    def batch_norm(x, training, channels: int):
        scale, offset = rng.uniform(0.5, 1.5, channels).astype(np.float32), rng.randn(channels).astype(np.float32)
        mean, variance = rng.randn(channels).astype(np.float32), rng.uniform(0.5, 2, channels).astype(np.float32)
        return tf.compat.v1.cond(
            training,
            lambda: tf.compat.v1.nn.fused_batch_norm(x, scale, offset, epsilon=1e-3, is_training=True),
            lambda: tf.compat.v1.nn.fused_batch_norm(x, scale, offset, mean, variance, epsilon=1e-3, is_training=False))

    def body():
        x = tf.compat.v1.placeholder(tf.float32, [2, 5, 5, 3], name="x")
        training = tf.compat.v1.placeholder(tf.bool, name="training")
        h, _, _ = batch_norm(tf.nn.conv2d(x, rng.randn(3, 3, 3, 4).astype(np.float32), 1, "SAME"), training, 4)
        out, batch_mean, batch_variance = batch_norm(tf.nn.relu(h), training, 4)
        for name, value in (("out", out), ("batch_mean", batch_mean), ("batch_variance", batch_variance)):
            tf.identity(value, name=name)
        return x

    outputs = ["out", "batch_mean", "batch_variance"]
    graph, x, onnx_model = export_tf1_graph(tf, body, tmp_path, ["x", "training"], outputs)
    if at_o2:
        from compiler.passes import run_pipeline
        from compiler.passes.levels import LEVELS

        ir = run_pipeline(load_graph(tmp_path / "tf1_graph.pb"), LEVELS[2].pipeline, ["x", "training"], outputs).graph
        assert {op.operands[1].op.name for op in ir if op.type == "Switch"} == {"training"}
        onnx_model = export(ir, ["x", "training"], outputs)
        onnx.checker.check_model(onnx_model, full_check=True)
    assert op_types(onnx_model)["If"] >= 2
    assert op_types(onnx_model)["Transpose"] == 2
    assert [d.dim_value for d in onnx_model.graph.input[1].type.tensor_type.shape.dim] == []
    feed = rng.uniform(-1, 1, (2, 5, 5, 3)).astype(np.float32)
    for training in (False, True):
        with tf.compat.v1.Session(graph=graph) as session:
            want = session.run([f"{name}:0" for name in outputs], {"x:0": feed, "training:0": training})
        got = run_onnx(onnx_model, {"x": feed, "training": np.array(training)}, outputs)
        for name, expected in zip(outputs, want):
            np.testing.assert_allclose(got[name], expected, rtol=1e-4, atol=1e-5, err_msg=name)


@pytest.mark.tf
def test_two_conds_on_one_predicate_reading_one_tensor_export_at_o2(tmp_path):
    """Longformer's layers each cond on whether any token attends globally, and each reads the
    layer's input: two Switches with the same data and predicate.  -O2 keeps both (one shared
    Switch would make the second cond's branch a reader of the first cond's region, and the
    export could not order them)."""
    tf = pytest.importorskip("tensorflow")
    from compiler.passes import run_pipeline
    from compiler.passes.levels import LEVELS

    def body():
        x = tf.compat.v1.placeholder(tf.float32, [2, 3], name="x")
        flag = tf.reduce_any(x > 0.5)
        y = tf.compat.v1.cond(flag, lambda: x * 2.0, lambda: x - 1.0)
        tf.identity(tf.compat.v1.cond(flag, lambda: x + y, lambda: x * y), name="out")
        return x

    graph, x, _ = export_tf1_graph(tf, body, tmp_path, ["x"], ["out"])
    raw = load_graph(tmp_path / "tf1_graph.pb")
    on_x = sum(op.type == "Switch" and op.operands[0].op.name == "x" for op in raw)
    ir = run_pipeline(raw, LEVELS[2].pipeline, ["x"], ["out"]).graph
    assert on_x > 1 and sum(op.type == "Switch" and op.operands[0].op.name == "x" for op in ir) == on_x
    onnx_model = export(ir, ["x"], ["out"])
    onnx.checker.check_model(onnx_model, full_check=True)
    assert op_types(onnx_model)["If"] == 2
    for feed in (np.full((2, 3), 0.25, np.float32), np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)):
        with tf.compat.v1.Session(graph=graph) as session:
            want = session.run("out:0", {"x:0": feed})
        np.testing.assert_allclose(run_onnx(onnx_model, {"x": feed}, ["out"])["out"], want, rtol=1e-6)
