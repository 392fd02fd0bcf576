"""sparsify_gather: the same graph as GTT's, and a graph that computes what the original did.

The models are tiny TF1 "linear models" built with TensorFlow at run time
(seeded, frozen with convert_variables_to_constants, `_output_shapes` on):
sparse `[vocab, 1]` weight columns gathered by int64 ids, as tf.gather
(GatherV2), the old Gather op and a partitioned tf.nn.embedding_lookup.  For
each, gttc's output must equal GTT's (`assert_same_graphdef`), and after the
table initializers ran (`group_deps`, as GTT's output requires) it must give
the original's values in TensorFlow and in gttc's interpreter.  Gathers GTT
fails on, or turns into a graph TensorFlow cannot run, are left alone, and
the tests show GTT's failure next to gttc's working output.
"""
from __future__ import annotations

import functools
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import pytest

from compiler.api import transform_graph
from compiler.backends.graphdef import emit_graphdef_bytes
from compiler.errors import GttcError, PassFailure
from compiler.frontends.graphdef import load_graph_bytes
from compiler.ir.parser import parse_graph
from compiler.passes import run_pipeline
from compiler.proto import graph_pb2
from compiler.runtime.interpreter import Interpreter
from tests.conftest import load_model_fixture
from tests.oracle import gtt_transform, require_tf
from tests.passes.test_gtt_differential import assert_same_graphdef
from tests.passes.test_lit import LIT_FILES, LitCase

PASS = "sparsify_gather"
INIT = "group_deps"
SPARSIFY_LIT = [p for p in LIT_FILES if p.stem.startswith("sparsify_gather")]
# Lit graphs GTT handles (the others pin where gttc differs: tests below show GTT's side).
SAME_AS_GTT_LIT = [p for p in SPARSIFY_LIT if p.stem in ("sparsify_gather", "sparsify_gather_cleanup")]


@dataclass(frozen=True)
class Model:
    """A frozen GraphDef with its I/O names and seeded feeds."""

    data: bytes
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    feeds: dict

    def transformed(self, transforms: str = PASS) -> bytes:
        return transform_graph(self.data, list(self.inputs), list(self.outputs), transforms)

    def gtt(self, transforms: str = PASS) -> bytes:
        return gtt_transform(self.data, list(self.inputs), list(self.outputs), transforms)


# -- building models with TensorFlow --------------------------------------------------------


def sparse_column(rng: np.random.Generator, rows: int, density: float = 0.35) -> np.ndarray:
    """A [rows, 1] float column: mostly exact zeros, the rest well above GTT's 1e-5 cut."""
    values = rng.uniform(0.05, 2.0, (rows, 1)) * rng.choice([-1.0, 1.0], (rows, 1))
    values[rng.random((rows, 1)) > density] = 0.0
    return values.astype(np.float32)


def freeze(build: Callable[[object, np.random.Generator], dict], outputs: tuple[str, ...]) -> Model:
    """Build a TF1 graph with variables, initialize, freeze it; `build` returns the feeds."""
    tf = require_tf()
    tf1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        tf1.set_random_seed(0)
        feeds = build(tf, np.random.default_rng(7))
        with tf1.Session(graph=graph) as session:
            session.run(tf1.global_variables_initializer())
            frozen = tf1.graph_util.convert_variables_to_constants(
                session, graph.as_graph_def(add_shapes=True), list(outputs))
    return Model(frozen.SerializeToString(), tuple(feeds), outputs, feeds)


def _variable(tf, name: str, value: np.ndarray, **kwargs):
    return tf.compat.v1.get_variable(name, initializer=value, use_resource=False, **kwargs)


