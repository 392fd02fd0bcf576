"""Integer vectors with some elements known (compiler/analysis/partial.py): a dynamic batch read
with Shape leaves the other sizes known, so reshape targets, transposed convs' output sizes and
every rank after them stay known."""
from __future__ import annotations

import numpy as np

from compiler.analysis import analyze
from compiler.ir.dtypes import DType
from tests.backends.test_onnx_export import Builder


def _i32(b: Builder, values):
    return b.const(np.asarray(values, np.int32))


def _slice(b: Builder, vector, begin: int, end: int, shrink: bool = False):
    return b("StridedSlice", vector, _i32(b, [begin]), _i32(b, [end]), _i32(b, [1]), Index=DType.INT32,
             begin_mask=0, end_mask=0 if end else 1, ellipsis_mask=0, new_axis_mask=0,
             shrink_axis_mask=1 if shrink else 0)


def test_known_elements_of_a_shape_become_a_constant() -> None:
    b = Builder()
    shape = b("Shape", b.input("x", [None, 5, 4]), out_type=DType.INT32)
    tail = _slice(b, shape, 1, 0)
    info = analyze(list(b.graph), {})
    assert info.known_ints(shape) == [None, 5, 4] and not info.is_constant(shape)
    assert info.constant(tail).tolist() == [5, 4]


def test_a_reshape_target_packed_around_the_batch() -> None:
    """Keras' Tensordot and repeat: Pack(Shape(x)[0], ...), Prod of the free sizes, a count times a size."""
    b = Builder()
    x = b.input("x", [None, 11, 4])
    shape = b("Shape", x, out_type=DType.INT32)
    batch = _slice(b, shape, 0, 1, shrink=True)
    doubled = b("Mul", _slice(b, shape, 1, 2, shrink=True), _i32(b, 2))
    target = b("Pack", batch, doubled, _i32(b, 2), _i32(b, 2), N=4, axis=0)
    reshaped = b("Reshape", x, target, Tshape=DType.INT32)
    rows = b("Prod", _slice(b, shape, 0, 2), _i32(b, [0]), keep_dims=False, Tidx=DType.INT32)
    flat = b("Reshape", x, b("Pack", rows, _i32(b, 4), N=2, axis=0), Tshape=DType.INT32)
    info = analyze(list(b.graph), {})
    assert info.known_ints(target) == [None, 22, 2, 2]
    assert info.shape(reshaped).dims == (None, 22, 2, 2)
    assert info.shape(flat).dims == (None, 4)


def test_a_transposed_conv_sized_at_run_time() -> None:
    b = Builder()
    x = b.input("x", [None, 3, 3, 2])
    batch = _slice(b, b("Shape", x, out_type=DType.INT32), 0, 1, shrink=True)
    sizes = b("Pack", batch, _i32(b, 6), _i32(b, 6), _i32(b, 4), N=4, axis=0)
    filters = b.const(np.zeros((2, 2, 4, 2), np.float32))
    out = b("Conv2DBackpropInput", sizes, filters, x, strides=[1, 2, 2, 1], padding="SAME")
    assert analyze(list(b.graph), {}).shape(out).dims == (None, 6, 6, 4)


def test_nothing_is_claimed_for_data_or_unknown_vectors() -> None:
    b = Builder()
    dims = b.input("dims", [3], dtype=DType.INT32)
    doubled = b("Mul", dims, _i32(b, 2))
    scaled = b("Mul", b.input("f", [None, 2]), b.const(np.float32(2)))
    info = analyze(list(b.graph), {})
    assert info.known_ints(doubled) is None and info.known_ints(scaled) is None and not info.partials
