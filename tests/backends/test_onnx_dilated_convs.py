"""SpaceToBatchND -> conv -> BatchToSpaceND (TF's dilated conv, 2-D or 3-D) exports as one dilated ONNX Conv.

The unfused graph run by gttc's interpreter is the reference; the export must
match it to 1e-6 of the output's largest magnitude (the fused conv sums in a
different order), contain one Conv and none of the reshuffles, and leave the
caller's graph as it was."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

from compiler.backends.onnx import export_with_report
from compiler.backends.onnx.dilated_convs import find_dilated_convs
from compiler.runtime.interpreter import Interpreter
from compiler.runtime.onnx_runner import run_onnx
from tests.backends.test_onnx_added_ops import ints
from tests.backends.test_onnx_export import Builder


def _chain(b: Builder, x, conv_type: str, weights: np.ndarray, block, pads, crops, bias=None):
    s2b = b("SpaceToBatchND", x, ints(b, block), ints(b, pads), name="s2b")
    conv = b(conv_type, s2b, b.const(weights), strides=[1, 1, 1, 1], padding="VALID", name="conv")
    if bias is not None:  # where GTT's fold_old_batch_norms leaves a folded batch norm's offset
        conv = b("BiasAdd", conv, b.const(bias), name="bias")
    return b("BatchToSpaceND", conv, ints(b, block), ints(b, crops), name="b2s")


@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("conv_type, size, block, pads, crops", [
    ("Conv2D", 16, [2, 2], [[2, 2], [2, 2]], [[0, 0], [0, 0]]),          # SAME, 3x3, rate 2
    ("Conv2D", 15, [2, 2], [[2, 3], [2, 3]], [[0, 1], [0, 1]]),          # SAME on an odd size: cropped
    ("DepthwiseConv2dNative", 12, [3, 3], [[0, 0], [0, 0]], [[0, 0], [0, 0]]),  # VALID, rate 3
    ("DepthwiseConv2dNative", 10, [2, 3], [[2, 4], [3, 5]], [[0, 2], [0, 1]]),  # unequal rates
])
def test_fused_matches_the_unfused_graph(conv_type: str, size: int, block, pads, crops, with_bias: bool) -> None:
    rng = np.random.default_rng(size)
    b = Builder()
    x = b.input("x", [2, size, size, 3])
    shape = (3, 3, 3, 4) if conv_type == "Conv2D" else (3, 3, 3, 2)
    bias = rng.standard_normal(shape[3] * (1 if conv_type == "Conv2D" else 3)).astype(np.float32) if with_bias else None
    out = _chain(b, x, conv_type, rng.standard_normal(shape).astype(np.float32), block, pads, crops, bias)
    before = sorted(op.type for op in b.graph)
    result = _exported_matches(b, {"x": rng.standard_normal((2, size, size, 3)).astype(np.float32)}, out)
    counts = result.report.op_counts
    # One conv, and the two Transposes between TF's NHWC graph inputs/outputs and ONNX's NCHW Conv.
    assert counts == {"Conv": 1, "Transpose": 2}, counts
    assert sorted(op.type for op in b.graph) == before  # the caller's IR is untouched


def _exported_matches(b: Builder, feeds: dict, out):
    """Export with the full checker and compare with the interpreter on the unfused graph."""
    want = Interpreter(b.graph).run(feeds, [out.name])[out.name]
    result = export_with_report(b.graph, list(feeds), [out.name])
    onnx.checker.check_model(result.model, full_check=True)
    got = run_onnx(result.model, feeds, [out.name])[out.name]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6 * np.abs(want).max())
    return result


@pytest.mark.parametrize("size, block, pads, crops", [
    (8, [2, 2, 2], [[2, 2], [2, 2], [2, 2]], [[0, 0], [0, 0], [0, 0]]),   # SAME, 3x3x3, rate 2
    (7, [2, 1, 3], [[2, 3], [1, 1], [3, 5]], [[0, 1], [0, 0], [0, 2]]),   # odd size, unequal rates
    (9, [3, 3, 3], [[0, 0], [0, 0], [0, 0]], [[0, 0], [0, 0], [0, 0]]),   # VALID: no Pad at all
])
def test_dilated_conv3d_is_one_conv(size, block, pads, crops) -> None:
    """TF's Conv3D has no explicit padding: the rewrite pads with a zero Pad, which the Conv3D
    lowering folds into the Conv's pads."""
    rng = np.random.default_rng(size)
    b = Builder()
    x = b.input("x", [1, size, size, size, 2])
    s2b = b("SpaceToBatchND", x, ints(b, block), ints(b, pads))
    weights = b.const(rng.standard_normal((3, 3, 3, 2, 4)).astype(np.float32))
    conv = b("Conv3D", s2b, weights, strides=[1] * 5, padding="VALID")
    out = b("BatchToSpaceND", conv, ints(b, block), ints(b, crops), name="b2s")
    result = _exported_matches(b, {"x": rng.standard_normal((1, size, size, size, 2)).astype(np.float32)}, out)
    assert result.report.op_counts == {"Conv": 1, "Transpose": 2}
    assert result.report.stats["dilated_convs"] == 1


