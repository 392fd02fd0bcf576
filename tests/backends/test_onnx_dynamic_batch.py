"""Models frozen with a dynamic batch export as compactly as with a fixed one.

Keras computes reshape targets and transposed convs' sizes from `Shape(x)` when
the batch is dynamic.  The static analysis keeps the sizes it can know
(compiler/analysis/partial.py), so ranks stay known, a Reshape with one unknown
size gets a constant target with -1, and a Resize takes constant scales: no
shape arithmetic is left for onnxruntime.  The TF-marked case compares with TF
at batch 3.
"""
from __future__ import annotations

import numpy as np
import onnx
import pytest

from compiler.backends.onnx import export_with_report
from compiler.backends.onnx.ops_image import exact_scales
from compiler.runtime.interpreter import Interpreter
from compiler.runtime.onnx_runner import run_onnx
from tests.backends.test_onnx_export import Builder


@pytest.mark.parametrize("before, after", [(4, 8), (6, 3), (4, 9), (5, 5), (10, 6), (3, 7), (7, 3), (5, 6), (0, 3)])
def test_scales_give_back_the_sizes(before, after) -> None:
    scales = exact_scales([before], [after])
    assert (scales is None) == (before == 0)
    if scales:  # onnxruntime: float32(scale * size) truncated; ONNX shape inference: floor in double
        assert int(np.float32(scales[0]) * np.float32(before)) == after == int(np.floor(scales[0] * before))


def test_nearest_takes_an_inexact_scale_only_where_no_pixel_moves() -> None:
    """6 -> 7 with half-pixel centres: output pixel 3 sits exactly between sources 2 and 3
    ((3 + 0.5) * 6 / 7 - 0.5 = 2.5), so the scale just above 7/6 would round it the other way;
    6 -> 10 without centres: pixel 5 reads source 5 * 0.6 = 3 exactly, just below with the bump."""
    assert exact_scales([6], [7], "half_pixel", "round_prefer_ceil") is None
    assert exact_scales([6], [10], "asymmetric", "floor") is None
    assert exact_scales([6], [7], "half_pixel") is not None and exact_scales([6], [7], "align_corners", "floor")
    assert exact_scales([10], [6], "half_pixel", "round_prefer_ceil") is not None


@pytest.mark.parametrize("op_type, attrs, size, scaled", [
    ("ResizeBilinear", {"half_pixel_centers": True}, [7, 9], True),
    ("ResizeNearestNeighbor", {"half_pixel_centers": True}, [12, 2], True),
    ("ResizeNearestNeighbor", {"half_pixel_centers": True}, [9, 6], True),
    ("ResizeNearestNeighbor", {"align_corners": True}, [10, 8], True),
    ("ResizeNearestNeighbor", {"half_pixel_centers": True}, [7, 4], False),  # 6 -> 7: sizes read at run time
    ("ResizeNearestNeighbor", {}, [10, 3], False),                           # 6 -> 10 likewise
    ("ResizeBilinear", {}, [9, 5], True),
])
def test_a_resize_with_a_dynamic_batch_takes_scales(op_type, attrs, size, scaled) -> None:
    b = Builder()
    x = b.input("x", [-1, 6, 4, 3])
    out = b(op_type, x, b.const(np.asarray(size, np.int32)), name="out", **attrs)
    feed = np.random.default_rng(len(size) + size[0]).standard_normal((2, 6, 4, 3)).astype(np.float32)
    result = export_with_report(b.graph, ["x"], ["out"])
    onnx.checker.check_model(result.model, full_check=True)
    want = Interpreter(b.graph).run({"x": feed}, ["out"])["out"]
    got = run_onnx(result.model, {"x": feed}, ["out"])["out"]
    if op_type == "ResizeNearestNeighbor":
        np.testing.assert_array_equal(got, want)  # the same pixels, whichever scale
    else:  # an inexact ratio's scale moves coordinates by a unit in the last place
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.abs(want).max())
    assert ("Shape" not in result.report.op_counts) == scaled and out.op.type == op_type


