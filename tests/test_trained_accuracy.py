"""Top-1 accuracy of real trained models: float, after -O2, and in eight bits.

`digits_cnn` and `digits_mlp` (tools/make_fixtures.py) are Keras models
trained on scikit-learn's bundled 8x8 digits.  Each fixture carries its
360-image held-out split (`<name>_test.npz`) and the float top-1 that TF
measured on the frozen graph when it was built (`accuracy.test` in the .json).

Eight-bit graphs are GTT's deployment recipe followed by
`quantize_weights quantize_nodes`, once from GTT itself and once from gttc.
They run one image per call, as deployed: quantize_nodes computes activation
ranges at run time (Min/Max, RequantizationRange) over whatever is fed, so a
batch of 360 would quantize differently.  "cosine" is the mean over images of
the cosine between the eight-bit and the float logits.

Measured when these tests were written (TF 2.21; float top-1 99.17% cnn,
96.39% mlp; TF with its default oneDNN rewrites):

    GTT eight-bit, TF            cnn 99.17%  cosine 0.99887 (min 0.9759)
                                 mlp 96.39%  cosine 0.99991 (min 0.9991)
    GTT eight-bit, interpreter   cnn 99.17%  cosine 0.99846 (min 0.9750)
                                 mlp 96.39%  cosine 0.99985 (min 0.9991)
    gttc eight-bit, TF           cnn 98.89%  cosine 0.99878 (min 0.9871)
                                 mlp 96.39%  cosine 0.99991 (min 0.9991)
    gttc eight-bit, interpreter  cnn 99.17%  cosine 0.99838 (min 0.9786)
                                 mlp 96.39%  cosine 0.99985 (min 0.9991)

gttc's cnn graph differs from GTT's: gttc folds the two BN multiplies that
GTT leaves (QuantizedMul) and quantizes the bias adds (QuantizedBiasAdd for
GTT's float AddV2).

With TF_ENABLE_ONEDNN_OPTS=0 (TF's reference kernels; gttc's QuantizeV2
follows the same switch) TF gives cnn 98.89%, cosine 0.99885 (min 0.9772),
and the interpreter's logits equal TF's bit for bit on both models.  With
oneDNN on, TF swaps in its own quantization kernels, so TF and the
interpreter are each held to the bounds rather than to each other.  The
cnn's mean cosine stays under 0.999 in every configuration, hence the
0.998 bound.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pytest

from compiler import api
from compiler.frontends.graphdef import load_graph_bytes
from compiler.ir.graph import Graph
from compiler.passes.base import PASS_REGISTRY
from compiler.runtime.interpreter import Interpreter, run_graph
from compiler.runtime.kernels import KERNELS
from tests.conftest import FIXTURES, Model, load_model_fixture
from tests.oracle import gtt_deployment_recipe, gtt_transform, require_tf, run_tf

pytestmark = pytest.mark.tf

MODELS = ("digits_cnn", "digits_mlp")
MIN_FLOAT_TOP1 = 0.95
EIGHT_BIT_PASSES = ("quantize_weights", "quantize_nodes")
MAX_TOP1_DROP = 0.01  # one point of accuracy, either way
MIN_COSINE = 0.998  # cnn measures 0.9984-0.9989 (see above); mlp 0.9999


@dataclass(frozen=True)
class Trained:
    """A trained fixture with its held-out split and recorded float accuracy."""

    model: Model
    x: np.ndarray
    y: np.ndarray
    recorded_top1: float
    logits: str

    @property
    def input(self) -> str:
        return self.model.inputs[0]


@lru_cache(maxsize=None)
def trained(name: str) -> Trained:
    meta = json.loads((FIXTURES / f"{name}.json").read_text())
    split = np.load(FIXTURES / f"{name}_test.npz")
    return Trained(load_model_fixture(name), split["x"], split["y"], meta["accuracy"]["test"],
                   meta["output_roles"]["logits"])


def top1(logits: np.ndarray, labels: np.ndarray) -> float:
    return float(np.mean(np.argmax(logits, axis=-1) == labels))


def mean_cosine(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """(mean, min) over rows of the cosine between two logit matrices."""
    cos = np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    return float(cos.mean()), float(cos.min())


@lru_cache(maxsize=None)
def float_logits(name: str) -> np.ndarray:
    """TF's logits for the whole split in one call (the float graph has a dynamic batch)."""
    t = trained(name)
    return run_tf(t.model.data, {t.input: t.x}, [t.logits])[t.logits]


def tf_per_image(data: bytes, t: Trained) -> np.ndarray:
    """TF's logits, one image per Session.run on a single imported graph."""
    tf = require_tf()
    graph = tf.Graph()
    with graph.as_default():
        tf.import_graph_def(tf.compat.v1.GraphDef.FromString(data), name="")
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
    with tf.compat.v1.Session(graph=graph, config=config) as session:
        rows = [session.run(f"{t.logits}:0", {f"{t.input}:0": t.x[i:i + 1]}) for i in range(len(t.x))]
    return np.concatenate(rows)


