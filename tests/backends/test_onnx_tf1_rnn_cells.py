"""TF1 `dynamic_rnn` loops in ONNX: matched cells become one LSTM/GRU node, the rest a counted Loop.

tf.compat.v1.nn.rnn_cell's classes need tf_keras on TF 2.16+, so the cells here are written out
with the ops tf_keras' legacy BasicLSTMCell and GRUCell use (one MatMul of concat([x, h]), a
BiasAdd, a split into gates, the LSTM's forget bias, the GRU's one Sigmoid of both gates), and
`dynamic_rnn` (still in TF) builds the while loop around them, as it does for the real classes.
"""
from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
import pytest

from compiler.backends.onnx import export_with_report
from compiler.backends.onnx.builder import GraphBuilder, ModelScope
from compiler.backends.onnx.common_nodes import merge_common_nodes
from compiler.frontends.graphdef import load_graph_bytes
from compiler.passes import run_pipeline
from compiler.runtime.onnx_runner import run_onnx
from tests.backends.test_onnx_export import o2_pipeline
from tests.oracle import tf1_control_flow_graph

BATCH, STEPS, WIDTH = 2, 5, 3


class _Cell:
    """What dynamic_rnn asks of a cell: sizes, zero states, and one step."""

    def __init__(self, tf, units: int, seed: int) -> None:
        self.tf, self.units = tf, units
        self.rng = np.random.RandomState(seed)

    def weights(self, *shape: int):
        return self.tf.constant((self.rng.standard_normal(shape) * 0.4).astype(np.float32))

    @property
    def output_size(self) -> int:
        return self.units

    def zero_state(self, batch, dtype):
        zeros = self.tf.zeros([batch, self.units], dtype)
        return (zeros, zeros) if isinstance(self.state_size, tuple) else zeros


class BasicLSTM(_Cell):
    """tf_keras' BasicLSTMCell: gates i, j, f, o; forget bias 1; an optional projection of h
    (LSTMCell's num_proj), which ONNX's LSTM cannot hold."""

    def __init__(self, tf, units: int, seed: int, projection: int = 0) -> None:
        super().__init__(tf, units, seed)
        self.projection = projection
        width = projection or units
        self.kernel, self.bias = self.weights(WIDTH + width, 4 * units), self.weights(4 * units)
        self.proj = self.weights(units, projection) if projection else None
        self.state_size = (units, width)

    @property
    def output_size(self) -> int:
        return self.projection or self.units

    def zero_state(self, batch, dtype):
        return self.tf.zeros([batch, self.units], dtype), self.tf.zeros([batch, self.output_size], dtype)

    def __call__(self, inputs, state):
        tf = self.tf
        c, h = state
        gates = tf.nn.bias_add(tf.matmul(tf.concat([inputs, h], 1), self.kernel), self.bias)
        i, j, f, o = tf.split(gates, 4, axis=tf.constant(1))
        new_c = c * tf.sigmoid(f + tf.constant(1.0)) + tf.sigmoid(i) * tf.tanh(j)
        new_h = tf.tanh(new_c) * tf.sigmoid(o)
        if self.proj is not None:
            new_h = tf.matmul(new_h, self.proj)
        return new_h, (new_c, new_h)


class GRU(_Cell):
    """tf_keras' GRUCell: one Sigmoid of both gates, split into r and u; reset before the matmul."""

    def __init__(self, tf, units: int, seed: int) -> None:
        super().__init__(tf, units, seed)
        self.gate_kernel, self.gate_bias = self.weights(WIDTH + units, 2 * units), self.weights(2 * units)
        self.kernel, self.bias = self.weights(WIDTH + units, units), self.weights(units)
        self.state_size = units

    def __call__(self, inputs, state):
        tf = self.tf
        value = tf.sigmoid(tf.nn.bias_add(tf.matmul(tf.concat([inputs, state], 1), self.gate_kernel), self.gate_bias))
        r, u = tf.split(value, 2, axis=1)
        candidate = tf.nn.bias_add(tf.matmul(tf.concat([inputs, r * state], 1), self.kernel), self.bias)
        new_h = u * state + (1 - u) * tf.tanh(candidate)
        return new_h, new_h


def _lstm_last_step_and_cell(tf, x):
    outputs, (c, _) = tf.compat.v1.nn.dynamic_rnn(BasicLSTM(tf, 6, 1), x, dtype=tf.float32)
    return tf.concat([outputs[:, -1], c], axis=-1)


def _gru_last_step_and_state(tf, x):
    outputs, state = tf.compat.v1.nn.dynamic_rnn(GRU(tf, 6, 2), x, dtype=tf.float32)
    return tf.concat([outputs[:, -1], state], axis=-1)


def _bidirectional_lstm(tf, x):
    (ahead, back), _ = tf.compat.v1.nn.bidirectional_dynamic_rnn(BasicLSTM(tf, 4, 3), BasicLSTM(tf, 4, 4), x,
                                                                  dtype=tf.float32)
    return tf.concat([ahead, back], axis=-1)


def _projected_lstm(tf, x):
    return tf.compat.v1.nn.dynamic_rnn(BasicLSTM(tf, 5, 5, projection=3), x, dtype=tf.float32)[0]