def _linear(tf, rng: np.random.Generator) -> dict:
    """score = w_age[age] + w_zip[zip] + bias: GatherV2 (tf.gather) and the old Gather op."""
    age = tf.compat.v1.placeholder(tf.int64, [None], name="age")
    zip_code = tf.compat.v1.placeholder(tf.int64, [None], name="zip")
    w_age = _variable(tf, "linear/age/weights", sparse_column(rng, 10))
    w_zip = _variable(tf, "linear/zip/weights", sparse_column(rng, 16))
    bias = _variable(tf, "linear/bias", np.float32(0.25))
    by_age = tf.gather(w_age, age, name="linear/age/lookup")
    by_zip = tf.raw_ops.Gather(params=w_zip, indices=zip_code, name="linear/zip/lookup")
    tf.identity(tf.reduce_sum(by_age + by_zip, axis=1) + bias, name="score")
    return {"age": np.array([0, 3, 9, 3, 5, 1], np.int64), "zip": np.arange(0, 16, 3, dtype=np.int64)[:6]}


def _partitioned(tf, rng: np.random.Generator) -> dict:
    """A weight column in two partitions (DynamicPartition + one GatherV2 each) and 2-D ids."""
    def initializer(shape, dtype=None, partition_info=None):
        return tf.constant(sparse_column(rng, shape[0]))

    ids = tf.compat.v1.placeholder(tf.int64, [None], name="ids")
    pairs = tf.compat.v1.placeholder(tf.int64, [None, 2], name="pairs")
    weights = tf.compat.v1.get_variable("weights", shape=[12, 1], initializer=initializer, use_resource=False,
                                        partitioner=tf.compat.v1.fixed_size_partitioner(2))
    crossed = _variable(tf, "crossed", sparse_column(rng, 7))
    single = tf.compat.v1.nn.embedding_lookup(weights, ids, partition_strategy="mod")
    pair = tf.compat.v1.nn.embedding_lookup(crossed, pairs)
    tf.identity(tf.reduce_sum(single, axis=1) + tf.reduce_sum(pair, axis=[1, 2]), name="score")
    return {"ids": np.array([0, 5, 11, 6, 7, 2], np.int64), "pairs": np.array([[0, 1], [6, 3], [2, 2], [4, 5],
                                                                             [1, 0], [3, 6]], np.int64)}


def _tiny(tf, rng: np.random.Generator) -> dict:
    """Weights below GTT's 1e-5 cut: the lookup returns 0 for them.

    GTT compares the float32 weight with the double 1e-5, so 1e-5 itself
    (stored as 9.99999975e-06) is below the cut too.
    """
    ids = tf.compat.v1.placeholder(tf.int64, [None], name="ids")
    column = np.array([[0.5], [1e-6], [0.0], [-9e-6], [1e-5], [-2.0]], np.float32)
    tf.identity(tf.gather(_variable(tf, "w", column), ids), name="out")
    return {"ids": np.arange(6, dtype=np.int64)}


BUILDERS = {"linear": (_linear, ("score",)), "partitioned": (_partitioned, ("score",)), "tiny": (_tiny, ("out",))}


@functools.lru_cache(maxsize=None)
def model(name: str) -> Model:
    build, outputs = BUILDERS[name]
    return freeze(build, outputs)


# -- running graphs ----------------------------------------------------------------------------


def run_tf(data: bytes, feeds: dict, outputs: tuple[str, ...], init: Optional[str] = None) -> dict:
    """Run a GraphDef in a TF1 session, first running op `init` (the table initializers) if given."""
    tf = require_tf()
    graph = tf.Graph()
    with graph.as_default():
        tf.import_graph_def(tf.compat.v1.GraphDef.FromString(data), name="")
    with tf.compat.v1.Session(graph=graph) as session:
        if init is not None:
            session.run(init)
        values = session.run([f"{o}:0" for o in outputs], {f"{k}:0": v for k, v in feeds.items()})
    return dict(zip(outputs, values))


def run_interpreter(data: bytes, feeds: dict, outputs: tuple[str, ...], init: Optional[str] = None) -> dict:
    interpreter = Interpreter(load_graph_bytes(data))
    if init is not None:
        interpreter.run({}, [], targets=[init])
    return interpreter.run(feeds, list(outputs))


