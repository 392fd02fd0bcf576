"""The gradient kernels (compiler/runtime/kernels/gradients.py) against TensorFlow's eager CPU kernels.

Same harness as test_kernels.py: seeded inputs, every op through `tf.raw_ops` and through our kernel.
Edge values are placed on purpose (features exactly 0 and 6, outputs exactly 0 and -1, infinite
gradients, tied and NaN pool inputs).  Where TF's CPU kernel refuses a case (NCHW MaxPoolGrad) the
oracle is TF on the transposed NHWC data; where it ignores an attribute
(DepthwiseConv2dNativeBackpropInput's dilations) it is XLA.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from compiler.runtime.kernels import KernelError  # noqa: E402
from tests.runtime.test_kernels import (F32, I32, I64, RTOL, assert_matches, check, check_or_both_fail,  # noqa: E402
                                        rand, run_ours, run_tf, run_xla, to_nchw)

pytestmark = pytest.mark.tf

F16, F64 = np.float16, np.float64
# TF's half kernels round every intermediate to half; ours round once.
TOLERANCE = {F16: 4e-3, F32: RTOL, F64: RTOL}


# ---------------------------------------------------------------- activation gradients

# Op, the two operands' raw_ops names, and the range of the forward value each gradient reads.
CWISE = [("TanhGrad", (-1, 1)), ("SigmoidGrad", (0, 1)), ("RsqrtGrad", (0.1, 3)), ("SqrtGrad", (0.1, 3)),
         ("ReciprocalGrad", (-3, 3)), ("InvGrad", (-3, 3))]
FEATURES = ["ReluGrad", "Relu6Grad", "LeakyReluGrad", "SoftplusGrad", "SoftsignGrad"]
OUTPUTS = ["EluGrad", "SeluGrad"]
# Where the Relu family switches: both sides of 0 and 6, signed zeros; Elu and Selu at 0 and at their asymptote.
FEATURE_EDGES = [0.0, -0.0, 6.0, 6.5, -1e-30, 1e-30, 5.999]
OUTPUT_EDGES = [0.0, -0.0, -1.0, -1.7580993, 1e-30, -1e-30]


def _operands(op: str, rng: np.random.Generator, dtype, shape=(3, 4, 5)) -> dict[str, np.ndarray]:
    if op in FEATURES or op in OUTPUTS:
        edges = FEATURE_EDGES if op in FEATURES else OUTPUT_EDGES
        values = rand(rng, shape, dtype, -8, 8).reshape(-1)
        values[:len(edges)] = edges
        return {"gradients": rand(rng, shape, dtype), "features" if op in FEATURES else "outputs":
                values.reshape(shape)}
    lo, hi = dict(CWISE)[op]
    return {"y": rand(rng, shape, dtype, lo, hi), "dy": rand(rng, shape, dtype)}


@pytest.mark.parametrize("op", [c[0] for c in CWISE] + FEATURES + OUTPUTS)
@pytest.mark.parametrize("dtype", [F16, F32, F64])
def test_activation_gradients(op: str, dtype):
    rng = np.random.default_rng(len(op))
    check(op, _operands(op, rng, dtype), rtol=TOLERANCE[dtype])


@pytest.mark.parametrize("alpha", [0.01, -0.3, 1.5])
def test_leaky_relu_grad_alpha(alpha: float):
    operands = _operands("LeakyReluGrad", np.random.default_rng(5), F32)
    check("LeakyReluGrad", operands, {"alpha": alpha})


@pytest.mark.parametrize("op", FEATURES + OUTPUTS)
def test_activation_gradients_of_non_finite_values(op: str):
    """ReluGrad and Relu6Grad multiply by a 0/1 mask (inf * 0 is NaN); the others select."""
    g = np.array([np.inf, np.nan, -np.inf, np.inf, np.nan, 1, 1, 2], F32)
    values = np.array([-1, -1, 0, 7, 7, np.nan, -np.inf, np.inf], F32)
    check(op, {"gradients": g, "features" if op in FEATURES else "outputs": values})


@pytest.mark.parametrize("op", [c[0] for c in CWISE])
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_cwise_gradients_of_complex_values(op: str, dtype):
    """TF conjugates the derivative of Rsqrt, Sqrt and Reciprocal, not those of Tanh and Sigmoid."""
    rng = np.random.default_rng(11)
    y, dy = (rand(rng, (2, 5), F64) + 1j * rand(rng, (2, 5), F64) for _ in range(2))
    check(op, {"y": y.astype(dtype), "dy": dy.astype(dtype)})


def test_cwise_gradient_takes_y_shape_and_needs_equal_counts():
    y, dy = np.full((2, 3), 0.5, F32), np.arange(6, dtype=F32)
    check("TanhGrad", {"y": y, "dy": dy})
    assert not check_or_both_fail("TanhGrad", {"y": y, "dy": dy[:5]}, {})
    assert not check_or_both_fail("ReluGrad", {"gradients": y, "features": dy}, {})


@pytest.mark.parametrize("op", ["ReluGrad", "Relu6Grad"])
def test_relu_gradients_of_integers(op: str):
    features = np.array([[-3, 0, 2, 6, 7, 5]], I32)
    check(op, {"gradients": np.arange(6, dtype=I32)[None] + 1, "features": features})


# ---------------------------------------------------------------- BroadcastGradientArgs

SHAPE_PAIRS = [((), ()), ((2, 3), (2, 3)), ((1,), (1,)), ((1, 1), (1,)), ((2, 1), (1, 1)), ((1,), ()),
               ((2, 3, 4), (4,)), ((2, 1, 4), (3, 1)), ((5, 1, 1), (1, 7, 1)), ((0,), (1,)), ((2, 0), (1, 1)),
               ((1, 2, 1, 3), (4, 1, 1)), ((2, 3), (4,)), ((2, 3), (3, 2)), ((0,), (3,))]


@pytest.mark.parametrize("s0,s1", SHAPE_PAIRS, ids=str)
@pytest.mark.parametrize("dtype", [I32, I64])
def test_broadcast_gradient_args(s0, s1, dtype):
    """Axes where an operand is 1 are reported even when the other is 1 too, unless the shapes are equal;
    incompatible shapes fail."""
    for a, b in ((s0, s1), (s1, s0)):
        check_or_both_fail("BroadcastGradientArgs", {"s0": np.array(a, dtype), "s1": np.array(b, dtype)}, {})


def test_broadcast_gradient_args_exhaustively():
    shapes = [()] + [s for n in (1, 2, 3) for s in itertools.product([1, 2, 3], repeat=n)]
    for a, b in itertools.product(shapes, repeat=2):
        check_or_both_fail("BroadcastGradientArgs", {"s0": np.array(a, I32), "s1": np.array(b, I32)}, {})


# ---------------------------------------------------------------- ConcatOffset


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
@pytest.mark.parametrize("dtype", [I32, I64])
def test_concat_offset(axis: int, dtype):
    """Zeros but along the axis (negative counts from the end), where the earlier operands' sizes add up."""
    shapes = []
    for size in (3, 5, 0, 2):
        dims = [2, 3, 4]
        dims[axis] = size
        shapes.append(np.array(dims, dtype))
    check("ConcatOffset", {"concat_dim": np.int32(axis), "shape": shapes})