@pytest.mark.tf
def test_keras_layers_with_a_dynamic_batch_match_tf(tmp_path) -> None:
    pytest.importorskip("tensorflow")
    keras = pytest.importorskip("keras")
    from compiler.frontends.graphdef import load_graph_bytes
    from compiler.passes import run_pipeline
    from compiler.passes.levels import LEVELS
    from tests.oracle import run_tf
    from tools.make_fixtures import freeze_keras, seed_everything

    layers = keras.layers
    seed_everything(12)
    inputs = keras.Input((6, 6, 3))
    hidden = layers.Conv2D(4, 3, padding="same", activation="relu")(inputs)
    hidden = layers.UpSampling2D()(layers.MaxPooling2D()(hidden))
    hidden = layers.Conv2DTranspose(3, 3, strides=2, padding="same")(hidden)
    hidden = layers.Resizing(9, 9)(hidden)
    sequence = layers.Reshape((27, 9))(hidden)
    sequence = layers.Dense(5)(sequence)                              # a Dense on 3-D: Tensordot
    vector = layers.RepeatVector(2)(layers.GlobalAveragePooling1D()(sequence))
    model = keras.Model(inputs, layers.Flatten()(vector))
    graph_def, names, outputs = freeze_keras(model, (6, 6, 3), batch=None)
    data = graph_def.SerializeToString()
    graph = run_pipeline(load_graph_bytes(data), LEVELS[2].pipeline, names, outputs).graph
    result = export_with_report(graph, names, outputs)
    onnx.checker.check_model(result.model, full_check=True)
    feeds = {names[0]: np.random.default_rng(6).uniform(-1, 1, (3, 6, 6, 3)).astype(np.float32)}
    want = run_tf(data, feeds, outputs)[outputs[0]]
    got = run_onnx(result.model, feeds, outputs)[outputs[0]]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.abs(want).max())
    counts = result.report.op_counts
    assert "Shape" not in counts and counts["Resize"] == 2 and counts["ConvTranspose"] == 1, counts


