"""Keras' hard sigmoid and hard swish export as one ONNX node (compiler/backends/onnx/hard_sigmoid.py).

Each graph is compared with gttc's interpreter (tests.backends.test_onnx_added_ops.check) and,
for the Keras activations, with TF itself.
"""
from __future__ import annotations

import numpy as np
import pytest

from compiler.ir.dtypes import DType
from tests.backends.test_onnx_added_ops import check
from tests.backends.test_onnx_export import Builder

SIXTH = np.float32(1) / np.float32(6)


def _wide_input(rng, shape=(1, 5, 5, 4)) -> np.ndarray:
    """Values on both sides of -3 and 3, where the clip bends, and exactly on them."""
    x = rng.uniform(-6, 6, shape).astype(np.float32)
    x.flat[:4] = [-3, 3, 0, -0.0]
    return x


def _hard_sigmoid(b: Builder, x, divide: bool = True):
    clipped = b("Relu6", b("AddV2", x, b.const(np.float32(3))))
    return b("RealDiv", clipped, b.const(np.float32(6))) if divide else b("Mul", b.const(SIXTH), clipped)


@pytest.mark.parametrize("divide", [True, False], ids=["div", "mul"])
def test_hard_swish_is_one_node(divide: bool):
    b = Builder()
    x = b.input("x", [1, 5, 5, 4])
    y = b("Mul", x, _hard_sigmoid(b, x, divide))
    counts = check(b, {"x": _wide_input(np.random.default_rng(0))}, [y])
    assert counts == {"HardSwish": 1}


def _scaled_hard_swish(b: Builder, x, gated=None, shift: float = 3, divide: bool = True):
    """keras-cv-attention-models' spelling: (x * relu6(gated + shift)) / 6."""
    product = b("Mul", x, b("Relu6", b("AddV2", x if gated is None else gated, b.const(np.float32(shift)))))
    return product, (b("RealDiv", product, b.const(np.float32(6))) if divide else b("Mul", product, b.const(SIXTH)))


@pytest.mark.parametrize("divide", [True, False], ids=["div", "mul"])
def test_hard_swish_scaled_after_the_product_is_one_node(divide: bool):
    b = Builder()
    x = b.input("x", [1, 5, 5, 4])
    _, y = _scaled_hard_swish(b, x, divide=divide)
    counts = check(b, {"x": _wide_input(np.random.default_rng(4))}, [y])
    assert counts == {"HardSwish": 1}


@pytest.mark.parametrize("case", ["product_read_twice", "other_shift", "other_gate", "opset_13"])
def test_scaled_hard_swish_near_misses_keep_their_nodes(case: str):
    b = Builder()
    x = b.input("x", [3, 4])
    gated = b("Neg", x) if case == "other_gate" else None
    product, y = _scaled_hard_swish(b, x, gated, shift=2 if case == "other_shift" else 3)
    outputs = [y, product] if case == "product_read_twice" else [y]
    counts = check(b, {"x": _wide_input(np.random.default_rng(5), (3, 4))}, outputs,
                   opset=13 if case == "opset_13" else 17)
    assert "HardSwish" not in counts and counts["Mul"] == 1


def test_below_opset_14_hard_swish_is_hard_sigmoid_times_x():
    b = Builder()
    x = b.input("x", [2, 7])
    y = b("Mul", _hard_sigmoid(b, x), x)
    counts = check(b, {"x": _wide_input(np.random.default_rng(1), (2, 7))}, [y], opset=13)
    assert counts == {"HardSigmoid": 1, "Mul": 1}


def test_squeeze_excite_gate_rides_on_the_conv():
    """MobileNetV3's gate: conv + 3 takes the 3 into the conv's bias, then HardSigmoid(beta=0)."""
    rng = np.random.default_rng(2)
    b = Builder()
    x = b.input("x", [1, 6, 6, 3])
    weights = b.const(rng.standard_normal((1, 1, 3, 3)).astype(np.float32))
    conv = b("Conv2D", x, weights, strides=[1, 1, 1, 1], padding="SAME")
    gate = _hard_sigmoid(b, conv, divide=False)
    y = b("Mul", x, gate)
    counts = check(b, {"x": _wide_input(rng, (1, 6, 6, 3))}, [y])
    assert counts["HardSigmoid"] == 1 and "Clip" not in counts and "Add" not in counts and "Div" not in counts


@pytest.mark.parametrize("case", ["other_scale", "relu6_read_twice", "double", "output_is_the_gate"])
def test_near_misses_keep_their_nodes(case: str):
    b = Builder()
    dtype = np.float64 if case == "double" else np.float32
    x = b.input("x", [3, 4], DType.DOUBLE if case == "double" else DType.FLOAT)
    clipped = b("Relu6", b("AddV2", x, b.const(dtype(3))))
    gate = b("RealDiv", clipped, b.const(dtype(5 if case == "other_scale" else 6)))
    y = b("Mul", x, gate)
    outputs = [y, clipped] if case == "relu6_read_twice" else [y, gate] if case == "output_is_the_gate" else [y]
    counts = check(b, {"x": _wide_input(np.random.default_rng(3), (3, 4)).astype(dtype)}, outputs)
    assert "HardSwish" not in counts
    assert ("HardSigmoid" in counts) == (case == "output_is_the_gate")


@pytest.mark.tf
def test_keras_activations_match_tf():
    tf = pytest.importorskip("tensorflow")
    keras = pytest.importorskip("keras")
    from tests.backends.test_onnx_ragged import export_and_compare, frozen

    def build():
        x = tf.compat.v1.placeholder(tf.float32, [1, 8, 8, 3], name="x")
        conv = tf.nn.conv2d(x, tf.constant(np.random.default_rng(4).standard_normal((3, 3, 3, 8)), tf.float32), 1,
                            "SAME")
        return ["x"], {"swish": keras.activations.hard_swish(conv), "sigmoid": keras.activations.hard_sigmoid(conv)}

    data, inputs, outputs = frozen(build)
    feeds = [{"x": _wide_input(np.random.default_rng(seed), (1, 8, 8, 3))} for seed in range(3)]
    nodes, _ = export_and_compare(data, inputs, outputs, feeds, tf2onnx_converts=False)
    assert nodes == 6  # Conv, HardSwish, HardSigmoid and the Transposes to and from NCHW
