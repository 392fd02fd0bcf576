"""Which passes the verifier instrument trusts to have left the structure as it verified it.

A built-in pass marked `edits_through_api` that ticked no `StructureClock` is not swept again,
even when it reports a change (strip_unused_nodes dropping the GraphDef header); a pass not
marked, or loaded as a plugin, is swept whenever it reports a change.
"""
from __future__ import annotations

import pytest

from compiler.errors import PluginError, VerificationError
from compiler.ir.graph import Graph
from compiler.ir.parser import parse_graph
from compiler.passes import instruments
from compiler.passes.base import Pass, PassContext, PassResult, temporarily_registered
from compiler.passes.instruments import default_instruments
from compiler.passes.manager import PassManager
from compiler.passes.pipeline import parse_pipeline

SMALL_IR = """graph {
  %x = Placeholder() {dtype = f32, shape = shape<1,4>} : f32[1,4]
  %c = Const() {dtype = f32, value = dense<f32[4], [1.0, 2.0, 3.0, 4.0]>} : f32[4]
  %id = Identity(%x) {T = f32} : f32[1,4]
  %y = AddV2(%id, %c) {T = f32} : f32[1,4]
}
"""


class DropsHeader(Pass):
    """Reports a change that is not structural (as a dropped GraphDef header is)."""

    name = "t_drops_header"
    edits_through_api = True

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        graph.versions.producer = 0
        return PassResult(changed=True)


class ErasesThroughApi(Pass):
    """A marked pass that does change the structure, through the API."""

    name = "t_api_erase"
    edits_through_api = True

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        op = graph.op("id")
        op.result.replace_all_uses_with(op.operands[0])
        graph.erase_op(op)
        return PassResult(sites=1, changed=True)


class BreaksQuietly(Pass):
    """Not marked: breaks a use-list behind the API and reports it changed something."""

    name = "t_breaks_quietly"

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        graph.op("c").result.uses.clear()
        return PassResult(changed=True)


class MarkedPlugin(BreaksQuietly):
    """The same break in a pass that claims the mark but was loaded as a plugin."""

    name = "t_marked_plugin"
    edits_through_api = True
    origin = "plugin.py"


@pytest.fixture(autouse=True)
def registered():
    with temporarily_registered(DropsHeader, ErasesThroughApi, BreaksQuietly, MarkedPlugin):
        yield


@pytest.fixture
def checked(monkeypatch) -> list[Graph]:
    swept: list[Graph] = []
    real = instruments.verify
    monkeypatch.setattr(instruments, "verify", lambda g: (swept.append(g), real(g))[1])
    return swept


def run(text: str, graph: Graph) -> None:
    PassManager(parse_pipeline(text), instruments=default_instruments(True, None, None)).run(graph, in_place=True)


def test_marked_pass_without_structural_edit_is_not_swept_again(checked):
    run("t_drops_header t_drops_header", parse_graph(SMALL_IR))
    assert len(checked) == 1  # the input only


def test_marked_pass_with_a_structural_edit_is_swept(checked):
    graph = parse_graph(SMALL_IR)
    run("t_drops_header t_api_erase t_drops_header", graph)
    assert len(checked) == 2 and "id" not in graph  # the input, and after t_api_erase


def test_unmarked_pass_reporting_a_change_is_still_swept():
    with pytest.raises(VerificationError, match=r"pass 2 't_breaks_quietly' left invalid IR: use-list of 'c'"):
        run("t_drops_header t_breaks_quietly", parse_graph(SMALL_IR))


def test_plugin_is_swept_whatever_it_claims():
    with pytest.raises(PluginError, match=r"'t_marked_plugin' \(plugin.py\) left invalid IR: use-list of 'c'"):
        run("t_marked_plugin", parse_graph(SMALL_IR))


def test_strip_unused_nodes_dropping_only_the_header_is_not_swept_again(checked):
    graph = parse_graph(SMALL_IR)
    graph.versions.producer = 1234
    run("strip_unused_nodes(name=x) remove_nodes(op=Identity)", graph)
    assert graph.versions.producer == 0 and "id" not in graph
    assert len(checked) == 2  # the input, then after remove_nodes (strip kept every op)
