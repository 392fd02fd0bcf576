"""GraphBuilder's editing helpers that peepholes on the finished ONNX graph rely on."""
from __future__ import annotations

from compiler.backends.onnx.builder import GraphBuilder, ModelScope, ValueSpec


def _chain() -> GraphBuilder:
    """x -> a -> b, with c reading b and a (already in order)."""
    builder = GraphBuilder(ModelScope(17))
    builder.add_node("Relu", ["x"], ["a"], "na")
    builder.add_node("Neg", ["a"], ["b"], "nb")
    builder.add_node("Add", ["b", "a"], ["c"], "nc")
    return builder


def test_restore_order_keeps_an_ordered_graph_as_it_is() -> None:
    builder = _chain()
    builder.restore_order()
    assert [n.name for n in builder.nodes] == ["na", "nb", "nc"]


def test_restore_order_moves_a_late_producer_before_its_first_reader() -> None:
    builder = _chain()
    builder.remove(builder.nodes[0])                       # a is now made last, by a new node
    builder.add_node("Sigmoid", ["x"], ["a"], "late")
    builder.add_node("Abs", ["c"], ["d"], "nd")
    builder.restore_order()
    assert [n.name for n in builder.nodes] == ["late", "nb", "nc", "nd"]


def test_readers_and_exposure() -> None:
    builder = _chain()
    assert [n.name for n in builder.readers("a")] == ["nb", "nc"]
    assert not builder.is_exposed("c")
    builder.expose("c", ValueSpec("out", 1, ()))
    assert builder.is_exposed("c")
