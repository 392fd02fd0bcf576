"""Dilation2D / erosion (tf.nn.dilation2d, tf.nn.erosion2d) exported to ONNX from tf.compat.v1 GraphDefs with a
constant filter: outputs against TF's session on seeded random images (floats within 1e-4 of the largest, in
practice equal; integers exactly, wrapping sums included), node counts, the layout kept from a convolution,
run-time image sizes, and the refusals.  tf2onnx converts no Dilation2D.  Most graphs export after -O2, as the
CLI does; erosion's filter is a ReverseV2 of a constant, which the static analysis evaluates, so the raw graph
exports as well."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

from compiler.backends.onnx import UnsupportedOpError, export_with_report
from compiler.backends.onnx.tf2onnx_compare import convert_with_tf2onnx
from compiler.frontends.graphdef import load_graph_bytes
from compiler.passes import run_pipeline
from compiler.ir.dtypes import DType
from compiler.runtime.interpreter import Interpreter
from compiler.runtime.onnx_runner import run_onnx
from tests.backends.test_onnx_export import Builder, o2_pipeline
from tests.backends.test_onnx_ragged import assert_same, frozen
from tests.oracle import run_tf

tf = pytest.importorskip("tensorflow")
pytestmark = pytest.mark.tf

GEOMETRIES = [((1, 1), (1, 1), "SAME"), ((2, 1), (1, 2), "SAME"), ((2, 3), (3, 2), "SAME"),
              ((1, 2), (2, 1), "VALID"), ((3, 3), (1, 1), "VALID"), ((1, 1), (4, 4), "SAME")]


def _morphology_graph(shape, filter_shape, strides, rates, padding, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    f = rng.uniform(-2, 2, filter_shape).astype(dtype)

    def build():
        x = tf.compat.v1.placeholder(tf.as_dtype(dtype), shape, name="x")
        kwargs = dict(strides=[1, *strides, 1], padding=padding, data_format="NHWC", dilations=[1, *rates, 1])
        return ["x"], {"dilated": tf.nn.dilation2d(x, f, **kwargs), "eroded": tf.nn.erosion2d(x, f, **kwargs)}

    return frozen(build)


def _export_and_compare(data, inputs, outputs, feeds_list, optimize=True):
    """Export at -O2 (or the graph as loaded), check, and compare with TF's session on every feed."""
    graph = load_graph_bytes(data)
    if optimize:
        graph = run_pipeline(graph, o2_pipeline(), inputs, outputs).graph
    result = export_with_report(graph, inputs, outputs)
    onnx.checker.check_model(result.model, full_check=True)
    worst = 0.0
    for feeds in feeds_list:
        want, got = run_tf(data, feeds, outputs), run_onnx(result.model, feeds, outputs)
        for name in outputs:
            worst = max(worst, assert_same(np.asarray(got[name]), want[name], name))
    return result.report, worst


@pytest.mark.parametrize("strides,rates,padding", GEOMETRIES)
def test_known_image_size_gathers_every_window_at_once(strides, rates, padding):
    data, inputs, outputs = _morphology_graph([2, 11, 9, 3], [3, 2, 3], strides, rates, padding)
    rng = np.random.default_rng(1)
    feeds = [{"x": rng.uniform(-5, 5, (2, 11, 9, 3)).astype(np.float32)} for _ in range(2)]
    report, worst = _export_and_compare(data, inputs, outputs, feeds)
    assert worst == 0.0
    # Per output: Pad (SAME only) + Gather x2 + Add + ReduceMax + Max; erosion adds Neg x2 (the
    # reversed filter folds into a constant).
    pads = 2 if padding == "SAME" and (strides, rates) != ((3, 3), (1, 1)) else 0
    assert report.op_counts["Gather"] == 4 and report.op_counts["ReduceMax"] == 2
    assert report.node_count == 10 + pads + 2


@pytest.mark.parametrize("dtype", [np.float64, np.float16])
def test_other_float_types(dtype):
    data, inputs, outputs = _morphology_graph([1, 7, 6, 2], [2, 3, 2], (2, 1), (1, 2), "SAME", dtype)
    feeds = [{"x": np.random.default_rng(2).uniform(-5, 5, (1, 7, 6, 2)).astype(dtype)}]
    assert _export_and_compare(data, inputs, outputs, feeds)[1] == 0.0


