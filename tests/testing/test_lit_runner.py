"""The public lit runner (compiler.testing.lit) and its pytest plugin, on small files written per test."""
from __future__ import annotations

import io
import re
from importlib import metadata
from pathlib import Path

import pytest

from compiler.errors import InputError
from compiler.passes.base import restored_registry
from compiler.testing import lit
from compiler.testing.lit import LitCase, LitFailure, collect_lit_files, is_lit_file, run_case, run_lit_files

GRAPH = """graph {
  %x = Placeholder() {dtype = f32, shape = shape<2>} : f32[2]
  %a = Relu6(%x) {T = f32} : f32[2]
  %b = Neg(%a) {T = f32} : f32[2]
}
"""
PASSING = f"""// RUN: rename_op(old_op_name=Relu6, new_op_name=Relu)
// REPORT: renamed 1 Relu6 ops to Relu
{GRAPH}// CHECK:      %a = Relu(%x) {{T = f32}}
// CHECK-NEXT: %b = Neg(%a)
// CHECK-NOT: Relu6
"""
# Line 4 is the wrong CHECK: the op became Relu, not Relu7.
FAILING = f"""// RUN: rename_op(old_op_name=Relu6, new_op_name=Relu)
{GRAPH}// CHECK: %x = Placeholder()
// CHECK: %a = Relu7(%x)
"""
FAILING_CHECK_LINE = len(GRAPH.splitlines()) + 3

# A user pass, as a plugin file would define it: Neg becomes Abs.
PLUGIN = '''
from compiler.passes.base import Pass, PassResult, register_pass


@register_pass
class NegToAbs(Pass):
    """Turn every Neg op into an Abs op (a lit-runner test pass)."""

    name = "lit_test_neg_to_abs"

    def run(self, graph, ctx):
        matched = [op for op in graph if op.type == "Neg"]
        for op in matched:
            op.type = "Abs"
        return PassResult(sites=len(matched), changed=bool(matched))
'''
USES_PLUGIN = f"""// RUN: lit_test_neg_to_abs
{GRAPH}// CHECK: %b = Abs(%a)
"""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def failure_of(path: Path) -> str:
    with pytest.raises(LitFailure) as failure:
        run_case(LitCase.load(path))
    return str(failure.value)


# -- parsing a file -----------------------------------------------------------------------


def test_header_is_parsed(tmp_path: Path) -> None:
    path = write(tmp_path, "case.ir", "// RUN: remove_nodes(op=Identity)\n// RUN: sort_by_execution_order\n"
                 "// INPUTS: a, b:0\n// OUTPUTS: out\n// REPORT: 1 site\n// REPORT: removed\ngraph {\n}\n"
                 "// CHECK: graph\n")
    case = LitCase.load(path)
    assert case.pipeline == "remove_nodes(op=Identity) sort_by_execution_order"
    assert (case.inputs, case.outputs, case.reports) == (["a", "b:0"], ["out"], ["1 site", "removed"])
    assert [(d.kind, d.pattern, d.line) for d in case.checks] == [("CHECK", "graph", 9)]
    assert case.graph_text.splitlines()[6] == "graph {"


def test_a_file_without_run_line_fails(tmp_path: Path) -> None:
    path = write(tmp_path, "norun.ir", f"{GRAPH}// CHECK: graph\n")
    with pytest.raises(LitFailure, match=r"norun\.ir: no '// RUN:' line"):
        LitCase.load(path)


def test_a_file_that_checks_nothing_fails(tmp_path: Path) -> None:
    path = write(tmp_path, "empty.ir", f"// RUN: remove_device\n{GRAPH}")
    assert "empty.ir: no CHECK, REPORT or ERROR lines, so the file tests nothing" in failure_of(path)


def test_unparsable_ir_fails_with_the_parsers_line(tmp_path: Path) -> None:
    path = write(tmp_path, "broken.ir", "// RUN: remove_device\ngraph {\n  %x = \n}\n// CHECK: graph\n")
    message = failure_of(path)
    assert message.startswith(f"{path}:4:") and len(message.splitlines()) == 1


# -- running one file ---------------------------------------------------------------------


def test_a_passing_file_passes(tmp_path: Path) -> None:
    run_case(LitCase.load(write(tmp_path, "ok.ir", PASSING)))


