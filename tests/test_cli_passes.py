"""The command line's pipeline options: errors and exit codes, report, IR dumps, --list-passes, `gttc opt`.

Most tests call `compiler.cli.main` in process so that small test passes can
be registered; one runs the real `python -m compiler.cli` to pin exit codes.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from compiler.cli import main
from compiler.ir.graph import Graph
from compiler.ir.parser import parse_graph
from compiler.passes.base import Param, Pass, PassContext, PassResult, temporarily_registered

ROOT = Path(__file__).resolve().parent.parent
SMALL_IR = """graph {
  %x = Placeholder() {dtype = f32, shape = shape<1,4>} : f32[1,4]
  %c = Const() {dtype = f32, value = dense<f32[4], [1.0, 2.0, 3.0, 4.0]>} : f32[4]
  %id = Identity(%x) {T = f32} : f32[1,4]
  %y = AddV2(%id, %c) {T = f32} : f32[1,4]
}
"""
SEEN_CONTEXTS: list[PassContext] = []


class Noop(Pass):
    """Match nothing, change nothing."""

    name = "t_noop"
    params = (Param("label", "str", "", "a free-form label"),)

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        SEEN_CONTEXTS.append(ctx)
        return PassResult()


class DropIdentities(Pass):
    """Bypass and erase Identity ops."""

    name = "t_drop_identities"

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        identities = [op for op in graph if op.type == "Identity"]
        for op in identities:
            op.result.replace_all_uses_with(op.operands[0])
            graph.erase_op(op)
        return PassResult(sites=len(identities), changed=bool(identities))


class NeedsNoop(Pass):
    """Needs t_noop first."""

    name = "t_needs_noop"
    requires = ("t_noop",)
    params = (Param("factor", "int", 3, "how much"), Param("op", "str", (), "op types", repeated=True))

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        return PassResult()


class Fails(Pass):
    """Always fails."""

    name = "t_fails"

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        raise RuntimeError("nothing works")


class BreaksIR(Pass):
    """Corrupts a use-list."""

    name = "t_breaks_ir"

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        graph.op("c").result.uses.clear()
        return PassResult(sites=1, changed=True)


@pytest.fixture(autouse=True)
def test_passes():
    SEEN_CONTEXTS.clear()
    with temporarily_registered(Noop, DropIdentities, NeedsNoop, Fails, BreaksIR):
        yield


@pytest.fixture
def small_ir(tmp_path) -> Path:
    path = tmp_path / "small.ir"
    path.write_text(SMALL_IR)
    return path


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    """main() with argparse's SystemExit turned into an exit code."""
    try:
        code = main([str(a) for a in argv])
    except SystemExit as done:
        code = done.code
    out, err = capsys.readouterr()
    return code, out, err


def one_error_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("gttc: error: ")
    return lines[0]


# -- pipeline errors: exit 2, one line, nothing written --------------------------------------


@pytest.mark.parametrize("transforms, fragment", [
    ("t_noop(label=x", "malformed pipeline at offset 6: '(' of pass 't_noop' is never closed"),
    ("t_nop", "unknown pass 't_nop'; did you mean 't_noop'?"),
    ("t_noop(size=1)", "t_noop: unknown parameter 'size' (valid parameters: ignore_errors, label)"),
    ("t_needs_noop(factor=many)", "t_needs_noop: bad value 'many' for parameter 'factor' (expected int"),
    ("t_needs_noop", "pass 't_needs_noop' requires 't_noop' to run earlier in the pipeline"),
])
def test_pipeline_errors_exit_2_with_one_line(capsys, small_ir, tmp_path, transforms, fragment):
    out = tmp_path / "out.ir"
    code, _, err = run_cli(capsys, small_ir, "-o", out, f"--transforms={transforms}")
    assert code == 2
    assert fragment in one_error_line(err)
    assert not out.exists()


def test_pipeline_is_checked_before_the_model_is_read(capsys, tmp_path):
    code, _, err = run_cli(capsys, tmp_path / "missing.pb", "-o", tmp_path / "o.pb", "--transforms=t_nop")
    assert code == 2 and "unknown pass 't_nop'" in one_error_line(err)


