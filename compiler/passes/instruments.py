"""Instruments: code that watches a pipeline run, so passes stay free of it.

Like TVM's pass instruments and MLIR's PassInstrumentation, an instrument
gets a hook before and after every pass.  The pass manager calls the
`before_*` hooks in list order and the `after_*` hooks in reverse order, so
the instrument listed last sits closest to the pass (the report's clock).

* VerifierInstrument - runs the IR verifier on the input and after every pass
  and names the pass that broke the IR.
* PrintIRInstrument - prints the textual IR after the chosen passes.
* ReportInstrument  - records, per pass, wall time, node counts, matched
  sites, the changed flag, notes and errors, and builds the PipelineReport.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional, Sequence, TextIO

from compiler.errors import PipelineError, PluginError, VerificationError
from compiler.ir.graph import Graph, StructureClock
from compiler.ir.printer import print_graph
from compiler.ir.verifier import verify
from compiler.passes.base import PASS_REGISTRY, PassResult

if TYPE_CHECKING:  # the manager imports this module, not the other way round
    from compiler.passes.manager import PipelineStep


@dataclass
class PassOutcome:
    """What happened when a pass ran: its result, or the error that was ignored."""

    result: Optional[PassResult] = None
    error: Optional[str] = None

    @property
    def failed(self) -> bool:
        return self.error is not None


class Instrument:
    """Base class: every hook does nothing until a subclass overrides it."""

    def check_pipeline(self, steps: Sequence[PipelineStep]) -> None:
        """Reject a pipeline this instrument cannot serve, before anything runs."""

    def before_pipeline(self, graph: Graph, steps: Sequence[PipelineStep]) -> None:
        """Called once with the caller's input graph (read it, never change it)."""

    def before_pass(self, graph: Graph, step: PipelineStep) -> None:
        """Called with the graph the pass is about to rewrite."""

    def after_pass(self, graph: Graph, step: PipelineStep, outcome: PassOutcome) -> None:
        """Called with the graph the pass left (the restored one if its error was ignored)."""

    def after_pipeline(self, graph: Graph) -> None:
        """Called once with the final graph."""


class VerifierInstrument(Instrument):
    """Verify the input, then the IR after every pass; blame the pass that broke it.

    A built-in pass that made no structural change through the IR API (the `StructureClock`
    did not move) and either reports no change or is one whose structural edits all go through
    that API (`Pass.edits_through_api`: strip_unused_nodes dropping only the GraphDef header)
    leaves the graph as last verified, so it is not swept again.  A plugin pass is always
    verified, and so is a built-in pass not marked that reports a change: either might edit
    use-lists behind the API."""

    def __init__(self) -> None:
        self.verified: Optional[tuple[Graph, int]] = None  # the graph last found valid, at which tick

    def before_pipeline(self, graph: Graph, steps: Sequence[PipelineStep]) -> None:
        try:
            self.check(graph)
        except VerificationError as err:
            raise VerificationError(f"the input graph is invalid before any pass ran: {err}") from None

    def after_pass(self, graph: Graph, step: PipelineStep, outcome: PassOutcome) -> None:
        if self.unchanged_since_verified(graph, step, outcome):
            return
        try:
            self.check(graph)
        except VerificationError as err:
            # A loaded pass's broken IR is the plugin's bug, not gttc's: a user error naming the plugin.
            kind = PluginError if step.pass_cls.origin else VerificationError
            raise kind(f"{step.title} left invalid IR: {err}") from None

    def unchanged_since_verified(self, graph: Graph, step: PipelineStep, outcome: PassOutcome) -> bool:
        if self.verified is None or step.pass_cls.origin:
            return False
        if outcome.result is not None and outcome.result.changed and not step.pass_cls.edits_through_api:
            return False
        return self.verified[0] is graph and self.verified[1] == StructureClock.ticks

    def after_pipeline(self, graph: Graph) -> None:
        self.verified = None

    def check(self, graph: Graph) -> None:
        self.verified = None
        verify(graph)
        self.verified = (graph, StructureClock.ticks)


ALL_PASSES = "all"


class PrintIRInstrument(Instrument):
    """Print the textual IR after the passes named in `after` (or every pass, for "all")."""

    def __init__(self, after: str = ALL_PASSES, stream: Optional[TextIO] = None) -> None:
        self.after = after
        self.stream = stream
        self.total = 0

    def check_pipeline(self, steps: Sequence[PipelineStep]) -> None:
        """A name that never runs would print nothing, so it is an error, not a no-op."""
        if self.after == ALL_PASSES or any(step.name == self.after for step in steps):
            return
        if self.after not in PASS_REGISTRY:
            raise PipelineError(f"--print-ir-after: unknown pass '{self.after}' (give a pass name or 'all')")
        names = ", ".join(dict.fromkeys(step.name for step in steps)) or "none"
        raise PipelineError(f"--print-ir-after: pass '{self.after}' is not in the pipeline (passes: {names})")

    def before_pipeline(self, graph: Graph, steps: Sequence[PipelineStep]) -> None:
        self.total = len(steps)

    def after_pass(self, graph: Graph, step: PipelineStep, outcome: PassOutcome) -> None:
        if self.after != ALL_PASSES and step.name != self.after:
            return
        status = ", failed and restored" if outcome.failed else ""
        out = self.stream or sys.stderr
        out.write(f"// -----// IR after {step.label} (pass {step.position} of {self.total}{status}) //----- //\n")
        out.write(print_graph(graph))
        out.flush()