@pytest.mark.parametrize("rank", [1, 2])
def test_convs_sharing_one_space_to_batch_each_fuse(rank: int) -> None:
    """WaveNet's gated unit runs two dilated convs on one input; -O2's CSE merges their identical
    SpaceToBatchND (and a Conv1D's ExpandDims), so the reshuffle has two readers.  Each conv still
    becomes one dilated Conv; the shared op goes once its last reader is fused."""
    rng = np.random.default_rng(40 + rank)
    b = Builder()
    shape = [1, 13, 3] if rank == 1 else [1, 13, 13, 3]
    x = b.input("x", shape)
    block, pads, crops = ([2], [[2, 3]], [[0, 1]]) if rank == 1 else ([2, 2], [[2, 3]] * 2, [[0, 1]] * 2)
    s2b = b("SpaceToBatchND", x, ints(b, block), ints(b, pads), name="s2b")
    inner = b("ExpandDims", s2b, ints(b, 1), name="expand") if rank == 1 else s2b
    outs = []
    for k in range(2):
        conv = b("Conv2D", inner, b.const(rng.standard_normal((1 if rank == 1 else 3, 3, 3, 4)).astype(np.float32)),
                 strides=[1, 1, 1, 1], padding="VALID", name=f"conv{k}")
        if rank == 1:
            conv = b("Squeeze", conv, squeeze_dims=[1], name=f"squeeze{k}")
        outs.append(b("BatchToSpaceND", conv, ints(b, block), ints(b, crops), name=f"b2s{k}"))
    out = b("Mul", outs[0], outs[1], name="gate")
    result = _exported_matches(b, {"x": rng.standard_normal(shape).astype(np.float32)}, out)
    assert result.report.stats["dilated_convs"] == 2
    want = {"Conv": 2, "Mul": 1, "Transpose": 2} if rank == 2 else {"Conv": 2, "Mul": 1, "Transpose": 2, "Unsqueeze": 1,
                                                                   "Squeeze": 1}
    assert result.report.op_counts == want, result.report.op_counts


def test_a_space_to_batch_with_another_reader_stays_for_it() -> None:
    rng = np.random.default_rng(43)
    b = Builder()
    x = b.input("x", [1, 8, 8, 2])
    s2b = b("SpaceToBatchND", x, ints(b, [2, 2]), ints(b, [[2, 2], [2, 2]]), name="s2b")
    conv = b("Conv2D", s2b, b.const(rng.standard_normal((3, 3, 2, 2)).astype(np.float32)),
             strides=[1, 1, 1, 1], padding="VALID", name="conv")
    fused = b("BatchToSpaceND", conv, ints(b, [2, 2]), ints(b, [[0, 0], [0, 0]]), name="b2s")
    other = b("Relu", s2b, name="other")
    feeds = {"x": rng.standard_normal((1, 8, 8, 2)).astype(np.float32)}
    want = Interpreter(b.graph).run(feeds, ["b2s", "other"])
    result = export_with_report(b.graph, ["x"], ["b2s", "other"])
    onnx.checker.check_model(result.model, full_check=True)
    got = run_onnx(result.model, feeds, ["b2s", "other"])
    assert result.report.stats["dilated_convs"] == 1
    for name in (fused.name, other.name):
        np.testing.assert_allclose(got[name], want[name], rtol=0, atol=1e-6 * np.abs(want[name]).max())


