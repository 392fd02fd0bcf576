"""Scatter (XlaDynamicUpdateSlice included), segment, roll/reverse/unique and bit-shift kernels against TensorFlow's eager CPU kernels.

Same harness and tolerance as test_kernels.py: seeded random inputs, several
attribute variants and dtypes each, exact dtype and shape, floats within rtol 1e-5.
Duplicate indices are used only where TF defines the result (accumulating ops).
"""
from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from compiler.ir.dtypes import DType  # noqa: E402
from compiler.ir.shapes import Shape  # noqa: E402
from compiler.runtime.kernels import KernelError  # noqa: E402
from tests.runtime.test_kernels import (F32, I32, I64, assert_matches, check, check_or_both_fail, rand, run_ours,
                                        run_tf)  # noqa: E402

pytestmark = pytest.mark.tf


# ---------------------------------------------------------------- scatters
@pytest.mark.parametrize("dtype", [F32, I32])
@pytest.mark.parametrize("index_type", [I32, I64])
def test_scatter_nd_accumulates_duplicates(dtype, index_type):
    rng = np.random.default_rng(1)
    indices = rng.integers(0, 4, (6, 2)).astype(index_type)
    updates = rand(rng, (6, 3), dtype, -5, 5)
    check("ScatterNd", {"indices": indices, "updates": updates, "shape": np.asarray([4, 5, 3], index_type)})


@pytest.mark.parametrize("op", ["TensorScatterAdd", "TensorScatterSub", "TensorScatterMax", "TensorScatterMin"])
@pytest.mark.parametrize("dtype", [F32, I32])
def test_tensor_scatter_reductions(op, dtype):
    rng = np.random.default_rng(2)
    tensor = rand(rng, (5, 4), dtype, -5, 5)
    indices = rng.integers(0, 5, (7, 1)).astype(I32)
    check(op, {"tensor": tensor, "indices": indices, "updates": rand(rng, (7, 4), dtype, -5, 5)})
    element = rng.integers(0, 4, (9, 2)).astype(I64)
    check(op, {"tensor": tensor, "indices": element, "updates": rand(rng, (9,), dtype, -5, 5)})


def test_tensor_scatter_update_with_distinct_indices():
    rng = np.random.default_rng(3)
    tensor = rand(rng, (6, 2, 3))
    indices = rng.permutation(6)[:4].reshape(2, 2, 1).astype(I32)
    check("TensorScatterUpdate", {"tensor": tensor, "indices": indices, "updates": rand(rng, (2, 2, 2, 3))})


@pytest.mark.parametrize("dtype", [F32, I32])
@pytest.mark.parametrize("starts", [[1, 5, -1], [0, 0, 0], [1, 1, 2], [-3, 9, 9]])
def test_xla_dynamic_update_slice_clamps_its_starts(dtype, starts):
    """Checked against tf2xla's dynamic_update_slice (raw_ops does not export the op)."""
    from tensorflow.compiler.tf2xla.python import xla

    rng = np.random.default_rng(4)
    target, update = rand(rng, (2, 3, 4), dtype, -5, 5), rand(rng, (1, 2, 2), dtype, -5, 5)
    for index_type in (I32, I64):
        indices = np.asarray(starts, index_type)
        want = [xla.dynamic_update_slice(target, update, indices).numpy()]
        assert_matches("XlaDynamicUpdateSlice", run_ours("XlaDynamicUpdateSlice", [target, update, indices], {}),
                       want)


def test_xla_dynamic_update_slice_refuses_a_larger_update():
    with pytest.raises(KernelError, match="larger than input"):
        run_ours("XlaDynamicUpdateSlice", [np.zeros((2, 3), F32), np.ones((3, 1), F32), np.zeros(2, I32)], {})


def test_scatter_out_of_range_fails():
    with pytest.raises(KernelError, match="does not index"):
        run_ours("ScatterNd", [np.asarray([[4]], I32), np.ones(1, F32), np.asarray([4], I32)], {})


# ---------------------------------------------------------------- segment reductions
SEGMENT_IDS = np.asarray([0, 0, 2, 2, 2, 5, 6], I32)  # empty segments 1, 3, 4


