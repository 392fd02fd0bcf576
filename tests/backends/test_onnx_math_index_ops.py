"""ONNX lowerings of Where, All/Any, the scatters (XlaDynamicUpdateSlice too), segment reductions, Roll, ReverseSequence, Unique,
InvertPermutation, EnsureShape, Atan2 and the bit operators: each exported graph passes the full
checker and matches gttc's interpreter under onnxruntime (integers and bools exactly, floats to
1e-6 relative); variants ONNX cannot express exactly are refused naming the node."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

from compiler.backends.onnx import MAX_OPSET, MIN_OPSET, UnsupportedOpError, export_with_report
from compiler.ir.dtypes import DType
from compiler.ir.shapes import Shape
from compiler.runtime.interpreter import Interpreter
from compiler.runtime.onnx_runner import run_onnx
from tests.backends.test_onnx_added_ops import check, declared, integer_conv, integer_image, ints
from tests.backends.test_onnx_export import Builder


def refused(b: Builder, inputs, output, match: str, opset: int = 17) -> None:
    with pytest.raises(UnsupportedOpError, match=match):
        export_with_report(b.graph, inputs, [output.name], opset=opset)


# -- Where, All, Any -----------------------------------------------------------------------------
def test_where_lists_true_coordinates_row_major():
    rng = np.random.default_rng(1)
    b = Builder()
    m, f = b.input("m", [3, 4, 2], DType.BOOL), b.input("f", [5])
    counts = check(b, {"m": rng.random((3, 4, 2)) < 0.4, "f": np.asarray([0, 1.5, 0, -2, 0], np.float32)},
                   [b("Where", m), b("Where", f)])
    assert counts["NonZero"] == 2 and counts["Transpose"] == 2


@pytest.mark.parametrize("keep", [False, True])
def test_all_and_any_over_axes_including_empty(keep):
    rng = np.random.default_rng(2)
    b = Builder()
    m, e = b.input("m", [3, 4, 5], DType.BOOL), b.input("e", [0, 3], DType.BOOL)
    outputs = [b(op, v, ints(b, axes), keep_dims=keep, Tidx=DType.INT32)
               for op in ("All", "Any") for v, axes in ((m, [1]), (m, [0, -1]), (e, [0]), (e, [0, 1]))]
    m_value = rng.random((3, 4, 5)) < 0.8
    m_value[1, :, 2] = True
    check(b, {"m": m_value, "e": np.zeros((0, 3), bool)}, outputs)


def test_any_on_a_channels_first_tensor_remaps_axes():
    rng = np.random.default_rng(3)
    b = Builder()
    x = b.input("x", [1, 4, 5, 2])
    positive = b("Greater", integer_conv(b, x, 3, rng), b.const(np.float32(0)))
    outputs = [b("Any", positive, ints(b, [1, 2]), keep_dims=False, Tidx=DType.INT32),
               b("All", positive, ints(b, [3]), keep_dims=True, Tidx=DType.INT32)]
    assert check(b, {"x": integer_image(rng, (1, 4, 5, 2))}, outputs)["Conv"] == 1


# -- scatters --------------------------------------------------------------------------------------
def test_scatter_nd_adds_duplicates():
    rng = np.random.default_rng(4)
    b = Builder()
    idx, upd = b.input("idx", [6, 2], DType.INT32), b.input("upd", [6, 3])
    shape = ints(b, [4, 5, 3])
    i_upd = b.input("i_upd", [6, 3], DType.INT32)
    feeds = {"idx": rng.integers(0, 4, (6, 2)).astype(np.int32), "upd": rng.standard_normal((6, 3)).astype(np.float32),
             "i_upd": rng.integers(-9, 9, (6, 3)).astype(np.int32)}
    outputs = [b("ScatterNd", idx, upd, shape, Tindices=DType.INT32),
               b("ScatterNd", idx, i_upd, shape, Tindices=DType.INT32)]
    feeds["idx"][1] = feeds["idx"][0]
    counts = check(b, feeds, outputs)
    assert counts["ScatterND"] == 2 and "Expand" not in counts  # the zeros of a constant shape are initializers


def test_scatter_nd_into_a_run_time_shape_fills_zeros_with_one_node():
    b = Builder()
    idx, upd, shape = b.input("idx", [2, 1], DType.INT32), b.input("upd", [2]), b.input("shape", [1], DType.INT32)
    out = b("ScatterNd", idx, upd, shape, Tindices=DType.INT32)
    feeds = {"idx": np.asarray([[3], [0]], np.int32), "upd": np.asarray([1.5, -2], np.float32),
             "shape": np.asarray([5], np.int32)}
    assert check(b, feeds, [out]) == {"Cast": 2, "ConstantOfShape": 1, "ScatterND": 1}


@pytest.mark.parametrize("op", ["TensorScatterUpdate", "TensorScatterAdd", "TensorScatterSub",
                                "TensorScatterMax", "TensorScatterMin"])
def test_tensor_scatters(op):
    rng = np.random.default_rng(5)
    b = Builder()
    t, idx, upd = b.input("t", [5, 4]), b.input("idx", [3, 1], DType.INT64), b.input("upd", [3, 4])
    i_t, i_upd = b.input("i_t", [5, 4], DType.INT32), b.input("i_upd", [3, 4], DType.INT32)
    rows = [0, 3, 0] if op != "TensorScatterUpdate" else [4, 1, 2]
    feeds = {"t": rng.standard_normal((5, 4)).astype(np.float32), "idx": np.asarray(rows, np.int64).reshape(3, 1),
             "upd": rng.standard_normal((3, 4)).astype(np.float32),
             "i_t": rng.integers(-9, 9, (5, 4)).astype(np.int32), "i_upd": rng.integers(-9, 9, (3, 4)).astype(np.int32)}
    check(b, feeds, [b(op, t, idx, upd, Tindices=DType.INT64), b(op, i_t, idx, i_upd, Tindices=DType.INT64)], opset=18)


@pytest.mark.parametrize("starts", [[1, 5, -1], [0, 1, 2], [-3, 9, 9]])
def test_dynamic_update_slice_with_known_starts_is_one_scatter(starts):
    rng = np.random.default_rng(6)
    b = Builder()
    t, u = b.input("t", [2, 3, 4]), b.input("u", [1, 2, 2])
    out = b("XlaDynamicUpdateSlice", t, u, ints(b, starts), Tindices=DType.INT32)
    feeds = {"t": rng.standard_normal((2, 3, 4)).astype(np.float32), "u": rng.standard_normal((1, 2, 2)).astype(np.float32)}
    assert check(b, feeds, [out]) == {"ScatterND": 1}


@pytest.mark.parametrize("opset", [13, 17])
def test_dynamic_update_slice_clamps_run_time_starts_and_indexes_only_leading_axes(opset):
    """A KV cache's step: the block covers the last two axes whole, so indices address two axes."""
    rng = np.random.default_rng(7)
    b = Builder()
    cache, step = b.input("cache", [None, 6, 2, 3]), b.input("step", [1, 1, 2, 3])
    starts = b.input("starts", [4], DType.INT64)
    out = b("XlaDynamicUpdateSlice", cache, step, starts, Tindices=DType.INT64)
    onnx_model = export_with_report(b.graph, ["cache", "step", "starts"], [out.name], opset=opset).model
    onnx.checker.check_model(onnx_model, full_check=True)
    grid = next(i for i in onnx_model.graph.initializer if i.name.endswith("/grid"))
    assert list(grid.dims) == [1, 1, 2]
    for batch, where in ((1, [0, 3, 0, 0]), (2, [1, 9, 1, 2]), (3, [-2, -1, 0, 0])):
        feeds = {"cache": rng.standard_normal((batch, 6, 2, 3)).astype(np.float32),
                 "step": rng.standard_normal((1, 1, 2, 3)).astype(np.float32), "starts": np.asarray(where, np.int64)}
        want = Interpreter(b.graph).run(feeds, [out.name])[out.name]
        np.testing.assert_array_equal(run_onnx(onnx_model, feeds, [out.name])[out.name], want)


