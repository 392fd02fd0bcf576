"""Every reference kernel against TensorFlow's eager CPU kernels.

TF is the ground truth: each case runs the same op through `tf.raw_ops` and
through our kernel on seeded random data and attribute combinations, and
requires identical dtypes and shapes, exact equality for non-float outputs,
and float outputs within rtol=1e-5 plus atol=1e-5 * max|TF output|.  Where
TF's CPU build registers no kernel for a case (integer RealDiv, NCHW or
dilated Conv2DBackpropInput, ...) the same op compiled by XLA is the oracle.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from compiler.ir.dtypes import DType  # noqa: E402
from compiler.runtime.kernels import KERNELS, KernelError, get_kernel, kernel  # noqa: E402

pytestmark = pytest.mark.tf

RTOL = 1e-5
SEEDS = [0, 1, 2]
F32 = np.float32
I32 = np.int32
I64 = np.int64

# For reporting only (the assertions enforce the tolerance): per op, the largest
# relative error among elements with |tf| >= 1% of max|tf|, and the largest
# |ours - tf| / max|tf|.
ERRORS: dict[str, tuple[float, float]] = {}


def _record(op: str, got: np.ndarray, want: np.ndarray, scale: float) -> None:
    diff = np.abs(got - want)
    big = (np.abs(want) >= 0.01 * scale) & (want != 0)
    rel = float(np.max(diff[big] / np.abs(want[big]), initial=0.0))
    norm = float(diff.max(initial=0.0)) / scale if scale else 0.0
    old = ERRORS.get(op, (0.0, 0.0))
    ERRORS[op] = (max(old[0], rel), max(old[1], norm))


# ---------------------------------------------------------------- harness


def _tf_attr(value: object) -> object:
    return tf.as_dtype(value.to_numpy()) if isinstance(value, DType) else value


def _flatten(inputs: dict[str, object]) -> list[np.ndarray]:
    flat: list[np.ndarray] = []
    for value in inputs.values():
        flat.extend(value if isinstance(value, list) else [value])
    return [np.asarray(v) for v in flat]


def _tf_outputs(result: object) -> list[np.ndarray]:
    if result is None or isinstance(result, tf.Operation):
        return []
    if isinstance(result, (list, tuple)):
        return [np.asarray(r) for r in result]
    return [np.asarray(result)]


# Attributes whose raw_ops keyword differs from the OpDef name.
TF_KEYWORDS = {("Squeeze", "squeeze_dims"): "axis"}


def _tf_tensor(value: object) -> object:
    """Pin the dtype: raw_ops would convert a bare numpy int64 to an op's default int32."""
    if isinstance(value, list):
        return [_tf_tensor(v) for v in value]
    return tf.constant(value)


def _tf_kwargs(op: str, attrs: dict[str, object]) -> dict[str, object]:
    return {TF_KEYWORDS.get((op, k), k): _tf_attr(v) for k, v in attrs.items()}


def run_tf(op: str, inputs: dict[str, object], attrs: dict[str, object]) -> list[np.ndarray]:
    fn = getattr(tf.raw_ops, op)
    tensors = {k: _tf_tensor(v) for k, v in inputs.items()}
    return _tf_outputs(fn(**tensors, **_tf_kwargs(op, attrs)))


def run_xla(op: str, inputs: dict[str, object], attrs: dict[str, object]) -> list[np.ndarray]:
    """TF through XLA, for cases TF's CPU kernels do not register."""
    fn = getattr(tf.raw_ops, op)
    # Float operands are arguments; the rest (sizes, shapes) are compile-time constants.
    floats = [k for k, v in inputs.items() if np.asarray(v).dtype.kind in "fc"]
    fixed = {k: _tf_tensor(v) for k, v in inputs.items() if k not in floats}

    def call(*args: object) -> object:
        return fn(**dict(zip(floats, args)), **fixed, **_tf_kwargs(op, attrs))

    compiled = tf.function(call, jit_compile=True)
    return _tf_outputs(compiled(*[inputs[k] for k in floats]))


def run_ours(op: str, inputs: dict[str, object] | list[np.ndarray],
             attrs: dict[str, object]) -> list[np.ndarray]:
    flat = _flatten(inputs) if isinstance(inputs, dict) else inputs
    before = [x.copy() for x in flat]
    # The IR holds list attributes as tuples.
    ir_attrs = {k: tuple(v) if isinstance(v, list) else v for k, v in attrs.items()}
    outs = get_kernel(op)(ir_attrs, flat)
    assert isinstance(outs, list) and all(isinstance(o, np.ndarray) for o in outs)
    for x, saved in zip(flat, before):  # kernels must not write into operands
        np.testing.assert_array_equal(x, saved)
    return outs


def assert_matches(op: str, ours: list[np.ndarray], want: list[np.ndarray],
                   rtol: float = RTOL) -> None:
    assert len(ours) == len(want), f"{op}: {len(ours)} outputs, TF has {len(want)}"
    for i, (got, exp) in enumerate(zip(ours, want)):
        got = np.asarray(got)
        assert got.dtype == exp.dtype, f"{op}[{i}]: dtype {got.dtype} != TF {exp.dtype}"
        assert got.shape == exp.shape, f"{op}[{i}]: shape {got.shape} != TF {exp.shape}"
        if exp.dtype.kind in "fc" or "float" in exp.dtype.name:
            e, g = exp.astype(np.complex128 if exp.dtype.kind == "c" else np.float64), \
                got.astype(np.complex128 if got.dtype.kind == "c" else np.float64)
            finite = np.isfinite(e)
            np.testing.assert_array_equal(np.isfinite(g), finite, err_msg=f"{op}[{i}]")
            np.testing.assert_array_equal(g[~finite], e[~finite], err_msg=f"{op}[{i}]")
            scale = float(np.max(np.abs(e[finite]), initial=0.0))
            atol = rtol * scale
            np.testing.assert_allclose(g[finite], e[finite], rtol=rtol, atol=atol,
                                       err_msg=f"{op}[{i}]")
            _record(op, g[finite], e[finite], scale)
        else:
            np.testing.assert_array_equal(got, exp, err_msg=f"{op}[{i}]")
            ERRORS.setdefault(op, (0.0, 0.0))


def check(op: str, inputs: dict[str, object], attrs: dict[str, object] | None = None,
          ir_attrs: dict[str, object] | None = None, rtol: float = RTOL) -> list[np.ndarray]:
    """Run `op` both ways and compare.  `ir_attrs` go to our kernel only: the
    inferred type attributes TF's raw_ops refuse but the IR always carries."""
    attrs = attrs or {}
    want = run_tf(op, inputs, attrs)
    ours = run_ours(op, inputs, {**attrs, **(ir_attrs or {})})
    assert_matches(op, ours, want, rtol)
    return ours


def check_xla(op: str, inputs: dict[str, object], attrs: dict[str, object] | None = None,
              rtol: float = RTOL) -> list[np.ndarray]:
    attrs = attrs or {}
    ours = run_ours(op, inputs, attrs)
    assert_matches(op, ours, run_xla(op, inputs, attrs), rtol)
    return ours


def check_or_both_fail(op: str, inputs: dict[str, object], attrs: dict[str, object]) -> bool:
    """Compare when TF accepts the case; otherwise we must reject it too."""
    try:
        want = run_tf(op, inputs, attrs)
    except (tf.errors.InvalidArgumentError, ValueError):
        with pytest.raises(KernelError):
            run_ours(op, inputs, attrs)
        return False
    assert_matches(op, run_ours(op, inputs, attrs), want)
    return True


def rand(rng: np.random.Generator, shape: tuple[int, ...] | list[int], dtype=F32,
         lo: float = -2.0, hi: float = 2.0) -> np.ndarray:
    if np.dtype(dtype).kind in "iu":
        return rng.integers(int(lo), int(hi), size=shape).astype(dtype)
    if np.dtype(dtype) == np.bool_:
        return rng.random(shape) < 0.5
    return rng.uniform(lo, hi, size=shape).astype(dtype)


def to_nchw(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2))


# ---------------------------------------------------------------- registry


def test_unknown_op_raises_kernel_error_naming_it():
    with pytest.raises(KernelError, match="no kernel for op 'NoSuchOp'"):
        get_kernel("NoSuchOp")


def test_kernel_decorator_registers_and_names_errors():
    @kernel("_TestOnlyOp")
    def _fail(attrs, inputs):
        raise KernelError("bad attribute")

    try:
        with pytest.raises(KernelError, match="_TestOnlyOp: bad attribute"):
            get_kernel("_TestOnlyOp")({}, [])
        with pytest.raises(ValueError, match="duplicate"):
            kernel("_TestOnlyOp")(_fail)
    finally:
        del KERNELS["_TestOnlyOp"]


