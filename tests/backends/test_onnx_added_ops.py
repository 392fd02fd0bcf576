"""ONNX lowerings of Erfc, DivNoNan, IsFinite, Range, OneHot, TopKV2, GatherNd, ReverseV2, Cumsum,
Einsum, SpaceToBatchND/BatchToSpaceND and Conv2DBackpropInput: each exported graph passes the full
checker and matches gttc's interpreter (integers and bools exactly, floats to 1e-6 relative)."""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import onnx
import pytest

from compiler.backends.onnx import MAX_OPSET, MIN_OPSET, UnsupportedOpError, export_with_report
from compiler.backends.onnx.errors import OnnxExportError
from compiler.ir.dtypes import DType
from compiler.ir.graph import Value
from compiler.ir.shapes import Shape
from compiler.runtime.interpreter import Interpreter
from compiler.runtime.onnx_runner import run_onnx
from tests.backends.test_onnx_export import Builder

RTOL = 1e-6


def check(b: Builder, feeds: Mapping[str, np.ndarray], outputs: Sequence[Value], opset: int = 17,
          of_largest: float = 0.0) -> dict[str, int]:
    """Export, fully check, run both ways and compare; returns the ONNX op counts.  Floats may
    also differ by `of_largest` times an output's largest magnitude."""
    names = [v.name for v in outputs]
    expected = Interpreter(b.graph).run(dict(feeds), names)
    result = export_with_report(b.graph, list(feeds), names, opset=opset)
    onnx.checker.check_model(result.model, full_check=True)
    got = run_onnx(result.model, dict(feeds), names)
    for name in names:
        want, have = expected[name], got[name]
        assert have.dtype == want.dtype, name
        assert have.shape == want.shape, name
        if want.dtype.kind == "f":
            atol = of_largest * float(np.abs(want[np.isfinite(want)]).max(initial=0.0)) if of_largest else 0.0
            np.testing.assert_allclose(have, want, rtol=RTOL, atol=atol, err_msg=name)
        else:
            np.testing.assert_array_equal(have, want, err_msg=name)
    return result.report.op_counts


def ints(b: Builder, values, dtype=np.int32) -> Value:
    return b.const(np.asarray(values, dtype))


def integer_conv(b: Builder, x: Value, channels_out: int, rng) -> Value:
    """A 1x1 Conv2D with small integer weights: its result is exact and the backend keeps it NCHW."""
    channels_in = x.op.attr("shape").dims[-1]
    weights = rng.integers(-2, 3, (1, 1, channels_in, channels_out)).astype(np.float32)
    return b("Conv2D", x, b.const(weights), strides=[1, 1, 1, 1], padding="VALID")


def integer_conv_on(b: Builder, x: Value, rng) -> Value:
    """A second integer 1x1 conv (3 -> 2 channels) reading `x` channels-first."""
    weights = rng.integers(-2, 3, (1, 1, 3, 2)).astype(np.float32)
    return b("Conv2D", x, b.const(weights), strides=[1, 1, 1, 1], padding="VALID")


def declared(value: Value, dims: Sequence[int]) -> Value:
    """State a result's shape, as a GraphDef's _output_shapes does, so the backend may keep it permuted."""
    value.shape = Shape.of(list(dims))
    return value


def integer_image(rng, shape) -> np.ndarray:
    return rng.integers(-4, 5, shape).astype(np.float32)


# -- elementwise -----------------------------------------------------------------------------
def test_erfc_is_accurate_far_into_the_tail():
    b = Builder()
    x = b.input("x", [3, 40])
    feeds = {"x": np.linspace(-4, 8.5, 120, dtype=np.float32).reshape(3, 40)}
    counts = check(b, feeds, [b("Erfc", x)])
    assert counts["Cast"] == 2 and "Erf" not in counts


def test_erfc_of_double_is_refused():
    b = Builder()
    y = b("Erfc", b.input("x", [2], DType.DOUBLE))
    with pytest.raises(UnsupportedOpError, match=r"'Erfc' \(node 'erfc'\).*float32"):
        export_with_report(b.graph, ["x"], [y.name])


def test_is_finite_and_div_no_nan():
    b = Builder()
    x, y = b.input("x", [2, 6]), b.input("y", [2, 6])
    row = b.const(np.asarray([0, 2, 0, -4, 0.5, 0], np.float32))
    n, d = b.input("n", [5], DType.INT32), b.input("d", [5], DType.INT32)
    outputs = [b("IsFinite", x), b("DivNoNan", x, y), b("DivNoNan", x, row), b("DivNoNan", n, d)]
    feeds = {"x": np.asarray([[1, np.inf, -np.inf, np.nan, -2, 0], [3, 5, np.nan, 7, np.inf, -1]], np.float32),
             "y": np.asarray([[0, 0, 2, 0, 0.25, 0], [3, 0, 1, -2, 0, 0]], np.float32),
             "n": np.asarray([7, -7, 3, 0, 9], np.int32), "d": np.asarray([2, 2, 0, 0, -4], np.int32)}
    got = check(b, feeds, outputs)
    assert got["Not"] == 1 and got["Where"] == 4  # a float quotient is masked; an int divisor made safe too
    expected = Interpreter(b.graph).run(feeds, [outputs[1].name])[outputs[1].name]
    assert (expected[feeds["y"] == 0] == 0).all()  # even inf / 0 and nan / 0


def test_div_no_nan_by_a_constant_without_zeros_is_a_div():
    b = Builder()
    x = b.input("x", [2, 3])
    outputs = [b("DivNoNan", x, b.const(np.asarray([4, -0.5, 3], np.float32))),
               b("DivNoNan", x, b.const(np.asarray([4, -0.0, 3], np.float32)))]  # -0.0 is a zero
    feeds = {"x": np.asarray([[1, np.inf, np.nan], [-2, 0, 5]], np.float32)}
    assert check(b, feeds, outputs) == {"Div": 2, "Equal": 1, "Where": 1}


