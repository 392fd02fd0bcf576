"""A repeat by a scalar count (Keras' nearest UpSampling1D/2D/3D, RepeatVector) exports as a nearest
ONNX Resize, repeats in a row as one.

The IR cases spell TF's repeat (ExpandDims -> Tile -> Reshape) by hand, with the variants the
lowering takes and the ones it must leave alone; gttc's interpreter is the reference, and a
nearest resize copies elements, so the outputs must be equal.  The TF-marked cases freeze real
Keras layers and compare with TF.
"""
from __future__ import annotations

import numpy as np
import onnx
import pytest

from compiler.backends.onnx import export_with_report
from compiler.ir.dtypes import DType
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
    multiples = [1] * (len(target) + 1)
    multiples[axis + 1] = count
    return b("Reshape", b("Tile", expanded, ints(b, multiples)), ints(b, target), name=name)


def _exported(b: Builder, feed: np.ndarray, *outs: Value):
    """Export, check fully, and compare every output with the interpreter's."""
    names = [out.name for out in outs]
    want = Interpreter(b.graph).run({"x": feed}, names)
    result = export_with_report(b.graph, ["x"], names)
    onnx.checker.check_model(result.model, full_check=True)
    got = run_onnx(result.model, {"x": feed}, names)
    for name in names:
        np.testing.assert_array_equal(got[name], want[name])
    return result


def _feed(shape: list[int]) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def test_rows_then_columns_become_one_resize():
    b = Builder()
    x = b.input("x", [2, 5, 4, 3])
    rows = _repeat(b, x, 1, 2, [2, 10, 4, 3])
    out = b("Relu", _repeat(b, rows, 2, 3, [2, 10, 12, 3]), name="out")
    result = _exported(b, _feed([2, 5, 4, 3]), out)
    counts = result.report.op_counts
    assert counts["Resize"] == 1 and not {"Tile", "Reshape", "Unsqueeze"} & set(counts)
    assert result.report.stats["repeats_as_resize"] == 2


@pytest.mark.parametrize("shape, axes", [([2, 6, 3], [1]), ([2, 3, 4, 2, 3], [2, 4, 3]), ([1, 3, 4], [2]),
                                         ([1, 3, 4, 2], [3, 0]), ([2, 3, 4, 5], [0, 1, 2, 3])])
def test_any_axis_up_to_rank_four_and_the_last_three_of_five(shape: list[int], axes: list[int]):
    """Repeats in a row are one Resize; a 5-D one resizes the tensor viewed as 4-D."""
    b = Builder()
    out = b("Relu", _repeats(b, b.input("x", shape), shape, axes), name="out")
    counts = _exported(b, _feed(shape), out).report.op_counts
    assert counts["Resize"] == 1 and not {"Tile", "Unsqueeze"} & set(counts)
    assert counts.get("Reshape", 0) == (2 if len(shape) == 5 else 0)


def test_other_five_d_repeats_keep_their_tiles():
    """onnxruntime's 5-D nearest Resize is slower than the Tiles."""
    b = Builder()
    out = b("Relu", _repeats(b, b.input("x", [1, 3, 4, 2, 2]), [1, 3, 4, 2, 2], [1]), name="out")
    counts = _exported(b, _feed([1, 3, 4, 2, 2]), out).report.op_counts
    assert counts["Tile"] == 1 and "Resize" not in counts


def _repeats(b: Builder, x: Value, shape: list[int], axes: list[int]) -> Value:
    """Repeat `axes` of x in turn, axis n by n + 2."""
    size = list(shape)
    for n, axis in enumerate(axes):
        size[axis] *= 2 + n
        x = _repeat(b, x, axis, 2 + n, list(size))
    return x