def test_unsupported_attribute_names_op_and_problem():
    x, w = np.zeros((1, 4, 4, 2), F32), np.zeros((2, 2, 2, 3), F32)
    with pytest.raises(KernelError, match=r"Conv2D: unsupported padding 'FULL'"):
        get_kernel("Conv2D")({"strides": [1, 1, 1, 1], "padding": "FULL"}, [x, w])
    with pytest.raises(KernelError, match=r"MaxPool: unsupported data_format 'NCHW_VECT_C'"):
        get_kernel("MaxPool")({"ksize": [1, 2, 2, 1], "strides": [1, 1, 1, 1],
                               "padding": "VALID", "data_format": "NCHW_VECT_C"}, [x])
    with pytest.raises(KernelError, match="Cast: missing required attribute 'DstT'"):
        get_kernel("Cast")({}, [x])


def test_numpy_failures_become_kernel_errors():
    with pytest.raises(KernelError, match="^Reshape: "):
        get_kernel("Reshape")({}, [np.zeros(6, F32), np.array([4], I32)])


def test_every_registered_kernel_is_exercised_here():
    """Each kernel of this package appears (as a quoted op name) in a kernel test file of this folder."""
    source = "".join(path.read_text() for path in Path(__file__).parent.glob("test_*kernels*.py"))
    ours = [op for op, fn in KERNELS.items()
            if fn.__module__.startswith("compiler.runtime.kernels.") and not op.startswith("_")]
    untested = [op for op in ours if f'"{op}"' not in source]
    assert len(ours) > 150
    assert not untested, f"kernels without a test: {untested}"


def test_no_op_returns_nothing():
    assert get_kernel("NoOp")({}, []) == []
    assert run_tf("NoOp", {}, {}) == []


# ---------------------------------------------------------------- elementwise math

ANY_REAL = ["Neg", "Abs", "Square", "Sign", "Floor", "Ceil", "Round", "Rint", "Exp", "Expm1",
            "Sin", "Cos", "Atan", "Sinh", "Cosh", "Asinh", "Tanh", "Sigmoid", "Erf", "Erfc",
            "Reciprocal", "Inv", "IsNan", "IsInf", "IsFinite", "Softsign", "Softplus",
            "Relu", "Relu6", "Elu", "Selu"]
DOMAINS = {"Sqrt": (0.01, 4.0), "Rsqrt": (0.01, 4.0), "Log": (0.01, 4.0), "Log1p": (-0.9, 4.0),
           "Acosh": (1.01, 4.0), "Asin": (-0.99, 0.99), "Acos": (-0.99, 0.99),
           "Atanh": (-0.99, 0.99), "Tan": (-1.2, 1.2)}
UNARY_CASES = [(op, (-6.0, 6.0)) for op in ANY_REAL] + list(DOMAINS.items())


@pytest.mark.parametrize("op,domain", UNARY_CASES, ids=[c[0] for c in UNARY_CASES])
@pytest.mark.parametrize("seed", SEEDS[:2])
def test_unary_float(op, domain, seed):
    rng = np.random.default_rng(seed)
    x = rand(rng, rng.integers(1, 5, size=rng.integers(0, 4)), lo=domain[0], hi=domain[1])
    check(op, {"x" if op not in ("Relu", "Relu6", "Elu", "Selu", "Softsign", "Softplus")
               else "features": x})


def test_unary_special_values():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.0, -0.0, np.inf, -np.inf, np.nan], F32)
    for op in ["Round", "Rint", "Floor", "Ceil", "Sign", "Abs", "Neg", "IsNan", "IsInf",
               "IsFinite", "Exp", "Sigmoid", "Tanh"]:
        check(op, {"x": x})
    big = np.array([-100.0, -30.0, 0.0, 30.0, 100.0], F32)
    for op in ["Softplus", "Elu", "Selu", "Relu6"]:
        check(op, {"features": big})


@pytest.mark.parametrize("op", ["Neg", "Abs", "Square", "Sign", "Reciprocal"])
def test_unary_int(op):
    x = np.array([-7, -1, 1, 3, 100], I32)
    compare = check_xla if op == "Reciprocal" else check  # no int CPU kernel
    compare(op, {"x": x})
    compare(op, {"x": x.astype(I64)})


FLOAT_BINARY = ["Add", "AddV2", "Sub", "Mul", "RealDiv", "Div", "FloorDiv", "FloorMod", "Mod",
                "TruncateMod", "Maximum", "Minimum", "Pow", "SquaredDifference", "DivNoNan",
                "MulNoNan", "Atan2", "TruncateDiv"]
SHAPE_PAIRS = [((3, 4), (3, 4)), ((2, 3, 4), (4,)), ((2, 1, 4), (3, 1)), ((), (5,)), ((2, 3), ())]


def _binary_names(op: str) -> tuple[str, str]:
    return ("y", "x") if op == "Atan2" else ("x", "y")


@pytest.mark.parametrize("op", FLOAT_BINARY)
@pytest.mark.parametrize("shapes", SHAPE_PAIRS, ids=str)
def test_binary_float(op, shapes):
    rng = np.random.default_rng(len(op))
    a, b = rand(rng, shapes[0], lo=-3, hi=3), rand(rng, shapes[1], lo=-3, hi=3)
    if op == "Pow":
        a = np.abs(a) + 0.1
    if op in ("DivNoNan", "MulNoNan") and b.size:
        b.reshape(-1)[0] = 0.0
    if op == "TruncateDiv":  # no float CPU kernel
        check_xla(op, {"x": a, "y": b})
        return
    names = _binary_names(op)
    check(op, {names[0]: a, names[1]: b})


INT_BINARY = ["Add", "AddV2", "Sub", "Mul", "Div", "FloorDiv", "FloorMod", "Mod", "TruncateDiv",
              "TruncateMod", "Maximum", "Minimum", "SquaredDifference", "BitwiseAnd",
              "BitwiseOr", "BitwiseXor", "Pow"]


@pytest.mark.parametrize("op", INT_BINARY)
@pytest.mark.parametrize("dtype", [I32, I64])
def test_binary_int(op, dtype):
    rng = np.random.default_rng(7)
    a = rand(rng, (4, 5), dtype, -20, 20)
    b = rand(rng, (5,), dtype, -6, 6)
    b[b == 0] = 3
    if op == "Pow":
        a, b = a % 5, np.abs(b) % 4
    check(op, {"x": a, "y": b})


def test_real_div_int_truncates_like_xla():
    check_xla("RealDiv", {"x": np.array([-7, 7, -7, 9], I32), "y": np.array([2, -2, -2, 4], I32)})


@pytest.mark.parametrize("op", ["Div", "FloorDiv", "FloorMod", "TruncateMod"])
def test_integer_division_by_zero_fails(op):
    with pytest.raises(KernelError, match=f"{op}: integer division by zero"):
        run_ours(op, [np.array([1, 2], I32), np.array([1, 0], I32)], {})


def test_string_add_concatenates():
    check("Add", {"x": np.array([b"ab", b"c"], object), "y": np.array([b"x", b""], object)})


@pytest.mark.parametrize("op", ["Less", "LessEqual", "Greater", "GreaterEqual", "Equal",
                                "NotEqual"])
@pytest.mark.parametrize("dtype", [F32, I32])
def test_comparisons(op, dtype):
    rng = np.random.default_rng(3)
    a, b = rand(rng, (3, 4), dtype, -3, 3), rand(rng, (4,), dtype, -3, 3)
    a[0] = b
    check(op, {"x": a, "y": b})


@pytest.mark.parametrize("op", ["Equal", "NotEqual"])
def test_equality_with_incompatible_shapes(op):
    inputs = {"x": np.ones((2, 3), F32), "y": np.ones((2, 4), F32)}
    check(op, inputs, {"incompatible_shape_error": False})
    check(op, {"x": np.ones((2, 3), F32), "y": np.ones((1, 3), F32)},
          {"incompatible_shape_error": False})


def test_approximate_equal_and_logical():
    rng = np.random.default_rng(4)
    x = rand(rng, (10,))
    y = x + rng.choice([0.0, 1e-6, 1e-3], size=10).astype(F32)
    check("ApproximateEqual", {"x": x, "y": y}, {"tolerance": 1e-4})
    check("ApproximateEqual", {"x": x, "y": y})
    a, b = rand(rng, (3, 4), np.bool_), rand(rng, (4,), np.bool_)
    check("LogicalAnd", {"x": a, "y": b})
    check("LogicalOr", {"x": a, "y": b})
    check("LogicalNot", {"x": a})


