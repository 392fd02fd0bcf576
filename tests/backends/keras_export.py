"""Freeze a Keras model as the fixtures are, export it to ONNX, compare with Keras itself.

Shared by the export-rewrite tests (layer norm, affine chains, nearest repeats),
each of which checks that its rewrite fires on the graph Keras really freezes.
"""
from __future__ import annotations

import numpy as np
import pytest

from compiler.backends.onnx import export_with_report
from compiler.backends.onnx.exporter import ExportResult
from compiler.frontends.graphdef import load_graph_bytes
from compiler.passes import run_pipeline
from compiler.passes.levels import LEVELS
from compiler.runtime.onnx_runner import run_onnx


def keras_seeded(seed: int):
    """Keras, seeded as the fixtures are; the test is skipped without TensorFlow."""
    pytest.importorskip("tensorflow")
    keras = pytest.importorskip("keras")
    from tools.make_fixtures import seed_everything

    seed_everything(seed)
    return keras


def export_keras(model, input_shape: tuple[int, ...], optimize: bool = False
                 ) -> tuple[ExportResult, list[str], list[str]]:
    """(export result, input names, output names) of `model` frozen with batch 1; `optimize` runs
    -O2 first, as `gttc -O2 -o model.onnx` does."""
    from tools.make_fixtures import freeze_keras

    graph_def, names, outputs = freeze_keras(model, input_shape)
    graph = load_graph_bytes(graph_def.SerializeToString())
    if optimize:
        graph = run_pipeline(graph, LEVELS[2].pipeline, names, outputs).graph
    return export_with_report(graph, names, outputs), names, outputs


def assert_matches_keras(model, exported: tuple[ExportResult, list[str], list[str]], feed: np.ndarray,
                         tolerance: float = 1e-5) -> None:
    """onnxruntime on the export agrees with Keras within `tolerance` of the output's magnitude."""
    result, names, outputs = exported
    want = model(feed).numpy()
    got = run_onnx(result.model, {names[0]: feed}, outputs)[outputs[0]]
    np.testing.assert_allclose(got, want, rtol=0, atol=tolerance * np.abs(want).max())