@pytest.mark.parametrize("strides,rates,padding", GEOMETRIES)
def test_run_time_image_size_slices_per_tap(strides, rates, padding):
    data, inputs, outputs = _morphology_graph([None, None, None, 3], [2, 3, 3], strides, rates, padding, seed=3)
    rng = np.random.default_rng(4)
    feeds = [{"x": rng.uniform(-5, 5, (n, h, w, 3)).astype(np.float32)}
             for n, h, w in [(1, 9, 9), (2, 12, 7), (1, 13, 16), (1, 5, 6)]]
    report, worst = _export_and_compare(data, inputs, outputs, feeds)
    assert worst == 0.0
    run_time_pads = padding == "SAME" and max(strides) > 1  # then each op computes its padding (one Max)
    assert report.op_counts["Slice"] == 12 and report.op_counts["Max"] == 2 + 2 * run_time_pads


def test_windows_outside_the_image_and_minus_infinity_give_tf_lowest():
    data, inputs, outputs = _morphology_graph([1, 2, 2, 1], [2, 2, 1], (1, 1), (5, 5), "SAME")
    x = np.asarray([1.0, -np.inf, 3.0, 0.5], np.float32).reshape(1, 2, 2, 1)
    _export_and_compare(data, inputs, outputs, [{"x": x}])
    data, inputs, outputs = _morphology_graph([1, None, None, 1], [2, 2, 1], (2, 2), (5, 5), "SAME")
    _export_and_compare(data, inputs, outputs, [{"x": x}])


def test_tf2onnx_does_not_convert_dilation2d():
    data, inputs, outputs = _morphology_graph([1, 5, 5, 1], [2, 2, 1], (1, 1), (1, 1), "SAME")
    theirs = convert_with_tf2onnx(data, inputs, outputs[:1])  # leaves the TF op in, which no runtime runs
    assert "Dilation2D" in {node.op_type for node in theirs.graph.node}


def test_layout_of_a_convolution_is_kept():
    """Conv2D -> Dilation2D -> Conv2D computes channels-first throughout: the only Transposes are the input's
    and the two outputs' (the dilation's shape rule gives its output's rank and dims for that one)."""
    rng = np.random.default_rng(5)
    b = Builder()
    x = b.input("x", [1, 8, 8, 3])
    conv = b("Conv2D", x, b.const(rng.standard_normal((3, 3, 3, 4)).astype(np.float32)), strides=[1, 1, 1, 1],
             padding="SAME")
    dilated = b("Dilation2D", conv, b.const(rng.uniform(-1, 1, (3, 3, 4)).astype(np.float32)), strides=[1, 2, 2, 1],
                rates=[1, 1, 1, 1], padding="SAME")
    out = b("Conv2D", dilated, b.const(rng.standard_normal((1, 1, 4, 2)).astype(np.float32)), strides=[1, 1, 1, 1],
            padding="VALID")
    names = [dilated.name, out.name]
    result = export_with_report(b.graph, ["x"], names)
    onnx.checker.check_model(result.model, full_check=True)
    assert result.report.op_counts["Transpose"] == 3
    feeds = {"x": rng.standard_normal((1, 8, 8, 3)).astype(np.float32)}
    want, got = Interpreter(b.graph).run(dict(feeds), names), run_onnx(result.model, feeds, names)
    for name in names:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-5)


def test_refusals_name_the_node():
    b = Builder()
    x, f = b.input("x", [1, 5, 5, 2]), b.input("f", [2, 2, 2])
    out = b("Dilation2D", x, f, strides=[1, 1, 1, 1], rates=[1, 1, 1, 1], padding="SAME")
    with pytest.raises(UnsupportedOpError, match=r"'Dilation2D' \(node 'dilation2d'\).*filter must be a constant"):
        export_with_report(b.graph, ["x", "f"], [out.name])
    b = Builder()
    x = b.input("x", [1, 5, 5, 2], DType.UINT64)
    out = b("Dilation2D", x, b.const(np.ones((2, 2, 2), np.uint64)), strides=[1, 1, 1, 1], rates=[1, 1, 1, 1],
            padding="SAME")
    with pytest.raises(UnsupportedOpError, match="no ReduceMax kernel for uint64"):
        export_with_report(b.graph, ["x"], [out.name])
    b = Builder()
    x = b.input("x", [1, None, 5, 2], DType.INT32)
    out = b("Dilation2D", x, b.const(np.ones((2, 2, 2), np.int32)), strides=[1, 1, 1, 1], rates=[1, 1, 1, 1],
            padding="SAME")
    with pytest.raises(UnsupportedOpError, match="int32 input of run-time height or width"):
        export_with_report(b.graph, ["x"], [out.name])
    b = Builder()
    x = b.input("x", [1, 1, 5, 1])
    out = b("Dilation2D", x, b.const(np.ones((4, 1, 1), np.float32)), strides=[1, 1, 1, 1], rates=[1, 1, 1, 1],
            padding="VALID")
    with pytest.raises(UnsupportedOpError, match="output size would be negative"):
        export_with_report(b.graph, ["x"], [out.name])


