"""Element types onnxruntime has no kernel for (issues 10/11): a fuzz run found Relu of int64 exporting a node
onnxruntime cannot load.  tools/onnx_dtype_sweep.py builds every (op, type) the OpDefs of the elementwise,
activation, reduction, simple array, comparison-count and morphology lowerings allow as a one-op graph; here
it runs whole at opsets 13, 17 and 21 and must find no model onnxruntime refuses, fails or computes
differently from the NumPy runtime.  Then: the lowerings' node lists (float ones unchanged), the refusals (a
clear UnsupportedOpError naming op, node and type), and frozen TF graphs of integer, half and double ops
compared with TF's session (integers exactly) and, where tf2onnx's model runs, its node count."""
from __future__ import annotations

import re

import numpy as np
import onnx
import pytest

from compiler.backends.onnx import UnsupportedOpError, export_with_report
from compiler.frontends.graphdef import load_graph_bytes
from compiler.ir.dtypes import DType
from compiler.runtime.interpreter import Interpreter
from compiler.runtime.onnx_runner import run_onnx
from tests.backends.test_onnx_export import Builder
from tests.oracle import require_tf, run_tf
from tools.onnx_dtype_sweep import BUGS, sweep

I32 = DType.INT32


# -- the sweep ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("opset", [13, 17, 21])
def test_dtype_sweep_finds_no_model_onnxruntime_refuses_or_gets_wrong(opset):
    cells = sweep(opset=opset)
    bugs = [f"{c.op} {c.dtype.name.lower()}: {c.status} {c.detail}" for c in cells if c.status in BUGS]
    assert not bugs, "\n".join(bugs)
    status = {(c.op, c.dtype): c.status for c in cells}
    assert len(cells) > 1300 and sum(s == "ok" for s in status.values()) > 1250
    for case in [("Relu", DType.INT64), ("Relu", DType.UINT16), ("Maximum", DType.INT16), ("Sum", DType.UINT32),
                 ("ArgMax", DType.BOOL), ("Cumsum", DType.INT8), ("TopKV2", DType.UINT16), ("MatMul", DType.INT32),
                 ("Pad", DType.UINT16), ("Where", DType.DOUBLE), ("Unique", DType.UINT64), ("Tan", DType.DOUBLE),
                 ("IsInf", DType.HALF), ("Dilation2D", DType.INT16)]:
        assert status[case] == "ok", case


# -- node lists ------------------------------------------------------------------------------------------------
def _nodes(op_type, dtype, *shapes, opset=17, **attrs):
    """The exported node types of one op on inputs of `shapes`, checked against the NumPy runtime."""
    b = Builder()
    rng = np.random.default_rng(0)
    feeds = {f"x{i}": rng.integers(-5, 6, shape).astype(dtype.to_numpy()) for i, shape in enumerate(shapes)}
    out = b(op_type, *[b.input(name, list(a.shape), dtype) for name, a in feeds.items()], **attrs)
    result = export_with_report(b.graph, list(feeds), [out.name], opset=opset)
    want, got = Interpreter(b.graph).run(dict(feeds), [out.name]), run_onnx(result.model, feeds, [out.name])
    np.testing.assert_array_equal(got[out.name], want[out.name])
    return [node.op_type for node in result.model.graph.node]


def test_integer_relu_is_max_with_zero_where_onnxruntime_has_no_relu():
    assert _nodes("Relu", DType.INT64, [3, 4]) == ["Max"]  # the fuzz case: Relu(int64) did not load
    assert _nodes("Relu", DType.INT32, [3, 4]) == ["Relu"]
    assert _nodes("Relu", DType.INT32, [3, 4], opset=13) == ["Max"]  # ONNX Relu takes integers from opset 14
    assert _nodes("Relu", DType.INT16, [3, 4]) == ["Cast", "Max", "Cast"]  # no 16-bit Max either: int32
    assert _nodes("Relu", DType.UINT8, [3, 4]) == ["Identity"]  # an unsigned Relu is its input (output = input)
    assert _nodes("Round", DType.INT32, [3, 4]) == ["Identity"]  # as tf.math.round (the raw kernel zeroes ints)


