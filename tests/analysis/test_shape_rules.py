"""Shape rules of the ops the ONNX backend gained: each result shape against what the runtime
kernel (checked against TF elsewhere) actually produces, so a rule cannot drift from the op."""
from __future__ import annotations

import numpy as np
import pytest

from compiler.analysis import analyze
from compiler.ir.dtypes import DType
from compiler.runtime.interpreter import Interpreter
from tests.backends.test_onnx_export import Builder

RNG = np.random.default_rng(0)


def _ints(b: Builder, values, dtype=np.int32):
    return b.const(np.asarray(values, dtype))


def _cases():
    """(name, build(b) -> result values, feeds)."""
    def top_k(b):
        return b("TopKV2", b.input("x", [2, 3, 7]), _ints(b, 4), sorted=True)

    def einsum(b):
        q, k = b.input("q", [2, 5, 4]), b.input("k", [2, 6, 4])
        return [b("Einsum", q, k, equation="bqd,bkd->bqk", N=2),
                b("Einsum", q, b.const(RNG.standard_normal((4, 3)).astype(np.float32)), equation="...d,de->...e",
                  N=2)]

    def space_batch(b):
        x = b.input("x", [1, 7, 9, 2])
        s2b = b("SpaceToBatchND", x, _ints(b, [2, 3]), _ints(b, [[1, 0], [0, 3]]))
        return [s2b, b("BatchToSpaceND", s2b, _ints(b, [2, 3]), _ints(b, [[1, 0], [0, 3]]))]

    def gather_nd(b):
        return b("GatherNd", b.input("x", [4, 5, 6]), _ints(b, [[[0, 1]], [[3, 4]]]), Tindices=DType.INT32)

    def unsorted_segment(b):
        return b("UnsortedSegmentSum", b.input("x", [6, 3]), _ints(b, [0, 2, 2, 1, 0, 3]), _ints(b, 5),
                 Tindices=DType.INT32, Tnumsegments=DType.INT32)

    def transpose_conv(b):
        return b("Conv2DBackpropInput", _ints(b, [1, 8, 8, 3]), b.const(np.ones((3, 3, 3, 2), np.float32)),
                 b.input("x", [1, 4, 4, 2]), strides=[1, 2, 2, 1], padding="SAME")

    def nms(b):
        boxes = b.const(np.asarray([[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, 2, 1, 3]], np.float32))
        return b("NonMaxSuppressionV4", boxes, b.input("s", [3]), _ints(b, 5), b.const(np.float32(0.5)),
                 b.const(np.float32(0.0)), pad_to_max_output_size=True)

    def bits_and_counts(b):
        x = b.input("x", [2, 3])
        ids = b.const(np.asarray([[0, 2, 2], [1, 4, 0]], np.int32))
        return [b("Bitcast", x, type=DType.UINT8), b("Bitcast", b("Bitcast", x, type=DType.INT16), type=DType.INT32),
                b("Bucketize", x, boundaries=[-0.5, 0.5]),
                b("DenseBincount", ids, _ints(b, 6), b.const(np.zeros(0, np.float32)), Tidx=DType.INT32),
                b("Bincount", b.const(np.asarray([1, 3, 3], np.int32)), _ints(b, 5), b.const(np.zeros(0, np.float32)))]

    def sparse_to_dense(b):
        return b("SparseToDense", _ints(b, [[0, 1], [2, 0]]), _ints(b, [3, 4]), b.input("v", [2]),
                 b.const(np.float32(-1)), Tindices=DType.INT32)

    def diagonals(b):
        x, m = b.input("x", [2, 4]), b.input("m", [2, 5, 3])
        zero = b.const(np.float32(0))
        made = [b("MatrixDiag", x), b("MatrixDiagV3", x, _ints(b, 1), _ints(b, -1), _ints(b, -1), zero),
                b("MatrixDiagV3", x, _ints(b, -2), _ints(b, 7), _ints(b, -1), zero),
                b("MatrixDiagV2", b("ExpandDims", x, _ints(b, 1)), _ints(b, [0, 0]), _ints(b, -1), _ints(b, 6), zero)]
        return made + [b("MatrixDiagPart", b.input("q", [2, 3, 3])),
                       b("MatrixDiagPartV3", m, _ints(b, [-1, 1]), zero), b("MatrixDiagPartV3", m, _ints(b, 2), zero)]

    def combined_nms(b):
        boxes = b.const(np.asarray([[[[0, 0, 1, 1]], [[0, 0.1, 1, 1.1]], [[0, 2, 1, 3]]]], np.float32))
        return list(b("CombinedNonMaxSuppression", boxes, b.input("s", [1, 3, 2]), _ints(b, 2), _ints(b, 5),
                      b.const(np.float32(0.5)), b.const(np.float32(0.0)), pad_per_class=True))

    def ranges_and_draws(b):
        return [b("Range", _ints(b, 3), _ints(b, 20), _ints(b, 4), Tidx=DType.INT32),
                b("Range", b.const(np.float32(1)), b.const(np.float32(-1)), b.const(np.float32(-0.3)),
                  Tidx=DType.FLOAT),
                b("RandomUniform", _ints(b, [2, 3]), dtype=DType.FLOAT),
                b("Multinomial", b.input("logits", [2, 4]), _ints(b, 5)),
                b("QuantizeAndDequantizeV2", b.input("x", [3, 2]), b.const(np.float32(-1)), b.const(np.float32(1)))]

    diag_feeds = {"x": RNG.standard_normal((2, 4)).astype(np.float32), "q": RNG.standard_normal((2, 3, 3)).astype(
        np.float32), "m": RNG.standard_normal((2, 5, 3)).astype(np.float32)}
    return [("diagonals", diagonals, diag_feeds),
            ("combined_nms", combined_nms, {"s": np.asarray([[[0.9, 0.1], [0.8, 0.3], [0.7, 0.6]]], np.float32)}),
            ("ranges_and_draws", ranges_and_draws, {"logits": RNG.standard_normal((2, 4)).astype(np.float32),
                                                    "x": RNG.standard_normal((3, 2)).astype(np.float32)}),
            ("sparse_to_dense", sparse_to_dense, {"v": np.asarray([5, 6], np.float32)}),
            ("bits_and_counts", bits_and_counts, {"x": RNG.standard_normal((2, 3)).astype(np.float32)}),
            ("top_k", top_k, {"x": RNG.standard_normal((2, 3, 7)).astype(np.float32)}),
            ("einsum", einsum, {"q": RNG.standard_normal((2, 5, 4)).astype(np.float32),
                                "k": RNG.standard_normal((2, 6, 4)).astype(np.float32)}),
            ("space_batch", space_batch, {"x": RNG.standard_normal((1, 7, 9, 2)).astype(np.float32)}),
            ("gather_nd", gather_nd, {"x": RNG.standard_normal((4, 5, 6)).astype(np.float32)}),
            ("unsorted_segment", unsorted_segment, {"x": RNG.standard_normal((6, 3)).astype(np.float32)}),
            ("transpose_conv", transpose_conv, {"x": RNG.standard_normal((1, 4, 4, 2)).astype(np.float32)}),
            ("nms", nms, {"s": np.asarray([0.9, 0.8, 0.7], np.float32)})]