@pytest.mark.parametrize("op", ["SegmentSum", "SegmentMean", "SegmentMax", "SegmentMin", "SegmentProd"])
@pytest.mark.parametrize("dtype", [F32, I32])
def test_sorted_segments_leave_empty_max_min_segments_zero(op, dtype):
    rng = np.random.default_rng(4)
    data = rand(rng, (7, 3), dtype, -4, 5)
    check(op, {"data": data, "segment_ids": SEGMENT_IDS.astype(I64)})


@pytest.mark.parametrize("op", ["UnsortedSegmentSum", "UnsortedSegmentMax", "UnsortedSegmentMin", "UnsortedSegmentProd"])
@pytest.mark.parametrize("dtype", [F32, I32, np.float64])
def test_unsorted_segments_fill_identity_and_drop_negative_ids(op, dtype):
    rng = np.random.default_rng(5)
    data = rand(rng, (4, 3, 2), dtype, -4, 5)
    ids = np.asarray([[0, 3, -1], [3, 0, 5], [1, 1, -1], [5, 0, 3]], I32)
    out = check(op, {"data": data, "segment_ids": ids, "num_segments": np.int32(7)})
    check(op, {"data": data, "segment_ids": ids[:, 0].astype(I64),
                                          "num_segments": np.int64(6)})
    assert out[0].shape == (7, 2)


@pytest.mark.parametrize("op, counted", [("SparseSegmentSum", "SparseSegmentSumWithNumSegments"),
                                         ("SparseSegmentMean", "SparseSegmentMeanWithNumSegments"),
                                         ("SparseSegmentSqrtN", "SparseSegmentSqrtNWithNumSegments")])
@pytest.mark.parametrize("dtype", [F32, np.float64])
def test_sparse_segments_gather_then_reduce(op, counted, dtype):
    rng = np.random.default_rng(6)
    data = rand(rng, (5, 3, 2), dtype, -4, 5)
    indices = np.asarray([4, 0, 0, 2, 1, 3, 4], I32)
    check(op, {"data": data, "indices": indices, "segment_ids": SEGMENT_IDS})
    check(counted, {"data": data, "indices": indices.astype(I64), "segment_ids": SEGMENT_IDS,
                    "num_segments": np.int32(9)})


def test_dynamic_stitch_later_pieces_win():
    rng = np.random.default_rng(6)
    indices = [np.asarray([0, 4, 2], I32), np.asarray([[1, 4], [6, 3]], I32)]  # slot 5 unnamed
    data = [rand(rng, (3, 2)), rand(rng, (2, 2, 2))]
    for op in ("DynamicStitch", "ParallelDynamicStitch"):
        want = run_tf(op, {"indices": indices, "data": data}, {})
        assert_matches(op, run_ours(op, indices + data, {"N": 2}), want)


@pytest.mark.parametrize("shape", [(6,), (2, 3), ()])
def test_dynamic_partition_keeps_row_order(shape):
    rng = np.random.default_rng(8)
    partitions = rng.integers(0, 3, shape).astype(I32)
    data = rand(rng, shape + (2,), F32)
    check("DynamicPartition", {"data": data, "partitions": partitions}, {"num_partitions": 3})
    bad = np.full(shape, 3, I32)
    assert not check_or_both_fail("DynamicPartition", {"data": data, "partitions": bad}, {"num_partitions": 3})


# ---------------------------------------------------------------- reordering
@pytest.mark.parametrize("shift, axis", [([2], [0]), ([-1, 3], [1, 2]), ([1, 2], [-1, -1]), ([7], [1]), ([], [])])
def test_roll(shift, axis):
    x = np.arange(60, dtype=F32).reshape(3, 4, 5)
    check("Roll", {"input": x, "shift": np.asarray(shift, I32), "axis": np.asarray(axis, I64)})


@pytest.mark.parametrize("seq_dim, batch_dim", [(1, 0), (0, 1), (2, 0), (0, 2)])
def test_reverse_sequence(seq_dim, batch_dim):
    rng = np.random.default_rng(7)
    x = rand(rng, (3, 4, 3))
    lengths = rng.integers(0, x.shape[seq_dim] + 1, x.shape[batch_dim]).astype(I64)
    check("ReverseSequence", {"input": x, "seq_lengths": lengths}, {"seq_dim": seq_dim, "batch_dim": batch_dim})


