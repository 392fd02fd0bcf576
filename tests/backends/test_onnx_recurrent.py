"""Keras-3 LSTM/GRU/SimpleRNN loops export as one ONNX LSTM/GRU/RNN node; other cells stay Loops.

Each model is frozen once per module with lowered control flow (TF1 while
frames), exported with the full ONNX checker, and compared with Keras' own
output: max abs error over max |reference| within 1e-4.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import onnx
import pytest

from compiler.backends.onnx import export
from compiler.frontends.graphdef import load_graph
from compiler.runtime.onnx_runner import run_onnx
from tests.backends.test_onnx_export import assert_matches_tf, optimized
from tests.backends.test_onnx_tf1_control_flow import op_types
from tests.conftest import load_model_fixture

tf = pytest.importorskip("tensorflow")
keras = pytest.importorskip("keras")
pytestmark = pytest.mark.tf

MAX_REL = 1e-4
L = keras.layers


@dataclass
class Case:
    steps: int
    features: int
    layer: Callable[[object], object]   # input tensor -> output tensor
    expected: dict[str, int]            # ONNX node counts (LSTM, GRU, RNN, Loop)
    batch: int = 2
    dynamic: bool = False               # freeze with an unknown batch, run at two sizes


def _given_state(x):
    """An LSTM started from a state computed from the input, not zeros."""
    h0 = L.Dense(4)(L.Flatten()(x))
    return L.LSTM(4, return_sequences=True)(x, initial_state=[h0, L.Dense(4)(h0)])


def _final_states(x):
    """The last output and both final states (the h and c Exits)."""
    out, h, c = L.LSTM(5, return_state=True)(x)
    return L.Concatenate()([out, h, c])


CASES = {
    "lstm_sequences": Case(5, 3, lambda x: L.LSTM(6, return_sequences=True)(x), {"LSTM": 1}),
    "lstm_last": Case(3, 4, lambda x: L.LSTM(4)(x), {"LSTM": 1}),
    "lstm_backwards": Case(4, 3, lambda x: L.LSTM(3, go_backwards=True, return_sequences=True)(x), {"LSTM": 1}),
    "lstm_given_state": Case(4, 3, _given_state, {"LSTM": 1}),
    "lstm_final_states": Case(4, 2, _final_states, {"LSTM": 1}),
    "lstm_without_bias": Case(3, 3, lambda x: L.LSTM(4, use_bias=False, return_sequences=True)(x), {"LSTM": 1}),
    "gru_reset_after": Case(6, 3, lambda x: L.GRU(5, return_sequences=True)(x), {"GRU": 1}),
    "gru_reset_before": Case(4, 3, lambda x: L.GRU(3, reset_after=False)(x), {"GRU": 1}),
    # a Bidirectional wrapper: one direction=bidirectional node, whatever the merge
    "bidirectional_lstm": Case(4, 3, lambda x: L.Bidirectional(L.LSTM(3, return_sequences=True))(x), {"LSTM": 1}),
    "bidirectional_batch_of_one": Case(4, 3, lambda x: L.Bidirectional(L.LSTM(3, return_sequences=True))(x),
                                       {"LSTM": 1}, batch=1),   # time-major by a Reshape, not a Transpose
    "bidirectional_gru": Case(5, 2, lambda x: L.Bidirectional(L.GRU(4, reset_after=False))(x), {"GRU": 1}),
    "bidirectional_rnn_sum": Case(4, 3, lambda x: L.Bidirectional(L.SimpleRNN(3, return_sequences=True),
                                                                  merge_mode="sum")(x), {"RNN": 1}),
    "bidirectional_lstm_mul": Case(4, 2, lambda x: L.Bidirectional(L.LSTM(2), merge_mode="mul")(x), {"LSTM": 1}),
    "bidirectional_states": Case(3, 3, lambda x: L.Concatenate()(
        list(L.Bidirectional(L.LSTM(3, return_state=True))(x))), {"LSTM": 1}),
    "bidirectional_stacked_dynamic": Case(4, 3, lambda x: L.Bidirectional(L.GRU(2))(
        L.Bidirectional(L.LSTM(3, return_sequences=True))(x)), {"LSTM": 1, "GRU": 1}, dynamic=True),
    "bidirectional_given_state": Case(4, 3, lambda x: L.Bidirectional(L.GRU(3, return_sequences=True))(
        x, initial_state=[L.Dense(3)(L.Flatten()(x)), L.Dense(3)(L.Flatten()(x))]), {"GRU": 1}),
    "stacked_dynamic_batch": Case(4, 3, lambda x: L.GRU(3)(L.LSTM(8, return_sequences=True)(x)),
                                  {"LSTM": 1, "GRU": 1}, dynamic=True),
    # another `activation` than tanh: named in the node's `activations`
    "lstm_relu": Case(4, 3, lambda x: L.LSTM(4, activation="relu")(x), {"LSTM": 1}),
    "gru_relu": Case(4, 3, lambda x: L.GRU(4, activation="relu", return_sequences=True)(x), {"GRU": 1}),
    "bidirectional_gru_sigmoid": Case(4, 3, lambda x: L.Bidirectional(L.GRU(3, activation="sigmoid"))(x),
                                      {"GRU": 1}),
    # Keras 2's default gates (old models keep them): HardSigmoid with alpha 1/6, beta 1/2
    "gru_hard_sigmoid": Case(4, 3, lambda x: L.GRU(4, recurrent_activation="hard_sigmoid")(x), {"GRU": 1}),
    "gru_hard_sigmoid_reset_before": Case(4, 3, lambda x: L.GRU(4, recurrent_activation="hard_sigmoid",
                                                                  reset_after=False)(x), {"GRU": 1}),
    "bidirectional_lstm_hard_sigmoid": Case(5, 3, lambda x: L.Bidirectional(L.LSTM(
        4, recurrent_activation="hard_sigmoid", activation="relu", return_sequences=True))(x), {"LSTM": 1}),
    # cells that are not ONNX's: they stay Loops
    "lstm_elu": Case(4, 3, lambda x: L.LSTM(4, activation="elu")(x), {"Loop": 1}),
    "lstm_masking": Case(4, 3, lambda x: L.LSTM(4)(L.Masking()(x)), {"Loop": 1}),
    "simple_rnn": Case(4, 3, lambda x: L.SimpleRNN(3, return_sequences=True)(x), {"RNN": 1}),
    "simple_rnn_relu_dynamic": Case(5, 2, lambda x: L.SimpleRNN(4, activation="relu")(x), {"RNN": 1}, dynamic=True),
    "simple_rnn_elu": Case(4, 3, lambda x: L.SimpleRNN(3, activation="elu")(x), {"Loop": 1}),
}


@dataclass
class Frozen:
    graph_path: str
    inputs: list[str]
    outputs: list[str]
    model: object


@pytest.fixture(scope="module")
def frozen(tmp_path_factory) -> dict[str, Frozen]:
    from tools.make_fixtures import freeze_keras, seed_everything

    found = {}
    folder = tmp_path_factory.mktemp("recurrent")
    for index, (name, case) in enumerate(CASES.items()):
        keras.backend.clear_session()
        seed_everything(100 + index)
        x = keras.Input((case.steps, case.features))
        model = keras.Model(x, case.layer(x))
        _randomize_biases(model, np.random.RandomState(index))
        graph_def, inputs, outputs = freeze_keras(model, (case.steps, case.features),
                                                  batch=None if case.dynamic else case.batch)
        path = folder / f"{name}.pb"
        path.write_bytes(graph_def.SerializeToString())
        found[name] = Frozen(str(path), inputs, outputs, model)
    return found


def _randomize_biases(model, rng: np.random.RandomState) -> None:
    """Keras starts biases at zero (an LSTM's forget gate at one): make every bias count."""
    for weight in model.weights:
        if "bias" in weight.path:
            weight.assign(rng.uniform(-0.5, 0.5, weight.shape).astype(np.float32))


def _exported(frozen: Frozen) -> onnx.ModelProto:
    model = export(load_graph(frozen.graph_path), frozen.inputs, frozen.outputs)
    onnx.checker.check_model(model, full_check=True)
    return model


@pytest.mark.parametrize("name", sorted(CASES))
def test_recurrent_layer_exports_as_expected_nodes_and_matches_keras(name: str, frozen: dict[str, Frozen]):
    case, item = CASES[name], frozen[name]
    model = _exported(item)
    types = op_types(model)
    assert {t: types[t] for t in ("LSTM", "GRU", "RNN", "Loop") if types[t]} == case.expected
    for batch in ((1, 3) if case.dynamic else (case.batch,)):
        x = np.random.RandomState(batch).uniform(-2, 2, [batch, case.steps, case.features]).astype(np.float32)
        want = np.asarray(item.model(x))
        got = run_onnx(model, {item.inputs[0]: x}, item.outputs)[item.outputs[0]]
        assert got.shape == want.shape
        assert np.max(np.abs(got - want)) / np.max(np.abs(want)) <= MAX_REL


def test_bidirectional_layer_is_four_nodes(frozen: dict[str, Frozen]):
    """The merged node reads x as the forward layer did; its two directions are joined by one
    Transpose and one Reshape (the Concat's time-major-to-batch-major Transpose folded in)."""
    model = _exported(frozen["bidirectional_lstm"])
    assert [n.op_type for n in model.graph.node] == ["Transpose", "LSTM", "Transpose", "Reshape"]
    lstm = model.graph.node[1]
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in lstm.attribute}
    assert attrs["direction"] == b"bidirectional" and attrs["hidden_size"] == 3
    assert onnx.helper.get_attribute_value(model.graph.node[2].attribute[0]) == [2, 0, 1, 3]


