"""Lit-style pass tests: one `.ir` file holds a pipeline, an input graph and checks on the output.

A file names the pipeline and its I/O in `//` header lines, then the input
graph in textual IR, then FileCheck directives (compiler.testing.filecheck)
for the printed output:

    // RUN: remove_nodes(op=Identity)
    // INPUTS: a,b              (optional)
    // OUTPUTS: out             (optional)
    // ERROR: <substring>       (optional: the pipeline must fail with this)
    // REPORT: <substring>      (optional, repeatable: in the pass report)
    graph { ... }
    // CHECK: ...

`run_case` parses the graph, runs the pipeline through the pass manager
(verifying the IR after every pass), applies the REPORT and CHECK lines and
checks that the printed IR parses back to the same text; anything that does
not hold raises LitFailure with a message meant to be read as is.
`run_lit_files` runs many files and prints a lit-like summary (for `gttc lit`);
compiler.testing.pytest_plugin runs each file as a pytest item.  Neither loads
pass plugins: the caller does, so files can test user passes too.
"""
from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence, TextIO

from compiler.errors import GttcError, InputError
from compiler.ir.graph import Graph
from compiler.ir.parser import parse_graph
from compiler.ir.printer import print_graph
from compiler.ir.verifier import verify
from compiler.passes import run_pipeline
from compiler.passes.instruments import PipelineReport
from compiler.testing.filecheck import Directive, FileCheckError, filecheck, parse_directives

HEADER_KEYS = ("RUN", "INPUTS", "OUTPUTS", "ERROR", "REPORT")
LIT_SUFFIX = ".ir"
_RUN_PREFIX = "// RUN:"
_SHOWN_LINES = 60  # of the output IR under a failed CHECK: enough to see the graph, bounded for big ones
_SHOWN_DIFF_LINES = 20


class LitFailure(AssertionError):
    """A lit file did not hold; `str(err)` starts with the file's path and is meant to be shown as is."""


@dataclass
class LitCase:
    """One parsed test file; `graph_text` is the file with its `//` lines blanked, so line numbers match."""

    path: Path
    pipeline: str
    graph_text: str
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    error: str = ""
    reports: list[str] = field(default_factory=list)
    checks: list[Directive] = field(default_factory=list)

    @staticmethod
    def load(path: str | Path) -> "LitCase":
        path = Path(path)
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
            raise LitFailure(f"{display_path(path)}: no '{_RUN_PREFIX}' line, so there is no pipeline to run")
        try:
            checks = parse_directives(text)
        except FileCheckError as err:
            raise LitFailure(f"{display_path(path)}: {err}") from None
        return LitCase(path, " ".join(header["RUN"]), "\n".join(graph_lines) + "\n",
                       _names(header["INPUTS"]), _names(header["OUTPUTS"]),
                       " ".join(header["ERROR"]), header["REPORT"], checks)


def _header_entry(line: str) -> tuple[Optional[str], str]:
    for key in HEADER_KEYS:
        prefix = f"// {key}:"
        if line.startswith(prefix):
            return key, line[len(prefix):].strip()
    return None, ""


def _names(values: list[str]) -> list[str]:
    return [name.strip() for value in values for name in value.split(",") if name.strip()]


# -- running one case ------------------------------------------------------------------


def run_case(case: LitCase) -> None:
    """Run one file's pipeline and check everything it asks for; raises LitFailure if something does not hold."""
    where = display_path(case.path)
    if not (case.checks or case.reports or case.error):
        raise LitFailure(f"{where}: no CHECK, REPORT or ERROR lines, so the file tests nothing")
    try:
        graph = parse_graph(case.graph_text, where)
    except GttcError as err:  # the parser's message already names file, line and column
        raise LitFailure(str(err)) from None
    if case.error:
        _expect_failure(case, graph, where)
        return
    report = _run(case, graph, where)
    printed = print_graph(report.graph)
    _check_report(case, report.format(), where)
    if case.checks:
        _check_output(case, printed, where)
    _check_round_trip(printed, where)


def _expect_failure(case: LitCase, graph: Graph, where: str) -> None:
    expected = f"{where}: expected the pipeline to fail with {case.error!r}"
    try:
        run_pipeline(graph, case.pipeline, case.inputs, case.outputs, verify_each=True)
    except GttcError as err:
        if case.error not in str(err):
            raise LitFailure(f"{expected}, but it failed with: {err}") from err
        return
    raise LitFailure(f"{expected}, but it succeeded")


def _run(case: LitCase, graph: Graph, where: str) -> PipelineReport:
    try:
        report = run_pipeline(graph, case.pipeline, case.inputs, case.outputs, verify_each=True)
    except GttcError as err:
        raise LitFailure(f"{where}: the pipeline failed: {type(err).__name__}: {err}") from err
    try:
        verify(report.graph)
    except GttcError as err:
        raise LitFailure(f"{where}: the output IR is invalid: {err}") from err
    return report


