"""The IR mutation API keeps use-lists, names and order consistent."""
from __future__ import annotations

import pytest

from compiler.errors import VerificationError
from compiler.ir.dtypes import DType
from compiler.ir.graph import Graph, IRError
from compiler.ir.parser import parse_graph
from compiler.ir.printer import print_graph
from compiler.ir.shapes import Shape
from compiler.ir.tensor import Tensor
from compiler.ir.verifier import verify

import numpy as np

SMALL = """graph {
  %x = Placeholder() {dtype = f32, shape = shape<1,4>} : f32[1,4]
  %w = Const() {dtype = f32, value = dense<f32[4,2], 0x0000803f000000400000404000008040000080400000a0400000c0400000e040>} : f32[4,2]
  %mm = MatMul(%x, %w) {T = f32, transpose_a = false, transpose_b = false} : f32[*]
  %id = Identity(%mm) {T = f32} : f32[*]
  %out = Relu(%id) {T = f32} : f32[*]
}
"""


def small() -> Graph:
    graph = parse_graph(SMALL)
    verify(graph)
    return graph


def test_uses_are_tracked_on_parse():
    g = small()
    mm = g.op("mm")
    assert [(op.name, i) for op, i in mm.result.uses] == [("id", 0)]
    assert g.op("x").result.users == [mm]


def test_replace_all_uses_and_erase():
    g = small()
    ident = g.op("id")
    moved = ident.result.replace_all_uses_with(ident.operands[0])
    assert moved == 1
    g.erase_op(ident)
    verify(g)
    assert g.op("out").operands[0] is g.op("mm").result
    assert "id" not in g


def test_erase_refuses_used_op():
    g = small()
    with pytest.raises(IRError, match="used by out"):
        g.erase_op(g.op("id"))


def test_create_op_infers_result_types_from_registry():
    g = small()
    split_dim = g.create_op("Const", "axis", attrs={"dtype": DType.INT32, "value": Tensor.from_numpy(np.int32(1))})
    split = g.create_op("Split", "split", [split_dim.result, g.op("out").result],
                        attrs={"T": DType.FLOAT, "num_split": 2})
    assert len(split.results) == 2
    assert split.results[1].dtype == DType.FLOAT
    assert split_dim.result.shape == Shape(())
    verify(g)


def test_insert_before_and_rename_keep_references():
    g = small()
    out = g.op("out")
    neg = g.create_op("Neg", "neg", [g.op("id").result], attrs={"T": DType.FLOAT}, before=out)
    out.set_operand(0, neg.result)
    g.rename(g.op("id"), "renamed")
    verify(g)
    assert [op.name for op in g] == ["x", "w", "mm", "renamed", "neg", "out"]
    assert "%neg = Neg(%renamed)" in print_graph(g)


def test_control_dependencies_round_trip():
    g = small()
    g.op("out").add_control_dep(g.op("w"))
    verify(g)
    assert g.op("w").control_users == [g.op("out")]
    text = print_graph(g)
    assert "Relu(%id, ^%w)" in text
    assert print_graph(parse_graph(text)) == text


def test_verifier_catches_broken_use_list():
    g = small()
    g.op("mm").result.uses.clear()
    with pytest.raises(VerificationError, match="use-list"):
        verify(g)


def test_verifier_catches_cycle_but_allows_loop_back_edge():
    cyclic = parse_graph("""graph {
  %a = Neg(%b) : ?[*]
  %b = Neg(%a) : ?[*]
}
""")
    with pytest.raises(VerificationError, match="cycle"):
        verify(cyclic)
    loop = parse_graph("""graph {
  %enter = Enter(%x) {T = f32, frame_name = "f"} : f32[*]
  %merge[2] = Merge(%enter, %next) {N = 2, T = f32} : f32[*], i32[]
  %body = Neg(%merge) {T = f32} : f32[*]
  %next = NextIteration(%body) {T = f32} : f32[*]
  %x = Placeholder() {dtype = f32} : f32[*]
}
""")
    verify(loop)


