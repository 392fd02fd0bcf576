"""Keras' 1-D layers export as 2-D ONNX windows on one 4-D tensor (compiler/backends/onnx/height_squeezes.py).

TF spells Conv1D, SeparableConv1D, Conv1DTranspose and the 1-D pools as
ExpandDims -> 2-D op -> Squeeze (and a dilated or causal Conv1D with Pad/SpaceToBatchND around it).
The export must hold one ONNX node per layer, with the bias on the Conv,
nothing (no Unsqueeze, Squeeze, Transpose or Reshape) between two convs and
every window 2-D, pass the full checker and match TF within 1e-4 of the
output's largest magnitude.  Biases are random: Keras' zero default would
hide a bias that went missing.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import onnx
import pytest

from compiler.backends.onnx import export_with_report
from compiler.frontends.graphdef import load_graph_bytes
from compiler.passes import run_pipeline
from compiler.passes.levels import LEVELS
from compiler.runtime.onnx_runner import run_onnx
from tests.backends.test_onnx_added_ops import ints
from tests.backends.test_onnx_export import Builder
from tests.backends.test_onnx_height_squeezes import check_against_interpreter

tf = pytest.importorskip("tensorflow")
pytestmark = pytest.mark.tf

_RESHUFFLES = {"Unsqueeze", "Squeeze", "Transpose", "Reshape"}


def _keras_export(build: Callable, input_shape: tuple[int, ...], seed: int) -> tuple[onnx.ModelProto, bytes, list, list]:
    """Freeze the Keras model `build(inputs)` makes, export it after -O2 (which inlines the
    function call Keras makes of a grouped conv), and check the export against TF; returns
    (model, graph bytes, inputs, outputs)."""
    import keras

    from tests.oracle import run_tf
    from tools.make_fixtures import freeze_keras

    keras.utils.set_random_seed(seed)
    inp = keras.Input(input_shape)
    graph_def, inputs, outputs = freeze_keras(keras.Model(inp, build(inp)), input_shape)
    data = graph_def.SerializeToString()
    feeds = {inputs[0]: np.random.default_rng(seed).uniform(-1, 1, (1,) + input_shape).astype(np.float32)}
    graph = run_pipeline(load_graph_bytes(data), LEVELS[2].pipeline, inputs, outputs).graph
    model = export_with_report(graph, inputs, outputs).model
    onnx.checker.check_model(model, full_check=True)
    want = run_tf(data, feeds, outputs)[outputs[0]]
    got = run_onnx(model, feeds, outputs)[outputs[0]]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * np.abs(want).max())
    return model, data, inputs, outputs


def _between_convs(model: onnx.ModelProto) -> list[list[str]]:
    """The op types on the data path from each (transposed) Conv back to the one before it (if any)."""
    producers = {out: node for node in model.graph.node for out in node.output}
    paths = []
    convs = ("Conv", "ConvTranspose")
    for node in model.graph.node:
        if node.op_type not in convs:
            continue
        path, current = [], producers.get(node.input[0])
        while current is not None and current.op_type not in convs:
            path.append(current.op_type)
            current = producers.get(current.input[0])
        if current is not None:
            paths.append(path)
    return paths


def _bias() -> dict:
    return {"bias_initializer": "random_normal"}


def _zoo_stack(x):
    """tools/make_zoo.py's layers_conv1d, with random biases."""
    from keras import layers

    x = layers.Conv1D(8, 3, padding="same", activation="relu", **_bias())(x)
    x = layers.Conv1D(8, 3, dilation_rate=2, padding="causal", **_bias())(x)
    x = layers.SeparableConv1D(8, 3, padding="same", **_bias())(x)
    x = layers.MaxPooling1D(2)(x)
    return layers.Dense(4)(layers.GlobalAveragePooling1D()(x))


def _strided_stack(x):
    """No activations: valid stride 2, same dilation 3, causal, then an average pool."""
    from keras import layers

    x = layers.Conv1D(6, 4, strides=2, padding="valid", **_bias())(x)
    x = layers.Conv1D(5, 3, dilation_rate=3, padding="same", **_bias())(x)
    x = layers.Conv1D(4, 2, padding="causal", **_bias())(x)
    return layers.AveragePooling1D(2, padding="same")(x)