def test_select_and_select_v2():
    rng = np.random.default_rng(5)
    t, e = rand(rng, (3, 4)), rand(rng, (3, 4))
    check("Select", {"condition": rand(rng, (3, 4), np.bool_), "x": t, "y": e})
    check("Select", {"condition": rand(rng, (3,), np.bool_), "x": t, "y": e})
    check("Select", {"condition": np.array(True), "x": t, "y": e})
    check("SelectV2", {"condition": rand(rng, (4,), np.bool_), "t": t, "e": rand(rng, ())})
    check("SelectV2", {"condition": rand(rng, (2, 1, 4), np.bool_), "t": rand(rng, (3, 1)),
                       "e": e})


CASTS = [(F32, DType.INT32), (F32, DType.INT64), (F32, DType.HALF), (F32, DType.DOUBLE),
         (F32, DType.BOOL), (F32, DType.UINT8), (np.float64, DType.FLOAT), (I32, DType.FLOAT),
         (I64, DType.INT32), (I32, DType.INT8), (I32, DType.UINT8), (np.bool_, DType.FLOAT),
         (np.bool_, DType.INT32), (np.uint8, DType.FLOAT), (np.complex64, DType.FLOAT),
         (F32, DType.BFLOAT16), (np.float16, DType.FLOAT)]


@pytest.mark.parametrize("src,dst", CASTS, ids=[f"{np.dtype(s).name}-{d.name}" for s, d in CASTS])
@pytest.mark.parametrize("truncate", [False, True])
def test_cast(src, dst, truncate):
    rng = np.random.default_rng(6)
    if np.dtype(src).kind == "c":
        x = (rand(rng, (20,)) + 1j * rand(rng, (20,))).astype(src)
    elif dst == DType.UINT8 and np.dtype(src).kind == "f":
        x = rand(rng, (20,), src, 0, 250)
    else:
        x = rand(rng, (20,), src, -100, 100)
    check("Cast", {"x": x}, {"DstT": dst, "Truncate": truncate},
          ir_attrs={"SrcT": DType.from_numpy(np.dtype(src)) if src != np.complex64 else None})


def test_cast_float_to_int_out_of_range():
    x = np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, 2.7, -2.7], F32)
    check("Cast", {"x": x}, {"DstT": DType.INT32})
    check("Cast", {"x": x.astype(np.float64) * 1e10}, {"DstT": DType.INT64})


REDUCTIONS = ["Sum", "Prod", "Mean", "Max", "Min", "EuclideanNorm"]
AXES = [[0], [-1], [0, 2], [], [1, -1], [-3, 1, 2]]


@pytest.mark.parametrize("op", REDUCTIONS)
@pytest.mark.parametrize("axes", AXES, ids=str)
@pytest.mark.parametrize("keep_dims", [False, True])
def test_reductions(op, axes, keep_dims):
    rng = np.random.default_rng(8)
    x = rand(rng, (3, 4, 5), lo=0.5 if op == "Prod" else -2, hi=1.5 if op == "Prod" else 2)
    check(op, {"input": x, "axis": np.array(axes, I32)}, {"keep_dims": keep_dims})


@pytest.mark.parametrize("op", ["Sum", "Prod", "Mean", "Max", "Min"])
def test_integer_reductions(op):
    x = np.array([[-7, 2, 5], [7, 2, 2]], I32)
    check(op, {"input": x, "axis": np.array(1, I32)})
    check(op, {"input": x, "axis": np.array([0, 1], I64)}, {"keep_dims": True})


def test_reductions_of_empty_and_bool():
    check("Max", {"input": np.zeros((0, 3), F32), "axis": np.array(0, I32)})
    check("Min", {"input": np.zeros((0, 3), I32), "axis": np.array(0, I32)})
    check("Sum", {"input": np.zeros((0, 3), F32), "axis": np.array(0, I32)})
    b = np.random.default_rng(9).random((3, 4)) < 0.5
    for op in ("Any", "All"):
        check(op, {"input": b, "axis": np.array([1], I32)})
        check(op, {"input": b, "axis": np.array([-2, 1], I32)}, {"keep_dims": True})


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("out", [None, DType.INT32, DType.INT64])
def test_arg_reductions(op, axis, out):
    rng = np.random.default_rng(10)
    x = rand(rng, (4, 5, 3), I32, -3, 3)  # ties: the first index wins
    attrs = {} if out is None else {"output_type": out}
    check(op, {"input": x, "dimension": np.array(axis, I32)}, attrs)
    check(op, {"input": x.astype(F32), "dimension": np.array(axis, I64)}, attrs)


@pytest.mark.parametrize("args", [(0, 10, 1), (3, 18, 4), (10, -3, -3), (5, 5, 1), (-2, 7, 2)])
@pytest.mark.parametrize("dtype", [I32, I64, F32, np.float64])
def test_range(args, dtype):
    start, limit, delta = (np.array(v, dtype) for v in args)
    if dtype in (F32, np.float64):
        start, delta = start + np.array(0.1, dtype), delta * np.array(0.7, dtype)
    check_or_both_fail("Range", {"start": start, "limit": limit, "delta": delta}, {})


def test_range_rejects_bad_delta():
    with pytest.raises(KernelError, match="Range"):
        run_ours("Range", [np.array(0), np.array(5), np.array(0)], {})
    with pytest.raises(KernelError, match="Range"):
        run_ours("Range", [np.array(5), np.array(0), np.array(1)], {})


def test_clip_by_value_and_add_n():
    rng = np.random.default_rng(11)
    t = rand(rng, (3, 4), lo=-5, hi=5)
    check("ClipByValue", {"t": t, "clip_value_min": np.array(-1.0, F32),
                          "clip_value_max": np.array(2.0, F32)})
    check("ClipByValue", {"t": t, "clip_value_min": rand(rng, (3, 4), lo=-3, hi=0),
                          "clip_value_max": rand(rng, (3, 4), lo=0, hi=3)})
    check("ClipByValue", {"t": t.astype(I32), "clip_value_min": np.array(-1, I32),
                          "clip_value_max": np.array(2, I32)})
    check("AddN", {"inputs": [rand(rng, (2, 3)) for _ in range(4)]})
    check("AddN", {"inputs": [rand(rng, (2, 3), I32, -9, 9) for _ in range(3)]})


@pytest.mark.parametrize("equation,shapes", [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (4, 5)]),
    ("ij->ji", [(3, 4)]),
    ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]),
    ("bij->bj", [(2, 3, 4)]),
])
def test_einsum(equation, shapes):
    rng = np.random.default_rng(12)
    check("Einsum", {"inputs": [rand(rng, s) for s in shapes]}, {"equation": equation})


# ---------------------------------------------------------------- array ops


def test_identity_family():
    rng = np.random.default_rng(13)
    x = rand(rng, (2, 3))
    for op in ("Identity", "StopGradient", "Snapshot"):
        check(op, {"input": x})
    check("PreventGradient", {"input": x}, {"message": "no grads"})
    check("IdentityN", {"input": [x, np.arange(3, dtype=I32)]})
    check("CheckNumerics", {"tensor": x}, {"message": "ok"})
    check("CheckNumericsV2", {"tensor": x}, {"message": "ok"})


@pytest.mark.parametrize("op", ["CheckNumerics", "CheckNumericsV2"])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_check_numerics_rejects_non_finite(op, bad):
    x = np.array([1.0, bad], F32)
    with pytest.raises(tf.errors.InvalidArgumentError):
        run_tf(op, {"tensor": x}, {"message": "boom"})
    kind = "NaN" if np.isnan(bad) else "Inf"
    with pytest.raises(KernelError, match=f"^{op}: boom : Tensor had {kind} values"):
        run_ours(op, [x], {"message": "boom"})


@pytest.mark.parametrize("op", ["Xdivy", "Xlogy", "Xlog1py"])
@pytest.mark.parametrize("dtype", [F32, np.float64])
def test_x_times_is_zero_where_x_is(op, dtype):
    x = np.asarray([[0, 0, 1.5, -2], [0, 3, 0.25, 4]], dtype)
    y = np.asarray([[0, 2, 0, 3], [-1, 0.5, 7, 1e-3]], dtype)
    ours = check(op, {"x": x, "y": y})
    assert np.all(ours[0][x == 0] == 0)
    check(op, {"x": x[:, :1], "y": np.abs(y) + 1})  # broadcasting


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("dtype", [F32, I32])
def test_nth_element(reverse, dtype):
    rng = np.random.default_rng(21)
    x = rand(rng, (2, 3, 7), dtype, -50, 50)
    for n in (0, 3, 6):
        check("NthElement", {"input": x, "n": np.int32(n)}, {"reverse": reverse})
    assert not check_or_both_fail("NthElement", {"input": x, "n": np.int32(7)}, {"reverse": reverse})


