"""ONNX lowerings of 3-D convolutions and pools, image and detection ops: each exported graph passes
the full checker and matches gttc's interpreter under onnxruntime (floats to 1e-6 relative plus a
1e-6 absolute floor for sums that cancel, integers exactly)."""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import onnx
import pytest

from compiler.analysis.static_info import analyze
from compiler.backends.onnx import UnsupportedOpError, export_with_report
from compiler.ir.dtypes import DType
from compiler.ir.graph import Value
from compiler.runtime.interpreter import Interpreter
from compiler.runtime.onnx_runner import run_onnx
from tests.backends.test_onnx_added_ops import declared, ints
from tests.backends.test_onnx_export import Builder

RTOL, ATOL = 1e-6, 1e-6

# For reporting only (the assertions enforce the tolerance): per op type, the largest |onnx - interpreter|.
ERRORS: dict[str, float] = {}


def check(b: Builder, feeds: Mapping[str, np.ndarray], outputs: Sequence[Value], opset: int = 17,
          atol: float = ATOL) -> dict[str, int]:
    """Export, fully check, run both ways and compare; returns the ONNX op counts."""
    names = [v.name for v in outputs]
    expected = Interpreter(b.graph).run(dict(feeds), names)
    result = export_with_report(b.graph, list(feeds), names, opset=opset)
    onnx.checker.check_model(result.model, full_check=True)
    got = run_onnx(result.model, dict(feeds), names)
    for value, name in zip(outputs, names):
        want, have = expected[name], got[name]
        assert have.dtype == want.dtype and have.shape == want.shape, name
        finite = np.isfinite(want) if want.dtype.kind == "f" else np.ones(want.shape, bool)
        gap = np.abs(have[finite].astype(np.float64) - want[finite].astype(np.float64)).max(initial=0.0)
        ERRORS[value.op.type] = max(ERRORS.get(value.op.type, 0.0), float(gap))
        if want.dtype.kind == "f":
            np.testing.assert_allclose(have, want, rtol=RTOL, atol=atol, err_msg=name)
        else:
            np.testing.assert_array_equal(have, want, err_msg=name)
    return result.report.op_counts


def five(values) -> list[int]:
    return [1, *values, 1]


# -- 3-D convolutions and pools ------------------------------------------------------------------
CONV3D_CASES = [  # (input shape, filter shape, strides, dilations, padding)
    ((2, 5, 6, 7, 3), (2, 3, 2, 3, 4), (1, 1, 1), (1, 1, 1), "SAME"),
    ((1, 7, 6, 5, 2), (3, 2, 3, 2, 3), (2, 1, 2), (1, 1, 1), "VALID"),
    ((1, 8, 7, 6, 2), (3, 3, 2, 2, 2), (2, 3, 1), (1, 1, 1), "SAME"),
    ((1, 7, 7, 7, 2), (2, 2, 3, 2, 3), (1, 1, 1), (2, 3, 1), "SAME"),
    ((1, 9, 6, 8, 2), (2, 3, 2, 2, 3), (1, 1, 1), (3, 1, 2), "VALID"),
]


@pytest.mark.parametrize("shapes_stated", [True, False])
@pytest.mark.parametrize("case", CONV3D_CASES)
def test_conv3d_then_pools(case, shapes_stated: bool):
    """A Conv3D feeding both pools stays channels-first between them when shapes are known: one Transpose in, one out per pool."""
    shape, fshape, strides, dilations, padding = case
    rng = np.random.default_rng(sum(shape))
    b = Builder()
    x = b.input("x", list(shape))
    y = b("Conv3D", x, b.const(rng.standard_normal(fshape).astype(np.float32)), strides=five(strides),
          dilations=five(dilations), padding=padding)
    pools = [b(op, y, ksize=five((2, 3, 2)), strides=five((2, 1, 2)), padding=pad)
             for op, pad in (("MaxPool3D", "SAME"), ("AvgPool3D", "SAME"), ("AvgPool3D", "VALID"))]
    if shapes_stated:
        conv = Interpreter(b.graph).run({"x": np.zeros(shape, np.float32)}, [y.name] + [p.name for p in pools])
        for value in [y] + pools:
            declared(value, conv[value.name].shape)
    counts = check(b, {"x": rng.standard_normal(shape).astype(np.float32)}, pools)
    assert counts["Conv"] == 1 and counts["MaxPool"] == 1 and counts["AveragePool"] == 2
    assert counts["Transpose"] == 4  # shapes stated or derived by the shape rules: NCDHW throughout


def test_conv3d_with_run_time_filter_and_channels_first_input():
    rng = np.random.default_rng(4)
    b = Builder()
    x, w = b.input("x", [1, 2, 5, 4, 6]), b.input("w", [2, 3, 2, 2, 3])
    y = b("Conv3D", x, w, strides=[1, 1, 2, 1, 1], padding="SAME", data_format="NCDHW")
    feeds = {"x": rng.standard_normal((1, 2, 5, 4, 6)).astype(np.float32),
             "w": rng.standard_normal((2, 3, 2, 2, 3)).astype(np.float32)}
    counts = check(b, feeds, [y])
    assert counts == {"Transpose": 1, "Conv": 1}