@pytest.mark.parametrize("axis,second", [(3, [2, 3, 4]), (-4, [2, 3, 4]), (1, [3, 3, 4]), (0, [2, 3])])
def test_concat_offset_refuses_what_tf_refuses(axis: int, second: list[int]):
    inputs = {"concat_dim": np.int32(axis), "shape": [np.array([2, 3, 4], I32), np.array(second, I32)]}
    assert not check_or_both_fail("ConcatOffset", inputs, {})


# ---------------------------------------------------------------- StridedSliceGrad

# (shape, begin, end, strides, masks)
SLICES = [
    ((6,), [1], [5], [1], {}),
    ((6,), [-1], [0], [-2], {}),
    ((6,), [0], [0], [-1], {"begin_mask": 1, "end_mask": 1}),
    ((6,), [-100], [100], [3], {}),
    ((4, 5), [1, 0], [3, 5], [1, 2], {}),
    ((4, 5), [3, -1], [0, 0], [-1, -2], {"end_mask": 1}),
    ((4, 5), [2, 0], [3, 5], [1, 1], {"shrink_axis_mask": 1}),
    ((4, 5), [-1, -2], [0, 0], [1, 1], {"shrink_axis_mask": 3}),
    ((4, 5), [0, 1, 0], [0, 4, 0], [1, 2, 1], {"new_axis_mask": 1, "begin_mask": 4, "end_mask": 4}),
    ((2, 3, 4, 5), [0, 1], [0, 3], [1, -1], {"ellipsis_mask": 1}),
    ((2, 3, 4, 5), [1, 0, 3], [2, 0, 0], [1, 1, -2], {"ellipsis_mask": 2, "shrink_axis_mask": 1, "end_mask": 4}),
    ((2, 3, 4, 5), [0, 0, 0, 1], [1, 0, 0, 3], [1, 1, 1, 1], {"new_axis_mask": 2, "ellipsis_mask": 4}),
    ((3, 4), [0, 0], [0, 0], [1, 1], {"begin_mask": 3, "end_mask": 3}),
    ((3, 4), [2, 3], [1, 3], [1, 1], {}),
    ((), [], [], [], {}),
]


