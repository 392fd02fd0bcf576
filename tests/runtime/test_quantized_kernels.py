"""The eight-bit kernels against TensorFlow, bit for bit.

Every case runs the same op through `tf.raw_ops` (TF's CPU kernels) and
through our kernel on seeded random data, and requires the same number of
outputs with identical dtypes, shapes and bits -- integer codes and the float
min/max alike.  Where TF rejects a case, our kernel must raise KernelError.

TF's x86 build hands some cases to oneDNN kernels that round differently
(QuantizeV2 MIN_FIRST to quint8 and SCALED + HALF_TO_EVEN to (q)int8,
Dequantize SCALED of (q)int8, QuantizedAvgPool).  Our kernels reproduce TF's
stock kernels unless asked for oneDNN's rounding (`onednn_rounding`): here each
in-process comparison uses the flavour this TF runs, and the stock kernels are
also checked against a TF run with oneDNN off in a child process, and against
TF's constant folding.

The last test quantizes a Keras CNN with GTT's quantize_nodes and runs the
GraphDef in the interpreter and in TF.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

import compiler.runtime.interpreter as interpreter  # noqa: E402
from compiler.frontends.graphdef import load_graph_bytes  # noqa: E402
from compiler.ir.dtypes import DType  # noqa: E402
from compiler.runtime.kernels import KernelError, get_kernel  # noqa: E402
from compiler.runtime.kernels.quantized_conversion import onednn_rounding, quantize_v2  # noqa: E402
from compiler.runtime.op_eval import evaluate_op  # noqa: E402
from tests.conftest import load_model_fixture  # noqa: E402
from tests.oracle import gtt_transform, run_tf  # noqa: E402

pytestmark = pytest.mark.tf

F32 = np.float32
QU8, QI8, QI32, QU16, QI16 = DType.QUINT8, DType.QINT8, DType.QINT32, DType.QUINT16, DType.QINT16
ALL_QTYPES = [QU8, QI8, QI32, QU16, QI16]
TF_REJECTS = (tf.errors.InvalidArgumentError, tf.errors.UnimplementedError,
              tf.errors.AbortedError)

# (min, max) pairs: around 0, from 0, mostly negative, not containing 0
# (positive and negative), tiny, min == max (at 0 and elsewhere), wide.
RANGES = [(-1.0, 1.0), (0.0, 6.0), (-3.7, 0.2), (0.5, 2.0), (-5.0, -0.5), (-1e-6, 2e-6),
          (2.0, 2.0), (0.0, 0.0), (-1000.0, 3000.0), (-0.3, 25.1)]
# Ops that reject empty ranges (max <= min) are fed these.
PROPER_RANGES = [r for r in RANGES if r[1] > r[0]]


# ---------------------------------------------------------------- harness


def _tf_runs_onednn() -> bool:
    from tensorflow.python.util import _pywrap_util_port

    return bool(_pywrap_util_port.IsMklEnabled())


@pytest.fixture(autouse=True)
def _follow_tf_onednn():
    """Round as the TensorFlow in this process does (oneDNN on x86 by default)."""
    with onednn_rounding(_tf_runs_onednn()):
        yield


@dataclass
class Q:
    """A quantized operand: the codes and the TF type they belong to."""

    codes: np.ndarray
    dtype: DType


def _tf_dtype(dtype: DType) -> object:
    return tf.as_dtype(dtype.tf_name)


def _tf_value(value: object) -> object:
    if isinstance(value, list):
        return [_tf_value(v) for v in value]
    if isinstance(value, Q):
        return tf.constant(value.codes, dtype=_tf_dtype(value.dtype))
    return tf.constant(value)


def _flat(inputs: dict[str, object]) -> list[np.ndarray]:
    flat: list[np.ndarray] = []
    for value in inputs.values():
        for v in value if isinstance(value, list) else [value]:
            flat.append(np.asarray(v.codes if isinstance(v, Q) else v))
    return flat


def _tf_attrs(attrs: dict[str, object]) -> dict[str, object]:
    return {k: _tf_dtype(v) if isinstance(v, DType) else v for k, v in attrs.items()}


def tf_outputs(op: str, inputs: dict[str, object], attrs: dict[str, object]) -> list[np.ndarray]:
    result = getattr(tf.raw_ops, op)(**{k: _tf_value(v) for k, v in inputs.items()},
                                     **_tf_attrs(attrs))
    return [np.asarray(r) for r in (result if isinstance(result, (list, tuple)) else [result])]


def our_outputs(op: str, inputs: dict[str, object], attrs: dict[str, object]) -> list[np.ndarray]:
    flat = _flat(inputs)
    saved = [x.copy() for x in flat]
    ir_attrs = {k: tuple(v) if isinstance(v, list) else v for k, v in attrs.items()}
    outs = get_kernel(op)(ir_attrs, flat)
    for x, before in zip(flat, saved):  # kernels must not write into operands
        np.testing.assert_array_equal(x, before)
    return outs


def _bits(x: np.ndarray) -> np.ndarray:
    """Integers as themselves, floats as their bit patterns (so -0.0 != 0.0)."""
    return x.view(f"u{x.dtype.itemsize}") if x.dtype.kind in "fV" else x


def assert_bit_exact(op: str, ours: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert len(ours) == len(want), f"{op}: {len(ours)} outputs, TF has {len(want)}"
    for i, (got, exp) in enumerate(zip(ours, want)):
        assert got.dtype == exp.dtype, f"{op}[{i}]: dtype {got.dtype} != TF {exp.dtype}"
        assert got.shape == exp.shape, f"{op}[{i}]: shape {got.shape} != TF {exp.shape}"
        differ = _bits(got) != _bits(exp)
        assert not differ.any(), (
            f"{op}[{i}]: {int(differ.sum())}/{exp.size} elements differ, first at "
            f"{np.argwhere(differ)[0].tolist()}: ours {got[differ][:5]} TF {exp[differ][:5]}")


def check(op: str, inputs: dict[str, object], attrs: dict[str, object] | None = None) -> bool:
    """Compare when TF accepts the case (True); when TF rejects it we must too (False)."""
    attrs = attrs or {}
    try:
        want = tf_outputs(op, inputs, attrs)
    except TF_REJECTS:
        with pytest.raises(KernelError):
            our_outputs(op, inputs, attrs)
        return False
    assert_bit_exact(op, our_outputs(op, inputs, attrs), want)
    return True


def codes(rng: np.random.Generator, shape: tuple[int, ...], dtype: DType) -> Q:
    """Random codes over the whole type, both extremes included when there is room."""
    info = np.iinfo(dtype.to_numpy())
    values = rng.integers(info.min, int(info.max) + 1, size=shape, dtype=np.int64)
    flat = values.reshape(-1)
    if flat.size >= 2:
        flat[:2] = info.min, info.max
    return Q(values.astype(dtype.to_numpy()), dtype)


def floats_around(rng: np.random.Generator, lo: float, hi: float, size: int) -> np.ndarray:
    """Values spilling past [lo, hi] on both sides, plus the ends, 0, and
    values halfway between 8-bit steps (where rounding modes differ)."""
    span = max(hi - lo, 1e-3)
    x = rng.uniform(lo - 0.25 * span, hi + 0.25 * span, size=size).astype(F32)
    halfway = lo + (np.arange(size // 5) + 0.5) * (hi - lo) / 255
    x[3:3 + halfway.size] = halfway
    x[:3] = lo, hi, 0.0
    return x


def scalar(value: float) -> np.ndarray:
    return np.asarray(value, dtype=F32)


# ---------------------------------------------------------------- QuantizeV2 / Dequantize

QUANTIZE_MODES = [("MIN_COMBINED", "HALF_AWAY_FROM_ZERO", False),
                  ("MIN_FIRST", "HALF_AWAY_FROM_ZERO", False),
                  ("SCALED", "HALF_AWAY_FROM_ZERO", False),
                  ("SCALED", "HALF_AWAY_FROM_ZERO", True),
                  ("SCALED", "HALF_TO_EVEN", False),
                  ("SCALED", "HALF_TO_EVEN", True)]


@pytest.mark.parametrize("mode, round_mode, narrow", QUANTIZE_MODES)
@pytest.mark.parametrize("qtype", ALL_QTYPES, ids=lambda d: d.tf_name)
def test_quantize_v2(qtype, mode, round_mode, narrow):
    rng = np.random.default_rng(11)
    onednn_without_kernel = qtype == QI32 and round_mode == "HALF_TO_EVEN" and not narrow
    compared = 0
    for (lo, hi), ensure in zip(RANGES * 2, [0.01] * len(RANGES) + [0.5, 0.0] * 5):
        if ensure == 0.0 and lo == hi == 0.0:
            continue  # a zero-width range divides by zero: TF's result is undefined
        x = floats_around(rng, lo, hi, 300).reshape(3, 4, 25)
        attrs = {"T": qtype, "mode": mode, "round_mode": round_mode, "narrow_range": narrow,
                 "ensure_minimum_range": ensure}
        try:
            compared += check("QuantizeV2", {"input": x, "min_range": scalar(lo),
                                             "max_range": scalar(hi)}, attrs)
        except tf.errors.NotFoundError:
            # TF's eager oneDNN rewrite has no qint32 kernel for SCALED + HALF_TO_EVEN.
            assert onednn_without_kernel
    assert compared > 0 or onednn_without_kernel


@pytest.mark.parametrize("mode, round_mode, narrow",
                         [("MIN_COMBINED", "HALF_AWAY_FROM_ZERO", False),
                          ("SCALED", "HALF_TO_EVEN", True)])
@pytest.mark.parametrize("axis, shape", [(0, (3, 4, 5)), (1, (2, 4, 3)), (3, (1, 2, 2, 6)),
                                         (2, (2, 3, 1))])
def test_quantize_v2_per_channel(mode, round_mode, narrow, axis, shape):
    rng = np.random.default_rng(12)
    channels = shape[axis]
    lows = rng.uniform(-4, 1, size=channels).astype(F32)
    highs = (lows + rng.uniform(0, 5, size=channels)).astype(F32)
    x = rng.uniform(-5, 7, size=shape).astype(F32)
    attrs = {"T": QI8, "mode": mode, "round_mode": round_mode, "narrow_range": narrow,
             "axis": axis}
    assert check("QuantizeV2", {"input": x, "min_range": lows, "max_range": highs}, attrs)
    dequant = {"mode": mode, "narrow_range": narrow, "axis": axis}
    for qtype in (QI8, QI32):
        assert check("Dequantize", {"input": codes(rng, shape, qtype), "min_range": lows,
                                    "max_range": highs}, dequant)


def test_quantize_rejections():
    x = np.linspace(-1, 1, 12, dtype=F32).reshape(3, 4)
    # max < min; MIN_FIRST per channel; HALF_TO_EVEN outside SCALED.
    assert not check("QuantizeV2", {"input": x, "min_range": scalar(1.0),
                                    "max_range": scalar(-1.0)}, {"T": QU8})
    assert not check("QuantizeV2", {"input": x, "min_range": np.zeros(4, F32),
                                    "max_range": np.ones(4, F32)},
                     {"T": QU8, "mode": "MIN_FIRST", "axis": 1})
    assert not check("Dequantize", {"input": Q(np.zeros((3, 4), np.uint8), QU8),
                                    "min_range": np.zeros(4, F32), "max_range": np.ones(4, F32)},
                     {"mode": "MIN_FIRST", "axis": 1})
    with pytest.raises((tf.errors.InvalidArgumentError, TypeError)):
        tf_outputs("QuantizeV2", {"input": x, "min_range": scalar(-1), "max_range": scalar(1)},
                   {"T": QU8, "mode": "MIN_FIRST", "round_mode": "HALF_TO_EVEN"})
    with pytest.raises(KernelError):
        our_outputs("QuantizeV2", {"input": x, "min_range": scalar(-1), "max_range": scalar(1)},
                    {"T": QU8, "mode": "MIN_FIRST", "round_mode": "HALF_TO_EVEN"})


@pytest.mark.parametrize("mode, round_mode, qtype", [("MIN_FIRST", "HALF_AWAY_FROM_ZERO", QU8),
                                                     ("SCALED", "HALF_TO_EVEN", QI8)],
                         ids=["min_first-quint8", "scaled-qint8"])
def test_quantize_v2_stock_kernel_for_const_inputs(mode, round_mode, qtype):
    """A graph Const input keeps TF's stock kernel even where oneDNN is on,
    and our stock rounding gives the same."""
    rng = np.random.default_rng(13)
    x = rng.uniform(-1.5, 2.5, size=4000).astype(F32)
    attrs = {"T": qtype, "mode": mode, "round_mode": round_mode}

    @tf.function
    def folded():
        return tf.raw_ops.QuantizeV2(input=tf.constant(x), min_range=-0.97, max_range=1.99,
                                     **_tf_attrs(attrs))

    want = [np.asarray(v) for v in folded()]
    inputs = {"input": x, "min_range": scalar(-0.97), "max_range": scalar(1.99)}
    with onednn_rounding(False):
        assert_bit_exact("QuantizeV2", our_outputs("QuantizeV2", inputs, attrs), want)


def test_onednn_quantize_rejects_ranks_it_cannot_take():
    ranges = {"min_range": scalar(-1), "max_range": scalar(2)}
    for x, mode, rounding, qtype in [
            (np.zeros((1,) * 6, F32), "MIN_FIRST", "HALF_AWAY_FROM_ZERO", QU8),
            (np.asarray(0.3, F32), "SCALED", "HALF_TO_EVEN", QI8)]:
        compared = check("QuantizeV2", {"input": x, **ranges},
                         {"T": qtype, "mode": mode, "round_mode": rounding})
        assert compared != _tf_runs_onednn()
    # ... but a rank-0 MIN_FIRST input is quantized (truncating, and wrapping past 255).
    for value in (0.3, -0.5, 0.49, 2.5):
        assert check("QuantizeV2", {"input": np.asarray(value, F32), **ranges},
                     {"T": QU8, "mode": "MIN_FIRST"})
    compared = check("Dequantize", {"input": Q(np.asarray(3, np.int8), QI8), **ranges},
                     {"mode": "SCALED"})
    assert compared != _tf_runs_onednn()


# The cases TF's x86 build hands to oneDNN, run by a TF with TF_ENABLE_ONEDNN_OPTS=0
# in a child process: there TF uses its stock kernels, and so must we.
_STOCK_TF = """
import json, sys
import numpy as np
import tensorflow as tf
folder = sys.argv[1]
arrays = np.load(folder + "/inputs.npz")
results = {}
for i, case in enumerate(json.load(open(folder + "/cases.json"))):
    def value(spec):
        array = arrays[spec[0]]
        return tf.constant(array, dtype=tf.as_dtype(spec[1])) if spec[1] else tf.constant(array)
    attrs = {k: tf.as_dtype(v["dtype"]) if isinstance(v, dict) else v
             for k, v in case["attrs"].items()}
    outs = getattr(tf.raw_ops, case["op"])(**{k: value(v) for k, v in case["inputs"].items()},
                                           **attrs)
    for j, out in enumerate(outs if isinstance(outs, (list, tuple)) else [outs]):
        results[f"{i}:{j}"] = np.asarray(out)