def test_float_lowerings_keep_their_nodes():
    assert _nodes("Relu", DType.FLOAT, [3, 4]) == ["Relu"]
    assert _nodes("Maximum", DType.FLOAT, [3, 4], [4]) == ["Max"]
    assert _nodes("MatMul", DType.FLOAT, [3, 4], [4, 2]) == ["Gemm"]
    assert _nodes("AddN", DType.FLOAT, [3, 4], [3, 4], [3, 4], N=3) == ["Sum"]
    assert _nodes("Relu6", DType.HALF, [3, 4]) == ["Clip"]


def test_integer_lowerings_carry_through_a_wider_type():
    """What onnxruntime lacks a kernel for computes in the narrowest type holding every value (wrapping
    sums may also use a same-width type) and is cast back: constants are converted at export time."""
    assert _nodes("Maximum", DType.UINT16, [3, 4], [4]) == ["Cast", "Cast", "Max", "Cast"]
    assert _nodes("MatMul", DType.INT32, [3, 4], [4, 2]) == ["MatMul"]  # onnxruntime's Gemm is float-only
    assert _nodes("MatMul", DType.INT64, [4, 3], [2, 4], transpose_a=True, transpose_b=True) == [
        "Transpose", "Transpose", "MatMul"]
    assert _nodes("AddN", DType.INT8, [3, 4], [3, 4], [3, 4], N=3) == ["Add", "Add"]  # ONNX Sum is float-only
    assert _nodes("AddN", DType.INT8, [3, 4], [3, 4], N=2, opset=13) == ["Cast", "Cast", "Add", "Cast"]


def test_reductions_and_scans_of_narrow_types():
    b = Builder()
    rng = np.random.default_rng(1)
    feeds = {"u32": rng.integers(0, 2**32, (3, 4), dtype=np.uint32), "i8": rng.integers(-128, 128, (3, 4), np.int8),
             "u16": rng.integers(0, 2**16, (3, 6), dtype=np.uint16), "flags": rng.random((3, 4)) < 0.5}
    x = {name: b.input(name, list(a.shape), DType.from_numpy(a.dtype)) for name, a in feeds.items()}
    axis = b.const(np.int32(1))
    outputs = [b("Sum", x["u32"], b.const(np.asarray([1], np.int32)), keep_dims=False, Tidx=I32),
               b("Cumsum", x["i8"], axis, Tidx=I32, exclusive=True),
               b("ArgMax", x["flags"], axis, Tidx=I32, output_type=DType.INT64),
               b("TopKV2", x["u16"], b.const(np.int32(2)), Tk=I32, index_type=I32)[0]]
    names = [v.name for v in outputs]
    result = export_with_report(b.graph, list(feeds), names)
    onnx.checker.check_model(result.model, full_check=True)
    want, got = Interpreter(b.graph).run(dict(feeds), names), run_onnx(result.model, feeds, names)
    for name in names:
        np.testing.assert_array_equal(got[name], want[name])
    counts = result.report.op_counts
    # Sum: uint32 -> int64 and back; Cumsum: int8 -> int32 and back; ArgMax: bool -> uint8; TopK: uint16 -> int32, back.
    assert counts["Cast"] == 2 + 2 + 1 + 2 and result.report.node_count == 4 + 7


@pytest.mark.parametrize("op_type, dtype, reason", [
    ("Acos", DType.DOUBLE, "onnxruntime has no Acos kernel for double"),
    ("Reciprocal", DType.INT32, "Reciprocal of int32 (TF has no integer kernel"),
    ("ArgMax", DType.UINT64, "onnxruntime has no ArgMax kernel for uint64"),
    ("LowerBound", DType.BOOL, "LowerBound of bool (TF has no bool kernel)"),
])
def test_what_no_type_carries_is_refused_by_name(op_type, dtype, reason):
    b = Builder()
    x = b.input("x", [2, 3], dtype)
    operands = {"ArgMax": [b.const(np.int32(1))], "LowerBound": [b.input("y", [2, 2], dtype)]}.get(op_type, [])
    attrs = {"ArgMax": dict(Tidx=I32, output_type=DType.INT64), "LowerBound": dict(out_type=I32)}.get(op_type, {})
    out = b(op_type, x, *operands, **attrs)
    with pytest.raises(UnsupportedOpError, match=rf"'{op_type}' \(node '{out.op.name}'\).*{re.escape(reason)}"):
        export_with_report(b.graph, ["x", "y"] if op_type == "LowerBound" else ["x"], [out.name])


