"""The ONNX backend: every fixture exports, passes the full checker, runs in onnxruntime
and matches TensorFlow; layouts leave only edge Transposes; errors name op and node."""
from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from compiler.analysis import analyze, reachable_ops, topological_order
from compiler.backends.onnx import (
    MAX_OPSET, MIN_OPSET, OnnxExportError, UnsupportedOpError, export, export_with_report, layout,
    supported_op_types,
)
from compiler.frontends.graphdef import load_graph
from compiler.ir.dtypes import DType
from compiler.ir.graph import Graph, Value
from compiler.ir.op_registry import op_def
from compiler.ir.parser import parse_graph
from compiler.ir.shapes import Shape
from compiler.ir.tensor import Tensor
from compiler.passes import run_pipeline
from compiler.passes.levels import LEVELS
from compiler.runtime.interpreter import Interpreter
from compiler.runtime.onnx_runner import run_onnx
from compiler.runtime.verify import compare_outputs
from tests.conftest import Model, build_big_fixture, load_model_fixture

MAX_REL = 1e-4
MIN_COSINE = 1 - 1e-6
EXPORTABLE = ["devices_gather", "keras_grouped_calls", "keras_mobilenet_v2_small", "keras_small_cnn", "resize_pad_conv",
              "tf1_fused_bn", "tf1_old_batch_norm", "tf2_functional_control_flow"]


def o2_pipeline() -> str:
    """gttc's -O2 level as a pipeline string."""
    return LEVELS[2].pipeline


def optimized(model: Model):
    return run_pipeline(load_graph(model.path), o2_pipeline(), model.inputs, model.outputs).graph


def assert_matches_tf(model: Model, onnx_model: onnx.ModelProto) -> None:
    got = run_onnx(onnx_model, model.feeds, model.outputs)
    report = compare_outputs(model.expected, got)
    for out in report.outputs:
        assert out.shape == model.expected[out.name].shape, out.note
        assert out.max_rel <= MAX_REL, f"{out.name}: max rel err {out.max_rel:.2e}"
        assert out.cosine >= MIN_COSINE, f"{out.name}: cosine {out.cosine}"


# -- every small fixture -----------------------------------------------------------------
def test_small_fixture_exports_checks_and_matches_tf(small_model: Model):
    graph = load_graph(small_model.path)
    if small_model.name == "keras_grouped_calls":  # exports after -O2's inline_function_calls
        with pytest.raises(UnsupportedOpError, match=r"'StatefulPartitionedCall'.*inline function calls first"):
            export(graph, small_model.inputs, small_model.outputs)
        return
    model = export(graph, small_model.inputs, small_model.outputs)
    onnx.checker.check_model(model, full_check=True)
    assert [i.name for i in model.graph.input] == small_model.inputs
    assert [o.name for o in model.graph.output] == small_model.outputs
    assert_matches_tf(small_model, model)


@pytest.mark.parametrize("name", EXPORTABLE)
def test_small_fixture_at_o2_matches_tf(name: str):
    model = load_model_fixture(name)
    exported = export(optimized(model), model.inputs, model.outputs)
    onnx.checker.check_model(exported, full_check=True)
    assert_matches_tf(model, exported)


def test_fused_pad_and_resize_convs_lower():
    """-O2 turns resize_pad_conv's MirrorPad/Resize+Conv chains into GTT's fused ops."""
    model = load_model_fixture("resize_pad_conv")
    graph = optimized(model)
    fused = {op.type for op in graph} & {"FusedPadConv2D", "FusedResizeAndPadConv2D"}
    assert fused == {"FusedPadConv2D", "FusedResizeAndPadConv2D"}
    resizes = sum(op.type in ("ResizeBilinear", "FusedResizeAndPadConv2D") for op in graph)
    result = export_with_report(graph, model.inputs, model.outputs)
    counts = result.report.op_counts
    assert counts["Conv"] == 6 and counts["Resize"] == resizes
    assert_matches_tf(model, result.model)


@pytest.mark.parametrize("opset", [MIN_OPSET, 15, 18, 19, MAX_OPSET])
@pytest.mark.parametrize("name", ["keras_small_cnn", "resize_pad_conv", "tf2_functional_control_flow"])
def test_other_opsets(name: str, opset: int):
    model = load_model_fixture(name)
    exported = export(load_graph(model.path), model.inputs, model.outputs, opset=opset)
    assert [o.version for o in exported.opset_import if o.domain in ("", "ai.onnx")] == [opset]
    assert_matches_tf(model, exported)


def test_reduce_axes_move_from_attribute_to_input_at_opset_18():
    b = Builder()
    out = b("Mean", b.input("x", [2, 3, 4]), b.const(np.asarray([1], np.int32)), Tidx=DType.INT32)
    for opset, attrs, inputs in ((17, ["axes", "keepdims"], 1), (18, ["keepdims"], 2)):
        mean = next(n for n in export(b.graph, ["x"], [out.op.name], opset=opset).graph.node
                    if n.op_type == "ReduceMean")
        assert sorted(a.name for a in mean.attribute) == sorted(attrs)
        assert len(mean.input) == inputs


def test_spatial_mean_and_max_of_a_cnn_are_global_pools():
    """onnxruntime keeps GlobalAveragePool/GlobalMaxPool in its blocked layout; ReduceMean leaves it."""
    model = load_model_fixture("keras_small_cnn")
    exported = export(load_graph(model.path), model.inputs, model.outputs)
    types = Counter(n.op_type for n in exported.graph.node)
    assert types["GlobalAveragePool"] == 1 and not types["ReduceMean"]
    b = Builder()
    x = b.input("x", [1, 5, 6, 3])
    image = b("Conv2D", x, b.const(np.ones((1, 1, 3, 4), np.float32)), strides=[1, 1, 1, 1], padding="VALID")
    axes = b.const(np.asarray([1, 2], np.int32))
    outputs = [b("Max", image, axes, keep_dims=keep, Tidx=DType.INT32) for keep in (False, True)]
    names = [v.op.name for v in outputs]
    exported = export(b.graph, ["x"], names)
    assert Counter(n.op_type for n in exported.graph.node)["GlobalMaxPool"] == 1  # one pool read both ways
    feed = {"x": np.random.default_rng(1).standard_normal((1, 5, 6, 3)).astype(np.float32)}
    want, got = Interpreter(b.graph).run(feed, names), run_onnx(exported, feed, names)
    for name in names:
        np.testing.assert_array_equal(got[name], want[name])


