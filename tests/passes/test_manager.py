"""The pass manager: validation before running, prerequisites, ignore_errors, instruments, report.

The passes here are tiny test passes registered only for each test, so the
manager is tested independently of the real passes.
"""
from __future__ import annotations

import io

import pytest

from compiler.errors import InputError, PassFailure, PipelineError, VerificationError
from compiler.ir.graph import Graph
from compiler.ir.parser import parse_graph
from compiler.ir.printer import print_graph
from compiler.passes.base import Param, Pass, PassContext, PassResult, temporarily_registered
from compiler.passes.instruments import Instrument, PrintIRInstrument, default_instruments
from compiler.passes.levels import (
    LEVELS, TARGETS, Level, available_levels, available_targets, drop_output_passes, get_level, missing_passes,
    preset_pipeline,
)
from compiler.passes.manager import PassManager, plan_pipeline, run_pipeline, snapshot
from compiler.passes.pipeline import PassSpec, parse_pipeline

SMALL_IR = """graph {
  %x = Placeholder() {dtype = f32, shape = shape<1,4>} : f32[1,4]
  %c = Const() {dtype = f32, value = dense<f32[4], [1.0, 2.0, 3.0, 4.0]>} : f32[4]
  %id = Identity(%x) {T = f32} : f32[1,4]
  %y = AddV2(%id, %c) {T = f32} : f32[1,4]
  %dead = Const() {dtype = f32, value = dense<f32[], [0.0]>} : f32[]
}
"""

RUNS: list[str] = []


class CountConsts(Pass):
    """Count Const ops (changes nothing)."""

    name = "t_count_consts"

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        RUNS.append(self.name)
        return PassResult(sites=sum(op.type == "Const" for op in graph))


class DropIdentities(Pass):
    """Bypass and erase Identity ops."""

    name = "t_drop_identities"

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        RUNS.append(self.name)
        result = PassResult()
        for op in [op for op in graph if op.type == "Identity"]:
            op.result.replace_all_uses_with(op.operands[0])
            graph.erase_op(op)
            result.sites += 1
        result.changed = result.sites > 0
        if result.changed:
            result.note(f"dropped {result.sites} Identity")
        return result


class EraseDeadThenFail(Pass):
    """Erase `%dead`, then fail: ignore_errors must bring `%dead` back."""

    name = "t_fail"
    params = (Param("reason", "str", "boom", "the error message"),)

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        RUNS.append(self.name)
        graph.erase_op(graph.op("dead"))
        raise ValueError(ctx.param("reason"))


class QuietErase(Pass):
    """Erase `%dead` through the API but report no change: the verifier must still look."""

    name = "t_quiet_erase"

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        graph.erase_op(graph.op("dead"))
        return PassResult()


class BreakUseLists(Pass):
    """Corrupt a use-list behind the IR API's back, as a buggy pass would."""

    name = "t_break_ir"

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        graph.op("c").result.uses.clear()
        return PassResult(sites=1, changed=True)


class ReturnsNothing(Pass):
    """Forgets to return its PassResult."""

    name = "t_returns_none"

    def run(self, graph: Graph, ctx: PassContext):  # type: ignore[override]
        return None


class BadInput(Pass):
    """Fails the way a pass rejects a user's --outputs."""

    name = "t_bad_input"

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        raise InputError("output 'nope' is not in the graph")


class Typed(Pass):
    """Declares one parameter of each kind."""

    name = "t_typed"
    params = (
        Param("count", "int", 1, "an int"),
        Param("scale", "float", 1.0, "a float"),
        Param("type", "dtype", None, "a dtype"),
        Param("shape", "shape", None, "a shape"),
        Param("op", "str", (), "repeatable", repeated=True),
    )

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        RUNS.append(f"{self.name}:{ctx.param('count')}:{ctx.params('op')}")
        return PassResult()


class NeedsCount(Pass):
    """Requires t_count_consts earlier."""

    name = "t_needs_count"
    requires = ("t_count_consts",)

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        RUNS.append(self.name)
        return PassResult()


class NeedsNeedsCount(Pass):
    """Requires t_needs_count, which requires t_count_consts."""

    name = "t_needs_needs"
    requires = ("t_needs_count",)

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        RUNS.append(self.name)
        return PassResult()


class CycleA(Pass):
    """Requires t_cycle_b."""

    name = "t_cycle_a"
    requires = ("t_cycle_b",)


class CycleB(Pass):
    """Requires t_cycle_a."""

    name = "t_cycle_b"
    requires = ("t_cycle_a",)