def test_output_named_after_the_batch_to_space_resolves() -> None:
    b = Builder()
    x = b.input("x", [1, 8, 8, 2])
    out = _chain(b, x, "Conv2D", np.ones((3, 3, 2, 2), np.float32), [2, 2], [[2, 2], [2, 2]], [[0, 0], [0, 0]])
    result = export_with_report(b.graph, ["x"], [out.name])
    assert [o.name for o in result.model.graph.output] == ["b2s"]
    assert result.report.stats["dilated_convs"] == 1


def test_chains_whose_inner_ops_are_named_outputs_are_not_fused() -> None:
    b = Builder()
    x = b.input("x", [1, 8, 8, 2])
    _chain(b, x, "Conv2D", np.ones((3, 3, 2, 2), np.float32), [2, 2], [[2, 2], [2, 2]], [[0, 0], [0, 0]])
    assert find_dilated_convs(b.graph) and not find_dilated_convs(b.graph, {"conv"})
    assert not find_dilated_convs(b.graph, {"s2b"})


def test_crops_larger_than_the_padding_are_not_fused() -> None:
    b = Builder()
    x = b.input("x", [1, 8, 8, 2])
    _chain(b, x, "Conv2D", np.ones((3, 3, 2, 2), np.float32), [2, 2], [[0, 0], [0, 0]], [[1, 0], [0, 0]])
    assert not find_dilated_convs(b.graph)


def test_strided_conv_is_not_fused() -> None:
    b = Builder()
    x = b.input("x", [1, 8, 8, 2])
    s2b = b("SpaceToBatchND", x, ints(b, [2, 2]), ints(b, [[0, 0], [0, 0]]))
    conv = b("Conv2D", s2b, b.const(np.ones((1, 1, 2, 2), np.float32)), strides=[1, 2, 2, 1], padding="VALID")
    b("BatchToSpaceND", conv, ints(b, [2, 2]), ints(b, [[0, 0], [0, 0]]))
    assert not find_dilated_convs(b.graph)


@pytest.mark.tf
def test_keras_dilated_convs_export_with_no_more_nodes_than_tf2onnx() -> None:
    """Keras Conv2D, DepthwiseConv2D and SeparableConv2D with dilation rates 2, 2 and 3, frozen:
    the -O2 graph exports, matches TF within 1e-4 and has no more nodes than tf2onnx's model."""
    pytest.importorskip("tensorflow")
    pytest.importorskip("tf2onnx")
    import keras

    from compiler.backends.graphdef import emit_graphdef_bytes
    from compiler.backends.onnx.tf2onnx_compare import compare_with_tf2onnx
    from compiler.frontends.graphdef import load_graph_bytes
    from compiler.passes import run_pipeline
    from compiler.passes.levels import preset_pipeline
    from tests.oracle import run_tf
    from tools.make_fixtures import freeze_keras

    keras.utils.set_random_seed(11)
    inp = keras.Input((15, 15, 3))
    h = keras.layers.Conv2D(4, 3, dilation_rate=2, padding="same", activation="relu")(inp)
    h = keras.layers.DepthwiseConv2D(3, dilation_rate=2, padding="same")(h)
    h = keras.layers.SeparableConv2D(4, 3, dilation_rate=3, padding="valid")(h)
    graph_def, inputs, outputs = freeze_keras(keras.Model(inp, h), (15, 15, 3))
    data = graph_def.SerializeToString()
    feeds = {inputs[0]: np.random.default_rng(0).uniform(-1, 1, (1, 15, 15, 3)).astype(np.float32)}
    want = run_tf(data, feeds, outputs)[outputs[0]]
    specs, _ = preset_pipeline(2)
    graph = run_pipeline(load_graph_bytes(data), specs, inputs, outputs).graph
    result = export_with_report(graph, inputs, outputs)
    assert result.report.stats["dilated_convs"] == 3
    comparison = compare_with_tf2onnx(emit_graphdef_bytes(graph), result.model, inputs, outputs, feeds)
    got = run_onnx(result.model, feeds, outputs)[outputs[0]]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * np.abs(want).max())
    assert comparison.gttc.node_count <= comparison.tf2onnx.node_count, comparison.format()


