"""A checkpoint puts a graph back exactly as it was, whatever a failing pass changed."""
from __future__ import annotations

from compiler.frontends.graphdef import load_graph
from compiler.ir.dtypes import DType
from compiler.ir.graph import Checkpoint, Graph
from compiler.ir.parser import parse_graph
from compiler.ir.printer import print_graph
from compiler.ir.shapes import Shape
from compiler.ir.verifier import verify

TEXT = """graph {
  %x = Placeholder() {dtype = f32} : f32[*]
  %a = Neg(%x) {T = f32} : f32[*]
  %b = Add(%a, %x) {T = f32} : f32[*]
  %c = Relu(%b, ^%a) {T = f32} : f32[*]
  %d = Neg(%c) {T = f32} : f32[*]
}
"""


def _state(g: Graph) -> list[tuple]:
    """Everything a pass could change that printing does not show: list orders and identities."""
    return [(op, op.name, [(v, [(u, i) for u, i in v.uses]) for v in op.results], list(op.control_deps),
             list(op.control_users), op.explicit_port0, op.extras) for op in g]


def _wreck(g: Graph) -> None:
    """Touch every kind of state through the API and behind it, as a pass that then fails might."""
    x, a, b, c, d = (g.op(n) for n in "xabcd")
    new = g.create_op("Sqrt", "new", [x.result], {"T": DType.FLOAT}, before=a)
    b.set_operand(1, new.result)
    c.result.replace_all_uses_with(new.result)
    g.erase_op(d)
    c.remove_control_dep(a)
    a.add_control_dep(new)
    g.rename(b, "renamed")
    g.move_to_end(x)
    a.attrs["T"] = DType.DOUBLE
    a.attrs["extra"] = 3
    a.type, a.device, a.extras, a.explicit_port0 = "Abs", "/cpu:0", b"\x01", frozenset({0})
    a.result.dtype, a.result.shape = DType.INT32, Shape((2,))
    g.versions.producer = 99
    g.extras.misc["key"] = "value"


def test_restore_undoes_every_change_in_place():
    g = parse_graph(TEXT)
    g.op("b").explicit_port0 = frozenset({1})
    before_text, before_state = print_graph(g), _state(g)
    checkpoint = Checkpoint(g)
    _wreck(g)
    assert print_graph(g) != before_text
    checkpoint.restore()
    assert print_graph(g) == before_text
    assert _state(g) == before_state
    assert g.versions.producer == 0 and "key" not in g.extras.misc
    assert "new" not in g and "renamed" not in g
    verify(g)
    _wreck(g)  # the checkpoint still holds: a second restore works too
    checkpoint.restore()
    assert print_graph(g) == before_text


def test_restore_brings_back_the_function_library():
    from conftest import load_model_fixture

    g = load_graph(load_model_fixture("tf2_functional_control_flow").path)
    name = g.extras.library.function[0].signature.name
    checkpoint = Checkpoint(g)
    g.extras.library.function[0].signature.name = "renamed"
    checkpoint.restore()
    assert g.extras.library.function[0].signature.name == name


def test_attr_contents_survive_writes_reads_and_deletes():
    """`contents` hands out the map's own dicts, so every write must replace them, not change
    them; a value decoded and cached after the checkpoint is still the same value after restore."""
    from compiler.ir.attrs import AttrMap

    attrs = AttrMap(values={"a": 1}, sources={"b": "2", "c": "3"}, decode=int)
    saved = attrs.contents()
    assert attrs["b"] == 2  # decoded and cached
    attrs["a"] = 10
    attrs["c"] = 30
    del attrs["b"]
    attrs.setdefault("d", 4)
    assert dict(attrs) == {"a": 10, "c": 30, "d": 4}
    attrs.restore_contents(saved)
    assert dict(attrs) == {"a": 1, "b": 2, "c": 3}
    assert attrs.source("c") == "3"