@pytest.mark.parametrize("shape,begin,end,strides,masks", SLICES, ids=[str(c[1:]) for c in SLICES])
@pytest.mark.parametrize("index", [I32, I64])
def test_strided_slice_grad(shape, begin, end, strides, masks, index):
    rng = np.random.default_rng(len(shape) + abs(sum(begin)))
    spec = {"begin": np.array(begin, index), "end": np.array(end, index), "strides": np.array(strides, index)}
    sliced = run_tf("StridedSlice", {"input": np.zeros(shape, F32), **spec}, masks)[0].shape
    check("StridedSliceGrad", {"shape": np.array(shape, index), **spec, "dy": rand(rng, sliced)}, masks)


@pytest.mark.parametrize("dy", [np.arange(1, 4, dtype=I64), np.array([True, False, True]),
                                np.array([b"a", b"b", b"c"], object), np.array([1 + 2j, 3, -1j])], ids=str)
def test_strided_slice_grad_types(dy: np.ndarray):
    spec = {"shape": np.array([7], I32), "begin": np.array([1], I32), "end": np.array([7], I32),
            "strides": np.array([2], I32)}
    want = run_tf("StridedSliceGrad", {**spec, "dy": tf.constant(dy)}, {})
    assert_matches("StridedSliceGrad", run_ours("StridedSliceGrad", [*spec.values(), dy], {}), want)


@pytest.mark.parametrize("dy_shape,shape,strides", [((2, 2), [4, 5], [1, 1]), ((1, 2, 2), [2, 2], [1, 1]),
                                                    ((2, 3), [2, -3], [1, 1]), ((2, 2), [4, 5], [1, 0])])
def test_strided_slice_grad_refuses_what_tf_refuses(dy_shape, shape, strides):
    inputs = {"shape": np.array(shape, I32), "begin": np.array([0, 0], I32), "end": np.array([2, 3], I32),
              "strides": np.array(strides, I32), "dy": np.ones(dy_shape, F32)}
    assert not check_or_both_fail("StridedSliceGrad", inputs, {})


# ---------------------------------------------------------------- BiasAddGrad


@pytest.mark.parametrize("shape", [(4, 6), (2, 3, 4), (2, 3, 4, 5), (1, 2, 3, 2, 2)], ids=str)
@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
@pytest.mark.parametrize("dtype", [F16, F32, F64, I32])
def test_bias_add_grad(shape, fmt: str, dtype):
    """NCHW sums into axis 1 whatever the rank (TF's rule, also for rank 3 and 5)."""
    rng = np.random.default_rng(len(shape))
    check("BiasAddGrad", {"out_backprop": rand(rng, shape, dtype, -9, 9)}, {"data_format": fmt},
          rtol=TOLERANCE.get(dtype, RTOL))