np.savez(folder + "/outputs.npz", **results)
"""


Case = tuple[str, dict[str, object], dict[str, object]]


def _stock_cases(rng: np.random.Generator) -> list[Case]:
    cases = []
    for lo, hi in [(-0.97, 1.99), (0.5, 2.0), (-3.7, 0.2), (-1e-6, 2e-6)]:
        x = floats_around(rng, lo, hi, 500).reshape(5, 100)
        ranges = {"min_range": scalar(lo), "max_range": scalar(hi)}
        cases.append(("QuantizeV2", {"input": x, **ranges}, {"T": QU8, "mode": "MIN_FIRST"}))
        for qtype in (QU8, QI8):
            cases.append(("QuantizeV2", {"input": x, **ranges},
                          {"T": qtype, "mode": "SCALED", "round_mode": "HALF_TO_EVEN"}))
            cases.append(("Dequantize", {"input": codes(rng, (5, 40), qtype), **ranges},
                          {"mode": "SCALED", "narrow_range": True}))
    for qtype in (QU8, QI8):
        for padding in ("SAME", "VALID"):
            cases.append(("QuantizedAvgPool", {"input": codes(rng, (2, 7, 6, 3), qtype),
                                               "min_input": scalar(-1), "max_input": scalar(1)},
                          {"ksize": [1, 2, 3, 1], "strides": [1, 2, 1, 1], "padding": padding}))
    return cases


def test_stock_kernels_without_onednn(tmp_path: Path):
    rng = np.random.default_rng(30)
    cases = _stock_cases(rng)
    arrays, specs = {}, []
    for i, (op, inputs, attrs) in enumerate(cases):
        spec_inputs = {}
        for name, value in inputs.items():
            quantized = isinstance(value, Q)
            arrays[f"{i}/{name}"] = value.codes if quantized else value
            spec_inputs[name] = [f"{i}/{name}", value.dtype.tf_name if quantized else None]
        spec_attrs = {k: {"dtype": v.tf_name} if isinstance(v, DType) else v
                      for k, v in attrs.items()}
        specs.append({"op": op, "inputs": spec_inputs, "attrs": spec_attrs})
    np.savez(tmp_path / "inputs.npz", **arrays)
    (tmp_path / "cases.json").write_text(json.dumps(specs))
    env = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": "0", "TF_CPP_MIN_LOG_LEVEL": "3"}
    subprocess.run([sys.executable, "-c", _STOCK_TF, str(tmp_path)], check=True, env=env,
                   timeout=300)
    want = np.load(tmp_path / "outputs.npz")
    differs_from_onednn = 0
    for i, (op, inputs, attrs) in enumerate(cases):
        with onednn_rounding(False):
            stock = our_outputs(op, inputs, attrs)
        assert_bit_exact(op, stock, [want[f"{i}:{j}"] for j in range(len(stock))])
        with onednn_rounding(True):
            onednn = our_outputs(op, inputs, attrs)
        differs_from_onednn += any(_bits(a).tobytes() != _bits(b).tobytes()
                                   for a, b in zip(stock, onednn))
    assert differs_from_onednn >= len(cases) // 2  # the two flavours really are different


@pytest.mark.parametrize("mode, narrow", [("MIN_COMBINED", False), ("MIN_FIRST", False),
                                          ("SCALED", False), ("SCALED", True)])
@pytest.mark.parametrize("qtype", ALL_QTYPES, ids=lambda d: d.tf_name)
def test_dequantize(qtype, mode, narrow):
    rng = np.random.default_rng(14)
    for lo, hi in RANGES:
        q = codes(rng, (4, 50), qtype)
        try:
            assert check("Dequantize", {"input": q, "min_range": scalar(lo),
                                        "max_range": scalar(hi)},
                         {"mode": mode, "narrow_range": narrow})
        except tf.errors.NotFoundError:
            # TF's oneDNN rewrite of SCALED has kernels for (q)int8 only.
            assert mode == "SCALED" and qtype.to_numpy().itemsize > 1


def test_dequantize_to_bfloat16():
    rng = np.random.default_rng(15)
    for qtype in (QU8, QI8, QI32):
        for lo, hi in PROPER_RANGES:
            assert check("Dequantize", {"input": codes(rng, (64,), qtype),
                                        "min_range": scalar(lo), "max_range": scalar(hi)},
                         {"mode": "MIN_COMBINED", "dtype": DType.BFLOAT16})


def test_flt_min_ranges_flush_denormals_like_tf():
    """GTT's quantize_weights gives an all-zero constant the range [0, FLT_MIN];
    its step is a denormal, which TF's kernels flush to zero (MIN_FIRST then
    dequantizes to NaN, products get a -0.0 range).  Every op must agree."""
    rng = np.random.default_rng(31)
    tiny = {"lo": scalar(0.0), "hi": scalar(np.finfo(np.float32).tiny)}
    unit = {"lo": scalar(-1.0), "hi": scalar(1.0)}
    for qtype in (QU8, QI8, QI32):
        for mode in ("MIN_COMBINED", "MIN_FIRST") + (("SCALED",) if qtype != QI32 else ()):
            assert check("Dequantize", {"input": codes(rng, (3, 7), qtype),
                                        "min_range": tiny["lo"], "max_range": tiny["hi"]},
                         {"mode": mode})
    x8, w8 = codes(rng, (1, 5, 5, 2), QU8), codes(rng, (3, 3, 2, 3), QU8)
    assert check("QuantizedConv2D", {"input": x8, "filter": w8, "min_input": tiny["lo"],
                                     "max_input": tiny["hi"], "min_filter": unit["lo"],
                                     "max_filter": unit["hi"]},
                 {"strides": [1, 1, 1, 1], "padding": "SAME"})
    for op, names in [("QuantizedMatMul", ("a", "b", "min_a", "max_a", "min_b", "max_b")),
                      ("QuantizedMul", ("x", "y", "min_x", "max_x", "min_y", "max_y"))]:
        assert check(op, dict(zip(names, (codes(rng, (4, 4), QU8), codes(rng, (4, 4), QU8),
                                          unit["lo"], unit["hi"], tiny["lo"], tiny["hi"]))))
    assert check("QuantizedBiasAdd", {"input": codes(rng, (2, 6), QU8),
                                      "bias": codes(rng, (6,), QU8),
                                      "min_input": unit["lo"], "max_input": unit["hi"],
                                      "min_bias": tiny["lo"], "max_bias": tiny["hi"]},
                 {"out_type": QI32})
    for op in ("QuantizedRelu", "QuantizedRelu6"):
        for qtype in (QU8, QI32):
            assert check(op, {"features": codes(rng, (4, 9), qtype), "min_features": tiny["lo"],
                              "max_features": tiny["hi"]}, {"out_type": qtype})
    wide = codes(rng, (4, 9), QI32)
    assert check("RequantizationRange", {"input": wide, "input_min": tiny["lo"],
                                         "input_max": tiny["hi"]})
    assert check("Requantize", {"input": wide, "input_min": tiny["lo"], "input_max": tiny["hi"],
                                "requested_output_min": unit["lo"],
                                "requested_output_max": unit["hi"]}, {"out_type": QU8})


# ---------------------------------------------------------------- Requantize / RequantizationRange


def _int32_samples(rng: np.random.Generator) -> list[Q]:
    moderate = rng.normal(0, 3e6, size=(8, 40)).astype(np.int32)
    return [codes(rng, (8, 40), QI32), Q(moderate, QI32), Q(np.abs(moderate), QI32)]


def test_requantize():
    rng = np.random.default_rng(16)
    in_ranges = [(-2.0 ** 31 * s, 2.0 ** 31 * s) for s in (1e-9, 3.7e-6, 0.01)] + \
        [(-3.0, 5.0), (0.5, 2.0), (-1e-3, -1e-4), (1.0, 1.0)]
    out_ranges = [(-1.0, 1.0), (0.0, 6.0), (-0.5, 0.0), (0.0, 0.0), (-2e-5, 1e-5), (-300.0, 7.0)]
    for out_type in (QU8, QI8):
        for q in _int32_samples(rng):
            for lo, hi in in_ranges:
                for want_lo, want_hi in out_ranges:
                    assert check("Requantize", {
                        "input": q, "input_min": scalar(lo), "input_max": scalar(hi),
                        "requested_output_min": scalar(want_lo),
                        "requested_output_max": scalar(want_hi)}, {"out_type": out_type})


def test_requantize_rejects_bad_requested_ranges():
    q = Q(np.arange(-5, 5, dtype=np.int32), QI32)
    for want_lo, want_hi in [(0.5, 1.0), (-1.0, -2.0)]:
        assert not check("Requantize", {
            "input": q, "input_min": scalar(-1), "input_max": scalar(1),
            "requested_output_min": scalar(want_lo), "requested_output_max": scalar(want_hi)},
            {"out_type": QU8})


def test_requantization_range():
    rng = np.random.default_rng(17)
    samples = _int32_samples(rng) + [Q(np.full((3, 3), 12345, np.int32), QI32),
                                     Q(np.zeros((0,), np.int32), QI32)]
    for q in samples:
        for lo, hi in RANGES + [(-2.0 ** 31 * 1e-7, 2.0 ** 31 * 1e-7)]:
            assert check("RequantizationRange", {"input": q, "input_min": scalar(lo),
                                                 "input_max": scalar(hi)})


# ---------------------------------------------------------------- conv / matmul


def _conv_cases(rng: np.random.Generator, count: int):
    for _ in range(count):
        n, c, o = rng.integers(1, 3), rng.integers(1, 5), rng.integers(1, 5)
        h, w = rng.integers(1, 10, size=2)
        kh, kw = rng.integers(1, 5, size=2)
        padding = str(rng.choice(["SAME", "VALID"]))
        if padding == "VALID":  # TF aborts the process (CHECK) on an empty output
            kh, kw = min(kh, h), min(kw, w)
        yield (n, h, w, c), (kh, kw, c, o), int(rng.integers(1, 5)), padding


def test_quantized_conv2d():
    rng = np.random.default_rng(18)
    compared = 0
    for i, (x_shape, w_shape, stride, padding) in enumerate(_conv_cases(rng, 80)):
        x_range, w_range = RANGES[i % len(RANGES)], RANGES[(3 * i + 1) % len(RANGES)]
        compared += check("QuantizedConv2D", {
            "input": codes(rng, x_shape, QU8), "filter": codes(rng, w_shape, QU8),
            "min_input": scalar(x_range[0]), "max_input": scalar(x_range[1]),
            "min_filter": scalar(w_range[0]), "max_filter": scalar(w_range[1])},
            {"out_type": QI32, "strides": [1, stride, stride, 1], "padding": padding})
    assert compared > 60
    # A VALID filter larger than the input: TF aborts the process (a CHECK); we raise.
    with pytest.raises(KernelError, match="larger than input"):
        our_outputs("QuantizedConv2D", {
            "input": codes(rng, (1, 2, 5, 1), QU8), "filter": codes(rng, (3, 1, 1, 1), QU8),
            "min_input": scalar(-1), "max_input": scalar(1), "min_filter": scalar(-1),
            "max_filter": scalar(1)}, {"strides": [1, 1, 1, 1], "padding": "VALID"})


def test_quantized_conv2d_windows_are_offset_like_tf():
    """Strided SAME/VALID windows start where TF's quantized conv puts them,
    which is not where Conv2D puts them (here: columns 1 and 4, not 0 and 3)."""
    x = Q(np.arange(6, dtype=np.uint8).reshape(1, 1, 6, 1), QU8)
    w = Q(np.ones((1, 1, 1, 1), np.uint8), QU8)
    inputs = {"input": x, "filter": w, "min_input": scalar(0), "max_input": scalar(255),
              "min_filter": scalar(0), "max_filter": scalar(255)}
    out = our_outputs("QuantizedConv2D", inputs, {"strides": [1, 3, 3, 1], "padding": "SAME"})
    assert out[0].reshape(-1).tolist() == [1, 4]
    assert check("QuantizedConv2D", inputs, {"strides": [1, 3, 3, 1], "padding": "SAME"})
    assert check("QuantizedConv2D", inputs, {"strides": [1, 4, 4, 1], "padding": "VALID"})


def test_quantized_mat_mul():
    rng = np.random.default_rng(19)
    compared = 0
    for i in range(40):
        m, k, n = rng.integers(1, 12, size=3)
        ta, tb = bool(i % 2), bool(i // 2 % 2)
        a_range, b_range = RANGES[i % len(RANGES)], RANGES[(i * 7 + 2) % len(RANGES)]
        compared += check("QuantizedMatMul", {
            "a": codes(rng, (k, m) if ta else (m, k), QU8),
            "b": codes(rng, (n, k) if tb else (k, n), QU8),
            "min_a": scalar(a_range[0]), "max_a": scalar(a_range[1]),
            "min_b": scalar(b_range[0]), "max_b": scalar(b_range[1])},
            {"Toutput": QI32, "transpose_a": ta, "transpose_b": tb})
    assert compared >= 20  # the rest have an empty range, which TF rejects


# ---------------------------------------------------------------- bias add / activations / pools


@pytest.mark.parametrize("qtype", [QU8, QI8], ids=lambda d: d.tf_name)
def test_quantized_bias_add(qtype):
    rng = np.random.default_rng(20)
    for i, shape in enumerate([(3, 5), (2, 4, 4, 3), (1, 7), (2, 3, 2, 2, 6)] * 5):
        x_range, b_range = RANGES[i % len(RANGES)], RANGES[(i * 3 + 5) % len(RANGES)]
        assert check("QuantizedBiasAdd", {
            "input": codes(rng, shape, qtype), "bias": codes(rng, shape[-1:], qtype),
            "min_input": scalar(x_range[0]), "max_input": scalar(x_range[1]),
            "min_bias": scalar(b_range[0]), "max_bias": scalar(b_range[1])}, {"out_type": QI32})


@pytest.mark.parametrize("op", ["QuantizedRelu", "QuantizedRelu6"])
@pytest.mark.parametrize("qtype", [QU8, QI32], ids=lambda d: d.tf_name)
def test_quantized_relu(op, qtype):
    rng = np.random.default_rng(21)
    for lo, hi in RANGES + [(-2.0 ** 31 * 1e-8, 2.0 ** 31 * 1e-8), (-3.0, 12.0)]:
        assert check(op, {"features": codes(rng, (5, 40), qtype), "min_features": scalar(lo),
                          "max_features": scalar(hi)}, {"out_type": qtype})


@pytest.mark.parametrize("op", ["QuantizedAvgPool", "QuantizedMaxPool"])
def test_quantized_pooling(op):
    rng = np.random.default_rng(22)
    compared = 0
    for i in range(30):
        shape = (int(rng.integers(1, 3)), *rng.integers(2, 9, size=2), int(rng.integers(1, 4)))
        k, s = rng.integers(1, 4, size=2)
        qtype = QI8 if i % 5 == 4 else QU8
        inputs = {"input": codes(rng, shape, qtype), "min_input": scalar(-1.5),
                  "max_input": scalar(3.0)}
        attrs = {"ksize": [1, int(k), int(k), 1], "strides": [1, int(s), int(s), 1],
                 "padding": "SAME" if i % 2 else "VALID"}
        try:
            compared += check(op, inputs, attrs)
        except tf.errors.NotFoundError:
            assert qtype == QI8  # qint8 pooling is registered in oneDNN builds only
    assert compared >= 20


# ---------------------------------------------------------------- add / mul broadcasting

# (x shape, y shape): same shapes, a scalar on either side (rank 0, [1], [1, 1, 1]),
# one element each, vector by last dim both ways, a matrix by a 3-D tensor, and
# [2,3,4] with [2,3,1] (which TF pairs by flat index modulo 6, not by broadcasting).
BROADCASTS = [((2, 3, 4), (2, 3, 4)), ((), (2, 3, 4)), ((2, 3, 4), ()), ((1,), (5, 2)),
              ((5, 2), (1, 1, 1)), ((1,), (1,)), ((4,), (2, 3, 4)), ((2, 3, 4), (4,)),
              ((3, 4), (2, 3, 4)), ((1, 4), (3, 4)), ((1, 5, 5, 8), (8,)),
              ((2, 3, 4), (2, 3, 1)), ((6,), (6,))]


@pytest.mark.parametrize("op", ["QuantizedAdd", "QuantizedMul"])
def test_quantized_add_mul(op):
    rng = np.random.default_rng(23)
    for i, (x_shape, y_shape) in enumerate(BROADCASTS * 3):
        x_range = PROPER_RANGES[i % len(PROPER_RANGES)]
        y_range = PROPER_RANGES[(i * 3 + 4) % len(PROPER_RANGES)]
        assert check(op, {"x": codes(rng, x_shape, QU8), "y": codes(rng, y_shape, QU8),
                          "min_x": scalar(x_range[0]), "max_x": scalar(x_range[1]),
                          "min_y": scalar(y_range[0]), "max_y": scalar(y_range[1])},
                     {"Toutput": QI32})
    for lo, hi in [(2.0, 2.0), (1.0, -1.0)]:  # empty ranges: TF refuses
        assert not check(op, {"x": codes(rng, (3,), QU8), "y": codes(rng, (3,), QU8),
                              "min_x": scalar(-1), "max_x": scalar(1),
                              "min_y": scalar(lo), "max_y": scalar(hi)})


@pytest.mark.parametrize("op", ["QuantizedAdd", "QuantizedMul"])
def test_quantized_add_mul_unsupported_broadcasts(op):
    rng = np.random.default_rng(24)
    ranges = {"min_x": scalar(-1), "max_x": scalar(1), "min_y": scalar(0), "max_y": scalar(2)}
    # Three collapsed dims: TF refuses.
    assert not check(op, {"x": codes(rng, (2, 1, 4), QU8), "y": codes(rng, (2, 3, 4), QU8),
                          **ranges})
    # Both operands expanded: TF writes only part of the output, so we refuse.
    with pytest.raises(KernelError, match="unwritten"):
        our_outputs(op, {"x": codes(rng, (4, 1), QU8), "y": codes(rng, (1, 3), QU8), **ranges},
                    {})


# ---------------------------------------------------------------- concat / reshape / resize


@pytest.mark.parametrize("qtype", [QU8, QI32], ids=lambda d: d.tf_name)
def test_quantized_concat(qtype):
    rng = np.random.default_rng(25)
    for i in range(24):
        count, rank = int(rng.integers(2, 4)), int(rng.integers(1, 4))
        axis = int(rng.integers(0, rank))
        base = list(rng.integers(1, 4, size=rank))
        values, mins, maxs = [], [], []
        for j in range(count):
            shape = list(base)
            shape[axis] = int(rng.integers(1, 4))
            values.append(codes(rng, tuple(shape), qtype))
            lo, hi = PROPER_RANGES[(i + j) % len(PROPER_RANGES)] if i % 3 else (-1.0, 1.0)
            mins.append(scalar(lo))
            maxs.append(scalar(hi))
        assert check("QuantizedConcat", {"concat_dim": np.int32(axis), "values": values,
                                         "input_mins": mins, "input_maxes": maxs})
    assert not check("QuantizedConcat", {"concat_dim": np.int32(-1), "values": values,
                                         "input_mins": mins, "input_maxes": maxs})


def test_quantized_reshape():
    rng = np.random.default_rng(26)
    for qtype in (QU8, QI32):
        for shape in ([4, -1], [-1], [2, 3, 4], [1, 24, 1]):
            assert check("QuantizedReshape", {"tensor": codes(rng, (2, 3, 4), qtype),
                                              "shape": np.array(shape, np.int32),
                                              "input_min": scalar(-2), "input_max": scalar(5)})


@pytest.mark.parametrize("dtype", [QU8, QI32, DType.FLOAT], ids=lambda d: d.tf_name)
def test_quantized_resize_bilinear(dtype):
    rng = np.random.default_rng(27)
    shapes = [(1, 4, 5, 1), (2, 3, 7, 3), (1, 5, 4, 2), (1, 1, 3, 3)]
    sizes = [(8, 10), (2, 3), (5, 4), (9, 13), (1, 1), (4, 17)]
    flags = [(False, False), (True, False), (False, True), (True, True)]
    for i, shape in enumerate(shapes):
        for j, size in enumerate(sizes):
            align, half = flags[(i + j) % len(flags)]
            images = rng.uniform(-3, 3, size=shape).astype(F32) if dtype == DType.FLOAT \
                else codes(rng, shape, dtype)
            assert check("QuantizedResizeBilinear", {
                "images": images, "size": np.array(size, np.int32), "min": scalar(-3.0),
                "max": scalar(3.0)}, {"align_corners": align, "half_pixel_centers": half})


# ---------------------------------------------------------------- a quantized graph end to end


def _fed_by_const(op) -> bool:
    source = op.operands[0].op
    while source.type == "Identity":
        source = source.operands[0].op
    return source.type == "Const"


def _stock_for_constants(op, inputs):
    """evaluate_op, except that a QuantizeV2 fed by a constant uses TF's stock
    kernel, as TF does for Const inputs (grappler folds Identity(Const))."""
    if op.type == "QuantizeV2" and _fed_by_const(op):
        return [np.asarray(v) for v in quantize_v2(op.attrs, inputs, onednn=False)]
    return evaluate_op(op, inputs)


def test_quantized_graph_runs_in_the_interpreter(monkeypatch):
    """keras_small_cnn through GTT's quantize_weights + quantize_nodes.  Fed
    TF's own inputs, every eight-bit node reproduces TF's outputs exactly.
    End to end the interpreter is off by up to 4.7e-4 (quantization itself
    moves these softmax outputs by 1.6e-3): TF keeps its stock QuantizeV2 for
    weights fed by Identity(Const), which a kernel cannot see, and the float
    ops in between (DepthwiseConv2dNative, Rsqrt, Mean, Softmax) are an ulp off
    here and there, which moves a code now and then.  With the stock kernel for
    constant-fed QuantizeV2 only the float ulps remain (measured 1.5e-8)."""
    model = load_model_fixture("keras_small_cnn")
    data = gtt_transform(model.data, model.inputs, model.outputs,
                         "quantize_weights quantize_nodes")
    graph = load_graph_bytes(data)
    eight_bit = [op for op in graph if op.type.startswith("Quantiz") or
                 op.type in ("Dequantize", "Requantize", "RequantizationRange")]
    assert len({op.type for op in eight_bit}) >= 9
    names = [f"{op.name}:{i}" for op in eight_bit for i in range(len(op.results))]
    operands = sorted({v.name for op in eight_bit for v in op.operands})
    tf_values = run_tf(data, model.feeds, names + operands + model.outputs)
    for op in eight_bit:
        got = _stock_for_constants(op, [tf_values[v.name] for v in op.operands])
        want = [tf_values[f"{op.name}:{i}"] for i in range(len(op.results))]
        assert_bit_exact(f"{op.type} {op.name}", got, want)

    def worst_difference() -> float:
        ours = interpreter.run_graph(graph, model.feeds, model.outputs)
        for name in model.outputs:
            assert ours[name].shape == tf_values[name].shape
            assert ours[name].dtype == tf_values[name].dtype
        return max(float(np.abs(ours[name].astype(np.float64) - tf_values[name]).max())
                   for name in model.outputs)

    assert worst_difference() < 1e-3
    monkeypatch.setattr(interpreter, "evaluate_op", _stock_for_constants)
    assert worst_difference() < 1e-6