@pytest.mark.parametrize("dtype", [F32, I32, I64])
@pytest.mark.parametrize("out_idx", [DType.INT32, DType.INT64])
def test_unique_keeps_first_appearance_order(dtype, out_idx):
    x = np.asarray([5, 2, 5, -1, 2, 7, 5, 0], dtype)
    check("Unique", {"x": x}, {"out_idx": out_idx})
    check("UniqueWithCounts", {"x": x}, {"out_idx": out_idx})
    check("Unique", {"x": np.zeros(0, dtype)}, {"out_idx": out_idx})


@pytest.mark.parametrize("dtype", [F32, I32, I64])
@pytest.mark.parametrize("out_idx", [DType.INT32, DType.INT64])
def test_list_diff_keeps_x_order_and_repeats(dtype, out_idx):
    x = np.asarray([5, 2, 5, -1, 2, 7, 5, 0], dtype)
    check("ListDiff", {"x": x, "y": np.asarray([2, 9, 0], dtype)}, {"out_idx": out_idx})
    check("ListDiff", {"x": x, "y": np.zeros(0, dtype)}, {"out_idx": out_idx})
    check("ListDiff", {"x": np.zeros(0, dtype), "y": x}, {"out_idx": out_idx})


def test_invert_permutation_and_ensure_shape():
    check("InvertPermutation", {"x": np.asarray([3, 0, 4, 1, 2], I32)})
    x = np.ones((2, 3), F32)
    assert_matches("EnsureShape", run_ours("EnsureShape", [x], {"shape": Shape.of([None, 3])}),
                   run_tf("EnsureShape", {"input": x}, {"shape": tf.TensorShape([None, 3])}))
    with pytest.raises(KernelError, match="not compatible"):
        run_ours("EnsureShape", [x], {"shape": Shape.of([3, None])})


# ---------------------------------------------------------------- bits and atan2
@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8, np.uint16, np.uint32])
def test_shifts_clamp_out_of_range_amounts(dtype):
    rng = np.random.default_rng(8)
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, 40, dtype=np.int64).astype(dtype)
    y = rng.integers(0, 8 * np.dtype(dtype).itemsize + 5, 40).astype(dtype)
    if info.min < 0:
        y[:5] = -np.arange(1, 6)
    for op in ("LeftShift", "RightShift"):
        check(op, {"x": x, "y": y})
    for op in ("BitwiseAnd", "BitwiseOr", "BitwiseXor"):
        check(op, {"x": x, "y": y})
    check("Invert", {"x": x})


@pytest.mark.parametrize("dtype", [F32, np.float64])
def test_atan2_in_every_quadrant(dtype):
    rng = np.random.default_rng(9)
    y, x = rand(rng, (50,), dtype, -3, 3), rand(rng, (50,), dtype, -3, 3)
    x[:10], y[:10] = [0, 0, 0, 1, -1, -0.0, np.inf, -np.inf, -np.inf, 2], [1, -1, 0, 0, 0, 0, np.inf, np.inf, -np.inf, np.nan]
    check("Atan2", {"y": y, "x": x})


# ---------------------------------------------------------------- counting and densifying
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("dtype", [F32, I32])
def test_bincount_drops_values_past_the_last_bin(weighted, dtype):
    rng = np.random.default_rng(10)
    arr = rng.integers(0, 9, 20).astype(I32)
    weights = rand(rng, (20,), dtype, -3, 4) if weighted else np.zeros(0, dtype)
    check("Bincount", {"arr": arr, "size": np.int32(6), "weights": weights})


@pytest.mark.parametrize("binary", [False, True])
@pytest.mark.parametrize("shape", [(15,), (3, 7)])
@pytest.mark.parametrize("weighted", [False, True])
def test_dense_bincount(binary, shape, weighted):
    rng = np.random.default_rng(11)
    values = rng.integers(0, 9, shape).astype(I64)
    weights = rand(rng, shape) if weighted else np.zeros(0, F32)
    check("DenseBincount", {"input": values, "size": np.int64(6), "weights": weights}, {"binary_output": binary})


