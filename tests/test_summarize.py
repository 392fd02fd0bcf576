"""`gttc summarize` against what the fixture generator recorded about each graph."""
from __future__ import annotations

import json
import shlex

import numpy as np
import pytest
from conftest import load_model_fixture

from compiler.cli import main
from compiler.ir.dtypes import DType
from compiler.modelio import load_model
from compiler.proto.graph_pb2 import GraphDef
from compiler.summarize import human_bytes, summarize_graph


def metadata(model) -> dict:
    return json.loads(model.path.with_suffix(".json").read_text())


def const_bytes_from_proto(path) -> int:
    """Independent of the IR: dims times item size, read straight off the GraphDef."""
    graph_def = GraphDef.FromString(path.read_bytes())
    total = 0
    for node in graph_def.node:
        if node.op == "Const":
            tensor = node.attr["value"].tensor
            count = int(np.prod([d.size for d in tensor.tensor_shape.dim], dtype=np.int64))
            total += count * DType(tensor.dtype).to_numpy().itemsize
    return total


def test_likely_inputs_outputs_and_op_counts_match_the_fixture_records(small_model):
    summary = summarize_graph(load_model(small_model.path))
    meta = metadata(small_model)
    assert [node.name for node in summary.inputs] == small_model.inputs
    for node in summary.inputs:
        assert node.dtype == DType.parse(meta["input_dtypes"][node.name]).tf_name
        dims = meta["placeholder_shapes"][node.name]
        assert node.shape == "[" + ",".join("?" if d < 0 else str(d) for d in dims) + "]"
    assert [node.name for node in summary.outputs] == small_model.outputs
    assert dict(summary.op_counts) == meta["op_histogram_with_library"]
    assert len(summary.functions) == meta["num_library_functions"]
    assert summary.node_count == meta["num_nodes"]
    assert summary.const_bytes == const_bytes_from_proto(small_model.path)


def test_mobilenet_has_no_control_flow_functions_or_devices():
    summary = summarize_graph(load_model(load_model_fixture("keras_mobilenet_v2_small").path))
    assert not summary.has_control_flow and summary.functions == [] and summary.devices == {}
    assert summary.const_nodes == dict(summary.op_counts)["Const"]
    assert summary.const_elements > 400_000  # 423,018 Keras parameters plus shape constants


def test_tf1_control_flow_is_reported():
    summary = summarize_graph(load_model(load_model_fixture("tf1_control_flow").path))
    assert summary.control_flow == {"Enter": 6, "Exit": 1, "LoopCond": 1, "Merge": 5, "NextIteration": 3,
                                    "Switch": 13}
    assert summary.functional_control_flow == {}


def test_functional_control_flow_and_library_are_reported():
    summary = summarize_graph(load_model(load_model_fixture("tf2_functional_control_flow").path))
    assert summary.functional_control_flow == {"If": 2, "While": 1}
    assert summary.control_flow == {}
    assert sorted(summary.functions) == ["cond_1_false_frozen", "cond_1_true_frozen", "cond_false_frozen",
                                         "cond_true_frozen", "while_body_frozen", "while_cond_frozen"]


def test_devices_are_counted():
    summary = summarize_graph(load_model(load_model_fixture("devices_gather").path))
    assert summary.devices == {"/device:CPU:0": 3, "/job:localhost/replica:0/task:0/device:CPU:0": 6}


@pytest.mark.parametrize("name", ["keras_mobilenet_v2_small", "tf1_control_flow", "tf2_functional_control_flow",
                                  "devices_gather"])
def test_cli_summary_text_and_its_command_line_runs(capsys, tmp_path, name):
    model = load_model_fixture(name)
    assert main(["summarize", str(model.path)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith(f"{model.path}: ")
    assert any(line.startswith("Found 1 possible inputs: (name=") for line in lines)
    assert any(line.startswith("Control flow: ") for line in lines)
    assert any(line.startswith("Function library: ") for line in lines)
    assert any(line.startswith("Devices: ") for line in lines)
    assert lines[-2] == "To compile with gttc try:"
    words = shlex.split(lines[-1])
    assert words[:2] == ["gttc", str(model.path)]
    assert f"--inputs={','.join(model.inputs)}" in words and f"--outputs={','.join(model.outputs)}" in words
    words[words.index("-o") + 1] = str(tmp_path / "out.pb")
    assert main(words[1:]) == 0
    assert (tmp_path / "out.pb").stat().st_size > 0


def test_text_for_tf2_graph(capsys):
    model = load_model_fixture("tf2_functional_control_flow")
    main(["summarize", "--in_graph", str(model.path)])
    out = capsys.readouterr().out
    assert "Control flow: functional (2 If, 1 While)\n" in out
    assert "Op types used (graph and 6 function bodies): " in out
    assert "Function library: 6 functions: cond_1_false_frozen, " in out
    assert "Devices: none assigned\n" in out


def test_summarize_missing_file_is_exit_2(capsys, tmp_path):
    assert main(["summarize", str(tmp_path / "nope.pb")]) == 2
    assert capsys.readouterr().err == f"gttc: error: {tmp_path / 'nope.pb'}: no such file\n"


@pytest.mark.parametrize("count, text", [(0, "0 bytes"), (999, "999 bytes"), (1500, "1.5 kB"),
                                         (1_692_416, "1.7 MB"), (3_000_000_000, "3.0 GB")])
def test_human_bytes(count, text):
    assert human_bytes(count) == text