class NeedsGhost(Pass):
    """Requires a pass nobody registered."""

    name = "t_needs_ghost"
    requires = ("t_ghost",)


TEST_PASSES = (CountConsts, DropIdentities, EraseDeadThenFail, QuietErase, BreakUseLists, ReturnsNothing, BadInput,
               Typed, NeedsCount, NeedsNeedsCount, CycleA, CycleB, NeedsGhost)


@pytest.fixture(autouse=True)
def test_passes():
    RUNS.clear()
    with temporarily_registered(*TEST_PASSES):
        yield


@pytest.fixture
def graph() -> Graph:
    return parse_graph(SMALL_IR, "small.ir")


# -- validation ---------------------------------------------------------------------


def test_unknown_pass_lists_valid_names_and_suggests_one():
    with pytest.raises(PipelineError) as info:
        plan_pipeline(parse_pipeline("t_count_const"))
    message = str(info.value)
    assert "unknown pass 't_count_const'; did you mean 't_count_consts'?" in message
    assert "t_drop_identities" in message and "t_typed" in message


def test_unknown_parameter_lists_that_pass_parameters():
    with pytest.raises(PipelineError, match=r"t_typed: unknown parameter 'size' \(valid parameters: count, "
                                            r"ignore_errors, op, scale, shape, type\)"):
        plan_pipeline(parse_pipeline("t_typed(size=3)"))


@pytest.mark.parametrize("text, fragment", [
    ("t_typed(count=three)", "bad value 'three' for parameter 'count' (expected int"),
    ("t_typed(scale=x)", "bad value 'x' for parameter 'scale' (expected float"),
    ("t_typed(type=float99)", "bad value 'float99' for parameter 'type' (expected dtype"),
    ('t_typed(shape="1,x")', "bad value '1,x' for parameter 'shape' (expected shape"),
    ("t_typed(ignore_errors=maybe)", "bad value 'maybe' for parameter 'ignore_errors' (expected bool"),
])
def test_bad_values_are_rejected_when_planning(text, fragment):
    with pytest.raises(PipelineError) as info:
        plan_pipeline(parse_pipeline(text))
    assert fragment in str(info.value)


def test_single_valued_parameter_given_twice_is_rejected_but_repeatable_one_is_not():
    with pytest.raises(PipelineError, match="'count' given more than once"):
        plan_pipeline(parse_pipeline("t_typed(count=1, count=2)"))
    steps, _ = plan_pipeline(parse_pipeline("t_typed(op=A, op=B)"))
    assert steps[0].context.params("op") == ["A", "B"]


def test_nothing_runs_when_a_later_entry_is_invalid(graph):
    with pytest.raises(PipelineError):
        run_pipeline(graph, "t_count_consts t_drop_identities t_typed(count=x)")
    assert RUNS == []


def test_context_carries_io_names_and_typed_params(graph):
    steps, _ = plan_pipeline(parse_pipeline("t_typed(count=7, op=A)"), inputs=["x"], outputs=["y"])
    ctx = steps[0].context
    assert (ctx.inputs, ctx.outputs, ctx.pass_name) == (["x"], ["y"], "t_typed")
    assert ctx.param("count") == 7 and ctx.param("scale") == 1.0
    run_pipeline(graph, "t_typed(count=7, op=A, op=B)", inputs=["x"], outputs=["y"])
    assert RUNS == ["t_typed:7:['A', 'B']"]


# -- prerequisites --------------------------------------------------------------------


def test_missing_prerequisite_names_both_passes():
    with pytest.raises(PipelineError) as info:
        plan_pipeline(parse_pipeline("t_drop_identities t_needs_count"))
    message = str(info.value)
    assert "pass 't_needs_count' requires 't_count_consts' to run earlier" in message
    assert "--auto-prereqs" in message


def test_prerequisite_later_in_the_pipeline_does_not_count():
    with pytest.raises(PipelineError, match="requires 't_count_consts'"):
        plan_pipeline(parse_pipeline("t_needs_count t_count_consts"))


def test_prerequisite_earlier_is_accepted():
    steps, notes = plan_pipeline(parse_pipeline("t_count_consts t_drop_identities t_needs_count"))
    assert [s.name for s in steps] == ["t_count_consts", "t_drop_identities", "t_needs_count"]
    assert notes == []


def test_auto_prereqs_inserts_recursively_right_before_and_reports_it(graph):
    report = run_pipeline(graph, "t_drop_identities t_needs_needs", auto_prereqs=True)
    assert RUNS == ["t_drop_identities", "t_count_consts", "t_needs_count", "t_needs_needs"]
    assert [r.inserted_for for r in report.records] == [None, "t_needs_count", "t_needs_needs", None]
    assert report.notes == [
        "inserted t_count_consts before t_needs_count, which requires it (auto-prereqs)",
        "inserted t_needs_count before t_needs_needs, which requires it (auto-prereqs)",
    ]
    assert "t_count_consts [auto]" in report.format()