def test_assert_passes_or_fails_like_tf():
    data = [np.arange(5, dtype=I32), np.asarray([1.5], F32)]
    assert run_ours("Assert", [np.asarray(True)] + data, {}) == []
    with pytest.raises(tf.errors.InvalidArgumentError):
        run_tf("Assert", {"condition": np.asarray(False), "data": data}, {"summarize": 2})
    with pytest.raises(KernelError, match=r"^Assert: assertion failed: \[0, 1\] \[1.5\]$"):
        run_ours("Assert", [np.asarray(False)] + data, {"summarize": 2})
    with pytest.raises(KernelError, match="scalar bool"):
        run_ours("Assert", [np.asarray([True, True])], {})


def test_shape_ops():
    rng = np.random.default_rng(14)
    x, y = rand(rng, (2, 3, 4)), rand(rng, (5,))
    for attrs in ({}, {"out_type": DType.INT64}, {"out_type": DType.INT32}):
        check("Shape", {"input": x}, attrs)
        check("Size", {"input": x}, attrs)
        check("ShapeN", {"input": [x, y, np.array(1.0, F32)]}, attrs)
    check("Rank", {"input": x})
    check("Rank", {"input": np.array(3, I32)})


@pytest.mark.parametrize("shape,target", [((2, 3, 4), [6, 4]), ((2, 3, 4), [-1]),
                                          ((2, 3, 4), [4, -1, 2]), ((1,), []),
                                          ((0, 3), [3, 0])])
def test_reshape(shape, target):
    x = np.arange(int(np.prod(shape)), dtype=F32).reshape(shape)
    check("Reshape", {"tensor": x, "shape": np.array(target, I32)})


@pytest.mark.parametrize("dims", [None, [0], [-1], [0, 3]])
def test_squeeze(dims):
    x = np.zeros((1, 3, 1, 1), F32) + np.arange(3, dtype=F32)[:, None, None]
    attrs = {} if dims is None else {"squeeze_dims": dims}
    check("Squeeze", {"input": x}, attrs)


def test_squeeze_rejects_non_unit_dim():
    with pytest.raises(KernelError, match="Squeeze"):
        run_ours("Squeeze", [np.zeros((1, 3), F32)], {"squeeze_dims": [1]})


@pytest.mark.parametrize("dim", [0, 2, 3, -1, -4])
def test_expand_dims(dim):
    check("ExpandDims", {"input": np.zeros((2, 3, 4), F32), "axis": np.array(dim, I32)})


@pytest.mark.parametrize("perm", [[1, 0, 2], [2, 1, 0], [0, 1, 2]])
def test_transpose(perm):
    rng = np.random.default_rng(15)
    x = rand(rng, (2, 3, 4))
    check("Transpose", {"x": x, "perm": np.array(perm, I32)})
    z = (x + 1j * x[::-1]).astype(np.complex64)
    check("ConjugateTranspose", {"x": z, "perm": np.array(perm, I64)})


def test_invert_permutation_and_broadcast_args():
    check("InvertPermutation", {"x": np.array([3, 0, 2, 1, 4], I32)})
    check("BroadcastArgs", {"s0": np.array([2, 1, 4], I32), "s1": np.array([3, 1], I32)})
    check("BroadcastArgs", {"s0": np.array([5], I64), "s1": np.array([], I64)})


@pytest.mark.parametrize("shape,target", [((3,), [2, 3]), ((2, 1), [2, 4]),
                                          ((1, 3, 1), [2, 3, 5]), ((), [2, 2])])
def test_broadcast_to(shape, target):
    x = np.arange(int(np.prod(shape)), dtype=F32).reshape(shape)
    check("BroadcastTo", {"input": x, "shape": np.array(target, I32)})


@pytest.mark.parametrize("axis", [0, 1, -1, -2])
def test_concat(axis):
    rng = np.random.default_rng(16)
    shapes = [(2, 3), (2, 3), (2, 3)]
    if axis in (1, -1):
        shapes = [(2, 1), (2, 3), (2, 0)]
    values = [rand(rng, s) for s in shapes]
    check("ConcatV2", {"values": values, "axis": np.array(axis, I32)})
    check("Concat", {"concat_dim": np.array(axis, I32), "values": values})


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
def test_pack_unpack(axis):
    rng = np.random.default_rng(17)
    values = [rand(rng, (2, 3)) for _ in range(4)]
    check("Pack", {"values": values}, {"axis": axis})
    x = rand(rng, (2, 3, 4))
    check("Unpack", {"value": x}, {"num": x.shape[axis], "axis": axis})


def test_pack_unpack_default_axis():
    x = np.arange(6, dtype=I32).reshape(3, 2)
    check("Unpack", {"value": x}, {"num": 3})
    check("Pack", {"values": list(x)})


@pytest.mark.parametrize("axis,num", [(0, 2), (1, 3), (-1, 4), (2, 1)])
def test_split(axis, num):
    x = np.arange(2 * 6 * 4, dtype=F32).reshape(2, 6, 4)
    check("Split", {"axis": np.array(axis, I32), "value": x}, {"num_split": num})


@pytest.mark.parametrize("sizes,axis", [([1, 2, 3], 1), ([2, -1], -1), ([4, 0], 2), ([2], 0)])
def test_split_v(sizes, axis):
    x = np.arange(2 * 6 * 4, dtype=F32).reshape(2, 6, 4)
    check("SplitV", {"value": x, "size_splits": np.array(sizes, I64),
                     "axis": np.array(axis, I32)}, {"num_split": len(sizes)})


@pytest.mark.parametrize("seed", SEEDS)
def test_pad_family(seed):
    rng = np.random.default_rng(seed)
    x = rand(rng, (3, 4, 5))
    pads = np.array([[rng.integers(0, 3), rng.integers(0, 3)] for _ in range(3)], I32)
    check("Pad", {"input": x, "paddings": pads})
    check("PadV2", {"input": x, "paddings": pads.astype(I64),
                    "constant_values": np.array(-1.5, F32)})
    check("Pad", {"input": x.astype(I32), "paddings": pads})
    for mode in ("REFLECT", "SYMMETRIC"):
        check("MirrorPad", {"input": x, "paddings": pads}, {"mode": mode})
        check("MirrorPad", {"input": x.astype(I32), "paddings": pads}, {"mode": mode})


def test_mirror_pad_rejects_oversized_padding():
    x = np.zeros((3,), F32)
    assert not check_or_both_fail("MirrorPad", {"input": x, "paddings": np.array([[3, 0]], I32)},
                                  {"mode": "REFLECT"})
    assert check_or_both_fail("MirrorPad", {"input": x, "paddings": np.array([[3, 0]], I32)},
                              {"mode": "SYMMETRIC"})


@pytest.mark.parametrize("begin,size", [([0, 0, 0], [-1, -1, -1]), ([1, 0, 2], [1, 3, -1]),
                                        ([0, 2, 1], [2, 1, 3]), ([2, 3, 5], [0, 0, 0])])
def test_slice(begin, size):
    x = np.arange(2 * 3 * 5, dtype=F32).reshape(2, 3, 5)
    check_or_both_fail("Slice", {"input": x, "begin": np.array(begin, I32),
                                 "size": np.array(size, I32)}, {})


def test_slice_rejects_out_of_bounds():
    x = np.zeros((2, 3), F32)
    assert not check_or_both_fail("Slice", {"input": x, "begin": np.array([1, 0], I32),
                                            "size": np.array([2, 1], I32)}, {})


STRIDED_CASES = [  # (begin, end, strides, masks)
    ([1], [3], [1], {}),
    ([-1], [0], [-1], {}),
    ([0, 0], [0, 0], [1, 1], {"begin_mask": 3, "end_mask": 3}),
    ([0, 1], [0, 2], [1, 1], {"shrink_axis_mask": 2, "begin_mask": 1, "end_mask": 1}),
    ([0, 0, 0], [2, 0, 3], [1, 1, 2], {"ellipsis_mask": 2}),
    ([0, 0], [1, 0], [1, 1], {"new_axis_mask": 2, "shrink_axis_mask": 1}),
    ([-1, 0], [0, 0], [1, 1], {"shrink_axis_mask": 1, "ellipsis_mask": 2}),
    ([5, 4], [-7, -9], [-2, -3], {}),
    ([0, 1, 0], [0, 2, 0], [1, 1, 1], {"new_axis_mask": 5, "shrink_axis_mask": 2}),
    ([0], [0], [1], {"ellipsis_mask": 1}),
]