def test_elementwise_on_a_channels_first_tensor():
    rng = np.random.default_rng(11)
    b = Builder()
    x = b.input("x", [1, 3, 4, 2])
    y = integer_conv(b, x, 3, rng)
    scale = b.const(np.asarray([0, 2, -1], np.float32))
    outputs = [b("Erfc", b("Mul", y, b.const(np.float32(0.25)))), b("IsFinite", b("Log", y)),
               b("DivNoNan", y, scale)]
    result_counts = check(b, {"x": integer_image(rng, (1, 3, 4, 2))}, outputs)
    assert result_counts["Conv"] == 1


# -- Range -------------------------------------------------------------------------------------
@pytest.mark.parametrize("start, limit, delta", [(0.1, 5.3, 0.1), (3.0, -2.0, -0.7), (1.5, 1.5, 0.5),
                                                 (-1.0, 10.0, 3.0)])
def test_float_range_matches_tf_element_formula(start: float, limit: float, delta: float):
    b = Builder()
    s, l, d = (b.input(n, [], DType.FLOAT) for n in ("s", "l", "d"))
    feeds = {n: np.asarray(v, np.float32) for n, v in zip("sld", (start, limit, delta))}
    counts = check(b, feeds, [b("Range", s, l, d, Tidx=DType.FLOAT)])
    assert counts["Range"] == 1 and counts["Ceil"] == 1


@pytest.mark.parametrize("dtype", [DType.INT32, DType.INT64])
def test_integer_range_with_constant_and_run_time_bounds(dtype: DType):
    b = Builder()
    np_type = dtype.to_numpy()
    limit = b.input("l", [], dtype)
    scalar = lambda v: b.const(np.asarray(v, np_type))  # noqa: E731
    outputs = [b("Range", scalar(-3), limit, scalar(2), Tidx=dtype),
               b("Range", limit, scalar(-8), scalar(-3), Tidx=dtype)]
    counts = check(b, {"l": np.asarray(8, np_type)}, outputs)
    assert counts == {"Range": 2}


# -- OneHot ------------------------------------------------------------------------------------
@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_one_hot_axes_and_out_of_range_indices(axis: int):
    b = Builder()
    indices = b.input("i", [2, 3], DType.INT32)
    on, off = b.const(np.float32(2.5)), b.const(np.float32(-1))
    outputs = [b("OneHot", indices, ints(b, 4), on, off, axis=axis, TI=DType.INT32),
               b("OneHot", indices, ints(b, 3), ints(b, 7), ints(b, 0), axis=axis, TI=DType.INT32)]
    feeds = {"i": np.asarray([[0, 3, -1], [2, 4, -4]], np.int32)}
    check(b, feeds, outputs)
    expected = Interpreter(b.graph).run(feeds, [outputs[0].name])[outputs[0].name]
    assert (expected == 2.5).sum() == 3  # -1, 4 and -4 are all off


def test_one_hot_of_run_time_depth_and_int64_indices():
    b = Builder()
    indices, depth = b.input("i", [4], DType.INT64), b.input("depth", [], DType.INT32)
    outputs = [b("OneHot", indices, depth, b.const(np.float32(1)), b.const(np.float32(0)), axis=0, TI=DType.INT64),
               b("OneHot", indices, depth, b.const(True), b.const(False), axis=-1, TI=DType.INT64)]
    check(b, {"i": np.asarray([1, 0, 5, 2], np.int64), "depth": np.asarray(3, np.int32)}, outputs)


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_one_hot_of_never_negative_indices_is_one_onnx_one_hot(axis: int):
    """TopK's and ArgMax's indices cannot be negative, so ONNX OneHot means what TF's does; the
    int32 indices TF declares are read in the int64 TopK made, with no Cast back and forth."""
    rng = np.random.default_rng(8)
    b = Builder()
    x = b.input("x", [2, 6])
    _, top = b("TopKV2", x, ints(b, 3))
    arg = b("ArgMax", x, ints(b, 1), output_type=DType.INT32)
    outputs = [b("OneHot", top, ints(b, 5), b.const(np.float32(1)), b.const(np.float32(0)), axis=axis,
                 TI=DType.INT32),
               b("OneHot", arg, ints(b, 6), b.const(np.int64(4)), b.const(np.int64(-2)), axis=axis, TI=DType.INT32)]
    counts = check(b, {"x": rng.standard_normal((2, 6)).astype(np.float32)}, outputs + [top])
    assert counts["OneHot"] == 2 and "Equal" not in counts
    assert counts["Cast"] == 1  # TopK's int32 indices, an output; ArgMax's int32 result is read as its int64


def test_one_hot_of_possibly_negative_indices_compares():
    b = Builder()
    indices = b.input("i", [3], DType.INT32)
    out = b("OneHot", b("Abs", indices), ints(b, 4), b.const(np.float32(1)), b.const(np.float32(0)), TI=DType.INT32)
    counts = check(b, {"i": np.asarray([-3, 1, 7], np.int32)}, [out])
    assert "OneHot" not in counts and counts["Equal"] == 1


@pytest.mark.parametrize("known", [True, False])
def test_symmetric_mirror_pad_gathers_outer_axes_of_known_size(known: bool):
    """Outer axes of known size: one Gather of mirrored positions each; the innermost axis (and
    any axis of unknown size) reversed slices and a Concat."""
    b = Builder()
    x = b.input("x", [2, 5, 4] if known else [None, 5, 4])
    out = b("MirrorPad", x, ints(b, [[1, 2], [3, 0], [2, 4]]), mode="SYMMETRIC", Tpaddings=DType.INT32)
    feeds = {"x": np.random.default_rng(6).standard_normal((2, 5, 4)).astype(np.float32)}
    counts = check(b, feeds, [out])
    assert counts == ({"Gather": 2, "Slice": 2, "Concat": 1} if known else {"Gather": 1, "Slice": 4, "Concat": 2})


def test_symmetric_mirror_pad_of_a_huge_axis_slices_instead_of_listing_positions():
    b = Builder()
    x = b.input("x", [2 ** 33, 4])
    out = b("MirrorPad", x, ints(b, [[2, 1], [0, 0]]), mode="SYMMETRIC", Tpaddings=DType.INT32)
    counts = export_with_report(b.graph, ["x"], [out.name]).report.op_counts
    assert counts == {"Slice": 2, "Concat": 1}


@pytest.mark.parametrize("pad, index_type", [("Pad", DType.INT32), ("PadV2", DType.INT32), ("MirrorPad", DType.INT32),
                                              ("Pad", DType.INT64)])