def assert_equal_outputs(got: dict, want: dict) -> None:
    assert got.keys() == want.keys()
    for name in want:
        assert got[name].dtype == want[name].dtype and got[name].shape == want[name].shape, name
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def notes(data: bytes, inputs, outputs, transforms: str = PASS) -> list[str]:
    report = run_pipeline(load_graph_bytes(data), transforms, list(inputs), list(outputs))
    return [note for record in report.records for note in record.notes]


def ops_of(data: bytes) -> dict[str, str]:
    return {node.name: node.op for node in graph_pb2.GraphDef.FromString(data).node}


# -- the same graph as GTT -------------------------------------------------------------------


@pytest.mark.tf
@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_same_graph_as_gtt(name: str) -> None:
    m = model(name)
    assert_same_graphdef(m.transformed(), m.gtt())


@pytest.mark.tf
@pytest.mark.parametrize("path", SAME_AS_GTT_LIT, ids=[p.stem for p in SAME_AS_GTT_LIT])
def test_lit_graph_same_as_gtt(path: Path) -> None:
    case = LitCase.load(path)
    data = emit_graphdef_bytes(parse_graph(case.graph_text, str(path)))
    ours = transform_graph(data, case.inputs, case.outputs, case.pipeline)
    assert_same_graphdef(ours, gtt_transform(data, case.inputs, case.outputs, case.pipeline))


@pytest.mark.tf
def test_left_alone_lit_graph_is_refused_by_gtt() -> None:
    case = LitCase.load(next(p for p in SPARSIFY_LIT if p.stem == "sparsify_gather_left_alone"))
    data = emit_graphdef_bytes(parse_graph(case.graph_text))
    with pytest.raises(Exception, match="Transform only applicable"):
        gtt_transform(data, case.inputs, case.outputs, case.pipeline)


@pytest.mark.tf
def test_cleaned_up_lit_graph_runs_in_tf() -> None:
    """After GTT's clean-up (a ConcatV2 turned Identity keeps Tidx, which TF ignores) the output runs."""
    case = LitCase.load(next(p for p in SPARSIFY_LIT if p.stem == "sparsify_gather_cleanup"))
    data = emit_graphdef_bytes(parse_graph(case.graph_text))
    ours = transform_graph(data, case.inputs, case.outputs, case.pipeline)
    assert ops_of(ours)["concat"] == "Identity"
    outputs = ("out", "concat", "concat3")
    got = run_tf(ours, {}, outputs, init="init")
    # The original's Assign on a Const does not load in TF; the interpreter computes only `out`.
    np.testing.assert_array_equal(got["out"], Interpreter(parse_graph(case.graph_text)).run({}, ["out"])["out"])
    np.testing.assert_array_equal(got["concat"], [[7.0], [8.0]])
    np.testing.assert_array_equal(got["concat3"], [[7.0], [8.0], [9.0]])


@pytest.mark.tf
@pytest.mark.parametrize("fixture", ["devices_gather", "keras_small_cnn", "tf1_control_flow"])
def test_graphs_without_matches_same_as_gtt(fixture: str) -> None:
    """Nothing to convert: GTT still strips `_output_shapes`, drops versions and adds `group_deps`."""
    m = load_model_fixture(fixture)
    ours = transform_graph(m.data, m.inputs, m.outputs, PASS)
    assert_same_graphdef(ours, gtt_transform(m.data, m.inputs, m.outputs, PASS))
    assert ops_of(ours)[INIT] == "NoOp"


# -- the output computes the original's values --------------------------------------------------


@pytest.mark.tf
@pytest.mark.parametrize("name", ["linear", "partitioned"])
def test_output_gives_the_original_values_in_tf(name: str) -> None:
    m = model(name)
    original = run_tf(m.data, m.feeds, m.outputs)
    assert_equal_outputs(run_tf(m.transformed(), m.feeds, m.outputs, init=INIT), original)
    assert_equal_outputs(run_tf(m.gtt(), m.feeds, m.outputs, init=INIT), original)