def test_real_process_exit_codes(tmp_path):
    """The installed entry point: a malformed pipeline is exit 2 and one stderr line."""
    out = tmp_path / "out.pb"
    done = subprocess.run(
        [sys.executable, "-m", "compiler.cli", str(ROOT / "tests/fixtures/devices_gather.pb"), "-o", str(out),
         "--transforms=remove_device(", "-q"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr == ("gttc: error: malformed pipeline at offset 13: "
                           "'(' of pass 'remove_device' is never closed, found '('\n")
    assert not out.exists()


@pytest.mark.parametrize("flag, fragment", [
    ("-O9", "no optimization level -O9 (available: -O0"),
    ("-Ofast", "argument -O: 'fast' is not a level number"),
    ("--target=moon", "unknown target 'moon'"),
])
def test_bad_level_or_target_exit_2(capsys, small_ir, tmp_path, flag, fragment):
    code, _, err = run_cli(capsys, small_ir, "-o", tmp_path / "o.ir", flag)
    assert code == 2 and fragment in one_error_line(err)


# -- running ----------------------------------------------------------------------------


def test_auto_prereqs_inserts_and_reports(capsys, small_ir, tmp_path):
    code, _, err = run_cli(capsys, small_ir, "-o", tmp_path / "o.ir", "--transforms=t_needs_noop", "--auto-prereqs")
    assert code == 0
    assert "t_noop [auto]" in err
    assert "note: inserted t_noop before t_needs_noop, which requires it (auto-prereqs)" in err


def test_report_goes_to_stderr_and_quiet_silences_it(capsys, small_ir, tmp_path):
    out = tmp_path / "o.ir"
    code, stdout, err = run_cli(capsys, small_ir, "-o", out, "--transforms=t_drop_identities t_noop")
    assert code == 0 and stdout == ""
    assert err.startswith("pipeline: 2 passes, ")
    noop_row = next(line for line in err.splitlines() if "t_noop" in line)
    assert "0 sites" in noop_row and "unchanged" in noop_row
    assert "1 site " in next(line for line in err.splitlines() if "t_drop_identities" in line)
    assert f"wrote {out} (3 nodes," in err
    code, stdout, err = run_cli(capsys, small_ir, "-o", out, "--transforms=t_drop_identities", "-q")
    assert (code, stdout, err) == (0, "", "")
    assert "Identity" not in out.read_text()


def test_no_pipeline_prints_no_report(capsys, small_ir, tmp_path):
    out = tmp_path / "o.ir"
    code, _, err = run_cli(capsys, small_ir, "-o", out)
    assert code == 0
    assert err.splitlines() == [f"wrote {out} (4 nodes, {out.stat().st_size} bytes)"]


def test_inputs_and_outputs_reach_the_pass_context(capsys, small_ir, tmp_path):
    code, _, _ = run_cli(capsys, small_ir, "-o", tmp_path / "o.ir", "--inputs=x", "--outputs=y:0, c",
                         "--transforms=t_noop(label=a)")
    assert code == 0
    (ctx,) = SEEN_CONTEXTS
    assert (ctx.inputs, ctx.outputs, ctx.raw_params) == (["x"], ["y:0", "c"], [("label", "a")])


def test_ignore_errors_on_the_command_line(capsys, small_ir, tmp_path):
    code, _, err = run_cli(capsys, small_ir, "-o", tmp_path / "o.ir", "--transforms=t_fails(ignore_errors=true)")
    assert code == 0
    assert "FAILED, ignored (graph restored)" in err and "error: RuntimeError: nothing works" in err


def test_failing_pass_exit_1_and_no_output(capsys, small_ir, tmp_path):
    out = tmp_path / "o.ir"
    code, _, err = run_cli(capsys, small_ir, "-o", out, "--transforms=t_noop t_fails")
    assert code == 1
    assert "pass 2 't_fails' failed: RuntimeError: nothing works" in one_error_line(err)
    assert not out.exists()


def test_verifier_is_on_by_default_and_can_be_disabled(capsys, small_ir, tmp_path):
    out = tmp_path / "o.ir"
    code, _, err = run_cli(capsys, small_ir, "-o", out, "--transforms=t_breaks_ir")
    assert code == 1 and "pass 1 't_breaks_ir' left invalid IR" in one_error_line(err)
    assert not out.exists()
    code, _, _ = run_cli(capsys, small_ir, "-o", out, "--transforms=t_breaks_ir", "--no-verify-each", "-q")
    assert code == 0 and out.exists()


def test_print_ir_after(capsys, small_ir, tmp_path):
    code, stdout, err = run_cli(capsys, small_ir, "-o", tmp_path / "o.ir", "--transforms=t_noop t_drop_identities",
                                "--print-ir-after=t_drop_identities", "-q")
    assert code == 0 and stdout == ""
    header, body = err.split("\n", 1)
    assert header == "// -----// IR after t_drop_identities (pass 2 of 2) //----- //"
    assert "Identity" not in body and len(parse_graph(body, "dump")) == 3


def test_print_ir_after_a_pass_not_in_the_pipeline(capsys, small_ir, tmp_path):
    code, _, err = run_cli(capsys, small_ir, "-o", tmp_path / "o.ir", "--transforms=t_noop",
                           "--print-ir-after=t_fails")
    assert code == 2 and "pass 't_fails' is not in the pipeline (passes: t_noop)" in one_error_line(err)


def test_o1_runs_the_level_then_the_transforms(capsys, small_ir, tmp_path):
    from compiler.passes.levels import LEVELS, missing_passes

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        return PassResult()

    needed = missing_passes([spec.name for spec in LEVELS[1].specs()])
    params = {"remove_nodes": (Param("op", "str", (), "op types", repeated=True),)}
    stand_ins = [type(n, (Pass,), {"name": n, "__doc__": "Stand-in.", "run": run, "params": params.get(n, ())})
                 for n in needed]
    with temporarily_registered(*stand_ins):
        code, _, err = run_cli(capsys, small_ir, "-o", tmp_path / "o.ir", "-O1", "--transforms=t_noop")
    assert code == 0
    rows = [line.split()[1] for line in err.splitlines() if line[:5].strip().isdigit()]
    assert rows == ["remove_nodes(op=Identity,", "merge_duplicate_nodes(gtt_order=false,", "sort_by_execution_order", "t_noop"]
    assert "note: -O1: left out strip_unused_nodes because no outputs were given" in err


# -- --list-passes and --help --------------------------------------------------------------


def test_list_passes(capsys):
    code, out, _ = run_cli(capsys, "--list-passes")
    assert code == 0
    block = out.split("\n  t_needs_noop\n", 1)[1].split("\n\n", 1)[0]
    assert "Needs t_noop first." in block
    assert "factor (int) = 3  how much" in block
    assert "op (str, repeatable) = unset  op types" in block
    assert "ignore_errors (bool) = false" in block
    assert "requires: t_noop" in block
    assert "run by:   only on request (--transforms)" in block
    assert "\nOptimization levels:\n  -O0  no passes: (nothing)\n" in out


def test_help_offers_only_available_levels(capsys):
    from compiler.passes.levels import LEVELS, available_levels

    code, out, _ = run_cli(capsys, "--help")
    assert code == 0
    offered = {level.flag for level in available_levels()}
    for level in LEVELS.values():
        assert (f"{level.flag} {level.summary}" in " ".join(out.split())) == (level.flag in offered)
    assert "-O3" not in out


# -- gttc opt -------------------------------------------------------------------------------


def test_opt_prints_ir_to_stdout(capsys, small_ir):
    code, out, err = run_cli(capsys, "opt", small_ir, "--passes=t_drop_identities")
    assert code == 0
    graph = parse_graph(out, "stdout")
    assert "id" not in graph and graph.op("y").operands[0].op.name == "x"
    assert err.startswith("pipeline: 1 pass, ")


def test_opt_writes_a_file_and_never_overwrites_its_input(capsys, small_ir, tmp_path):
    out = tmp_path / "out.ir"
    code, stdout, _ = run_cli(capsys, "opt", small_ir, "--passes=t_drop_identities", "-o", out, "-q")
    assert (code, stdout) == (0, "") and "Identity" not in out.read_text()
    code, _, err = run_cli(capsys, "opt", small_ir, "--passes=t_drop_identities", "-o", small_ir)
    assert code == 2 and "refusing to overwrite the input file" in one_error_line(err)
    assert "Identity" in small_ir.read_text()


def test_opt_rejects_bad_pipelines_with_exit_2(capsys, small_ir):
    code, out, err = run_cli(capsys, "opt", small_ir, "--passes=t_needs_noop")
    assert code == 2 and out == "" and "requires 't_noop'" in one_error_line(err)