def test_paddings_computed_at_run_time(pad: str, index_type: DType):
    """Paddings read from the graph (a detection head pads its kept boxes to a fixed count with
    `k - size`): ONNX Pad takes them as a tensor, also when the padded value comes out of an NCHW
    conv; a PadV2 fill computed at run time is a tensor too.  int64 paddings need no Cast."""
    rng = np.random.default_rng(8)
    b = Builder()
    x = b.input("x", [1, 4, 5, 3])
    paddings = b.input("paddings", [4, 2], index_type)
    conv = integer_conv(b, x, 3, rng)
    extra = {"PadV2": [b("Neg", b.input("fill", []))], "MirrorPad": []}.get(pad, [])
    attrs = {"mode": "REFLECT"} if pad == "MirrorPad" else {}
    out = b(pad, conv, paddings, *extra, Tpaddings=index_type, **attrs)
    feeds = {"x": rng.standard_normal((1, 4, 5, 3)).astype(np.float32),
             "paddings": np.asarray([[0, 0], [2, 1], [0, 3], [1, 0]], index_type.to_numpy())}
    if pad == "PadV2":
        feeds["fill"] = np.float32(2.5)
    counts = check(b, feeds, [out])
    assert counts["Pad"] == 1 and counts["Transpose"] == 3  # input, conv result to TF order, paddings
    assert counts.get("Cast", 0) == (index_type != DType.INT64)


def test_symmetric_mirror_pad_needs_constant_paddings():
    b = Builder()
    out = b("MirrorPad", b.input("x", [2, 3]), b.input("p", [2, 2], DType.INT32), mode="SYMMETRIC",
            Tpaddings=DType.INT32)
    with pytest.raises(UnsupportedOpError, match="SYMMETRIC mirror padding needs constant paddings"):
        export_with_report(b.graph, ["x", "p"], [out.name])


# -- TopKV2 --------------------------------------------------------------------------------------
@pytest.mark.parametrize("sorted_", [True, False])
def test_top_k_with_ties(sorted_: bool):
    rng = np.random.default_rng(3)
    b = Builder()
    x = b.input("x", [2, 3, 7])
    k = b.input("k", [], DType.INT32)
    values, indices = b("TopKV2", x, ints(b, 3), sorted=sorted_, Tk=DType.INT32, index_type=DType.INT32)
    values64, indices64 = b("TopKV2", x, k, sorted=sorted_, Tk=DType.INT32, index_type=DType.INT64)
    feeds = {"x": rng.integers(-3, 4, (2, 3, 7)).astype(np.float32), "k": np.asarray(5, np.int32)}
    counts = check(b, feeds, [values, indices, values64, indices64])
    assert counts["TopK"] == 2


@pytest.mark.parametrize("shapes_stated", [True, False])
def test_top_k_of_a_channels_first_tensor(shapes_stated: bool):
    rng = np.random.default_rng(4)
    b = Builder()
    x = b.input("x", [1, 3, 4, 2])
    y = b("Relu", integer_conv(b, x, 5, rng))
    values, indices = b("TopKV2", y, ints(b, 2), sorted=True, Tk=DType.INT32, index_type=DType.INT32)
    if shapes_stated:
        declared(values, [1, 3, 4, 2])
        declared(indices, [1, 3, 4, 2])
    check(b, {"x": integer_image(rng, (1, 3, 4, 2)) + 0.125 * rng.standard_normal((1, 3, 4, 2)).astype(np.float32)},
          [values, indices, b("Neg", values)])


@pytest.mark.parametrize("k", [-1, 8])
def test_top_k_that_tf_refuses_is_refused(k: int):
    """k < 0 or past the last axis fails in TF at run time; exported, a negative k made onnx's shape
    inference abort the process (fuzz seed 192, case 5253), so it is an error naming the node."""
    b = Builder()
    values, _ = b("TopKV2", b.input("x", [2, 7]), ints(b, k), Tk=DType.INT32, index_type=DType.INT32)
    with pytest.raises(UnsupportedOpError, match=f"'{values.op.name}'.*k {k} for a last axis of 7"):
        export_with_report(b.graph, ["x"], [values.name])


# -- GatherNd --------------------------------------------------------------------------------------
def test_gather_nd_partial_and_full_index_tuples():
    rng = np.random.default_rng(5)
    b = Builder()
    params = b.input("p", [3, 4, 5])
    partial, full = b.input("i", [2, 2], DType.INT32), b.input("j", [2, 1, 3], DType.INT64)
    gather = dict(Tparams=DType.FLOAT)
    outputs = [b("GatherNd", params, partial, Tindices=DType.INT32, **gather),
               b("GatherNd", params, full, Tindices=DType.INT64, **gather),
               b("GatherNd", params, ints(b, [[2], [0], [2]]), Tindices=DType.INT32, **gather),
               b("GatherNd", b.input("q", [2, 3], DType.INT32), ints(b, [[1, 2], [0, 0]]), Tparams=DType.INT32,
                 Tindices=DType.INT32)]
    feeds = {"p": rng.standard_normal((3, 4, 5)).astype(np.float32),
             "i": np.asarray([[2, 3], [0, 1]], np.int32), "j": np.asarray([[[1, 2, 4]], [[0, 0, 0]]], np.int64),
             "q": np.arange(6, dtype=np.int32).reshape(2, 3)}
    assert check(b, feeds, outputs)["GatherND"] == 4


def test_gather_v2_with_batch_dims_is_gather_nd():
    """Keras' take_along_axis: GatherV2(batch_dims=1, axis=1); also batch_dims=-1 on 2-D indices."""
    rng = np.random.default_rng(15)
    b = Builder()
    params = b.input("p", [3, 5, 2])
    gather = dict(Tparams=DType.FLOAT, Tindices=DType.INT32, Taxis=DType.INT32)
    outputs = [b("GatherV2", params, b.input("i", [3, 4], DType.INT32), ints(b, 1), batch_dims=1, **gather),
               b("GatherV2", params, b.input("k", [3, 1], DType.INT32), ints(b, -2), batch_dims=-1, **gather)]
    feeds = {"p": rng.standard_normal((3, 5, 2)).astype(np.float32),
             "i": rng.integers(0, 5, (3, 4)).astype(np.int32), "k": np.asarray([[4], [0], [2]], np.int32)}
    assert check(b, feeds, outputs)["GatherND"] == 2