def test_kept_dims_reductions_over_size_one_axes_are_their_input():
    """A 1x1 image's global pool (LeViT's head at 64 pixels) is no node; other axes still reduce."""
    b = Builder()
    x = b.input("x", [1, 1, 1, 3])
    image = b("Conv2D", x, b.const(np.ones((1, 1, 3, 4), np.float32)), strides=[1, 1, 1, 1], padding="VALID")
    spatial = b.const(np.asarray([1, 2], np.int32))
    outputs = [b(kind, image, spatial, keep_dims=True, Tidx=DType.INT32) for kind in ("Mean", "Max", "Prod")]
    outputs.append(b("Any", b("Greater", image, b.const(np.float32(0))), spatial, keep_dims=True, Tidx=DType.INT32))
    outputs.append(b("Sum", image, b.const(np.asarray([2, 3], np.int32)), keep_dims=True, Tidx=DType.INT32))
    names = [v.name for v in outputs]
    result = export_with_report(b.graph, ["x"], names)
    counts = result.report.op_counts
    assert "GlobalAveragePool" not in counts and "GlobalMaxPool" not in counts and counts["ReduceSum"] == 1
    feed = {"x": np.random.default_rng(3).standard_normal((1, 1, 1, 3)).astype(np.float32)}
    want, got = Interpreter(b.graph).run(feed, names), run_onnx(result.model, feed, names)
    for name in names:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-6)
        assert got[name].shape == want[name].shape


def test_parts_read_in_tf_order_are_split_after_one_conversion():
    """BoTNet's query, key and value: one convolution split in three, each reshaped in TF order.
    The convolution's result is converted once, before the Split, not once per part."""
    rng = np.random.default_rng(14)
    b = Builder()
    x = b.input("x", [1, 4, 4, 3])
    qkv = b("Conv2D", x, b.const(_weights(rng, 1, 1, 3, 6)), strides=[1, 1, 1, 1], padding="VALID")
    parts = b("Split", b.const(np.int32(3)), qkv, num_split=3)
    outputs = [b("Reshape", part, b.const(np.asarray([1, 16, 2], np.int32)), Tshape=DType.INT32) for part in parts]
    names = [v.name for v in outputs]
    result = export_with_report(b.graph, ["x"], names)
    assert result.report.op_counts["Transpose"] == 2  # the input to NCHW, the conv's result back
    feed = {"x": rng.standard_normal((1, 4, 4, 3)).astype(np.float32)}
    want, got = Interpreter(b.graph).run(feed, names), run_onnx(result.model, feed, names)
    for name in names:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6)


def test_an_add_read_in_tf_order_converts_only_its_permuted_operand():
    """An add of a transposed tensor and a TF-order one, reshaped after: computing in TF order
    converts one operand; computing in the transposed order would convert the other and the sum."""
    b = Builder()
    y, z = b.input("y", [1, 2, 3, 4]), b.input("z", [1, 3, 2, 4])
    swapped = b("Transpose", y, b.const(np.asarray([0, 2, 1, 3], np.int32)), Tperm=DType.INT32)
    out = b("Reshape", b("AddV2", swapped, z), b.const(np.asarray([1, 24], np.int32)), Tshape=DType.INT32)
    result = export_with_report(b.graph, ["y", "z"], [out.name])
    assert result.report.op_counts["Transpose"] == 1
    rng = np.random.default_rng(15)
    feed = {"y": rng.standard_normal((1, 2, 3, 4)).astype(np.float32),
            "z": rng.standard_normal((1, 3, 2, 4)).astype(np.float32)}
    np.testing.assert_array_equal(run_onnx(result.model, feed)[out.name],
                                  Interpreter(b.graph).run(feed, [out.name])[out.name])


def test_a_chain_of_zero_pads_folds_into_the_conv():
    """keras-hub's HGNetV2 stem: ZeroPadding2D, then the conv layer's own (here empty) pad, then a
    VALID conv. Both Pads become the Conv's pads; a Pad another op also reads stays."""
    rng = np.random.default_rng(17)
    b = Builder()
    x = b.input("x", [1, 6, 6, 2])

    def pad(value, amounts, op="Pad"):
        extra = (b.const(np.float32(0)),) if op == "PadV2" else ()
        return b(op, value, b.const(np.asarray(amounts, np.int32)), *extra, Tpaddings=DType.INT32)

    spatial = [[0, 0], [0, 1], [0, 1], [0, 0]]
    twice = pad(pad(x, spatial), [[0, 0]] * 4, "PadV2")
    conv = b("Conv2D", twice, b.const(_weights(rng, 2, 2, 2, 3)), strides=[1, 1, 1, 1], padding="VALID")
    shared = pad(x, spatial)
    pooled = b("MaxPool", shared, ksize=[1, 2, 2, 1], strides=[1, 1, 1, 1], padding="VALID")
    other = b("Conv2D", pad(shared, [[0, 0], [1, 1], [1, 1], [0, 0]]), b.const(_weights(rng, 3, 3, 2, 3)),
              strides=[1, 1, 1, 1], padding="VALID")
    names = [conv.name, pooled.name, other.name]
    result = export_with_report(b.graph, ["x"], names)
    assert result.report.op_counts["Pad"] == 1 and result.report.stats["pad_into_conv"] == 2
    feed = {"x": rng.standard_normal((1, 6, 6, 2)).astype(np.float32)}
    want, got = Interpreter(b.graph).run(feed, names), run_onnx(result.model, feed, names)
    for name in names:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6)


def test_attention_scores_stay_in_tf_order_past_a_permuted_bias():
    """T5's self-attention over a dynamic length: scores = q @ k^T + bias, the bias a Transpose of
    a [q, k, heads] lookup. The softmax's reader, a batched matmul, wants TF order, so the sum is
    computed in it and only the bias is converted; following the bias's order would convert the
    scores, softmax over a middle axis and convert back."""
    b = Builder()
    q, k = b.input("q", [None, 2, None, 4]), b.input("k", [None, 2, None, 4])
    bias = b("ExpandDims", b("Transpose", b.input("bias", [None, None, 2]), b.const(np.asarray([2, 0, 1], np.int32)),
                             Tperm=DType.INT32), b.const(np.int32(0)), Tdim=DType.INT32)
    scores = b("AddV2", b("BatchMatMulV2", q, k, adj_x=False, adj_y=True), bias)
    out = b("BatchMatMulV2", b("Softmax", scores), k, adj_x=False, adj_y=False)
    result = export_with_report(b.graph, ["q", "k", "bias"], [out.name])
    assert result.report.op_counts["Transpose"] == 2  # the bias, and k for its adjoint
    softmax = next(n for n in result.model.graph.node if n.op_type == "Softmax")
    assert [a.i for a in softmax.attribute if a.name == "axis"] in ([], [-1], [3])
    rng = np.random.default_rng(16)
    feed = {"q": rng.standard_normal((2, 2, 5, 4)).astype(np.float32),
            "k": rng.standard_normal((2, 2, 5, 4)).astype(np.float32),
            "bias": rng.standard_normal((5, 5, 2)).astype(np.float32)}
    np.testing.assert_allclose(run_onnx(result.model, feed)[out.name],
                               Interpreter(b.graph).run(feed, [out.name])[out.name], rtol=1e-5, atol=1e-6)


