"""A per-channel x * s + b (a batch norm -O2 could not fold) exports as one BatchNormalization
(compiler/backends/onnx/channel_affine.py), compared with gttc's interpreter."""
from __future__ import annotations

import numpy as np
import pytest

from compiler.ir.dtypes import DType
from tests.backends.test_onnx_added_ops import check
from tests.backends.test_onnx_export import Builder


def _affine(b: Builder, x, scale: np.ndarray, shift: np.ndarray, add: str = "AddV2"):
    return b(add, b("Mul", x, b.const(scale)), b.const(shift))


def _concat_of_convs(b: Builder, rng, channels: int = 4):
    """[1, 5, 5, 2 * channels] from two convs: a batch norm after it has no conv to fold into."""
    x = b.input("x", [1, 5, 5, 3])
    convs = [b("Conv2D", x, b.const(rng.standard_normal((3, 3, 3, channels)).astype(np.float32)),
               strides=[1, 1, 1, 1], padding="SAME") for _ in range(2)]
    return b("ConcatV2", *convs, b.const(np.int32(3)), N=2, Tidx=DType.INT32)


def _feeds(shape, seed: int = 0) -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(seed).standard_normal(shape).astype(np.float32)}


@pytest.mark.parametrize("shape", [(8,), (1, 1, 1, 8)], ids=["vector", "rank4"])
def test_batch_norm_after_a_concat_is_one_node(shape):
    rng = np.random.default_rng(1)
    b = Builder()
    joined = _concat_of_convs(b, rng)
    scale, shift = (rng.uniform(0.5, 2, 8).astype(np.float32).reshape(shape) for _ in range(2))
    y = b("Relu", _affine(b, joined, scale, shift))
    counts = check(b, _feeds((1, 5, 5, 3)), [y], of_largest=1e-6)
    assert counts["BatchNormalization"] == 1 and "Mul" not in counts and "Add" not in counts


def test_rank_two_features():
    rng = np.random.default_rng(2)
    b = Builder()
    x = b.input("x", [3, 6])
    y = _affine(b, x, rng.standard_normal(6).astype(np.float32), rng.standard_normal(6).astype(np.float32), "Add")
    assert check(b, _feeds((3, 6)), [y], of_largest=1e-6) == {"BatchNormalization": 1}


@pytest.mark.parametrize("case", ["scalar_scale", "product_read_twice", "sequence", "double"])
def test_other_affines_keep_their_nodes(case: str):
    rng = np.random.default_rng(3)
    b = Builder()
    dtype = np.float64 if case == "double" else np.float32
    shape = [2, 4, 6] if case == "sequence" else [3, 6]
    x = b.input("x", shape, DType.DOUBLE if case == "double" else DType.FLOAT)
    scale = np.asarray(1.5, dtype) if case == "scalar_scale" else rng.standard_normal(6).astype(dtype)
    product = b("Mul", x, b.const(scale))
    y = b("AddV2", product, b.const(rng.standard_normal(6).astype(dtype)))
    outputs = [y, product] if case == "product_read_twice" else [y]
    counts = check(b, {"x": np.random.default_rng(4).standard_normal(shape).astype(dtype)}, outputs,
                   of_largest=1e-6)
    assert "BatchNormalization" not in counts and counts["Mul"] == 1 and counts["Add"] == 1