@pytest.mark.parametrize("reverse", [False, True])
def test_nth_element_is_top_k_then_one_column(reverse):
    rng = np.random.default_rng(22)
    b = Builder()
    x = b.input("x", [2, 3, 7])
    outputs = [b("NthElement", x, ints(b, n), reverse=reverse) for n in (0, 4)]
    counts = check(b, {"x": rng.standard_normal((2, 3, 7)).astype(np.float32)}, outputs)
    assert counts == {"TopK": 2, "Gather": 2}


def test_shape_n_is_a_shape_per_operand():
    """tf.image.ssim asks for two shapes at once; a static one is a constant, a run-time one a Shape."""
    b = Builder()
    x, y = b.input("x", [None, 4]), b.input("y", [2, 3, 5])
    sizes = b("ShapeN", x, y, N=2, out_type=DType.INT64)
    counts = check(b, {"x": np.zeros((3, 4), np.float32), "y": np.zeros((2, 3, 5), np.float32)}, list(sizes))
    assert counts == {"Shape": 1}


def test_xdivy_and_xlogy_are_zero_where_x_is():
    b = Builder()
    x, y = b.input("x", [2, 4]), b.input("y", [4])
    feeds = {"x": np.asarray([[0, 0, 1.5, -2], [0, 3, 0.25, 4]], np.float32),
             "y": np.asarray([0, 2, 7, 1e-3], np.float32)}
    counts = check(b, feeds, [b("Xdivy", x, y), b("Xlogy", x, y)])
    assert counts == {"Div": 1, "Mul": 1, "Log": 1, "Equal": 1, "Where": 2}  # one x == 0 test serves both


def test_xlog1py_is_zero_where_x_is():
    """TensorFlow Probability's Beta and Binomial log-densities: x * log1p(y)."""
    b = Builder()
    x, y = b.input("x", [2, 4]), b.input("y", [4])
    feeds = {"x": np.asarray([[0, 0, 1.5, -2], [0, 3, 0.25, 4]], np.float32),
             "y": np.asarray([-1, 2, 0.5, 1e-3], np.float32)}
    counts = check(b, feeds, [b("Xlog1py", x, y)], of_largest=1e-6)  # log(1 + y), as Log1p lowers: not log1p's
    assert counts == {"Add": 1, "Log": 1, "Mul": 1, "Equal": 1, "Where": 1}


def test_mul_no_nan_is_zero_where_y_is_even_against_inf_and_nan():
    """TensorFlow Probability's Multinomial and Poisson log-densities: MulNoNan."""
    b = Builder()
    x, y = b.input("x", [2, 4]), b.input("y", [4])
    n, d = b.input("n", [3], DType.INT32), b.input("d", [3], DType.INT32)
    outputs = [b("MulNoNan", x, y), b("MulNoNan", n, d)]
    feeds = {"x": np.asarray([[np.inf, np.nan, 1.5, -2], [0, 3, -np.inf, 4]], np.float32),
             "y": np.asarray([0, 0, 2, -0.0], np.float32),
             "n": np.asarray([7, -7, 3], np.int32), "d": np.asarray([0, 2, -4], np.int32)}
    counts = check(b, feeds, outputs)
    assert counts == {"Equal": 2, "Mul": 2, "Where": 2}
    got = Interpreter(b.graph).run(feeds, [outputs[0].name])[outputs[0].name]
    assert (got[:, [0, 1, 3]] == 0).all() and got[0, 2] == 3 and got[1, 2] == -np.inf


def test_gather_v2_along_the_last_axis_with_batch_dims_is_gather_elements():
    """tf.gather(x, i, batch_dims=1) on a matrix: one index per output element, one node."""
    rng = np.random.default_rng(16)
    b = Builder()
    gather = dict(Tparams=DType.FLOAT, Taxis=DType.INT32)
    params = b.input("p", [4, 10])
    outputs = [b("GatherV2", params, b.input("i", [4, 3], DType.INT32), ints(b, 1), batch_dims=1,
                 Tindices=DType.INT32, **gather),
               b("GatherV2", params, b.input("j", [4, 6], DType.INT64), ints(b, -1), batch_dims=-1,
                 Tindices=DType.INT64, **gather)]
    feeds = {"p": rng.standard_normal((4, 10)).astype(np.float32), "i": rng.integers(0, 10, (4, 3)).astype(np.int32),
             "j": rng.integers(0, 10, (4, 6))}
    assert check(b, feeds, outputs) == {"GatherElements": 2}


def test_gather_v2_past_the_batch_axes_is_refused():
    b = Builder()
    y = b("GatherV2", b.input("p", [3, 5, 2]), b.input("i", [3, 1], DType.INT32), ints(b, 2), batch_dims=1,
          Tparams=DType.FLOAT, Tindices=DType.INT32, Taxis=DType.INT32)
    with pytest.raises(UnsupportedOpError, match=r"'GatherV2' \(node 'gatherv2'\).*axis 2 past batch_dims 1"):
        export_with_report(b.graph, ["p", "i"], [y.name])


def test_gather_nd_ignoring_bad_indices_is_refused():
    b = Builder()
    y = b("GatherNd", b.input("p", [3]), b.input("i", [2, 1], DType.INT32), Tparams=DType.FLOAT,
          Tindices=DType.INT32, bad_indices_policy="IGNORE")
    with pytest.raises(UnsupportedOpError, match=r"'GatherNd' \(node 'gathernd'\).*IGNORE"):
        export_with_report(b.graph, ["p", "i"], [y.name])


# -- ReverseV2 --------------------------------------------------------------------------------------
def test_reverse_v2_over_several_axes():
    rng = np.random.default_rng(6)
    b = Builder()
    x = b.input("x", [2, 3, 4])
    n = b.input("n", [3, 2], DType.INT32)
    outputs = [b("ReverseV2", x, ints(b, [0]), Tidx=DType.INT32), b("ReverseV2", x, ints(b, [1, -1]), Tidx=DType.INT32),
               b("ReverseV2", x, ints(b, [0, 1, 2], np.int64), Tidx=DType.INT64),
               b("Neg", b("ReverseV2", x, ints(b, []), Tidx=DType.INT32)),
               b("ReverseV2", n, ints(b, [1]), Tidx=DType.INT32)]
    feeds = {"x": rng.standard_normal((2, 3, 4)).astype(np.float32), "n": np.arange(6, dtype=np.int32).reshape(3, 2)}
    assert check(b, feeds, outputs)["Slice"] == 4