@pytest.mark.parametrize("name, build, feeds", _cases(), ids=[c[0] for c in _cases()])
def test_rule_agrees_with_the_kernel(name, build, feeds) -> None:
    b = Builder()
    built = build(b)
    values = list(built) if isinstance(built, (list, tuple)) else [built]
    info = analyze(list(b.graph), {})
    got = Interpreter(b.graph).run(feeds, [v.name for v in values])
    for value in values:
        dims = info.shape(value).dims
        assert dims is not None, value.name
        assert len(dims) == got[value.name].ndim, value.name
        assert all(d is None or d == n for d, n in zip(dims, got[value.name].shape)), (value.name, dims)
        assert None not in dims, (value.name, dims)  # every case here has static sizes


def test_paddings_known_only_at_run_time_keep_the_rank() -> None:
    """A detection head's `pad(kept, [[0, k - size]])[None]`: the slice after the pad needs its rank."""
    b = Builder()
    padded = b("Pad", b.input("x", [3, 4]), b.input("p", [2, 2], DType.INT32), Tpaddings=DType.INT32)
    assert analyze(list(b.graph), {}).shape(padded).dims == (None, None)


def test_scatter_nd_takes_what_is_known_of_its_shape_operand() -> None:
    """Longformer scatters its global-attention rows into a shape packed at run time: the result
    keeps the shape vector's length as its rank (a Transpose after it needs the rank)."""
    b = Builder()
    count = b.input("n", [], DType.INT32)
    shape = b("Pack", count, b.const(np.int32(4)), b.const(np.int32(8)), N=3)
    out = b("ScatterNd", b.input("i", [None, 1], DType.INT32), b.input("u", [None, 4, 8]), shape,
            Tindices=DType.INT32)
    assert analyze(list(b.graph), {}).shape(out).dims == (None, None, None)


@pytest.mark.parametrize("op_type", ["Fill", "SparseToDense"])
@pytest.mark.parametrize("length, rank", [(3, 3), (254, 254), (255, None), (1 << 40, None)])
def test_a_shape_vector_gives_the_rank_only_when_tf_allows_it(op_type, length, rank) -> None:
    """A shape operand known only by its length gives that many unknown dims, up to TensorShape's
    254: past it TF refuses the op, and a declared length of 2^40 must not become a 2^40-tuple."""
    b = Builder()
    shape = b.input("shape", [length], DType.INT32)
    if op_type == "Fill":
        out = b("Fill", shape, b.const(np.float32(0)), index_type=DType.INT32)
    else:
        out = b("SparseToDense", b.input("i", [2, 3], DType.INT32), shape, b.const(np.float32([1, 2])),
                b.const(np.float32(0)), Tindices=DType.INT32, validate_indices=True)
    dims = analyze(list(b.graph), {}).shape(out).dims
    assert (None if dims is None else len(dims)) == rank