@pytest.mark.parametrize("indices, values", [([[0, 1], [1, 2], [2, 0]], [5.0, 6.0, -1.0]), ([[1, 1]], 3.0)])
def test_sparse_to_dense(indices, values):
    check("SparseToDense", {"sparse_indices": np.asarray(indices, I64), "output_shape": np.asarray([3, 4], I64),
                            "sparse_values": np.asarray(values, F32), "default_value": np.float32(-2)})
    check("SparseToDense", {"sparse_indices": np.asarray([0, 2, 4], I32), "output_shape": np.asarray([6], I32),
                            "sparse_values": np.asarray([7, 8, 9], I32), "default_value": np.int32(1)})


def test_sparse_to_dense_refuses_unsorted_indices_unless_told_not_to_validate():
    inputs = [np.asarray([[2], [0]], I64), np.asarray([3], I64), np.asarray([1, 2], F32), np.float32(0)]
    with pytest.raises(KernelError, match="out of order"):
        run_ours("SparseToDense", inputs, {})
    assert run_ours("SparseToDense", inputs, {"validate_indices": False})[0].tolist() == [2, 0, 1]


# ---------------------------------------------------------------- matrices and losses
@pytest.mark.parametrize("lower, upper", [(0, -1), (-1, 0), (1, 2), (0, 0), (-1, -1)])
def test_matrix_band_part(lower, upper):
    x = rand(np.random.default_rng(12), (2, 4, 5))
    check("MatrixBandPart", {"input": x, "num_lower": np.int64(lower), "num_upper": np.int64(upper)})


ALIGNS = ["LEFT_RIGHT", "RIGHT_LEFT", "LEFT_LEFT", "RIGHT_RIGHT"]
K_RANGES = [0, 2, -1, [-2, 1], [1, 3], [-3, -1]]


@pytest.mark.parametrize("k", K_RANGES)
@pytest.mark.parametrize("align", ALIGNS)
def test_matrix_diag_part_and_set_diag_v3(k, align):
    rng = np.random.default_rng(13)
    x = rand(rng, (2, 4, 5))
    k_arr = np.asarray(k, I32)
    part = check("MatrixDiagPartV3", {"input": x, "k": k_arr, "padding_value": np.float32(9)}, {"align": align})[0]
    check("MatrixSetDiagV3", {"input": x, "diagonal": rand(rng, part.shape), "k": k_arr}, {"align": align})
    check("MatrixDiagV3", {"diagonal": part, "k": k_arr, "num_rows": np.int32(-1), "num_cols": np.int32(-1),
                           "padding_value": np.float32(-1)}, {"align": align})
    rows = 4 + max(0, -int(np.min(k)))
    check("MatrixDiagV3", {"diagonal": part, "k": k_arr, "num_rows": np.int32(rows), "num_cols": np.int32(-1),
                           "padding_value": np.float32(0)}, {"align": align})


def test_matrix_diag_v1_and_v2():
    rng = np.random.default_rng(14)
    x, d = rand(rng, (3, 4, 4), I32, -9, 9), rand(rng, (3, 4), I32, -9, 9)
    check("MatrixDiag", {"diagonal": d})
    check("MatrixDiagPart", {"input": x})
    check("MatrixSetDiag", {"input": x, "diagonal": d})
    k = np.asarray([-1, 1], I32)
    part = check("MatrixDiagPartV2", {"input": x, "k": k, "padding_value": np.int32(0)})[0]
    check("MatrixSetDiagV2", {"input": x, "diagonal": part, "k": k})
    check("MatrixDiagV2", {"diagonal": part, "k": k, "num_rows": np.int32(-1), "num_cols": np.int32(6),
                           "padding_value": np.int32(5)})


@pytest.mark.parametrize("dtype", [F32, np.float64])
def test_matrix_determinant(dtype):
    check("MatrixDeterminant", {"input": rand(np.random.default_rng(15), (3, 4, 4), dtype)})


def test_softmax_cross_entropies():
    rng = np.random.default_rng(16)
    logits = rand(rng, (5, 7), F32, -6, 6)
    labels = rng.dirichlet(np.ones(7), 5).astype(F32)
    check("SoftmaxCrossEntropyWithLogits", {"features": logits, "labels": labels})
    check("SoftmaxCrossEntropyWithLogits", {"features": logits, "labels": labels[:1]})
    for index_type in (I32, I64):
        check("SparseSoftmaxCrossEntropyWithLogits",
              {"features": logits, "labels": rng.integers(0, 7, 5).astype(index_type)})