# -- against TF ---------------------------------------------------------------------------------------------------
def _frozen(tf, dtype, shape, build):
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(dtype, shape, name="x")
        tf.identity(build(x), name="y")
    return g.as_graph_def().SerializeToString()


def _tf_cases(tf):
    r = tf.raw_ops
    return {
        "relu_int64": (tf.int64, lambda x: r.Relu(features=x), 1, None),
        "relu6_uint16": (tf.uint16, lambda x: r.Relu6(features=x), 3, None),
        "maximum_int16": (tf.int16, lambda x: r.Maximum(x=x, y=tf.constant(2, tf.int16)), 3, None),
        "sum_uint32": (tf.uint32, lambda x: r.Sum(input=x, axis=[1]), 3, None),
        "mean_int16": (tf.int16, lambda x: r.Mean(input=x, axis=[0]), 3, None),
        "prod_uint8": (tf.uint8, lambda x: r.Prod(input=x, axis=[0]), 3, None),
        "cumsum_int8": (tf.int8, lambda x: r.Cumsum(x=x, axis=1), 3, None),
        "argmax_uint16": (tf.uint16, lambda x: r.ArgMax(input=x, dimension=1), 2, None),
        "topk_uint32": (tf.uint32, lambda x: r.TopKV2(input=x, k=2).values, 3, 3),
        "matmul_int32": (tf.int32, lambda x: r.MatMul(a=x, b=tf.ones([4, 2], tf.int32)), 1, 1),
        "pad_int16": (tf.int16, lambda x: r.Pad(input=x, paddings=[[1, 0], [0, 2]]), 3, 3),
        "addn_int32": (tf.int32, lambda x: r.AddN(inputs=[x, x, x]), 2, None),
        "where_int8": (tf.int8, lambda x: r.Where(condition=x), 3, None),
        "unique_uint64": (tf.uint64, lambda x: r.Unique(x=tf.reshape(x, [-1])).y, 4, 4),
    }


_TF_CASES = ["relu_int64", "relu6_uint16", "maximum_int16", "sum_uint32", "mean_int16", "prod_uint8", "cumsum_int8",
             "argmax_uint16", "topk_uint32", "matmul_int32", "pad_int16", "addn_int32", "where_int8", "unique_uint64"]


@pytest.mark.tf
@pytest.mark.parametrize("name", _TF_CASES)
def test_integer_ops_equal_tf(name):
    """Exactly TF's values (extremes included where the op wraps or orders); tf2onnx's model of the same
    graph fails to load in onnxruntime for all but four of these, which have as many nodes as ours."""
    tf = require_tf()
    dtype, build, nodes, tf2onnx_nodes = _tf_cases(tf)[name]
    data = _frozen(tf, dtype, [3, 4], build)
    info = np.iinfo(dtype.as_numpy_dtype)
    rng = np.random.default_rng(2)
    feeds = [{"x": rng.integers(0, 9, (3, 4)).astype(dtype.as_numpy_dtype)}]
    if name.split("_")[0] in ("relu", "relu6", "maximum", "argmax", "topk", "pad", "where", "unique", "cumsum"):
        feeds.append({"x": rng.integers(info.min, info.max, (3, 4), dtype=dtype.as_numpy_dtype, endpoint=True)})
    result = export_with_report(load_graph_bytes(data), ["x"], ["y"])
    onnx.checker.check_model(result.model, full_check=True)
    for feed in feeds:
        want, got = run_tf(data, feed, ["y"])["y"], run_onnx(result.model, feed, ["y"])["y"]
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    assert result.report.node_count == nodes
    if tf2onnx_nodes is not None:
        from compiler.backends.onnx.tf2onnx_compare import convert_with_tf2onnx

        theirs = convert_with_tf2onnx(data, ["x"], ["y"])
        np.testing.assert_array_equal(run_onnx(theirs, feeds[0], ["y"])["y"], run_tf(data, feeds[0], ["y"])["y"])
        assert result.report.node_count <= len(theirs.graph.node) == tf2onnx_nodes


