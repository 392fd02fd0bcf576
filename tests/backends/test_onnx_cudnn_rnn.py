"""CudnnRNN(V2, V3) exported as ONNX LSTM/GRU/RNN nodes: each model passes the full checker and,
in onnxruntime, matches gttc's kernel and the Keras computation with the same weights (the TF
oracle of tests/runtime/test_kernels_cudnn_rnn.py: TF's CPU build cannot run the cuDNN ops)
within 1e-4; where tf2onnx converts the graph (a GRU) gttc emits no more nodes."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

from compiler.backends.graphdef.emit import emit_graphdef_bytes
from compiler.backends.onnx import UnsupportedOpError, export_with_report
from compiler.runtime.interpreter import Interpreter
from compiler.runtime.onnx_runner import run_onnx
from tests.backends.test_onnx_export import Builder
from tests.runtime.test_kernels_cudnn_rnn import keras_network, keras_with_lengths, pack, random_cells

pytestmark = pytest.mark.tf

TOLERANCE = 1e-4
OUTPUTS = 3  # output, output_h, output_c; reserve_space is cuDNN's scratch and never compared


def build(mode: str, layers: int, dirs: int, sizes, state: str = "input", op_type: str = "CudnnRNN",
          time_major: bool = True, lengths=None, seed: int = 0):
    """A graph with one cuDNN RNN node over placeholder x, its feeds, and the Keras oracle's outputs."""
    steps, batch, inputs, units = sizes
    rng = np.random.default_rng(seed)
    cells = random_cells(rng, mode, layers, dirs, inputs, units)
    x = rng.standard_normal((steps, batch, inputs)).astype(np.float32)
    stacked = (layers * dirs, batch, units)
    h0 = rng.uniform(-1, 1, stacked).astype(np.float32) if state != "zeros" else np.zeros(stacked, np.float32)
    c0 = rng.uniform(-1, 1, stacked).astype(np.float32) if state != "zeros" else np.zeros(stacked, np.float32)
    want = keras_network(mode, x, h0, c0 if mode == "lstm" else None, cells) if lengths is None else \
        keras_with_lengths(mode, x, h0, c0 if mode == "lstm" else None, cells, lengths)
    major = (lambda a: a) if time_major else (lambda a: a.swapaxes(0, 1))  # noqa: E731
    b = Builder()
    feeds = {"x": major(x)}
    operands = [b.input("x", list(major(x).shape))]
    for name, value in (("h0", h0), ("c0", c0)):
        if state == "input":
            feeds[name] = major(value)
            operands.append(b.input(name, list(major(value).shape)))
        else:
            operands.append(b.const(major(value)))
    operands.append(b.const(pack(cells)))
    attrs = {"rnn_mode": mode, "direction": "bidirectional" if dirs == 2 else "unidirectional",
             "input_mode": "linear_input", "is_training": False}
    if op_type == "CudnnRNNV3":
        operands.append(b.const(np.asarray(lengths if lengths is not None else [steps] * batch, np.int32)))
        attrs["time_major"] = time_major
    results = b(op_type, *operands, name="rnn", **attrs)
    want = [major(w) if w is not None else None for w in want]
    return b, feeds, list(results[:OUTPUTS] if mode == "lstm" else results[:2]), want


def export_and_compare(b: Builder, feeds, outputs, want, opset: int = 17) -> dict[str, int]:
    names = [v.name for v in outputs]
    result = export_with_report(b.graph, list(feeds), names, opset=opset)
    onnx.checker.check_model(result.model, full_check=True)
    got = run_onnx(result.model, dict(feeds), names)
    ours = Interpreter(b.graph).run(dict(feeds), names)
    for name, expected in zip(names, want):
        assert got[name].shape == expected.shape and got[name].dtype == np.float32, name
        assert float(np.abs(got[name] - expected).max()) <= TOLERANCE, name
        assert float(np.abs(got[name] - ours[name]).max()) <= TOLERANCE, name
    return result.report.op_counts


CONFIGS = [(mode, layers, dirs) for mode in ("lstm", "gru", "rnn_tanh", "rnn_relu")
           for layers, dirs in ((1, 1), (1, 2), (2, 2))] + [("gru", 3, 1), ("lstm", 2, 1)]


@pytest.mark.parametrize("mode,layers,dirs", CONFIGS)
def test_layers_and_directions(mode, layers, dirs):
    b, feeds, outputs, want = build(mode, layers, dirs, (5, 3, 4, 6), seed=layers * 3 + dirs)
    counts = export_and_compare(b, feeds, outputs, want)
    assert counts[{"lstm": "LSTM", "gru": "GRU"}.get(mode, "RNN")] == layers


@pytest.mark.parametrize("state", ["zeros", "const"])
def test_constant_states_need_no_nodes(state):
    b, feeds, outputs, want = build("lstm", 2, 2, (4, 2, 3, 5), state=state, seed=5)
    counts = export_and_compare(b, feeds, outputs, want)
    assert "Split" not in counts and "Slice" not in counts