@pytest.mark.tf
def test_output_gives_the_original_values_in_the_interpreter() -> None:
    m = model("linear")
    ours = m.transformed()
    assert "LookupTableFind" in ops_of(ours).values() and "Gather" not in ops_of(ours).values()
    original = run_tf(m.data, m.feeds, m.outputs)
    assert_equal_outputs(run_interpreter(m.data, m.feeds, m.outputs), original)
    assert_equal_outputs(run_interpreter(ours, m.feeds, m.outputs, init=INIT), original)


@pytest.mark.tf
def test_lookups_need_the_initializer_in_tf_and_in_the_interpreter() -> None:
    m = model("linear")
    ours = m.transformed()
    with pytest.raises(Exception, match="Table not initialized"):
        run_tf(ours, m.feeds, m.outputs)
    with pytest.raises(GttcError, match="Table not initialized"):
        run_interpreter(ours, m.feeds, m.outputs)
    interpreter = Interpreter(load_graph_bytes(ours))
    assert interpreter.initialize_tables() == 2
    assert_equal_outputs(interpreter.run(m.feeds, list(m.outputs)), run_tf(m.data, m.feeds, m.outputs))


@pytest.mark.tf
def test_ids_outside_the_vocabulary_read_zero() -> None:
    """The original Gather fails on them; the lookup's default is 0, in TF and in the interpreter."""
    m = model("linear")
    age, zip_code = np.array([2, 10, 99, -1], np.int64), np.array([16, 40, 0, 3], np.int64)
    feeds = {"age": age, "zip": zip_code}
    with pytest.raises(Exception, match="is not in"):
        run_tf(m.data, feeds, m.outputs)
    in_tf = run_tf(m.transformed(), feeds, m.outputs, init=INIT)
    assert_equal_outputs(run_interpreter(m.transformed(), feeds, m.outputs, init=INIT), in_tf)
    weights = constants(m.data)
    expected = (lookup(weights["linear/age/weights"], age) + lookup(weights["linear/zip/weights"], zip_code)
                + weights["linear/bias"])
    np.testing.assert_array_equal(in_tf["score"], expected)


def constants(data: bytes) -> dict[str, np.ndarray]:
    return {op.name: op.attrs["value"].numpy() for op in load_graph_bytes(data) if op.type == "Const"}


