#!/usr/bin/env python
"""Build the model zoo and measure gttc against TensorFlow and tf2onnx on every model.

    python tools/make_zoo.py [--models a,b] [--families layers,tf1,apps,trained,hub] [--report docs/ZOO.md]
                             [--repeats N] [--merge] [--list]

The zoo is Keras-3 applications (weights=None), small models mixing common
Keras layers, TF1-style graphs (tf.compat.v1, control flow v1), trained
models pip packages ship (tools/zoo_trained.py) and keras-hub's transformer and
vision backbones (tools/zoo_hub.py); the last two are not built unless their
packages are installed.  Each is
frozen once and cached under `.cache/zoo/` (GraphDef, reference feeds and
TensorFlow's outputs, written by tools/make_fixtures.write).  Then, per model,
in this process:

- gttc -O2 (`run_pipeline`), the -O2 graph run in gttc's interpreter vs TF;
- gttc's ONNX export of the -O2 graph (the frozen graph if -O2 failed), full
  checker, in onnxruntime vs TF;
- tf2onnx's conversion of the frozen graph in onnxruntime vs TF;
- node counts of both ONNX models and their median onnxruntime latency
  (1 thread, runs interleaved).

A failure in any step is recorded as its first line and the run goes on.
Every model's result is also kept in `.cache/zoo/results/<name>.json`;
`--merge` puts earlier results of models not run now into the report.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import re
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from tools import zoo_hub, zoo_trained  # noqa: E402
from tools.make_fixtures import Fixture, _big_keras, _he, _keras_fixture, seed_everything  # noqa: E402

ZOO_CACHE = Path(os.environ.get("GTTC_ZOO_CACHE", ROOT / ".cache" / "zoo"))
TOLERANCE = 1e-4  # max|err| / max|ref| a conversion must stay within to count as matching TF
FAMILIES = ("layers", "tf1", "apps", "trained", "hub")


@dataclass(frozen=True)
class ZooModel:
    """One zoo entry: how to build it and which family it belongs to."""

    name: str
    family: str
    build: Callable[[], Fixture]


# --------------------------------------------------------------------------
# Keras applications
# --------------------------------------------------------------------------

# (application, input side, input range). Sides are the smallest sensible ones the
# application accepts with weights=None, to keep the interpreter's run time sane; apps
# with built-in preprocessing (Rescaling/Normalization) take pixels in [0, 255].
_PIXELS = (0.0, 255.0)
_UNIT = (-1.0, 1.0)
_APPS: tuple[tuple[str, int, tuple[float, float]], ...] = (
    ("MobileNet", 64, _UNIT), ("MobileNetV2", 64, _UNIT), ("MobileNetV3Small", 64, _PIXELS),
    ("MobileNetV3Large", 64, _PIXELS), ("ResNet50", 64, _UNIT), ("ResNet50V2", 64, _UNIT),
    ("DenseNet121", 64, _UNIT), ("EfficientNetB0", 64, _PIXELS), ("EfficientNetV2B0", 64, _PIXELS),
    ("VGG16", 64, _UNIT), ("InceptionV3", 96, _UNIT), ("Xception", 96, _UNIT), ("NASNetMobile", 96, _UNIT),
    ("ConvNeXtTiny", 64, _PIXELS), ("VGG19", 64, _UNIT), ("ResNet101", 64, _UNIT), ("ResNet152", 64, _UNIT),
    ("ResNet101V2", 64, _UNIT), ("ResNet152V2", 64, _UNIT), ("InceptionResNetV2", 96, _UNIT),
    ("DenseNet169", 64, _UNIT), ("DenseNet201", 64, _UNIT), ("EfficientNetB1", 64, _PIXELS),
    ("EfficientNetB2", 64, _PIXELS), ("EfficientNetB3", 64, _PIXELS), ("EfficientNetB4", 64, _PIXELS),
    ("EfficientNetB5", 64, _PIXELS), ("EfficientNetB6", 64, _PIXELS), ("EfficientNetB7", 64, _PIXELS),
    ("EfficientNetV2B1", 64, _PIXELS), ("EfficientNetV2B2", 64, _PIXELS), ("EfficientNetV2B3", 64, _PIXELS),
    ("EfficientNetV2S", 64, _PIXELS), ("RegNetX002", 64, _PIXELS), ("RegNetY002", 64, _PIXELS),
)


def _app_models() -> list[ZooModel]:
    return [ZooModel(f"app_{app.lower()}", "apps", _big_keras(app, (side, side, 3), 5000 + i, rng, classes=10,
                                                                  classifier_activation=None))
            for i, (app, side, rng) in enumerate(_APPS)]


# --------------------------------------------------------------------------
# Keras layer models
# --------------------------------------------------------------------------


def _layer_model(name: str, shape: tuple[int, ...], seed: int, make_body: Callable[[Any], Any],
                 note: str, input_range: tuple[float, float] = _UNIT) -> ZooModel:
    """A functional Keras model `make_body(input) -> output` frozen like the fixtures."""

    def build() -> Fixture:
        import keras

        def make():
            inp = keras.Input(shape, name="input")
            return keras.Model(inp, make_body(inp), name=name)

        return _keras_fixture(make, shape, seed, note, input_range)

    return ZooModel(name, "layers", build)


def _convs_1d(x):
    from keras import layers

    x = layers.Conv1D(8, 3, padding="same", activation="relu")(x)
    x = layers.Conv1D(8, 3, dilation_rate=2, padding="causal")(x)
    x = layers.SeparableConv1D(8, 3, padding="same")(x)
    x = layers.MaxPooling1D(2)(x)
    return layers.Dense(4)(layers.GlobalAveragePooling1D()(x))


def _convs_2d(x):
    from keras import layers

    x = layers.Conv2D(8, 3, dilation_rate=2, padding="same", activation="relu")(x)
    x = layers.SeparableConv2D(8, 3, padding="same")(x)
    x = layers.DepthwiseConv2D(3, padding="same")(x)
    x = layers.Conv2DTranspose(6, 3, strides=2, padding="same")(x)
    return layers.Conv2D(4, 1)(x)


def _convs_3d(x):
    from keras import layers

    x = layers.Conv3D(4, 3, padding="same", activation="relu")(x)
    x = layers.MaxPooling3D(2)(x)
    x = layers.Conv3DTranspose(4, 3, strides=2, padding="same")(x)
    x = layers.AveragePooling3D(2)(x)
    return layers.Conv3D(2, 1)(x)


def _resize_pad(x):
    from keras import layers

    x = layers.ZeroPadding2D(((1, 2), (2, 1)))(x)
    x = layers.Conv2D(4, 3)(x)
    x = layers.UpSampling2D(2, interpolation="nearest")(x)
    x = layers.Cropping2D(((1, 0), (2, 1)))(x)
    x = layers.UpSampling2D(2, interpolation="bilinear")(x)
    return layers.Conv2D(3, 1)(x)


def _lstm(x):
    from keras import layers

    return layers.Dense(3)(layers.LSTM(8)(x))


def _relu_lstm_stack(x):
    """The time-series forecaster many tutorials teach: stacked LSTM(50, activation="relu")."""
    from keras import layers

    h = layers.LSTM(50, activation="relu", return_sequences=True)(x)
    return layers.Dense(1)(layers.LSTM(50, activation="relu")(h))


def _gru_stack(x):
    from keras import layers

    x = layers.GRU(6, return_sequences=True)(x)
    return layers.GRU(5)(x)


def _bidirectional(x):
    from keras import layers

    x = layers.Bidirectional(layers.LSTM(4, return_sequences=True))(x)
    return layers.SimpleRNN(3)(x)


def _attention(x):
    from keras import layers

    h = layers.Dense(8)(x)
    a = layers.MultiHeadAttention(num_heads=2, key_dim=4)(h, h)
    h = layers.LayerNormalization()(layers.Add()([h, a]))
    f = layers.Dense(8, activation="gelu")(h)
    return layers.LayerNormalization()(layers.Add()([h, f]))


def _norms_activations(x):
    from keras import activations, layers

    x = layers.Conv2D(8, 3, padding="same")(x)
    x = layers.GroupNormalization(groups=2)(x)
    x = layers.Activation("swish")(x)
    x = layers.Conv2D(8, 1)(x)
    x = layers.LayerNormalization()(x)
    x = layers.Activation("hard_swish")(x)
    x = layers.Dense(6, activation=lambda t: activations.gelu(t, approximate=False))(x)
    return layers.Dense(4, activation=lambda t: activations.gelu(t, approximate=True))(x)


def _embedding(x):
    import keras
    from keras import layers

    ids = keras.ops.cast(x, "int32")  # the feed holds integer-valued floats in [0, 20)
    h = layers.Embedding(20, 6)(ids)
    h = layers.Conv1D(6, 3, padding="same", activation="relu")(h)
    return layers.Dense(3)(layers.GlobalMaxPooling1D()(h))


def _dropout_bn(x):
    from keras import layers

    x = layers.Dense(16)(x)
    x = layers.BatchNormalization()(x)
    x = layers.Dropout(0.3)(layers.ReLU()(x))
    x = layers.Dense(8, activation="tanh")(x)
    return layers.Dense(4, activation="softmax")(layers.Dropout(0.2)(x))


def _audio(x):
    from keras import layers

    mel = layers.MelSpectrogram(fft_length=256, sequence_stride=64, sequence_length=200, num_mel_bins=24,
                                sampling_rate=8000)(x)  # [batch, mel bins, frames]
    h = layers.Conv1D(8, 3, activation="relu")(layers.Permute((2, 1))(mel))
    spectrum = layers.STFTSpectrogram(frame_length=128, frame_step=64, fft_length=128)(layers.Reshape((1024, 1))(x))
    pooled = [layers.GlobalAveragePooling1D()(t) for t in (h, spectrum)]
    return layers.Dense(5)(layers.Concatenate()(pooled))


def _detection_head(x):
    import tensorflow as tf
    from keras import layers

    features = layers.Conv2D(8, 3, strides=2, padding="same", activation="relu")(x)
    boxes = layers.Reshape((64, 4))(layers.Conv2D(4, 1)(features))
    scores = layers.Reshape((64,))(layers.Conv2D(1, 1, activation="sigmoid")(features))

    def kept_scores(pair):  # batch 1: the scores NMS keeps, padded to 5 with a run-time count
        b, s = pair
        kept = tf.image.non_max_suppression(b[0], s[0], 5, iou_threshold=0.5, score_threshold=0.0)
        return tf.pad(tf.gather(s[0], kept), [[0, 5 - tf.shape(kept)[0]]])[None]

    return layers.Lambda(kept_scores)([boxes, scores])


def _layer_models() -> list[ZooModel]:
    return [
        _layer_model("layers_conv1d", (16, 4), 6001, _convs_1d, "Conv1D, causal dilated Conv1D, SeparableConv1D."),
        _layer_model("layers_conv2d", (12, 12, 3), 6002, _convs_2d,
                     "Dilated Conv2D, SeparableConv2D, DepthwiseConv2D, Conv2DTranspose."),
        _layer_model("layers_conv3d", (8, 8, 8, 2), 6003, _convs_3d,
                     "Conv3D, MaxPooling3D, Conv3DTranspose, AveragePooling3D."),
        _layer_model("layers_resize_pad", (10, 10, 3), 6004, _resize_pad,
                     "ZeroPadding2D, UpSampling2D nearest and bilinear, Cropping2D."),
        _layer_model("layers_lstm", (6, 3), 6005, _lstm, "LSTM(8) -> Dense."),
        _layer_model("layers_gru", (6, 3), 6006, _gru_stack, "GRU(6, return_sequences) -> GRU(5)."),
        _layer_model("layers_bidirectional", (6, 3), 6007, _bidirectional,
                     "Bidirectional(LSTM(4), return_sequences) -> SimpleRNN(3)."),
        _layer_model("layers_attention", (5, 4), 6008, _attention,
                     "MultiHeadAttention, LayerNormalization, GELU (erf) feed-forward."),
        _layer_model("layers_norms_activations", (6, 6, 3), 6009, _norms_activations,
                     "GroupNormalization, swish, LayerNormalization, hard_swish, exact and tanh GELU."),
        _layer_model("layers_embedding", (7,), 6010, _embedding, "Embedding(20, 6) of cast ids, Conv1D.",
                     input_range=(0.0, 20.0)),
        _layer_model("layers_dropout_bn", (10,), 6011, _dropout_bn, "Dense, BatchNormalization, Dropout (inference)."),
        _layer_model("layers_audio", (1024,), 6012, _audio,
                     "MelSpectrogram (RFFT) -> Conv1D, STFTSpectrogram (log), Dense."),
        _layer_model("layers_relu_lstm", (20, 1), 6014, _relu_lstm_stack,
                     "LSTM(50, relu, return_sequences) -> LSTM(50, relu) -> Dense(1)."),
        _layer_model("layers_detection_head", (16, 16, 3), 6013, _detection_head,
                     "Conv2D box and score heads, NonMaxSuppressionV3, Pad by a run-time count."),
    ]


# --------------------------------------------------------------------------
# TF1-style graphs
# --------------------------------------------------------------------------


def _tf1_model(name: str, seed: int, shapes: Mapping[str, Sequence[int]], body: Callable[..., Any],
               note: str) -> ZooModel:
    """A tf.compat.v1 graph with control flow v1: float placeholders -> `body(tf, rng, *inputs)` -> `output`."""

    def build() -> Fixture:
        import tensorflow as tf

        from tests.oracle import tf1_control_flow_graph

        seed_everything(seed)
        with tf1_control_flow_graph(tf) as graph:
            inputs = [tf.compat.v1.placeholder(tf.float32, list(s), name=n) for n, s in shapes.items()]
            tf.identity(body(tf, np.random.RandomState(seed), *inputs), name="output")
        feed_rng = np.random.RandomState(seed + 2)
        feeds = {n: feed_rng.uniform(-1, 1, list(s)).astype(np.float32) for n, s in shapes.items()}
        return Fixture(graph.as_graph_def(), list(shapes), ["output"], feeds, f"TF1 graph: {note}")

    return ZooModel(name, "tf1", build)


def _tf1_cond(tf, rng, x):
    w = tf.constant(_he(rng, [8, 8]))
    pred = tf.reduce_sum(x) > 0.0
    y = tf.compat.v1.cond(pred, lambda: tf.tanh(tf.matmul(x, w)), lambda: tf.nn.relu(x) - 1.0)
    z = tf.compat.v1.cond(tf.logical_not(pred), lambda: y * 2.0, lambda: y + 0.5)
    return z


def _tf1_while(tf, rng, x):
    w = tf.constant((rng.standard_normal([8, 8]) * 0.3).astype(np.float32))

    def body(i, h, acc):
        h = tf.tanh(tf.matmul(h, w))
        return i + 1, h, acc + h

    _, _, acc = tf.compat.v1.while_loop(lambda i, h, acc: i < 4, body, [tf.constant(0), x, tf.zeros_like(x)])
    return acc


def _tf1_convs(tf, rng, x):
    y = tf.nn.conv2d(x, _he(rng, [3, 3, 4, 6]), 1, "SAME", dilations=2)  # SpaceToBatchND/BatchToSpaceND
    y = tf.nn.conv2d_transpose(y, _he(rng, [3, 3, 5, 6]), [1, 16, 16, 5], 2, "SAME")
    y = tf.nn.depth_to_space(tf.nn.space_to_depth(y, 2), 2)
    y = tf.nn.local_response_normalization(y, depth_radius=2)
    v = tf.reshape(y, [1, 4, 8, 8, 5])
    v = tf.nn.conv3d(v, _he(rng, [2, 3, 3, 5, 4]), [1, 1, 1, 1, 1], "SAME")
    v = tf.nn.max_pool3d(v, 2, 2, "VALID") + tf.nn.avg_pool3d(v, 2, 2, "VALID")
    v = tf.nn.conv3d_transpose(v, _he(rng, [2, 2, 2, 3, 4]), [1, 4, 8, 8, 3], [1, 2, 2, 2, 1], "SAME")
    return tf.reduce_mean(v, axis=[1, 2, 3])


def _tf1_math(tf, rng, x):
    a = tf.math.erfc(x) + tf.math.divide_no_nan(x, tf.nn.relu(x))
    a = tf.math.cumsum(a, axis=1) + tf.math.cumsum(x, axis=1, exclusive=True, reverse=True)
    finite = tf.cast(tf.math.is_finite(a), tf.float32)
    anyall = tf.cast(tf.reduce_any(x > 0.9, axis=1, keepdims=True), tf.float32) + tf.cast(
        tf.reduce_all(x > -0.9, axis=1, keepdims=True), tf.float32)
    e = tf.einsum("bi,ij->bj", a * finite + anyall, tf.constant(_he(rng, [8, 8])))
    return e + tf.nn.leaky_relu(e, 0.1) + tf.nn.softplus(-e) + tf.math.softsign(e)


def _tf1_indexing(tf, rng, x):
    values, indices = tf.math.top_k(x, 3)
    hot = tf.one_hot(indices, 8, dtype=tf.float32)
    r = tf.cast(tf.range(0, 8, 1), tf.float32)
    picked = tf.gather_nd(x, [[0, 1], [0, 5], [0, 2]])
    scattered = tf.scatter_nd([[1], [6]], picked[:2], [8])
    rolled = tf.roll(tf.reverse(x, [1]), shift=3, axis=1)
    chosen = tf.where(x > 0, rolled, -rolled)
    positives = tf.reduce_sum(tf.gather_nd(x, tf.where(x > 0)))  # Where: dynamic shape
    distinct = tf.reduce_sum(tf.unique(tf.round(x[0] * 2.0))[0])
    return tf.reduce_sum(hot, axis=1) * values[:, :1] + r * 0.01 + scattered + chosen + positives + distinct


def _tf1_image(tf, rng, img, boxes):
    corners = tf.sort(tf.abs(tf.reshape(boxes, [4, 2, 2])), axis=1)  # y1 <= y2, x1 <= x2 per box
    b = tf.reshape(tf.transpose(corners, [0, 2, 1]), [4, 4])
    b = tf.gather(b, [0, 2, 1, 3], axis=1)
    crops = tf.image.crop_and_resize(img, b, tf.zeros([4], tf.int32), [5, 5])
    bicubic = tf.compat.v1.image.resize_bicubic(img, [12, 12])
    area = tf.compat.v1.image.resize_area(bicubic, [6, 6])
    scores = tf.reduce_mean(crops, axis=[1, 2, 3])
    keep = tf.image.non_max_suppression(b, scores, 3, iou_threshold=0.5)
    picked = tf.reduce_sum(tf.gather(scores, keep))
    return tf.reduce_mean(area, axis=[1, 2]) + picked


def _tf1_fake_quant(tf, rng, x):
    a = tf.quantization.fake_quant_with_min_max_args(x, -0.8, 0.8, num_bits=8)
    b = tf.quantization.fake_quant_with_min_max_vars(x * 2.0, tf.constant(-1.5), tf.constant(1.5), num_bits=8)
    return a + b


def _tf1_models() -> list[ZooModel]:
    vec = {"input": (1, 8)}
    return [
        _tf1_model("tf1_cond", 7001, vec, _tf1_cond, "two tf.compat.v1.cond on a data-dependent predicate."),
        _tf1_model("tf1_while_loop", 7002, vec, _tf1_while, "tf.compat.v1.while_loop, 4 iterations."),
        _tf1_model("tf1_convs", 7003, {"input": (1, 8, 8, 4)}, _tf1_convs,
                   "dilated conv2d, conv2d_transpose, space_to_depth/depth_to_space, LRN, conv3d, 3-D pools, "
                   "conv3d_transpose."),
        _tf1_model("tf1_math", 7004, vec, _tf1_math,
                   "erfc, divide_no_nan, cumsum, is_finite, reduce_any/all, einsum, leaky_relu, softplus, "
                   "softsign."),
        _tf1_model("tf1_indexing", 7005, vec, _tf1_indexing,
                   "top_k, one_hot, range, gather_nd, scatter_nd, reverse, roll, where (select and indices), unique."),
        _tf1_model("tf1_image", 7006, {"input": (1, 8, 8, 3), "boxes": (4, 4)}, _tf1_image,
                   "crop_and_resize, resize_bicubic, resize_area, non_max_suppression (V3), sort (TopKV2)."),
        _tf1_model("tf1_fake_quant", 7007, vec, _tf1_fake_quant,
                   "fake_quant_with_min_max_args and _vars."),
    ]


def zoo() -> dict[str, ZooModel]:
    """Every zoo model by name, families in FAMILIES order (the report's row order)."""
    models = _layer_models() + _tf1_models() + _app_models() + [
        ZooModel(name, "trained", build) for name, build in zoo_trained.BUILDERS.items()] + [
        ZooModel(name, "hub", build) for name, build in zoo_hub.BUILDERS.items()]
    order = {family: i for i, family in enumerate(FAMILIES)}
    return {m.name: m for m in sorted(models, key=lambda m: order[m.family])}


# --------------------------------------------------------------------------
# measuring one model
# --------------------------------------------------------------------------


@dataclass
class Outcome:
    """One conversion checked against TF: its max relative error, or why it failed."""

    max_rel: Optional[float] = None
    failure: str = ""

    @property
    def matches(self) -> bool:
        return not self.failure and self.max_rel is not None and self.max_rel <= TOLERANCE


@dataclass
class Row:
    """Everything the report says about one model."""

    model: str
    family: str
    nodes: Optional[int] = None
    build: str = ""                      # why the model could not be built, if it could not
    o2: Outcome = field(default_factory=Outcome)
    onnx: Outcome = field(default_factory=Outcome)
    tf2onnx: Outcome = field(default_factory=Outcome)
    gttc_nodes: Optional[int] = None
    tf2onnx_nodes: Optional[int] = None
    gttc_ms: Optional[float] = None
    tf2onnx_ms: Optional[float] = None

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Row":
        fields = dict(data)
        for key in ("o2", "onnx", "tf2onnx"):
            fields[key] = Outcome(**fields[key])
        return cls(**fields)


def failure_reason(err: BaseException) -> str:
    """The error's type and first line: what the table shows for a failed step."""
    text = str(err).strip()
    first = text.splitlines()[0] if text else "(no message)"
    return f"{type(err).__name__}: {first}"[:300]


def outcome_of(expected: Mapping[str, np.ndarray], got: Mapping[str, np.ndarray]) -> Outcome:
    """Compare a conversion's outputs with TF's; shape or missing-output mismatches are failures."""
    from compiler.runtime.verify import compare_outputs

    report = compare_outputs(expected, got)
    notes = [f"{o.name}: {o.note}" for o in report.outputs if o.note]
    return Outcome(report.max_rel, f"wrong outputs ({'; '.join(notes)})" if notes else "")


def _attempt(step: Callable[[], Any]) -> tuple[Any, str]:
    """(step's result, "") or (None, its failure reason): one model's failure never stops the run."""
    try:
        return step(), ""
    except Exception as err:  # noqa: BLE001 - every failure is data for the table
        return None, failure_reason(err)


def load_or_build(entry: ZooModel):
    """The cached model (tests.conftest.Model), building and caching it first if needed."""
    from tests.conftest import load_model_fixture
    from tools.make_fixtures import write

    if not (ZOO_CACHE / f"{entry.name}.json").exists():
        ZOO_CACHE.mkdir(parents=True, exist_ok=True)
        write(entry.build(), entry.name, str(ZOO_CACHE))
    return load_model_fixture(entry.name, ZOO_CACHE)


def measure(entry: ZooModel, repeats: int) -> Row:
    """Build (or load) one model and run every conversion and check on it."""
    from compiler.backends.onnx import export_with_report
    from compiler.backends.onnx.tf2onnx_compare import convert_with_tf2onnx
    from compiler.frontends.graphdef import load_graph
    from compiler.passes import run_pipeline
    from compiler.passes.levels import LEVELS
    from compiler.runtime.interpreter import run_graph

    row = Row(entry.name, entry.family)
    model, row.build = _attempt(lambda: load_or_build(entry))
    if model is None:
        return row
    graph, failure = _attempt(lambda: load_graph(model.path))
    row.nodes = None if graph is None else len(graph)
    o2, failure = _after(failure, lambda: run_pipeline(graph, LEVELS[2].pipeline, model.inputs,
                                                       model.outputs).graph)
    row.o2 = _checked(lambda: run_graph(o2, model.feeds, model.outputs), model.expected, failure)
    source = o2 if o2 is not None else graph
    exported, failure = _after("" if source is not None else failure,
                               lambda: export_with_report(source, model.inputs, model.outputs).model)
    ours, row.onnx = _run_onnx(exported, failure, model)
    theirs_model, failure = _attempt(lambda: convert_with_tf2onnx(model.data, model.inputs, model.outputs))
    theirs, row.tf2onnx = _run_onnx(theirs_model, failure, model)
    row.gttc_nodes = _node_count(exported)
    row.tf2onnx_nodes = _node_count(theirs_model)
    ran = [runner if not outcome.failure else None  # a session that loads but fails to run is not timed
           for runner, outcome in ((ours, row.onnx), (theirs, row.tf2onnx))]
    row.gttc_ms, row.tf2onnx_ms = _latencies(ran, model.feeds, repeats)
    return row


def _after(failure: str, step: Callable[[], Any]) -> tuple[Any, str]:
    """`step` attempted, unless the step it depends on failed (then that failure again)."""
    return (None, failure) if failure else _attempt(step)


def _run_onnx(onnx_model, failure: str, model) -> tuple[Any, Outcome]:
    """An onnxruntime session of the converted model (None if none) and its outputs checked against TF."""
    from compiler.runtime.onnx_runner import OnnxRunner

    runner, failure = _after(failure, lambda: OnnxRunner(onnx_model))
    return runner, _checked(lambda: runner.run(model.feeds, model.outputs), model.expected, failure)


def _checked(run: Callable[[], Mapping[str, np.ndarray]], expected: Mapping[str, np.ndarray],
             failure: str) -> Outcome:
    """Run a conversion (unless an earlier step failed) and compare it with TF."""
    got, failure = _after(failure, run)
    return Outcome(failure=failure) if failure else outcome_of(expected, got)


def _node_count(onnx_model) -> Optional[int]:
    return None if onnx_model is None else len(onnx_model.graph.node)


def _latencies(runners: Sequence[Any], feeds: Mapping[str, np.ndarray],
               repeats: int) -> tuple[Optional[float], ...]:
    """Median ms of each runner that loaded (None for the others), timed interleaved, 1 thread."""
    from compiler.runtime.onnx_runner import time_interleaved

    live = [r for r in runners if r is not None]
    if not live or repeats <= 0:
        return tuple(None for _ in runners)
    times, failure = _attempt(lambda: time_interleaved(live, feeds, repeats))
    if failure:
        return tuple(None for _ in runners)
    medians = iter(statistics.median(t) * 1e3 for t in times)
    return tuple(next(medians) if r is not None else None for r in runners)


# --------------------------------------------------------------------------
# the report
# --------------------------------------------------------------------------

COLUMNS = ("model", "family", "TF nodes", "-O2", "-O2 max err", "ONNX", "ONNX max err", "gttc nodes",
           "tf2onnx", "tf2onnx max err", "tf2onnx nodes", "gttc ms", "tf2onnx ms", "ratio")
_OP_PATTERNS = (
    re.compile(r"op type '([A-Za-z0-9_]+)'"),
    re.compile(r"node '[^']*' \(([A-Za-z0-9_]+)\)"),
    re.compile(r"Tensorflow op \[[^\]]*: ([A-Za-z0-9_]+)\] is not supported"),
    re.compile(r"In Node, \(\"[^\"]*\", ([A-Za-z0-9_]+),"),  # onnxruntime refusing a node tf2onnx emitted
)
_NOR_FOR = re.compile(r"\(nor for ([A-Za-z0-9_, ]+)\)")


def op_types_in(reason: str) -> list[str]:
    """The op types a failure reason names, in order of appearance, without repeats."""
    found = [m.group(1) for pattern in _OP_PATTERNS for m in pattern.finditer(reason)]
    for m in _NOR_FOR.finditer(reason):
        found.extend(part.strip() for part in m.group(1).split(","))
    return list(dict.fromkeys(name for name in found if name))


def verdict(outcome: Outcome) -> str:
    """`yes` / `NO` (ran, outside tolerance) / `FAIL` (+ the op types the failure names)."""
    if outcome.failure:
        ops = op_types_in(outcome.failure)
        return "FAIL" + (f" ({', '.join(ops[:3])}{', ...' if len(ops) > 3 else ''})" if ops else "")
    return "yes" if outcome.matches else "NO"


def _num(value: Optional[float], spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _cells(row: Row) -> list[str]:
    if row.build:
        return [row.model, row.family, "-", "not built"] + ["-"] * (len(COLUMNS) - 4)
    ratio = row.gttc_ms / row.tf2onnx_ms if row.gttc_ms and row.tf2onnx_ms else None
    return [row.model, row.family, _num(row.nodes, "d"),
            verdict(row.o2), _num(row.o2.max_rel, ".1e"),
            verdict(row.onnx), _num(row.onnx.max_rel, ".1e"), _num(row.gttc_nodes, "d"),
            verdict(row.tf2onnx), _num(row.tf2onnx.max_rel, ".1e"), _num(row.tf2onnx_nodes, "d"),
            _num(row.gttc_ms, ".3f"), _num(row.tf2onnx_ms, ".3f"), _num(ratio, ".2f")]


def format_table(rows: Sequence[Row]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "|".join(" --- " for _ in COLUMNS) + "|"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in _cells(r)) + " |" for r in rows]
    return "\n".join(lines)


def failures(rows: Sequence[Row]) -> list[tuple[str, str, str]]:
    """(model, step, reason) of every failed step, in row order."""
    found = []
    for r in rows:
        steps = [("build", r.build)] if r.build else [
            ("-O2", r.o2.failure), ("ONNX", r.onnx.failure), ("tf2onnx", r.tf2onnx.failure)]
        found += [(r.model, step, reason) for step, reason in steps if reason]
    return found


def group_by_op_type(found: Sequence[tuple[str, str, str]]) -> dict[str, list[str]]:
    """Op type -> `model (step)` entries whose failure names it; `(no op named)` for the rest. Sorted."""
    groups: dict[str, list[str]] = {}
    for model, step, reason in found:
        for op_type in op_types_in(reason) or ["(no op named)"]:
            groups.setdefault(op_type, []).append(f"{model} ({step})")
    return dict(sorted(groups.items()))


def summary(rows: Sequence[Row]) -> list[str]:
    """The headline counts."""
    built = [r for r in rows if not r.build]
    both = [r for r in built if r.gttc_nodes is not None and r.tf2onnx_nodes is not None]
    timed = [r for r in built if r.gttc_ms and r.tf2onnx_ms]
    count = lambda pred: sum(1 for r in built if pred(r))  # noqa: E731
    return [
        f"- models built: {len(built)} of {len(rows)} run",
        f"- gttc -O2 keeps TF's numbers (max rel err <= {TOLERANCE:g}): {count(lambda r: r.o2.matches)}",
        f"- gttc ONNX export works: {count(lambda r: not r.onnx.failure)}; matches TF within {TOLERANCE:g}: "
        f"{count(lambda r: r.onnx.matches)}",
        f"- tf2onnx converts and runs: {count(lambda r: not r.tf2onnx.failure)}; matches TF within "
        f"{TOLERANCE:g}: {count(lambda r: r.tf2onnx.matches)}",
        f"- tf2onnx matches but gttc does not: "
        f"{', '.join(r.model for r in built if r.tf2onnx.matches and not r.onnx.matches) or 'none'}",
        f"- both convert: {len(both)}; gttc has no more nodes than tf2onnx: "
        f"{sum(1 for r in both if r.gttc_nodes <= r.tf2onnx_nodes)}",
        f"- both timed: {len(timed)}; gttc latency <= 1.0x tf2onnx: "
        f"{sum(1 for r in timed if r.gttc_ms <= r.tf2onnx_ms)}",
    ]


def render_report(rows: Sequence[Row], command: str, date: str, not_run: Sequence[str]) -> str:
    """The whole docs/ZOO.md text."""
    found = failures(rows)
    parts = [
        "# Model zoo: gttc against TensorFlow and tf2onnx",
        "",
        f"Generated by `{command}` on {date}, {platform.machine()} machine with {os.cpu_count()} cores "
        "(shared). Do not edit by hand: rerun the script. With `--merge`/`--no-run`, rows of models this "
        "command did not run are the results earlier runs saved in `.cache/zoo/results/`.",
        "",
        "Applications are built with `weights=None, classes=10, classifier_activation=None` (logits: a saturated softmax would hide errors) at a small input side (64, or 96 where the "
        "application needs more; `_APPS` in the script), BatchNormalization statistics randomized; layer models "
        "and TF1 graphs are small by design. `trained` models carry the weights their pip package ships "
        f"(tools/zoo_trained.py; `{zoo_trained.INSTALL}`). Every model is frozen with batch 1 (deepcut, "
        "chars2vec: a row per character or word, as their packages run them; musicnn: two patches, "
        "inaSpeechSegmenter: four) and seeded. `hub` models are keras-hub 0.32's backbones at two layers of "
        f"width 32, random weights, batch 2 and 16 tokens or 32 x 32 pixels (tools/zoo_hub.py; `{zoo_hub.INSTALL}`); "
        "`_dyn` ones leave the batch and length to run time.",
        "",
        "Per model: TF nodes of the frozen GraphDef; `-O2`: gttc's -O2 graph run in gttc's interpreter vs TF; "
        "`ONNX`: gttc's ONNX export of the -O2 graph (of the frozen graph where -O2 failed; full checker) in "
        "onnxruntime vs TF; `tf2onnx`: tf2onnx "
        "1.17's conversion of the frozen graph in onnxruntime vs TF. `yes` = max|err|/max|ref| <= "
        f"{TOLERANCE:g}, `NO` = ran but outside it, `FAIL` = no result (op types named by the error in "
        "brackets; full reasons below). Latency: median onnxruntime ms, 1 thread, runs interleaved; "
        "ratio = gttc / tf2onnx.",
        "",
        "## Summary",
        "",
        *summary(rows),
        "",
        "## Models",
        "",
        format_table(rows),
        "",
        "## Failures by op type",
        "",
        "The op types failure messages name, with the models (and steps) they stopped.",
        "",
    ]
    parts += [f"- `{op}`: {', '.join(users)}" for op, users in group_by_op_type(found).items()] or ["none"]
    parts += ["", "## Failure reasons", ""]
    parts += [f"- {model}, {step}: {reason}" for model, step, reason in found] or ["none"]
    parts += ["", "## Not run this time", ""]
    parts += [f"The script supports these too: {', '.join(not_run)}." if not_run else "Every zoo model was run."]
    return "\n".join(parts) + "\n"


# --------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------


def select(models: Optional[str], families: Optional[str]) -> list[ZooModel]:
    """The zoo entries asked for, in zoo order; unknown names are an error."""
    entries = zoo()
    wanted_families = set(filter(None, (families or ",".join(FAMILIES)).split(",")))
    unknown = sorted(wanted_families - set(FAMILIES))
    names = [n.strip() for n in models.split(",") if n.strip()] if models else None
    unknown += sorted(set(names or ()) - set(entries))
    if unknown:
        raise SystemExit(f"make_zoo: unknown models or families: {', '.join(unknown)}")
    return [e for e in entries.values()
            if (names is None or e.name in names) and (names is not None or e.family in wanted_families)]


def _result_path(name: str) -> Path:
    return ZOO_CACHE / "results" / f"{name}.json"


def _save(row: Row) -> None:
    path = _result_path(row.model)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(row.to_json(), indent=1) + "\n")