def test_squeeze_excitation_pools_without_reshaping():
    """Keras' SE block: Mean over H, W (dims dropped), Reshape to [N, 1, 1, C], 1x1 conv.  The
    global pool's Squeeze and the reshapes read as a Reshape into the conv's NCHW input, to the
    [N, C, 1, 1] the pool already has: no node at all."""
    rng = np.random.default_rng(12)
    b = Builder()
    x = b.input("x", [1, 5, 6, 3])
    image = b("Conv2D", x, b.const(_weights(rng, 1, 1, 3, 4)), strides=[1, 1, 1, 1], padding="VALID")
    pooled = b("Mean", image, b.const(np.asarray([1, 2], np.int32)), keep_dims=False, Tidx=DType.INT32)
    column = b("Reshape", pooled, b.const(np.asarray([1, 1, 1, 4], np.int32)), Tshape=DType.INT32)
    excite = b("Sigmoid", b("Conv2D", column, b.const(_weights(rng, 1, 1, 4, 4)), strides=[1, 1, 1, 1],
                            padding="VALID"))
    out = b("Mul", image, excite)
    result = export_with_report(b.graph, ["x"], [out.name])
    counts = result.report.op_counts
    assert counts["GlobalAveragePool"] == 1 and "Reshape" not in counts and "Squeeze" not in counts
    feed = {"x": rng.standard_normal((1, 5, 6, 3)).astype(np.float32)}
    np.testing.assert_allclose(run_onnx(result.model, feed)[out.name],
                               Interpreter(b.graph).run(feed, [out.name])[out.name], rtol=1e-5, atol=1e-6)


def test_unsupported_opset_is_refused():
    model = load_model_fixture("keras_small_cnn")
    with pytest.raises(OnnxExportError, match="opset 11 is not supported"):
        export(load_graph(model.path), model.inputs, model.outputs, opset=11)


# -- layout --------------------------------------------------------------------------------
def test_cnn_keeps_a_single_input_transpose():
    model = load_model_fixture("keras_mobilenet_v2_small")
    result = export_with_report(load_graph(model.path), model.inputs, model.outputs)
    transposes = [n for n in result.model.graph.node if n.op_type == "Transpose"]
    assert result.report.transpose_count == 1 and len(transposes) == 1
    assert list(transposes[0].input) == ["input"]
    assert result.report.stats["pad_into_conv"] == 4


def test_transposes_only_at_graph_edges():
    """One input shared by five NCHW branches is converted once; each 4-D output once."""
    model = load_model_fixture("resize_pad_conv")
    result = export_with_report(load_graph(model.path), model.inputs, model.outputs)
    graph = result.model.graph
    transposes = [n for n in graph.node if n.op_type == "Transpose"]
    outputs = {o.name for o in graph.output}
    assert result.report.transpose_count == 1 + len(model.outputs)
    assert sum(list(t.input) == ["input"] for t in transposes) == 1
    assert {t.output[0] for t in transposes if list(t.input) != ["input"]} == outputs


def test_tf_transpose_costs_no_node():
    text = """graph {
  %x = Placeholder() {dtype = f32, shape = shape<1,4,4,3>} : f32[1,4,4,3]
  %perm = Const() {dtype = i32, value = dense<i32[4], [0, 3, 1, 2]>} : i32[4]
  %t = Transpose(%x, %perm) {T = f32, Tperm = i32} : f32[*]
  %r = Relu(%t) {T = f32} : f32[*]
  %back = Const() {dtype = i32, value = dense<i32[4], [0, 2, 3, 1]>} : i32[4]
  %y = Transpose(%r, %back) {T = f32, Tperm = i32} : f32[*]
}
"""
    result = export_with_report(parse_graph(text), ["x"], ["y"])
    assert result.report.op_counts == {"Relu": 1}
    x = np.random.default_rng(0).standard_normal((1, 4, 4, 3)).astype(np.float32)
    np.testing.assert_array_equal(run_onnx(result.model, {"x": x})["y"], np.maximum(x, 0))


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_stacked_convolutions_convert_once(axis: int):
    """Keras TimeDistributed(Conv2D) stacks per-slice convolutions: the stack is built
    channels-first and converted back once, not once per slice."""
    rng = np.random.default_rng(5)
    b = Builder()
    x = b.input("x", [1, 4, 4, 3])
    convs = [b("Relu", b("Conv2D", x, b.const(_weights(rng, 3, 3, 3, 2)), strides=[1, 1, 1, 1], padding="SAME"))
             for _ in range(3)]
    y = b("Pack", *convs, convs[0], axis=axis, N=4)
    result = export_with_report(b.graph, ["x"], [y.name])
    assert result.report.transpose_count == 2
    feeds = {"x": rng.standard_normal((1, 4, 4, 3)).astype(np.float32)}
    expected = Interpreter(b.graph).run(feeds, [y.name])[y.name]
    np.testing.assert_allclose(run_onnx(result.model, feeds)[y.name], expected, rtol=1e-5, atol=1e-6)


def test_layout_permutation_algebra():
    nchw = layout.channels_first(4)
    assert nchw == (0, 3, 1, 2)
    assert layout.between(None, nchw, 4) == (0, 3, 1, 2)
    assert layout.between(nchw, None, 4) == (0, 2, 3, 1)
    assert layout.physical_axis(-1, nchw, 4) == 1
    assert layout.after_removing(nchw, [1, 2], 4) is None  # NCHW mean over H, W: [N, C] in TF order
    assert layout.after_removing(nchw, [0], 4) == (2, 0, 1)
    assert layout.after_transpose(None, [0, 3, 1, 2], 4) == (0, 2, 3, 1)
    assert layout.moves_only_unit_axes((1, 7, 1, 1), (0, 2, 3, 1))
    assert not layout.moves_only_unit_axes((1, 7, 2, 2), (0, 2, 3, 1))


# -- fusions and values --------------------------------------------------------------------
def test_biases_fold_into_conv_and_gemm():
    model = load_model_fixture("keras_small_cnn")
    result = export_with_report(load_graph(model.path), model.inputs, model.outputs)
    convs = [n for n in result.model.graph.node if n.op_type == "Conv"]
    assert result.report.stats["bias_into_conv"] == sum(len(n.input) == 3 for n in convs) == 2
    assert result.report.stats["bias_into_gemm"] == 2
    assert "BiasAdd" not in result.report.op_counts


_RECURRENT_STEP = """graph {
  %x = Placeholder() {dtype = f32, shape = shape<2,3>} : f32[2,3]
  %h = Placeholder() {dtype = f32, shape = shape<2,2>} : f32[2,2]
  %w = Const() {dtype = f32, value = dense<f32[3,2], [0.5, -1.0, 2.0, 0.25, -0.75, 1.5]>} : f32[3,2]
  %u = Const() {dtype = f32, value = dense<f32[2,2], [1.0, -0.5, 0.125, 2.0]>} : f32[2,2]
  %b = Const() {dtype = f32, value = dense<f32[2], [0.3, -0.7]>} : f32[2]
  %xw = MatMul(%x, %w) {T = f32} : f32[2,2]
  %hu = MatMul(%h, %u) {T = f32} : f32[2,2]
  %sum = AddV2(%xw, %hu) {T = f32} : f32[2,2]
  %z = BiasAdd(%sum, %b) {T = f32} : f32[2,2]
  %y = Tanh(%z) {T = f32} : f32[2,2]
}
"""


