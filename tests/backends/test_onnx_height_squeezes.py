"""The height-Squeeze sinking export rewrite (compiler/backends/onnx/height_squeezes.py), on IR built here.

Each graph is a few 1-D layers (ExpandDims -> Conv2D one pixel high -> Squeeze)
joined by the ops a Squeeze moves past.  The export must match the
interpreter, keep every conv 2-D and put no Unsqueeze or Squeeze between two
convs; the rewrite must say how many Squeezes it started from.
"""
from __future__ import annotations

import numpy as np
import onnx

from compiler.backends.onnx import export_with_report
from compiler.backends.onnx.export_rewrites import rewrite_for_export
from compiler.runtime.interpreter import Interpreter
from compiler.runtime.onnx_runner import run_onnx
from tests.backends.test_onnx_added_ops import ints
from tests.backends.test_onnx_export import Builder

_RNG = np.random.default_rng(11)


def _layer(b: Builder, x, channels_in: int, channels_out: int, name: str):
    """A Keras Conv1D as TF spells it: the 3-D result of a 2-D conv over an added height axis."""
    tall = b("ExpandDims", x, ints(b, [-3]), name=f"{name}/expand")
    weights = b.const(_RNG.standard_normal((1, 3, channels_in, channels_out)).astype(np.float32))
    conv = b("Conv2D", tall, weights, strides=[1, 1, 1, 1], padding="SAME", name=f"{name}/conv")
    return b("Squeeze", conv, squeeze_dims=[-3], name=f"{name}/squeeze")


def check_against_interpreter(b: Builder, feeds: dict, outputs: list[str]) -> dict:
    """Export, check against the interpreter and that every Conv is 2-D; returns the ONNX op counts."""
    result = export_with_report(b.graph, list(feeds), outputs)
    onnx.checker.check_model(result.model, full_check=True)
    want = Interpreter(b.graph).run(feeds, outputs)
    got = run_onnx(result.model, feeds, outputs)
    for name in outputs:
        np.testing.assert_allclose(got[name], want[name], rtol=0, atol=1e-5)
    for node in result.model.graph.node:
        if node.op_type == "Conv":
            assert [len(a.ints) for a in node.attribute if a.name == "kernel_shape"] == [2]
    return result.report.op_counts


def _feeds(shape: tuple[int, ...]) -> dict:
    return {"x": _RNG.standard_normal(shape).astype(np.float32)}


def test_squeezes_move_past_a_bias_relu_transpose_and_pad() -> None:
    """Between the layers: BiasAdd, Relu, a transpose to N·C·W, a reflect pad of the width, and back."""
    b = Builder()
    x = b.input("x", [1, 9, 3])
    h = b("Relu", b("BiasAdd", _layer(b, x, 3, 4, "a"), b.const(_RNG.standard_normal(4).astype(np.float32))))
    ncw = b("Transpose", h, ints(b, [0, 2, 1]))
    padded = b("MirrorPad", ncw, ints(b, [[0, 0], [0, 0], [2, 2]]), mode="REFLECT")
    out = _layer(b, b("Transpose", padded, ints(b, [0, 2, 1])), 4, 2, "b")
    counts = check_against_interpreter(b, _feeds((1, 9, 3)), [out.name])
    assert counts["Unsqueeze"] == 1 and counts["Squeeze"] == 1, counts
    assert counts["Transpose"] == 2 and "Add" not in counts, counts  # in and out; the bias rides on the Conv


def test_two_chains_meet_in_a_sum_and_a_channel_concat() -> None:
    b = Builder()
    x = b.input("x", [1, 8, 2])
    left, right = _layer(b, x, 2, 3, "left"), _layer(b, x, 2, 3, "right")
    joined = b("ConcatV2", b("AddV2", left, right), b("Tanh", right), ints(b, -1), N=2)
    out = _layer(b, joined, 6, 2, "out")
    counts = check_against_interpreter(b, _feeds((1, 8, 2)), [out.name])
    assert counts["Unsqueeze"] == 1 and counts["Squeeze"] == 1, counts  # both chains start from one


def test_a_mean_over_the_width_reads_the_4d_tensor() -> None:
    """GlobalAveragePooling1D: the Mean over the width also takes the height, so no Squeeze is left
    but the one the 2-D spatial mean always has."""
    b = Builder()
    x = b.input("x", [1, 8, 2])
    pooled = b("Mean", b("Relu", _layer(b, x, 2, 5, "a")), ints(b, [1]), keep_dims=False)
    graph, counts = rewrite_for_export(b.graph, {"x", pooled.name})
    assert counts == {"height_squeezes": 1}
    assert [op.type for op in graph if op.type not in ("Const", "Placeholder")] == ["ExpandDims", "Conv2D", "Relu",
                                                                                   "Mean"]
    check_against_interpreter(b, _feeds((1, 8, 2)), [pooled.name])


def test_a_named_squeeze_stays_and_a_control_edge_follows_the_moved_op() -> None:
    """A Squeeze that is itself an output keeps its name and value; a NoOp that waited for the
    Relu waits for the Relu's 4-D replacement."""
    b = Builder()
    x = b.input("x", [1, 6, 2])
    first = _layer(b, x, 2, 3, "a")
    relu = b("Relu", first, name="relu")
    wait = b.graph.create_op("NoOp", "wait")
    wait.add_control_dep(relu.op)
    out = _layer(b, relu, 3, 2, "b")
    named = {"x", first.name, out.name, "wait"}
    graph, counts = rewrite_for_export(b.graph, named)
    assert counts == {"height_squeezes": 1}  # the last Squeeze, an output, has no reader to move
    assert graph.op(first.name).type == "Squeeze"
    assert [dep.name for dep in graph.op("wait").control_deps] == ["relu"]
    assert graph.op("relu").results[0].shape.rank in (None, 4)
    check_against_interpreter(b, _feeds((1, 6, 2)), [first.name, out.name])


def test_a_pad_before_the_first_layer_goes_into_the_conv() -> None:
    """Keras' causal Conv1D pads the 3-D input first: the Pad moves below the ExpandDims and the
    Conv takes its zeros as padding."""
    b = Builder()
    x = b.input("x", [1, 7, 3])
    padded = b("Pad", x, ints(b, [[0, 0], [2, 0], [0, 0]]))
    out = _layer(b, padded, 3, 4, "causal")
    counts = check_against_interpreter(b, _feeds((1, 7, 3)), [out.name])
    assert "Pad" not in counts and counts["Conv"] == 1, counts