def test_bidirectional_merge_is_reported(frozen: dict[str, Frozen]):
    from compiler.backends.onnx import export_with_report

    item = frozen["bidirectional_stacked_dynamic"]
    report = export_with_report(load_graph(item.graph_path), item.inputs, item.outputs).report
    assert report.stats["bidirectional_rnn"] == 2
    assert report.stats["onnx_lstm"] == 2 and report.stats["onnx_gru"] == 2   # cells matched before merging


def test_gru_reset_spellings_set_linear_before_reset(frozen: dict[str, Frozen]):
    for name, flag in (("gru_reset_after", 1), ("gru_reset_before", 0)):
        node = next(n for n in _exported(frozen[name]).graph.node if n.op_type == "GRU")
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        assert attrs.get("linear_before_reset", 0) == flag, name


def test_layer_activation_is_named_only_when_not_tanh(frozen: dict[str, Frozen]):
    """Keras' `activation` is ONNX's g (and an LSTM's h), its `recurrent_activation` the gates' f
    (hard sigmoid with its parameters); a bidirectional node lists both directions."""
    wanted = {"lstm_relu": [b"Sigmoid", b"Relu", b"Relu"], "gru_relu": [b"Sigmoid", b"Relu"],
              "bidirectional_gru_sigmoid": [b"Sigmoid", b"Sigmoid"] * 2, "lstm_sequences": None,
              "gru_reset_after": None, "gru_hard_sigmoid": [b"HardSigmoid", b"Tanh"],
              "bidirectional_lstm_hard_sigmoid": [b"HardSigmoid", b"Relu", b"Relu"] * 2}
    for name, activations in wanted.items():
        node = next(n for n in _exported(frozen[name]).graph.node if n.op_type in ("LSTM", "GRU"))
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        assert attrs.get("activations") == activations, name
        hard = (activations or []).count(b"HardSigmoid")
        assert np.allclose(attrs.get("activation_alpha", []), [1 / 6] * hard), name   # one per HardSigmoid
        assert np.allclose(attrs.get("activation_beta", []), [0.5] * hard), name


@pytest.mark.parametrize("at_o2", [False, True])
def test_keras_rnn_fixture_fuses_every_layer(at_o2: bool):
    fixture = load_model_fixture("keras_rnn")
    graph = optimized(fixture) if at_o2 else load_graph(fixture.path)
    model = export(graph, fixture.inputs, fixture.outputs)
    onnx.checker.check_model(model, full_check=True)
    types = op_types(model)
    assert (types["LSTM"], types["GRU"], types["RNN"], types["Loop"]) == (1, 1, 1, 0)   # the GRUs merged
    assert_matches_tf(fixture, model)
