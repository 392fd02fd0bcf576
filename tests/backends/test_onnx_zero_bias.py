"""A BiasAdd of zeros (a freshly initialised Keras layer) leaves no ONNX node."""
from __future__ import annotations

import numpy as np

from compiler.backends.onnx import export_with_report
from compiler.backends.onnx.zero_bias import find_zero_biases
from tests.backends.test_onnx_added_ops import check
from tests.backends.test_onnx_export import Builder


def _dense_3d(b: Builder, bias: np.ndarray):
    """A Keras Dense on a 3-D input: reshape, MatMul, reshape back, BiasAdd."""
    x = b.input("x", [2, 5, 4])
    flat = b("Reshape", x, b.const(np.asarray([-1, 4], np.int32)))
    product = b("MatMul", flat, b.const(np.random.default_rng(2).standard_normal((4, 3)).astype(np.float32)))
    back = b("Reshape", product, b.const(np.asarray([2, 5, 3], np.int32)))
    return b("BiasAdd", back, b.const(bias), name="bias_add")


def test_a_zero_bias_add_is_dropped():
    b = Builder()
    y = b("Relu", _dense_3d(b, np.asarray([0.0, -0.0, 0.0], np.float32)))
    counts = check(b, {"x": np.random.default_rng(1).standard_normal((2, 5, 4)).astype(np.float32)}, [y])
    assert "Add" not in counts


def test_a_nonzero_or_named_bias_add_stays():
    b = Builder()
    y = _dense_3d(b, np.asarray([0.0, 1e-30, 0.0], np.float32))
    assert not find_zero_biases(b.graph)
    b2 = Builder()
    named = _dense_3d(b2, np.zeros(3, np.float32))
    assert find_zero_biases(b2.graph) and not find_zero_biases(b2.graph, {"bias_add"})
    result = export_with_report(b2.graph, ["x"], [named.name])
    assert [o.name for o in result.model.graph.output] == ["bias_add"] and y.op.type == "BiasAdd"
