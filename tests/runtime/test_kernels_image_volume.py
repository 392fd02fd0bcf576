"""3-D convolutions and pools, image and detection kernels against TensorFlow's eager CPU kernels.

Same harness and tolerance as test_kernels.py: seeded random inputs, several
attribute variants each, exact dtype and shape, floats within rtol 1e-5.
"""
from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from compiler.runtime.kernels import KernelError  # noqa: E402
from tests.backends.test_onnx_image_volume_ops import (BACKPROP3D_CASES, COMBINED_CASES, CONV3D_CASES,  # noqa: E402
                                                      detections, five, image_detections)
from tests.runtime.test_kernels import (F32, assert_matches, check, check_or_both_fail, check_xla, rand,  # noqa: E402
                                         run_ours)

pytestmark = pytest.mark.tf


# ---------------------------------------------------------------- 3-D convolutions and pools
@pytest.mark.parametrize("case", CONV3D_CASES)
def test_conv3d(case):
    shape, fshape, strides, dilations, padding = case
    rng = np.random.default_rng(len(shape) + sum(fshape))
    attrs = {"strides": five(strides), "dilations": five(dilations), "padding": padding}
    check("Conv3D", {"input": rand(rng, shape), "filter": rand(rng, fshape)}, attrs)


def test_conv3d_channels_first_and_float64():
    rng = np.random.default_rng(3)
    x, w = rand(rng, (1, 2, 5, 4, 6)), rand(rng, (2, 2, 3, 2, 3))
    attrs = {"strides": [1, 1, 2, 1, 2], "padding": "SAME", "data_format": "NCDHW"}
    check("Conv3D", {"input": x, "filter": w}, attrs)
    check("Conv3D", {"input": x.astype(np.float64).transpose(0, 2, 3, 4, 1), "filter": w.astype(np.float64)},
          {"strides": [1, 1, 1, 1, 1], "padding": "VALID"})


def test_conv3d_refuses_depth_mismatch_and_bad_strides():
    x, w = np.zeros((1, 3, 3, 3, 4), F32), np.zeros((1, 1, 1, 2, 2), F32)
    with pytest.raises(KernelError, match="depth"):
        run_ours("Conv3D", [x, w], {"strides": [1, 1, 1, 1, 1], "padding": "SAME"})
    with pytest.raises(KernelError, match="strides"):
        run_ours("Conv3D", [x, np.zeros((1, 1, 1, 4, 2), F32)], {"strides": [2, 1, 1, 1, 1], "padding": "SAME"})


@pytest.mark.parametrize("case", BACKPROP3D_CASES)
def test_conv3d_backprop_input(case):
    shape, window, channels_out, strides, dilations, padding = case
    rng = np.random.default_rng(sum(shape) + channels_out)
    w = rand(rng, (*window, shape[-1], channels_out))
    attrs = {"strides": five(strides), "dilations": five(dilations), "padding": padding}
    forward = run_ours("Conv3D", [np.zeros(shape, F32), w], attrs)[0]
    inputs = {"input_sizes": np.asarray(shape, np.int32), "filter": w, "out_backprop": rand(rng, forward.shape)}
    if dilations == (1, 1, 1):
        check("Conv3DBackpropInputV2", inputs, attrs)
    else:  # TF's CPU build has no dilated kernel for it; XLA has
        check_xla("Conv3DBackpropInputV2", inputs, attrs)


POOL3D_CASES = [  # (input shape, ksize, strides, padding)
    ((2, 5, 6, 7, 3), (2, 2, 2), (2, 2, 2), "VALID"),
    ((1, 5, 6, 7, 2), (3, 3, 3), (2, 2, 2), "SAME"),
    ((1, 7, 4, 5, 2), (3, 1, 2), (1, 2, 3), "SAME"),
    ((1, 6, 5, 4, 1), (2, 3, 2), (3, 1, 1), "VALID"),
]


@pytest.mark.parametrize("op", ["MaxPool3D", "AvgPool3D"])
@pytest.mark.parametrize("case", POOL3D_CASES)
def test_pool3d(op: str, case):
    shape, ksize, strides, padding = case
    rng = np.random.default_rng(sum(shape))
    attrs = {"ksize": five(ksize), "strides": five(strides), "padding": padding}
    check(op, {"input": rand(rng, shape)}, attrs)