@pytest.mark.parametrize("length", [8, 5, 12])
def test_rfft_crops_the_inner_axis_and_never_pads(length):
    x = rand(np.random.default_rng(17), (3, 8))
    check_or_both_fail("RFFT", {"input": x, "fft_length": np.asarray([length], I32)}, {})


def spectrum(rng: np.random.Generator, shape: tuple[int, ...], dtype=np.complex64) -> np.ndarray:
    return (rand(rng, shape, np.float64) + 1j * rand(rng, shape, np.float64)).astype(dtype)


@pytest.mark.parametrize("length", [16, 17, 10, 20])
def test_irfft_reads_the_first_bins_and_needs_enough_of_them(length):
    """9 bins: enough for lengths up to 17 (extra bins are ignored), too few for 20."""
    x = spectrum(np.random.default_rng(18), (2, 3, 9))
    x[..., 0] += 0.75j  # the DC bin's imaginary part, which the c2r transform ignores
    check_or_both_fail("IRFFT", {"input": x, "fft_length": np.asarray([length], I32)}, {})


@pytest.mark.parametrize("op, lengths", [("RFFT2D", [6, 8]), ("RFFT2D", [4, 6]), ("RFFT2D", [8, 8]),
                                         ("RFFT3D", [2, 6, 8]), ("RFFT3D", [3, 6, 8])])
def test_multi_axis_rffts_crop_and_never_pad(op, lengths):
    x = rand(np.random.default_rng(21), (2, 6, 8))
    check_or_both_fail(op, {"input": x, "fft_length": np.asarray(lengths, I32)}, {})


@pytest.mark.parametrize("op, lengths", [("IRFFT2D", [6, 8]), ("IRFFT2D", [4, 7]), ("IRFFT2D", [6, 10]),
                                         ("IRFFT3D", [2, 6, 8]), ("IRFFT3D", [2, 5, 9]), ("IRFFT3D", [3, 6, 8])])
def test_multi_axis_irffts_read_the_leading_entries(op, lengths):
    x = spectrum(np.random.default_rng(22), (2, 6, 5))
    check_or_both_fail(op, {"input": x, "fft_length": np.asarray(lengths, I32)}, {})


@pytest.mark.parametrize("op", ["FFT2D", "IFFT2D", "FFT3D", "IFFT3D"])
def test_multi_axis_complex_ffts(op):
    check(op, {"input": spectrum(np.random.default_rng(23), (2, 3, 4, 6))})


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_fft_ifft_and_the_parts_of_complex_values(dtype):
    rng = np.random.default_rng(19)
    x = spectrum(rng, (2, 3, 12), dtype)
    for op in ("FFT", "IFFT"):
        check(op, {"input": x})
    part = np.float32 if dtype == np.complex64 else np.float64
    for op in ("Real", "Imag"):
        check(op, {"input": x}, {"Tout": part}, {"Tout": DType.from_numpy(np.dtype(part))})
    check("ComplexAbs", {"x": x}, {"Tout": part}, {"Tout": DType.from_numpy(np.dtype(part))})
    check("Angle", {"input": x}, {"Tout": part}, {"Tout": DType.from_numpy(np.dtype(part))})
    re, im = rand(rng, (3, 1), part), rand(rng, (4,), part)
    check("Complex", {"real": re, "imag": im}, {"Tout": dtype}, {"Tout": DType.from_numpy(np.dtype(dtype))})


# ---------------------------------------------------------------- bitcast and bucketize
@pytest.mark.parametrize("source, target, shape", [(F32, I32, (2, 3)), (F32, np.uint8, (4,)), (np.int16, I32, (3, 2)),
                                                   (I64, np.float64, (5,))])
def test_bitcast_keeps_the_bits(source, target, shape):
    rng = np.random.default_rng(20)
    x = rand(rng, shape, source, -100, 100)
    if source == F32:
        x.reshape(-1)[:3] = [-0.0, np.inf, -np.inf]
    check("Bitcast", {"input": x}, {"type": tf.as_dtype(target)}, {"type": DType.from_numpy(np.dtype(target))})