def test_auto_prereqs_inserts_nothing_when_already_satisfied():
    steps, notes = plan_pipeline(parse_pipeline("t_count_consts t_needs_count"), auto_prereqs=True)
    assert [s.name for s in steps] == ["t_count_consts", "t_needs_count"] and notes == []


def test_prerequisite_cycle_and_unknown_prerequisite_are_errors():
    with pytest.raises(PipelineError, match="cycle: t_cycle_b -> t_cycle_a -> t_cycle_b"):
        plan_pipeline(parse_pipeline("t_cycle_a"), auto_prereqs=True)
    with pytest.raises(PipelineError, match="requires 't_ghost', which is not a registered pass"):
        plan_pipeline(parse_pipeline("t_needs_ghost"), auto_prereqs=True)


# -- running and ignore_errors ------------------------------------------------------------


def test_run_leaves_the_callers_graph_alone(graph):
    before = print_graph(graph)
    report = run_pipeline(graph, "t_drop_identities")
    assert print_graph(graph) == before
    assert "id" in graph and "id" not in report.graph
    assert report.graph.op("y").operands[0] is report.graph.op("x").result


def test_ignore_errors_records_the_error_restores_the_graph_and_continues(graph):
    report = run_pipeline(graph, 't_fail(ignore_errors=true, reason="no luck") t_drop_identities')
    assert RUNS == ["t_fail", "t_drop_identities"]
    failed, dropped = report.records
    assert failed.error == "ValueError: no luck" and failed.nodes_after == failed.nodes_before == 5
    assert "dead" in report.graph and "id" not in report.graph
    assert report.failures == [failed] and dropped.changed
    assert "FAILED, ignored (graph restored)" in report.format()
    assert "error: ValueError: no luck" in report.format()


def test_failure_without_ignore_errors_names_the_pass(graph):
    with pytest.raises(PassFailure, match=r"pass 2 't_fail\(reason=kaput\)' failed: ValueError: kaput") as info:
        run_pipeline(graph, "t_count_consts t_fail(reason=kaput) t_drop_identities")
    assert info.value.exit_code == 1
    assert RUNS == ["t_count_consts", "t_fail"]
    assert "dead" in graph  # the caller's graph is untouched even though the pass erased it


def test_input_error_from_a_pass_keeps_exit_code_2(graph):
    with pytest.raises(PassFailure, match="pass 1 't_bad_input' failed: output 'nope'") as info:
        run_pipeline(graph, "t_bad_input")
    assert info.value.exit_code == 2


def test_pass_returning_none_is_a_failure(graph):
    with pytest.raises(PassFailure, match="returned NoneType, not a PassResult"):
        run_pipeline(graph, "t_returns_none")


def test_snapshot_copies_the_function_library():
    from conftest import load_model_fixture

    from compiler.frontends.graphdef import load_graph

    original = load_graph(load_model_fixture("tf2_functional_control_flow").path)
    copy = snapshot(original)
    copy.extras.library.function[0].signature.name = "renamed"
    assert original.extras.library.function[0].signature.name != "renamed"


# -- instruments ------------------------------------------------------------------------


def test_verifier_names_the_pass_that_broke_the_ir(graph):
    with pytest.raises(VerificationError, match=r"pass 2 't_break_ir' left invalid IR: use-list of 'c'"):
        run_pipeline(graph, "t_count_consts t_break_ir t_drop_identities")
    assert RUNS == ["t_count_consts"]


def _count_verifications(monkeypatch) -> list[Graph]:
    from compiler.passes import instruments

    checked: list[Graph] = []
    real = instruments.verify
    monkeypatch.setattr(instruments, "verify", lambda g: (checked.append(g), real(g))[1])
    return checked


def _run_in_place(graph: Graph, text: str) -> None:
    PassManager(parse_pipeline(text), instruments=default_instruments(True, None, None)).run(graph, in_place=True)


def test_verifier_skips_a_pass_that_changed_nothing(graph, monkeypatch):
    checked = _count_verifications(monkeypatch)
    _run_in_place(graph, "t_count_consts t_drop_identities t_count_consts")
    assert len(checked) == 2  # the input, and after t_drop_identities