@pytest.mark.parametrize("case", STRIDED_CASES, ids=range(len(STRIDED_CASES)))
def test_strided_slice_cases(case):
    begin, end, strides, masks = case
    x = np.arange(4 * 5 * 6, dtype=F32).reshape(4, 5, 6)
    assert check_or_both_fail("StridedSlice", {"input": x, "begin": np.array(begin, I32),
                                               "end": np.array(end, I32),
                                               "strides": np.array(strides, I32)}, masks)


@pytest.mark.parametrize("case", [([0, 0], [1, 1], [1, 1], {"ellipsis_mask": 3}),
                                  ([0, 0], [1, 1], [1, 0], {}),
                                  ([0, 0, 0, 0], [1, 1, 1, 1], [1, 1, 1, 1], {})])
def test_strided_slice_rejects_bad_specs(case):
    begin, end, strides, masks = case
    x = np.zeros((2, 3, 4), F32)
    assert not check_or_both_fail("StridedSlice", {
        "input": x, "begin": np.array(begin, I32), "end": np.array(end, I32),
        "strides": np.array(strides, I32)}, masks)


@pytest.mark.parametrize("seed", range(4))
def test_strided_slice_fuzz(seed):
    """Random specs with every mask; TF errors must be matched by KernelError."""
    rng = np.random.default_rng(seed)
    accepted = 0
    for _ in range(60):
        rank = int(rng.integers(1, 5))
        x = np.arange(int(np.prod(shape := rng.integers(1, 6, rank))), dtype=F32).reshape(shape)
        n = int(rng.integers(1, rank + 2))
        begin = rng.integers(-7, 7, n)
        end = rng.integers(-7, 7, n)
        strides = rng.choice([-3, -2, -1, 1, 1, 2, 3], n)
        masks = {name: int(rng.integers(0, 1 << n)) if rng.random() < 0.5 else 0
                 for name in ("begin_mask", "end_mask", "shrink_axis_mask", "new_axis_mask")}
        ellipsis = int(rng.integers(0, n)) if rng.random() < 0.3 else None
        masks["ellipsis_mask"] = 0 if ellipsis is None else 1 << ellipsis
        inputs = {"input": x, "begin": begin.astype(I32), "end": end.astype(I32),
                  "strides": strides.astype(I32)}
        accepted += check_or_both_fail("StridedSlice", inputs, masks)
    assert accepted > 20


def test_fill_zeros_ones_like():
    check("Fill", {"dims": np.array([2, 3], I32), "value": np.array(1.5, F32)})
    check("Fill", {"dims": np.array([4], I64), "value": np.array(7, I32)})
    x = np.random.default_rng(18).random((2, 3)).astype(F32)
    for op in ("ZerosLike", "OnesLike"):
        check(op, {"x": x})
        check(op, {"x": x.astype(I32)})
        check(op, {"x": x > 0.5})


@pytest.mark.parametrize("multiples", [[1, 1], [2, 3], [3, 1], [0, 2]])
def test_tile(multiples):
    x = np.arange(6, dtype=F32).reshape(2, 3)
    check("Tile", {"input": x, "multiples": np.array(multiples, I32)})


GATHER_CASES = [  # params shape, indices shape, axis, batch_dims
    ((5, 3), (4,), 0, 0), ((5, 3), (2, 2), 1, 0), ((4, 5, 3), (), -1, 0),
    ((2, 5, 3), (2, 4), 1, 1), ((2, 3, 5, 4), (2, 3, 2), 2, 2), ((2, 3, 5, 4), (2, 6), 3, 1),
    ((2, 5, 3), (2, 4), 1, -1),
]


@pytest.mark.parametrize("case", GATHER_CASES, ids=range(len(GATHER_CASES)))
def test_gather_v2(case):
    pshape, ishape, axis, batch_dims = case
    rng = np.random.default_rng(19)
    params = rand(rng, pshape)
    limit = pshape[axis]
    indices = rng.integers(0, limit, ishape).astype(I32)
    check("GatherV2", {"params": params, "indices": indices, "axis": np.array(axis, I32)},
          {"batch_dims": batch_dims})
    if batch_dims == 0 and axis == 0:
        check("Gather", {"params": params, "indices": indices.astype(I64)})


def test_gather_rejects_bad_index():
    inputs = {"params": np.zeros((3, 2), F32), "indices": np.array([0, 3], I32),
              "axis": np.array(0, I32)}
    assert not check_or_both_fail("GatherV2", inputs, {})
    assert not check_or_both_fail("GatherV2", {**inputs, "indices": np.array([-1], I32)}, {})


@pytest.mark.parametrize("pshape,ishape", [((4, 5), (3, 2)), ((4, 5, 6), (2, 3, 1)),
                                           ((4, 5, 6), (2, 3)), ((3,), (1,))])
def test_gather_nd(pshape, ishape):
    rng = np.random.default_rng(20)
    params = rand(rng, pshape)
    depth = ishape[-1]
    indices = np.stack([rng.integers(0, pshape[d], ishape[:-1]) for d in range(depth)], -1)
    check("GatherNd", {"params": params, "indices": indices.astype(I32)})
    bad = indices.astype(I64)
    bad.reshape(-1, depth)[0, 0] = pshape[0]
    assert not check_or_both_fail("GatherNd", {"params": params, "indices": bad}, {})


@pytest.mark.parametrize("axis", [None, -1, 0, 1])
@pytest.mark.parametrize("dtype", [F32, I32])
def test_one_hot(axis, dtype):
    indices = np.array([[0, 2, -1], [3, 1, 5]], I64)
    attrs = {} if axis is None else {"axis": axis}
    check("OneHot", {"indices": indices, "depth": np.array(4, I32),
                     "on_value": np.array(5, dtype), "off_value": np.array(-1, dtype)}, attrs)
    check("OneHot", {"indices": indices.astype(np.uint8).clip(0, 9), "depth": np.array(3, I32),
                     "on_value": np.array(1, dtype), "off_value": np.array(0, dtype)}, attrs)


def test_where():
    rng = np.random.default_rng(21)
    check("Where", {"condition": rng.random((3, 4, 2)) < 0.4})
    check("Where", {"condition": rand(rng, (5, 3), I32, -1, 2)})
    check("Where", {"condition": np.zeros((0, 3), np.bool_)})
    check("Where", {"condition": rand(rng, (7,), F32, -1, 2).round()})


@pytest.mark.parametrize("op", ["Cumsum", "Cumprod"])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_scans(op, axis, exclusive, reverse):
    rng = np.random.default_rng(22)
    x = rand(rng, (3, 4, 5), lo=0.5, hi=1.5)
    check(op, {"x": x, "axis": np.array(axis, I32)}, {"exclusive": exclusive, "reverse": reverse})
    check(op, {"x": rand(rng, (3, 4), I32, -3, 4), "axis": np.array(-1, I32)},
          {"exclusive": exclusive, "reverse": reverse})


@pytest.mark.parametrize("k", [0, 1, 3, 6])
@pytest.mark.parametrize("dtype", [F32, I32])
def test_top_k(k, dtype):
    rng = np.random.default_rng(23)
    x = rand(rng, (2, 3, 6), dtype, -3, 3)  # small ints: plenty of ties
    check("TopKV2", {"input": x, "k": np.array(k, I32)})
    check("TopKV2", {"input": x, "k": np.array(k, I32)}, {"index_type": DType.INT64})
    # TF 2.21's CPU TopK (v1) kernel cannot be instantiated; it must equal TopKV2.
    want = run_tf("TopKV2", {"input": x, "k": np.array(k, I32)}, {})
    assert_matches("TopK", run_ours("TopK", [x], {"k": k}), want)


def test_top_k_unsorted_selects_the_same_elements():
    """sorted=False leaves the order to the implementation (TF's is heap order,
    ours is sorted); the chosen indices, ties included, must agree."""
    rng = np.random.default_rng(39)
    for x in (rand(rng, (3, 9), I32, -3, 3).astype(F32), rand(rng, (2, 300))):
        inputs = {"input": x, "k": np.array(5, I32)}
        want = run_tf("TopKV2", inputs, {"sorted": False})
        got = run_ours("TopKV2", inputs, {"sorted": False})
        np.testing.assert_array_equal(np.sort(got[1], -1), np.sort(want[1], -1))
        np.testing.assert_array_equal(np.take_along_axis(x, got[1], -1), got[0])


@pytest.mark.parametrize("axes", [[0], [1, -1], [], [0, 1, 2]])
def test_reverse_v2(axes):
    x = np.arange(24, dtype=F32).reshape(2, 3, 4)
    check("ReverseV2", {"tensor": x, "axis": np.array(axes, I32)})