def test_dynamic_update_slice_covering_the_input_is_the_update():
    b = Builder()
    t, u = b.input("t", [2, 3]), b.input("u", [2, 3])
    out = b("XlaDynamicUpdateSlice", t, u, b.input("s", [2], DType.INT32), Tindices=DType.INT32)
    feeds = {"t": np.zeros((2, 3), np.float32), "u": np.ones((2, 3), np.float32), "s": np.asarray([1, 1], np.int32)}
    assert check(b, feeds, [b("Neg", out)]) == {"Neg": 1}


def test_dynamic_update_slice_of_an_unknown_update_shape_is_refused():
    b = Builder()
    out = b("XlaDynamicUpdateSlice", b.input("t", [4, 3]), b.input("u", [None, 3]), ints(b, [0, 0]),
            Tindices=DType.INT32)
    refused(b, ["t", "u"], out, r"'XlaDynamicUpdateSlice'.*static shape")


def test_scatters_below_their_opset_are_refused():
    b = Builder()
    out = b("ScatterNd", b.input("i", [2, 1], DType.INT32), b.input("u", [2]), ints(b, [4]), Tindices=DType.INT32)
    refused(b, ["i", "u"], out, r"'ScatterNd'.*opset 16", opset=15)
    b = Builder()
    out = b("TensorScatterMax", b.input("t", [4]), b.input("i", [2, 1], DType.INT32), b.input("u", [2]),
            Tindices=DType.INT32)
    refused(b, ["t", "i", "u"], out, r"'TensorScatterMax'.*'max' needs opset 18")
    b = Builder()  # a sorted max's empty segments are 0, found by counting ids with a ScatterND add
    out = b("SegmentMax", b.input("d", [4]), b.input("ids", [4], DType.INT64), Tindices=DType.INT64)
    refused(b, ["d", "ids"], out, r"'SegmentMax'.*'add' needs opset 16", opset=15)


# -- segments ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("reduction,opset", [("Sum", 18), ("Prod", 18), ("Max", 18), ("Min", 18), ("Max", 17),
                                             ("Min", 13)])
def test_unsorted_segments_fill_empty_and_drop_negative_ids(reduction, opset):
    """From opset 18 a ScatterND reduction; below it, max and min reduce a segment mask."""
    rng = np.random.default_rng(6)
    b = Builder()
    data, ids = b.input("data", [4, 3, 2]), b.input("ids", [4, 3], DType.INT32)
    i_data = b.input("i_data", [4, 3, 2], DType.INT32)
    op = f"UnsortedSegment{reduction}"
    const_ids = ints(b, [0, 2, 2, 1])
    outputs = [b(op, data, ids, ints(b, 7), Tindices=DType.INT32, Tnumsegments=DType.INT32),
               b(op, i_data, ids, ints(b, 7), Tindices=DType.INT32, Tnumsegments=DType.INT32),
               b(op, data, const_ids, ints(b, 4), Tindices=DType.INT32, Tnumsegments=DType.INT32)]
    feeds = {"data": rng.standard_normal((4, 3, 2)).astype(np.float32),
             "ids": np.asarray([[0, 3, -1], [3, 0, 5], [1, 1, -1], [5, 0, 3]], np.int32),
             "i_data": rng.integers(-5, 6, (4, 3, 2)).astype(np.int32)}
    counts = check(b, feeds, outputs, opset=opset)
    if opset < 18:
        assert "ScatterND" not in counts and counts[f"Reduce{reduction}"] == 3
        return
    assert counts["ScatterND"] == 3 and counts["Slice"] == 2  # constant ids need no spare row