# -- integers ---------------------------------------------------------------------------------------------------
INTEGER_TYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32]


def _integer_graph(dtype, shape, filter_shape, strides, rates, padding, seed):
    """Dilation (and, for signed types, erosion) of a seeded filter spanning the type's whole range, so
    sums wrap."""
    info = np.iinfo(dtype)
    f = np.random.default_rng(seed).integers(info.min, info.max, filter_shape, dtype=dtype, endpoint=True)

    def build():
        x = tf.compat.v1.placeholder(tf.as_dtype(dtype), shape, name="x")
        kwargs = dict(strides=[1, *strides, 1], padding=padding, rates=[1, *rates, 1])
        outputs = {"dilated": tf.raw_ops.Dilation2D(input=x, filter=f, **kwargs)}
        if info.min < 0:
            outputs["eroded"] = tf.nn.erosion2d(x, f, kwargs["strides"], padding, "NHWC", kwargs["rates"])
        return ["x"], outputs

    return frozen(build)


@pytest.mark.parametrize("dtype", INTEGER_TYPES)
@pytest.mark.parametrize("strides,rates,padding", [((1, 1), (1, 1), "SAME"), ((2, 1), (1, 2), "SAME"),
                                                   ((1, 2), (2, 1), "VALID"), ((1, 1), (4, 4), "SAME")])
def test_integer_types_wrap_as_tf(dtype, strides, rates, padding):
    """Integer sums wrap in the type as in TF; the taps outside the image (a constant mask) give way to the
    type's lowest value, which is also the output of a window without a tap inside (rates 4 on a 5 x 4 image)."""
    shape = [2, 5, 4, 3]
    data, inputs, outputs = _integer_graph(dtype, shape, [2, 3, 3], strides, rates, padding, seed=6)
    info = np.iinfo(dtype)
    rng = np.random.default_rng(7)
    feeds = [{"x": rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)},
             {"x": rng.integers(-3 if info.min else 0, 4, shape).astype(dtype)}]
    report, worst = _export_and_compare(data, inputs, outputs, feeds, optimize=False)
    assert worst == 0.0
    counts = report.op_counts
    per_op = 1 if dtype in (np.int16, np.uint16, np.uint32) else 0  # a Cast to a type with a ReduceMax, back
    masked = padding == "SAME"
    assert counts["Gather"] == 2 * len(outputs) and counts["ReduceMax"] == len(outputs)
    assert counts.get("Where", 0) == masked * len(outputs) and "Pad" not in counts
    assert report.node_count == len(outputs) * (4 + masked + 2 * per_op) + 2 * (len(outputs) - 1)  # + erosion's Negs


def test_integer_types_at_opset_13_add_in_int32():
    """Before opset 14 onnxruntime adds no 8- or 16-bit integers: the taps are summed in int32 and wrapped back."""
    b = Builder()
    x = b.input("x", [1, 4, 4, 2], DType.INT8)
    f = np.asarray(np.random.default_rng(8).integers(-128, 127, (2, 2, 2)), np.int8)
    out = b("Dilation2D", x, b.const(f), strides=[1, 1, 1, 1], rates=[1, 1, 1, 1], padding="SAME")
    result = export_with_report(b.graph, ["x"], [out.name], opset=13)
    onnx.checker.check_model(result.model, full_check=True)
    feeds = {"x": np.random.default_rng(9).integers(-128, 127, (1, 4, 4, 2)).astype(np.int8)}
    want, got = Interpreter(b.graph).run(dict(feeds), [out.name]), run_onnx(result.model, feeds, [out.name])
    np.testing.assert_array_equal(got[out.name], want[out.name])
    assert result.report.op_counts["Cast"] == 2 and result.report.op_counts["Add"] == 1


def test_raw_erosion_exports_without_o2():
    """tf.nn.erosion2d's filter is ReverseV2(Const): the static analysis evaluates it, so the frozen graph
    exports as it is, with the node count of its -O2 form."""
    data, inputs, outputs = _morphology_graph([2, 9, 8, 3], [3, 2, 3], (2, 1), (1, 2), "SAME", seed=10)
    graph = load_graph_bytes(data)
    assert "ReverseV2" in {op.type for op in graph}
    rng = np.random.default_rng(11)
    feeds = [{"x": rng.uniform(-5, 5, (2, 9, 8, 3)).astype(np.float32)} for _ in range(2)]
    raw, worst = _export_and_compare(data, inputs, outputs, feeds, optimize=False)
    assert worst == 0.0
    assert raw.op_counts == _export_and_compare(data, inputs, outputs, feeds)[0].op_counts
    assert raw.node_count == 14 and raw.op_counts["Neg"] == 2