@pytest.mark.parametrize("block", [2, 3])
def test_space_depth(block):
    rng = np.random.default_rng(24)
    x = rand(rng, (2, 2 * block, 3 * block, 3))
    out = check("SpaceToDepth", {"input": x}, {"block_size": block})[0]
    back = check("DepthToSpace", {"input": out}, {"block_size": block})[0]
    np.testing.assert_array_equal(back, x)
    # No CPU kernel for NCHW in TF: it must agree with NHWC up to the transpose.
    nchw = run_ours("SpaceToDepth", [to_nchw(x)], {"block_size": block, "data_format": "NCHW"})
    np.testing.assert_array_equal(nchw[0], to_nchw(out))
    d2s = run_ours("DepthToSpace", [to_nchw(out)], {"block_size": block, "data_format": "NCHW"})
    np.testing.assert_array_equal(d2s[0], to_nchw(x))


@pytest.mark.parametrize("case", [
    ((1, 4, 4, 2), [2, 2], [[0, 0], [0, 0]]),
    ((2, 5, 3, 1), [2, 2], [[1, 0], [0, 1]]),
    ((1, 6, 2), [3], [[2, 1]]),
    ((2, 4, 6, 3, 2), [2, 3], [[0, 2], [1, 2]]),
])
def test_space_batch_nd(case):
    shape, block, pads = case
    rng = np.random.default_rng(25)
    x = rand(rng, shape)
    out = check("SpaceToBatchND", {"input": x, "block_shape": np.array(block, I32),
                                   "paddings": np.array(pads, I32)})[0]
    back = check("BatchToSpaceND", {"input": out, "block_shape": np.array(block, I64),
                                    "crops": np.array(pads, I64)})[0]
    np.testing.assert_array_equal(back, x)


# ---------------------------------------------------------------- nn: convolution


def _conv_attrs(fmt: str, stride: int, dilation: int, padding: str,
                explicit: list[int] | None) -> dict[str, object]:
    def order(hw: tuple[int, int]) -> list[int]:
        return [1, 1, *hw] if fmt == "NCHW" else [1, *hw, 1]

    attrs: dict[str, object] = {"strides": order((stride, stride + (stride > 1))),
                                "dilations": order((dilation, dilation)), "padding": padding,
                                "data_format": fmt}
    if padding == "EXPLICIT":
        h, w = explicit[:2], explicit[2:]
        attrs["explicit_paddings"] = [0, 0, 0, 0, *h, *w] if fmt == "NCHW" else \
            [0, 0, *h, *w, 0, 0]
    return attrs


CONV_GRID = [(fmt, s, d, p) for fmt in ("NHWC", "NCHW") for s in (1, 2) for d in (1, 2)
             for p in ("SAME", "VALID", "EXPLICIT")]


@pytest.mark.parametrize("fmt,stride,dilation,padding", CONV_GRID,
                         ids=["-".join(map(str, c)) for c in CONV_GRID])
@pytest.mark.parametrize("seed", SEEDS[:2])
def test_conv2d(fmt, stride, dilation, padding, seed):
    rng = np.random.default_rng([seed, stride, dilation, len(padding), len(fmt)])
    n, h, w, c, o = 2, int(rng.integers(7, 12)), int(rng.integers(7, 12)), 3, 4
    kh, kw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    x, f = rand(rng, (n, h, w, c)), rand(rng, (kh, kw, c, o))
    attrs = _conv_attrs(fmt, stride, dilation, padding, list(rng.integers(0, 3, 4)))
    x = to_nchw(x) if fmt == "NCHW" else x
    check("Conv2D", {"input": x, "filter": f}, attrs, ir_attrs={"T": DType.FLOAT})
    check("DepthwiseConv2dNative", {"input": x, "filter": rand(rng, (kh, kw, c, 2))}, attrs)


def test_conv2d_defaults_int_and_groups():
    rng = np.random.default_rng(26)
    x, f = rand(rng, (1, 6, 6, 4)), rand(rng, (3, 3, 4, 5))
    check("Conv2D", {"input": x, "filter": f}, {"strides": [1, 1, 1, 1], "padding": "SAME"})
    xi, fi = rand(rng, (1, 5, 5, 2), I32, -5, 5), rand(rng, (2, 2, 2, 3), I32, -5, 5)
    check("Conv2D", {"input": xi, "filter": fi}, {"strides": [1, 1, 1, 1], "padding": "VALID"})
    check("Conv2D", {"input": x.astype(np.float64), "filter": f.astype(np.float64)},
          {"strides": [1, 2, 2, 1], "padding": "SAME"})
    grouped = rand(rng, (3, 3, 2, 6))  # 4 input channels in 2 groups of 2
    check("Conv2D", {"input": x, "filter": grouped}, {"strides": [1, 1, 1, 1], "padding": "SAME"})
    half = {"input": x.astype(np.float16), "filter": f.astype(np.float16)}
    out = check("Conv2D", half, {"strides": [1, 1, 1, 1], "padding": "VALID"}, rtol=2e-3)
    assert out[0].dtype == np.float16


def test_conv2d_is_fast():
    """im2col + one matmul: a 224x224x3 -> 32 conv must take well under a second."""
    rng = np.random.default_rng(27)
    x, f = rand(rng, (1, 224, 224, 3)), rand(rng, (3, 3, 3, 32))
    conv = get_kernel("Conv2D")
    conv({"strides": [1, 1, 1, 1], "padding": "SAME"}, [x[:, :8, :8], f])  # warm-up
    start = time.perf_counter()
    out = conv({"strides": [1, 2, 2, 1], "padding": "SAME"}, [x, f])[0]
    elapsed = time.perf_counter() - start
    assert out.shape == (1, 112, 112, 32)
    start = time.perf_counter()
    conv({"strides": [1, 1, 1, 1], "padding": "SAME"}, [x, f])
    elapsed = max(elapsed, time.perf_counter() - start)
    assert elapsed < 1.0, f"Conv2D took {elapsed:.2f}s"


BACKPROP_GRID = [(fmt, s, d, p) for fmt in ("NHWC", "NCHW") for s in (1, 2) for d in (1, 2)
                 for p in ("SAME", "VALID", "EXPLICIT") if not (s > 1 and d > 1)]


@pytest.mark.parametrize("fmt,stride,dilation,padding", BACKPROP_GRID,
                         ids=["-".join(map(str, c)) for c in BACKPROP_GRID])
def test_conv2d_backprop_input(fmt, stride, dilation, padding):
    rng = np.random.default_rng(stride + 5 * dilation + len(padding))
    n, h, w, c, o = 2, int(rng.integers(6, 10)), int(rng.integers(6, 10)), 3, 4
    f = rand(rng, (int(rng.integers(1, 4)), int(rng.integers(1, 4)), c, o))
    attrs = _conv_attrs(fmt, stride, dilation, padding, list(rng.integers(0, 3, 4)))
    x = rand(rng, (n, h, w, c))
    x = to_nchw(x) if fmt == "NCHW" else x
    dy = rand(rng, run_ours("Conv2D", [x, f], attrs)[0].shape)  # forward output shape
    inputs = {"input_sizes": np.array(x.shape, I32), "filter": f, "out_backprop": dy}
    # TF's CPU kernel covers NHWC without dilation; XLA is the reference elsewhere.
    cpu = fmt == "NHWC" and dilation == 1
    want = (run_tf if cpu else run_xla)("Conv2DBackpropInput", inputs, attrs)
    assert_matches("Conv2DBackpropInput", run_ours("Conv2DBackpropInput", inputs, attrs), want)
    # V2 takes the input itself rather than its shape; TF registers no kernel for it.
    got = run_ours("Conv2DBackpropInputV2", [x, f, dy], attrs)
    assert_matches("Conv2DBackpropInputV2", got, want)


FUSED_GRID = [(mode, pad, s, ac) for mode in ("REFLECT", "SYMMETRIC") for pad in ("SAME", "VALID")
              for s in (1, 2, 3) for ac in (False, True)]


def check_per_image(op: str, x: np.ndarray, rest: dict[str, object],
                    attrs: dict[str, object]) -> None:
    """TF 2.21's fused pad/resize convs feed image 0 to every batch entry (a TF
    bug); the reference is each image run through TF on its own, concatenated."""
    want = np.concatenate([run_tf(op, {"input": x[i:i + 1], **rest}, attrs)[0]
                           for i in range(x.shape[0])])
    assert_matches(op, run_ours(op, {"input": x, **rest}, attrs), [want])


@pytest.mark.parametrize("mode,padding,stride,align", FUSED_GRID,
                         ids=["-".join(map(str, c)) for c in FUSED_GRID])