@pytest.mark.parametrize("rows", [0, 3])
def test_masked_segment_max_of_no_rows_is_tfs_finite_lowest(rows):
    """Below opset 18 an empty id list reduces an empty axis (-inf in onnxruntime); TF says lowest."""
    b = Builder()
    data, ids = b.input("data", [None, 2]), b.input("ids", [None], DType.INT32)
    out = b("UnsortedSegmentMax", data, ids, ints(b, 4), Tindices=DType.INT32, Tnumsegments=DType.INT32)
    feeds = {"data": np.arange(2 * rows, dtype=np.float32).reshape(rows, 2), "ids": np.arange(rows, dtype=np.int32)}
    counts = check(b, feeds, [out], opset=17)
    assert counts["ReduceMax"] == 1 and counts["Max"] == 1


@pytest.mark.parametrize("reduction,opset", [("Sum", 18), ("Prod", 18), ("Max", 18), ("Min", 18), ("Mean", 18),
                                             ("Max", 17), ("Min", 16)])
def test_sorted_segments(reduction, opset):
    rng = np.random.default_rng(7)
    b = Builder()
    data, ids = b.input("data", [7, 3]), b.input("ids", [7], DType.INT64)
    i_data = b.input("i_data", [7, 3], DType.INT32)
    op = f"Segment{reduction}"
    outputs = [b(op, data, ids, Tindices=DType.INT64), b(op, i_data, ids, Tindices=DType.INT64)]
    feeds = {"data": rng.standard_normal((7, 3)).astype(np.float32), "ids": np.asarray([0, 0, 2, 2, 2, 5, 6]),
             "i_data": rng.integers(-5, 6, (7, 3)).astype(np.int32)}
    check(b, feeds, outputs, opset=opset)


@pytest.mark.parametrize("reduction", ["Sum", "Mean", "SqrtN"])
def test_sparse_segments(reduction):
    rng = np.random.default_rng(8)
    b = Builder()
    data, indices, ids = b.input("data", [5, 3]), b.input("indices", [7], DType.INT32), b.input("ids", [7], DType.INT64)
    op = f"SparseSegment{reduction}"
    outputs = [b(op, data, indices, ids, Tidx=DType.INT32, Tsegmentids=DType.INT64),
               b(f"{op}WithNumSegments", data, indices, ids, ints(b, 9), Tidx=DType.INT32, Tsegmentids=DType.INT64)]
    feeds = {"data": rng.standard_normal((5, 3)).astype(np.float32),
             "indices": np.asarray([4, 0, 0, 2, 1, 3, 4], np.int32), "ids": np.asarray([0, 0, 2, 2, 2, 5, 6])}
    counts = check(b, feeds, outputs)
    assert counts["Gather"] == 1  # both ops gather the same rows


# -- reordering ----------------------------------------------------------------------------------------
def test_roll_sums_shifts_per_axis_and_keeps_the_layout():
    rng = np.random.default_rng(8)
    b = Builder()
    x, v = b.input("x", [1, 4, 5, 2]), b.input("v", [6])
    y = declared(integer_conv(b, x, 3, rng), [1, 4, 5, 3])
    outputs = [b("Roll", y, ints(b, [1, -7, 2]), ints(b, [1, 2, -3]), Tshift=DType.INT32, Taxis=DType.INT32),
               b("Roll", y, ints(b, [2]), ints(b, [3]), Tshift=DType.INT32, Taxis=DType.INT32),
               b("Roll", v, ints(b, [12]), ints(b, [0]), Tshift=DType.INT32, Taxis=DType.INT32)]
    counts = check(b, {"x": integer_image(rng, (1, 4, 5, 2)), "v": np.arange(6, dtype=np.float32)}, outputs)
    assert counts["Concat"] == 3


@pytest.mark.parametrize("shifts", [[0, 0], [3, -1], [-13, 7], [5, 10]])
def test_roll_by_a_shift_known_only_at_run_time(shifts):
    """A TF2 loop rolls by its counter: the cut point is size - shift mod size, computed in the graph,
    also on a channels-first conv output and an axis of unknown size."""
    rng = np.random.default_rng(10)
    b = Builder()
    x, v, shift = b.input("x", [1, 4, 5, 2]), b.input("v", [None, 3]), b.input("shift", [2], DType.INT32)
    y = declared(integer_conv(b, x, 3, rng), [1, 4, 5, 3])
    outputs = [b("Roll", y, shift, ints(b, [1, -1]), Tshift=DType.INT32, Taxis=DType.INT32),
               b("Roll", v, shift, ints(b, [0, 1]), Tshift=DType.INT32, Taxis=DType.INT32)]
    check(b, {"x": integer_image(rng, (1, 4, 5, 2)), "v": np.arange(18, dtype=np.float32).reshape(6, 3),
              "shift": np.asarray(shifts, np.int32)}, outputs)


@pytest.mark.parametrize("seq_dim, batch_dim", [(1, 0), (0, 1), (2, 0), (0, 2), (1, 2)])
def test_reverse_sequence(seq_dim, batch_dim):
    rng = np.random.default_rng(9)
    b = Builder()
    shape = (3, 4, 5)
    x, lengths = b.input("x", shape), b.input("n", [shape[batch_dim]], DType.INT32)
    out = b("ReverseSequence", x, lengths, seq_dim=seq_dim, batch_dim=batch_dim, Tlen=DType.INT32)
    feeds = {"x": rng.standard_normal(shape).astype(np.float32),
             "n": rng.integers(0, shape[seq_dim] + 1, shape[batch_dim]).astype(np.int32)}
    check(b, feeds, [out])


@pytest.mark.parametrize("dtype", [DType.FLOAT, DType.INT32, DType.INT64])
@pytest.mark.parametrize("out_idx", [DType.INT32, DType.INT64])
def test_unique_in_first_appearance_order(dtype, out_idx):
    b = Builder()
    x = b.input("x", [8], dtype)
    unique, index = b("Unique", x, out_idx=out_idx)
    with_counts = b("UniqueWithCounts", x, out_idx=out_idx)
    feeds = {"x": np.asarray([5, 2, 5, -1, 2, 7, 5, 0], dtype.to_numpy())}
    check(b, feeds, [unique, index, *with_counts])