def _previous(names: Sequence[str]) -> dict[str, Row]:
    return {n: Row.from_json(json.loads(_result_path(n).read_text())) for n in names if _result_path(n).exists()}


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", help="comma-separated zoo model names (default: every model of --families)")
    parser.add_argument("--families", help=f"comma-separated families: {','.join(FAMILIES)} (default: all)")
    parser.add_argument("--report", default=str(ROOT / "docs" / "ZOO.md"), help="markdown report to write")
    parser.add_argument("--repeats", type=int, default=20, help="timed onnxruntime runs per model and tool")
    parser.add_argument("--merge", action="store_true", help="report earlier results of models not run now")
    parser.add_argument("--no-run", action="store_true", help="only write the report from earlier results")
    parser.add_argument("--list", action="store_true", help="list the zoo and exit")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(f"{e.name} ({e.family})" for e in zoo().values()))
        return 0
    chosen = [] if args.no_run else select(args.models, args.families)
    done = {}
    for entry in chosen:
        row = measure(entry, args.repeats)
        _save(row)
        done[row.model] = row
        print(" | ".join(_cells(row)), file=sys.stderr, flush=True)
    if args.merge or args.no_run:
        done = {**_previous([n for n in zoo() if n not in done]), **done}
    rows = [done[n] for n in zoo() if n in done]
    command = "python tools/make_zoo.py " + " ".join(argv if argv is not None else sys.argv[1:])
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    text = render_report(rows, command.strip(), date, [n for n in zoo() if n not in done])
    Path(args.report).write_text(text)
    print(f"make_zoo: {len(rows)} models -> {args.report}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