def test_fused_pad_and_resize_conv(mode, padding, stride, align):
    rng = np.random.default_rng(stride * 2 + align + len(mode) + len(padding))
    x = rand(rng, (2, int(rng.integers(4, 7)), int(rng.integers(4, 7)), 3))
    kh, kw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
    f = rand(rng, (kh, kw, 3, 4))
    pads = np.array([[0, 0], rng.integers(0, 3, 2), rng.integers(0, 3, 2), [0, 0]], I32)
    attrs = {"mode": mode, "strides": [1, stride, stride + (stride == 2), 1], "padding": padding}
    check("FusedPadConv2D", {"input": x[:1], "paddings": pads, "filter": f}, attrs)
    check_per_image("FusedPadConv2D", x, {"paddings": pads, "filter": f}, attrs)
    size = np.array([int(rng.integers(3, 11)), int(rng.integers(3, 11))], I32)
    resize_attrs = {**attrs, "resize_align_corners": align}
    check_per_image("FusedResizeAndPadConv2D", x, {"size": size, "paddings": pads, "filter": f},
                    resize_attrs)


def test_fused_pad_conv_patch_offsets():
    """Strides larger than the filter: TF's fused kernel centres the patches
    differently from plain Conv2D, and we follow the fused kernel."""
    rng = np.random.default_rng(28)
    x, f = rand(rng, (1, 6, 8, 2)), rand(rng, (1, 1, 2, 3))
    pads = np.array([[0, 0], [0, 0], [0, 0], [0, 0]], I32)
    for padding in ("SAME", "VALID"):
        attrs = {"mode": "REFLECT", "strides": [1, 3, 4, 1], "padding": padding}
        fused = check("FusedPadConv2D", {"input": x, "paddings": pads, "filter": f}, attrs)[0]
        plain = run_tf("Conv2D", {"input": x, "filter": f},
                       {"strides": [1, 3, 4, 1], "padding": padding})[0]
        assert fused.shape == plain.shape and not np.allclose(fused, plain)


# ---------------------------------------------------------------- nn: dense, bias


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_matmul(ta, tb):
    rng = np.random.default_rng(29)
    a, b = rand(rng, (3, 5)), rand(rng, (5, 4))
    a, b = (a.T.copy() if ta else a), (b.T.copy() if tb else b)
    check("MatMul", {"a": a, "b": b}, {"transpose_a": ta, "transpose_b": tb})
    check("MatMul", {"a": a.astype(I32), "b": b.astype(I32)},
          {"transpose_a": ta, "transpose_b": tb})


@pytest.mark.parametrize("adj_x", [False, True])
@pytest.mark.parametrize("adj_y", [False, True])
def test_batch_matmul(adj_x, adj_y):
    rng = np.random.default_rng(30)

    def operand(batch: tuple[int, ...], rows: int, cols: int, adj: bool) -> np.ndarray:
        m = rand(rng, batch + (rows, cols))
        return np.swapaxes(m, -1, -2).copy() if adj else m

    attrs = {"adj_x": adj_x, "adj_y": adj_y}
    x, y = operand((2, 3), 4, 5, adj_x), operand((2, 3), 5, 2, adj_y)
    check("BatchMatMul", {"x": x, "y": y}, attrs)
    check("BatchMatMulV2", {"x": x, "y": operand((3,), 5, 2, adj_y)}, attrs)
    check("BatchMatMulV2", {"x": operand((2, 1), 4, 5, adj_x), "y": operand((3,), 5, 2, adj_y)},
          attrs)
    check("BatchMatMulV3", {"x": x, "y": y}, {**attrs, "Tout": DType.FLOAT})
    xi = rand(rng, x.shape, np.int8, -9, 9)
    yi = rand(rng, y.shape, np.int8, -9, 9)
    check("BatchMatMulV3", {"x": xi, "y": yi}, {**attrs, "Tout": DType.INT32})
    z = (x + 1j * x[..., ::-1, :]).astype(np.complex64)
    check("BatchMatMulV2", {"x": z, "y": y.astype(np.complex64)}, attrs)


@pytest.mark.parametrize("fmt,shape", [("NHWC", (2, 3, 4, 5)), ("NCHW", (2, 5, 3, 4)),
                                       ("NHWC", (3, 5)), ("NCHW", (3, 5)),
                                       ("NCHW", (2, 5, 4)), (None, (2, 3, 5))])
def test_bias_add(fmt, shape):
    rng = np.random.default_rng(31)
    x = rand(rng, shape)
    bias = rand(rng, (shape[1] if fmt == "NCHW" else shape[-1],))
    attrs = {} if fmt is None else {"data_format": fmt}
    check("BiasAdd", {"value": x, "bias": bias}, attrs)
    check("BiasAdd", {"value": x.astype(I32), "bias": bias.astype(I32)}, attrs)
    if fmt != "NCHW":
        check("BiasAddV1", {"value": x, "bias": bias})


# ---------------------------------------------------------------- nn: pooling


POOL_GRID = [(fmt, k, s, p) for fmt in ("NHWC", "NCHW") for k in (1, 2, 3) for s in (1, 2, 3)
             for p in ("SAME", "VALID")]


@pytest.mark.parametrize("fmt,k,s,padding", POOL_GRID,
                         ids=["-".join(map(str, c)) for c in POOL_GRID])
def test_pooling(fmt, k, s, padding):
    rng = np.random.default_rng(k * 10 + s + len(padding))
    x = rand(rng, (2, int(rng.integers(5, 9)), int(rng.integers(5, 9)), 3))
    x = to_nchw(x) if fmt == "NCHW" else x

    def order(h: int, w: int) -> list[int]:
        return [1, 1, h, w] if fmt == "NCHW" else [1, h, w, 1]

    attrs = {"ksize": order(k, k + 1), "strides": order(s, s), "padding": padding,
             "data_format": fmt}
    check("MaxPool", {"input": x}, attrs)
    check("AvgPool", {"value": x}, attrs)
    v2_inputs = {"input": x, "ksize": np.array(order(k, k + 1), I32),
                 "strides": np.array(order(s, s), I32)}
    v2 = {"padding": padding, "data_format": fmt}
    if fmt == "NHWC":
        check("MaxPoolV2", v2_inputs, v2)
    else:  # TF's CPU MaxPoolV2 rejects NCHW; it must equal MaxPool
        want = run_tf("MaxPool", {"input": x}, attrs)
        assert_matches("MaxPoolV2", run_ours("MaxPoolV2", v2_inputs, v2), want)