def interpreter_per_image(graph: Graph, t: Trained) -> np.ndarray:
    """gttc's logits, one image per run of a single Interpreter."""
    interpreter = Interpreter(graph)
    rows = [interpreter.run({t.input: t.x[i:i + 1]}, [t.logits])[t.logits] for i in range(len(t.x))]
    return np.concatenate(rows)


def eight_bit_recipe(t: Trained) -> str:
    return f"{gtt_deployment_recipe(t.model.inputs, t.model.feeds)} {' '.join(EIGHT_BIT_PASSES)}"


def require_eight_bit_kernels(graph: Graph) -> None:
    """Skip until gttc's interpreter has a kernel for every eight-bit op in `graph`."""
    eight_bit = {op.type for op in graph if op.type.startswith(("Quantiz", "Dequantize", "Requantiz"))}
    missing = sorted(eight_bit - set(KERNELS))
    if missing:
        pytest.skip(f"gttc has no interpreter kernels yet for {missing}")


def assert_matmuls_are_eight_bit(graph: Graph) -> None:
    """No float Conv2D/MatMul is left: the accuracy below is really eight-bit accuracy."""
    types = [op.type for op in graph]
    assert not {"Conv2D", "MatMul"} & set(types)
    assert "QuantizedConv2D" in types or "QuantizedMatMul" in types


def check_eight_bit(label: str, logits: np.ndarray, name: str) -> None:
    """Top-1 within a point of float, logits nearly parallel to float's; print the numbers."""
    reference, labels = float_logits(name), trained(name).y
    accuracy, float_accuracy = top1(logits, labels), top1(reference, labels)
    cosine, worst = mean_cosine(logits, reference)
    print(f"{name} {label}: top-1 {accuracy:.4f} (float {float_accuracy:.4f}), "
          f"cosine mean {cosine:.5f} min {worst:.5f}")
    assert abs(accuracy - float_accuracy) <= MAX_TOP1_DROP
    assert cosine >= MIN_COSINE


# ---------------------------------------------------------------- float


@pytest.mark.parametrize("name", MODELS)
def test_float_top1_in_tf_equals_the_recorded_accuracy(name):
    t = trained(name)
    assert top1(float_logits(name), t.y) == t.recorded_top1
    assert t.recorded_top1 >= MIN_FLOAT_TOP1


@pytest.mark.parametrize("name", MODELS)
def test_float_top1_in_the_interpreter_equals_the_recorded_accuracy(name):
    t = trained(name)
    logits = run_graph(load_graph_bytes(t.model.data), {t.input: t.x}, [t.logits])[t.logits]
    assert top1(logits, t.y) == t.recorded_top1
    np.testing.assert_allclose(logits, float_logits(name), rtol=0, atol=1e-4)


@pytest.mark.parametrize("name", MODELS)
def test_o2_keeps_the_float_accuracy(name):
    t = trained(name)
    compiled = api.compile(t.model.data, t.model.inputs, t.model.outputs, opt_level=2).graph_def
    in_tf = run_tf(compiled, {t.input: t.x}, [t.logits])[t.logits]
    in_interpreter = run_graph(load_graph_bytes(compiled), {t.input: t.x}, [t.logits])[t.logits]
    assert top1(in_tf, t.y) == t.recorded_top1
    assert top1(in_interpreter, t.y) == t.recorded_top1


# ---------------------------------------------------------------- eight bits


@lru_cache(maxsize=None)
def gtt_eight_bit(name: str) -> bytes:
    t = trained(name)
    return gtt_transform(t.model.data, t.model.inputs, t.model.outputs, eight_bit_recipe(t))


@lru_cache(maxsize=None)
def gttc_eight_bit(name: str) -> bytes:
    missing = [p for p in EIGHT_BIT_PASSES if p not in PASS_REGISTRY]
    if missing:
        pytest.skip(f"gttc passes not implemented yet: {missing}")
    t = trained(name)
    return api.transform_graph(t.model.data, t.model.inputs, t.model.outputs, eight_bit_recipe(t))


@pytest.mark.parametrize("name", MODELS)
def test_gtt_eight_bit_accuracy_in_tf(name):
    data = gtt_eight_bit(name)
    assert_matmuls_are_eight_bit(load_graph_bytes(data))
    check_eight_bit("GTT eight-bit in TF", tf_per_image(data, trained(name)), name)


@pytest.mark.parametrize("name", MODELS)
def test_gtt_eight_bit_accuracy_in_the_interpreter(name):
    graph = load_graph_bytes(gtt_eight_bit(name))
    require_eight_bit_kernels(graph)
    check_eight_bit("GTT eight-bit in interpreter", interpreter_per_image(graph, trained(name)), name)


@pytest.mark.parametrize("name", MODELS)
def test_gttc_eight_bit_accuracy_in_tf(name):
    data = gttc_eight_bit(name)
    assert_matmuls_are_eight_bit(load_graph_bytes(data))
    check_eight_bit("gttc eight-bit in TF", tf_per_image(data, trained(name)), name)


@pytest.mark.parametrize("name", MODELS)
def test_gttc_eight_bit_accuracy_in_the_interpreter(name):
    graph = load_graph_bytes(gttc_eight_bit(name))
    require_eight_bit_kernels(graph)
    check_eight_bit("gttc eight-bit in interpreter", interpreter_per_image(graph, trained(name)), name)