@pytest.mark.parametrize("dtype", [DType.FLOAT, DType.INT32, DType.INT64])
@pytest.mark.parametrize("y", [[2, 9, 0], [], [5, 2, -1, 7, 0]])
def test_list_diff(dtype, y):
    b = Builder()
    x, other = b.input("x", [8], dtype), b.input("y", [len(y)], dtype)
    kept, where = b("ListDiff", x, other, out_idx=DType.INT64)
    feeds = {"x": np.asarray([5, 2, 5, -1, 2, 7, 5, 0], dtype.to_numpy()), "y": np.asarray(y, dtype.to_numpy())}
    check(b, feeds, [kept, where, b("ListDiff", x, other)[1]])


def test_invert_permutation_and_ensure_shape():
    b = Builder()
    p, q = b.input("p", [5], DType.INT32), b.input("q", [4], DType.INT64)
    x = b.input("x", [2, 3])
    ensured = b("EnsureShape", b("Relu", x), shape=Shape.of([None, 3]))
    feeds = {"p": np.asarray([3, 0, 4, 1, 2], np.int32), "q": np.asarray([1, 3, 0, 2]),
             "x": np.asarray([[1, -2, 3], [-4, 5, 6]], np.float32)}
    counts = check(b, feeds, [b("InvertPermutation", p), b("InvertPermutation", q), ensured])
    assert counts["TopK"] == 2 and counts["Relu"] == 1


# -- math and bits ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [DType.FLOAT, DType.HALF])
def test_atan2_in_every_quadrant_and_at_signed_zeros(dtype):
    rng = np.random.default_rng(10)
    b = Builder()
    y, x = b.input("y", [60], dtype), b.input("x", [60], dtype)
    np_type = dtype.to_numpy()
    yv, xv = rng.uniform(-3, 3, 60).astype(np_type), rng.uniform(-3, 3, 60).astype(np_type)
    yv[:20] = [1, -1, 0, -0.0, 0, -0.0, 2, -2, np.inf, -np.inf, np.inf, -np.inf, 3, np.nan, np.inf, 0, -0.0, -3,
               np.nan, -np.inf]
    xv[:20] = [0, -0.0, 0, 0, -0.0, -0.0, -1e-30, -1e-30, np.inf, np.inf, -np.inf, -np.inf, -np.inf, 1, np.nan,
               np.inf, -np.inf, np.inf, np.nan, 2]
    out = b("Atan2", y, x)
    feeds = {"y": yv, "x": xv}
    counts = check(b, feeds, [out])
    assert sum(counts.values()) == (19 if dtype == DType.HALF else 16)
    want = Interpreter(b.graph).run(feeds, [out.name])[out.name]
    got = run_onnx(export_with_report(b.graph, ["y", "x"], [out.name]).model, feeds, [out.name])[out.name]
    # Signed zeros too, but for atan2(-0, +0): onnxruntime's Where makes a -0 it picks from its
    # first branch +0 (it adds the picked value to a zero).
    kept = ~(np.signbit(yv) & (yv == 0) & ~np.signbit(xv) & (xv == 0))
    np.testing.assert_array_equal(np.signbit(got)[kept], np.signbit(want)[kept])


def test_atan2_of_double_is_refused():
    b = Builder()
    refused(b, ["y", "x"], b("Atan2", b.input("y", [2], DType.DOUBLE), b.input("x", [2], DType.DOUBLE)),
            r"'Atan2'.*float32 only")


@pytest.mark.parametrize("dtype", [DType.UINT8, DType.UINT32, DType.UINT64])
def test_bits_of_unsigned_types(dtype):
    rng = np.random.default_rng(11)
    b = Builder()
    x, y = b.input("x", [40], dtype), b.input("y", [40], dtype)
    np_type = dtype.to_numpy()
    bits = 8 * np.dtype(np_type).itemsize
    feeds = {"x": rng.integers(0, np.iinfo(np_type).max, 40, dtype=np.uint64).astype(np_type),
             "y": rng.integers(0, bits + 5, 40).astype(np_type)}
    outputs = [b(op, x, y) for op in ("LeftShift", "RightShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor")]
    outputs += [b("RightShift", x, b.const(np.asarray(3, np_type))), b("LeftShift", x, b.const(np.asarray(bits, np_type)))]
    counts = check(b, feeds, outputs + [b("Invert", x)], opset=18)
    # in-range constants: no clamp; both shifts by y share one
    assert counts["BitShift"] == 4 and counts["Min"] == 2 and counts["BitwiseNot"] == 1


@pytest.mark.parametrize("dtype", [DType.INT8, DType.INT32, DType.INT64])
def test_signed_shifts_wrap_left_and_keep_the_sign_right(dtype):
    """At opset 17 too: BitShift is from opset 11.  Amounts out of [0, bits - 1] clamp, as in TF."""
    rng = np.random.default_rng(14)
    np_type = dtype.to_numpy()
    info, bits = np.iinfo(np_type), 8 * np.dtype(np_type).itemsize
    b = Builder()
    x, y = b.input("x", [40], dtype), b.input("y", [40], dtype)
    values = rng.integers(info.min, info.max, 40, dtype=np.int64).astype(np_type)
    values[:4] = [info.min, info.max, -1, 0]
    feeds = {"x": values, "y": rng.integers(-3, bits + 3, 40).astype(np_type)}
    outputs = [b("LeftShift", x, y), b("RightShift", x, y), b("RightShift", x, b.const(np.asarray(2, np_type)))]
    counts = check(b, feeds, outputs)
    assert counts["BitShift"] == 3 and counts["Min"] == 1 and counts["Max"] == 1  # one clamp of y serves both


def test_signed_int_bitwise_and_refusals():
    rng = np.random.default_rng(12)
    b = Builder()
    x, y = b.input("x", [10], DType.INT32), b.input("y", [10], DType.INT32)
    feeds = {n: rng.integers(-1000, 1000, 10).astype(np.int32) for n in "xy"}
    check(b, feeds, [b("BitwiseAnd", x, y), b("BitwiseXor", x, y), b("Invert", x)], opset=18)
    b = Builder()
    refused(b, ["x", "y"], b("RightShift", b.input("x", [2], DType.INT16), b.input("y", [2], DType.INT16)),
            r"'RightShift'.*8/32/64-bit", opset=18)
    b = Builder()
    refused(b, ["x", "y"], b("BitwiseOr", b.input("x", [2], DType.INT32), b.input("y", [2], DType.INT32)),
            r"'BitwiseOr'.*opset 18", opset=17)


