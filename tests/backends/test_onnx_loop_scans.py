"""The counted-Loop-to-Scan peephole (compiler/backends/onnx/loop_scans.py), on graphs built here.

Each graph is the Loop the TF1 lowering emits for a recurrence over the steps of `x`: a trip
count, no condition, the state carried, step t read as Gather(x, t), and each step's output
stacked.  A Scan must compute the same numbers; anything that makes the Loop differ from a walk
over x's steps (another count, another use of t, a state of changing shape) leaves it a Loop.
(The end-to-end cases, TF1 cells through TF: test_onnx_tf1_rnn_cells.py.)
"""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from compiler.backends.onnx.builder import GraphBuilder, ModelScope, ValueSpec
from compiler.backends.onnx.loop_scans import loops_as_scans

STEPS, BATCH, WIDTH = 4, 2, 3
X = np.random.default_rng(3).standard_normal((BATCH, STEPS, WIDTH)).astype(np.float32)


def _graph(trips: int = STEPS, counter_read: bool = False, declared: bool = True,
           time_major_input: bool = True) -> GraphBuilder:
    """outputs h (the last state) and ys (every step's tanh(h)), h_t = h_{t-1} + x[:, t] (+ t);
    or, not time-major, h_t = h_{t-1} + x[t] over x's first axis."""
    state = (BATCH, WIDTH) if time_major_input else (STEPS, WIDTH)
    scope = ModelScope(17)
    outer = GraphBuilder(scope)
    outer.add_input(ValueSpec("x", TensorProto.FLOAT, (BATCH, STEPS, WIDTH)))
    steps = "x"
    if time_major_input:
        outer.add_node("Transpose", ["x"], ["x_tm"], "to_time_major", {"perm": [1, 0, 2]})
        steps = "x_tm"
    body = GraphBuilder(scope)
    body.add_input(ValueSpec("t", TensorProto.INT64, ()))
    body.add_input(ValueSpec("cond_in", TensorProto.BOOL, ()))
    body.add_input(ValueSpec("h_in", TensorProto.FLOAT, state if declared else None))
    body.add_node("Gather", [steps, "t"] if time_major_input else ["x", "t"], ["x_t"], "step", {"axis": 0})
    added = "x_t"
    if counter_read:
        body.add_node("Cast", ["t"], ["t_float"], "t_float", {"to": TensorProto.FLOAT})
        body.add_node("Add", ["x_t", "t_float"], ["x_t_plus"], "plus_t")
        added = "x_t_plus"
    body.add_node("Add", ["h_in", added], ["h_out"], "next_h")
    body.add_node("Tanh", ["h_out"], ["y"], "y")
    body.add_node("Identity", ["cond_in"], ["cond_out"], "cond")
    body.outputs = [ValueSpec("cond_out", TensorProto.BOOL, ()), ValueSpec("h_out", TensorProto.FLOAT, None),
                    ValueSpec("y", TensorProto.FLOAT, None)]
    trips_name = scope.initializer(np.array(trips, np.int64), "trips")
    h0 = scope.initializer(np.zeros(state, np.float32), "h0")
    outer.add_node("Loop", [trips_name, "", h0], ["h", "ys_tm"], "loop", {"body": body})
    outer.add_node("Transpose", ["ys_tm"], ["ys"], "to_batch_major", {"perm": [1, 0, 2]})
    outer.outputs = [ValueSpec("h", TensorProto.FLOAT, state),
                     ValueSpec("ys", TensorProto.FLOAT, (state[0], trips, WIDTH))]
    return outer


# What the lowering knows of the time-major copy of x, which value_info does not declare.
DESCRIBED = {"x_tm": ValueSpec("x_tm", TensorProto.FLOAT, (STEPS, BATCH, WIDTH))}


def _run(builder: GraphBuilder) -> list[np.ndarray]:
    used = {i for node in builder.iter_nodes() for i in node.inputs}
    graph = builder.to_proto("g", builder.scope.initializer_protos(used))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model, full_check=True)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": X})


def test_a_loop_walking_the_steps_is_one_scan_reading_and_writing_along_axis_1() -> None:
    want = _run(_graph())
    builder = _graph()
    assert loops_as_scans(builder, DESCRIBED) == 1
    builder.prune()
    assert [node.op_type for node in builder.nodes] == ["Scan"]  # both Transposes absorbed
    scan = builder.nodes[0]
    assert scan.inputs == ["h0", "x"] and scan.outputs == ["h", "ys"]
    assert scan.attrs["num_scan_inputs"] == 1
    assert scan.attrs["scan_input_axes"] == [1] and scan.attrs["scan_output_axes"] == [1]
    body = scan.attrs["body"]
    assert [spec.name for spec in body.inputs] == ["h_in", "x_t"]
    assert [spec.dims for spec in body.inputs] == [(BATCH, WIDTH), (BATCH, WIDTH)]
    assert [node.op_type for node in body.nodes] == ["Add", "Tanh"]
    for got, expected in zip(_run(builder), want):
        np.testing.assert_array_equal(got, expected)


def test_a_sequence_walked_along_axis_0_needs_no_input_axes() -> None:
    """Gather(x, t) straight from x walks its first axis (the batch of 2, so 2 runs)."""
    want = _run(_graph(trips=BATCH, time_major_input=False))
    builder = _graph(trips=BATCH, time_major_input=False)
    assert loops_as_scans(builder, {}) == 1
    scan = builder.nodes[0]
    assert scan.inputs == ["h0", "x"] and "scan_input_axes" not in scan.attrs
    assert scan.attrs["scan_output_axes"] == [1]
    for got, expected in zip(_run(builder), want):
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("case", ["other_count", "counter_read", "state_of_unknown_shape"])
def test_what_a_scan_cannot_hold_stays_a_loop(case: str) -> None:
    kwargs = {"other_count": {"trips": STEPS - 1}, "counter_read": {"counter_read": True},
              "state_of_unknown_shape": {"declared": False}}[case]
    builder = _graph(**kwargs)
    want = _run(builder)
    assert loops_as_scans(builder, DESCRIBED) == 0
    assert [node.op_type for node in builder.nodes] == ["Transpose", "Loop", "Transpose"]
    for got, expected in zip(_run(builder), want):
        np.testing.assert_array_equal(got, expected)


def test_a_sequence_of_unknown_length_stays_a_loop() -> None:
    """Scan's length is its sequences': unknown, the trip count cannot be shown to match it."""
    assert loops_as_scans(_graph(), {}) == 0