def test_repeats_of_unit_axes_are_one_expand():
    b = Builder()
    x = b.input("x", [2, 1, 3, 1])
    rows = _repeat(b, x, 1, 4, [2, 4, 3, 1])
    out = b("Relu", _repeat(b, rows, 3, 2, [2, 4, 3, 2]), name="out")
    counts = _exported(b, _feed([2, 1, 3, 1]), out).report.op_counts
    assert counts["Expand"] == 1 and not {"Tile", "Resize", "Reshape"} & set(counts)


def test_a_broadcast_stored_innermost_expands_in_tf_order():
    """Grouped-query attention repeats key heads of a tensor transposed to [N, H, T, D]: stored
    untransposed ([N, T, H, D, 1]) the copies would go element by element along the innermost
    axis, so the Expand reads the heads in TF's order and copies whole [T, D] rows."""
    b = Builder()
    x = b.input("x", [2, 7, 2, 8])
    heads = b("Transpose", x, ints(b, [0, 2, 1, 3]))
    grouped = b("ExpandDims", heads, ints(b, 2))
    out = b("Reshape", _repeat(b, grouped, 2, 2, [2, 2, 2, 7, 8]), ints(b, [2, 4, 7, 8]), name="out")
    result = _exported(b, _feed([2, 7, 2, 8]), out)
    expand = next(n for n in result.model.graph.node if n.op_type == "Expand")
    copies = next(t for t in result.model.graph.initializer if t.name == expand.input[1])
    assert onnx.numpy_helper.to_array(copies).tolist() == [1, 1, 2, 1, 1]


def test_one_repeat_with_a_dynamic_batch():
    b = Builder()
    x = b.input("x", [-1, 3, 4, 2])
    out = _repeat(b, x, 2, 2, [-1, 3, 8, 2], name="out")
    result = _exported(b, _feed([3, 3, 4, 2]), out)
    assert result.report.op_counts["Resize"] == 1
    assert [o.name for o in result.model.graph.output] == ["out"]


def test_a_five_d_repeat_with_a_dynamic_batch():
    b = Builder()
    x = b.input("x", [-1, 2, 3, 2, 2])
    depth = _repeat(b, x, 2, 2, [-1, 2, 6, 2, 2])
    out = _repeat(b, depth, 4, 3, [-1, 2, 6, 2, 6], name="out")
    counts = _exported(b, _feed([3, 2, 3, 2, 2]), out).report.op_counts
    assert counts["Resize"] == 1 and counts["Reshape"] == 2 and "Tile" not in counts


def _columns_twice(b: Builder, x: Value) -> Value:
    return b("Tile", b("ExpandDims", x, ints(b, 3)), ints(b, [1, 1, 1, 2, 1]))


def _run_time_target(b: Builder, source: Value, axis: int, count: int) -> Value:
    """TF's repeat target built at run time: Shape(source) with `axis` times `count`."""
    shape = b("Shape", source, out_type=DType.INT32)
    piece = lambda lo, hi, **masks: b("StridedSlice", shape, ints(b, [lo]), ints(b, [hi]), ints(b, [1]),  # noqa: E731
                                      Index=DType.INT32, **masks)
    grown = b("ExpandDims", b("Mul", b.const(np.int32(count)), piece(axis, axis + 1, shrink_axis_mask=1)), ints(b, 0))
    return b("ConcatV2", piece(0, axis), grown, piece(axis + 1, 0, end_mask=1), ints(b, 0), N=3)


def test_targets_computed_from_shape_at_run_time():
    """Height and width unknown: the target is checked element by element; one read from
    another tensor's shape is not a repeat."""
    b = Builder()
    x, other = b.input("x", [-1, -1, -1, 3]), b.input("other", [-1, -1, -1, 3])
    b("Reshape", _columns_twice(b, x), _run_time_target(b, x, 2, 2), name="repeat")
    b("Reshape", _columns_twice(b, x), _run_time_target(b, other, 2, 2), name="foreign")
    feeds = {"x": _feed([2, 3, 4, 3]), "other": _feed([2, 3, 4, 3])}
    names = ["repeat", "foreign"]
    result = export_with_report(b.graph, list(feeds), names)
    onnx.checker.check_model(result.model, full_check=True)
    got, want = run_onnx(result.model, feeds, names), Interpreter(b.graph).run(feeds, names)
    for name in names:
        np.testing.assert_array_equal(got[name], want[name])
    assert result.report.op_counts["Resize"] == 1 and result.report.op_counts["Tile"] == 1