def _check_after_a_conv(b: Builder, rng, conv: Value, last: Value, other: Value) -> None:
    """Finish a graph whose ops read a conv result (`conv`, carried NCHW) and check it: the shape
    rules know the results' shapes, so the layout is kept up to the next conv."""
    out = integer_conv_on(b, last, rng)
    result = export_with_report(b.graph, ["x"], [out.name])
    assert f"{conv.name}/tf" not in result.report.transposes
    check(b, {"x": integer_image(rng, (1, 3, 4, 2))}, [out, other])


def test_reverse_v2_of_a_channels_first_tensor():
    """Spatial then channel reversal of a conv result: ReverseV2 keeps its input's shape (a shape
    rule says so), so the axes are remapped and the tensor stays NCHW up to the next conv."""
    rng = np.random.default_rng(8)
    b = Builder()
    x = b.input("x", [1, 3, 4, 2])
    y = integer_conv(b, x, 3, rng)
    spatial = b("ReverseV2", y, ints(b, [1, 2]), Tidx=DType.INT32)
    channels = b("ReverseV2", spatial, ints(b, [-1]), Tidx=DType.INT32)
    _check_after_a_conv(b, rng, y, channels, spatial)


# -- Cumsum ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumsum_flags_and_axes(exclusive: bool, reverse: bool):
    rng = np.random.default_rng(9)
    b = Builder()
    x, n = b.input("x", [3, 4, 5]), b.input("n", [2, 5], DType.INT32)
    axis = b.input("axis", [], DType.INT32)
    flags = dict(exclusive=exclusive, reverse=reverse)
    outputs = [b("Cumsum", x, ints(b, 1), Tidx=DType.INT32, **flags),
               b("Cumsum", x, ints(b, -1), Tidx=DType.INT32, **flags),
               b("Cumsum", n, ints(b, 0, np.int64), Tidx=DType.INT64, **flags),
               b("Cumsum", x, axis, Tidx=DType.INT32, **flags)]
    feeds = {"x": rng.integers(-9, 10, (3, 4, 5)).astype(np.float32),
             "n": rng.integers(-50, 50, (2, 5)).astype(np.int32),
             "axis": np.asarray(-3, np.int32)}
    assert check(b, feeds, outputs)["CumSum"] == 4


def test_cumsum_over_axes_of_a_channels_first_tensor():
    """Cumsum keeps its input's shape (a shape rule says so): the axes are remapped, NCHW kept."""
    rng = np.random.default_rng(10)
    b = Builder()
    x = b.input("x", [1, 3, 4, 2])
    y = integer_conv(b, x, 3, rng)
    channels = b("Cumsum", y, ints(b, 3), Tidx=DType.INT32, exclusive=True)
    rows = b("Cumsum", y, ints(b, 1), Tidx=DType.INT32, reverse=True)
    _check_after_a_conv(b, rng, y, channels, rows)


def test_cumsum_of_half_before_opset_14_is_refused():
    b = Builder()
    y = b("Cumsum", b.input("x", [4], DType.HALF), ints(b, 0), Tidx=DType.INT32)
    with pytest.raises(UnsupportedOpError, match=r"'Cumsum' \(node 'cumsum'\).*does not take"):
        export_with_report(b.graph, ["x"], [y.name], opset=13)


# -- Einsum ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("equation, shapes, nodes", [
    ("...ij->...ji", [(2, 3, 4)], {"Einsum": 1}), ("ii->i", [(3, 3)], {"Einsum": 1}),
    ("ij,kj", [(2, 3), (4, 3)], {"Einsum": 1}), ("i,i->", [(5,), (5,)], {"Einsum": 1}),
    # several contracted letters: flattened into one dim
    ("abcd,dc->ab", [(2, 3, 4, 5), (5, 4)], {"Reshape": 3, "Transpose": 1, "MatMul": 1}),
    ("abcde,def->abcf", [(1, 3, 4, 2, 3), (2, 3, 6)], {"Reshape": 2, "MatMul": 1}),
    # several row or column letters (MultiHeadAttention over two axes): flattened, then split again;
    # the operands swap when that puts the product in the output's order
    ("abcd,def->abcef", [(1, 3, 4, 6), (6, 2, 3)], {"Reshape": 2, "MatMul": 1}),
    ("abcde,afgde->adfgbc", [(1, 3, 4, 2, 3), (1, 3, 4, 2, 3)], {"Transpose": 2, "Reshape": 3, "MatMul": 1}),
    ("abcdef,aefbg->acdbg", [(1, 2, 3, 4, 3, 4), (1, 3, 4, 2, 3)], {"Transpose": 2, "Reshape": 3, "MatMul": 1}),
    ("bij,bj->bi", [(4, 3, 5), (4, 5)], {"Reshape": 2, "MatMul": 1}),
    # one contraction: a MatMul, with transposes where the letters are out of place
    ("ij,jk->ik", [(2, 3), (3, 4)], {"MatMul": 1}), ("bij,bjk->bik", [(2, 2, 3), (2, 3, 4)], {"MatMul": 1}),
    ("BTNH,BSNH->BNTS", [(2, 5, 3, 4), (2, 6, 3, 4)], {"Transpose": 2, "MatMul": 1}),   # MultiHeadAttention
    ("BNTS,BSNH->BTNH", [(2, 3, 5, 6), (2, 6, 3, 4)], {"Transpose": 2, "MatMul": 1}),
    ("abc,cd->abd", [(2, 3, 4), (4, 5)], {"MatMul": 1}), ("ij,jk->ki", [(2, 3), (3, 4)], {"MatMul": 1, "Transpose": 1}),
    # letters in one operand only are summed first (EinsumDense)
    ("abcd,de->abe", [(2, 3, 4, 5), (5, 6)], {"ReduceSum": 1, "MatMul": 1}),
    ("abcd,ed->eab", [(2, 3, 4, 5), (6, 5)], {"ReduceSum": 1, "Transpose": 2, "MatMul": 1}),
    # nothing contracted: a broadcast Mul
    ("bi,bjk->bij", [(2, 3), (2, 4, 5)], {"ReduceSum": 1, "Unsqueeze": 2, "Mul": 1}),   # k summed first
    ("bi,bj->bji", [(2, 3), (2, 4)], {"Unsqueeze": 2, "Mul": 1}),
    ("ib,j->bji", [(3, 2), (4,)], {"Transpose": 1, "Unsqueeze": 2, "Mul": 1}),
    ("ij,j->ij", [(2, 3), (3,)], {"Mul": 1}),
    ("iij,jk->k", [(3, 3, 4), (4, 2)], {"Einsum": 1}),          # a diagonal, not a sum
])
def test_einsum_equations(equation: str, shapes: list[tuple[int, ...]], nodes: dict[str, int]):
    rng = np.random.default_rng(12)
    b = Builder()
    operands = [b.input(f"x{i}", list(s)) for i, s in enumerate(shapes)]
    y = b("Einsum", *operands, equation=equation, N=len(operands))
    feeds = {f"x{i}": rng.integers(-5, 6, s).astype(np.float32) for i, s in enumerate(shapes)}
    assert check(b, feeds, [y]) == nodes