def test_bias_add_grad_needs_rank_two():
    assert not check_or_both_fail("BiasAddGrad", {"out_backprop": np.ones(5, F32)}, {})


# ---------------------------------------------------------------- MaxPoolGrad, AvgPoolGrad

# (input shape, window, strides, padding): overlapping windows (stride < window), strides > 1, odd sizes.
POOLS = [((2, 5, 6, 3), (2, 2), (2, 2), "VALID"), ((2, 5, 6, 3), (2, 2), (2, 2), "SAME"),
         ((1, 7, 6, 2), (3, 3), (1, 1), "SAME"), ((1, 7, 6, 2), (3, 3), (2, 2), "SAME"),
         ((2, 6, 7, 2), (3, 2), (1, 2), "VALID"), ((1, 4, 9, 3), (1, 4), (1, 3), "SAME"),
         ((1, 3, 3, 1), (3, 3), (2, 2), "SAME")]
POOL_IDS = ["-".join(map(str, c)) for c in POOLS]


def _pool_attrs(window, strides, padding: str, fmt: str = "NHWC") -> dict[str, object]:
    order = (lambda hw: [1, 1, *hw]) if fmt == "NCHW" else (lambda hw: [1, *hw, 1])
    return {"ksize": order(window), "strides": order(strides), "padding": padding, "data_format": fmt}


def _max_pool_grad_inputs(x: np.ndarray, attrs: dict, seed: int) -> dict[str, np.ndarray]:
    forward = {k: v for k, v in attrs.items() if k != "data_format"}
    y = run_tf("MaxPool", {"input": x}, forward)[0]
    return {"orig_input": x, "orig_output": y, "grad": rand(np.random.default_rng(seed), y.shape, x.dtype)}


@pytest.mark.parametrize("shape,window,strides,padding", POOLS, ids=POOL_IDS)
@pytest.mark.parametrize("dtype", [F16, F32, F64])
def test_max_pool_grad(shape, window, strides, padding: str, dtype):
    rng = np.random.default_rng(sum(shape))
    x = rng.permutation(int(np.prod(shape))).reshape(shape).astype(dtype) / 7  # distinct values
    attrs = _pool_attrs(window, strides, padding)
    check("MaxPoolGrad", _max_pool_grad_inputs(x, attrs, 1), attrs, rtol=TOLERANCE[dtype])


@pytest.mark.parametrize("shape,window,strides,padding", POOLS, ids=POOL_IDS)
def test_max_pool_grad_ties_go_to_the_first_element(shape, window, strides, padding: str):
    """TF's CPU kernel scans each window row by row and keeps the first strict maximum; padding never wins,
    not even over -inf."""
    rng = np.random.default_rng(sum(shape) + 1)
    attrs = _pool_attrs(window, strides, padding)
    for x in (rng.integers(0, 3, shape).astype(F32), np.zeros(shape, F32), np.full(shape, -np.inf, F32)):
        check("MaxPoolGrad", _max_pool_grad_inputs(x, attrs, 2), attrs)


def test_max_pool_grad_nan_wins_only_first():
    attrs = _pool_attrs((2, 2), (1, 1), "VALID")
    for first in (np.nan, 1.0):
        x = np.array([first, np.nan, 3, 2], F32).reshape(1, 2, 2, 1)
        check("MaxPoolGrad", _max_pool_grad_inputs(x, attrs, 3), attrs)


@pytest.mark.parametrize("dtype", [I32, I64])
def test_max_pool_grad_of_integers(dtype):
    rng = np.random.default_rng(4)
    x, attrs = rand(rng, (2, 6, 5, 3), dtype, -4, 4), _pool_attrs((3, 3), (2, 1), "SAME")
    inputs = _max_pool_grad_inputs(x.astype(F32), attrs, 4)
    check("MaxPoolGrad", {"orig_input": x, "orig_output": inputs["orig_output"].astype(dtype),
                          "grad": rand(rng, inputs["grad"].shape, dtype, -9, 9)}, attrs)