def test_verifier_checks_a_structural_change_the_pass_did_not_report(graph, monkeypatch):
    checked = _count_verifications(monkeypatch)
    _run_in_place(graph, "t_count_consts t_quiet_erase")
    assert len(checked) == 2  # the input, and after t_quiet_erase (the op list changed)


def test_verifier_can_be_turned_off(graph):
    report = run_pipeline(graph, "t_break_ir", verify_each=False)
    assert report.records[0].changed


def test_verifier_checks_the_input_first(graph):
    graph.op("x").result.uses.clear()
    with pytest.raises(VerificationError, match="input graph is invalid before any pass ran"):
        run_pipeline(graph, "t_count_consts")
    assert RUNS == []


def test_print_ir_after_one_pass(graph):
    stream = io.StringIO()
    run_pipeline(graph, "t_count_consts t_drop_identities t_count_consts", print_ir_after="t_drop_identities",
                 stream=stream)
    text = stream.getvalue()
    assert text.startswith("// -----// IR after t_drop_identities (pass 2 of 3) //----- //\n")
    assert text.count("// -----// IR after") == 1
    printed = text.split("\n", 1)[1]
    assert "Identity" not in printed
    assert parse_graph(printed, "dump").op("y").operands[0].op.name == "x"


def test_print_ir_after_all_marks_failed_passes(graph):
    stream = io.StringIO()
    run_pipeline(graph, "t_count_consts t_fail(ignore_errors=true)", print_ir_after="all", stream=stream)
    headers = [line for line in stream.getvalue().splitlines() if line.startswith("// -----//")]
    assert headers == [
        "// -----// IR after t_count_consts (pass 1 of 2) //----- //",
        "// -----// IR after t_fail(ignore_errors=true) (pass 2 of 2, failed and restored) //----- //",
    ]


def test_print_ir_after_prints_broken_ir_before_the_verifier_stops(graph):
    stream = io.StringIO()
    with pytest.raises(VerificationError):
        run_pipeline(graph, "t_break_ir", print_ir_after="t_break_ir", stream=stream)
    assert "IR after t_break_ir" in stream.getvalue()


@pytest.mark.parametrize("name, fragment", [
    ("t_drop_identities", "pass 't_drop_identities' is not in the pipeline (passes: t_count_consts)"),
    ("nonsense", "unknown pass 'nonsense'"),
])
def test_print_ir_after_a_pass_that_never_runs_is_an_error(graph, name, fragment):
    with pytest.raises(PipelineError) as info:
        run_pipeline(graph, "t_count_consts", print_ir_after=name)
    assert fragment in str(info.value)
    assert RUNS == []


def test_hooks_run_before_in_order_and_after_in_reverse(graph):
    calls: list[str] = []

    class Recorder(Instrument):
        def __init__(self, tag: str) -> None:
            self.tag = tag

        def before_pipeline(self, graph, steps):
            calls.append(f"{self.tag}:start:{len(steps)}")

        def before_pass(self, graph, step):
            calls.append(f"{self.tag}:before:{step.name}")

        def after_pass(self, graph, step, outcome):
            calls.append(f"{self.tag}:after:{step.name}:{outcome.result.sites}")

        def after_pipeline(self, graph):
            calls.append(f"{self.tag}:end")

    PassManager(parse_pipeline("t_count_consts"), instruments=[Recorder("a"), Recorder("b")]).run(graph)
    assert calls == ["a:start:1", "b:start:1", "a:before:t_count_consts", "b:before:t_count_consts",
                     "b:after:t_count_consts:2", "a:after:t_count_consts:2", "b:end", "a:end"]


def test_instruments_check_the_pipeline_at_construction():
    with pytest.raises(PipelineError, match="not in the pipeline"):
        PassManager(parse_pipeline("t_count_consts"), instruments=[PrintIRInstrument("t_drop_identities")])


# -- report -----------------------------------------------------------------------------


def test_report_records_every_pass(graph):
    report = run_pipeline(graph, "t_drop_identities t_drop_identities t_count_consts")
    first, second, count = report.records
    assert (first.nodes_before, first.nodes_after, first.sites, first.changed) == (5, 4, 1, True)
    assert first.notes == ["dropped 1 Identity"]
    assert (second.sites, second.changed) == (0, False)
    assert (count.sites, count.changed) == (2, False)
    assert all(r.wall_ms >= 0 for r in report.records)
    assert report.changed


def test_report_table_says_0_sites_explicitly(graph):
    text = run_pipeline(graph, "t_drop_identities t_drop_identities t_count_consts").format()
    lines = text.splitlines()
    assert lines[0].startswith("pipeline: 3 passes, ") and lines[0].endswith(" ms, 5 -> 4 nodes")
    second = next(line for line in lines if line.lstrip().startswith("2 "))
    assert "0 sites" in second and "unchanged" in second and "5 -> 4" not in second
    assert any("1 site " in line and "changed" in line for line in lines)
    assert "note: dropped 1 Identity" in text


