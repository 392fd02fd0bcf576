"""The verifier names every broken invariant, and passes valid graphs in any op order."""
from __future__ import annotations

from typing import Callable

import pytest

from compiler.errors import VerificationError
from compiler.ir.graph import Graph, Value
from compiler.ir.parser import parse_graph
from compiler.ir.verifier import verify

TEXT = """graph {
  %x = Placeholder() {dtype = f32} : f32[*]
  %a = Neg(%x) {T = f32} : f32[*]
  %b = Add(%a, %a) {T = f32} : f32[*]
  %c = Neg(%b) {T = f32} : f32[*]
  %s[2] = Unique(%x) {T = f32, out_idx = i32} : f32[*], i32[*]
}
"""


def graph() -> Graph:
    g = parse_graph(TEXT)
    g.op("c").add_control_dep(g.op("a"))
    verify(g)
    return g


def _drop_use(g: Graph) -> None:
    g.op("a").result.uses.pop()


def _duplicate_use(g: Graph) -> None:
    """Two entries for slot 0, none for slot 1: as many entries as slots, yet wrong."""
    uses = g.op("a").result.uses
    uses[1] = uses[0]


def _use_of_wrong_slot(g: Graph) -> None:
    g.op("x").result.uses.append((g.op("c"), 0))


def _use_past_the_operands(g: Graph) -> None:
    g.op("x").result.uses.append((g.op("c"), 5))


def _dangling_use(g: Graph) -> None:
    c = g.op("c")
    c.set_control_deps([])
    g.erase_op(c)
    c._operands = [g.op("b").result]  # erased, but still reads %b (as a buggy pass might leave it)
    g.op("b").result.uses.append((c, 0))


def _operand_from_another_graph(g: Graph) -> None:
    stranger = Graph().create_op("Neg", "stranger", result_types=[(None, None)])
    g.op("c").set_operand(0, stranger.result)


def _stale_value(g: Graph) -> None:
    a = g.op("a")
    a.results = [Value(a, 0, a.result.dtype, a.result.shape)]


def _misnumbered_result(g: Graph) -> None:
    s = g.op("s")
    s.results[1].index = 0


def _one_sided_control_dep(g: Graph) -> None:
    g.op("b")._control_deps.append(g.op("x"))


def _one_sided_control_user(g: Graph) -> None:
    g.op("x").control_users.append(g.op("b"))


def _control_dep_outside(g: Graph) -> None:
    stranger = Graph().create_op("NoOp", "stranger", result_types=[])
    g.op("b")._control_deps.append(stranger)
    stranger.control_users.append(g.op("b"))


def _renamed_behind_the_table(g: Graph) -> None:
    g.op("c")._name = "d"


def _foreign_graph_pointer(g: Graph) -> None:
    g.op("c").graph = Graph()


def _unlisted_op(g: Graph) -> None:
    g._unlink(g.op("c"))


def _data_cycle(g: Graph) -> None:
    g.op("a").set_operand(0, g.op("c").result)


def _control_cycle(g: Graph) -> None:
    g.op("a").add_control_dep(g.op("c"))


BREAKS: list[tuple[Callable[[Graph], None], str]] = [
    (_drop_use, "use-list of 'a' does not record operand 1 of 'b' exactly once"),
    (_duplicate_use, "use-list of 'a' does not record operand 0 of 'b' exactly once"),
    (_use_of_wrong_slot, "'x' records a use by 'c' operand 0 that does not exist"),
    (_use_past_the_operands, "'x' records a use by 'c' operand 5 that does not exist"),
    (_dangling_use, "'b' has a dangling use by erased op 'c'"),
    (_operand_from_another_graph, "op 'c' operand 0 is defined by 'stranger', which is not in the graph"),
    (_stale_value, "op 'b' operand 0 is a stale value of 'a'"),
    (_misnumbered_result, "result 1 of 's' is misnumbered"),
    (_one_sided_control_dep, "'x' does not list 'b' among its control users"),
    (_one_sided_control_user, "'x' lists control user 'b' that does not depend on it"),
    (_control_dep_outside, "op 'b' control-depends on 'stranger', which is not in the graph"),
    (_renamed_behind_the_table, "op 'd' is not registered under its name"),
    (_foreign_graph_pointer, "op 'c' does not point back to its graph"),
    (_unlisted_op, "op list has 4 ops but the name table has 5"),
    (_data_cycle, "graph has a cycle through 3 ops, e.g. 'a'"),
    (_control_cycle, "graph has a cycle through 3 ops, e.g. 'a'"),
]


@pytest.mark.parametrize("brake, message", BREAKS, ids=[fn.__name__.strip("_") for fn, _ in BREAKS])
def test_each_broken_invariant_is_named(brake: Callable[[Graph], None], message: str) -> None:
    g = graph()
    brake(g)
    with pytest.raises(VerificationError) as caught:
        verify(g)
    assert str(caught.value) == message


def test_any_op_order_passes_when_the_graph_is_acyclic() -> None:
    g = graph()
    g.reorder(list(reversed(g.ops)))  # every edge now points backward in the order
    verify(g)


def test_loop_back_edges_may_close_a_cycle_listed_in_any_order() -> None:
    loop = parse_graph("""graph {
  %next = NextIteration(%body) {T = f32} : f32[*]
  %body = Neg(%merge) {T = f32} : f32[*]
  %merge[2] = Merge(%enter, %next) {N = 2, T = f32} : f32[*], i32[]
  %enter = Enter(%x) {T = f32, frame_name = "f"} : f32[*]
  %x = Placeholder() {dtype = f32} : f32[*]
}
""")
    verify(loop)
    loop.op("enter").set_operand(0, loop.op("body").result)
    with pytest.raises(VerificationError, match="cycle"):
        verify(loop)


def test_a_control_edge_listed_backward_is_valid() -> None:
    g = graph()
    g.move_to_end(g.op("a"))  # %a now stands after %c, which control-depends on it
    verify(g)
