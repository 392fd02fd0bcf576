"""Size-1 axes in the ONNX export: spelled so that onnxruntime copies and reduces in runs.

A tensor with a unit axis (musicnn's `[N, T, F, 1]` spectrogram features) can
make onnxruntime 1.32 take its element-by-element paths: a Transpose that moves
the unit axis too ([2, 561, 187, 1] to [2, 1, 187, 561]: 459 us, against 48 us
as Squeeze, a one-axis Transpose and Unsqueeze), and a reduction whose
reduced axes are followed by a unit axis (ReduceMean over axis 2 of
[2, 753, 187, 1]: 476 us, against 19 us over axes 2 and 3).  These tests check
the spelling and the numbers against the interpreter.
"""
from __future__ import annotations

import numpy as np
import onnx
import pytest

from compiler.backends.onnx import export_with_report
from compiler.backends.onnx.layout import moves_one_axis
from compiler.runtime.interpreter import Interpreter
from compiler.runtime.onnx_runner import run_onnx
from tests.backends.test_onnx_added_ops import ints
from tests.backends.test_onnx_export import Builder

_RNG = np.random.default_rng(27)


def _exported(b: Builder, x_shape: tuple[int, ...], output: str) -> onnx.ModelProto:
    """The export of `b` (input "x"), checked against the interpreter."""
    result = export_with_report(b.graph, ["x"], [output])
    onnx.checker.check_model(result.model, full_check=True)
    feeds = {"x": _RNG.standard_normal(x_shape).astype(np.float32)}
    want = Interpreter(b.graph).run(feeds, [output])[output]
    np.testing.assert_allclose(run_onnx(result.model, feeds, [output])[output], want, rtol=1e-5, atol=1e-5)
    return result.model


def _full_width_conv(b: Builder, time: int, features: int):
    """musicnn's back end: a conv stored NCHW as [N, F, T, 1], transposed in TF to [N, T, F, 1] and
    read by a conv whose one input channel is that unit axis."""
    x = b.input("x", [None, time, 1, 3])
    first = b("Conv2D", x, b.const(_RNG.standard_normal((1, 1, 3, features)).astype(np.float32)),
              strides=[1, 1, 1, 1], padding="SAME")
    turned = b("Transpose", first, ints(b, [0, 1, 3, 2]))
    kernel = _RNG.standard_normal((3, features, 1, 4)).astype(np.float32)
    return b("Conv2D", turned, b.const(kernel), strides=[1, 1, 1, 1], padding="VALID", name="second")


@pytest.mark.parametrize("time, detour", [(64, True), (8, False)])
def test_a_transpose_moving_a_unit_axis_is_squeeze_transpose_unsqueeze(time: int, detour: bool) -> None:
    """[N, 64, T, 1] to the second conv's [N, 1, T, 64]: past 4,096 known elements the conversion
    squeezes the unit axis and moves one axis; a small tensor keeps one Transpose."""
    b = Builder()
    out = _full_width_conv(b, time, 64)
    model = _exported(b, (2, time, 1, 3), out.name)
    transposes = [list(onnx.helper.get_attribute_value(a)) for n in model.graph.node if n.op_type == "Transpose"
                  for a in n.attribute if a.name == "perm"]
    kinds = [n.op_type for n in model.graph.node]
    if detour:
        assert [0, 2, 1] in transposes and kinds.count("Squeeze") == 1 and kinds.count("Unsqueeze") == 1, kinds
    else:
        assert [0, 3, 2, 1] in transposes and "Squeeze" not in kinds, kinds
    assert all(moves_one_axis(perm) for perm in transposes) == detour


def test_moves_one_axis() -> None:
    assert moves_one_axis([0, 2, 3, 1]) and moves_one_axis([0, 3, 1, 2]) and moves_one_axis([0, 1, 2])
    assert not moves_one_axis([0, 3, 2, 1]) and not moves_one_axis([1, 0, 3, 2])


@pytest.mark.parametrize("keep, rows, axes, unsqueezed", [(True, 30, [2, 3], False), (False, 30, [2, 3], True),
                                                          (False, 3, [2], False)])
def test_a_reduction_takes_the_unit_axes_after_it(keep: bool, rows: int, axes: list[int], unsqueezed: bool) -> None:
    """Mean over axis 2 of [N, rows, 300, 1]: the trailing unit axis is reduced too (the same
    values); with kept dims also the same shape, without it an Unsqueeze puts it back, on an input
    of at least 4,096 known elements only (900 here with 3 rows)."""
    b = Builder()
    x = b.input("x", [None, rows, 300, 1])
    out = b("Mean", x, ints(b, [2]), keep_dims=keep, name="mean")
    model = _exported(b, (2, rows, 300, 1), out.name)
    node = next(n for n in model.graph.node if n.op_type == "ReduceMean")
    assert [list(a.ints) for a in node.attribute if a.name == "axes"] == [axes]
    assert ("Unsqueeze" in [n.op_type for n in model.graph.node]) == unsqueezed
