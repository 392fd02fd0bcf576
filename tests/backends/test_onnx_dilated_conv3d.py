"""A dilated Conv3D (SpaceToBatchND -> Conv3D -> BatchToSpaceND) exports as one dilated ONNX Conv.

TF's Conv3D has no explicit padding, so the rewrite pads with a zero Pad that the
Conv3D lowering folds into the Conv's pads.  The unfused graph in gttc's
interpreter is the reference, to 1e-6 of the output's magnitude."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

from compiler.backends.onnx import export_with_report
from compiler.runtime.interpreter import Interpreter
from compiler.runtime.onnx_runner import run_onnx
from tests.backends.test_onnx_added_ops import ints
from tests.backends.test_onnx_export import Builder


@pytest.mark.parametrize("size, block, pads, crops", [
    (8, [2, 2, 2], [[2, 2], [2, 2], [2, 2]], [[0, 0], [0, 0], [0, 0]]),   # SAME, 3x3x3, rate 2
    (7, [2, 1, 3], [[2, 3], [1, 1], [3, 5]], [[0, 1], [0, 0], [0, 2]]),   # odd size, unequal rates
    (9, [3, 3, 3], [[0, 0], [0, 0], [0, 0]], [[0, 0], [0, 0], [0, 0]]),   # VALID: no Pad at all
])
def test_dilated_conv3d_is_one_conv(size, block, pads, crops):
    rng = np.random.default_rng(size)
    b = Builder()
    x = b.input("x", [1, size, size, size, 2])
    s2b = b("SpaceToBatchND", x, ints(b, block), ints(b, pads))
    weights = b.const(rng.standard_normal((3, 3, 3, 2, 4)).astype(np.float32))
    conv = b("Conv3D", s2b, weights, strides=[1] * 5, padding="VALID")
    out = b("BatchToSpaceND", conv, ints(b, block), ints(b, crops), name="b2s")
    feeds = {"x": rng.standard_normal((1, size, size, size, 2)).astype(np.float32)}
    want = Interpreter(b.graph).run(feeds, [out.name])[out.name]
    result = export_with_report(b.graph, ["x"], [out.name])
    onnx.checker.check_model(result.model, full_check=True)
    got = run_onnx(result.model, feeds, [out.name])[out.name]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6 * np.abs(want).max())
    assert result.report.op_counts == {"Conv": 1, "Transpose": 2}
    assert result.report.stats["dilated_convs"] == 1
