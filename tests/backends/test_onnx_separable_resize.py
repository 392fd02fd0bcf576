"""Resizes the ONNX backend lowers to two constant MatMuls, y = Wh @ x @ Ww^T: bicubic off TF's
1/1024 table or shrinking, area at partial-cell ratios, and ScaleAndTranslate (tf.image.resize's
antialiased and lanczos / gaussian / mitchellcubic methods).  Each matches gttc's interpreter under
onnxruntime, and a frozen tf.function using them matches TF."""
from __future__ import annotations

import numpy as np
import pytest

from compiler.backends.onnx import UnsupportedOpError, export_with_report
from compiler.ir.dtypes import DType
from tests.backends.test_onnx_added_ops import ints
from tests.backends.test_onnx_export import Builder
from tests.backends.test_onnx_image_volume_ops import check

KERNEL_TYPES = ["lanczos1", "lanczos3", "lanczos5", "gaussian", "box", "triangle", "keyscubic", "mitchellcubic"]


def _scale_and_translate(b: Builder, x, size, scale, translation, **attrs):
    return b("ScaleAndTranslate", x, ints(b, size), b.const(np.asarray(scale, np.float32)),
             b.const(np.asarray(translation, np.float32)), **attrs)


# -- ResizeBicubic -------------------------------------------------------------------------------
@pytest.mark.parametrize("align, half", [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize("shape, size", [((2, 8, 8, 3), (12, 12)), ((1, 64, 20, 2), (100, 7)),
                                         ((1, 9, 6, 1), (4, 13)), ((1, 1, 3, 2), (3, 7))])
def test_resize_bicubic_off_the_table_or_shrinking_is_two_matmuls(shape, size, align: bool, half: bool):
    rng = np.random.default_rng(sum(shape) + sum(size))
    b = Builder()
    y = b("ResizeBicubic", b.input("x", list(shape)), ints(b, size), align_corners=align, half_pixel_centers=half)
    counts = check(b, {"x": rng.standard_normal(shape).astype(np.float32)}, [y], atol=1e-5)
    assert counts["MatMul"] + counts.get("Identity", 0) >= 1 and "Resize" not in counts


@pytest.mark.parametrize("dtype", [DType.UINT8, DType.INT32, DType.DOUBLE])
def test_resize_bicubic_of_other_types_casts_to_float(dtype: DType):
    """TF's bicubic returns float32 for every input type: a Cast, then the matrices (on the table
    grid too, where a Resize would keep the input's type)."""
    rng = np.random.default_rng(5)
    b = Builder()
    y = b("ResizeBicubic", b.input("x", [1, 4, 6, 2], dtype), ints(b, [8, 12]), half_pixel_centers=True)
    counts = check(b, {"x": rng.uniform(0, 100, (1, 4, 6, 2)).astype(dtype.to_numpy())}, [y], atol=1e-4)
    assert counts["Cast"] == 1 and counts["MatMul"] == 2


def test_resize_bicubic_keeps_one_axis_when_it_is_the_identity():
    b = Builder()
    y = b("ResizeBicubic", b.input("x", [2, 5, 7, 3]), ints(b, [5, 10]), half_pixel_centers=True)
    counts = check(b, {"x": np.random.default_rng(1).standard_normal((2, 5, 7, 3)).astype(np.float32)}, [y])
    assert counts["MatMul"] == 1


def test_weight_matrices_over_the_cap_are_refused():
    b = Builder()
    y = b("ResizeBicubic", b.input("x", [1, 3000, 4, 1]), ints(b, [2000, 5]))
    with pytest.raises(UnsupportedOpError, match=r"'ResizeBicubic'.*2000x3000 weight matrix"):
        export_with_report(b.graph, ["x"], [y.name])


# -- ResizeArea ----------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [DType.FLOAT, DType.UINT8])
@pytest.mark.parametrize("shape, size, align", [((1, 5, 7, 2), (3, 4), False), ((1, 4, 4, 1), (2, 2), True),
                                                ((1, 6, 4, 1), (3, 8), False), ((2, 64, 9, 3), (100, 5), False),
                                                ((1, 1, 3, 2), (3, 5), True)])
def test_resize_area_partial_cells_are_two_matmuls(shape, size, align: bool, dtype: DType):
    rng = np.random.default_rng(sum(shape))
    b = Builder()
    y = b("ResizeArea", b.input("x", list(shape), dtype), ints(b, size), align_corners=align)
    counts = check(b, {"x": rng.uniform(0, 255, shape).astype(dtype.to_numpy())}, [y], atol=1e-4)
    assert counts["MatMul"] == 2 and counts.get("Cast", 0) == int(dtype != DType.FLOAT)


# -- ScaleAndTranslate ---------------------------------------------------------------------------
@pytest.mark.parametrize("antialias", [True, False])
@pytest.mark.parametrize("kernel_type", KERNEL_TYPES)
def test_scale_and_translate_kernels(kernel_type: str, antialias: bool):
    rng = np.random.default_rng(len(kernel_type))
    b = Builder()
    x = b.input("x", [2, 12, 16, 3])
    outputs = [_scale_and_translate(b, x, [5, 9], [5 / 12, 9 / 16], [0, 0], kernel_type=kernel_type,
                                    antialias=antialias),
               _scale_and_translate(b, x, [20, 13], [20 / 12, 13 / 16], [0, 0], kernel_type=kernel_type,
                                    antialias=antialias),
               _scale_and_translate(b, x, [7, 30], [0.6, 2.2], [1.5, -3.25], kernel_type=kernel_type.upper(),
                                    antialias=antialias)]
    counts = check(b, {"x": rng.standard_normal((2, 12, 16, 3)).astype(np.float32)}, outputs, atol=1e-5)
    assert counts["MatMul"] == 6


def test_scale_and_translate_of_a_dynamic_batch_and_integers():
    rng = np.random.default_rng(2)
    b = Builder()
    y = _scale_and_translate(b, b.input("x", [None, 10, 10, 2], DType.UINT8), [4, 10], [0.4, 1.0], [0, 0],
                             kernel_type="triangle")
    counts = check(b, {"x": rng.integers(0, 255, (3, 10, 10, 2)).astype(np.uint8)}, [y], atol=1e-4)
    assert counts["Cast"] == 1 and counts["MatMul"] == 1  # the width maps one to one


def test_scale_and_translate_refusals():
    b = Builder()
    x = b.input("x", [1, 4, None, 2])
    unknown = _scale_and_translate(b, x, [2, 2], [0.5, 0.5], [0, 0])
    bad_kernel = _scale_and_translate(b, b.input("z", [1, 4, 4, 2]), [2, 2], [0.5, 0.5], [0, 0], kernel_type="cubic")
    flipped = _scale_and_translate(b, b.input("w", [1, 4, 4, 2]), [2, 2], [-0.5, 0.5], [0, 0])
    for out, reason in ((unknown, "height and width"), (bad_kernel, "kernel_type 'cubic'"), (flipped, "positive")):
        with pytest.raises(UnsupportedOpError, match=rf"'ScaleAndTranslate'.*{reason}"):
            export_with_report(b.graph, ["x", "z", "w"], [out.name])


# -- a frozen TF graph, loaded as a user would ---------------------------------------------------
@pytest.mark.tf
def test_frozen_tf_image_resizes_match_tf(tmp_path):
    """tf.image.resize's bicubic off the table, area at an odd ratio, antialiased bilinear shrinking
    and lanczos3, frozen to a GraphDef: it loads, exports and matches TF."""
    tf = pytest.importorskip("tensorflow")
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    from compiler.modelio import load_model
    from compiler.runtime.onnx_runner import run_onnx

    def model(x):
        return (tf.image.resize(x, [12, 12], method="bicubic"),
                tf.image.resize(x, [5, 3], method="bicubic"),
                tf.image.resize(x, [5, 7], method="area"),
                tf.image.resize(x, [3, 5], method="bilinear", antialias=True),
                tf.image.resize(x, [13, 20], method="lanczos3"),
                tf.image.resize(x, [6, 6], method="mitchellcubic", antialias=True))

    frozen = convert_variables_to_constants_v2(tf.function(model).get_concrete_function(
        tf.TensorSpec([2, 8, 8, 3], tf.float32)))
    path = tmp_path / "model.pb"
    path.write_bytes(frozen.graph.as_graph_def().SerializeToString())
    source, names = frozen.inputs[0].name.split(":")[0], [t.name.split(":")[0] for t in frozen.outputs]
    x = np.random.default_rng(0).uniform(0, 1, (2, 8, 8, 3)).astype(np.float32)
    result = export_with_report(load_model(path), [source], names)
    assert "ScaleAndTranslate" in {op.type for op in load_model(path).ops}
    got = run_onnx(result.model, {source: x}, names)
    for name, want in zip(names, frozen(tf.constant(x))):
        np.testing.assert_allclose(got[name], want.numpy(), rtol=1e-5, atol=1e-5, err_msg=name)