@pytest.mark.parametrize("also_read", [False, True])
def test_a_bias_after_a_sum_of_products_rides_on_a_gemm(also_read: bool):
    """x@w + h@u + b (a Keras recurrent step) exports as Gemm(x, w, b) + h@u, one Add, unless
    the sum is read elsewhere; the numbers stay within one rounding of the interpreter's."""
    text = _RECURRENT_STEP.rstrip().rstrip("}") + "  %other = Neg(%sum) {T = f32} : f32[2,2]\n}\n" if also_read \
        else _RECURRENT_STEP
    outputs = ["y", "other"] if also_read else ["y"]
    graph = parse_graph(text)
    result = export_with_report(graph, ["x", "h"], outputs)
    assert result.report.stats.get("bias_into_gemm_across_add", 0) == (0 if also_read else 1)
    assert result.report.op_counts["Add"] == (2 if also_read else 1)
    feeds = {"x": np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3),
             "h": np.array([[0.5, -1.5], [2.5, 0.75]], np.float32)}
    want = Interpreter(graph).run(feeds, outputs)
    got = run_onnx(result.model, feeds, outputs)
    for name in outputs:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-6, atol=1e-7)


def test_values_are_typed_and_nodes_trace_to_tf_names():
    model = load_model_fixture("keras_small_cnn")
    graph = load_graph(model.path)
    exported = export(graph, model.inputs, model.outputs)
    typed = {v.name for v in list(exported.graph.value_info) + list(exported.graph.output)}
    for node in exported.graph.node:
        assert set(node.output) <= typed, node.name
        assert node.name.split("/")[0] in {op.name.split("/")[0] for op in graph}, node.name
    (out,) = exported.graph.output
    assert [d.dim_value for d in out.type.tensor_type.shape.dim] == [1, 10]


def test_unknown_batch_runs_any_batch():
    model = load_model_fixture("keras_small_cnn")
    exported = export(load_graph(model.path), model.inputs, model.outputs, input_shapes={"input": [None, 32, 32, 3]})
    batch_dim = exported.graph.input[0].type.tensor_type.shape.dim[0]
    assert batch_dim.dim_param and not batch_dim.dim_value
    x = model.feeds["input"]
    got = run_onnx(exported, {"input": np.concatenate([x, x])})["Identity"]
    np.testing.assert_allclose(got, np.concatenate([model.expected["Identity"]] * 2), rtol=1e-4, atol=1e-6)


def _value_info_symbols(graph: onnx.GraphProto) -> set[str]:
    names = {d.dim_param for v in graph.value_info for d in v.type.tensor_type.shape.dim if d.dim_param}
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                names |= _value_info_symbols(attr.g)
    return names


@pytest.mark.parametrize("name, shape", [("keras_small_cnn", [None, 32, 32, 3]), ("keras_padded_convs", [None, None, None, 3]),
                                         ("keras_rnn", None)])
def test_value_info_names_only_the_inputs_dims(name, shape):
    """ONNX's inference names every unknown dim (unk__N); onnxruntime tracks each named dim at a
    cost per run, so the export keeps only the inputs' own names (which inference carries on)."""
    model = load_model_fixture(name)
    dims = {model.inputs[0]: shape} if shape else None
    exported = export(load_graph(model.path), model.inputs, model.outputs, input_shapes=dims)
    declared = {d.dim_param for v in exported.graph.input for d in v.type.tensor_type.shape.dim if d.dim_param}
    assert _value_info_symbols(exported.graph) <= declared
    if shape:
        assert declared and _value_info_symbols(exported.graph) == declared  # the batch still ties tensors


def test_arithmetic_identities_vanish():
    text = """graph {
  %x = Placeholder() {dtype = f32, shape = shape<2,3>} : f32[2,3]
  %one = Const() {dtype = f32, value = dense<f32[], [1.0]>} : f32[]
  %zeros = Const() {dtype = f32, value = splat<f32[3], 0.0>} : f32[3]
  %ones = Const() {dtype = f32, value = splat<f32[2,2,3], 1.0>} : f32[2,2,3]
  %a = Mul(%one, %x) {T = f32} : f32[*]
  %b = AddV2(%a, %zeros) {T = f32} : f32[*]
  %c = Relu(%b) {T = f32} : f32[*]
  %y = Mul(%c, %ones) {T = f32} : f32[*]
}
"""
    result = export_with_report(parse_graph(text), ["x"], ["y"])
    assert result.report.op_counts == {"Mul": 1, "Relu": 1}  # x*ones[2,2,3] broadcasts: it stays
    x = np.arange(-3, 3, dtype=np.float32).reshape(2, 3)
    assert run_onnx(result.model, {"x": x})["y"].shape == (2, 2, 3)


def test_reshape_and_tile_that_change_nothing_vanish():
    """A Reshape to the operand's own (known) shape and a Tile by ones are the operand itself."""
    text = """graph {
  %x = Placeholder() {dtype = f32, shape = shape<1,6,4>} : f32[1,6,4]
  %shape = Const() {dtype = i32, value = dense<i32[3], [1, 6, 4]>} : i32[3]
  %ones = Const() {dtype = i32, value = dense<i32[3], [1, 1, 1]>} : i32[3]
  %twice = Const() {dtype = i32, value = dense<i32[3], [1, 2, 1]>} : i32[3]
  %r = Reshape(%x, %shape) {T = f32, Tshape = i32} : f32[*]
  %n = Neg(%r) {T = f32} : f32[*]
  %t = Tile(%n, %ones) {T = f32, Tmultiples = i32} : f32[*]
  %y = Tile(%t, %twice) {T = f32, Tmultiples = i32} : f32[*]
}
"""
    result = export_with_report(parse_graph(text), ["x"], ["y"])
    assert result.report.op_counts == {"Neg": 1, "Tile": 1}
    assert result.report.stats["unchanged_reshape_dropped"] == result.report.stats["unchanged_tile_dropped"] == 1
    x = np.arange(24, dtype=np.float32).reshape(1, 6, 4)
    np.testing.assert_array_equal(run_onnx(result.model, {"x": x})["y"], np.tile(-x, (1, 2, 1)))