@pytest.mark.tf
def test_slices_bounded_at_run_time_match_tf() -> None:
    """x[:, :k], x[:, k - 1] and x[::-1, k::2] with k computed from an input: the Slice bounds
    are read at run time, and the sliced axes' sizes stay unknown to the analysis."""
    tf = pytest.importorskip("tensorflow")
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    from compiler.frontends.graphdef import load_graph_bytes
    from compiler.passes import run_pipeline
    from compiler.passes.levels import LEVELS

    weights = tf.constant(np.random.default_rng(0).standard_normal((10, 8)).astype(np.float32))

    def model(x, n):
        h = tf.matmul(x, weights)
        k = tf.reduce_sum(tf.cast(n > 0, tf.int32))
        return tf.reduce_sum(h[:, :k], 1) + h[:, k - 1] + tf.reduce_sum(h[::-1, k::2], 1)

    frozen = convert_variables_to_constants_v2(tf.function(model).get_concrete_function(
        tf.TensorSpec([None, 10], tf.float32), tf.TensorSpec([8], tf.float32)))
    names = [t.name.split(":")[0] for t in frozen.inputs]
    outputs = [t.name.split(":")[0] for t in frozen.outputs]
    graph = run_pipeline(load_graph_bytes(frozen.graph.as_graph_def().SerializeToString()), LEVELS[2].pipeline,
                         names, outputs).graph
    result = export_with_report(graph, names, outputs)
    onnx.checker.check_model(result.model, full_check=True)
    x = np.random.default_rng(1).standard_normal((3, 10)).astype(np.float32)
    for signs in ([1, 1, -1, 1, 1, -1, 1, -1], [1, -1, -1, -1, -1, -1, -1, -1]):
        n = np.asarray(signs, np.float32)
        want = frozen(tf.constant(x), tf.constant(n))[0].numpy()
        got = run_onnx(result.model, dict(zip(names, (x, n))), outputs)[outputs[0]]
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.tf
def test_upsampling_with_unknown_height_and_width_is_one_resize() -> None:
    """A fully convolutional model frozen with batch, height and width unknown: the repeats'
    Reshape targets are computed from Shape(x), and are still recognised element by element."""
    pytest.importorskip("tensorflow")
    keras = pytest.importorskip("keras")
    from compiler.frontends.graphdef import load_graph_bytes
    from compiler.passes import run_pipeline
    from compiler.passes.levels import LEVELS
    from tests.oracle import run_tf
    from tools.make_fixtures import freeze_keras, seed_everything

    layers = keras.layers
    seed_everything(13)
    inputs = keras.Input((None, None, 3))
    hidden = layers.Conv2D(4, 3, padding="same", activation="relu")(inputs)
    hidden = layers.UpSampling2D((2, 3))(layers.MaxPooling2D()(hidden))
    model = keras.Model(inputs, layers.Conv2D(2, 1)(layers.Concatenate()([hidden, layers.Conv2D(2, 1)(hidden)])))
    graph_def, names, outputs = freeze_keras(model, (None, None, 3), batch=None)
    data = graph_def.SerializeToString()
    graph = run_pipeline(load_graph_bytes(data), LEVELS[2].pipeline, names, outputs).graph
    result = export_with_report(graph, names, outputs)
    onnx.checker.check_model(result.model, full_check=True)
    counts = result.report.op_counts
    assert counts["Resize"] == 1 and "Tile" not in counts and "Shape" not in counts, counts
    for shape in ((2, 8, 6, 3), (1, 10, 4, 3)):
        feeds = {names[0]: np.random.default_rng(len(shape)).uniform(-1, 1, shape).astype(np.float32)}
        want = run_tf(data, feeds, outputs)[outputs[0]]
        got = run_onnx(result.model, feeds, outputs)[outputs[0]]
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.abs(want).max())


@pytest.mark.tf
@pytest.mark.parametrize("rank", [2, 3])
def test_transposed_convs_with_unknown_spatial_sizes_match_tf(rank: int) -> None:
    """Keras computes a transposed conv's output size from Shape when the input's is unknown
    (stride * size, plus kernel - stride for 'valid'): the ONNX ConvTranspose gets the padding
    that holds for every size."""
    pytest.importorskip("tensorflow")
    keras = pytest.importorskip("keras")
    from compiler.frontends.graphdef import load_graph_bytes
    from compiler.passes import run_pipeline
    from compiler.passes.levels import LEVELS
    from tests.oracle import run_tf
    from tools.make_fixtures import freeze_keras, seed_everything

    layers = keras.layers
    transpose = layers.Conv2DTranspose if rank == 2 else layers.Conv3DTranspose
    seed_everything(14)
    spatial = (None,) * rank
    inputs = keras.Input(spatial + (3,))
    same = transpose(4, 3, strides=2, padding="same")(inputs)
    model = keras.Model(inputs, transpose(2, 3, strides=(3,) * rank, padding="valid")(same))
    graph_def, names, outputs = freeze_keras(model, spatial + (3,), batch=None)
    data = graph_def.SerializeToString()
    graph = run_pipeline(load_graph_bytes(data), LEVELS[2].pipeline, names, outputs).graph
    result = export_with_report(graph, names, outputs)
    onnx.checker.check_model(result.model, full_check=True)
    assert result.report.op_counts["ConvTranspose"] == 2
    for shape in ((2,) + (4, 5, 3)[:rank] + (3,), (1,) + (3, 2, 4)[:rank] + (3,)):
        feeds = {names[0]: np.random.default_rng(len(shape)).uniform(-1, 1, shape).astype(np.float32)}
        want = run_tf(data, feeds, outputs)[outputs[0]]
        got = run_onnx(result.model, feeds, outputs)[outputs[0]]
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.abs(want).max())