@pytest.mark.tf
def test_keras_dilated_conv1d_fuses_and_stays_channels_first() -> None:
    """Keras Conv1D (causal, rate 2) then Conv1D (same, rate 3): TF wraps each conv in ExpandDims and
    Squeeze inside the SpaceToBatchND/BatchToSpaceND pair; each chain becomes one dilated Conv, and the
    tensors stay channels-first between them: the only Transposes are at the graph input and output."""
    pytest.importorskip("tensorflow")
    import keras

    from compiler.frontends.graphdef import load_graph_bytes
    from compiler.passes import run_pipeline
    from compiler.passes.levels import preset_pipeline
    from tests.oracle import run_tf
    from tools.make_fixtures import freeze_keras

    keras.utils.set_random_seed(12)
    inp = keras.Input((17, 3))
    h = keras.layers.Conv1D(4, 3, dilation_rate=2, padding="causal", activation="relu")(inp)
    h = keras.layers.Conv1D(5, 3, dilation_rate=3, padding="same")(h)
    graph_def, inputs, outputs = freeze_keras(keras.Model(inp, h), (17, 3))
    data = graph_def.SerializeToString()
    feeds = {inputs[0]: np.random.default_rng(1).uniform(-1, 1, (1, 17, 3)).astype(np.float32)}
    want = run_tf(data, feeds, outputs)[outputs[0]]
    specs, _ = preset_pipeline(2)
    graph = run_pipeline(load_graph_bytes(data), specs, inputs, outputs).graph
    result = export_with_report(graph, inputs, outputs)
    onnx.checker.check_model(result.model, full_check=True)
    assert result.report.stats["dilated_convs"] == 2
    counts = result.report.op_counts
    assert counts["Conv"] == 2 and counts.get("Transpose") == 2 and "Reshape" not in counts, counts
    got = run_onnx(result.model, feeds, outputs)[outputs[0]]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * np.abs(want).max())


@pytest.mark.tf
@pytest.mark.parametrize("rank", [1, 2, 3])
def test_dilated_convs_with_unknown_spatial_sizes_fuse(rank: int) -> None:
    """With the spatial sizes unknown, TF computes the SpaceToBatchND paddings and the crops at run
    time (the end padded to a multiple of the rate, then cropped off); the amount cancels, so each
    chain is still one dilated Conv, and it matches TF at sizes divisible by the rate and not."""
    pytest.importorskip("tensorflow")
    import keras

    from compiler.frontends.graphdef import load_graph_bytes
    from compiler.passes import run_pipeline
    from compiler.passes.levels import preset_pipeline
    from tests.oracle import run_tf
    from tools.make_fixtures import freeze_keras

    keras.utils.set_random_seed(12)
    conv = {1: keras.layers.Conv1D, 2: keras.layers.Conv2D, 3: keras.layers.Conv3D}[rank]
    spatial = (None,) * rank
    inp = keras.Input(spatial + (3,))
    h = conv(4, 3, dilation_rate=2, padding="same", activation="relu")(inp)
    h = conv(2, 2, dilation_rate=3, padding="valid")(h)
    graph_def, inputs, outputs = freeze_keras(keras.Model(inp, h), spatial + (3,), batch=None)
    data = graph_def.SerializeToString()
    specs, _ = preset_pipeline(2)
    graph = run_pipeline(load_graph_bytes(data), specs, inputs, outputs).graph
    result = export_with_report(graph, inputs, outputs)
    onnx.checker.check_model(result.model, full_check=True)
    assert result.report.stats["dilated_convs"] == 2 and result.report.op_counts["Conv"] == 2
    assert not {"SpaceToDepth", "DepthToSpace", "Shape"} & set(result.report.op_counts)
    for sizes in ((9, 8, 7), (12, 6, 10)):
        shape = (2, *sizes[:rank], 3)
        feeds = {inputs[0]: np.random.default_rng(sum(shape)).uniform(-1, 1, shape).astype(np.float32)}
        want = run_tf(data, feeds, outputs)[outputs[0]]
        got = run_onnx(result.model, feeds, outputs)[outputs[0]]
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.abs(want).max())