@dataclass
class PassRecord:
    """One row of the report: what one pass did and what it cost."""

    position: int
    label: str
    wall_ms: float
    nodes_before: int
    nodes_after: int
    sites: int = 0
    changed: bool = False
    notes: list[str] = field(default_factory=list)
    error: Optional[str] = None
    inserted_for: Optional[str] = None

    @property
    def status(self) -> str:
        if self.error is not None:
            return "FAILED, ignored (graph restored)"
        return "changed" if self.changed else "unchanged"


@dataclass
class PipelineReport:
    """The outcome of a pipeline run: one record per pass, pipeline notes, the final graph."""

    records: list[PassRecord]
    notes: list[str]
    graph: Graph

    @property
    def changed(self) -> bool:
        return any(r.changed for r in self.records)

    @property
    def failures(self) -> list[PassRecord]:
        """Passes whose errors were ignored (`ignore_errors=true`)."""
        return [r for r in self.records if r.error is not None]

    @property
    def total_ms(self) -> float:
        return sum(r.wall_ms for r in self.records)

    def format(self) -> str:
        """A table with one row per pass, then notes; every row states its sites, even 0."""
        return "\n".join(_format_lines(self)) + "\n"


# The widest pass label the report's table column grows to.
_LABEL_WIDTH = 72


def _format_lines(report: PipelineReport) -> list[str]:
    records = report.records
    if not records:
        return ["pipeline: no passes ran"] + [f"note: {n}" for n in report.notes]
    first, last = records[0].nodes_before, records[-1].nodes_after
    count = f"{len(records)} pass" if len(records) == 1 else f"{len(records)} passes"
    lines = [f"pipeline: {count}, {report.total_ms:.1f} ms, {first} -> {last} nodes"]
    labels = [r.label + (" [auto]" if r.inserted_for else "") for r in records]
    width = min(_LABEL_WIDTH, max(len("pass"), *map(len, labels)))
    lines.append(f"  {'#':>3}  {'pass':<{width}}  {'ms':>8}  {'nodes':>15}  {'sites':>10}  result")
    for record, label in zip(records, labels):
        position = str(record.position)
        if len(label) > width:  # a long parameter list gets a line of its own; the numbers follow below it
            lines.append(f"  {position:>3}  {label}")
            position, label = "", ""
        nodes = f"{record.nodes_before} -> {record.nodes_after}"
        lines.append(f"  {position:>3}  {label:<{width}}  {record.wall_ms:>8.1f}  {nodes:>15}  "
                     f"{_sites(record.sites):>10}  {record.status}")
        if record.error is not None:
            lines.append(f"       error: {record.error}")
        lines.extend(f"       note: {note}" for note in record.notes)
    lines.extend(f"note: {note}" for note in report.notes)
    return lines


def _sites(count: int) -> str:
    return f"{count} site" if count == 1 else f"{count} sites"


class ReportInstrument(Instrument):
    """Time every pass and count its nodes; `report()` turns the records into a PipelineReport."""

    def __init__(self) -> None:
        self.records: list[PassRecord] = []
        self._started = 0.0
        self._nodes_before = 0

    def before_pass(self, graph: Graph, step: PipelineStep) -> None:
        self._nodes_before = len(graph)
        self._started = time.perf_counter()

    def after_pass(self, graph: Graph, step: PipelineStep, outcome: PassOutcome) -> None:
        elapsed_ms = (time.perf_counter() - self._started) * 1000.0
        record = PassRecord(step.position, step.label, elapsed_ms, self._nodes_before, len(graph),
                            error=outcome.error, inserted_for=step.inserted_for)
        if outcome.result is not None:
            record.sites = outcome.result.sites
            record.changed = outcome.result.changed
            record.notes = list(outcome.result.notes)
            if not record.changed and record.nodes_before != record.nodes_after:
                record.notes.append("the pass reported no change, but the node count changed")
        self.records.append(record)

    def report(self, graph: Graph, notes: Sequence[str] = ()) -> PipelineReport:
        return PipelineReport(list(self.records), list(notes), graph)


class FloatSnapshotInstrument(Instrument):
    """Keep a copy of the graph as it was before the first eight-bit pass ran.

    That float graph computes, layer for layer, what the eight-bit graph
    approximates (the original may differ: -O2 folds batch norms into the
    weights first), so per-layer errors are measured against it.
    """

    QUANTIZING = frozenset({"quantize_weights", "quantize_nodes"})

    def __init__(self) -> None:
        self.graph: Optional[Graph] = None

    def before_pass(self, graph: Graph, step: PipelineStep) -> None:
        if self.graph is None and step.name in self.QUANTIZING:
            self.graph = graph.clone()


def default_instruments(verify_each: bool = True, print_ir_after: Optional[str] = None,
                        stream: Optional[TextIO] = None) -> list[Instrument]:
    """The instruments `run_pipeline` and the command line install for these options.

    The verifier comes first so that its after-pass hook runs last: broken IR
    is printed before the verifier stops the run.
    """
    instruments: list[Instrument] = []
    if verify_each:
        instruments.append(VerifierInstrument())
    if print_ir_after:
        instruments.append(PrintIRInstrument(print_ir_after, stream))
    return instruments


__all__ = [
    "FloatSnapshotInstrument",
    "ALL_PASSES", "Instrument", "PassOutcome", "PassRecord", "PipelineReport", "PrintIRInstrument",
    "ReportInstrument", "VerifierInstrument", "default_instruments",
]
