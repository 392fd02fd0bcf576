"""Shape rules on partly known shapes: a dynamic batch must not make everything after it rank-unknown
(the ONNX export needs ranks to place layouts and lower RNN tails)."""
from __future__ import annotations

import numpy as np
import pytest

from compiler.analysis import analyze
from compiler.ir.dtypes import DType
from compiler.ir.shapes import Shape
from tests.backends.test_onnx_export import Builder


def _shape_of(b: Builder, value) -> tuple:
    return analyze(list(b.graph), {}).shape(value).dims


@pytest.mark.parametrize("begin, end, strides, masks, expected", [
    ([0, -1, 0], [0, 0, 0], [1, 1, 1], {"begin_mask": 5, "end_mask": 5, "shrink_axis_mask": 2}, (None, 4)),  # x[:, -1]
    ([0, 1, 0], [0, 3, 2], [1, 1, 1], {"begin_mask": 1, "end_mask": 1}, (None, 2, 2)),                    # x[:, 1:3, :2]
    ([0, 0, 0], [0, 0, 0], [1, 1, 1], {"begin_mask": 7, "end_mask": 7, "new_axis_mask": 2}, (None, 1, 5, 4)),
    ([0, 0, 0], [1, 0, 0], [1, 1, 1], {"end_mask": 6}, (None, 5, 4)),        # x[:1]: 0 rows when x has none (as TF)
    ([2, 0, 0], [1, 0, 0], [1, 1, 1], {"end_mask": 6}, (0, 5, 4)),           # x[2:1]: empty whatever the batch
    ([-1, 0, 0], [0, 0, 0], [1, 1, 1], {"end_mask": 6, "shrink_axis_mask": 1}, (5, 4)),  # x[-1]
])
def test_strided_slice_of_a_dynamic_batch(begin, end, strides, masks, expected) -> None:
    b = Builder()
    x = b.input("x", [None, 5, 4])
    consts = [b.const(np.asarray(v, np.int32)) for v in (begin, end, strides)]
    out = b("StridedSlice", x, *consts, Index=DType.INT32, ellipsis_mask=0,
            **{m: masks.get(m, 0) for m in ("begin_mask", "end_mask", "new_axis_mask", "shrink_axis_mask")})
    assert _shape_of(b, out) == expected


def test_a_slice_whose_size_depends_on_the_unknown_dim_stays_unknown() -> None:
    b = Builder()
    x = b.input("x", [None, 5])
    consts = [b.const(np.asarray(v, np.int32)) for v in ([1, 0], [0, 5], [1, 1])]
    out = b("StridedSlice", x, *consts, Index=DType.INT32, begin_mask=0, end_mask=1, ellipsis_mask=0,
            new_axis_mask=0, shrink_axis_mask=0)
    assert _shape_of(b, out) == (None, 5)


def test_fill_with_a_shape_read_at_run_time() -> None:
    """Shape's known elements carry over (compiler.analysis.partial); a length-only shape gives the rank."""
    b = Builder()
    x = b.input("x", [None, 3])
    shape = b("Shape", x, out_type=DType.INT32)
    out = b("Fill", shape, b.const(np.float32(0)), index_type=DType.INT32)
    assert _shape_of(b, out) == (None, 3)
    b = Builder()
    dims = b.input("dims", [2], dtype=DType.INT32)
    out = b("Fill", dims, b.const(np.float32(0)), index_type=DType.INT32)
    assert _shape_of(b, out) == (None, None)


def test_reverse_keeps_the_shape() -> None:
    b = Builder()
    x = b.input("x", [None, 7, 2])
    out = b("ReverseV2", x, b.const(np.asarray([1], np.int32)), Tidx=DType.INT32)
    assert analyze(list(b.graph), {}).shape(out) == Shape((None, 7, 2))


def test_a_class_token_tiled_over_a_dynamic_batch_keeps_the_rank() -> None:
    """ViT's `concat([tile(cls, [batch, 1, 1]), patches], 1)` with the batch read by Shape: the
    Tile keeps the sizes its multiples know, and the join takes its rank from either part."""
    b = Builder()
    patches = b.input("x", [None, 16, 32])
    batch = b("StridedSlice", b("Shape", patches, out_type=DType.INT32),
              *(b.const(np.asarray(v, np.int32)) for v in ([0], [1], [1])), Index=DType.INT32, begin_mask=0,
              end_mask=0, ellipsis_mask=0, new_axis_mask=0, shrink_axis_mask=1)
    one = b.const(np.int32(1))
    tiled = b("Tile", b.const(np.zeros((1, 1, 32), np.float32)), b("Pack", batch, one, one, N=3, axis=0),
              Tmultiples=DType.INT32)
    joined = b("ConcatV2", tiled, patches, b.const(np.int32(1)), N=2, Tidx=DType.INT32)
    assert _shape_of(b, tiled) == (None, 1, 32)
    assert _shape_of(b, joined) == (None, 17, 32)
    b = Builder()
    unknown = b("ConcatV2", b.input("a", None), b.input("c", [None, 3]), b.const(np.int32(1)), N=2,
                Tidx=DType.INT32)
    assert _shape_of(b, unknown) == (None, None)  # the joined axis needs every part's size