BACKPROP3D_CASES = [  # (input shape, filter window, out channels, strides, dilations, padding)
    ((2, 4, 5, 3, 3), (2, 3, 2), 4, (2, 2, 2), (1, 1, 1), "SAME"),
    ((1, 7, 6, 5, 2), (3, 2, 3), 3, (2, 1, 3), (1, 1, 1), "VALID"),
    ((1, 5, 6, 4, 2), (3, 3, 2), 2, (1, 2, 1), (1, 1, 1), "SAME"),
    ((1, 6, 6, 6, 2), (2, 2, 2), 3, (1, 1, 1), (2, 1, 2), "SAME"),
]


@pytest.mark.parametrize("case", BACKPROP3D_CASES)
def test_conv3d_backprop_input_is_conv_transpose(case):
    shape, window, channels_out, strides, dilations, padding = case
    rng = np.random.default_rng(sum(shape) + channels_out)
    attrs = {"strides": five(strides), "dilations": five(dilations), "padding": padding}
    weights = rng.standard_normal((*window, shape[-1], channels_out)).astype(np.float32)
    probe = Builder()
    forward = probe("Conv3D", probe.input("x", list(shape)), probe.const(weights), **attrs)
    dy_shape = Interpreter(probe.graph).run({"x": np.zeros(shape, np.float32)}, [forward.name])[forward.name].shape
    b = Builder()
    dy = b.input("dy", list(dy_shape))
    y = b("Conv3DBackpropInputV2", ints(b, shape), b.const(weights), dy, **attrs)
    counts = check(b, {"dy": rng.standard_normal(dy_shape).astype(np.float32)}, [y])
    assert counts["ConvTranspose"] == 1


def test_conv3d_refusals():
    b = Builder()
    x = b.input("x", [1, 4, 4, 4, 4])
    y = b("Conv3D", x, b.const(np.zeros((1, 1, 1, 2, 2), np.float32)), strides=five((1, 1, 1)), padding="SAME")
    with pytest.raises(UnsupportedOpError, match=r"'Conv3D' \(node 'conv3d'\).*depth 4"):
        export_with_report(b.graph, ["x"], [y.name])
    b = Builder()
    x = b.input("x", [1, 4, 4, 4, 2])
    y = b("MaxPool3D", x, ksize=[1, 2, 2, 2, 2], strides=five((1, 1, 1)), padding="VALID")
    with pytest.raises(UnsupportedOpError, match=r"'MaxPool3D'.*ksize.*channels"):
        export_with_report(b.graph, ["x"], [y.name])


# -- DepthToSpace, SpaceToDepth, LRN --------------------------------------------------------------
@pytest.mark.parametrize("block", [2, 3])
def test_depth_to_space_and_back_around_a_conv(block: int):
    """With shapes stated, the block ops stay channels-first between the convs."""
    rng = np.random.default_rng(block)
    b = Builder()
    x = b.input("x", [2, 3, 2, 4 * block * block])
    up = declared(b("DepthToSpace", x, block_size=block), [2, 3 * block, 2 * block, 4])
    y = b("Conv2D", up, b.const(rng.standard_normal((3, 3, 4, 4)).astype(np.float32)), strides=[1, 1, 1, 1],
          padding="SAME")
    down = declared(b("SpaceToDepth", y, block_size=block), [2, 3, 2, 4 * block * block])
    weights = b.const(rng.standard_normal((1, 1, 4 * block * block, 3)).astype(np.float32))
    out = b("Conv2D", down, weights, strides=[1, 1, 1, 1], padding="VALID")
    feeds = {"x": rng.standard_normal((2, 3, 2, 4 * block * block)).astype(np.float32)}
    counts = check(b, feeds, [up, out], atol=1e-5)
    assert counts["DepthToSpace"] == 1 and counts["SpaceToDepth"] == 1 and counts["Transpose"] == 3


@pytest.mark.parametrize("block", [2, 4])
def test_depth_to_space_and_back_of_unstated_shapes(block: int):
    """The shape rules give both results a shape, so they stay NCHW between the two ops: one
    Transpose in, one out for each of the two graph outputs."""
    rng = np.random.default_rng(block)
    b = Builder()
    x = b.input("x", [1, 2, 3, 2 * block * block])
    up = b("DepthToSpace", x, block_size=block)
    down = b("SpaceToDepth", up, block_size=block)
    feeds = {"x": rng.standard_normal((1, 2, 3, 2 * block * block)).astype(np.float32)}
    counts = check(b, feeds, [up, down])
    assert counts["Transpose"] == 3


def test_depth_to_space_channels_first_and_refusal():
    rng = np.random.default_rng(5)
    b = Builder()
    x = b.input("x", [1, 8, 2, 3])
    y = b("DepthToSpace", x, block_size=2, data_format="NCHW")
    z = b("SpaceToDepth", x, block_size=2, data_format="NCHW_VECT_C")
    feeds = {"x": rng.standard_normal((1, 8, 2, 3)).astype(np.float32)}
    result = export_with_report(b.graph, ["x"], [y.name], opset=17)
    got = run_onnx(result.model, feeds, [y.name])[y.name]  # TF runs NCHW on GPU only: numpy is the reference
    nhwc = feeds["x"].transpose(0, 2, 3, 1)
    want = nhwc.reshape(1, 2, 3, 2, 2, 2).transpose(0, 1, 3, 2, 4, 5).reshape(1, 4, 6, 2).transpose(0, 3, 1, 2)
    np.testing.assert_array_equal(got, want)
    with pytest.raises(UnsupportedOpError, match=r"'SpaceToDepth'.*NCHW_VECT_C"):
        export_with_report(b.graph, ["x"], [z.name])