def test_a_wrong_check_shows_filecheck_and_the_output(tmp_path: Path) -> None:
    path = write(tmp_path, "bad.ir", FAILING)
    message = failure_of(path)
    assert message.startswith(f"{path}: line {FAILING_CHECK_LINE}: CHECK: %a = Relu7(%x)\n")
    assert "closest line 3: '%a = Relu(%x) {T = f32} : f32[2]'" in message
    assert "output IR:\n  graph {\n" in message


def test_a_long_output_is_shown_only_in_part(tmp_path: Path) -> None:
    ops = "".join(f"  %x{i} = Placeholder() {{dtype = f32, shape = shape<2>}} : f32[2]\n" for i in range(70))
    path = write(tmp_path, "long.ir", f"// RUN: remove_device\ngraph {{\n{ops}}}\n// CHECK: %y = Neg\n")
    shown = failure_of(path).split("output IR (first 60 of 72 lines):\n")[1].splitlines()
    assert (len(shown), shown[0]) == (60, "  graph {")
    assert shown[-1].startswith("    %x58 = Placeholder()")


def test_report_lines_must_be_in_the_pass_report(tmp_path: Path) -> None:
    path = write(tmp_path, "report.ir", PASSING.replace("renamed 1 Relu6", "renamed 2 Relu6"))
    message = failure_of(path)
    assert message.startswith(f"{path}: the pass report lacks REPORT: 'renamed 2 Relu6 ops to Relu'\npass report:")
    assert "renamed 1 Relu6 ops to Relu" in message


@pytest.mark.parametrize("error, outcome", [
    ("expects exactly one 'old_op_name' and 'new_op_name'", None),
    ("some other complaint", "'some other complaint', but it failed with: "),
])
def test_error_lines_expect_the_pipeline_to_fail(tmp_path: Path, error: str, outcome: str | None) -> None:
    path = write(tmp_path, "error.ir", f"// RUN: rename_op(old_op_name=Relu6)\n// ERROR: {error}\n{GRAPH}")
    if outcome is None:
        run_case(LitCase.load(path))
    else:
        message = failure_of(path)
        assert outcome in message and "rename_op expects exactly one" in message


def test_an_error_line_fails_when_the_pipeline_succeeds(tmp_path: Path) -> None:
    path = write(tmp_path, "noerror.ir", f"// RUN: remove_device\n// ERROR: boom\n{GRAPH}")
    assert failure_of(path) == f"{path}: expected the pipeline to fail with 'boom', but it succeeded"


def test_an_unexpected_pipeline_error_is_a_failure(tmp_path: Path) -> None:
    path = write(tmp_path, "unknown.ir", f"// RUN: no_such_pass\n{GRAPH}// CHECK: graph\n")
    assert failure_of(path).startswith(f"{path}: the pipeline failed: PipelineError: unknown pass 'no_such_pass'")


# -- finding files --------------------------------------------------------------------------


def test_is_lit_file_needs_the_suffix_and_a_run_line(tmp_path: Path) -> None:
    assert is_lit_file(write(tmp_path, "a.ir", "  // RUN: remove_device\n"))
    assert not is_lit_file(write(tmp_path, "b.ir", GRAPH))
    assert not is_lit_file(write(tmp_path, "c.txt", "// RUN: remove_device\n"))
    assert not is_lit_file(tmp_path / "missing.ir")


def test_folders_are_searched_recursively_and_sorted(tmp_path: Path) -> None:
    second = write(tmp_path, "sub/b.ir", PASSING)
    first = write(tmp_path, "a.ir", PASSING)
    write(tmp_path, "model.ir", GRAPH)
    write(tmp_path, ".hidden/c.ir", PASSING)
    assert collect_lit_files([tmp_path]) == [first, second]
    assert collect_lit_files([str(first), tmp_path]) == [first, second]


@pytest.mark.parametrize("name, message", [
    ("missing.ir", "missing.ir: no such file or directory"),
    ("model.ir", "model.ir: not a lit file (needs the .ir suffix and a '// RUN:' line)"),
    ("notes.txt", "notes.txt: not a lit file"),
    ("empty", "no lit files (.ir with a '// RUN:' line) under "),
])
def test_bad_paths_are_input_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, message: str) -> None:
    write(tmp_path, "model.ir", GRAPH)
    write(tmp_path, "notes.txt", PASSING)
    (tmp_path / "empty").mkdir()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match="^" + re.escape(message)):
        collect_lit_files([name])


# -- running many files ---------------------------------------------------------------------


