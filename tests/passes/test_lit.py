"""Text tests for passes: every tests/passes/lit/*.ir file is one test case.

A file holds the pipeline and its I/O names in `//` header lines, the input
graph in textual IR, and FileCheck directives for the output:

    // RUN: remove_nodes(op=Identity)
    // INPUTS: a,b              (optional)
    // OUTPUTS: out             (optional)
    // ERROR: <substring>       (optional: the pipeline must fail with this)
    // REPORT: <substring>      (optional, repeatable: in the pass report)
    graph { ... }
    // CHECK: ...

The runner parses the graph, runs the pipeline through the pass manager
(verifying the IR after every pass), prints the result, applies the CHECK
lines and checks that the printed IR parses back to the same text.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from compiler.errors import GttcError
from compiler.ir.parser import parse_graph
from compiler.ir.printer import print_graph
from compiler.ir.verifier import verify
from compiler.passes import run_pipeline
from compiler.passes.pipeline import parse_pipeline
from compiler.testing import FileCheckError, filecheck, parse_directives

LIT_DIR = Path(__file__).resolve().parent / "lit"
LIT_FILES = sorted(LIT_DIR.glob("*.ir"))
HEADER_KEYS = ("RUN", "INPUTS", "OUTPUTS", "ERROR", "REPORT")
# The passes whose behaviour these files pin down; each needs at least one file.
COVERED_PASSES = (
    "strip_unused_nodes", "remove_nodes", "remove_device", "set_device", "rename_op", "rename_attribute",
    "remove_attribute", "add_default_attributes", "backport_concatv2", "sort_by_execution_order",
    "merge_duplicate_nodes", "obfuscate_names", "insert_logging", "quantize_weights", "round_weights",
    "sparsify_gather", "quantize_nodes",
)


@dataclass
class LitCase:
    """One parsed test file."""

    path: Path
    pipeline: str
    graph_text: str
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    error: str = ""
    reports: list[str] = field(default_factory=list)

    @staticmethod
    def load(path: Path) -> "LitCase":
        text = path.read_text(encoding="utf-8")
        header: dict[str, list[str]] = {key: [] for key in HEADER_KEYS}
        graph_lines = []
        for line in text.splitlines():
            stripped = line.strip()
            key, value = _header_entry(stripped)
            if key is not None:
                header[key].append(value)
            # Directive lines become blank, so IR parse errors keep the file's line numbers.
            graph_lines.append("" if stripped.startswith("//") else line)
        if not header["RUN"]:
            raise ValueError(f"{path.name}: no '// RUN:' line")
        return LitCase(path, " ".join(header["RUN"]), "\n".join(graph_lines) + "\n",
                       _names(header["INPUTS"]), _names(header["OUTPUTS"]),
                       " ".join(header["ERROR"]), header["REPORT"])


def _header_entry(line: str) -> tuple[str | None, str]:
    for key in HEADER_KEYS:
        prefix = f"// {key}:"
        if line.startswith(prefix):
            return key, line[len(prefix):].strip()
    return None, ""


def _names(values: list[str]) -> list[str]:
    return [name.strip() for value in values for name in value.split(",") if name.strip()]


def run_case(case: LitCase) -> None:
    graph = parse_graph(case.graph_text, str(case.path))
    directives = parse_directives(case.path.read_text(encoding="utf-8"))
    if case.error:
        with pytest.raises(GttcError) as failure:
            run_pipeline(graph, case.pipeline, case.inputs, case.outputs)
        assert case.error in str(failure.value), f"expected error containing {case.error!r}, got: {failure.value}"
        return
    assert directives or case.reports, f"{case.path.name}: no CHECK or REPORT lines, so nothing is tested"
    report = run_pipeline(graph, case.pipeline, case.inputs, case.outputs, verify_each=True)
    verify(report.graph)
    printed = print_graph(report.graph)
    table = report.format()
    for expected in case.reports:
        assert expected in table, f"report lacks {expected!r}:\n{table}"
    if directives:
        filecheck(printed, directives)
    assert print_graph(parse_graph(printed, "<printed>")) == printed, "printed IR does not parse back to itself"


@pytest.mark.parametrize("path", LIT_FILES, ids=[p.stem for p in LIT_FILES])
def test_lit(path: Path) -> None:
    run_case(LitCase.load(path))


def test_every_covered_pass_has_a_lit_file() -> None:
    tested = {spec.name for path in LIT_FILES for spec in parse_pipeline(LitCase.load(path).pipeline)}
    missing = [name for name in COVERED_PASSES if name not in tested]
    assert not missing, f"passes without a lit test: {missing}"


# -- the matcher itself: a FileCheck that never fails would make every case above vacuous --

SAMPLE = """graph {
  %x = Placeholder() {dtype = f32} : f32[2]
  %y = Neg(%x) {T = f32} : f32[2]

  %z = Abs(%y) {T = f32} : f32[2]
}
"""


def test_filecheck_accepts_every_directive_kind() -> None:
    filecheck(SAMPLE, """
        // CHECK: %x = Placeholder()
        // CHECK-NOT: Relu
        // CHECK-NEXT: %y = Neg([[SRC:%[a-z]+]])
        // CHECK-SAME: {T =   f32}
        // CHECK-EMPTY:
        // CHECK-NEXT: %z = Abs({{%y}})
        // CHECK-NOT: [[SRC]] =
    """)


@pytest.mark.parametrize("checks, message", [
    ("// CHECK: %y = Neg(%z)", r"line 1: CHECK: %y = Neg\(%z\)\n  pattern not found from output line 1 on\n"
                               r"  closest line 3: '%y = Neg\(%x\)"),
    ("// CHECK: %x\n// CHECK-NEXT: %z", r"line 2: CHECK-NEXT: %z\n  pattern not found on output line 3"),
    ("// CHECK: %x\n// CHECK-NOT: Neg\n// CHECK: %z", r"excluded text found at output line 3: '%y = Neg"),
    ("// CHECK: %y\n// CHECK-SAME: Placeholder", r"CHECK-SAME: Placeholder\n  pattern not found on output line 3"),
    ("// CHECK: %x\n// CHECK-EMPTY:", r"expected an empty line after output line 2"),
    ("// CHECK: Neg([[V]])", r"variable \[\[V\]\] is used before it is defined"),
    ("// CHECK-NEXT: %x", r"the first directive cannot be CHECK-NEXT"),
])
def test_filecheck_failures_say_what_and_where(checks: str, message: str) -> None:
    with pytest.raises(FileCheckError, match=message):
        filecheck(SAMPLE, checks)


def test_filecheck_not_only_covers_the_gap_before_the_next_match() -> None:
    filecheck(SAMPLE, "// CHECK-NOT: %y = Neg\n// CHECK: %y = Neg")
    with pytest.raises(FileCheckError, match="excluded text"):
        filecheck(SAMPLE, "// CHECK: %x\n// CHECK-NOT: Abs")


def test_lit_header_is_parsed(tmp_path: Path) -> None:
    path = tmp_path / "case.ir"
    path.write_text("// RUN: remove_nodes(op=Identity)\n// RUN: sort_by_execution_order\n// INPUTS: a, b:0\n"
                    "// OUTPUTS: out\n// REPORT: 1 site\n// REPORT: removed\ngraph {\n}\n// CHECK: graph\n")
    case = LitCase.load(path)
    assert case.pipeline == "remove_nodes(op=Identity) sort_by_execution_order"
    assert (case.inputs, case.outputs, case.reports) == (["a", "b:0"], ["out"], ["1 site", "removed"])
    assert case.graph_text.splitlines()[6] == "graph {"