@pytest.mark.tf
@pytest.mark.parametrize("opset", [13, 17, 21])
def test_double_activations_onnxruntime_computes_in_float_only(opset):
    """Tan, Cosh, Softsign, Elu, Selu (and LeakyRelu outside opsets 16-19) of doubles are formulas in double
    (onnxruntime's kernels are float-only): within 1e-12 of TF's values (relative, absolute below 1)."""
    tf = require_tf()
    r = tf.raw_ops
    ops = {"tan": r.Tan, "cosh": r.Cosh, "softsign": r.Softsign, "elu": r.Elu, "selu": r.Selu,
           "leaky": lambda features: r.LeakyRelu(features=features, alpha=0.3)}
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float64, [200], name="x")
        for name, fn in ops.items():
            tf.identity(fn(x=x) if name in ("tan", "cosh") else fn(features=x), name=f"out_{name}")
    data = g.as_graph_def().SerializeToString()
    names = [f"out_{name}" for name in ops]
    result = export_with_report(load_graph_bytes(data), ["x"], names, opset=opset)
    values = np.concatenate([np.linspace(-20, 20, 190), [0.0, -0.0, 1e-300, -1e-9, 700.0, -700.0, 1.5707963,
                                                        -1.5707963, 3.14159265, 12.0]])
    feeds = {"x": values}
    want, got = run_tf(data, feeds, names), run_onnx(result.model, feeds, names)
    for name in names:  # (Elu and Selu near 0 lose relative precision as the Expm1 lowering does, not absolute)
        tolerance = 1e-12 * np.maximum(np.abs(want[name]), 1.0)
        if name == "out_tan":  # sin / cos near a pole: within what one ulp of x moves tan (|x| (1 + tan^2) eps)
            tolerance += 4e-16 * np.abs(values) * (1.0 + want[name] ** 2)
        assert np.all(np.abs(got[name] - want[name]) <= tolerance), name
    counts = result.report.op_counts
    assert "Tan" not in counts and "Cosh" not in counts and ("LeakyRelu" in counts) == (16 <= opset < 20)


@pytest.mark.tf
def test_truncate_div_of_floats_and_clip_with_crossed_bounds_equal_tf():
    """Float TruncateDiv is trunc(x / y) (ONNX Div alone does not truncate); ClipByValue is min then max, so
    where lo > hi TF gives lo (ONNX Clip would give hi)."""
    tf = require_tf()
    r = tf.raw_ops
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [8], name="x")
        y = tf.compat.v1.placeholder(tf.float32, [8], name="y")
        tf.identity(r.TruncateDiv(x=x, y=y), name="trunc")
        tf.identity(r.ClipByValue(t=x, clip_value_min=y, clip_value_max=tf.constant(0.5)), name="clip")
    data = g.as_graph_def().SerializeToString()
    feeds = {"x": np.asarray([7, -7, 7.5, np.inf, -1, 0.5, -0.25, 3], np.float32),
             "y": np.asarray([2, 2, -2, 2, 0, 4, 1, 3], np.float32)}
    result = export_with_report(load_graph_bytes(data), ["x", "y"], ["trunc", "clip"])
    want, got = run_tf(data, feeds, ["trunc", "clip"]), run_onnx(result.model, feeds, ["trunc", "clip"])
    for name in ("trunc", "clip"):
        np.testing.assert_array_equal(got[name], want[name])  # (trunc(-0.25) is +0: see _truncated_quotient)


@pytest.mark.tf
def test_half_infinity_tests_and_nonzero_of_double_equal_tf():
    tf = require_tf()
    r = tf.raw_ops
    with tf.Graph().as_default() as g:
        h = tf.compat.v1.placeholder(tf.float16, [6], name="h")
        d = tf.compat.v1.placeholder(tf.float64, [6], name="d")
        tf.identity(r.IsInf(x=h), name="inf")
        tf.identity(r.IsFinite(x=h), name="finite")
        tf.identity(r.Where(condition=d), name="nonzero")
    data = g.as_graph_def().SerializeToString()
    names = ["inf", "finite", "nonzero"]
    feeds = {"h": np.asarray([1, np.inf, -np.inf, np.nan, 65504, 0], np.float16),
             "d": np.asarray([0.0, -0.0, np.nan, 1e-300, -2.0, 0.0])}
    for opset in (13, 21):
        result = export_with_report(load_graph_bytes(data), ["h", "d"], names, opset=opset)
        want, got = run_tf(data, feeds, names), run_onnx(result.model, feeds, names)
        for name in names:
            np.testing.assert_array_equal(got[name], want[name])
        # NonZero of a bool; below opset 20, one Cast of the half input for IsInf and IsFinite
        assert result.report.op_counts["Cast"] == 1 + (opset < 20)