@pytest.mark.parametrize("radius, bias, alpha, beta", [(5, 1.0, 1.0, 0.5), (2, 2.0, 1e-4, 0.75),
                                                       (1, 0.5, 0.3, 1.0), (0, 1.0, 0.5, 0.25)])
def test_lrn(radius: int, bias: float, alpha: float, beta: float):
    rng = np.random.default_rng(radius)
    b = Builder()
    x = b.input("x", [2, 4, 3, 7])
    y = b("LRN", x, depth_radius=radius, bias=bias, alpha=alpha, beta=beta)
    counts = check(b, {"x": rng.standard_normal((2, 4, 3, 7)).astype(np.float32)}, [y], atol=0)
    assert counts["LRN"] == 1


def test_lrn_of_half_is_refused():
    b = Builder()
    y = b("LRN", b.input("x", [1, 2, 2, 3], DType.HALF))
    with pytest.raises(UnsupportedOpError, match=r"'LRN' \(node 'lrn'\).*float32"):
        export_with_report(b.graph, ["x"], [y.name])


# -- ResizeBicubic ---------------------------------------------------------------------------------
@pytest.mark.parametrize("align, half", [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize("shape, size", [((2, 4, 6, 3), (8, 12)), ((1, 8, 6, 2), (4, 3)), ((1, 5, 3, 2), (20, 12)),
                                         ((1, 4, 4, 1), (16, 8))])
def test_resize_bicubic_on_tf_table_steps(shape, size, align: bool, half: bool):
    """One cubic Resize where every fraction is on TF's 1/1024 table and no axis shrinks; else the
    tabulated weights as two MatMuls (tests/backends/test_onnx_separable_resize.py has more)."""
    rng = np.random.default_rng(sum(size))
    b = Builder()
    x = b.input("x", list(shape))
    y = b("ResizeBicubic", x, ints(b, size), align_corners=align, half_pixel_centers=half)
    counts = check(b, {"x": rng.standard_normal(shape).astype(np.float32)}, [y], atol=1e-5)
    off_table = align and not all(((s - 1) * 1024) % (o - 1) == 0 for s, o in zip(shape[1:3], size))
    if size[0] < shape[1] or off_table:
        assert counts["MatMul"] == 2 and "Resize" not in counts
    else:
        assert counts["Resize"] == 1 and "MatMul" not in counts


@pytest.mark.parametrize("shape, size", [((1, 5, 7, 2), (11, 4)), ((1, 8, 6, 2), (4, 3))])
def test_resize_bicubic_off_the_table_or_shrinking_exports(shape, size):
    rng = np.random.default_rng(sum(size))
    b = Builder()
    y = b("ResizeBicubic", b.input("x", list(shape)), ints(b, size), half_pixel_centers=True)
    counts = check(b, {"x": rng.standard_normal(shape).astype(np.float32)}, [y], atol=1e-5)
    assert counts["MatMul"] == 2


@pytest.mark.parametrize("shape, size", [((1, None, 4, 2), (8, 8)), ((1, 5, None, 2), (11, 4))])
def test_resize_bicubic_of_unknown_size_is_refused(shape, size):
    b = Builder()
    y = b("ResizeBicubic", b.input("x", list(shape)), ints(b, size), half_pixel_centers=True)
    with pytest.raises(UnsupportedOpError, match=r"'ResizeBicubic' \(node 'resizebicubic'\).*height and width"):
        export_with_report(b.graph, ["x"], [y.name])


# -- colour spaces -------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [DType.FLOAT, DType.DOUBLE])
def test_rgb_to_hsv_and_back(dtype: DType):
    pixels = np.random.default_rng(3).uniform(0, 1, (2, 4, 5, 3))
    pixels[0, 0] = [[0.5, 0.5, 0.5], [1, 0, 0], [0, 1, 0], [0, 0, 1], [0.2, 0.7, 0.7]]  # greys, primaries, ties
    pixels[0, 1, :3] = [[0.7, 0.7, 0.2], [0.7, 0.2, 0.7], [0, 0, 0]]
    b = Builder()
    x = b.input("x", [2, 4, 5, 3], dtype)
    hsv = b("RGBToHSV", x)
    counts = check(b, {"x": pixels.astype(dtype.to_numpy())}, [hsv, b("HSVToRGB", hsv), b("HSVToRGB", x)])
    assert counts["Concat"] == 3 and "Transpose" not in counts


def test_adjust_saturation_and_hue():
    """Through HSV and back; TF's kernels return through another, equal formula, so floats may
    differ by a few ulps of the largest channel."""
    pixels = np.random.default_rng(4).uniform(0, 1, (2, 4, 5, 3)).astype(np.float32)
    pixels[0, 0] = [[0.5, 0.5, 0.5], [1, 0, 0], [0, 1, 0], [0, 0, 1], [0.2, 0.7, 0.7]]
    b = Builder()
    x = b.input("x", [2, 4, 5, 3])
    outputs = [b("AdjustSaturation", x, b.const(np.float32(scale))) for scale in (0.0, 0.6, 2.5)]
    outputs += [b("AdjustHue", x, b.const(np.float32(delta))) for delta in (-0.7, 0.0, 0.25, 0.9)]
    counts = check(b, {"x": pixels}, outputs)
    assert counts["Concat"] == 7 and "Transpose" not in counts


def test_colour_space_of_half_is_refused():
    b = Builder()
    y = b("RGBToHSV", b.input("x", [4, 3], DType.HALF))
    with pytest.raises(UnsupportedOpError, match=r"'RGBToHSV' \(node 'rgbtohsv'\).*float32 or float64"):
        export_with_report(b.graph, ["x"], [y.name])


# -- NonMaxSuppression ---------------------------------------------------------------------------
def detections(rng, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Overlapping boxes (corners in either order) with distinct scores: no ties to order."""
    centres, sizes = rng.uniform(0, 10, (count, 2)), rng.uniform(0.5, 4, (count, 2))
    boxes = np.concatenate([centres - sizes / 2, centres + sizes / 2], axis=1).astype(np.float32)
    flip = rng.random(count) < 0.3
    boxes[flip] = boxes[flip][:, [2, 3, 0, 1]]
    return boxes, (rng.permutation(count).astype(np.float32) / count + np.float32(0.01))


@pytest.mark.parametrize("run_time_limits", [False, True])
@pytest.mark.parametrize("count, max_out, iou, score", [(30, 10, 0.5, 0.2), (40, 40, 0.3, 0.0), (20, 0, 0.5, 0.0),
                                                         (30, 25, 0.0, 0.6)])
def test_non_max_suppression_versions(count: int, max_out: int, iou: float, score: float, run_time_limits: bool):
    rng = np.random.default_rng(count + max_out)
    b = Builder()
    boxes, scores = b.input("boxes", [count, 4]), b.input("scores", [count])
    feeds = dict(zip(["boxes", "scores"], detections(rng, count)))
    if run_time_limits:
        limit, overlap, floor = b.input("m", [], DType.INT32), b.input("iou", []), b.input("floor", [])
        feeds.update(m=np.asarray(max_out, np.int32), iou=np.asarray(iou, np.float32),
                     floor=np.asarray(score, np.float32))
    else:
        limit, overlap = ints(b, max_out), b.const(np.float32(iou))
        floor = b.const(np.float32(score))
    zero = b.const(np.float32(0))
    outputs = [b("NonMaxSuppression", boxes, scores, limit, iou_threshold=iou),
               b("NonMaxSuppressionV2", boxes, scores, limit, overlap),
               b("NonMaxSuppressionV3", boxes, scores, limit, overlap, floor)]
    for pad in (False, True):
        outputs += list(b("NonMaxSuppressionV4", boxes, scores, limit, overlap, floor, pad_to_max_output_size=pad))
        outputs += list(b("NonMaxSuppressionV5", boxes, scores, limit, overlap, floor, zero,
                          pad_to_max_output_size=pad))
    counts = check(b, feeds, outputs)
    # one ONNX NMS per distinct computation: V1-V2 without a score floor, V3-V5 with it; V1's
    # threshold is an attribute, so with run-time limits V1 and V2 read different thresholds
    assert counts["NonMaxSuppression"] == 2 + run_time_limits


def image_detections(rng, batch: int, count: int, per_class_boxes: int, classes: int) -> tuple[np.ndarray, np.ndarray]:
    """CombinedNonMaxSuppression inputs: unit-scale boxes, some reaching past [0, 1] (clipped), and
    distinct scores, so no tie leaves TF's order undefined."""
    centres = rng.uniform(-0.2, 1.2, (batch, count, per_class_boxes, 2))
    sizes = rng.uniform(0.05, 0.6, (batch, count, per_class_boxes, 2))
    boxes = np.concatenate([centres - sizes / 2, centres + sizes / 2], axis=-1).astype(np.float32)
    scores = (rng.permutation(batch * count * classes) + 1) / (batch * count * classes + 1)
    return boxes, scores.reshape(batch, count, classes).astype(np.float32)


COMBINED_CASES = [(3, 8, False, True), (5, 4, True, False), (2, 30, True, True), (6, 50, False, True)]


@pytest.mark.parametrize("boxes_per_class", [False, True])
@pytest.mark.parametrize("per_class, total, pad, clip", COMBINED_CASES)
def test_combined_non_max_suppression(per_class: int, total: int, pad: bool, clip: bool, boxes_per_class: bool):
    """Boxes shared by the classes or one per class; rows past the picks (and past classes * boxes) zero."""
    rng = np.random.default_rng(per_class * total)
    count, classes = 12, 3
    q = classes if boxes_per_class else 1
    b = Builder()
    boxes, scores = b.input("boxes", [None, count, q, 4]), b.input("scores", [None, count, classes])
    outputs = b("CombinedNonMaxSuppression", boxes, scores, ints(b, per_class), ints(b, total),
                b.const(np.float32(0.4)), b.const(np.float32(0.2)), pad_per_class=pad, clip_boxes=clip)
    counts = check(b, dict(zip(["boxes", "scores"], image_detections(rng, 2, count, q, classes))), list(outputs))
    assert counts["NonMaxSuppression"] == 1 and counts["TopK"] == 1 and sum(counts.values()) <= 27


def test_combined_non_max_suppression_needs_known_counts():
    b = Builder()
    out = b("CombinedNonMaxSuppression", b.input("boxes", [1, None, 1, 4]), b.input("scores", [1, None, 2]),
            ints(b, 2), ints(b, 4), b.const(np.float32(0.5)), b.const(np.float32(0.0)))
    with pytest.raises(UnsupportedOpError, match="number of boxes, classes"):
        export_with_report(b.graph, ["boxes", "scores"], [out[0].name])
    b = Builder()  # scores without a class axis: refused, not an IndexError
    out = b("CombinedNonMaxSuppression", b.input("boxes", [1, 3, 1, 4]), b.input("scores", [1, 3]),
            ints(b, 2), ints(b, 4), b.const(np.float32(0.5)), b.const(np.float32(0.0)))
    with pytest.raises(UnsupportedOpError, match=r"scores \[batch, boxes, classes\]"):
        export_with_report(b.graph, ["boxes", "scores"], [out[0].name])


def test_soft_non_max_suppression_is_refused():
    b = Builder()
    boxes, scores = b.input("boxes", [5, 4]), b.input("scores", [5])
    f = lambda v: b.const(np.float32(v))  # noqa: E731
    out = b("NonMaxSuppressionV5", boxes, scores, ints(b, 3), f(0.5), f(0.0), f(0.5))
    with pytest.raises(UnsupportedOpError, match=r"'NonMaxSuppressionV5'.*soft_nms_sigma"):
        export_with_report(b.graph, ["boxes", "scores"], [out[0].name])


# -- CropAndResize ---------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [DType.FLOAT, DType.INT32])
@pytest.mark.parametrize("crop, fill", [((3, 4), 0.0), ((1, 5), -1.5), ((6, 1), 2.0), ((1, 1), 0.0), ((7, 9), 0.5)])
def test_crop_and_resize_bilinear(crop, fill: float, dtype: DType):
    rng = np.random.default_rng(sum(crop))
    b = Builder()
    image, boxes, box_ind = b.input("image", [3, 5, 7, 2], dtype), b.input("boxes", [8, 4]), b.input("i", [8], DType.INT32)
    y = b("CropAndResize", image, boxes, box_ind, ints(b, crop), extrapolation_value=fill)
    corners = rng.uniform(-0.3, 1.3, (8, 4)).astype(np.float32)
    corners[:3] = [[0.1, 0.2, 0.9, 0.7], [0.8, 0.9, 0.2, 0.1], [0.0, 0.0, 1.0, 1.0]]
    pixels = rng.standard_normal((3, 5, 7, 2)) * 4
    feeds = {"image": pixels.astype(dtype.to_numpy()), "boxes": corners, "i": rng.integers(0, 3, 8).astype(np.int32)}
    counts = check(b, feeds, [y], atol=1e-5)
    assert counts["RoiAlign"] == 1


def test_crop_and_resize_refusals():
    b = Builder()
    image, boxes, box_ind = b.input("image", [1, 4, 4, 1]), b.input("boxes", [2, 4]), b.input("i", [2], DType.INT32)
    y = b("CropAndResize", image, boxes, box_ind, ints(b, [2, 2]), method="nearest")
    with pytest.raises(UnsupportedOpError, match=r"'CropAndResize'.*nearest"):
        export_with_report(b.graph, ["image", "boxes", "i"], [y.name])
    z = b("CropAndResize", image, boxes, box_ind, ints(b, [2, 2]))
    with pytest.raises(UnsupportedOpError, match=r"'CropAndResize'.*opset 13"):
        export_with_report(b.graph, ["image", "boxes", "i"], [z.name], opset=13)


# -- QuantizeAndDequantize -----------------------------------------------------------------------
@pytest.mark.parametrize("bits, signed, given, narrow, mode, nodes", [
    (8, True, True, False, "HALF_TO_EVEN", {"QuantizeLinear": 1, "DequantizeLinear": 1}),
    (8, False, True, False, "HALF_TO_EVEN", {"QuantizeLinear": 1, "DequantizeLinear": 1}),
    (8, True, True, True, "HALF_TO_EVEN", {"Clip": 1, "QuantizeLinear": 1, "DequantizeLinear": 1}),
    (4, True, True, False, "HALF_UP", {"Clip": 1, "Mul": 2, "Add": 1, "Floor": 1}),
    (8, True, False, True, "HALF_TO_EVEN", {"ReduceMin": 1, "ReduceMax": 1, "Div": 2, "Max": 1,
                                            "QuantizeLinear": 1, "DequantizeLinear": 1})])
def test_quantize_and_dequantize(bits, signed, given, narrow, mode, nodes):
    """Equal to TF's kernel (the interpreter) on every element; eight bits as a Q/DQ pair."""
    rng = np.random.default_rng(bits)
    b = Builder()
    x = b.input("x", [3, 5, 4])
    out = b("QuantizeAndDequantizeV2", x, b.const(np.float32(-1.3)), b.const(np.float32(0.7)), num_bits=bits,
            signed_input=signed, range_given=given, narrow_range=narrow, round_mode=mode)
    assert check(b, {"x": (rng.standard_normal((3, 5, 4)) * 2).astype(np.float32)}, [out]) == nodes


def test_quantize_and_dequantize_per_axis():
    rng = np.random.default_rng(3)
    b = Builder()
    x = b.input("x", [3, 5, 4])
    ranges = [b.const(np.linspace(-2, -0.5, 5).astype(np.float32)), b.const(np.linspace(0.5, 2, 5).astype(np.float32))]
    given = b("QuantizeAndDequantizeV3", x, *ranges, ints(b, 8), axis=1)
    measured = b("QuantizeAndDequantizeV4", x, *ranges, axis=1)
    counts = check(b, {"x": (rng.standard_normal((3, 5, 4)) * 2).astype(np.float32)}, [given, measured])
    assert counts["QuantizeLinear"] == 2 and counts["DequantizeLinear"] == 2


def test_quantize_and_dequantize_onnx_cannot_hold_is_refused():
    b = Builder()
    out = b("QuantizeAndDequantizeV2", b.input("x", [4]), b.const(np.float32(-1)), b.const(np.float32(1)),
            num_bits=4, range_given=False)
    with pytest.raises(UnsupportedOpError, match="signed eight-bit"):
        export_with_report(b.graph, ["x"], [out.name])


# -- FakeQuant -------------------------------------------------------------------------------------
@pytest.mark.parametrize("lo, hi, narrow", [(-6.0, 6.0, False), (-1.3, 2.7, True), (0.1, 3.0, False),
                                            (-5.0, -0.2, False), (-1.0, 1.0, True)])
def test_fake_quant_is_qdq_on_the_nudged_grid(lo: float, hi: float, narrow: bool):
    """Random inputs (seeded) on either side of the range; codes may differ only a few ulps from a
    half step, where QuantizeLinear rounds to even: none do here."""
    rng = np.random.default_rng(abs(int(hi * 10)))
    b = Builder()
    x = b.input("x", [2, 5, 4, 3])
    conv = b("Conv2D", x, b.const(rng.standard_normal((1, 1, 3, 3)).astype(np.float32)), strides=[1, 1, 1, 1],
             padding="VALID")
    outputs = [b("FakeQuantWithMinMaxArgs", conv, min=lo, max=hi, narrow_range=narrow),
               b("FakeQuantWithMinMaxVars", x, b.const(np.float32(lo)), b.const(np.float32(hi)), narrow_range=narrow)]
    feeds = {"x": (rng.standard_normal((2, 5, 4, 3)) * 4).astype(np.float32)}
    counts = check(b, feeds, outputs, atol=0)
    assert counts["QuantizeLinear"] == 2 and counts["DequantizeLinear"] == 2 and counts.get("Clip", 0) == 2 * narrow


@pytest.mark.parametrize("narrow", [False, True])
def test_fake_quant_per_channel_is_per_axis_qdq(narrow: bool):
    """Keras QAT's per-channel weight quantizer on a run-time tensor (-O2 folds it on constant weights)."""
    rng = np.random.default_rng(narrow)
    b = Builder()
    x = b.input("x", [2, 5, 4, 3])
    lo, hi = np.float32([-6.0, -1.3, 0.1]), np.float32([6.0, 2.7, 3.0])
    out = b("FakeQuantWithMinMaxVarsPerChannel", x, b.const(lo), b.const(hi), narrow_range=narrow)
    counts = check(b, {"x": (rng.standard_normal((2, 5, 4, 3)) * 4).astype(np.float32)}, [out], atol=0)
    assert counts["QuantizeLinear"] == 1 and counts["DequantizeLinear"] == 1 and counts.get("Max", 0) == narrow


def test_fake_quant_over_an_empty_range_is_zeros():
    """A Keras QAT model that has seen no data: its activation ranges are [0, 0], over which TF's
    Vars kernels give zeros (inf and NaN too); per channel, only the empty channels are zeros."""
    b = Builder()
    x = b.input("x", [2, 3, 4])
    zero = b.const(np.float32(0))
    lo, hi = np.float32([0, -1.3, 0, 0.1]), np.float32([0, 2.7, 0, 3.0])
    outputs = [b("FakeQuantWithMinMaxVars", x, zero, zero),
               b("FakeQuantWithMinMaxVarsPerChannel", x, b.const(lo), b.const(hi))]
    values = np.random.default_rng(3).standard_normal((2, 3, 4)).astype(np.float32) * 3
    values[0, 0] = [np.inf, 1.0, np.nan, 1.0]  # non-finite in the empty channels only: QDQ saturates NaN
    counts = check(b, {"x": values}, outputs, atol=0)
    assert counts["ConstantOfShape"] == 1 and counts["Mul"] == 1
    got = Interpreter(b.graph).run({"x": values}, [o.name for o in outputs])
    assert not got[outputs[0].name].any() and not got[outputs[1].name][..., [0, 2]].any()


def test_fake_quant_refusals():
    b = Builder()
    x = b.input("x", [4])
    wide = b("FakeQuantWithMinMaxArgs", x, num_bits=16)
    run_time = b("FakeQuantWithMinMaxVars", x, b.input("lo", []), b.const(np.float32(1)))
    per_channel = b("FakeQuantWithMinMaxVarsPerChannel", x, b.input("lows", [4]), b.const(np.ones(4, np.float32)))
    for out, reason in ((wide, "num_bits 16"), (run_time, "constant"), (per_channel, "constant vectors")):
        with pytest.raises(UnsupportedOpError, match=rf"'FakeQuantWithMinMax\w+'.*{reason}"):
            export_with_report(b.graph, ["x", "lo", "lows"], [out.name])


# -- ResizeArea ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [DType.FLOAT, DType.UINT8])
@pytest.mark.parametrize("shape, size, align, plan", [((2, 6, 9, 3), (3, 3), False, "AveragePool"),
                                                      ((1, 8, 8, 2), (8, 2), False, "AveragePool"),
                                                      ((1, 3, 2, 2), (6, 8), False, "Resize"),
                                                      ((1, 4, 5, 1), (4, 5), True, "AveragePool")])
def test_resize_area_whole_factors(shape, size, align: bool, plan: str, dtype: DType):
    rng = np.random.default_rng(sum(shape))
    b = Builder()
    y = b("ResizeArea", b.input("x", list(shape), dtype), ints(b, size), align_corners=align)
    pixels = rng.uniform(0, 255, shape).astype(dtype.to_numpy())
    counts = check(b, {"x": pixels}, [y], atol=1e-5)
    assert counts[plan] == 1


@pytest.mark.parametrize("shape, size", [((1, 5, None, 2), (3, 4)), ((1, None, 4, 1), (3, 8))])
def test_resize_area_partial_cells_of_unknown_size_are_refused(shape, size):
    """Partial cells need the weight matrices (tests/backends/test_onnx_separable_resize.py), which
    need the input's height and width."""
    b = Builder()
    y = b("ResizeArea", b.input("x", list(shape)), ints(b, size))
    with pytest.raises(UnsupportedOpError, match=r"'ResizeArea' \(node 'resizearea'\).*height and width"):
        export_with_report(b.graph, ["x"], [y.name])


# -- MaxPoolWithArgmax -----------------------------------------------------------------------------
@pytest.mark.parametrize("shapes_stated", [False, True])
@pytest.mark.parametrize("include_batch, targmax", [(False, DType.INT64), (True, DType.INT64), (True, DType.INT32)])
@pytest.mark.parametrize("shape, ksize, strides, padding", [((2, 5, 6, 3), (2, 2), (2, 2), "VALID"),
                                                           ((2, 5, 7, 2), (3, 3), (2, 2), "SAME"),
                                                           ((1, 6, 5, 4), (3, 2), (1, 2), "SAME")])
def test_max_pool_with_argmax(shape, ksize, strides, padding: str, include_batch: bool, targmax: DType,
                              shapes_stated: bool):
    rng = np.random.default_rng(sum(shape))
    b = Builder()
    values, argmax = b("MaxPoolWithArgmax", b.input("x", list(shape)), ksize=[1, *ksize, 1],
                       strides=[1, *strides, 1], padding=padding, include_batch_in_index=include_batch,
                       Targmax=targmax)
    x = rng.permutation(int(np.prod(shape))).reshape(shape).astype(np.float32)  # no ties
    if shapes_stated:
        out = Interpreter(b.graph).run({"x": x}, [values.name])[values.name].shape
        declared(values, out)
        declared(argmax, out)
    counts = check(b, {"x": x}, [values, argmax])
    assert counts["MaxPool"] == 1


def test_max_pool_with_argmax_ties_go_to_the_first_maximum():
    b = Builder()
    values, argmax = b("MaxPoolWithArgmax", b.input("x", [2, 6, 7, 3]), ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1],
                       padding="SAME", include_batch_in_index=True)
    check(b, {"x": np.random.default_rng(0).integers(0, 3, (2, 6, 7, 3)).astype(np.float32)}, [values, argmax])


# -- AdjustContrastv2 ------------------------------------------------------------------------------
@pytest.mark.parametrize("after_conv", [False, True])
@pytest.mark.parametrize("factor", [1.7, -0.5, 0.0])
def test_adjust_contrast(factor: float, after_conv: bool):
    rng = np.random.default_rng(int(factor * 10) % 7)
    b = Builder()
    x = b.input("x", [2, 5, 6, 3])
    if after_conv:
        x = declared(b("Conv2D", x, b.const(rng.standard_normal((1, 1, 3, 3)).astype(np.float32)),
                       strides=[1, 1, 1, 1], padding="VALID"), [2, 5, 6, 3])
    y = b("AdjustContrastv2", x, b.const(np.float32(factor)))
    counts = check(b, {"x": rng.standard_normal((2, 5, 6, 3)).astype(np.float32)}, [y], atol=1e-5)
    assert counts["ReduceMean"] == 1


# -- ExtractImagePatches ---------------------------------------------------------------------------
@pytest.mark.parametrize("sizes, strides, rates, padding", [((2, 2), (1, 1), (1, 1), "VALID"),
                                                            ((3, 2), (2, 3), (1, 1), "SAME"),
                                                            ((2, 3), (1, 2), (2, 1), "SAME"),
                                                            ((3, 3), (2, 2), (2, 2), "VALID"),
                                                            ((1, 1), (2, 2), (1, 1), "VALID")])
def test_extract_image_patches_copies_exactly(sizes, strides, rates, padding: str):
    rng = np.random.default_rng(sum(sizes + strides))
    b = Builder()
    y = b("ExtractImagePatches", b.input("x", [2, 7, 8, 3]), ksizes=[1, *sizes, 1], strides=[1, *strides, 1],
          rates=[1, *rates, 1], padding=padding)
    x = rng.standard_normal((2, 7, 8, 3)).astype(np.float32)
    x[0, 3, 4] = [np.inf, -np.inf, np.nan]  # copied, never mixed into neighbours
    b_int = Builder()
    z = b_int("ExtractImagePatches", b_int.input("x", [1, 6, 5, 2], DType.INT32), ksizes=[1, *sizes, 1],
              strides=[1, *strides, 1], rates=[1, *rates, 1], padding=padding)
    counts = check(b, {"x": x}, [y], atol=0)
    check(b_int, {"x": rng.integers(-9, 9, (1, 6, 5, 2)).astype(np.int32)}, [z])
    assert counts["Gather"] == 1 and "Slice" not in counts and sum(counts.values()) <= 4


def test_extract_image_patches_shape_reaches_its_readers():
    """The patches' static shape is known (rank, windows, k_h * k_w * C depth), so a reduction over
    their windows exports: it needs the rank (probe 7's patches-then-Mean model was refused)."""
    b = Builder()
    patches = b("ExtractImagePatches", b.input("x", [1, 6, 6, 3]), ksizes=[1, 2, 3, 1], strides=[1, 2, 2, 1],
                rates=[1, 1, 1, 1], padding="SAME")
    y = b("Mean", patches, b.const(np.int32([1, 2])), keep_dims=False)
    assert analyze(list(b.graph)).shapes[patches].dims == (1, 3, 3, 18)
    x = np.random.default_rng(7).standard_normal((1, 6, 6, 3)).astype(np.float32)
    counts = check(b, {"x": x}, [y], atol=1e-6)
    assert counts["Gather"] == 1


# -- a frozen TF graph, loaded as a user would -----------------------------------------------------
@pytest.mark.tf
def test_frozen_volume_and_detection_graph_matches_tf(tmp_path):
    """Conv3D, Conv3DTranspose, 3-D pools, NMS, CropAndResize, DepthToSpace and bicubic resizing from
    tf.raw_ops, frozen to a GraphDef: it loads (signature checks), exports and matches TF."""
    tf = pytest.importorskip("tensorflow")
    from compiler.modelio import load_model

    rng = np.random.default_rng(0)
    weights = [tf.constant(rng.standard_normal(s).astype(np.float32) * 0.3)
               for s in [(3, 3, 3, 5, 4), (2, 2, 2, 3, 4)]]

    def model(x):
        volume = tf.reshape(x, [1, 4, 8, 8, 5])
        y = tf.nn.relu(tf.raw_ops.Conv3D(input=volume, filter=weights[0], strides=[1] * 5, padding="SAME"))
        y = tf.raw_ops.MaxPool3D(input=y, ksize=[1, 2, 2, 2, 1], strides=[1, 2, 2, 2, 1], padding="VALID")
        y = tf.raw_ops.AvgPool3D(input=y, ksize=[1, 1, 3, 3, 1], strides=[1] * 5, padding="SAME")
        up = tf.raw_ops.Conv3DBackpropInputV2(input_sizes=[1, 4, 8, 8, 3], filter=weights[1], out_backprop=y,
                                              strides=[1, 2, 2, 2, 1], padding="SAME")
        boxes, scores = tf.reshape(x[0, :, :, :4], [-1, 4]), tf.reshape(x[0, :, :, 4], [-1])
        picked, count = tf.raw_ops.NonMaxSuppressionV4(boxes=boxes, scores=scores, max_output_size=6,
                                                       iou_threshold=0.4, score_threshold=0.2,
                                                       pad_to_max_output_size=True)
        crops = tf.raw_ops.CropAndResize(image=x[..., :3], boxes=tf.sigmoid(tf.gather(boxes, picked)),
                                         box_ind=tf.zeros([6], tf.int32), crop_size=[3, 4])
        wide = tf.raw_ops.ResizeBicubic(images=x, size=[32, 16], half_pixel_centers=True)
        return up, picked, count, crops, tf.nn.depth_to_space(x[..., :4], 2), wide

    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2
    frozen = convert_variables_to_constants_v2(tf.function(model).get_concrete_function(
        tf.TensorSpec([4, 8, 8, 5], tf.float32)))
    path = tmp_path / "model.pb"
    path.write_bytes(frozen.graph.as_graph_def().SerializeToString())
    source, names = frozen.inputs[0].name.split(":")[0], [t.name.split(":")[0] for t in frozen.outputs]
    x = rng.uniform(0, 1, (4, 8, 8, 5)).astype(np.float32)
    result = export_with_report(load_model(path), [source], names)
    onnx.checker.check_model(result.model, full_check=True)
    got = run_onnx(result.model, {source: x}, names)
    for name, want in zip(names, frozen(tf.constant(x))):
        np.testing.assert_allclose(got[name], want.numpy(), rtol=1e-5, atol=1e-5, err_msg=name)


@pytest.mark.parametrize("opset", [13, 18, 21])
def test_image_and_volume_ops_at_other_opsets(opset: int):
    rng = np.random.default_rng(opset)
    b = Builder()
    x, v = b.input("x", [1, 4, 6, 8]), b.input("v", [1, 4, 5, 6, 2])
    boxes, scores = b.input("boxes", [12, 4]), b.input("scores", [12])
    conv = declared(b("Conv3D", v, b.const(rng.standard_normal((2, 2, 2, 2, 3)).astype(np.float32)),
                      strides=five((1, 1, 1)), padding="SAME"), [1, 4, 5, 6, 3])
    outputs = [b("MaxPool3D", conv, ksize=five((2, 2, 2)), strides=five((2, 2, 2)), padding="SAME"),
               b("DepthToSpace", x, block_size=2), b("LRN", x, depth_radius=2),
               b("ResizeBicubic", x, ints(b, [8, 12]), half_pixel_centers=True),
               b("FakeQuantWithMinMaxArgs", x, min=-1.0, max=2.0), b("AdjustContrastv2", x, b.const(np.float32(1.5))),
               b("NonMaxSuppressionV3", boxes, scores, ints(b, 4), b.const(np.float32(0.5)), b.const(np.float32(0.1)))]
    found, count = detections(rng, 12)
    feeds = {"x": rng.standard_normal((1, 4, 6, 8)).astype(np.float32),
             "v": rng.standard_normal((1, 4, 5, 6, 2)).astype(np.float32), "boxes": found, "scores": count}
    check(b, feeds, outputs, opset=opset, atol=1e-5)