# -- errors --------------------------------------------------------------------------------
def test_unsupported_op_names_type_and_node():
    text = """graph {
  %x = Placeholder() {dtype = f32, shape = shape<1,4>} : f32[1,4]
  %w = Wobble(%x) {T = f32} : f32[*]
  %y = Relu(%w) {T = f32} : f32[*]
}
"""
    with pytest.raises(UnsupportedOpError, match=r"op type 'Wobble' \(node 'w'\)") as err:
        export(parse_graph(text), ["x"], ["y"])
    assert (err.value.op_type, err.value.node) == ("Wobble", "w")


def test_unknown_output_and_unfed_placeholder_are_refused():
    text = """graph {
  %x = Placeholder() {dtype = f32, shape = shape<1,4>} : f32[1,4]
  %z = Placeholder() {dtype = f32, shape = shape<1,4>} : f32[1,4]
  %y = AddV2(%x, %z) {T = f32} : f32[*]
}
"""
    graph = parse_graph(text)
    with pytest.raises(OnnxExportError, match="unknown output 'nope'"):
        export(graph, ["x"], ["nope"])
    with pytest.raises(OnnxExportError, match="placeholder 'z' is needed by the outputs but is not among the inputs"):
        export(graph, ["x"], ["y"])


@pytest.mark.parametrize("factor", [1.0, 0.25])
def test_training_batch_norm_uses_the_batch_statistics(factor: float):
    """Training mode (a TF1 layer's `training` branch): normalised by the batch's mean and biased
    variance; the statistics outputs are the Bessel-corrected variance and, with an
    exponential_avg_factor, both blended into the moving ones, as the interpreter (and TF) has it."""
    rng = np.random.default_rng(3)
    b = Builder()
    x = b.input("x", [2, 3, 3, 4])
    stats = [b.const(rng.uniform(0.5, 1.5, 4).astype(np.float32)) for _ in range(4)]
    b("FusedBatchNormV3", x, *stats, U=DType.FLOAT, is_training=True, epsilon=1e-3, exponential_avg_factor=factor,
      name="bn")
    outputs = ["bn", "bn:1", "bn:2", "bn:3", "bn:4"]
    feeds = {"x": rng.standard_normal((2, 3, 3, 4)).astype(np.float32)}
    model = export(b.graph, ["x"], outputs)
    onnx.checker.check_model(model, full_check=True)
    want = Interpreter(b.graph).run(feeds, outputs)
    got = run_onnx(model, feeds, outputs)
    for name in outputs:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6, err_msg=name)


def test_batch_norm_of_the_wrong_rank_is_refused():
    """Found by the fuzzer: a 5-D input used to reach the layout code as if it were NHWC."""
    text = """graph {
  %x = Placeholder() {dtype = f32, shape = shape<1,2,2,2,3>} : f32[1,2,2,2,3]
  %c = Const() {dtype = f32, value = splat<f32[3], 1.0>} : f32[3]
  %bn = BatchNormWithGlobalNormalization(%x, %c, %c, %c, %c) {T = f32, scale_after_normalization = true, variance_epsilon = 0.001} : f32[*]
}
"""
    with pytest.raises(UnsupportedOpError, match=r"node 'bn'.*rank 5, the op takes 4-D input"):
        export(parse_graph(text), ["x"], ["bn"])


@pytest.mark.parametrize("dilations", ["[]", "[8589934592]", "[1, 1]"])
def test_window_attribute_of_the_wrong_length_is_refused(dilations: str):
    """Found by the fuzzer: an empty `dilations` list reached onnx.helper, which cannot type it."""
    text = f"""graph {{
  %x = Placeholder() {{dtype = f32, shape = shape<1,4,4,2>}} : f32[1,4,4,2]
  %w = Const() {{dtype = f32, value = splat<f32[3,3,2,1], 1.0>}} : f32[3,3,2,1]
  %c = DepthwiseConv2dNative(%x, %w) {{T = f32, dilations = {dilations}, padding = "SAME", strides = [1, 1, 1, 1]}} : f32[*]
}}
"""
    with pytest.raises(UnsupportedOpError, match=r"node 'c'.*'dilations' must have 4 entries"):
        export(parse_graph(text), ["x"], ["c"])


def test_supported_ops_cover_the_raw_fixture_graphs():
    wanted = {"Identity", "Const", "Placeholder", "Conv2D", "DepthwiseConv2dNative", "BiasAdd", "MatMul", "Relu",
              "Relu6", "Rsqrt", "Mul", "Sub", "AddV2", "Add", "Mean", "Pad", "Reshape", "Squeeze", "Softmax",
              "ConcatV2", "MaxPool", "AvgPool", "FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3",
              "BatchNormWithGlobalNormalization", "Sigmoid", "IdentityN", "ResizeBilinear", "MirrorPad", "GatherV2",
              "Shape", "StridedSlice", "Cast", "NoOp", "If", "StatelessIf", "While", "StatelessWhile",
              "FusedPadConv2D", "FusedResizeAndPadConv2D"}
    assert wanted <= set(supported_op_types())