# -- Cumprod -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumprod_scans_in_tf_order(exclusive, reverse):
    rng = np.random.default_rng(13)
    b = Builder()
    x, n = b.input("x", [3, 5, 2]), b.input("n", [6], DType.INT64)
    outputs = [b("Cumprod", x, ints(b, axis), exclusive=exclusive, reverse=reverse, Tidx=DType.INT32)
               for axis in (0, 1, -1)]
    outputs.append(b("Cumprod", n, ints(b, 0), exclusive=exclusive, reverse=reverse, Tidx=DType.INT32))
    feeds = {"x": rng.uniform(-1.5, 1.5, (3, 5, 2)).astype(np.float32), "n": np.asarray([3, -2, 0, 5, 7, -1])}
    feeds["x"][1, 2, 0] = 0
    assert check(b, feeds, outputs)["Scan"] == 4


def test_cumprod_of_an_empty_tensor_is_that_tensor():
    """Fuzz seed 116, case 42587: onnxruntime's Scan over a tensor with an empty axis dies of SIGFPE."""
    b = Builder()
    out = b("Cumprod", b.input("x", [0, 6, 4]), ints(b, 1), Tidx=DType.INT32)
    counts = check(b, {"x": np.zeros((0, 6, 4), np.float32)}, [out])
    assert "Scan" not in counts


# -- stitching ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["DynamicStitch", "ParallelDynamicStitch"])
def test_dynamic_stitch_last_piece_wins(op):
    rng = np.random.default_rng(14)
    b = Builder()
    i0, i1 = b.input("i0", [3], DType.INT32), b.input("i1", [2, 2], DType.INT32)
    d0, d1 = b.input("d0", [3, 2]), b.input("d1", [2, 2, 2])
    out = b(op, i0, i1, d0, d1, N=2)
    feeds = {"i0": np.asarray([0, 4, 2], np.int32), "i1": np.asarray([[1, 4], [5, 3]], np.int32),
             "d0": rng.standard_normal((3, 2)).astype(np.float32), "d1": rng.standard_normal((2, 2, 2)).astype(np.float32)}
    if op == "ParallelDynamicStitch":
        feeds["i1"][0, 1] = 7  # TF leaves the winner of a shared slot open here; slot 6 stays 0
    check(b, feeds, [out], opset=18)
    refused(b, list(feeds), out, rf"'{op}'.*opset 18", opset=17)


@pytest.mark.parametrize("opset", [13, 17])
def test_dynamic_partition_is_one_compress_per_partition(opset):
    rng = np.random.default_rng(16)
    b = Builder()
    p1, p2 = b.input("p1", [5], DType.INT32), b.input("p2", [2, 3], DType.INT32)
    d1, d2 = b.input("d1", [5, 2]), b.input("d2", [2, 3, 4], DType.INT64)
    first = b("DynamicPartition", d1, p1, num_partitions=3)
    second = b("DynamicPartition", d2, p2, num_partitions=2)
    outputs = first + second
    feeds = {"p1": np.asarray([2, 0, 2, 2, 1], np.int32), "p2": np.asarray([[1, 1, 0], [1, 0, 1]], np.int32),
             "d1": rng.standard_normal((5, 2)).astype(np.float32), "d2": rng.integers(-9, 9, (2, 3, 4))}
    assert check(b, feeds, outputs, opset=opset)["Compress"] == 5


