"""A Dense layer on a rank > 2 input (TF's tensordot: Reshape -> MatMul -> Reshape) exports as one
ONNX MatMul (compiler/backends/onnx/tensordot.py), compared with gttc's interpreter and with TF."""
from __future__ import annotations

import numpy as np
import pytest

from compiler.ir.dtypes import DType
from tests.backends.test_onnx_added_ops import check
from tests.backends.test_onnx_export import Builder


def _shape(b: Builder, dims) -> object:
    return b.const(np.asarray(dims, np.int32))


def _tensordot(b: Builder, x, weights: np.ndarray, flat, restored, bias=None, transpose_b: bool = False):
    product = b("MatMul", b("Reshape", x, _shape(b, flat), Tshape=DType.INT32), b.const(weights),
                transpose_a=False, transpose_b=transpose_b)
    if bias is not None:
        product = b("BiasAdd", product, b.const(bias))
    return b("Reshape", product, _shape(b, restored), Tshape=DType.INT32)


def _feeds(shape, seed: int = 0) -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(seed).standard_normal(shape).astype(np.float32)}


@pytest.mark.parametrize("bias, transpose_b", [(False, False), (True, False), (False, True)],
                         ids=["plain", "bias", "transpose_b"])
def test_tensordot_is_one_matmul(bias: bool, transpose_b: bool):
    rng = np.random.default_rng(1)
    b = Builder()
    x = b.input("x", [1, 4, 5, 6])
    weights = rng.standard_normal((3, 6) if transpose_b else (6, 3)).astype(np.float32)
    vector = rng.standard_normal(3).astype(np.float32) if bias else None
    y = _tensordot(b, x, weights, [20, 6], [1, 4, 5, 3], vector, transpose_b)
    counts = check(b, _feeds((1, 4, 5, 6)), [y], of_largest=1e-6)
    assert counts == ({"MatMul": 1, "Add": 1} if bias else {"MatMul": 1})


def test_a_dynamic_batch_flattened_with_minus_one():
    b = Builder()
    x = b.input("x", [None, 5, 6])
    weights = np.random.default_rng(2).standard_normal((6, 2)).astype(np.float32)
    y = _tensordot(b, x, weights, [-1, 6], [-1, 5, 2])
    assert check(b, _feeds((3, 5, 6)), [y], of_largest=1e-6) == {"MatMul": 1}


@pytest.mark.parametrize("case", ["other_split", "other_restore", "flat_read_elsewhere"])
def test_other_reshapes_keep_their_nodes(case: str):
    b = Builder()
    x = b.input("x", [2, 4, 6])
    flat = [4, 12] if case == "other_split" else [8, 6]
    weights = np.random.default_rng(3).standard_normal((flat[1], 3)).astype(np.float32)
    restored = [8, 3] if case == "other_restore" else [2, 4, 3] if case != "other_split" else [2, 2, 3]
    y = _tensordot(b, x, weights, flat, restored)
    outputs = [y]
    if case == "flat_read_elsewhere":
        outputs.append(y.op.operands[0].op.operands[0])  # the [8, 6] reshape, also an output
    counts = check(b, _feeds((2, 4, 6)), outputs, of_largest=1e-6)
    assert counts.get("Gemm") == 1 and "MatMul" not in counts


def test_an_eight_bit_dense_keeps_its_quantized_group():
    """A QAT Dense on a sequence: x is dequantized, so the reshapes and Gemm stay for the QDQ group."""
    b = Builder()
    x = b("FakeQuantWithMinMaxVars", b.input("x", [2, 4, 6]), b.const(np.float32(-3)), b.const(np.float32(3)))
    weights = np.random.default_rng(5).standard_normal((6, 3)).astype(np.float32)
    y = _tensordot(b, x, weights, [8, 6], [2, 4, 3])
    counts = check(b, _feeds((2, 4, 6)), [y], of_largest=1e-6)
    assert "MatMul" not in counts and counts["DequantizeLinear"] >= 1


@pytest.mark.tf
def test_keras_dense_on_sequences_and_maps_matches_tf():
    tf = pytest.importorskip("tensorflow")
    from tests.backends.test_onnx_ragged import export_and_compare, frozen

    rng = np.random.default_rng(4)

    def build():
        seq = tf.compat.v1.placeholder(tf.float32, [2, 7, 8], name="seq")
        image = tf.compat.v1.placeholder(tf.float32, [1, 3, 4, 8], name="image")
        kernel = tf.constant(rng.standard_normal((8, 5)), tf.float32)
        bias = tf.constant(rng.standard_normal(5), tf.float32)
        return ["seq", "image"], {"dense_seq": tf.nn.bias_add(tf.tensordot(seq, kernel, 1), bias),
                                  "dense_map": tf.tensordot(image, kernel, [[3], [0]])}

    data, inputs, outputs = frozen(build)
    feeds = [{"seq": rng.standard_normal((2, 7, 8)).astype(np.float32),
              "image": rng.standard_normal((1, 3, 4, 8)).astype(np.float32)} for _ in range(2)]
    nodes, _ = export_and_compare(data, inputs, outputs, feeds, tf2onnx_converts=False)
    assert nodes == 3  # MatMul + Add, MatMul
