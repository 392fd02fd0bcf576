"""A node no pass changed is written by protobuf from the message it was loaded from.

That shortcut must give exactly the bytes the field-by-field writer gives: for every
fixture, and after every kind of edit that makes a node differ from its message (the
edited node then takes the long way and shows the edit).
"""
from __future__ import annotations

from typing import Callable

import pytest
from google.protobuf import text_format

from compiler.backends.graphdef import emit as emit_module
from compiler.backends.graphdef import emit_graphdef_bytes
from compiler.frontends.graphdef import load_graph_bytes
from compiler.ir.graph import Checkpoint, Graph
from compiler.proto import graph_pb2

from conftest import FIXTURES


def _field_by_field(graph: Graph) -> bytes:
    """What the emitter writes with the shortcut off."""
    origins = {op: op.origin for op in graph}
    for op in graph:
        op.origin = None
    try:
        return emit_graphdef_bytes(graph)
    finally:
        for op, origin in origins.items():
            op.origin = origin


def _shortcut_count(graph: Graph) -> int:
    return sum(op.origin is not None and emit_module._as_loaded(op, emit_module.input_strings(op)) is not None
               for op in graph)


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.pb")), ids=lambda p: p.stem)
def test_every_fixture_is_written_the_same_either_way(path):
    graph = load_graph_bytes(path.read_bytes(), path.name)
    assert emit_graphdef_bytes(graph) == _field_by_field(graph)
    assert _shortcut_count(graph) > 0


_GRAPH = """
node { name: 'x' op: 'Placeholder' attr { key: 'dtype' value { type: DT_FLOAT } } }
node { name: 'p' op: 'Const' attr { key: 'dtype' value { type: DT_INT32 } }
       attr { key: 'value' value { tensor { dtype: DT_INT32 tensor_shape { dim { size: 1 } dim { size: 2 } }
                                            int_val: 1 int_val: 1 } } } }
node { name: 'pad' op: 'Pad' input: 'x' input: 'p'
       attr { key: 'T' value { type: DT_FLOAT } } attr { key: 'Tpaddings' value { type: DT_INT32 } } }
node { name: 'r' op: 'Relu' input: 'pad:0' attr { key: 'T' value { type: DT_FLOAT } } }
node { name: 'n' op: 'Neg' input: 'r' input: '^x' device: '/cpu:0' attr { key: 'T' value { type: DT_FLOAT } } }
"""


def _load() -> Graph:
    return load_graph_bytes(text_format.Parse(_GRAPH, graph_pb2.GraphDef()).SerializeToString(), "edits")


def _nodes(data: bytes) -> list[graph_pb2.NodeDef]:
    return list(graph_pb2.GraphDef.FromString(data).node)


def test_keys_one_a_prefix_of_another_take_the_long_way_in_tf_order():
    """upb writes `Tpaddings` before `T`; TF and the field-by-field writer write `T` first."""
    graph = _load()
    pad = graph.op("pad")
    assert emit_module._as_loaded(pad, emit_module.input_strings(pad)) is None
    data = emit_graphdef_bytes(graph)
    assert data == _field_by_field(graph)
    assert data.index(b"\n\x01T\x12") < data.index(b"\n\tTpaddings")
    assert _shortcut_count(graph) == 4  # every other node


def _rename(graph: Graph) -> str:
    graph.rename(graph.op("r"), "r2")
    return "r2"


def _set_device(graph: Graph) -> str:
    graph.op("r").device = "/gpu:0"
    return "r"


def _assign_attr(graph: Graph) -> str:
    graph.op("r").attrs["_note"] = "x"
    return "r"


def _delete_attr(graph: Graph) -> str:
    del graph.op("n").attrs["T"]
    return "n"


def _new_operand(graph: Graph) -> str:
    graph.op("r").set_operand(0, graph.op("x").result)
    return "r"


def _new_control_dep(graph: Graph) -> str:
    graph.op("r").add_control_dep(graph.op("p"))
    return "r"


def _producer_renamed(graph: Graph) -> str:
    graph.rename(graph.op("x"), "x2")
    return "n"  # its input strings name the producer


def _explicit_port_dropped(graph: Graph) -> str:
    graph.op("r").explicit_port0 = frozenset()
    return "r"


@pytest.mark.parametrize("edit", [_rename, _set_device, _assign_attr, _delete_attr, _new_operand, _new_control_dep,
                                  _producer_renamed, _explicit_port_dropped], ids=lambda f: f.__name__.strip("_"))
def test_an_edited_node_is_written_from_the_ir(edit: Callable[[Graph], str]):
    before = emit_graphdef_bytes(_load())
    graph = _load()
    name = edit(graph)
    after = emit_graphdef_bytes(graph)
    assert after == _field_by_field(graph)
    op = graph.op(name)
    assert emit_module._as_loaded(op, emit_module.input_strings(op)) is None
    position = list(graph).index(op)  # no edit here moves an op
    assert _nodes(after)[position] != _nodes(before)[position]


def test_a_node_put_back_by_a_checkpoint_is_its_message_again():
    graph = _load()
    saved = Checkpoint(graph)
    graph.op("r").attrs["T"] = graph.op("r").attrs["T"]
    graph.rename(graph.op("n"), "n2")
    saved.restore()
    assert emit_graphdef_bytes(graph) == emit_graphdef_bytes(_load())
    assert _shortcut_count(graph) == 4


def test_a_cloned_graph_is_written_the_same():
    graph = _load()
    assert emit_graphdef_bytes(graph.clone()) == emit_graphdef_bytes(graph)
