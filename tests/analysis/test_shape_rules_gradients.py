"""The gradient ops' shape rules against the kernels' results (checked against TF in
tests/runtime/test_kernels_gradients.py): every static dim must be the actual one, with the batch
known only at run time, as in a graph that serves du/dx or a saliency map."""
from __future__ import annotations

import numpy as np

from compiler.ir.dtypes import DType
from compiler.ir.shapes import Shape
from tests.analysis.rule_checks import known_dims_agreeing
from tests.backends.test_onnx_export import Builder

WINDOW = {"ksize": [1, 3, 2, 1], "strides": [1, 2, 1, 1], "padding": "SAME"}


def _ints(b: Builder, values: list[int]):
    return b.const(np.asarray(values, np.int32))


def test_gradient_shapes_agree_with_the_kernels():
    b = Builder()
    x = b.input("x", [None, 6, 5, 3])
    sizes = b("Shape", x, out_type=DType.INT32)  # [?, 6, 5, 3]: only the batch is unknown
    results = [b("TanhGrad", x, x), b("ReluGrad", x, x), b("SeluGrad", x, x),
               b("BiasAddGrad", x), b("BiasAddGrad", x, data_format="NCHW")]
    results.append(b("MaxPoolGrad", x, b("MaxPool", x, **WINDOW), b("MaxPool", x, **WINDOW), **WINDOW))
    results.append(b("AvgPoolGrad", sizes, b("AvgPool", x, **WINDOW), **WINDOW))
    w = b.const(np.ones((3, 3, 3, 2), np.float32))
    conv = {"strides": [1, 2, 2, 1], "padding": "SAME"}
    results.append(b("DepthwiseConv2dNativeBackpropInput", sizes, w, b("DepthwiseConv2dNative", x, w, **conv),
                     **conv))
    begin, end, strides = _ints(b, [0, 1]), _ints(b, [0, 5]), _ints(b, [1, 2])
    masks = {"begin_mask": 1, "end_mask": 1, "shrink_axis_mask": 0, "Index": DType.INT32}
    results.append(b("StridedSliceGrad", sizes, begin, end, strides,
                     b("StridedSlice", x, begin, end, strides, **masks), **masks))
    results += list(b("BroadcastGradientArgs", sizes, _ints(b, [5, 1])))
    results += list(b("ConcatOffset", b.const(np.int32(3)), sizes, sizes, N=2))
    channel = b.const(np.ones(3, np.float32))
    results += list(b("FusedBatchNormGradV3", x, x, channel, channel, channel, channel, is_training=False,
                      U=DType.FLOAT))
    known, info = known_dims_agreeing(b, {"x": np.ones((2, 6, 5, 3), np.float32)}, results)
    # All but the batch: activations, pools, depthwise, slice; the channel vectors; no reduction axes; offsets.
    assert known == 3 * 3 + 2 * 1 + 4 * 3 + 0 + 2 * 1 + (3 + 4 * 1)
    assert info.shape(results[3]) == Shape((3,)) and info.shape(results[4]) == Shape((6,))  # not out_backprop's
