"""Gradient ops in ONNX (ops_gradients.py, ops_pool_gradients.py, the depthwise ConvTranspose):
each lowered graph passes the full checker and matches TensorFlow within 1e-4 of the largest
output, op by op through tf.raw_ops and end to end on a saliency map and a PINN's derivatives."""
from __future__ import annotations

import numpy as np
import pytest

from compiler.backends.onnx import UnsupportedOpError, export_with_report
from compiler.frontends.graphdef import load_graph_bytes
from compiler.runtime.onnx_runner import run_onnx
from tests.backends.test_onnx_audio import export_and_compare, frozen
from tests.oracle import run_tf

tf = pytest.importorskip("tensorflow")
pytestmark = pytest.mark.tf

RNG = np.random.default_rng(30)


def _placeholder(name: str, shape) -> object:
    return tf.compat.v1.placeholder(tf.float32, shape, name=name)


def _uniform(shape, lo=-1.0, hi=1.0) -> np.ndarray:
    return RNG.uniform(lo, hi, shape).astype(np.float32)


# The forward function whose output the gradient op reads, or None where it reads the input (features).
ACTIVATION_GRADS = {
    "TanhGrad": np.tanh, "SigmoidGrad": lambda x: 1 / (1 + np.exp(-x)),
    "RsqrtGrad": lambda x: 1 / np.sqrt(np.abs(x) + 0.5), "SqrtGrad": lambda x: np.sqrt(np.abs(x) + 0.5),
    "ReciprocalGrad": lambda x: 1 / (np.abs(x) + 0.5), "InvGrad": lambda x: 1 / (np.abs(x) + 0.5),
    "ReluGrad": None, "Relu6Grad": None, "LeakyReluGrad": None, "SoftplusGrad": None, "SoftsignGrad": None,
    "EluGrad": lambda x: np.where(x < 0, np.expm1(x), x),
    "SeluGrad": lambda x: np.where(x < 0, 1.7581 * np.expm1(x), 1.0507 * x),
}


@pytest.mark.parametrize("op_type", sorted(ACTIVATION_GRADS))
def test_activation_gradients_match_tf(op_type: str):
    """Each operand pair as TF's backward pass makes it: the forward output (or input) and the
    incoming gradient; ReLU-type features hit their kinks at 0 and 6 exactly."""
    forward = ACTIVATION_GRADS[op_type]
    x = np.concatenate([_uniform([2, 13], -8, 8), np.asarray([[0, 6, -0.0, 1e-3, -6, 5.999, 6.001, 0, 0, 0, 0, 0, 0],
                                                              [0] * 13], np.float32)])
    second = x if forward is None else forward(x).astype(np.float32)
    dy = _uniform(x.shape)

    def build():
        a, g = _placeholder("a", x.shape), _placeholder("g", x.shape)
        fn = getattr(tf.raw_ops, op_type)
        if forward is None:  # (gradients, features)
            out = fn(gradients=g, features=a, **({"alpha": 0.3} if op_type == "LeakyReluGrad" else {}))
        elif op_type in ("EluGrad", "SeluGrad"):
            out = fn(gradients=g, outputs=a)
        else:
            out = fn(y=a, dy=g)
        return {"out": out}

    data, outputs = frozen(build)
    counts = export_and_compare(data, ["a", "g"], outputs, [{"a": second, "g": dy}])
    assert sum(counts.values()) <= 6, counts


@pytest.mark.parametrize("spec", [
    (slice(None), slice(0, 1)),                         # a PINN's du[:, :1]
    (slice(1, None, 3), slice(None, None, -2), 2),      # steps over one, a reversed axis, a shrunk one
    (Ellipsis, None, slice(-3, -1)),                    # an ellipsis and a new axis
    (1, slice(4, 1, -1)),                               # a shrunk row, a reversed range
])
def test_strided_slice_grad_puts_the_gradient_back_where_it_was_read(spec):
    x = _uniform([5, 7, 3])

    def build():
        a = tf.constant(x)
        sliced = a.__getitem__(spec)
        dy = _placeholder("dy", sliced.shape)
        return {"out": tf.gradients(tf.reduce_sum(a.__getitem__(spec) * dy), a)[0]}

    data, outputs = frozen(build)
    with tf.Graph().as_default():
        shape = tf.constant(x).__getitem__(spec).shape
    counts = export_and_compare(data, ["dy"], outputs, [{"dy": _uniform(shape)}])
    assert "ScatterND" not in counts and "ScatterElements" not in counts


def _pool_case(padding: str, ksize: int, stride: int, data_format: str = "NHWC"):
    shape = [2, 9, 8, 3] if data_format == "NHWC" else [2, 3, 9, 8]
    window = [1, ksize, ksize, 1] if data_format == "NHWC" else [1, 1, ksize, ksize]
    steps = [1, stride, stride, 1] if data_format == "NHWC" else [1, 1, stride, stride]
    return shape, window, steps


