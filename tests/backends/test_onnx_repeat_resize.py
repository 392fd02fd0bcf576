"""Keras' nearest UpSampling2D (two repeats) exports as one ONNX Resize.

The IR cases spell TF's repeat (ExpandDims -> Tile -> Reshape) by hand, with
the variants the rewrite takes and the ones it must leave alone; gttc's
interpreter on the unrewritten graph is the reference, and a nearest resize
copies elements, so the outputs must be equal.  The TF-marked case freezes a
real Keras UpSampling2D and compares with TF.
"""
from __future__ import annotations

import numpy as np
import onnx
import pytest

from compiler.backends.onnx import export_with_report
from compiler.backends.onnx.repeat_resize import find_repeats
from compiler.ir.graph import Value
from compiler.runtime.interpreter import Interpreter
from compiler.runtime.onnx_runner import run_onnx
from tests.backends.test_onnx_added_ops import ints
from tests.backends.keras_export import assert_matches_keras, export_keras, keras_seeded
from tests.backends.test_onnx_export import Builder

RNG = np.random.default_rng(41)


def _repeat(b: Builder, x: Value, axis: int, count: int, target: list[int], name: str = "") -> Value:
    """TF's repeat of `x` by a scalar `count` along `axis`, reshaped to `target`."""
    expanded = b("ExpandDims", x, ints(b, axis + 1))
    multiples = [1] * 5
    multiples[axis + 1] = count
    return b("Reshape", b("Tile", expanded, ints(b, multiples)), ints(b, target), name=name)


def _exported(b: Builder, feed: np.ndarray, out: Value) -> onnx.ModelProto:
    """Export, check fully, and compare with the interpreter on the unrewritten graph."""
    want = Interpreter(b.graph).run({"x": feed}, [out.name])[out.name]
    result = export_with_report(b.graph, ["x"], [out.name])
    onnx.checker.check_model(result.model, full_check=True)
    got = run_onnx(result.model, {"x": feed}, [out.name])[out.name]
    np.testing.assert_array_equal(got, want)
    return result


def test_rows_then_columns_become_one_resize():
    b = Builder()
    x = b.input("x", [2, 5, 4, 3])
    rows = _repeat(b, x, 1, 2, [2, 10, 4, 3])
    out = b("Relu", _repeat(b, rows, 2, 3, [2, 10, 12, 3]), name="out")
    result = _exported(b, RNG.standard_normal((2, 5, 4, 3)).astype(np.float32), out)
    counts = result.report.op_counts
    assert counts["Resize"] == 1 and not {"Tile", "Reshape", "Unsqueeze"} & set(counts)
    assert result.report.stats["nearest_repeats"] == 2


def test_one_repeat_with_a_dynamic_batch():
    b = Builder()
    x = b.input("x", [-1, 3, 4, 2])
    out = _repeat(b, x, 2, 2, [-1, 3, 8, 2], name="out")
    result = _exported(b, RNG.standard_normal((3, 3, 4, 2)).astype(np.float32), out)
    assert result.report.op_counts["Resize"] == 1
    assert [o.name for o in result.model.graph.output] == ["out"]


def test_spellings_that_are_not_an_image_repeat_stay():
    b = Builder()
    x = b.input("x", [1, 3, 4, 2])
    channels = _repeat(b, x, 3, 2, [1, 3, 4, 4])                 # the channel axis
    interleaved = _repeat(b, x, 1, 2, [1, 3, 8, 2])             # copies folded into the wrong axis
    read = _repeat(b, x, 2, 2, [1, 3, 8, 2])
    tile = read.op.operands[0]
    b("Identity", tile, name="reads_the_tile")                   # an intermediate read elsewhere
    assert not find_repeats(b.graph)
    named = Builder()
    kept = _repeat(named, named.input("x", [1, 3, 4, 2]), 1, 2, [1, 6, 4, 2])
    expand = kept.op.operands[0].op.operands[0].op
    assert len(find_repeats(named.graph)) == 1 and not find_repeats(named.graph, {expand.name})
    assert channels.op.type == interleaved.op.type == "Reshape"


def test_a_named_first_repeat_is_not_merged_away():
    b = Builder()
    x = b.input("x", [1, 3, 3, 2])
    rows = _repeat(b, x, 1, 2, [1, 6, 3, 2], name="rows")
    out = _repeat(b, rows, 2, 2, [1, 6, 6, 2], name="out")
    feed = RNG.standard_normal((1, 3, 3, 2)).astype(np.float32)
    result = export_with_report(b.graph, ["x"], ["rows", "out"])
    got = run_onnx(result.model, {"x": feed}, ["rows", "out"])
    want = Interpreter(b.graph).run({"x": feed}, ["rows", "out"])
    for name in ("rows", "out"):
        np.testing.assert_array_equal(got[name], want[name])
    assert result.report.op_counts["Resize"] == 2 and out.op.type == "Reshape"


@pytest.mark.tf
def test_keras_upsampling_frozen_matches_tf():
    keras = keras_seeded(9)
    inputs = keras.Input((5, 4, 3))
    hidden = keras.layers.UpSampling2D((2, 3), interpolation="nearest")(keras.layers.Conv2D(4, 3, padding="same")(inputs))
    model = keras.Model(inputs, keras.layers.Conv2D(2, 1)(hidden))
    exported = export_keras(model, (5, 4, 3))
    report = exported[0].report
    assert report.op_counts["Resize"] == 1 and "Tile" not in report.op_counts and report.stats["nearest_repeats"] == 2
    assert_matches_keras(model, exported, np.random.default_rng(4).uniform(-1, 1, [1, 5, 4, 3]).astype(np.float32))