def _exported(tf, build):
    """(ONNX model at -O2, export stats) for `out = build(tf, x)`, checked against TF."""
    with tf1_control_flow_graph(tf) as graph:
        x = tf.compat.v1.placeholder(tf.float32, [BATCH, STEPS, WIDTH], name="x")
        tf.identity(build(tf, x), name="out")
    feed = np.random.RandomState(7).uniform(-1, 1, (BATCH, STEPS, WIDTH)).astype(np.float32)
    with tf.compat.v1.Session(graph=graph) as session:
        want = session.run("out:0", {"x:0": feed})
    optimized = run_pipeline(load_graph_bytes(graph.as_graph_def().SerializeToString()), o2_pipeline(), ["x"], ["out"])
    result = export_with_report(optimized.graph, ["x"], ["out"])
    onnx.checker.check_model(result.model, full_check=True)
    got = run_onnx(result.model, {"x": feed}, ["out"])["out"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    return result.model, result.report.stats


@pytest.mark.tf
@pytest.mark.parametrize("build, counts", [
    # the last step is the LSTM's Y_h: no Slice of every step, and Y itself is not computed
    (_lstm_last_step_and_cell, {"Transpose": 1, "LSTM": 1, "Squeeze": 2, "Concat": 1}),
    # ... and the GRU's final state is the same Y_h: one Squeeze reads it for both
    (_gru_last_step_and_state, {"Transpose": 1, "GRU": 1, "Squeeze": 1, "Concat": 1}),
    (_bidirectional_lstm, {"Transpose": 2, "LSTM": 1, "Reshape": 1}),
])
def test_tf1_cells_become_one_recurrent_node_and_match_tf(build, counts):
    tf = pytest.importorskip("tensorflow")
    model, _ = _exported(tf, build)
    assert Counter(n.op_type for n in model.graph.node) == counts
    produced = {out for node in model.graph.node for out in node.output}
    assert all(info.name in produced for info in model.graph.value_info)  # none left for removed nodes
    recurrent = [n for n in model.graph.node if n.op_type in ("LSTM", "GRU")][0]
    if build is not _bidirectional_lstm:
        assert recurrent.output[0] == ""


@pytest.mark.tf
def test_a_cell_onnx_cannot_hold_is_one_scan_over_the_steps():
    """A projected LSTM stays a loop.  Its condition only tests the two counters dynamic_rnn keeps
    (time, and the iteration count against maximum_iterations), so the Loop gets trip count 5, no
    condition and no counters, and reads step t of the input at its iteration number t: that is
    a Scan over the input's 5 steps.  The Scan reads the batch-major input along axis 1 and writes
    its every-step output along axis 1, so neither of dynamic_rnn's time-major Transposes is left."""
    tf = pytest.importorskip("tensorflow")
    model, stats = _exported(tf, _projected_lstm)
    assert [n.op_type for n in model.graph.node] == ["Scan"]
    assert stats["counted_loops"] == 1 and stats["loops_as_scans"] == 1
    scan = model.graph.node[0]
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in scan.attribute}
    assert attrs["num_scan_inputs"] == 1 and attrs["scan_input_axes"] == [1] and attrs["scan_output_axes"] == [1]
    body = Counter(n.op_type for n in attrs["body"].node)
    assert body == {"Concat": 1, "Gemm": 2, "Split": 1, "Add": 2, "Sigmoid": 3, "Tanh": 2, "Mul": 3,
                    "Identity": 1}  # the projected h both carried and scanned
    assert [len(attrs["body"].input), len(attrs["body"].output)] == [3, 3]  # c, h, step x; c, h, step out


@pytest.mark.tf
def test_a_loop_that_tests_its_data_keeps_its_condition():
    tf = pytest.importorskip("tensorflow")

    def build(tf, x):
        def step(i, a):
            return i + 1, tf.tanh(a + x[:, 0])

        cond = lambda i, a: tf.logical_and(i < 6, tf.reduce_max(a) < 0.9)  # noqa: E731
        return tf.compat.v1.while_loop(cond, step, [tf.constant(0), tf.zeros([BATCH, WIDTH])])[1]

    model, stats = _exported(tf, build)
    loop = [n for n in model.graph.node if n.op_type == "Loop"][0]
    assert loop.input[0] == "" and loop.input[1] and "counted_loops" not in stats


def test_repeated_nodes_merge_but_random_draws_do_not():
    builder = GraphBuilder(ModelScope(17))
    for i in range(2):
        builder.add_node("Squeeze", ["x", "axes"], [f"s{i}"], f"squeeze{i}")
        builder.add_node("RandomNormal", [], [f"r{i}"], f"draw{i}", {"shape": [2]})
    builder.add_node("Squeeze", ["x", "other_axes"], ["s2"], "squeeze2")
    builder.add_node("Sum", ["s0", "s1", "s2", "r0", "r1"], ["out"], "sum")
    assert merge_common_nodes(builder) == 1
    assert [n.name for n in builder.nodes] == ["squeeze0", "draw0", "draw1", "squeeze2", "sum"]
    assert builder.nodes[-1].inputs == ["s0", "s0", "s2", "r0", "r1"]