def test_clone_is_independent():
    g = small()
    c = g.clone()
    c.erase_op(c.op("out"))
    verify(c)
    verify(g)
    assert "out" in g and "out" not in c


def _hub_graph(users: int) -> Graph:
    g = Graph()
    hub = g.create_op("NoOp", "hub", result_types=[])
    other = g.create_op("NoOp", "other", result_types=[])
    for i in range(users):
        user = g.create_op("NoOp", f"u{i}", result_types=[])
        user.set_control_deps([other, hub] if i % 2 else [hub])
    return g


def test_hand_control_users_to_keeps_each_dependency_in_place():
    g = _hub_graph(6)
    new = g.create_op("NoOp", "new", result_types=[])
    assert g.op("hub").hand_control_users_to(new) == 6
    assert [d.name for d in g.op("u1").control_deps] == ["other", "new"]
    assert [d.name for d in g.op("u2").control_deps] == ["new"]
    assert g.op("hub").control_users == [] and len(new.control_users) == 6
    verify(g)


def test_set_control_deps_keeps_kept_entries_and_stays_consistent():
    g = _hub_graph(4)
    user = g.op("u1")
    user.set_control_deps([g.op("hub")])            # drop one, keep one
    assert g.op("other").control_users.count(user) == 0 and g.op("hub").control_users.count(user) == 1
    user.set_control_deps([g.op("hub"), g.op("hub")])  # duplicates rebuild both sides
    assert g.op("hub").control_users.count(user) == 2
    user.set_control_deps([])
    assert user not in g.op("hub").control_users
    verify(g)


def _control_state(g: Graph) -> list[tuple[str, list[str], list[str]]]:
    return [(op.name, [d.name for d in op.control_deps], [u.name for u in op.control_users]) for op in g]


@pytest.mark.parametrize("seed", range(20))
def test_hand_over_control_users_matches_one_move_at_a_time(seed):
    """Random control edges (duplicates included) and moves (chains in odd seeds): the batch
    leaves exactly the lists that handing over one op after the other leaves."""
    rng = np.random.default_rng(seed)
    graphs = []
    for _ in range(2):
        g = Graph()
        ops = [g.create_op("NoOp", f"n{i}", result_types=[]) for i in range(16)]
        graphs.append((g, ops))
    # users 6..11 wait on 0..5; ops move to 12..15, or in odd seeds also to one another
    edges = [(int(rng.integers(6, 12)), int(rng.integers(0, 6))) for _ in range(30)]
    olds = [int(i) for i in rng.choice(6, size=4, replace=False)]
    targets = [*range(6), *range(12, 16)] if seed % 2 else list(range(12, 16))
    news = [int(rng.choice([t for t in targets if t != o])) for o in olds]
    for g, ops in graphs:
        for user, dep in edges:
            ops[user].set_control_deps([*ops[user].control_deps, ops[dep]])
    (one, one_ops), (batch, batch_ops) = graphs
    for o, n in zip(olds, news):
        one_ops[o].hand_control_users_to(one_ops[n])
    Graph.hand_over_control_users([(batch_ops[o], batch_ops[n]) for o, n in zip(olds, news)])
    assert _control_state(batch) == _control_state(one)
    verify(batch)


def test_release_frees_erased_ops_without_the_collector():
    """An erased op and its results point at each other; `release` breaks that cycle too, so
    reference counting frees them (the compile runs with the collector paused)."""
    import gc
    import weakref

    from compiler.ir.graph import Checkpoint

    graph = small()
    identity = graph.op("id")
    identity.results[0].replace_all_uses_with(graph.op("mm").result)
    graph.erase_op(identity)
    checkpoint = Checkpoint(graph)
    made = graph.create_op("Relu", "made", [graph.op("x").result], attrs={"T": DType.FLOAT})
    checkpoint.restore()  # `made` leaves the graph as a failed pass's op does
    refs = [weakref.ref(identity), weakref.ref(made)]
    assert made.graph is None
    del identity, made
    gc.disable()
    try:
        assert all(ref() is not None for ref in refs)
        graph.release()
        assert [ref() for ref in refs] == [None, None]
    finally:
        gc.enable()
