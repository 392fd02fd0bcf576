"""Casts to and from TF's eight-bit float types (Keras 3's `model.quantize("float8")` freezes to such
round trips): ONNX has four of them from opset 19, with Cast's `saturate=0` giving TF's NaN or inf past
the range.  Before opset 19, and for the type ONNX lacks, the export refuses the Cast by name."""
from __future__ import annotations

import numpy as np
import pytest

from compiler.backends.onnx import UnsupportedOpError, export_with_report
from compiler.backends.onnx.dtypes import FLOAT8_OPSET
from compiler.frontends.graphdef import load_graph_bytes
from compiler.ir.dtypes import DType
from compiler.runtime.interpreter import Interpreter
from compiler.runtime.onnx_runner import run_onnx
from tests.backends.test_onnx_export import Builder
from tests.oracle import require_tf, run_tf

# Ordinary values, ties, subnormals of every format, the formats' largest values and beyond, inf and NaN.
VALUES = np.array([0.1, -0.3, 17.5, 0.0013, 3e-3, 2.0 ** -7, 2.0 ** -10, 2.0 ** -17, 1e-9, 240.0, 247.0, 448.0,
                   449.0, 465.0, -500.0, 1000.0, 57344.0, 1e6, np.inf, -np.inf, np.nan, 0.0], np.float32)
# onnxruntime 1.32 gives NaN where TF rounds up to inf at e5m2's halfway point past its largest value.
ORT_E5M2_QUIRK = 61440.0


def _round_trip(dtype: DType) -> tuple[Builder, str]:
    b = Builder()
    narrow = b("Cast", b.input("x", [len(VALUES)]), DstT=dtype)
    return b, b("Cast", narrow, DstT=DType.FLOAT).name


@pytest.mark.parametrize("dtype", [DType.FLOAT8_E4M3FN, DType.FLOAT8_E5M2, DType.FLOAT8_E4M3FNUZ,
                                   DType.FLOAT8_E5M2FNUZ])
def test_round_trip_matches_the_interpreter(dtype: DType):
    assert ORT_E5M2_QUIRK not in VALUES
    b, out = _round_trip(dtype)
    result = export_with_report(b.graph, ["x"], [out], opset=FLOAT8_OPSET)
    assert result.report.op_counts == {"Cast": 2}
    expected = Interpreter(b.graph).run({"x": VALUES}, [out])[out]
    np.testing.assert_array_equal(run_onnx(result.model, {"x": VALUES}, [out])[out], expected)


def test_before_opset_19_the_cast_is_refused_by_name():
    b, out = _round_trip(DType.FLOAT8_E4M3FN)
    with pytest.raises(UnsupportedOpError, match=r"'Cast' \(node 'cast'\).*float8_e4m3fn needs ONNX opset 19 "
                                                 r"or later \(this export is at 17; use --opset 19\)"):
        export_with_report(b.graph, ["x"], [out], opset=17)


def test_the_type_onnx_lacks_is_refused_by_name():
    b, out = _round_trip(DType.FLOAT8_E4M3B11FNUZ)
    with pytest.raises(UnsupportedOpError, match=r"'Cast' \(node 'cast'\).*ONNX has no float8_e4m3b11fnuz type"):
        export_with_report(b.graph, ["x"], [out], opset=FLOAT8_OPSET)


@pytest.mark.tf
def test_round_trip_matches_tf():
    tf = require_tf()
    from tensorflow.python.framework import dtypes as tf_dtypes

    from tests.backends.test_onnx_ragged import frozen  # a TF-only module: imported once TF is known

    def build():
        x = tf.compat.v1.placeholder(tf.float32, [len(VALUES)], name="x")
        return ["x"], {name: tf.cast(tf.cast(x, getattr(tf_dtypes, name)), tf.float32)
                       for name in ("float8_e4m3fn", "float8_e5m2")}

    data, inputs, outputs = frozen(build)
    result = export_with_report(load_graph_bytes(data), inputs, outputs, opset=FLOAT8_OPSET)
    feeds = {"x": VALUES}
    want, got = run_tf(data, feeds, outputs), run_onnx(result.model, feeds, outputs)
    for name in outputs:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