@pytest.mark.parametrize("pads", [[1, 0, 1, 0], [2, 1, 0, 1]])
def test_max_pool_grad_explicit_padding(pads: list[int]):
    x = np.random.default_rng(6).integers(-2, 2, (2, 5, 6, 3)).astype(F32)
    attrs = {**_pool_attrs((3, 2), (1, 2), "EXPLICIT"), "explicit_paddings": [0, 0, *pads, 0, 0]}
    check("MaxPoolGrad", _max_pool_grad_inputs(x, attrs, 5), attrs)


def _check_nchw_via_nhwc(op: str, nhwc: dict[str, np.ndarray], window, strides, padding: str,
                         rtol: float = RTOL) -> None:
    """TF's Eigen CPU kernels refuse NCHW (its oneDNN ones take some dtypes): the oracle is TF's NHWC result,
    transposed; 4-D tensors and 4-vectors of sizes are transposed for our kernel."""
    want = run_tf(op, nhwc, _pool_attrs(window, strides, padding))
    nchw = [to_nchw(v) if v.ndim == 4 else v[[0, 3, 1, 2]] for v in nhwc.values()]
    got = run_ours(op, nchw, _pool_attrs(window, strides, padding, "NCHW"))
    assert_matches(op, got, [to_nchw(want[0])], rtol)


@pytest.mark.parametrize("shape,window,strides,padding", POOLS[:4], ids=POOL_IDS[:4])
def test_max_pool_grad_nchw(shape, window, strides, padding: str):
    x = np.random.default_rng(7).integers(0, 4, shape).astype(F32)
    nhwc = _max_pool_grad_inputs(x, _pool_attrs(window, strides, padding), 7)
    _check_nchw_via_nhwc("MaxPoolGrad", nhwc, window, strides, padding)


def test_max_pool_grad_v2_takes_window_operands():
    x = np.random.default_rng(8).integers(0, 3, (1, 6, 6, 2)).astype(F32)
    attrs = _pool_attrs((3, 3), (2, 2), "SAME")
    inputs = {**_max_pool_grad_inputs(x, attrs, 8), "ksize": np.array(attrs.pop("ksize"), I32),
              "strides": np.array(attrs.pop("strides"), I32)}
    check("MaxPoolGradV2", inputs, attrs)


def test_max_pool_grad_checks_the_gradient_shape():
    x = np.zeros((1, 4, 4, 1), F32)
    inputs = {"orig_input": x, "orig_output": np.zeros((1, 2, 2, 1), F32), "grad": np.zeros((1, 3, 2, 1), F32)}
    assert not check_or_both_fail("MaxPoolGrad", inputs, _pool_attrs((2, 2), (2, 2), "VALID"))


@pytest.mark.parametrize("shape,window,strides,padding", POOLS, ids=POOL_IDS)
@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
@pytest.mark.parametrize("dtype", [F16, F32, F64])
def test_avg_pool_grad(shape, window, strides, padding: str, fmt: str, dtype):
    """SAME padding is not counted: each window spreads its gradient over its real elements only."""
    rng = np.random.default_rng(sum(shape) + len(fmt))
    dy = run_tf("AvgPool", {"value": np.zeros(shape, F32)}, _pool_attrs(window, strides, padding))[0]
    inputs = {"orig_input_shape": np.array(shape, I32), "grad": rand(rng, dy.shape, dtype)}
    if fmt == "NCHW":
        _check_nchw_via_nhwc("AvgPoolGrad", inputs, window, strides, padding, TOLERANCE[dtype])
    else:
        check("AvgPoolGrad", inputs, _pool_attrs(window, strides, padding), rtol=TOLERANCE[dtype])