def test_run_onnx_accepts_tf_tensor_names():
    """tf2onnx names tensors `x:0`; feeds and results still go by node name."""
    graph = helper.make_graph([helper.make_node("Neg", ["x:0"], ["y:0"])], "g",
                              [helper.make_tensor_value_info("x:0", onnx.TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y:0", onnx.TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    got = run_onnx(model, {"x": np.array([1, -2], np.float32)})
    assert list(got) == ["y"]
    np.testing.assert_array_equal(got["y"], [-1, 2])


# -- full-size models ------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.tf
@pytest.mark.parametrize("level", ["O0", "O2"])
@pytest.mark.parametrize("name", ["keras_mobilenet_v2", "keras_resnet50"])
def test_big_model_exports_and_matches_tf(name: str, level: str):
    model = build_big_fixture(name)
    graph = load_graph(model.path) if level == "O0" else optimized(model)
    result = export_with_report(graph, model.inputs, model.outputs)
    onnx.checker.check_model(result.model, full_check=True)
    assert result.report.transpose_count == 1
    if level == "O2":
        assert not {"Mul", "BatchNormalization"} & set(result.report.op_counts)
    assert_matches_tf(model, result.model)


# -- synthetic graphs, the NumPy interpreter as oracle ----------------------------------------
class Builder:
    """Small IR graphs in Python: `T` is filled in from the first operand when the op has one."""

    def __init__(self) -> None:
        self.graph = Graph()

    def input(self, name: str, shape, dtype: DType = DType.FLOAT) -> Value:
        return self.graph.create_op("Placeholder", name, attrs={"dtype": dtype, "shape": Shape.of(shape)}).result

    def const(self, array, dtype: DType | None = None) -> Value:
        tensor = Tensor.from_numpy(np.asarray(array), dtype)
        name = self.graph.unique_name("c")
        return self.graph.create_op("Const", name, attrs={"dtype": tensor.dtype, "value": tensor}).result

    def __call__(self, op_type: str, *operands: Value, name: str = "", **attrs):
        if "T" not in attrs:
            attrs.update(_type_attr(op_type, operands, attrs))
        op = self.graph.create_op(op_type, self.graph.unique_name(name or op_type.lower()), operands, attrs)
        return op.results[0] if len(op.results) == 1 else op.results


def _type_attr(op_type: str, operands, attrs) -> dict:
    """`T` from the first operand the OpDef types with it (list arguments take `N` operands)."""
    at = 0
    for arg in op_def(op_type).input_arg:
        if arg.type_attr == "T":
            return {"T": operands[at].dtype}
        at += attrs.get(arg.number_attr, 1) if arg.number_attr else 1
    return {}


def _weights(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def _windows(b: Builder, rng) -> list[Value]:
    x = b.input("x", [1, 7, 7, 4])
    return [b("MaxPool", x, ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1], padding="SAME"),
            b("AvgPool", x, ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1], padding="SAME"),
            b("AvgPool", x, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID"),
            b("Conv2D", x, b.const(_weights(rng, 3, 3, 4, 5)), strides=[1, 1, 1, 1], padding="EXPLICIT",
              explicit_paddings=[0, 0, 1, 2, 0, 1, 0, 0]),
            b("Conv2D", x, b.const(_weights(rng, 3, 3, 4, 5)), strides=[1, 1, 1, 1], padding="SAME",
              dilations=[1, 2, 2, 1]),
            b("DepthwiseConv2dNative", x, b.const(_weights(rng, 3, 3, 4, 2)), strides=[1, 2, 2, 1], padding="SAME")]


def _channel_ops(b: Builder, rng) -> list[Value]:
    """Axis-taking ops on a channels-first conv result: every axis must be remapped."""
    x = b.input("x", [1, 6, 5, 3])
    y = b("Conv2D", x, b.const(_weights(rng, 1, 1, 3, 4)), strides=[1, 1, 1, 1], padding="VALID")
    scaled = b("AddV2", b("Mul", y, b.const(_weights(rng, 4))), b.const(_weights(rng, 1, 1, 1, 4)))
    z = b("Maximum", scaled, b.const(np.float32(-0.5)))
    parts = b("SplitV", z, b.const([1, 3], DType.INT32), b.const(np.int32(-1)), num_split=2, Tlen=DType.INT32)
    halves = b("Split", b.const(np.int32(3)), z, num_split=2)
    return [b("Softmax", z), b("LogSoftmax", z), parts[1], halves[0],
            b("ConcatV2", z, y, b.const(np.int32(3)), N=2, Tidx=DType.INT32),
            b("Mean", z, b.const([1, 2], DType.INT32), keep_dims=True, Tidx=DType.INT32),
            b("Sum", z, b.const([3], DType.INT32), keep_dims=False, Tidx=DType.INT32),
            b("ArgMax", z, b.const(np.int32(3)), Tidx=DType.INT32, output_type=DType.INT32),
            b("Squeeze", b("Max", z, b.const([1], DType.INT32), keep_dims=True, Tidx=DType.INT32), squeeze_dims=[1]),
            b("Pad", z, b.const([[0, 0], [1, 0], [0, 2], [0, 0]], DType.INT32), Tpaddings=DType.INT32),
            b("PadV2", z, b.const([[0, 0], [1, 1], [1, 1], [0, 0]], DType.INT32), b.const(np.float32(1.5)),
              Tpaddings=DType.INT32),
            b("MirrorPad", z, b.const([[0, 0], [2, 1], [1, 2], [0, 0]], DType.INT32), mode="SYMMETRIC",
              Tpaddings=DType.INT32),
            b("SquaredDifference", z, y), b("Rsqrt", b("Square", y)), b("FloorMod", y, b.const(np.float32(0.7)))]


def _slicing(b: Builder, rng) -> list[Value]:
    x = b.input("x", [2, 5, 6])
    masks = dict(Index=DType.INT32)
    ints = lambda v: b.const(np.asarray(v, np.int32))  # noqa: E731
    return [b("StridedSlice", x, ints([0, 1, 0]), ints([2, 4, 6]), ints([1, 2, 1]), **masks),
            b("StridedSlice", x, ints([0, -1]), ints([0, 0]), ints([1, -1]), begin_mask=1, end_mask=3, **masks),
            b("StridedSlice", x, ints([1, 0, 2]), ints([2, 0, 3]), ints([1, 1, 1]), shrink_axis_mask=5,
              new_axis_mask=2, **masks),
            b("StridedSlice", x, ints([0, 1]), ints([0, 3]), ints([1, 1]), ellipsis_mask=1, **masks),
            b("Slice", x, ints([1, 0, 2]), ints([1, -1, 3]), Index=DType.INT32),
            b("GatherV2", x, ints([3, 0]), ints(1), Tparams=DType.FLOAT, Tindices=DType.INT32, Taxis=DType.INT32),
            b("Tile", x, ints([1, 2, 1]), Tmultiples=DType.INT32),
            b("ExpandDims", x, ints(-1), Tdim=DType.INT32),
            b("Cast", x, SrcT=DType.FLOAT, DstT=DType.INT32),
            b("SelectV2", b("Greater", x, b.const(np.float32(0))), x, b.const(np.float32(-1))),
            b("BatchMatMulV2", x, b.const(_weights(rng, 2, 4, 6)), adj_y=True),
            b("MatMul", b("Reshape", x, ints([2, 30]), Tshape=DType.INT32), b.const(_weights(rng, 3, 30)),
              transpose_b=True)]


def _images(b: Builder, rng) -> list[Value]:
    x = b.input("x", [1, 5, 5, 2])
    size, down = b.const(np.asarray([8, 7], np.int32)), b.const(np.asarray([3, 4], np.int32))
    return [b("ResizeNearestNeighbor", x, size),
            b("ResizeNearestNeighbor", x, size, align_corners=True),
            b("ResizeNearestNeighbor", x, size, half_pixel_centers=True),
            b("ResizeBilinear", x, down, half_pixel_centers=True),
            b("ResizeBilinear", x, down, align_corners=True)]


def _misc(b: Builder, rng) -> list[Value]:
    x = b.input("x", [1, 4, 4, 3])
    ints = lambda v: b.const(np.asarray(v, np.int32))  # noqa: E731
    y = b("Conv2D", x, b.const(_weights(rng, 1, 1, 3, 3)), strides=[1, 1, 1, 1], padding="VALID")
    rows = b("Reshape", x, ints([4, 12]), Tshape=DType.INT32)
    row_mask = b("Greater", b.const(_weights(rng, 4)), b.const(np.float32(0)))
    gather = dict(Tparams=DType.FLOAT, Tindices=DType.INT32, Taxis=DType.INT32)
    return [b("ExpandDims", y, ints(-1), Tdim=DType.INT32),
            b("GatherV2", y, ints(1), ints(3), **gather),
            b("GatherV2", y, ints([2, 0]), ints(1), **gather),
            *b("Unpack", x, num=4, axis=2),
            b("Pack", x, y, axis=1, N=2),
            b("AddN", y, x, y, N=3),
            b("ClipByValue", y, b.const(np.float32(-0.5)), b.const(np.float32(0.5))),
            b("LeakyRelu", y, alpha=0.1), b("Log1p", b("Abs", y)), b("Expm1", y),
            b("NotEqual", b("Floor", y), b("Ceil", y)), b("FloorDiv", y, b.const(np.float32(0.3))),
            b("Select", row_mask, rows, b("Neg", rows)),
            b("Size", y, out_type=DType.INT32), b("ZerosLike", y),
            b("Fill", ints([2, 2]), b.const(np.float32(3)), index_type=DType.INT32),
            b("MaxPoolV2", y, ints([1, 2, 2, 1]), ints([1, 1, 2, 1]), padding="VALID"),
            b("BatchMatMulV2", rows, b.const(_weights(rng, 4, 5)), adj_x=True)]


SYNTHETIC = {"windows": (_windows, [1, 7, 7, 4]), "channel_ops": (_channel_ops, [1, 6, 5, 3]),
             "slicing": (_slicing, [2, 5, 6]), "images": (_images, [1, 5, 5, 2]), "misc": (_misc, [1, 4, 4, 3])}


@pytest.mark.parametrize("case", sorted(SYNTHETIC))
def test_synthetic_graph_matches_interpreter(case: str):
    make, shape = SYNTHETIC[case]
    rng = np.random.default_rng(7)
    b = Builder()
    outputs = [v.name for v in make(b, rng)]
    feeds = {"x": rng.standard_normal(shape).astype(np.float32)}
    expected = Interpreter(b.graph).run(feeds, outputs)
    exported = export(b.graph, ["x"], outputs)
    got = run_onnx(exported, feeds, outputs)
    for name in outputs:
        assert got[name].dtype == expected[name].dtype, name
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-5, atol=1e-5, err_msg=name)


@pytest.mark.parametrize("opset", [17, 18])
def test_resize_of_unknown_batch(opset: int):
    """Resize sizes cover every axis: an unknown batch size is read at run time where no scale
    stands for the size (nearest 6 -> 7 with half-pixel centres, where the scale just above 7/6
    would pick another pixel; tests/backends/test_onnx_dynamic_batch.py has the cases that take
    scales)."""
    b = Builder()
    x = b.input("x", [None, 6, 6, 2])
    y = b("ResizeNearestNeighbor", x, b.const(np.asarray([7, 3], np.int32)), name="y", half_pixel_centers=True)
    result = export_with_report(b.graph, ["x"], [y.name], opset=opset)
    assert {"Shape", "Slice", "Concat", "Resize"} <= set(result.report.op_counts)
    feeds = {"x": np.random.default_rng(5).standard_normal((2, 6, 6, 2)).astype(np.float32)}
    expected = Interpreter(b.graph).run(feeds, ["y"])["y"]
    np.testing.assert_allclose(run_onnx(result.model, feeds)["y"], expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("height, halves, computed", [(None, True, True), (None, False, False), (4, False, False)])
def test_run_time_shapes_for_dynamic_batch(height, halves, computed):
    """Flatten with an unknown batch (and height): a target of the input's own batch size and -1
    (TF1's flatten) is the constant [0, -1], ONNX's 0 copying the batch; a target every size of
    which is known but one is a constant with -1; any other run-time target (half the batch) is
    computed in the model from Shape."""
    b = Builder()
    x = b.input("x", [None, height, 4, 2])
    y = b("Relu", b("Conv2D", x, b.const(_weights(np.random.default_rng(1), 1, 1, 2, 3)), strides=[1, 1, 1, 1],
                    padding="SAME"))
    batch = b("StridedSlice", b("Shape", y, out_type=DType.INT32), b.const(np.asarray([0], np.int32)),
              b.const(np.asarray([1], np.int32)), b.const(np.asarray([1], np.int32)), shrink_axis_mask=1,
              Index=DType.INT32)
    if halves:
        batch = b("FloorDiv", batch, b.const(np.int32(2)))
    width = -1 if height is None else 4 * 4 * 3  # Keras' Flatten states the width when it knows it
    flat = b("Reshape", y, b("Pack", batch, b.const(np.int32(width)), N=2), Tshape=DType.INT32)
    result = export_with_report(b.graph, ["x"], [flat.name])
    assert ("Shape" in result.report.op_counts) == computed and "Reshape" in result.report.op_counts
    if height is None and not halves:
        assert set(result.report.op_counts) == {"Conv", "Relu", "Transpose", "Reshape"}
        target = next(t for t in result.model.graph.initializer if t.name.endswith("copied_shape"))
        assert numpy_helper.to_array(target).tolist() == [0, -1]
    feeds = {"x": np.random.default_rng(2).standard_normal((4, 4, 4, 2)).astype(np.float32)}
    expected = Interpreter(b.graph).run(feeds, [flat.name])[flat.name]
    np.testing.assert_allclose(run_onnx(result.model, feeds)[flat.name], expected, rtol=1e-5, atol=1e-6)


def test_copying_target_reads_the_operand_it_copies():
    """GPT-2 over a dynamic length reshapes `expand_dims(range(n), 0)` to [-1, its own size at
    axis 1]: the target [-1, 0] copies the operand's axis 1, so the Reshape must read the operand,
    not the rank-1 range before its Unsqueeze (ONNX: "Invalid position of 0")."""
    b = Builder()
    x = b.input("x", [None], DType.FLOAT)
    row = b("ExpandDims", x, b.const(np.int32(0)), Tdim=DType.INT32)
    size = b("StridedSlice", b("Shape", row, out_type=DType.INT32), b.const(np.asarray([1], np.int32)),
             b.const(np.asarray([2], np.int32)), b.const(np.asarray([1], np.int32)), shrink_axis_mask=1,
             Index=DType.INT32)
    b("Reshape", row, b("Pack", b.const(np.int32(-1)), size, N=2), Tshape=DType.INT32, name="y")
    result = export_with_report(b.graph, ["x"], ["y"])
    target = next(t for t in result.model.graph.initializer if t.name.endswith("copied_shape"))
    assert numpy_helper.to_array(target).tolist() == [-1, 0]
    feeds = {"x": np.arange(5, dtype=np.float32)}
    np.testing.assert_array_equal(run_onnx(result.model, feeds)["y"], feeds["x"][None, :])


# -- static analysis ---------------------------------------------------------------------------
def test_analysis_infers_shapes_and_cheap_constants():
    model = load_model_fixture("keras_mobilenet_v2_small")
    graph = load_graph(model.path)
    outputs, inputs = [graph.value(o) for o in model.outputs], [graph.value(i) for i in model.inputs]
    ops = topological_order(graph, reachable_ops(outputs, inputs), inputs)
    info = analyze(ops, {v: None for v in inputs})
    assert all(info.shape(op.results[0]).is_fully_defined for op in ops if op.results)
    assert info.shape(outputs[0]).dims == (1, 10)
    rsqrt = next(op for op in ops if op.type == "Rsqrt")
    assert info.is_constant(rsqrt.results[0]) and info.constant(rsqrt.results[0]).dtype == np.float32
    assert not info.is_constant(next(op for op in ops if op.type == "Conv2D").results[0])


def test_analysis_order_puts_producers_first():
    graph = parse_graph("""graph {
  %b = Relu(%a) {T = f32} : f32[*]
  %a = Placeholder() {dtype = f32, shape = shape<2>} : f32[2]
  %c = Neg(%b) {T = f32} : f32[*]
}
""")
    order = topological_order(graph, reachable_ops([graph.value("c")]))
    assert [op.name for op in order] == ["a", "b", "c"]


def test_outputs_sharing_tensors_keep_their_names():
    """A conv result that is also an output, and two outputs naming one value."""
    b = Builder()
    x = b.input("x", [1, 4, 4, 2])
    conv = b("Conv2D", x, b.const(_weights(np.random.default_rng(3), 3, 3, 2, 3)), strides=[1, 1, 1, 1],
             padding="SAME", name="conv")
    relu = b("Relu", conv, name="relu")
    alias = b("Identity", relu, name="alias")
    outputs = ["conv", "relu", "alias", "x"]
    exported = export(b.graph, ["x"], outputs)
    assert [o.name for o in exported.graph.output] == outputs
    feeds = {"x": np.random.default_rng(4).standard_normal((1, 4, 4, 2)).astype(np.float32)}
    expected = Interpreter(b.graph).run(feeds, outputs)
    got = run_onnx(exported, feeds)
    assert list(got) == outputs and alias.name == "alias"
    for name in outputs:
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-5, atol=1e-6, err_msg=name)


def test_an_empty_pad_read_by_two_convs_is_no_node():
    """Sonnet's ResNet: a Pad by nothing ahead of a 1x1 conv and the projection that share it."""
    rng = np.random.default_rng(29)
    b = Builder()
    x = b.input("x", [1, 5, 5, 4])
    relu = b("Relu", x)
    empty = b("Pad", relu, b.const(np.zeros((4, 2), np.int32)), Tpaddings=DType.INT32)
    convs = [b("Conv2D", empty, b.const(_weights(rng, 1, 1, 4, n)), strides=[1, 1, 1, 1], padding="VALID")
             for n in (3, 6)]
    names = [c.name for c in convs]
    result = export_with_report(b.graph, ["x"], names)
    assert "Pad" not in result.report.op_counts and result.report.stats["empty_pads_removed"] == 1
    feed = {"x": rng.standard_normal((1, 5, 5, 4)).astype(np.float32)}
    _runs_like_the_interpreter(b, result.model, feed, names, atol=1e-6)


def test_a_focus_stem_converts_the_image_once():
    """keras-cv's CSPDarkNet stem: four strided slices of the (rescaled) image joined on channels
    into a conv. The slices cut the image where it is stored, so the image is converted once,
    not each slice."""
    rng = np.random.default_rng(31)
    b = Builder()
    x = b.input("x", [1, 8, 8, 3])
    scaled = b("Mul", x, b.const(np.float32(1 / 255)))
    starts = [(0, 0), (1, 0), (0, 1), (1, 1)]
    parts = [b("StridedSlice", scaled, b.const(np.asarray([0, r, c, 0], np.int32)),
               b.const(np.asarray([0, 0, 0, 0], np.int32)), b.const(np.asarray([1, 2, 2, 1], np.int32)),
               begin_mask=9, end_mask=15, Index=DType.INT32) for r, c in starts]
    joined = b("ConcatV2", *parts, b.const(np.int32(3)), N=4, Tidx=DType.INT32)
    conv = b("Conv2D", joined, b.const(_weights(rng, 3, 3, 12, 4)), strides=[1, 1, 1, 1], padding="SAME")
    result = export_with_report(b.graph, ["x"], [conv.name])
    assert result.report.op_counts["Transpose"] == 2  # the image in, the conv's result out
    feed = {"x": rng.uniform(0, 255, (1, 8, 8, 3)).astype(np.float32)}
    _runs_like_the_interpreter(b, result.model, feed, [conv.name], atol=1e-5)


def test_convs_sharing_a_filter_share_its_onnx_form():
    """keras-cv's RetinaNet runs one head on every pyramid level: each level's conv reads the same
    TF filter, so the ONNX model holds one OIHW copy, not one per level (onnxruntime was 1.13x
    slower with five copies of each head filter)."""
    rng = np.random.default_rng(37)
    b = Builder()
    levels = [b.input(f"p{i}", [1, 8 >> i, 8 >> i, 16]) for i in range(3)]
    shared = b.const(_weights(rng, 3, 3, 16, 16))
    outs = [b("Conv2D", x, shared, strides=[1, 1, 1, 1], padding="SAME") for x in levels]
    names = [o.name for o in outs]
    model = export_with_report(b.graph, [x.op.name for x in levels], names).model
    filters = [i for i in model.graph.initializer if list(i.dims) == [16, 16, 3, 3]]
    assert len(filters) == 1
    assert all(n.input[1] == filters[0].name for n in model.graph.node if n.op_type == "Conv")
    feed = {x.op.name: rng.standard_normal((1, 8 >> i, 8 >> i, 16)).astype(np.float32) for i, x in enumerate(levels)}
    _runs_like_the_interpreter(b, model, feed, names, atol=1e-5)


def test_a_zero_pad_read_only_by_convs_folds_into_each():
    """keras-cv's YOLOv8 head: one ZeroPadding2D'd map read by the box conv, the class conv and the
    next downsampling conv. Each takes the padding as its own pads; no Pad node is left."""
    rng = np.random.default_rng(41)
    b = Builder()
    x = b.input("x", [1, 6, 6, 4])
    padded = b("Pad", b("Relu", x), b.const(np.asarray([[0, 0], [1, 1], [1, 1], [0, 0]], np.int32)),
               Tpaddings=DType.INT32)
    convs = [b("Conv2D", padded, b.const(_weights(rng, 3, 3, 4, n)), strides=[1, s, s, 1], padding="VALID")
             for n, s in ((5, 1), (3, 1), (8, 2))]
    names = [c.name for c in convs]
    result = export_with_report(b.graph, ["x"], names)
    assert "Pad" not in result.report.op_counts and result.report.stats["pad_into_conv"] == 3
    feed = {"x": rng.standard_normal((1, 6, 6, 4)).astype(np.float32)}
    _runs_like_the_interpreter(b, result.model, feed, names, atol=1e-5)


def _runs_like_the_interpreter(b: "Builder", model: onnx.ModelProto, feed: dict, names: list, atol: float) -> None:
    want, got = Interpreter(b.graph).run(feed, names), run_onnx(model, feed, names)
    for name in names:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=atol)