def test_run_lit_files_reports_each_failure_and_a_summary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, "good.ir", PASSING)
    write(tmp_path, "bad.ir", FAILING)
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    assert run_lit_files(["."], out, verbose=True) == 1
    assert out.getvalue().splitlines()[:2] == [
        "FAIL: bad.ir", f"    bad.ir: line {FAILING_CHECK_LINE}: CHECK: %a = Relu7(%x)"]
    assert "PASS: good.ir" in out.getvalue()
    assert out.getvalue().endswith("\nlit: 1 passed, 1 failed (2 files)\n")


def test_run_lit_files_is_quiet_about_passes_unless_verbose(tmp_path: Path) -> None:
    out = io.StringIO()
    assert run_lit_files([write(tmp_path, "good.ir", PASSING)], out) == 0
    assert out.getvalue() == "lit: 1 passed, 0 failed (1 file)\n"


def test_a_crash_in_one_file_does_not_stop_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    crashing = write(tmp_path, "crash.ir", PASSING)
    write(tmp_path, "good.ir", PASSING)

    def run_or_crash(case: LitCase) -> None:
        if case.path == crashing:
            raise KeyError("lost")
        run_case(case)

    monkeypatch.setattr(lit, "run_case", run_or_crash)
    out = io.StringIO()
    assert run_lit_files([tmp_path], out) == 1
    assert f"FAIL: {crashing}\n    {crashing}: unexpected KeyError: 'lost'\n" in out.getvalue()
    assert out.getvalue().endswith("lit: 1 passed, 1 failed (2 files)\n")


# -- the pytest plugin ----------------------------------------------------------------------

# Where gttc is installed with its pytest11 entry point, pytest loads the plugin itself; naming it
# again with -p would register the module twice, which pytest refuses.
_INSTALLED = any(ep.name == "gttc" and ep.value == "compiler.testing.pytest_plugin"
                 for ep in metadata.entry_points(group="pytest11"))
PLUGIN_ARGS = () if _INSTALLED else ("-p", "compiler.testing.pytest_plugin")


def run_pytest(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    with restored_registry():  # plugin passes loaded by the inner run must not leak into this one
        return pytester.runpytest(*PLUGIN_ARGS, "-p", "no:randomly", "-p", "no:cacheprovider", *args)


def test_the_plugin_runs_lit_files_as_tests(pytester: pytest.Pytester) -> None:
    write(pytester.path, "good.ir", PASSING)
    write(pytester.path, "model.ir", GRAPH)  # no RUN line: a model, not a test
    result = run_pytest(pytester, "-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*good.ir::good PASSED*"])
    assert "model.ir" not in result.stdout.str()


def test_a_wrong_check_fails_with_the_filecheck_message_only(pytester: pytest.Pytester) -> None:
    write(pytester.path, "bad.ir", FAILING)
    result = run_pytest(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"bad.ir: line {FAILING_CHECK_LINE}: CHECK: %a = Relu7(%x)",
                                 "  closest line 3: '%a = Relu(%x) {T = f32} : f32[2]'"])
    output = result.stdout.str()
    assert "Traceback" not in output and "def runtest" not in output and "raise LitFailure" not in output


def test_load_passes_option_lets_lit_files_use_plugin_passes(pytester: pytest.Pytester) -> None:
    plugin = write(pytester.path, "my_passes.py", PLUGIN)
    write(pytester.path, "uses_plugin.ir", USES_PLUGIN)
    run_pytest(pytester).assert_outcomes(failed=1)  # unknown pass without the plugin
    run_pytest(pytester, f"--gttc-load-passes={plugin}").assert_outcomes(passed=1)


def test_ini_plugins_are_relative_to_the_ini_file(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    write(pytester.path, "plugins/my_passes.py", PLUGIN)
    pytester.makeini("[pytest]\ngttc_load_passes =\n    plugins/my_passes.py\n")
    cases = pytester.mkdir("cases")
    write(cases, "uses_plugin.ir", USES_PLUGIN)
    monkeypatch.chdir(cases)
    run_pytest(pytester).assert_outcomes(passed=1)


def test_a_bad_plugin_is_a_usage_error(pytester: pytest.Pytester) -> None:
    write(pytester.path, "good.ir", PASSING)
    result = run_pytest(pytester, "--gttc-load-passes=missing_plugin.py")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*plugin missing_plugin.py: no such file*"])
