"""A channels-last FusedBatchNorm after Reshape(MatMul) folds into the matmul's weights at export
(LeViT's Dense + BatchNormalization on tokens); other reshapes and readers keep it."""
from __future__ import annotations

import numpy as np

from compiler.backends.onnx.reshaped_batch_norm import find_sites
from compiler.ir.dtypes import DType
from tests.backends.test_onnx_added_ops import check
from tests.backends.test_onnx_export import Builder

TOKENS, FEATURES, WIDTH = 6, 5, 4


def dense_then_norm(b: Builder, rng, target, **bn_attrs):
    """x [1, TOKENS, FEATURES] -> Reshape -> MatMul -> Reshape(target) -> FusedBatchNormV3."""
    x = b.input("x", [1, TOKENS, FEATURES])
    rows = b("Reshape", x, b.const(np.asarray([TOKENS, FEATURES], np.int32)), Tshape=DType.INT32)
    product = b("MatMul", rows, b.const(rng.standard_normal((FEATURES, WIDTH)).astype(np.float32)))
    shaped = b("Reshape", product, b.const(np.asarray(target, np.int32)), Tshape=DType.INT32)
    stats = [rng.uniform(0.5, 1.5, WIDTH), rng.normal(0, 0.2, WIDTH), rng.normal(0, 0.5, WIDTH),
             rng.uniform(0.5, 2.0, WIDTH)]
    attrs = {"is_training": False, "epsilon": 1e-3, "U": DType.FLOAT, **bn_attrs}
    return b("FusedBatchNormV3", shaped, *(b.const(s.astype(np.float32)) for s in stats), **attrs)[0]


def feeds(rng) -> dict[str, np.ndarray]:
    return {"x": rng.standard_normal((1, TOKENS, FEATURES)).astype(np.float32)}


def test_the_batch_norm_becomes_weights_and_a_bias():
    rng = np.random.default_rng(21)
    b = Builder()
    out = dense_then_norm(b, rng, [1, 2, TOKENS // 2, WIDTH])
    counts = check(b, feeds(rng), [b("Relu", out)])
    assert "BatchNormalization" not in counts and counts["Gemm"] == 1  # the shift rides on the Gemm


def test_a_reshape_moving_the_columns_or_a_channels_first_norm_keeps_it():
    rng = np.random.default_rng(22)
    for target, attrs in (([1, WIDTH, TOKENS // 2, 2], {}), ([1, 2, TOKENS // 2, WIDTH], {"data_format": "NCHW"}),
                          ([1, 2, TOKENS // 2, WIDTH], {"is_training": True})):
        b = Builder()
        dense_then_norm(b, rng, target, **attrs)
        assert not find_sites(b.graph), (target, attrs)


def test_a_named_or_shared_reshape_keeps_it():
    rng = np.random.default_rng(23)
    b = Builder()
    out = dense_then_norm(b, rng, [1, 2, TOKENS // 2, WIDTH])
    reshape = out.op.operands[0].op
    assert len(find_sites(b.graph)) == 1
    assert not find_sites(b.graph, named=[reshape.name])
    b("Relu", reshape.results[0])  # a second reader of the reshaped matmul
    assert not find_sites(b.graph)