def test_einsum_with_an_unknown_batch_copies_it_and_infers_one_dim():
    b = Builder()
    x, w = b.input("x", [None, 5, 4, 6]), b.input("w", [6, 2, 3])
    y = b("Einsum", x, w, equation="abcd,def->abcef", N=2)
    rng = np.random.default_rng(3)
    for batch in (1, 3):
        feeds = {"x": rng.integers(-5, 6, (batch, 5, 4, 6)).astype(np.float32),
                 "w": rng.integers(-5, 6, (6, 2, 3)).astype(np.float32)}
        assert check(b, feeds, [y]) == {"Reshape": 2, "MatMul": 1}


def test_einsum_with_two_unknown_flattened_dims_stays_an_einsum():
    b = Builder()
    x, y = b.input("x", [2, None, None, 3]), b.input("y", [2, 3, 4])
    out = b("Einsum", x, y, equation="abcd,adf->abcf", N=2)  # rows b, c flatten: two unknown sizes
    feeds = {"x": np.ones((2, 2, 5, 3), np.float32), "y": np.ones((2, 3, 4), np.float32)}
    assert check(b, feeds, [out]) == {"Einsum": 1}


def test_einsum_of_a_constant_transposes_the_initializer():
    b = Builder()
    x = b.input("x", [2, 3])
    weights = np.arange(12, dtype=np.float32).reshape(4, 3)
    y = b("Einsum", x, b.const(weights), equation="ij,kj->ik", N=2)
    assert check(b, {"x": np.ones((2, 3), np.float32)}, [y]) == {"MatMul": 1}


def test_einsum_of_a_constant_sums_and_transposes_the_initializer():
    b = Builder()
    x = b.input("x", [2, 3])
    weights = np.arange(24, dtype=np.float32).reshape(4, 2, 3)
    y = b("Einsum", x, b.const(weights), equation="ij,kcj->ik", N=2)
    assert check(b, {"x": np.ones((2, 3), np.float32)}, [y]) == {"MatMul": 1}


def test_einsum_with_a_bad_term_is_refused():
    b = Builder()
    y = b("Einsum", b.input("x", [2, 3]), equation="i1j->ji", N=1)
    with pytest.raises(UnsupportedOpError, match=r"'Einsum' \(node 'einsum'\).*not one ONNX Einsum accepts"):
        export_with_report(b.graph, ["x"], [y.name])


# -- StridedSlice with bounds known at run time --------------------------------------------------------
@pytest.mark.parametrize("index", [DType.INT32, DType.INT64])
@pytest.mark.parametrize("begin, end, strides, masks", [
    ([1, 0, 2], [3, 5, 4], [1, 1, 1], {}),
    ([0, -1, 0], [0, 1, 0], [1, -2, 1], {"begin_mask": 1, "end_mask": 5}),
    ([2, -1, 1], [3, 0, 5], [1, 1, 2], {"shrink_axis_mask": 3}),              # a shrunk -1 reads the last element
    ([1, 0], [4, 2], [1, 1], {"ellipsis_mask": 2, "new_axis_mask": 0}),
])
def test_strided_slice_bounds_read_at_run_time(index, begin, end, strides, masks):
    """x[:tf.shape(y)[0]] and friends: begin and end are graph inputs, strides constant."""
    b = Builder()
    x = b.input("x", [4, 6, 5])
    lo, hi = b.input("lo", [len(begin)], index), b.input("hi", [len(end)], index)
    y = b("StridedSlice", x, lo, hi, b.const(np.asarray(strides, index.to_numpy())), Index=index, **masks)
    feeds = {"x": np.arange(120, dtype=np.float32).reshape(4, 6, 5), "lo": np.asarray(begin, index.to_numpy()),
             "hi": np.asarray(end, index.to_numpy())}
    check(b, feeds, [y])


@pytest.mark.parametrize("begin, size", [([1, 0, 2], [2, -1, 3]), ([0, 2, 0], [-1, 3, -1]), ([3, 5, 4], [1, 1, 1])])
def test_slice_begin_and_size_read_at_run_time(begin, size):
    b = Builder()
    x = b.input("x", [4, 6, 5])
    lo, count = b.input("lo", [3], DType.INT32), b.input("n", [3], DType.INT32)
    y = b("Slice", x, lo, count, Index=DType.INT32)
    feeds = {"x": np.arange(120, dtype=np.float32).reshape(4, 6, 5), "lo": np.asarray(begin, np.int32),
             "n": np.asarray(size, np.int32)}
    check(b, feeds, [y, b("Relu", b("Slice", x, ints(b, [1, 0, 0]), count, Index=DType.INT32))])