def lookup(column: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Row `id` of a [N, 1] column, 0 for ids outside [0, N)."""
    inside = (ids >= 0) & (ids < column.shape[0])
    return np.where(inside, column[np.clip(ids, 0, column.shape[0] - 1), 0], np.float32(0))


@pytest.mark.tf
def test_weights_below_the_cut_read_zero_like_gtt() -> None:
    m = model("tiny")
    original = run_tf(m.data, m.feeds, m.outputs)["out"]
    in_tf = run_tf(m.transformed(), m.feeds, m.outputs, init=INIT)
    assert_equal_outputs(run_tf(m.gtt(), m.feeds, m.outputs, init=INIT), in_tf)
    assert_equal_outputs(run_interpreter(m.transformed(), m.feeds, m.outputs, init=INIT), in_tf)
    kept = np.abs(original.astype(np.float64)) >= 1e-5
    np.testing.assert_array_equal(in_tf["out"], np.where(kept, original, np.float32(0)))
    assert kept.reshape(-1).tolist() == [True, False, False, False, False, True]


def test_lit_graph_values_before_and_after_in_the_interpreter() -> None:
    """Without TensorFlow: the converted lit graph computes the original's values (1e-6 reads 0)."""
    case = LitCase.load(next(p for p in SPARSIFY_LIT if p.stem == "sparsify_gather"))
    original = parse_graph(case.graph_text)
    converted = run_pipeline(parse_graph(case.graph_text), case.pipeline, case.inputs, case.outputs).graph
    feeds = {"ids": np.array([0, 2, 1, 5, 4, 0], np.int64)}
    before = Interpreter(original).run(feeds, ["out"])["out"]
    interpreter = Interpreter(converted)
    interpreter.run({}, [], targets=[INIT])
    np.testing.assert_array_equal(interpreter.run(feeds, ["out"])["out"], before)
    tiny = interpreter.run({"ids": np.array([3], np.int64)}, ["out"])["out"]
    assert Interpreter(original).run({"ids": np.array([3], np.int64)}, ["out"])["out"].item() == np.float32(1e-6)
    assert tiny.item() == 0.0


# -- the report -----------------------------------------------------------------------------------


@pytest.mark.tf
def test_report_says_what_was_converted_and_how_to_initialize() -> None:
    m = model("linear")
    lines = notes(m.data, m.inputs, m.outputs)
    assert lines[0].startswith("converted 2 of 2 Gather/GatherV2 ops into HashTable lookups: "
                               "'linear/zip/lookup' (Gather; 'linear/zip/weights': ")
    assert "'linear/age/lookup' (GatherV2; 'linear/age/weights': " in lines[0]
    kept = [(int(k), int(n)) for k, n in re.findall(r"(\d+) of (\d+) rows non-zero", lines[0])]
    assert [n for _, n in kept] == [16, 10] and all(0 < k < n for k, n in kept), kept
    assert any(line.startswith("the tables are filled by NoOp 'group_deps': run it once before the lookups")
               for line in lines)
    assert any(line.startswith("removed '_output_shapes' from ") for line in lines)


# -- what gttc leaves alone, and what GTT does instead ---------------------------------------------

HEADER = """graph {
  %ids = Placeholder() {dtype = i64, shape = shape<3>} : i64[3]
  %ids32 = Placeholder() {dtype = i32, shape = shape<3>} : i32[3]
  %axis = Const() {dtype = i32, value = dense<i32[], [0]>} : i32[]
  %w = Const() {dtype = f32, value = dense<f32[4,1], [0.0, 2.5, 0.0, -1.0]>} : f32[4,1]
  %w/read = Identity(%w) {T = f32} : f32[4,1]
"""
GATHER = "{Tindices = i64, Tparams = f32, validate_indices = true}"
GATHER_V2 = "{Taxis = i32, Tindices = i64, Tparams = f32, batch_dims = 0}"


@dataclass(frozen=True)
class LeftAlone:
    """A graph with one Gather gttc keeps, its reason, and what GTT does with it."""

    body: str
    reason: str
    gtt_fails: str = ""       # GTT's error, if it stops
    tf_rejects: str = ""      # TensorFlow's error on GTT's output, if it loads but cannot run
    gtt_drops: str = ""       # an input GTT's output silently loses
    kept: int = 1             # how many Gathers stay

    @property
    def text(self) -> str:
        return HEADER + self.body + "}\n"


LEFT_ALONE = {
    "wide weights": LeftAlone(
        """  %m = Const() {dtype = f32, value = dense<f32[4,2], [0.0, 1.0, 0.0, 0.0, 3.0, 0.0, 0.0, 0.0]>} : f32[4,2]
  %m/read = Identity(%m) {T = f32} : f32[4,2]
  %g = GatherV2(%m/read, %ids, %axis) """ + GATHER_V2 + """ : f32[3,2]
  %out = Identity(%g) {T = f32} : f32[3,2]
""", "not [N, 1]", gtt_fails="tensor of shape [N, 1]"),
    "int weights": LeftAlone(
        """  %n = Const() {dtype = i32, value = dense<i32[4,1], [0, 7, 0, 0]>} : i32[4,1]
  %n/read = Identity(%n) {T = i32} : i32[4,1]
  %out = Gather(%n/read, %ids) {Tindices = i64, Tparams = i32, validate_indices = true} : i32[3,1]
""", "are int32, not float", gtt_fails="DT_FLOAT"),
    "axis 1": LeftAlone(
        """  %t = Const() {dtype = f32, value = dense<f32[1,4], [0.0, 2.0, 0.0, 3.0]>} : f32[1,4]
  %t/read = Identity(%t) {T = f32} : f32[1,4]
  %one = Const() {dtype = i32, value = dense<i32[], [1]>} : i32[]
  %out = GatherV2(%t/read, %ids, %one) """ + GATHER_V2 + """ : f32[1,3]
""", "gathers along axis 1", gtt_fails="axis 0"),
    "int32 ids": LeftAlone(
        """  %out = Gather(%w/read, %ids32) {Tindices = i32, Tparams = f32, validate_indices = true} : f32[3,1]
""", "its ids are int32", tf_rejects="incompatible with expected int64"),
    "shared embedding": LeftAlone(
        """  %a = Gather(%w/read, %ids) """ + GATHER + """ : f32[3,1]
  %three = Const() {dtype = i64, value = dense<i64[], [3]>} : i64[]
  %flip = Sub(%three, %ids) {T = i64} : i64[3]
  %b = Gather(%w/read, %flip) """ + GATHER + """ : f32[3,1]
  %out = AddV2(%a, %b) {T = f32} : f32[3,1]
""", "would lose its input 'w/read'", tf_rejects="expected inputs", kept=2),
    "control input": LeftAlone(
        """  %check[0] = NoOp()
  %out = Gather(%w/read, %ids, ^%check) """ + GATHER + """ : f32[3,1]
""", "would drop the control inputs of 'out'", gtt_drops="^check"),
    "shared axis": LeftAlone(
        """  %g = GatherV2(%w/read, %ids, %axis) """ + GATHER_V2 + """ : f32[3,1]
  %cols = Const() {dtype = f32, value = dense<f32[3,1], [1.0, 2.0, 3.0]>} : f32[3,1]
  %pair = ConcatV2(%g, %cols, %axis) {N = 2, T = f32, Tidx = i32} : f32[6,1]
  %out = Identity(%pair) {T = f32} : f32[6,1]
""", "also read by 'pair', which GTT would leave dangling", gtt_fails="nonexistent nodes"),
    "concat with a control input": LeftAlone(
        """  %g = Gather(%w/read, %ids) """ + GATHER + """ : f32[3,1]
  %cols = Const() {dtype = f32, value = dense<f32[1,1], [5.0]>} : f32[1,1]
  %check[0] = NoOp()
  %both = ConcatV2(%w/read, %cols, %axis, ^%check) {N = 2, T = f32, Tidx = i32} : f32[5,1]
  %out = Identity(%g) {T = f32} : f32[3,1]
""", "'both' (ConcatV2) would lose an input and no longer match its N", tf_rejects="do not match"),
    "weights in the output": LeftAlone(
        """  %g = Gather(%w/read, %ids) """ + GATHER + """ : f32[3,1]
  %mean = Mean(%w/read, %axis) {T = f32, Tidx = i32, keep_dims = false} : f32[1]
  %out = AddV2(%g, %mean) {T = f32} : f32[3,1]
""", "'out' (AddV2) would lose its input 'mean'", tf_rejects="do not match"),
}
FEEDS = {"ids": np.array([1, 3, 1], np.int64), "ids32": np.array([3, 0, 1], np.int32)}


@pytest.mark.tf
@pytest.mark.parametrize("case", sorted(LEFT_ALONE))
def test_left_alone_where_gtt_fails_or_breaks_the_graph(case: str) -> None:
    spec = LEFT_ALONE[case]
    data = emit_graphdef_bytes(parse_graph(spec.text))
    ours = transform_graph(data, ["ids", "ids32"], ["out"], PASS)
    kept = [line for line in notes(data, ["ids", "ids32"], ["out"]) if line.startswith("left ")]
    assert len(kept) == spec.kept and all(spec.reason in line for line in kept), kept
    assert not {"HashTable", "LookupTableFind"} & set(ops_of(ours).values())
    assert_equal_outputs(run_tf(ours, FEEDS, ("out",), init=INIT), run_tf(data, FEEDS, ("out",)))
    if spec.gtt_fails:
        with pytest.raises(Exception, match=re.escape(spec.gtt_fails)):
            gtt_transform(data, ["ids", "ids32"], ["out"], PASS)
        return
    theirs = gtt_transform(data, ["ids", "ids32"], ["out"], PASS)
    if spec.tf_rejects:
        with pytest.raises(Exception, match=spec.tf_rejects):
            run_tf(theirs, FEEDS, ("out",), init=INIT)
    if spec.gtt_drops:
        inputs = [i for node in graph_pb2.GraphDef.FromString(theirs).node for i in node.input]
        assert spec.gtt_drops not in inputs and "LookupTableFind" in ops_of(theirs).values()


_GTT_ON_FILE = """
import sys
from tensorflow.python.util._pywrap_transform_graph import TransformGraphWithStringInputs
TransformGraphWithStringInputs(open(sys.argv[1], "rb").read(), b"ids", b"out", b"sparsify_gather")
print("finished", flush=True)
"""

VARIABLE_GRAPH = HEADER + """\
  %v = VariableV2() {container = "", dtype = f32, shape = shape<4,1>, shared_name = ""} : f32[4,1]
  %v/read = Identity(%v) {T = f32} : f32[4,1]
  %out = Gather(%v/read, %ids) """ + GATHER + """ : f32[3,1]
}
"""


@pytest.mark.tf
def test_variable_weights_are_left_alone_where_gtt_crashes() -> None:
    """A VariableV2 without a Saver's restore ops makes GTT dereference past an empty list."""
    require_tf()
    data = emit_graphdef_bytes(parse_graph(VARIABLE_GRAPH))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "graph.pb"
        path.write_bytes(data)
        done = subprocess.run([sys.executable, "-c", _GTT_ON_FILE, str(path)], capture_output=True, text=True,
                              timeout=120, env={"TF_CPP_MIN_LOG_LEVEL": "3", "PATH": ""})
    assert done.returncode != 0 and "finished" not in done.stdout
    kept = [line for line in notes(data, ["ids"], ["out"]) if line.startswith("left ")]
    assert kept == ["left 'out' (Gather) alone: its params are VariableV2 'v': GTT reads those from "
                    "input_checkpoint, which gttc does not (freeze the graph first)"]


# -- parameters --------------------------------------------------------------------------------------


def test_input_checkpoint_is_refused_with_advice() -> None:
    graph = parse_graph(VARIABLE_GRAPH)
    with pytest.raises(PassFailure, match="does not read TensorFlow checkpoints.*freeze the graph"):
        run_pipeline(graph, 'sparsify_gather(input_checkpoint="/tmp/model.ckpt")', ["ids"], ["out"])


@pytest.mark.tf
def test_gtt_duplicates_a_group_init_node_that_is_not_a_noop() -> None:
    """Why gttc refuses (lit sparsify_gather_group_node_taken): GTT writes two ops of that name."""
    case = LitCase.load(next(p for p in SPARSIFY_LIT if p.stem == "sparsify_gather_group_node_taken"))
    data = emit_graphdef_bytes(parse_graph(case.graph_text))
    names = [n.name for n in graph_pb2.GraphDef.FromString(gtt_transform(data, case.inputs, case.outputs, PASS)).node]
    assert names.count(INIT) == 2


def test_group_init_node_names_the_initializer_noop() -> None:
    case = LitCase.load(next(p for p in SPARSIFY_LIT if p.stem == "sparsify_gather"))
    graph = run_pipeline(parse_graph(case.graph_text), "sparsify_gather(group_init_node=init_tables)",
                         case.inputs, case.outputs).graph
    assert INIT not in graph
    assert [dep.name for dep in graph.op("init_tables").control_deps] == ["zip_w/InitializeTable",
                                                                         "age_w/InitializeTable"]