@pytest.mark.parametrize("op", ["MaxPool3D", "AvgPool3D"])
def test_pool3d_channels_first(op: str):
    rng = np.random.default_rng(9)
    attrs = {"ksize": [1, 1, 2, 3, 2], "strides": [1, 1, 2, 2, 1], "padding": "SAME", "data_format": "NCDHW"}
    x = rand(rng, (1, 2, 5, 6, 4))
    want = tf.transpose(getattr(tf.raw_ops, op)(input=x.transpose(0, 2, 3, 4, 1), ksize=[1, 2, 3, 2, 1],
                                                strides=[1, 2, 2, 1, 1], padding="SAME"), [0, 4, 1, 2, 3])
    assert_matches(op, run_ours(op, [x], attrs), [want.numpy()])


# ---------------------------------------------------------------- ResizeBicubic
@pytest.mark.parametrize("align, half", [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize("shape, size", [((2, 5, 7, 3), (11, 4)), ((1, 4, 4, 2), (8, 8)), ((1, 9, 6, 1), (4, 13)),
                                         ((1, 1, 3, 2), (3, 5))])
def test_resize_bicubic(shape, size, align: bool, half: bool):
    rng = np.random.default_rng(sum(shape) + sum(size))
    attrs = {"align_corners": align, "half_pixel_centers": half}
    check("ResizeBicubic", {"images": rand(rng, shape), "size": np.asarray(size, np.int32)}, attrs)
    check("ResizeBicubic", {"images": rand(rng, shape, np.int32, -50, 50), "size": np.asarray(size, np.int32)}, attrs)


# ---------------------------------------------------------------- CropAndResize
def _boxes(rng: np.random.Generator, count: int) -> np.ndarray:
    """Normalised boxes, some flipped and some reaching outside the image."""
    corners = rng.uniform(-0.3, 1.3, (count, 4)).astype(F32)
    corners[0] = [0.1, 0.2, 0.9, 0.7]
    corners[1] = [0.8, 0.9, 0.2, 0.1]  # flipped
    return corners


@pytest.mark.parametrize("method", ["bilinear", "nearest"])
@pytest.mark.parametrize("crop, fill", [((3, 4), 0.0), ((1, 5), -1.5), ((6, 1), 2.0), ((1, 1), 0.0)])
def test_crop_and_resize(method: str, crop, fill: float):
    rng = np.random.default_rng(sum(crop))
    image = rand(rng, (3, 5, 7, 2))
    inputs = {"image": image, "boxes": _boxes(rng, 6), "box_ind": rng.integers(0, 3, 6).astype(np.int32),
              "crop_size": np.asarray(crop, np.int32)}
    check("CropAndResize", inputs, {"method": method, "extrapolation_value": fill})
    check("CropAndResize", {**inputs, "image": image.astype(np.int32) * 7},
          {"method": method, "extrapolation_value": fill})


def test_crop_and_resize_refuses_bad_box_index():
    image, boxes = np.zeros((2, 3, 3, 1), F32), np.zeros((1, 4), F32)
    with pytest.raises(KernelError, match="box_ind"):
        run_ours("CropAndResize", [image, boxes, np.asarray([2], np.int32), np.asarray([2, 2], np.int32)], {})


# ---------------------------------------------------------------- NonMaxSuppression
NMS_CASES = [(30, 10, 0.5, 0.2), (40, 40, 0.3, 0.0), (25, 5, 0.7, 0.5), (20, 0, 0.5, 0.0), (30, 25, 0.0, 0.6)]


@pytest.mark.parametrize("count, max_out, iou, score", NMS_CASES)
def test_non_max_suppression_versions(count: int, max_out: int, iou: float, score: float):
    rng = np.random.default_rng(count + max_out)
    boxes, scores = detections(rng, count)
    common = {"boxes": boxes, "scores": scores, "max_output_size": np.int32(max_out), "iou_threshold": F32(iou)}
    check("NonMaxSuppressionV2", common)
    check("NonMaxSuppression", {k: v for k, v in common.items() if k != "iou_threshold"}, {"iou_threshold": iou})
    check("NonMaxSuppressionV3", {**common, "score_threshold": F32(score)})
    for pad in (False, True):
        check("NonMaxSuppressionV4", {**common, "score_threshold": F32(score)}, {"pad_to_max_output_size": pad})
        check("NonMaxSuppressionV5", {**common, "score_threshold": F32(score), "soft_nms_sigma": F32(0)},
              {"pad_to_max_output_size": pad})


def test_non_max_suppression_refusals():
    boxes, scores = detections(np.random.default_rng(0), 4)
    args = [boxes, scores, np.int32(2), F32(0.5), F32(0.0)]
    with pytest.raises(KernelError, match="soft_nms_sigma"):
        run_ours("NonMaxSuppressionV5", args + [F32(0.5)], {})
    with pytest.raises(KernelError, match="iou_threshold"):
        run_ours("NonMaxSuppressionV3", [boxes, scores, np.int32(2), F32(1.5), F32(0.0)], {})


@pytest.mark.parametrize("boxes_per_class", [False, True])
@pytest.mark.parametrize("per_class, total, pad, clip", COMBINED_CASES)
def test_combined_non_max_suppression(per_class: int, total: int, pad: bool, clip: bool, boxes_per_class: bool):
    rng = np.random.default_rng(per_class + total)
    boxes, scores = image_detections(rng, 3, 15, 4 if boxes_per_class else 1, 4)
    inputs = {"boxes": boxes, "scores": scores, "max_output_size_per_class": np.int32(per_class),
              "max_total_size": np.int32(total), "iou_threshold": F32(0.45), "score_threshold": F32(0.25)}
    check("CombinedNonMaxSuppression", inputs, {"pad_per_class": pad, "clip_boxes": clip})


def test_combined_non_max_suppression_refusals():
    boxes, scores = image_detections(np.random.default_rng(1), 1, 4, 1, 2)
    base = {"boxes": boxes, "scores": scores, "max_output_size_per_class": np.int32(2),
            "max_total_size": np.int32(3), "iou_threshold": F32(0.5), "score_threshold": F32(0.0)}
    for change in ({"max_output_size_per_class": np.int32(0)}, {"max_total_size": np.int32(0)},
                   {"iou_threshold": F32(1.5)}, {"boxes": boxes[:, :, :, :3]}):
        assert not check_or_both_fail("CombinedNonMaxSuppression", {**base, **change}, {})


# ---------------------------------------------------------------- QuantizeAndDequantize
QDQ_CASES = [(8, True, True, False, "HALF_TO_EVEN", -1), (8, True, False, True, "HALF_UP", -1),
             (4, False, True, False, "HALF_UP", -1), (8, True, False, False, "HALF_TO_EVEN", 1),
             (16, False, False, True, "HALF_TO_EVEN", -1), (2, True, True, True, "HALF_TO_EVEN", -1)]


@pytest.mark.parametrize("bits, signed, given, narrow, mode, axis", QDQ_CASES)
@pytest.mark.parametrize("op", ["QuantizeAndDequantizeV2", "QuantizeAndDequantizeV3", "QuantizeAndDequantizeV4"])
def test_quantize_and_dequantize_is_bit_exact(op, bits, signed, given, narrow, mode, axis):
    rng = np.random.default_rng(bits + 10 * (axis + 1))
    x = (rng.standard_normal((3, 5, 4)) * 2).astype(F32)
    depth = () if axis == -1 else (5,)
    low, high = F32(-1.3) * np.ones(depth, F32), F32(0.7) * np.ones(depth, F32)
    attrs = {"signed_input": signed, "range_given": given, "narrow_range": narrow, "axis": axis}
    inputs = {"input": x, "input_min": low, "input_max": high}
    if op == "QuantizeAndDequantizeV3":
        inputs["num_bits"] = np.int32(bits)
    else:
        attrs.update(num_bits=bits, round_mode=mode)
    if given and axis != -1 and op != "QuantizeAndDequantizeV3":
        assert not check_or_both_fail(op, inputs, attrs)  # TF's V2/V4 kernels refuse a given range per axis
        return
    assert check_or_both_fail(op, inputs, attrs)


def test_quantize_and_dequantize_refusals():
    x = np.ones((2, 3), F32)
    for low, high, attrs in ((F32(1), F32(-1), {"range_given": True}), (np.zeros(2, F32), np.ones(2, F32),
                                                                          {"range_given": True}),
                             (F32(-1), F32(1), {"num_bits": 0})):
        assert not check_or_both_fail("QuantizeAndDequantizeV2", {"input": x, "input_min": low, "input_max": high},
                                      attrs)


# ---------------------------------------------------------------- FakeQuant
FAKE_QUANT_CASES = [(-6.0, 6.0, 8, False), (-1.3, 2.7, 8, True), (0.1, 3.0, 4, False), (-5.0, -0.2, 8, False),
                    (-0.37, 0.81, 12, False), (-2.5, 2.5, 2, True), (-1.0, 1.0, 8, False), (-6.0, 6.0, 16, True)]


@pytest.mark.parametrize("lo, hi, bits, narrow", FAKE_QUANT_CASES)
def test_fake_quant_args_and_vars_are_bit_exact(lo: float, hi: float, bits: int, narrow: bool):
    rng = np.random.default_rng(bits)
    x = (rng.standard_normal(4000) * 6).astype(F32)
    x[:4] = [0.0, lo, hi, 100.0]
    flags = {"num_bits": bits, "narrow_range": narrow}
    ours = [run_ours("FakeQuantWithMinMaxArgs", [x], {"min": lo, "max": hi, **flags})[0],
            run_ours("FakeQuantWithMinMaxVars", [x, F32(lo), F32(hi)], flags)[0]]
    want = [tf.raw_ops.FakeQuantWithMinMaxArgs(inputs=x, min=lo, max=hi, **flags).numpy(),
            tf.raw_ops.FakeQuantWithMinMaxVars(inputs=x, min=F32(lo), max=F32(hi), **flags).numpy()]
    for got, exp in zip(ours, want):
        assert got.dtype == exp.dtype == F32
        if bits <= 12:
            np.testing.assert_array_equal(got, exp)
        else:  # a value a few ulps from a half step may round the other way: one step at most, rarely
            step = (hi - lo) / ((1 << bits) - 1 - narrow)
            np.testing.assert_allclose(got, exp, rtol=0, atol=1.01 * step)
            assert (got != exp).mean() < 1e-3
        assert got[0] == 0


@pytest.mark.parametrize("bits, narrow", [(8, False), (8, True), (4, False), (12, True)])
def test_fake_quant_per_channel_is_bit_exact(bits: int, narrow: bool):
    """Keras QAT's weight quantizer: one nudged range per last-axis channel (the ranges of the
    per-tensor cases, one per channel)."""
    rng = np.random.default_rng(bits + narrow)
    lo, hi = (np.asarray([case[i] for case in FAKE_QUANT_CASES[:6]], F32) for i in (0, 1))
    x = (rng.standard_normal((30, 7, 6)) * 4).astype(F32)
    x[0, 0], x[0, 1], x[0, 2] = lo, hi, 0.0
    flags = {"num_bits": bits, "narrow_range": narrow}
    got = run_ours("FakeQuantWithMinMaxVarsPerChannel", [x, lo, hi], flags)[0]
    want = tf.raw_ops.FakeQuantWithMinMaxVarsPerChannel(inputs=x, min=lo, max=hi, **flags).numpy()
    assert got.dtype == want.dtype == F32
    np.testing.assert_array_equal(got, want)
    assert not check_or_both_fail("FakeQuantWithMinMaxVarsPerChannel",
                                  {"inputs": x, "min": lo[:5], "max": hi[:5]}, flags)


def test_fake_quant_over_an_empty_range_is_zeros_as_in_tf():
    """[0, 0], an untrained Keras QAT range: TF's Vars kernels give zeros, per channel too."""
    x = (np.random.default_rng(5).standard_normal((3, 4)) * 3).astype(F32)
    x[0] = [np.inf, np.nan, -np.inf, 0.0]
    zero = F32(0)
    got = run_ours("FakeQuantWithMinMaxVars", [x, zero, zero], {})[0]
    np.testing.assert_array_equal(got, tf.raw_ops.FakeQuantWithMinMaxVars(inputs=x, min=zero, max=zero).numpy())
    lo, hi = np.asarray([0, -1, 0, -6], F32), np.asarray([0, 1, 0, 6], F32)
    got = run_ours("FakeQuantWithMinMaxVarsPerChannel", [x[1:], lo, hi], {})[0]
    want = tf.raw_ops.FakeQuantWithMinMaxVarsPerChannel(inputs=x[1:], min=lo, max=hi).numpy()
    np.testing.assert_array_equal(got, want)
    assert not got[:, [0, 2]].any()


def test_fake_quant_refusals():
    with pytest.raises(KernelError, match="smaller than max"):
        run_ours("FakeQuantWithMinMaxVars", [np.zeros(3, F32), F32(1), F32(1)], {})
    with pytest.raises(KernelError, match="smaller than max"):  # as TF's Args kernel refuses it
        run_ours("FakeQuantWithMinMaxArgs", [np.zeros(3, F32)], {"min": 0.0, "max": 0.0})
    with pytest.raises(KernelError, match="num_bits"):
        run_ours("FakeQuantWithMinMaxArgs", [np.zeros(3, F32)], {"num_bits": 17})


# ---------------------------------------------------------------- ResizeArea
@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("shape, size", [((2, 6, 9, 3), (4, 3)), ((1, 5, 7, 2), (11, 4)), ((1, 9, 6, 1), (4, 13)),
                                         ((1, 1, 3, 2), (3, 5)), ((1, 64, 9, 3), (100, 5))])
def test_resize_area(shape, size, align: bool):
    rng = np.random.default_rng(sum(shape) + sum(size))
    inputs = {"images": rand(rng, shape), "size": np.asarray(size, np.int32)}
    check("ResizeArea", inputs, {"align_corners": align})
    check("ResizeArea", {**inputs, "images": rand(rng, shape, np.uint8, 0, 255)}, {"align_corners": align})


# ---------------------------------------------------------------- ScaleAndTranslate
SAMPLING_KERNELS = ["lanczos1", "lanczos3", "lanczos5", "gaussian", "box", "triangle", "keyscubic", "mitchellcubic"]
SCALE_CASES = [  # (shape, size, scale or None for size / input, translation)
    ((2, 8, 8, 3), (12, 12), None, (0, 0)), ((1, 64, 20, 2), (100, 7), None, (0, 0)),
    ((1, 16, 16, 2), (5, 3), None, (0, 0)), ((1, 9, 7, 1), (4, 13), (0.37, 1.9), (1.3, -2.1)),
    ((1, 5, 6, 1), (5, 6), (1, 1), (0, 0)), ((1, 10, 10, 1), (7, 9), (0.1, 3.0), (-3, 20)),
    ((1, 1, 3, 2), (3, 5), None, (0.5, 0)),
]


def _scale_inputs(images: np.ndarray, size, scale, translation) -> dict[str, np.ndarray]:
    scale = scale or [s / d for s, d in zip(size, images.shape[1:3])]
    return {"images": images, "size": np.asarray(size, np.int32), "scale": np.asarray(scale, F32),
            "translation": np.asarray(translation, F32)}


@pytest.mark.parametrize("antialias", [True, False])
@pytest.mark.parametrize("kernel_type", SAMPLING_KERNELS)
@pytest.mark.parametrize("case", SCALE_CASES)
def test_scale_and_translate(case, kernel_type: str, antialias: bool):
    shape, size, scale, translation = case
    rng = np.random.default_rng(sum(shape) + sum(size))
    attrs = {"kernel_type": kernel_type, "antialias": antialias}
    check("ScaleAndTranslate", _scale_inputs(rand(rng, shape), size, scale, translation), attrs)


@pytest.mark.parametrize("dtype", [np.uint8, np.int32, np.float64])
def test_scale_and_translate_of_other_types_and_defaults(dtype):
    """Always float32 out; kernel_type is matched ignoring case, and defaults to antialiased lanczos3."""
    rng = np.random.default_rng(7)
    inputs = _scale_inputs(rand(rng, (2, 9, 11, 2), dtype, 0, 200), (5, 17), None, (0.25, -1))
    check("ScaleAndTranslate", inputs, {"kernel_type": "MitchellCubic", "antialias": False})
    assert_matches("ScaleAndTranslate", run_ours("ScaleAndTranslate", inputs, {}),
                   [tf.raw_ops.ScaleAndTranslate(**inputs).numpy()])


@pytest.mark.parametrize("scale, translation, attrs", [((0.0, 1.0), (0, 0), {}), ((1.0, -2.0), (0, 0), {}),
                                                       ((1.0, 1.0), (0, 0, 0), {}),
                                                       ((1.0, 1.0), (0, 0), {"kernel_type": "cubic"})])
def test_scale_and_translate_refuses_what_tf_refuses(scale, translation, attrs):
    inputs = _scale_inputs(np.ones((1, 4, 4, 1), F32), (3, 3), scale, translation)
    assert not check_or_both_fail("ScaleAndTranslate", inputs, attrs)


# ---------------------------------------------------------------- MaxPoolWithArgmax
@pytest.mark.parametrize("include_batch", [False, True])
@pytest.mark.parametrize("shape, ksize, strides, padding", [((2, 5, 6, 3), (2, 2), (2, 2), "VALID"),
                                                           ((2, 5, 7, 2), (3, 3), (2, 2), "SAME"),
                                                           ((1, 6, 5, 4), (3, 2), (1, 2), "SAME")])
def test_max_pool_with_argmax(shape, ksize, strides, padding: str, include_batch: bool):
    rng = np.random.default_rng(sum(shape))
    x = rng.permutation(int(np.prod(shape))).reshape(shape).astype(F32)  # distinct: no ties to break
    attrs = {"ksize": [1, *ksize, 1], "strides": [1, *strides, 1], "padding": padding,
             "include_batch_in_index": include_batch}
    check("MaxPoolWithArgmax", {"input": x}, attrs)
    check("MaxPoolWithArgmax", {"input": np.round(x / 7).astype(F32)}, {**attrs, "Targmax": np.int32},
          ir_attrs={})


# ---------------------------------------------------------------- AdjustContrastv2, ExtractImagePatches
@pytest.mark.parametrize("shape, factor", [((2, 5, 6, 3), 1.7), ((4, 3, 2), -0.5), ((1, 2, 3, 3, 2), 0.0)])
def test_adjust_contrast(shape, factor: float):
    rng = np.random.default_rng(len(shape))
    check("AdjustContrastv2", {"images": rand(rng, shape), "contrast_factor": F32(factor)})


@pytest.mark.parametrize("sizes, strides, rates, padding", [((2, 2), (1, 1), (1, 1), "VALID"),
                                                            ((3, 2), (2, 3), (1, 1), "SAME"),
                                                            ((2, 3), (1, 2), (2, 1), "SAME"),
                                                            ((3, 3), (2, 2), (2, 2), "VALID")])
def test_extract_image_patches(sizes, strides, rates, padding: str):
    rng = np.random.default_rng(sum(sizes + strides))
    attrs = {"ksizes": [1, *sizes, 1], "strides": [1, *strides, 1], "rates": [1, *rates, 1], "padding": padding}
    check("ExtractImagePatches", {"images": rand(rng, (2, 7, 8, 3))}, attrs)
    check("ExtractImagePatches", {"images": rand(rng, (1, 6, 5, 2), np.int32, -9, 9)}, attrs)


# ---------------------------------------------------------------- AdjustHue, AdjustSaturation
def _colours(rng: np.random.Generator) -> np.ndarray:
    """Random RGB pixels plus greys, primaries and pixels with two equal channels."""
    pixels = rng.uniform(0, 1, (2, 4, 5, 3)).astype(F32)
    pixels[0, 0] = [[0.5, 0.5, 0.5], [1, 0, 0], [0, 1, 0], [0, 0, 1], [0.2, 0.7, 0.7]]
    pixels[0, 1, :3] = [[0.7, 0.7, 0.2], [0.7, 0.2, 0.7], [0, 0, 0]]
    return pixels


@pytest.mark.parametrize("delta", [0.0, 0.2, -0.45, 0.9, -1.0])
def test_adjust_hue(delta: float):
    check("AdjustHue", {"images": _colours(np.random.default_rng(1)), "delta": F32(delta)})


@pytest.mark.parametrize("scale", [0.0, 0.5, 1.0, 1.7, 4.0])
def test_adjust_saturation(scale: float):
    check("AdjustSaturation", {"images": _colours(np.random.default_rng(2)), "scale": F32(scale)})


@pytest.mark.parametrize("dtype", [F32, np.float64])
def test_rgb_to_hsv_and_back(dtype):
    pixels = _colours(np.random.default_rng(3)).astype(dtype)
    hsv = check("RGBToHSV", {"images": pixels})[0]
    check("HSVToRGB", {"images": hsv})
    check("HSVToRGB", {"images": np.random.default_rng(4).uniform(0, 1, (3, 7, 3)).astype(dtype)})