def test_report_flags_a_pass_that_hides_its_changes(graph):
    class Sneaky(Pass):
        """Erases a node but reports no change."""

        name = "t_sneaky"

        def run(self, graph: Graph, ctx: PassContext) -> PassResult:
            graph.erase_op(graph.op("dead"))
            return PassResult()

    with temporarily_registered(Sneaky):
        report = run_pipeline(graph, "t_sneaky")
    assert report.records[0].notes == ["the pass reported no change, but the node count changed"]


def test_empty_pipeline_report(graph):
    report = run_pipeline(graph, "")
    assert report.records == [] and report.format() == "pipeline: no passes ran\n"
    assert print_graph(report.graph) == print_graph(graph)


# -- levels and targets --------------------------------------------------------------------


def test_every_available_level_resolves():
    for level in available_levels():
        specs, notes = preset_pipeline(level.number, outputs_known=True)
        steps = PassManager(specs, inputs=["x"], outputs=["y"]).steps
        assert [s.name for s in steps] == [s.name for s in level.specs()] and notes == []


def stand_ins(names: list[str]) -> list[type[Pass]]:
    """Do-nothing passes for the given names, so presets can be planned before every pass is built."""
    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        return PassResult()

    declared = {"remove_nodes": (Param("op", "str", (), "op types", repeated=True),)}
    return [type(name, (Pass,), {"name": name, "__doc__": "Stand-in.", "run": run, "params": declared.get(name, ())})
            for name in names]


def test_every_level_and_target_resolves_once_its_passes_exist():
    wanted = [s.name for level in LEVELS.values() for s in level.specs()]
    wanted += [name for target in TARGETS.values() for name in target.pass_names()]
    with temporarily_registered(*stand_ins(missing_passes(wanted))):
        assert [level.number for level in available_levels()] == sorted(LEVELS)
        assert [target.name for target in available_targets()] == list(TARGETS)
        for level in available_levels():
            specs, _ = preset_pipeline(level.number, outputs_known=True)
            assert [s.name for s in PassManager(specs, outputs=["y"]).steps] == [s.name for s in level.specs()]
        for target in available_targets():
            specs, _ = preset_pipeline(target=target.name, outputs_known=True)
            names = [s.name for s in PassManager(specs, outputs=["y"]).steps]
            assert names[:len(parse_pipeline(target.before))] == [s.name for s in parse_pipeline(target.before)]
        specs, notes = preset_pipeline(2, outputs_known=False)
        assert "strip_unused_nodes" not in [s.name for s in specs]
        assert notes == ["-O2: left out strip_unused_nodes because no outputs were given"]


def test_every_available_target_resolves():
    for target in available_targets():
        specs, _ = preset_pipeline(target=target.name, outputs_known=True)
        assert PassManager(specs, inputs=["x"], outputs=["y"]).steps


def test_o0_is_always_available_and_empty():
    assert available_levels()[0].number == 0
    assert preset_pipeline() == ([], [])


def test_a_level_is_available_only_when_all_its_passes_are_registered(monkeypatch):
    monkeypatch.setitem(LEVELS, 7, Level(7, "test level", "t_count_consts t_later_pass"))
    assert 7 not in [level.number for level in available_levels()]
    with pytest.raises(PipelineError, match="-O7 is not available: passes t_later_pass are not built"):
        get_level(7)

    class Later(Pass):
        """Registered late."""

        name = "t_later_pass"

    with temporarily_registered(Later):
        assert 7 in [level.number for level in available_levels()]
        assert [s.name for s in get_level(7).specs()] == ["t_count_consts", "t_later_pass"]


def test_unknown_level_and_target_are_errors():
    with pytest.raises(PipelineError, match=r"no optimization level -O9 \(available: -O0"):
        preset_pipeline(9)
    with pytest.raises(PipelineError, match="unknown target 'moon'"):
        preset_pipeline(target="moon")


def test_presets_leave_out_output_passes_without_outputs_and_say_so():
    specs = parse_pipeline("strip_unused_nodes t_count_consts strip_unused_nodes")
    kept, notes = drop_output_passes(specs, outputs_known=False, preset="-O2")
    assert kept == [PassSpec("t_count_consts")]
    assert notes == ["-O2: left out strip_unused_nodes because no outputs were given"]
    assert drop_output_passes(specs, outputs_known=True, preset="-O2") == (specs, [])