# -- counting and densifying -------------------------------------------------------------------------------------
@pytest.mark.parametrize("binary", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
def test_bincounts(binary, weighted):
    rng = np.random.default_rng(15)
    b = Builder()
    arr, rows = b.input("arr", [4, 5], DType.INT32), b.input("rows", [3, 7], DType.INT64)
    w_arr, w_rows = b.input("w_arr", [4, 5] if weighted else [0]), b.input("w_rows", [3, 7] if weighted else [0])
    size = b.input("size", [], DType.INT64)
    outputs = [b("DenseBincount", rows, size, w_rows, binary_output=binary, Tidx=DType.INT64),
               b("DenseBincount", b("Reshape", rows, ints(b, [-1])), ints(b, 6, np.int64), w_rows
                 if not weighted else b("Reshape", w_rows, ints(b, [-1])), binary_output=binary, Tidx=DType.INT64)]
    if not binary:
        outputs.append(b("Bincount", arr, ints(b, 6), w_arr))
    feeds = {"arr": rng.integers(0, 9, (4, 5)).astype(np.int32), "rows": rng.integers(0, 9, (3, 7)),
             "w_arr": rng.standard_normal((4, 5) if weighted else 0).astype(np.float32),
             "w_rows": rng.standard_normal((3, 7) if weighted else 0).astype(np.float32), "size": np.asarray(6)}
    check(b, feeds, outputs)


def test_sparse_to_dense():
    b = Builder()
    idx, vals = b.input("idx", [3, 2], DType.INT64), b.input("vals", [3])
    flat_idx = b.input("flat_idx", [3], DType.INT32)
    outputs = [b("SparseToDense", idx, ints(b, [3, 4], np.int64), vals, b.const(np.float32(-2)), Tindices=DType.INT64),
               b("SparseToDense", idx, ints(b, [3, 4], np.int64), b.const(np.float32(7)), b.const(np.float32(0)),
                 Tindices=DType.INT64),
               b("SparseToDense", flat_idx, ints(b, [6]), ints(b, [7, 8, 9]), ints(b, 1), Tindices=DType.INT32)]
    feeds = {"idx": np.asarray([[0, 1], [1, 2], [2, 0]]), "vals": np.asarray([5, 6, -1], np.float32),
             "flat_idx": np.asarray([0, 2, 4], np.int32)}
    assert check(b, feeds, outputs)["ScatterND"] == 3


# -- matrices and losses -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("opset", [13, 17])
def test_matrix_band_part(opset: int):
    """Trilu from opset 14: one per bounded side, none for the whole matrix; a band mask before."""
    rng = np.random.default_rng(16)
    b = Builder()
    x, i = b.input("x", [2, 4, 5]), b.input("i", [4, 5], DType.INT32)
    t = b.input("t", [3, 3], DType.BOOL)
    outputs = [b("MatrixBandPart", x, ints(b, lo, np.int64), ints(b, up, np.int64), Tindex=DType.INT64)
               for lo, up in ((0, -1), (-1, 0), (1, 2), (2, 0), (-1, -1))]
    outputs.append(b("MatrixBandPart", i, ints(b, 0), ints(b, 1), Tindex=DType.INT32))
    outputs.append(b("MatrixBandPart", t, ints(b, -1), ints(b, 0), Tindex=DType.INT32))
    feeds = {"x": rng.standard_normal((2, 4, 5)).astype(np.float32), "i": rng.integers(-9, 9, (4, 5)).astype(np.int32),
             "t": rng.random((3, 3)) < 0.7}
    counts = check(b, feeds, outputs, opset=opset)
    if opset >= 14:
        # (2, 0) shares the lower triangle of (-1, 0); the whole of x is an output as well
        assert counts == {"Trilu": 1 + 1 + 2 + 1 + 2 + 1, "Identity": 1}
    else:
        assert counts["Where"] == 6 and counts["And"] == 1


@pytest.mark.parametrize("lower, upper", [(2, 2), (-1, 1), (0, -3), (5, 0)])
def test_matrix_band_part_with_bounds_read_at_run_time(lower: int, upper: int):
    """Qwen3's sliding window over a dynamic length: band_part(ones, min(n, w), min(n, w)) with
    bounds only run time knows, a negative one meaning the whole side, as a constant does."""
    b = Builder()
    x, lo, up = b.input("x", [None, 6, 6]), b.input("lo", [], DType.INT32), b.input("up", [], DType.INT32)
    t = b.input("t", [6, 6], DType.BOOL)
    outputs = [b("MatrixBandPart", x, lo, up, Tindex=DType.INT32),
               b("MatrixBandPart", t, lo, b.const(np.int32(0)), Tindex=DType.INT32)]
    feeds = {"x": np.random.default_rng(18).standard_normal((2, 6, 6)).astype(np.float32),
             "lo": np.asarray(lower, np.int32), "up": np.asarray(upper, np.int32), "t": np.ones((6, 6), bool)}
    assert check(b, feeds, outputs)["Trilu"] == 4  # two sides each


def test_matrix_determinant_within_float32_rounding():
    """Det is an LU in both, pivoted in different orders: 1e-5 relative instead of 1e-6."""
    rng = np.random.default_rng(17)
    b = Builder()
    out = b("MatrixDeterminant", b.input("s", [3, 4, 4]))
    feeds = {"s": rng.standard_normal((3, 4, 4)).astype(np.float32)}
    model = export_with_report(b.graph, ["s"], [out.name]).model
    onnx.checker.check_model(model, full_check=True)
    want = Interpreter(b.graph).run(dict(feeds), [out.name])[out.name]
    np.testing.assert_allclose(run_onnx(model, feeds, [out.name])[out.name], want, rtol=1e-5)
    b = Builder()
    refused(b, ["s"], b("MatrixDeterminant", b.input("s", [2, 2], DType.DOUBLE)), r"'MatrixDeterminant'.*float32")


@pytest.mark.parametrize("k", [0, 2, -1, [-2, 1], [1, 3], [-3, -1]])
@pytest.mark.parametrize("align", ["LEFT_RIGHT", "RIGHT_LEFT", "LEFT_LEFT", "RIGHT_RIGHT"])
def test_matrix_diagonals_v3(k, align):
    rng = np.random.default_rng(17)
    b = Builder()
    x = b.input("x", [2, 4, 5])
    k_const = ints(b, k)
    part = b("MatrixDiagPartV3", x, k_const, b.const(np.float32(9)), align=align)
    single = np.ndim(k) == 0
    packed_shape = [2] + ([] if single else [np.ptp(k) + 1]) + [max(4, 5)]
    lo, hi = (k, k) if single else k
    length = max(min(4 + min(0, d), 5 - max(0, d)) for d in range(lo, hi + 1))
    packed_shape[-1] = length
    d = b.input("d", packed_shape)
    outputs = [part, b("MatrixSetDiagV3", x, d, k_const, align=align),
               b("MatrixDiagV3", d, k_const, ints(b, -1), ints(b, -1), b.const(np.float32(-1)), align=align)]
    feeds = {"x": rng.standard_normal((2, 4, 5)).astype(np.float32),
             "d": rng.standard_normal(packed_shape).astype(np.float32)}
    assert check(b, feeds, outputs)["Gather"] == 3


def test_matrix_diagonals_v1_v2_on_integers():
    rng = np.random.default_rng(18)
    b = Builder()
    x, d = b.input("x", [3, 4, 4], DType.INT32), b.input("d", [3, 4], DType.INT32)
    k = ints(b, [-1, 1])
    part = declared(b("MatrixDiagPartV2", x, k, ints(b, 0)), [3, 3, 4])
    outputs = [b("MatrixDiag", d), b("MatrixDiagPart", x), b("MatrixSetDiag", x, d), part,
               b("MatrixSetDiagV2", x, part, k), b("MatrixDiagV2", part, k, ints(b, -1), ints(b, 6), ints(b, 5))]
    feeds = {"x": rng.integers(-9, 9, (3, 4, 4)).astype(np.int32), "d": rng.integers(-9, 9, (3, 4)).astype(np.int32)}
    check(b, feeds, outputs)


@pytest.mark.parametrize("dtype", [DType.BOOL, DType.INT16])
def test_matrix_set_diag_of_types_onnxruntime_where_lacks(dtype):
    """Keras' ops.eye sets a bool diagonal; onnxruntime's Where has no bool or 16-bit kernel."""
    rng = np.random.default_rng(20)
    b = Builder()
    x, d = b.input("x", [2, 3, 3], dtype), b.input("d", [2, 3], dtype)
    feeds = {"x": rng.integers(0, 2, (2, 3, 3)).astype(dtype.to_numpy()),
             "d": rng.integers(0, 2, (2, 3)).astype(dtype.to_numpy())}
    check(b, feeds, [b("MatrixSetDiag", x, d), b("MatrixDiag", d)])


def test_softmax_cross_entropies():
    rng = np.random.default_rng(19)
    b = Builder()
    f, labels, row = b.input("f", [5, 7]), b.input("labels", [5, 7]), b.input("row", [1, 7])
    sparse = b.input("sparse", [5], DType.INT32)
    outputs = [*b("SoftmaxCrossEntropyWithLogits", f, labels), *b("SoftmaxCrossEntropyWithLogits", f, row),
               *b("SparseSoftmaxCrossEntropyWithLogits", f, sparse, Tlabels=DType.INT32)]
    feeds = {"f": rng.uniform(-6, 6, (5, 7)).astype(np.float32), "labels": rng.dirichlet(np.ones(7), 5).astype(np.float32),
             "row": rng.dirichlet(np.ones(7), 1).astype(np.float32), "sparse": rng.integers(0, 7, 5).astype(np.int32)}
    check(b, feeds, outputs)


# -- from a real TF graph ---------------------------------------------------------------------------------------------
@pytest.mark.tf
def test_tf_graph_of_these_ops_matches_tf(tmp_path):
    """tf.function graphs through load (signature checks), export and onnxruntime, against TF itself."""
    tf = pytest.importorskip("tensorflow")
    from compiler.modelio import load_model

    def graph(a, ids, m):
        first = a[0]
        return (tf.where(m), tf.reduce_all(m, 1), tf.roll(a, [2, -1], [1, 2]),
                tf.reverse_sequence(a, [3, 6], seq_axis=1, batch_axis=0), tf.math.segment_max(first, ids),
                tf.math.unsorted_segment_min(a[1], ids, 5), tf.tensor_scatter_nd_max(a[1], tf.expand_dims(ids, 1), first),
                tf.math.bincount(ids, minlength=5, maxlength=5), tf.linalg.band_part(a, 1, 0), tf.linalg.diag_part(a),
                tf.math.atan2(first, a[1]), tf.math.cumprod(a, 1, exclusive=True),
                tf.nn.sparse_softmax_cross_entropy_with_logits(ids, first), tf.dynamic_stitch([ids], [first]))

    specs = [tf.TensorSpec([2, 6, 5]), tf.TensorSpec([6], tf.int32), tf.TensorSpec([2, 6, 5], tf.bool)]
    concrete = tf.function(graph).get_concrete_function(*specs)
    path = tmp_path / "ops.pb"
    path.write_bytes(concrete.graph.as_graph_def().SerializeToString())
    inputs, outputs = [t.op.name for t in concrete.inputs], [t.op.name for t in concrete.outputs]
    x = np.random.default_rng(20).standard_normal((2, 6, 5)).astype(np.float32)
    feeds = [x, np.asarray([0, 0, 1, 3, 3, 4], np.int32), x > 0.3]
    model = export_with_report(load_model(path), inputs, outputs, opset=18).model
    onnx.checker.check_model(model, full_check=True)
    got = run_onnx(model, dict(zip(inputs, feeds)), outputs)
    for name, want in zip(outputs, (np.asarray(t) for t in concrete(*feeds))):
        assert got[name].dtype == want.dtype and got[name].shape == want.shape, name
        np.testing.assert_allclose(got[name], want, rtol=1e-6, atol=1e-7, err_msg=name)


@pytest.mark.parametrize("opset", [MIN_OPSET, MAX_OPSET])
def test_opset_independent_lowerings_at_both_ends_of_the_range(opset):
    rng = np.random.default_rng(21)
    b = Builder()
    x, m = b.input("x", [3, 4, 4]), b.input("m", [3, 4], DType.BOOL)
    v, ids = b.input("v", [6], DType.DOUBLE), b.input("ids", [6], DType.INT32)
    rows = b("Reshape", x, ints(b, [12, 4]))
    outputs = [b("Where", m), b("All", m, ints(b, [1]), Tidx=DType.INT32), b("Roll", x, ints(b, [1]), ints(b, [2])),
               b("ReverseSequence", x, ints(b, [2, 0, 4], np.int64), seq_dim=1, batch_dim=0),
               *b("Unique", v, out_idx=DType.INT32), b("InvertPermutation", ids),
               b("Cumprod", x, ints(b, 1), reverse=True), b("Bincount", ids, ints(b, 4), b.const(np.zeros(0, np.float32))),
               b("SparseToDense", ids, ints(b, [7]), b.const(np.float32(1)), b.const(np.float32(0)), validate_indices=False),
               b("MatrixBandPart", x, ints(b, 0), ints(b, -1)),
               b("MatrixDiagPartV3", x, ints(b, [-1, 1]), b.const(np.float32(0))),
               *b("SparseSoftmaxCrossEntropyWithLogits", rows, b.const(np.arange(12) % 4), Tlabels=DType.INT64)]
    feeds = {"x": rng.standard_normal((3, 4, 4)).astype(np.float32), "m": rng.random((3, 4)) < 0.5,
             "v": np.asarray([1.5, -2, 1.5, 0, -2, 3]), "ids": np.asarray([3, 0, 5, 1, 2, 4], np.int32)}
    check(b, feeds, outputs, opset=opset)


@pytest.mark.parametrize("dtype", [DType.BOOL, DType.INT16, DType.UINT16, DType.UINT32, DType.FLOAT])
def test_select_of_types_onnxruntimes_where_lacks(dtype):
    """onnxruntime's Where has no bool or 16-bit kernel: booleans pick with And/Or, integers via int64."""
    b = Builder()
    rng = np.random.default_rng(int(dtype))
    cond = b.input("cond", [2, 3], DType.BOOL)
    values = [rng.integers(0, 2 if dtype == DType.BOOL else 300, (2, 3)).astype(dtype.to_numpy()) for _ in range(2)]
    picked = b("SelectV2", cond, b.const(values[0]), b.const(values[1]), name="picked")
    rows = b("Select", b.input("rows", [2], DType.BOOL), b.const(values[0]), b.const(values[1]), name="rows")
    check(b, {"cond": rng.integers(0, 2, (2, 3)).astype(bool), "rows": np.array([True, False])}, [picked, rows])


def test_select_by_a_constant_band_mask_is_trilu():
    """Keras' triu(x, 1) (zeros where a lower mask holds), tril(x, -1), and trace's eye mask."""
    rows, cols = np.indices((4, 5))
    b = Builder()
    x = b.input("x", [3, 4, 5])
    zeros = b.const(np.zeros((3, 4, 5), np.float32))
    mask = lambda m: b.const(np.broadcast_to(m, (1, 4, 5)).copy())  # noqa: E731
    outputs = [b("SelectV2", mask(cols - rows < 1), zeros, x),
               b("SelectV2", mask(cols - rows <= -1), x, zeros),
               b("SelectV2", mask(cols == rows), x, b.const(np.float32(0)))]
    kept = [b("SelectV2", mask((cols + rows) % 2 == 0), x, zeros),  # a checkerboard is no band
            b("SelectV2", mask(cols == rows), x, b.const(np.float32(-0.0)))]  # Trilu would write +0
    feeds = {"x": np.random.default_rng(18).standard_normal((3, 4, 5)).astype(np.float32)}
    feeds["x"][0, 2, 0] = np.nan  # off the band it must come out 0, as from TF's select
    assert check(b, feeds, outputs + kept) == {"Trilu": 1 + 1 + 2, "Where": 2}


@pytest.mark.parametrize("dtype", [DType.BOOL, DType.INT16, DType.FLOAT])
def test_band_part_of_any_type(dtype):
    """Keras' causal attention mask is the band part of a run-time boolean tensor."""
    b = Builder()
    x = b.input("x", [2, 4, 4], dtype)
    out = b("MatrixBandPart", x, b.const(np.int64(-1)), b.const(np.int64(0)), name="band", Tindex=DType.INT64)
    feed = np.random.default_rng(3).integers(0, 2 if dtype == DType.BOOL else 9, (2, 4, 4)).astype(dtype.to_numpy())
    counts = check(b, {"x": feed}, [out])
    assert ("Trilu" in counts) == (dtype != DType.INT16)  # onnxruntime's Trilu has no 16-bit integer kernel


# -- sequence decoding --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("merge_repeated", [False, True])
@pytest.mark.parametrize("known", [True, False])
def test_ctc_greedy_decoder(merge_repeated, known):
    """Sparse coordinates, classes, dense shape and log probabilities as the kernel's: repeats,
    blanks between them, a sequence cut short and an empty one; static and unknown sizes."""
    rng = np.random.default_rng(17)
    logits = rng.standard_normal((7, 4, 5)).astype(np.float32)
    best = np.asarray([[1, 1, 3, 4], [1, 4, 3, 4], [0, 2, 3, 4], [1, 2, 1, 4], [3, 2, 2, 1], [3, 0, 2, 1],
                       [2, 0, 4, 1]])
    logits[np.arange(7)[:, None], np.arange(4)[None, :], best] += 5.0
    b = Builder()
    x = b.input("x", [7, 4, 5] if known else [None, None, 5])
    lengths = b.input("lengths", [4] if known else [None], DType.INT32)
    outs = b("CTCGreedyDecoder", x, lengths, merge_repeated=merge_repeated, blank_index=0)
    counts = check(b, {"x": logits, "lengths": np.asarray([7, 5, 0, 6], np.int32)}, outs)
    assert counts["NonZero"] == 1 and counts["ArgMax"] == 1


# -- Pack of run-time sizes ------------------------------------------------------------------------
def test_pack_of_a_shrunk_slice_and_a_constant_is_one_concat():
    """tf.stack([tf.shape(x)[0], 6]): the slice's Squeeze and the Unsqueeze back cancel, and the
    constant is stacked as an initializer."""
    b = Builder()
    x = b.input("x", [None, 6])
    rows = b("StridedSlice", b("Shape", x, out_type=DType.INT32), ints(b, [0]), ints(b, [1]), ints(b, [1]),
             Index=DType.INT32, shrink_axis_mask=1)
    shape = b("Pack", rows, ints(b, 6), N=2, axis=0)
    alone = b("Pack", rows, N=1, axis=0)
    counts = check(b, {"x": np.zeros((3, 6), np.float32)}, [shape, alone, b("Reshape", x, shape)])
    assert "Unsqueeze" not in counts and "Squeeze" not in counts and counts["Concat"] == 1


def test_kept_dims_reduction_reads_the_image_a_conv_needs_channels_first():
    """AutoContrast-like: per-channel min/max of an image that is rescaled and fed to a conv. The
    image is transposed once for the conv; the reductions read that copy and need no Reshape."""
    rng = np.random.default_rng(5)
    b = Builder()
    x = b.input("x", [1, 6, 6, 3])
    low = b("Min", x, ints(b, [1, 2]), keep_dims=True)
    high = b("Max", x, ints(b, [1, 2]), keep_dims=True)
    scaled = b("Mul", b("Sub", x, low), b("RealDiv", b.const(np.float32(1.0)), b("Sub", high, low)))
    conv = b("Conv2D", scaled, b.const(rng.integers(-2, 3, (1, 1, 3, 2)).astype(np.float32)), strides=[1, 1, 1, 1],
             padding="VALID")
    counts = check(b, {"x": rng.uniform(0, 255, (1, 6, 6, 3)).astype(np.float32)}, [conv], of_largest=1e-6)
    assert counts["Transpose"] == 2 and "Reshape" not in counts
