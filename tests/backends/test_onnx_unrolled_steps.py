"""Keras 3 TimeDistributed layers, which freeze unrolled (a StridedSlice, the layer's ops and a Pack
operand per step), export as one application of the layer to every step folded into the batch,
and still match TF; a layer that mixes the rows of a step keeps its unrolled form."""
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

pytestmark = pytest.mark.tf


def _exported(layers: Callable, shape: tuple[int, ...], at_o2: bool = True):
    """A Keras model of `layers(inputs)` frozen with batch 2: (export result, feed, Keras' output)."""
    keras = pytest.importorskip("keras")
    from tools.make_fixtures import freeze_keras

    keras.utils.set_random_seed(3)
    inputs = keras.Input(shape)
    model = keras.Model(inputs, layers(keras, inputs))
    graph_def, names, outputs = freeze_keras(model, shape, batch=2)
    graph = load_graph_bytes(graph_def.SerializeToString())
    assert sum(op.type == "Pack" for op in graph) >= 1  # unrolled, one Pack per layer
    if at_o2:
        graph = run_pipeline(graph, LEVELS[2].pipeline, names, outputs).graph
    result = export_with_report(graph, names, outputs)
    onnx.checker.check_model(result.model, full_check=True)
    feed = np.random.RandomState(4).uniform(-1, 1, (2, *shape)).astype(np.float32)
    got = run_onnx(result.model, {names[0]: feed}, outputs)[outputs[0]]
    np.testing.assert_allclose(got, np.asarray(model(feed)), rtol=1e-5, atol=1e-5)
    return result


@pytest.mark.parametrize("at_o2", [False, True])
def test_a_time_distributed_dense_is_one_matmul(at_o2: bool) -> None:
    """Six steps of Dense(5, relu): at -O2 one MatMul, its Add and the Relu on the sequence as it is
    (the time-major Transposes around the steps cancel), where the unrolled form has six of each.
    At -O0 the weights still pass through Identities, so the Dense stays Reshape, Gemm, Reshape."""
    dense = lambda keras, x: keras.layers.TimeDistributed(  # noqa: E731
        keras.layers.Dense(5, activation="relu", bias_initializer="random_normal"))(x)
    result = _exported(dense, (6, 4), at_o2)
    assert result.report.stats["unrolled_steps"] == 1
    expected = {"MatMul": 1, "Add": 1, "Relu": 1} if at_o2 else {"Reshape": 2, "Gemm": 1, "Relu": 1}
    assert result.report.op_counts == expected


def test_time_distributed_convs_and_pools_fold_into_the_batch() -> None:
    """Conv2D then MaxPooling2D, each over 4 frames: both layers fold (frames join the batch of 2)."""
    def layers(keras, x):
        h = keras.layers.TimeDistributed(keras.layers.Conv2D(3, 3, activation="relu"))(x)
        return keras.layers.TimeDistributed(keras.layers.MaxPooling2D())(h)

    result = _exported(layers, (4, 6, 6, 2))
    assert result.report.stats["unrolled_steps"] == 2
    assert result.report.op_counts["Conv"] == 1 and result.report.op_counts["MaxPool"] == 1
    assert "Slice" not in result.report.op_counts and "Concat" not in result.report.op_counts


def test_a_step_that_mixes_its_rows_stays_unrolled() -> None:
    """Centering each step over the batch (a mean over axis 0) is not row-wise: folding the steps
    into the batch would mix rows of different steps, so the layer keeps its per-step ops."""
    def layers(keras, x):
        center = keras.layers.Lambda(lambda t: t - keras.ops.mean(t, axis=0, keepdims=True))
        return keras.layers.TimeDistributed(center)(x)

    result = _exported(layers, (3, 4))
    assert "unrolled_steps" not in result.report.stats