def test_bitcast_to_a_wider_type_needs_the_width_ratio_innermost():
    with pytest.raises(KernelError, match="innermost dimension must be 2"):
        run_ours("Bitcast", [np.zeros((3, 3), np.int16)], {"type": DType.INT32})


def test_bucketize_counts_boundaries_at_or_below_each_value():
    rng = np.random.default_rng(21)
    x = rand(rng, (4, 6), F32, -2, 2)
    x[0, :4] = [-0.5, 0.0, 0.5, 1e9]
    check("Bucketize", {"input": x}, {"boundaries": [-0.5, 0.0, 0.5]})
    check("Bucketize", {"input": rng.integers(-5, 5, 9).astype(I32)}, {"boundaries": [-1.0, 2.0]})


@pytest.mark.parametrize("op", ["LowerBound", "UpperBound"])
@pytest.mark.parametrize("dtype", [F32, I32])
def test_sorted_search_finds_tf_positions_with_ties(op, dtype):
    rng = np.random.default_rng(22)
    rows = np.sort(rand(rng, (3, 7), dtype, -4, 4), axis=1)
    values = rand(rng, (3, 5), dtype, -5, 5)
    values[:, 0] = rows[:, 2]  # a value equal to an element: the two ops part there
    for out_type in (DType.INT32, DType.INT64):
        check(op, {"sorted_inputs": rows, "values": values}, {"out_type": out_type})


@pytest.mark.parametrize("op", ["LowerBound", "UpperBound"])
def test_sorted_search_of_nan_values(op):
    rows = np.asarray([[-1.0, 0.0, 2.0]], F32)
    check(op, {"sorted_inputs": rows, "values": np.asarray([[np.nan, np.inf, -np.inf]], F32)}, {"out_type": DType.INT32})


def test_in_top_k_counts_ties_in_and_rejects_non_finite_and_out_of_range_targets():
    predictions = np.asarray([[0.1, 0.5, 0.5, 0.2], [0.3, np.nan, 0.1, 0.9], [0.4, 0.3, np.inf, 0.0],
                              [0.2, 0.2, 0.2, 0.2], [0.9, 0.8, 0.7, 0.6]], F32)
    for index_type in (I32, I64):
        for targets in ([2, 1, 2, 3, 3], [1, 0, 0, 0, 0], [3, 3, 1, 2, 1]):
            for k in (0, 1, 2, 4):
                check("InTopKV2", {"predictions": predictions, "targets": np.asarray(targets, index_type),
                                   "k": np.asarray(k, index_type)})
    check("InTopK", {"predictions": predictions, "targets": np.asarray([1, 3, 2, 0, 1], I32)}, {"k": 2})


def test_in_top_k_of_an_out_of_range_target_is_false():
    """TF's CPU kernel says false for it rather than failing; checked against TF as well."""
    predictions = np.asarray([[0.1, 0.5], [0.3, 0.2]], F32)
    ours = check("InTopKV2", {"predictions": predictions, "targets": np.asarray([2, -1], I32),
                              "k": np.asarray(2, I32)})
    assert not ours[0].any()


# ---------------------------------------------------------------- sequence decoding
@pytest.mark.parametrize("merge_repeated", [False, True])
@pytest.mark.parametrize("blank_index", [-1, 0, 2])
def test_ctc_greedy_decoder(merge_repeated, blank_index):
    """Repeats, blanks between repeats, a sequence cut short and an empty one."""
    rng = np.random.default_rng(9)
    logits = rand(rng, (7, 4, 5))
    best = np.asarray([[1, 1, 3, 4], [1, 4, 3, 4], [0, 2, 3, 4], [1, 2, 1, 4], [3, 2, 2, 1], [3, 0, 2, 1],
                       [2, 0, 4, 1]])
    logits[np.arange(7)[:, None], np.arange(4)[None, :], best] += 5.0  # a clear winner each step
    lengths = np.asarray([7, 5, 0, 6], I32)
    check("CTCGreedyDecoder", {"inputs": logits, "sequence_length": lengths},
          {"merge_repeated": merge_repeated, "blank_index": blank_index})