@pytest.mark.parametrize("begin", [0, -1])
def test_shrinking_an_axis_of_length_one_is_only_a_squeeze(begin: int):
    """x[-1] of an RNN's one-step final state picks its only element: no Slice is needed."""
    b = Builder()
    x = b.input("x", [1, 2, 5])
    y = b("StridedSlice", x, ints(b, [begin, 0]), ints(b, [0, 0]), ints(b, [1, 1]), Index=DType.INT32,
          shrink_axis_mask=1, end_mask=2)
    assert check(b, {"x": np.arange(10, dtype=np.float32).reshape(1, 2, 5)}, [y]) == {"Squeeze": 1}


def test_strided_slice_with_run_time_strides_is_refused():
    b = Builder()
    x, step = b.input("x", [4]), b.input("step", [1], DType.INT32)
    y = b("StridedSlice", x, ints(b, [0]), ints(b, [4]), step, Index=DType.INT32)
    with pytest.raises(OnnxExportError, match=r"node 'stridedslice' \(StridedSlice\): strides must be a constant"):
        export_with_report(b.graph, ["x", "step"], [y.name])


# -- SpaceToBatchND / BatchToSpaceND ----------------------------------------------------------------------
@pytest.mark.parametrize("blocks, pads", [([2, 2], [[0, 0], [0, 0]]), ([2, 3], [[1, 1], [2, 1]]), ([3], [[1, 1]])])
def test_space_to_batch_and_back(blocks: list[int], pads: list[list[int]]):
    rng = np.random.default_rng(13)
    b = Builder()
    dims = [4, 6, 2]
    x = b.input("x", [None] + dims)
    spread = b("SpaceToBatchND", x, ints(b, blocks), ints(b, pads), Tblock_shape=DType.INT32, Tpaddings=DType.INT32)
    spatial = [(d + sum(p)) // k for d, p, k in zip(dims, pads, blocks)]
    declared(spread, [2 * int(np.prod(blocks))] + spatial + dims[len(blocks):])
    back = b("BatchToSpaceND", spread, ints(b, blocks), ints(b, pads), Tblock_shape=DType.INT32, Tcrops=DType.INT32)
    feeds = {"x": rng.standard_normal((2, 4, 6, 2)).astype(np.float32)}
    check(b, feeds, [spread, back])
    np.testing.assert_array_equal(Interpreter(b.graph).run(feeds, [back.name])[back.name], feeds["x"])


def test_space_to_batch_of_unknown_spatial_size_is_refused():
    b = Builder()
    y = b("SpaceToBatchND", b.input("x", [1, None, 4, 1]), ints(b, [2, 2]), ints(b, [[0, 0], [0, 0]]),
          Tblock_shape=DType.INT32, Tpaddings=DType.INT32)
    with pytest.raises(UnsupportedOpError, match=r"'SpaceToBatchND' \(node 'spacetobatchnd'\).*static"):
        export_with_report(b.graph, ["x"], [y.name])


# -- Conv2DBackpropInput ----------------------------------------------------------------------------------
@pytest.mark.parametrize("size, padding, strides, dilations", [
    (6, "SAME", 2, 1), (7, "SAME", 2, 1), (6, "VALID", 2, 1), (7, "VALID", 3, 1), (5, "SAME", 1, 2),
    (6, "EXPLICIT", 2, 1)])
def test_conv2d_backprop_input_is_conv_transpose(size: int, padding: str, strides: int, dilations: int):
    rng = np.random.default_rng(14)
    b = Builder()
    kernel, channels_in, channels_out = 3, 2, 4
    explicit = [0, 0, 1, 2, 2, 0, 0, 0] if padding == "EXPLICIT" else []
    pads = {"SAME": (kernel - 1) * dilations, "VALID": 0, "EXPLICIT": 3}[padding]
    effective = (kernel - 1) * dilations + 1
    out = (size + pads - effective) // strides + 1 if padding != "SAME" else -(-size // strides)
    out_w = out if padding != "EXPLICIT" else (size + 2 - effective) // strides + 1
    dy = b.input("dy", [2, out, out_w, channels_out])
    weights = rng.integers(-2, 3, (kernel, kernel, channels_in, channels_out)).astype(np.float32)
    y = b("Conv2DBackpropInput", ints(b, [2, size, size, channels_in]), b.const(weights), dy, padding=padding,
          strides=[1, strides, strides, 1], dilations=[1, dilations, dilations, 1], explicit_paddings=explicit)
    declared(y, [2, size, size, channels_in])
    feeds = {"dy": rng.integers(-3, 4, (2, out, out_w, channels_out)).astype(np.float32)}
    assert check(b, feeds, [y, b("Relu", y)])["ConvTranspose"] == 1


def test_conv2d_backprop_input_sizes_unrelated_to_the_gradient_are_refused():
    """Sizes fed from outside (not stride times the gradient's size plus a constant) leave the
    padding unknown."""
    b = Builder()
    dy, sizes = b.input("dy", [1, -1, -1, 4]), b.input("sizes", [4], DType.INT32)
    weights = b.const(np.ones((3, 3, 2, 4), np.float32))
    y = b("Conv2DBackpropInput", sizes, weights, dy, padding="SAME", strides=[1, 2, 2, 1])
    with pytest.raises(UnsupportedOpError, match=r"'Conv2DBackpropInput'.*stride times"):
        export_with_report(b.graph, ["dy", "sizes"], [y.name])


def test_conv2d_transpose_bias_rides_on_the_conv_transpose():
    """Keras' Conv2DTranspose adds its bias with a BiasAdd: it becomes ConvTranspose's B input."""
    rng = np.random.default_rng(18)
    b = Builder()
    dy = b.input("dy", [1, 3, 3, 4])
    weights = b.const(rng.integers(-2, 3, (3, 3, 2, 4)).astype(np.float32))
    y = b("Conv2DBackpropInput", ints(b, [1, 6, 6, 2]), weights, dy, padding="SAME", strides=[1, 2, 2, 1])
    out = b("BiasAdd", y, b.const(np.asarray([0.5, -1.0], np.float32)))
    counts = check(b, {"dy": rng.integers(-3, 4, (1, 3, 3, 4)).astype(np.float32)}, [out])
    assert counts == {"ConvTranspose": 1, "Transpose": 2}, counts


def test_conv2d_backprop_input_between_channels_first_convs():
    """A decoder step: conv, transposed conv, conv; NCHW from input to output, in both data formats."""
    rng = np.random.default_rng(15)
    b = Builder()
    x = b.input("x", [1, 4, 4, 3])
    y = integer_conv(b, x, 4, rng)
    weights = b.const(rng.integers(-2, 3, (3, 3, 3, 4)).astype(np.float32))
    up = declared(b("Conv2DBackpropInput", ints(b, [1, 8, 8, 3]), weights, y, padding="SAME", strides=[1, 2, 2, 1]),
                  [1, 8, 8, 3])
    z = integer_conv_on(b, up, rng)
    nchw = b.input("n", [1, 4, 3, 3])
    back = b("Conv2DBackpropInputV2", b.input("like", [1, 3, 7, 7]), weights, nchw, padding="VALID",
             strides=[1, 1, 2, 2], data_format="NCHW")
    feeds = {"x": integer_image(rng, (1, 4, 4, 3)), "n": integer_image(rng, (1, 4, 3, 3)),
             "like": np.zeros((1, 3, 7, 7), np.float32)}
    result = export_with_report(b.graph, list(feeds), [z.name, back.name])
    assert result.report.transposes == ["x/nchw", f"{z.name}/tf"]
    check(b, feeds, [z, back])


def test_dropping_axes_of_a_channels_first_map_needs_no_transpose():
    """x[..., 0] of a conv's NCHW result is sliced and squeezed where it is stored, with no
    Transpose; row picks, which would leave the rest transposed, share one Transpose to TF order."""
    rng = np.random.default_rng(31)
    x = rng.integers(-3, 4, (1, 5, 6, 3)).astype(np.float32)
    for with_rows, transposes in ((False, 1), (True, 2)):  # the input's; one more to TF order for the rows
        b = Builder()
        y = integer_conv(b, b.input("x", [1, 5, 6, 3]), 4, np.random.default_rng(32))
        outputs = [b("StridedSlice", y, ints(b, [0, 0]), ints(b, [0, 1]), ints(b, [1, 1]), ellipsis_mask=1,
                     shrink_axis_mask=2)]
        if with_rows:  # [:, 2] and [:, -1, 1:3]
            outputs += [b("StridedSlice", y, ints(b, [0, 2]), ints(b, [0, 3]), ints(b, [1, 1]), begin_mask=1,
                          end_mask=1, shrink_axis_mask=2),
                        b("StridedSlice", y, ints(b, [0, -1, 1]), ints(b, [0, 0, 3]), ints(b, [1, 1, 1]),
                          begin_mask=1, end_mask=1, shrink_axis_mask=2)]
        assert check(b, {"x": x}, outputs)["Transpose"] == transposes


def test_negative_axes_after_a_reverse():
    """TopKV2, Cumsum and ReverseV2 with TF's own (negative) axes, after a ReverseV2.  (This read a
    result of unknown rank until ReverseV2 got a shape rule; an unknown-rank graph input cannot be
    declared to the ONNX checker, so the case now only pins the negative axes.)"""
    rng = np.random.default_rng(16)
    b = Builder()
    x = b("ReverseV2", b.input("x", [2, 3, 6]), ints(b, [1]), Tidx=DType.INT32)
    values, indices = b("TopKV2", x, ints(b, 2), Tk=DType.INT32, index_type=DType.INT32)
    outputs = [values, indices, b("Cumsum", x, ints(b, -1), Tidx=DType.INT32, reverse=True),
               b("ReverseV2", x, ints(b, [-1, 0]), Tidx=DType.INT32)]
    check(b, {"x": rng.integers(-5, 6, (2, 3, 6)).astype(np.float32)}, outputs)


@pytest.mark.parametrize("opset", [MIN_OPSET, 18, MAX_OPSET])
def test_added_ops_at_other_opsets(opset: int):
    rng = np.random.default_rng(17)
    b = Builder()
    x, i = b.input("x", [2, 5]), b.input("i", [3], DType.INT32)
    outputs = [b("Erfc", x), b("IsFinite", x), b("DivNoNan", x, b("Floor", x)),
               *b("TopKV2", x, ints(b, 2), Tk=DType.INT32),
               b("Cumsum", x, ints(b, 0), Tidx=DType.INT32, exclusive=True),
               b("ReverseV2", x, ints(b, [1]), Tidx=DType.INT32),
               b("OneHot", i, ints(b, 4), b.const(np.float32(1)), b.const(np.float32(0)), axis=0, TI=DType.INT32),
               b("Einsum", x, x, equation="ij,kj->ik", N=2)]
    feeds = {"x": rng.integers(-3, 4, (2, 5)).astype(np.float32), "i": np.asarray([3, 0, -1], np.int32)}
    check(b, feeds, outputs, opset=opset)


def test_half_cumsum_needs_opset_14():
    b = Builder()
    y = b("Cumsum", b.input("x", [4], DType.HALF), ints(b, 0), Tidx=DType.INT32)
    with pytest.raises(UnsupportedOpError, match=r"CumSum \(opset 13\) does not take"):
        export_with_report(b.graph, ["x"], [y.name], opset=13)


@pytest.mark.parametrize("dtype", [DType.INT8, DType.INT32, DType.INT64, DType.UINT8, DType.UINT32])
def test_integer_floor_div_and_mod_round_toward_minus_infinity(dtype: DType):
    """ONNX's integer Div truncates; TF's FloorDiv floors: every sign pair, exact multiples and a zero."""
    np_type = dtype.to_numpy()
    signed = np.dtype(np_type).kind == "i"
    x_values = [-7, 7, -6, 6, 0, -1, 5, 100] if signed else [7, 6, 0, 1, 5, 100, 3, 9]
    y_values = [2, -2, 3, -3, 4, 5, -5, 7] if signed else [2, 3, 4, 5, 5, 7, 9, 3]
    b = Builder()
    x, y = b.input("x", [8], dtype), b.input("y", [8], dtype)
    counts = check(b, {"x": np.array(x_values, np_type), "y": np.array(y_values, np_type)},
                   [b("FloorDiv", x, y), b("FloorMod", x, y), b("FloorDiv", x, b.const(np.array(3, np_type)))])
    assert counts["Div"] == 2 and counts["Mod"] == (3 if signed else 1)