@pytest.mark.parametrize("mode,dirs,time_major", [("lstm", 2, True), ("gru", 2, False), ("rnn_tanh", 1, False)])
def test_v3_sequence_lengths(mode, dirs, time_major):
    lengths = np.array([6, 2, 4, 1], np.int32)
    b, feeds, outputs, want = build(mode, 2, dirs, (6, 4, 3, 4), op_type="CudnnRNNV3", time_major=time_major,
                                    lengths=lengths, seed=9)
    export_and_compare(b, feeds, outputs, want)


def test_v2_and_opsets():
    for opset in (13, 21):
        b, feeds, outputs, want = build("gru", 2, 2, (3, 2, 3, 2), op_type="CudnnRNNV2", seed=opset)
        export_and_compare(b, feeds, outputs, want, opset=opset)


def test_params_computed_at_run_time_is_refused():
    b = Builder()
    x, h0 = b.input("x", [3, 2, 4]), b.input("h0", [1, 2, 5])
    params = b.input("params", [3 * 5 * (4 + 5 + 2)])
    outputs = b("CudnnRNN", x, h0, h0, params, name="rnn", rnn_mode="gru", is_training=False)
    with pytest.raises(UnsupportedOpError, match="node 'rnn'.*params is not a constant"):
        export_with_report(b.graph, ["x", "h0", "params"], [outputs[0].name])


def test_skip_input_is_refused_by_name():
    b, feeds, outputs, _ = build("gru", 1, 1, (3, 2, 4, 4))
    outputs[0].op.attrs["input_mode"] = "skip_input"
    with pytest.raises(UnsupportedOpError, match="node 'rnn'.*skip_input"):
        export_with_report(b.graph, list(feeds), [outputs[0].name])


@pytest.mark.parametrize("dirs", [1, 2])
def test_no_more_nodes_than_tf2onnx(dirs):
    """tf2onnx converts a one-layer GRU (it refuses LSTM and plain RNNs).  Its numbers are wrong:
    it keeps cuDNN's (r, z, h) gate order where ONNX has (z, r, h), and leaves linear_before_reset
    at 0; the difference is printed, not asserted, so a fixed tf2onnx does not fail this test."""
    tf2onnx_compare = pytest.importorskip("compiler.backends.onnx.tf2onnx_compare")
    b, feeds, outputs, want = build("gru", 1, dirs, (5, 3, 4, 6), seed=2)
    counts = export_and_compare(b, feeds, outputs, want)
    names = [v.name for v in outputs]
    theirs = tf2onnx_compare.convert_with_tf2onnx(emit_graphdef_bytes(b.graph), list(feeds), names)
    got = run_onnx(theirs, dict(feeds), [f"{n}:0" for n in names])
    error = max(float(np.abs(got[f"{n}:0"] - w).max()) for n, w in zip(names, want))
    print(f"CudnnRNN gru dirs={dirs}: gttc {sum(counts.values())} nodes, tf2onnx {len(theirs.graph.node)} "
          f"(tf2onnx's max error {error:.2f})")
    assert sum(counts.values()) <= len(theirs.graph.node)


def test_graph_traced_by_tensorflow():
    """A GraphDef TF itself writes (tf.raw_ops.CudnnRNN in a tf.function, params a constant as a
    frozen graph has it) imports, runs in the interpreter and exports like the built ones."""
    tf = pytest.importorskip("tensorflow")
    from compiler.frontends.graphdef import load_graph_bytes

    rng = np.random.default_rng(4)
    cells = random_cells(rng, "lstm", 2, 2, 3, 4)
    packed = pack(cells)

    @tf.function(input_signature=[tf.TensorSpec([5, 2, 3], tf.float32), tf.TensorSpec([4, 2, 4], tf.float32)])
    def network(x, h):
        params = tf.constant(packed)  # made inside: a captured tensor would be a placeholder
        out = tf.raw_ops.CudnnRNN(input=x, input_h=h, input_c=tf.zeros_like(h), params=params, rnn_mode="lstm",
                                  direction="bidirectional", is_training=False)
        return tf.identity(out.output, name="y"), tf.identity(out.output_h, name="yh")

    graph_def = network.get_concrete_function().graph.as_graph_def()
    graph = load_graph_bytes(graph_def.SerializeToString())
    feeds = {"x": rng.standard_normal((5, 2, 3)).astype(np.float32),
             "h": rng.uniform(-1, 1, (4, 2, 4)).astype(np.float32)}
    want = keras_network("lstm", feeds["x"], feeds["h"], np.zeros((4, 2, 4), np.float32), cells)
    result = export_with_report(graph, list(feeds), ["y", "yh"])
    onnx.checker.check_model(result.model, full_check=True)
    got = run_onnx(result.model, feeds, ["y", "yh"])
    ours = Interpreter(graph).run(feeds, ["y", "yh"])
    for name, expected in zip(("y", "yh"), want):
        assert float(np.abs(got[name] - expected).max()) <= TOLERANCE
        assert float(np.abs(ours[name] - expected).max()) <= TOLERANCE
    assert result.report.op_counts["LSTM"] == 2