def _separable_stack(x):
    """Depth multiplier 2, a grouped Conv1D, tanh and a strided same max pool."""
    from keras import layers

    x = layers.SeparableConv1D(6, 3, depth_multiplier=2, padding="valid", activation="relu", **_bias())(x)
    x = layers.Conv1D(4, 3, groups=2, padding="same", activation="tanh", **_bias())(x)
    x = layers.SeparableConv1D(4, 5, padding="same", **_bias())(x)
    return layers.MaxPooling1D(3, strides=2, padding="same")(x)


def _transposed_stack(x):
    """Conv1DTranspose: stride 2 same, stride 3 valid with output padding, dilated, then a Conv1D."""
    from keras import layers

    x = layers.Conv1DTranspose(5, 3, strides=2, padding="same", activation="relu", **_bias())(x)
    x = layers.Conv1DTranspose(4, 4, strides=3, padding="valid", output_padding=1, **_bias())(x)
    x = layers.Conv1DTranspose(4, 3, dilation_rate=2, padding="same", **_bias())(x)
    return layers.Conv1D(3, 3, **_bias())(x)


@pytest.mark.parametrize("build, input_shape, seed, expected", [
    (_transposed_stack, (7, 3), 25, ["Unsqueeze", "Transpose", "ConvTranspose", "Relu", "ConvTranspose",
                                     "ConvTranspose", "Conv", "Squeeze", "Transpose"]),
    (_zoo_stack, (16, 4), 21, ["Unsqueeze", "Transpose", "Conv", "Relu", "Conv", "Conv", "Conv", "MaxPool",
                               "GlobalAveragePool", "Squeeze", "Gemm"]),
    (_strided_stack, (19, 3), 22, ["Unsqueeze", "Transpose", "Conv", "Conv", "Conv", "AveragePool", "Squeeze",
                                   "Transpose"]),
    (_separable_stack, (15, 4), 23, ["Unsqueeze", "Transpose", "Conv", "Conv", "Relu", "Conv", "Tanh", "Conv", "Conv",
                                     "MaxPool", "Squeeze", "Transpose"]),
])
def test_keras_1d_layers_export_one_node_per_layer(build, input_shape, seed, expected) -> None:
    model, _, _, _ = _keras_export(build, input_shape, seed)
    assert [node.op_type for node in model.graph.node] == expected
    paths = _between_convs(model)
    assert paths and all(not _RESHUFFLES & set(path) for path in paths), paths
    assert _window_ranks(model) == {2}


def _window_ranks(model: onnx.ModelProto) -> set[int]:
    """How many spatial axes the model's convolutions and pools slide over."""
    windows = ("Conv", "ConvTranspose", "MaxPool", "AveragePool")
    return {len(attr.ints) for node in model.graph.node if node.op_type in windows
            for attr in node.attribute if attr.name == "kernel_shape"}


def test_an_ill_conditioned_conv1d_stack_matches_tf() -> None:
    """Two 128-tap low-pass stages, a windowed-sinusoid filter bank and a log of its power, fed a
    tone far below the bank's band: the log reads differences of large sums (as basic-pitch's
    constant-Q front end does).  onnxruntime's 2-D convs sum as TF's Conv2D does; the 1-D form this
    exported to before measured 8.8e-4 against TF here, the 2-D form 3e-8."""
    from tests.oracle import run_tf
    from tools.make_fixtures import freeze_concrete_function

    taps = (np.sinc(0.5 * (np.arange(128) - 63.5)) * np.hanning(128) * 0.5).astype(np.float32)[:, None, None]
    t = np.arange(128) - 64.0
    freqs = 0.01 * 2 ** (np.arange(24) / 6)
    phases = 2 * np.pi * freqs[None, :] * t[:, None]
    bank = (np.concatenate([np.cos(phases), np.sin(phases)], 1) * np.hanning(128)[:, None]).astype(np.float32)[:, None]

    @tf.function
    def front_end(x):
        for _ in range(2):
            x = tf.nn.conv1d(tf.pad(x, [[0, 0], [64, 64], [0, 0]], mode="REFLECT"), taps, stride=2, padding="VALID")
        y = tf.nn.conv1d(x, bank, stride=32, padding="VALID")
        log_power = tf.math.log(y[..., :24] * y[..., :24] + y[..., 24:] * y[..., 24:] + 1e-10)
        return (log_power - tf.reduce_min(log_power)) / (tf.reduce_max(log_power) - tf.reduce_min(log_power))

    graph_def, inputs, outputs = freeze_concrete_function(
        front_end.get_concrete_function(tf.TensorSpec([1, 2048, 1], tf.float32)))
    data = graph_def.SerializeToString()
    feeds = {inputs[0]: (0.5 * np.sin(2 * np.pi * 0.002 * np.arange(2048))).astype(np.float32).reshape(1, 2048, 1)}
    graph = run_pipeline(load_graph_bytes(data), LEVELS[2].pipeline, inputs, outputs).graph
    model = export_with_report(graph, inputs, outputs).model
    assert _window_ranks(model) == {2}
    want = run_tf(data, feeds, outputs)[outputs[0]]
    got = run_onnx(model, feeds, outputs)[outputs[0]]
    assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max()