@pytest.mark.parametrize("padding,ksize,stride", [("SAME", 3, 2), ("VALID", 2, 2), ("SAME", 3, 1), ("VALID", 3, 2)])
def test_pool_gradients_match_tf(padding: str, ksize: int, stride: int):
    """Overlapping windows (3 wide, stride 2 or 1) sum their gradients; SAME averages only the
    input elements a window covers."""
    shape, window, steps = _pool_case(padding, ksize, stride)
    x = _uniform(shape)

    def build():
        a = _placeholder("x", shape)
        pooled = tf.nn.max_pool2d(a, window, steps, padding)
        averaged = tf.nn.avg_pool2d(a, window, steps, padding)
        g = _placeholder("g", pooled.shape)
        return {"max": tf.gradients(pooled, a, g)[0], "avg": tf.gradients(averaged, a, g * 2.0)[0]}

    data, outputs = frozen(build)
    with tf.Graph().as_default():
        out_shape = tf.nn.max_pool2d(tf.zeros(shape), window, steps, padding).shape
    counts = export_and_compare(data, ["x", "g"], outputs, [{"x": x, "g": _uniform(out_shape)}])
    assert counts["ScatterElements"] == 1 and counts["ConvTranspose"] == 1


def test_max_pool_grad_needs_opset_16():
    shape, window, steps = _pool_case("VALID", 2, 2)

    def build():
        a = _placeholder("x", shape)
        return {"out": tf.gradients(tf.nn.max_pool2d(a, window, steps, "VALID"), a)[0]}

    data, outputs = frozen(build)
    with pytest.raises(UnsupportedOpError, match="opset 16"):
        export_and_compare(data, ["x"], outputs, [], opset=15)


@pytest.mark.parametrize("multiplier,stride,padding", [(1, 1, "SAME"), (2, 2, "SAME"), (3, 2, "VALID")])
def test_depthwise_input_gradient_is_a_grouped_conv_transpose(multiplier: int, stride: int, padding: str):
    x = _uniform([2, 9, 9, 4])
    w = _uniform([3, 3, 4, multiplier])

    def build():
        a = _placeholder("x", x.shape)
        out = tf.nn.depthwise_conv2d(a, w, [1, stride, stride, 1], padding)
        g = _placeholder("g", out.shape)
        return {"out": tf.gradients(out, a, g)[0]}

    data, outputs = frozen(build)
    with tf.Graph().as_default():
        out_shape = tf.nn.depthwise_conv2d(tf.zeros(x.shape), w, [1, stride, stride, 1], padding).shape
    counts = export_and_compare(data, ["x", "g"], outputs, [{"x": x, "g": _uniform(out_shape)}])
    assert counts["ConvTranspose"] == 1


def test_bias_add_and_inference_batch_norm_gradients():
    """A Keras-2 saliency map's fused batch norm, in inference mode, and a bias's gradient."""
    x, dy = _uniform([2, 5, 5, 3]), _uniform([2, 5, 5, 3])
    scale, mean, var = _uniform([3], 0.5, 1.5), _uniform([3]), _uniform([3], 0.5, 1.5)

    def build():
        a, g = _placeholder("x", x.shape), _placeholder("g", dy.shape)
        grads = tf.raw_ops.FusedBatchNormGradV3(y_backprop=g, x=a, scale=scale, reserve_space_1=mean,
                                                reserve_space_2=var, reserve_space_3=tf.zeros([0]),
                                                epsilon=1e-3, is_training=False)
        return {"x_backprop": grads[0], "offset_backprop": grads[2],
                "bias": tf.raw_ops.BiasAddGrad(out_backprop=g * 3.0)}

    data, outputs = frozen(build)
    export_and_compare(data, ["x", "g"], outputs, [{"x": x, "g": dy}])


def test_a_pinn_exports_its_derivatives_over_a_dynamic_batch():
    """u(x, t) = MLP(concat(x, t)) with u, du/dx, du/dt and d2u/dx2 as outputs, over a batch of
    points known only at run time: TanhGrad, the concat's ConcatOffset (constant offsets: the sizes
    along the concat axis are static) and StridedSliceGrad of `du[:, :1]` (its batch axis read whole)."""
    w1, w2, w3 = _uniform([2, 16]), _uniform([16, 16]), _uniform([16, 1])

    def build():
        x, t = _placeholder("x", [None, 1]), _placeholder("t", [None, 1])
        u = tf.tanh(tf.tanh(tf.concat([x, t], 1) @ w1) @ w2) @ w3
        du = tf.concat(tf.gradients(u, [x, t]), 1)
        uxx = tf.gradients(du[:, :1], x)[0]
        return {"u": u, "du": du, "uxx": uxx}

    data, outputs = frozen(build)
    feeds = [{"x": _uniform([n, 1]), "t": _uniform([n, 1])} for n in (1, 37)]
    counts = export_and_compare(data, ["x", "t"], outputs, feeds)
    assert counts["Tanh"] == 2 and counts["Gemm"] == 10  # the forward pass once, each MatMul gradient a Gemm


def test_relu_grad_masks_by_multiplying_as_tf_does():
    """An infinite gradient where the features are not positive is NaN in TF (a product with a 0/1
    mask), not 0."""
    features = np.asarray([[-1.0, 0.0, 2.0, 7.0]], np.float32)
    dy = np.asarray([[np.inf, -np.inf, 3.0, 4.0]], np.float32)

    def build():
        a, g = _placeholder("a", features.shape), _placeholder("g", dy.shape)
        return {"relu": tf.raw_ops.ReluGrad(gradients=g, features=a),
                "relu6": tf.raw_ops.Relu6Grad(gradients=g, features=a)}

    data, outputs = frozen(build)
    feeds = {"a": features, "g": dy}
    got = run_onnx(export_with_report(load_graph_bytes(data), ["a", "g"], outputs).model, feeds, outputs)
    want = run_tf(data, feeds, outputs)
    for name in outputs:
        np.testing.assert_array_equal(got[name], want[name])
    assert np.isnan(got["relu"][0, :2]).all() and got["relu6"][0, 3] == 0