def test_pooling_explicit_and_int():
    rng = np.random.default_rng(32)
    x = rand(rng, (1, 7, 6, 2))
    check("MaxPool", {"input": x}, {"ksize": [1, 3, 2, 1], "strides": [1, 2, 1, 1],
                                    "padding": "EXPLICIT",
                                    "explicit_paddings": [0, 0, 1, 2, 0, 1, 0, 0]})
    check("MaxPool", {"input": rand(rng, (1, 5, 5, 2), I32, -9, 9)},
          {"ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1], "padding": "SAME"},
          ir_attrs={"T": DType.INT32})
    with pytest.raises(KernelError, match="AvgPool: unsupported padding 'EXPLICIT'"):
        run_ours("AvgPool", [x], {"ksize": [1, 2, 2, 1], "strides": [1, 1, 1, 1],
                                  "padding": "EXPLICIT"})


# ---------------------------------------------------------------- nn: normalisation


BN_GRID = [(op, fmt, train) for op in ("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3")
           for fmt in ("NHWC", "NCHW") for train in (False, True)]


def check_fused_bn(op: str, inputs: dict[str, object], attrs: dict[str, object],
                   rtol: float = RTOL) -> list[np.ndarray]:
    """Compare y, batch mean and batch variance; of the reserve spaces only count and dtype.

    The reserve spaces are opaque scratch for the gradient: TF's inference kernel
    leaves FusedBatchNormV3's third one uninitialised (values like -7.4e37 one run,
    1.52 the next) and its shape depends on the backend (oneDNN or Eigen), so
    their values and shapes are not TF's contract and are never compared.
    """
    want = run_tf(op, inputs, attrs)
    ours = run_ours(op, inputs, attrs)
    assert [o.dtype for o in ours[3:]] == [w.dtype for w in want[3:]], op
    assert_matches(op, ours[:3], want[:3], rtol)
    return ours


@pytest.mark.parametrize("op,fmt,training", BN_GRID, ids=["-".join(map(str, c)) for c in BN_GRID])
@pytest.mark.parametrize("factor", [1.0, 0.25])
def test_fused_batch_norm(op, fmt, training, factor):
    rng = np.random.default_rng(33)
    c = 5
    x = rand(rng, (2, 4, 3, c) if fmt == "NHWC" else (2, c, 4, 3), lo=-3, hi=5)
    stats = {"scale": rand(rng, (c,)), "offset": rand(rng, (c,)), "mean": rand(rng, (c,)),
             "variance": rand(rng, (c,), lo=0.1, hi=2.0)}
    attrs = {"epsilon": 0.001, "data_format": fmt, "is_training": training,
             "exponential_avg_factor": factor}
    check_fused_bn(op, {"x": x, **stats}, attrs)


def test_fused_batch_norm_defaults_and_half():
    rng = np.random.default_rng(34)
    c = 3
    stats = {"scale": rand(rng, (c,)), "offset": rand(rng, (c,)), "mean": rand(rng, (c,)),
             "variance": rand(rng, (c,), lo=0.1, hi=2.0)}
    x = rand(rng, (2, 3, 3, c))
    check_fused_bn("FusedBatchNormV3", {"x": x, **stats}, {"is_training": False})
    check_fused_bn("FusedBatchNormV3", {"x": x, **stats}, {})  # is_training defaults to True
    out = check_fused_bn("FusedBatchNormV3", {"x": x.astype(np.float16), **stats},
                         {"is_training": False}, rtol=2e-3)
    assert out[0].dtype == np.float16 and out[1].dtype == F32
    # 5-D inputs run on TF's oneDNN kernel, whose opaque reserve spaces differ
    # (zeros and a scalar); y and the statistics must still match.
    x5 = rand(rng, (2, 2, 3, 3, c))
    for fmt, data in (("NDHWC", x5), ("NCDHW", np.moveaxis(x5, -1, 1).copy())):
        for training in (False, True):
            attrs = {"is_training": training, "data_format": fmt}
            want = run_tf("FusedBatchNormV3", {"x": data, **stats}, attrs)
            got = run_ours("FusedBatchNormV3", {"x": data, **stats}, attrs)
            assert_matches("FusedBatchNormV3", got[:3], want[:3])


def _run_tf_graph_v8(op: str, inputs: dict[str, np.ndarray], attrs: dict[str, object]):
    """Run an op TF only accepts in old GraphDefs (producer version 8)."""
    from tensorflow.core.framework import attr_value_pb2

    graph = tf.Graph()
    with graph.as_default():
        for name, value in inputs.items():
            tf.compat.v1.placeholder(tf.as_dtype(value.dtype), name=name)
    graph_def = graph.as_graph_def()
    node = graph_def.node.add(name="op", op=op, input=list(inputs))
    node.attr["T"].CopyFrom(attr_value_pb2.AttrValue(type=tf.float32.as_datatype_enum))
    for key, value in attrs.items():
        node.attr[key].CopyFrom(attr_value_pb2.AttrValue(
            b=value) if isinstance(value, bool) else attr_value_pb2.AttrValue(f=value))
    graph_def.versions.producer = 8
    old = tf.Graph()
    with old.as_default():
        tf.graph_util.import_graph_def(graph_def, name="")
    with tf.compat.v1.Session(graph=old) as session:
        return [session.run("op:0", {f"{k}:0": v for k, v in inputs.items()})]


@pytest.mark.parametrize("scale_after", [False, True])
def test_batch_norm_with_global_normalization(scale_after):
    rng = np.random.default_rng(35)
    c = 4
    inputs = {"t": rand(rng, (2, 3, 3, c)), "m": rand(rng, (c,)),
              "v": rand(rng, (c,), lo=0.1, hi=2), "beta": rand(rng, (c,)), "gamma": rand(rng, (c,))}
    attrs = {"variance_epsilon": 0.001, "scale_after_normalization": scale_after}
    want = _run_tf_graph_v8("BatchNormWithGlobalNormalization", inputs, attrs)
    got = run_ours("BatchNormWithGlobalNormalization", inputs, attrs)
    assert_matches("BatchNormWithGlobalNormalization", got, want)


@pytest.mark.parametrize("radius,bias,alpha,beta", [(None, None, None, None), (2, 1.0, 0.1, 0.75),
                                                    (0, 2.0, 1e-3, 0.5), (7, 0.5, 0.3, 1.2)])
def test_lrn(radius, bias, alpha, beta):
    rng = np.random.default_rng(36)
    x = rand(rng, (2, 3, 4, 9))
    attrs = {k: v for k, v in (("depth_radius", radius), ("bias", bias), ("alpha", alpha),
                               ("beta", beta)) if v is not None}
    check("LRN", {"input": x}, attrs)


def _lstm_cell_inputs(rng: np.random.Generator, batch: int = 3, features: int = 4, units: int = 5) -> dict:
    return {"x": rand(rng, (batch, features)), "cs_prev": rand(rng, (batch, units), lo=-4, hi=4),
            "h_prev": rand(rng, (batch, units)), "w": rand(rng, (features + units, 4 * units), lo=-1, hi=1),
            "wci": rand(rng, (units,)), "wcf": rand(rng, (units,)), "wco": rand(rng, (units,)),
            "b": rand(rng, (4 * units,))}


@pytest.mark.parametrize("peephole", [False, True])
@pytest.mark.parametrize("cell_clip, forget_bias", [(3.0, 1.0), (-1.0, 0.0), (0.5, 2.5)])
def test_lstm_block_cell(peephole, cell_clip, forget_bias):
    rng = np.random.default_rng(37)
    check("LSTMBlockCell", _lstm_cell_inputs(rng),
          {"use_peephole": peephole, "cell_clip": cell_clip, "forget_bias": forget_bias})


def test_lstm_block_cell_refuses_mismatched_weights():
    inputs = _lstm_cell_inputs(np.random.default_rng(38))
    inputs["w"] = inputs["w"][:, :-1]
    with pytest.raises(KernelError, match="do not make an LSTM cell"):
        run_ours("LSTMBlockCell", inputs, {})


# ---------------------------------------------------------------- nn: activations


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("shape", [(5,), (3, 7), (2, 3, 4)])
def test_softmax(op, shape):
    rng = np.random.default_rng(37)
    check(op, {"logits": rand(rng, shape, lo=-20, hi=20)})


@pytest.mark.parametrize("alpha", [None, 0.1, 0.5, 1.5])
def test_leaky_relu(alpha):
    x = rand(np.random.default_rng(38), (4, 5), lo=-3, hi=3)
    check("LeakyRelu", {"features": x}, {} if alpha is None else {"alpha": alpha})


def test_leaky_relu_default_alpha_is_bit_exact():
    """Without the attribute, alpha is the OpDef's float32 0.2, not the double 0.2."""
    x = rand(np.random.default_rng(39), (64,), lo=-3, hi=-1)
    np.testing.assert_array_equal(run_ours("LeakyRelu", {"features": x}, {})[0],
                                  run_tf("LeakyRelu", {"features": x}, {})[0])


def test_int_relu():
    x = np.array([-5, -1, 0, 3, 9], I32)
    check("Relu", {"features": x})
    check("Relu6", {"features": x})


# ---------------------------------------------------------------- image


RESIZE_GRID = [(ac, hp, size) for ac, hp in ((False, False), (True, False), (False, True))
               for size in ((9, 13), (3, 2), (5, 7), (1, 1), (12, 4), (17, 29), (2, 3))]


@pytest.mark.parametrize("align,half,size", RESIZE_GRID,
                         ids=["-".join(map(str, c)) for c in RESIZE_GRID])
def test_resize(align, half, size):
    rng = np.random.default_rng(sum(size) + 2 * align + half)
    attrs = {"align_corners": align, "half_pixel_centers": half}
    for dtype, shape in ((F32, (2, 5, 7, 3)), (np.uint8, (1, 6, 11, 2)), (np.float64, (1, 3, 4, 1)),
                         (F32, (1, 13, 9, 2))):
        x = rand(rng, shape, dtype, 0, 255)
        inputs = {"images": x, "size": np.array(size, I32)}
        check("ResizeBilinear", inputs, attrs)
        check("ResizeNearestNeighbor", inputs, attrs)


def test_resize_defaults_and_bad_flags():
    x = np.arange(2 * 4 * 4 * 1, dtype=F32).reshape(2, 4, 4, 1)
    check("ResizeBilinear", {"images": x, "size": np.array([7, 3], I32)})
    check("ResizeNearestNeighbor", {"images": x, "size": np.array([7, 3], I32)})
    for op in ("ResizeBilinear", "ResizeNearestNeighbor"):
        assert not check_or_both_fail(op, {"images": x, "size": np.array([7, 3], I32)},
                                      {"align_corners": True, "half_pixel_centers": True})
