"""An empty pipeline gives back the same graph: nodes, order, inputs, devices, attributes, tensor bits, library, versions."""
from __future__ import annotations

import pytest
from google.protobuf import text_format

from compiler.backends.graphdef import emit_graphdef_bytes
from compiler.frontends.graphdef import load_graph, load_graph_bytes
from compiler.proto import graph_pb2

from conftest import FIXTURES, SMALL_MODELS


def assert_same_graphdef(expected: graph_pb2.GraphDef, actual: graph_pb2.GraphDef) -> None:
    """Field-by-field equality, reporting the first differing node readably."""
    assert [n.name for n in actual.node] == [n.name for n in expected.node]
    for want, got in zip(expected.node, actual.node):
        assert got == want, f"node '{want.name}' differs:\nwant {want}\ngot  {got}"
    assert actual.library == expected.library
    assert actual.versions == expected.versions
    assert actual == expected


@pytest.mark.parametrize("name", SMALL_MODELS)
def test_binary_round_trip(name):
    data = (FIXTURES / f"{name}.pb").read_bytes()
    out = emit_graphdef_bytes(load_graph_bytes(data, name))
    assert_same_graphdef(graph_pb2.GraphDef.FromString(data), graph_pb2.GraphDef.FromString(out))


@pytest.mark.parametrize("name", [n for n in SMALL_MODELS if (FIXTURES / f"{n}.pbtxt").exists()])
def test_text_input_round_trip(name):
    path = FIXTURES / f"{name}.pbtxt"
    expected = text_format.Parse(path.read_text(), graph_pb2.GraphDef())
    out = emit_graphdef_bytes(load_graph(path))
    assert_same_graphdef(expected, graph_pb2.GraphDef.FromString(out))


def test_unknown_fields_survive():
    """Fields newer than this schema (node, graph and attribute level) are carried verbatim.

    Serializations are deterministic (sorted map entries): protobuf may write the
    `attr` map in either order, which once made this comparison fail at random.
    """
    graph = graph_pb2.GraphDef()
    node = graph.node.add(name="c", op="Const")
    node.attr["dtype"].type = 1
    node.attr["value"].tensor.dtype = 1
    node.attr["value"].tensor.float_val.append(2.5)
    node_plain = graph.node[0].SerializeToString(deterministic=True)
    node_bytes = node_plain + bytes([0xC8, 0x01, 0x07])  # node field 25, varint 7
    data = bytes([0x0A, len(node_bytes)]) + node_bytes + bytes([0xA2, 0x06, 0x03]) + b"new"  # graph field 100
    out = emit_graphdef_bytes(load_graph_bytes(data))
    canonical = [graph_pb2.GraphDef.FromString(b).SerializeToString(deterministic=True) for b in (out, data)]
    assert canonical[0] == canonical[1]
    assert b"new" in out and bytes([0xC8, 0x01, 0x07]) in out


def test_same_input_gives_identical_bytes():
    data = (FIXTURES / "tf1_control_flow.pb").read_bytes()
    assert emit_graphdef_bytes(load_graph_bytes(data)) == emit_graphdef_bytes(load_graph_bytes(data))


def test_explicit_port_zero_spelling_is_kept():
    graph = graph_pb2.GraphDef()
    graph.node.add(name="a", op="NoOp")
    graph.node.add(name="p", op="Placeholder").attr["dtype"].type = 1
    graph.node.add(name="b", op="Identity", input=["p:0", "^a"]).attr["T"].type = 1
    out = graph_pb2.GraphDef.FromString(emit_graphdef_bytes(load_graph_bytes(graph.SerializeToString())))
    assert list(out.node[2].input) == ["p:0", "^a"]