def test_spellings_that_are_not_a_repeat_stay():
    b = Builder()
    x = b.input("x", [1, 3, 4, 2])
    interleaved = _repeat(b, x, 1, 2, [1, 3, 8, 2], name="interleaved")  # copies folded into the wrong axis
    read = _repeat(b, x, 2, 2, [1, 3, 8, 2], name="read")
    tile = read.op.operands[0]
    reader = b("Identity", tile, name="reads_the_tile")                   # an intermediate read elsewhere
    result = _exported(b, _feed([1, 3, 4, 2]), interleaved, read, reader)
    assert "Resize" not in result.report.op_counts and result.report.op_counts["Tile"] == 2
    named = Builder()
    kept = _repeat(named, named.input("x", [1, 3, 4, 2]), 1, 2, [1, 6, 4, 2], name="kept")
    expand = kept.op.operands[0].op.operands[0]
    result = _exported(named, _feed([1, 3, 4, 2]), kept, expand)              # the ExpandDims is an output
    assert "Resize" not in result.report.op_counts


def test_a_named_first_repeat_is_not_merged_away():
    b = Builder()
    x = b.input("x", [1, 3, 3, 2])
    rows = _repeat(b, x, 1, 2, [1, 6, 3, 2], name="rows")
    out = _repeat(b, rows, 2, 2, [1, 6, 6, 2], name="out")
    result = _exported(b, _feed([1, 3, 3, 2]), rows, out)
    assert result.report.op_counts["Resize"] == 2


def _upsampling_1d(keras, shape):
    inputs = keras.Input(shape)
    hidden = keras.layers.UpSampling1D(3)(keras.layers.Conv1D(4, 3, padding="same")(inputs))
    return keras.Model(inputs, keras.layers.Conv1D(2, 1)(hidden))


def _upsampling_2d(keras, shape):
    inputs = keras.Input(shape)
    hidden = keras.layers.UpSampling2D((2, 3), interpolation="nearest")(keras.layers.Conv2D(4, 3, padding="same")(inputs))
    return keras.Model(inputs, keras.layers.Conv2D(2, 1)(hidden))


def _upsampling_3d(keras, shape):
    inputs = keras.Input(shape)
    hidden = keras.layers.UpSampling3D((2, 1, 3))(keras.layers.Conv3D(3, 2, padding="same")(inputs))
    return keras.Model(inputs, keras.layers.Conv3D(2, 1)(hidden))


def _repeat_vector(keras, shape):
    inputs = keras.Input(shape)
    hidden = keras.layers.RepeatVector(4)(keras.layers.Dense(5)(inputs))
    return keras.Model(inputs, keras.layers.Conv1D(2, 2)(hidden))


@pytest.mark.tf
@pytest.mark.parametrize("build, shape, node, repeats", [
    (_upsampling_1d, (6, 3), "Resize", 1), (_upsampling_2d, (5, 4, 3), "Resize", 2),
    (_upsampling_3d, (3, 4, 5, 2), "Resize", 3), (_repeat_vector, (6,), "Expand", 1)])
def test_keras_repeats_frozen_match_tf(build, shape: tuple[int, ...], node: str, repeats: int):
    keras = keras_seeded(9)
    model = build(keras, shape)
    exported = export_keras(model, shape)
    report = exported[0].report
    assert report.op_counts[node] == 1 and "Tile" not in report.op_counts
    assert report.stats["repeats_as_resize" if node == "Resize" else "repeats_as_expand"] == repeats
    assert_matches_keras(model, exported, np.random.default_rng(4).uniform(-1, 1, [1, *shape]).astype(np.float32))