def _check_report(case: LitCase, table: str, where: str) -> None:
    for expected in case.reports:
        if expected not in table:
            raise LitFailure(f"{where}: the pass report lacks REPORT: {expected!r}\n{_excerpt('pass report', table)}")


def _check_output(case: LitCase, printed: str, where: str) -> None:
    try:
        filecheck(printed, case.checks)
    except FileCheckError as err:
        raise LitFailure(f"{where}: {err}\n{_excerpt('output IR', printed)}") from None


def _check_round_trip(printed: str, where: str) -> None:
    """The printer and parser must agree, or textual IR could not be trusted as a test format."""
    try:
        again = print_graph(parse_graph(printed, "<printed IR>"))
    except GttcError as err:
        shown = _excerpt("output IR", printed)
        raise LitFailure(f"{where}: the printed IR does not parse back: {err}\n{shown}") from None
    if again != printed:
        diff = difflib.unified_diff(printed.splitlines(), again.splitlines(), "printed", "parsed and printed again",
                                    lineterm="")
        raise LitFailure(f"{where}: the printed IR does not parse back to itself\n"
                         + _excerpt("difference", "\n".join(diff), _SHOWN_DIFF_LINES))


def _excerpt(title: str, text: str, limit: int = _SHOWN_LINES) -> str:
    lines = text.rstrip("\n").split("\n")
    heading = f"{title}:" if len(lines) <= limit else f"{title} (first {limit} of {len(lines)} lines):"
    return heading + "\n" + "\n".join(f"  {line}".rstrip() for line in lines[:limit])


# -- finding and running many files ---------------------------------------------------


def is_lit_file(path: str | Path) -> bool:
    """An `.ir` file with a `// RUN:` line; other `.ir` files are plain models, not tests."""
    path = Path(path)
    if path.suffix != LIT_SUFFIX or not path.is_file():
        return False
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return any(line.lstrip().startswith(_RUN_PREFIX) for line in text.splitlines())


def collect_lit_files(paths: Sequence[str | Path]) -> list[Path]:
    """The lit files named or found (recursively, sorted) under `paths`; raises InputError for a bad path."""
    found: list[Path] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            found += _lit_files_under(path)
        elif not path.exists():
            raise InputError(f"{given}: no such file or directory")
        elif is_lit_file(path):
            found.append(path)
        else:
            raise InputError(f"{given}: not a lit file (needs the {LIT_SUFFIX} suffix and a '{_RUN_PREFIX}' line)")
    if not found:
        where = ", ".join(str(p) for p in paths) or "(no paths given)"
        raise InputError(f"no lit files ({LIT_SUFFIX} with a '{_RUN_PREFIX}' line) under {where}")
    return list(dict.fromkeys(found))


def _lit_files_under(folder: Path) -> list[Path]:
    """Hidden folders (.git, .venv, ...) are skipped: they hold no tests and can be large."""
    found = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        found += [Path(root, name) for name in files if is_lit_file(Path(root, name))]
    return sorted(found)


def run_lit_files(paths: Sequence[str | Path], stream: TextIO, verbose: bool = False) -> int:
    """Run every lit file under `paths`, report each failure and a summary to `stream`; 0 if all passed, else 1."""
    files = collect_lit_files(paths)
    failed = 0
    for path in files:
        message = _failure_of(path)
        if message is None:
            if verbose:
                stream.write(f"PASS: {display_path(path)}\n")
            continue
        failed += 1
        stream.write(f"FAIL: {display_path(path)}\n{_indent(message)}\n")
    noun = "file" if len(files) == 1 else "files"
    stream.write(f"lit: {len(files) - failed} passed, {failed} failed ({len(files)} {noun})\n")
    return 1 if failed else 0


def _failure_of(path: Path) -> Optional[str]:
    """The failure message of one file, or None if it passed; a crash is a failure, not the end of the run."""
    try:
        run_case(LitCase.load(path))
    except LitFailure as err:
        return str(err)
    except Exception as err:  # noqa: BLE001 - a bug in a pass must not hide the other files' results
        return f"{display_path(path)}: unexpected {type(err).__name__}: {err}"
    return None


def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(f"{prefix}{line}".rstrip() for line in text.rstrip("\n").split("\n"))


def display_path(path: str | Path) -> str:
    """`path` relative to the current directory when it lies under it, as it was given otherwise."""
    absolute = Path(os.path.abspath(path))
    try:
        return str(absolute.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


__all__ = [
    "HEADER_KEYS", "LIT_SUFFIX", "LitCase", "LitFailure", "collect_lit_files", "display_path", "is_lit_file",
    "run_case", "run_lit_files",
]