def test_max_pool_with_argmax_shares_the_tie_rule():
    """MaxPoolWithArgmax picks as MaxPoolGrad does: padding never wins, even over -inf."""
    attrs = {"ksize": [1, 3, 3, 1], "strides": [1, 1, 1, 1], "padding": "SAME"}
    for x in (np.full((1, 3, 3, 1), -np.inf, F32), np.array([np.nan, 1, 3, 2], F32).reshape(1, 2, 2, 1)):
        check("MaxPoolWithArgmax", {"input": x}, attrs)


# ---------------------------------------------------------------- DepthwiseConv2dNativeBackpropInput

DEPTHWISE = [(s, p, m) for s in (1, 2) for p in ("SAME", "VALID", "EXPLICIT") for m in (1, 3)]
DEPTHWISE_IDS = ["-".join(map(str, c)) for c in DEPTHWISE]
BACKPROP = "DepthwiseConv2dNativeBackpropInput"


def _depthwise_attrs(strides, padding: str, dilations=(1, 1), explicit=(1, 0, 0, 2), fmt: str = "NHWC") -> dict:
    attrs = _pool_attrs(dilations, strides, padding, fmt)
    attrs["dilations"] = attrs.pop("ksize")  # laid out as a window is
    if padding == "EXPLICIT":
        attrs["explicit_paddings"] = [0, 0, 0, 0, *explicit] if fmt == "NCHW" else [0, 0, *explicit, 0, 0]
    return attrs


def _depthwise_inputs(seed: int, attrs: dict, multiplier: int, dtype=F32) -> dict[str, np.ndarray]:
    """NHWC operands of the input gradient: sizes, filter [KH, KW, C, M] and an out_backprop of the forward's shape."""
    rng = np.random.default_rng(seed)
    x = rand(rng, (2, int(rng.integers(5, 9)), int(rng.integers(5, 9)), 3), dtype)
    w = rand(rng, (int(rng.integers(1, 4)), int(rng.integers(2, 4)), 3, multiplier), dtype)
    dy = run_ours("DepthwiseConv2dNative", [x, w], attrs)[0]
    return {"input_sizes": np.array(x.shape, I32), "filter": w, "out_backprop": rand(rng, dy.shape, dtype)}


@pytest.mark.parametrize("stride,padding,multiplier", DEPTHWISE, ids=DEPTHWISE_IDS)
def test_depthwise_backprop_input(stride: int, padding: str, multiplier: int):
    attrs = _depthwise_attrs((stride, stride), padding)
    check(BACKPROP, _depthwise_inputs(stride + 3 * multiplier + len(padding), attrs, multiplier), attrs)


@pytest.mark.parametrize("stride,padding,multiplier", DEPTHWISE, ids=DEPTHWISE_IDS)
def test_depthwise_backprop_input_nchw(stride: int, padding: str, multiplier: int):
    """TF's CPU takes NCHW only through oneDNN, for some cases: the oracle is its NHWC result, transposed."""
    attrs = _depthwise_attrs((stride, stride), padding)
    nhwc = _depthwise_inputs(stride + multiplier, attrs, multiplier)
    want = run_tf(BACKPROP, nhwc, attrs)
    nchw = [nhwc["input_sizes"][[0, 3, 1, 2]], nhwc["filter"], to_nchw(nhwc["out_backprop"])]
    got = run_ours(BACKPROP, nchw, _depthwise_attrs((stride, stride), padding, fmt="NCHW"))
    assert_matches(BACKPROP, got, [to_nchw(want[0])])


@pytest.mark.parametrize("dtype", [F16, F64])
def test_depthwise_backprop_input_dtypes(dtype):
    attrs = _depthwise_attrs((2, 2), "SAME")
    check(BACKPROP, _depthwise_inputs(9, attrs, 2, dtype), attrs, rtol=TOLERANCE[dtype])


@pytest.mark.parametrize("strides,dilations,padding", [((1, 1), (2, 2), "SAME"), ((1, 1), (2, 3), "VALID"),
                                                       ((2, 3), (1, 1), "SAME"), ((3, 1), (1, 1), "EXPLICIT")])