def test_zoo_stack_has_no_more_nodes_than_tf2onnx() -> None:
    pytest.importorskip("tf2onnx")
    from compiler.backends.onnx.tf2onnx_compare import compare_with_tf2onnx

    model, data, inputs, outputs = _keras_export(_zoo_stack, (16, 4), 24)
    feeds = {inputs[0]: np.random.default_rng(0).uniform(-1, 1, (1, 16, 4)).astype(np.float32)}
    comparison = compare_with_tf2onnx(data, model, inputs, outputs, feeds)
    assert comparison.gttc.node_count < comparison.tf2onnx.node_count, comparison.format()


# -- the cases that must stay 2-D, built as IR ----------------------------------------------
def _conv1d(b: Builder, x, weights) -> object:
    wide = b("ExpandDims", x, ints(b, [1]), name="expand")
    return b("Conv2D", wide, weights, strides=[1, 1, 1, 1], padding="SAME", name="conv")


def test_a_conv_result_read_in_4d_keeps_its_bias_off_the_shared_tensor() -> None:
    """The 4-D conv result is an output too: the Squeeze's BiasAdd must not ride on the Conv."""
    rng = np.random.default_rng(5)
    b = Builder()
    x = b.input("x", [1, 9, 3])
    conv = _conv1d(b, x, b.const(rng.standard_normal((1, 3, 3, 4)).astype(np.float32)))
    flat = b("Squeeze", conv, squeeze_dims=[1], name="squeeze")
    biased = b("BiasAdd", flat, b.const(rng.standard_normal(4).astype(np.float32)), name="bias")
    feeds = {"x": rng.standard_normal((1, 9, 3)).astype(np.float32)}
    counts = check_against_interpreter(b, feeds, [biased.name, conv.name])
    assert counts["Conv"] == 1 and counts["Add"] == 1, counts


def test_a_run_time_filter_runs_2d() -> None:
    rng = np.random.default_rng(6)
    b = Builder()
    x, w = b.input("x", [1, 9, 3]), b.input("w", [1, 3, 3, 4])
    out = b("Squeeze", _conv1d(b, x, w), squeeze_dims=[1], name="squeeze")
    feeds = {"x": rng.standard_normal((1, 9, 3)).astype(np.float32),
             "w": rng.standard_normal((1, 3, 3, 4)).astype(np.float32)}
    counts = check_against_interpreter(b, feeds, [out.name])
    assert counts["Unsqueeze"] == 1 and counts["Squeeze"] == 1, counts


def test_a_window_taller_than_one_pixel_runs_2d() -> None:
    """ExpandDims at axis 2 makes the input's length the height: the 3x1 window is not 1-D."""
    rng = np.random.default_rng(7)
    b = Builder()
    x = b.input("x", [1, 9, 3])
    tall = b("ExpandDims", x, ints(b, [2]), name="expand")
    conv = b("Conv2D", tall, b.const(rng.standard_normal((3, 1, 3, 4)).astype(np.float32)),
             strides=[1, 1, 1, 1], padding="VALID", name="conv")
    out = b("Squeeze", conv, squeeze_dims=[2], name="squeeze")
    counts = check_against_interpreter(b, {"x": rng.standard_normal((1, 9, 3)).astype(np.float32)}, [out.name])
    assert counts["Conv"] == 1 and counts["Squeeze"] == 1, counts