def test_depthwise_backprop_input_dilated_or_unequal_strides(strides, dilations, padding: str):
    """TF's CPU kernel ignores dilations (its forward op refuses them) and refuses unequal strides;
    XLA honours both, as we do."""
    attrs = _depthwise_attrs(strides, padding, dilations)
    inputs = _depthwise_inputs(10, attrs, 2)
    assert_matches(BACKPROP, run_ours(BACKPROP, inputs, attrs), run_xla(BACKPROP, inputs, attrs))


def test_depthwise_backprop_input_spatial_sizes_and_bad_gradient():
    attrs = _depthwise_attrs((1, 1), "SAME")
    inputs = _depthwise_inputs(12, attrs, 2)
    check(BACKPROP, {**inputs, "input_sizes": inputs["input_sizes"][1:3]}, attrs)
    bad = {**inputs, "out_backprop": inputs["out_backprop"][..., :-1]}
    with pytest.raises(tf.errors.OpError):  # oneDNN's refusal is an AbortedError
        run_tf(BACKPROP, bad, attrs)
    with pytest.raises(KernelError, match="out_backprop shape"):
        run_ours(BACKPROP, bad, attrs)


# ---------------------------------------------------------------- FusedBatchNormGrad

BATCH_NORMS = [(op, training, fmt) for op in ("FusedBatchNormGrad", "FusedBatchNormGradV2", "FusedBatchNormGradV3")
               for training in (False, True) for fmt in ("NHWC", "NCHW")]


def _batch_norm_grad(op: str, x: np.ndarray, channels: int, attrs: dict, rtol: float = RTOL) -> None:
    """The three gradients match TF's; the two placeholders are empty (TF's oneDNN build gives scalar zeros)."""
    rng = np.random.default_rng(channels)
    inputs = {"y_backprop": rand(rng, x.shape, x.dtype), "x": x, "scale": rand(rng, (channels,), F32, 0.5, 1.5),
              "reserve_space_1": rand(rng, (channels,), F32), "reserve_space_2": rand(rng, (channels,), F32, 0.1, 2)}
    if op.endswith("V3"):
        inputs["reserve_space_3"] = np.zeros(0, F32)
    ours = run_ours(op, inputs, attrs)
    assert_matches(op, ours[:3], run_tf(op, inputs, attrs)[:3], rtol)
    assert all(out.shape == (0,) and out.dtype == F32 for out in ours[3:]) and len(ours) == 5


@pytest.mark.parametrize("op,training,fmt", BATCH_NORMS, ids=["-".join(map(str, c)) for c in BATCH_NORMS])
def test_fused_batch_norm_grad(op: str, training: bool, fmt: str):
    """Inference scales dy by scale / sqrt(var + eps); training also takes the batch statistics' own
    dependence on x (reserve_space_1/2 are then the batch mean and variance)."""
    x = rand(np.random.default_rng(13), (2, 4, 5, 3), F32, -3, 3)
    check_x = to_nchw(x) if fmt == "NCHW" else x
    _batch_norm_grad(op, check_x, 3, {"is_training": training, "data_format": fmt, "epsilon": 0.01})


@pytest.mark.parametrize("training", [False, True])
def test_fused_batch_norm_grad_v3_half_and_volumes(training: bool):
    rng = np.random.default_rng(14)
    _batch_norm_grad("FusedBatchNormGradV3", rand(rng, (2, 4, 3, 5), F16), 5, {"is_training": training},
                     rtol=TOLERANCE[F16])
    _batch_norm_grad("FusedBatchNormGradV3", rand(rng, (2, 3, 4, 2, 3), F32), 3,
                     {"is_training": training, "data_format": "NDHWC"})


def test_fused_batch_norm_grad_default_epsilon_and_bad_channels():
    _batch_norm_grad("FusedBatchNormGrad", rand(np.random.default_rng(15), (1, 3, 3, 4), F32), 4,
                     {"is_training": False})
    x = np.ones((1, 2, 2, 3), F32)
    with pytest.raises(KernelError, match="FusedBatchNormGrad: .*3 channels"):
        run_ours("FusedBatchNormGrad", [x, x, np.ones(2, F32), np.ones(3, F32), np.ones(3, F32)], {})
