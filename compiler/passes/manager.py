"""The pass manager: validate a whole pipeline, then run it under instruments.

Everything that can be checked without the graph is checked before any pass
runs: pass names, parameter names, parameter values, parameters given twice,
and prerequisites (`Pass.requires` must appear earlier).  With
`auto_prereqs` a missing prerequisite is inserted right before the pass that
needs it instead, and the report says so.

Running: the manager works on its own copy of the input graph, so the
caller's graph is never touched (a caller that loaded the graph only to
compile it hands it over with `in_place`); the result is
`PipelineReport.graph`.  A pass given `ignore_errors=true` runs after a
checkpoint (`Checkpoint` saves the lists and fields a pass can change and
builds no new ops): if it raises, the error goes into the report, the graph
is put back as it was, in place, and the pipeline goes on.  Any other
failure stops the run with a PassFailure naming the pass.  `ignore_errors`
covers errors a pass raises, not IR it leaves broken: the verifier stops
the run either way, as GTT's IsGraphValid does.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Optional, Sequence, TextIO

from compiler.errors import GttcError, PassFailure, PipelineError, PluginError
from compiler.ir.graph import Checkpoint, Graph
from compiler.passes.base import PASS_REGISTRY, Pass, PassContext, PassResult
from compiler.passes.instruments import (
    Instrument, PassOutcome, PipelineReport, ReportInstrument, VerifierInstrument, default_instruments,
)
from compiler.passes.pipeline import PassSpec, parse_pipeline
from compiler.passes.plugins import describe_plugin_error, load_installed_plugins


@dataclass
class PipelineStep:
    """One validated pipeline entry, ready to run."""

    position: int                # 1-based place in the final pipeline
    spec: PassSpec
    pass_cls: type[Pass]
    context: PassContext
    ignore_errors: bool
    inserted_for: Optional[str] = None  # the pass that needed it, when --auto-prereqs added it

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def label(self) -> str:
        return str(self.spec)

    @property
    def title(self) -> str:
        """How errors name the step: `pass 3 'name(params)'`, plus the plugin a loaded pass came from."""
        origin = self.pass_cls.origin
        return f"pass {self.position} '{self.label}'" + (f" ({origin})" if origin else "")


# -- validation -------------------------------------------------------------------


def lookup_pass(name: str) -> type[Pass]:
    """The registered pass class, or a PipelineError listing the valid names."""
    pass_cls = PASS_REGISTRY.get(name)
    if pass_cls is not None:
        return pass_cls
    valid = sorted(PASS_REGISTRY)
    close = difflib.get_close_matches(name, valid, n=1)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    listing = ", ".join(valid) if valid else "none are registered"
    raise PipelineError(f"unknown pass '{name}'{hint} (valid passes: {listing})")


def make_context(spec: PassSpec, pass_cls: type[Pass], inputs: Sequence[str], outputs: Sequence[str]) -> PassContext:
    """Check every parameter of `spec` against the pass's declarations and convert it eagerly."""
    declared = pass_cls.all_params()
    seen: set[str] = set()
    for key, value in spec.params:
        param = declared.get(key)
        if param is None:
            valid = ", ".join(sorted(declared))
            raise PipelineError(f"{spec.name}: unknown parameter '{key}' (valid parameters: {valid})")
        if key in seen and not param.repeated:
            raise PipelineError(f"{spec.name}: parameter '{key}' given more than once; it takes one value")
        seen.add(key)
        param.convert(value, spec.name)
    return PassContext(list(inputs), list(outputs), spec.name, declared, list(spec.params))


def plan_pipeline(specs: Sequence[PassSpec], inputs: Sequence[str] = (), outputs: Sequence[str] = (),
                  auto_prereqs: bool = False) -> tuple[list[PipelineStep], list[str]]:
    """Validate `specs` and order prerequisites; returns the steps and notes about insertions."""
    planner = _Planner(inputs, outputs, auto_prereqs)
    for spec in specs:
        planner.add(spec, inserted_for=None)
    for position, step in enumerate(planner.steps, start=1):
        step.position = position
    return planner.steps, planner.notes


class _Planner:
    """Builds the step list, satisfying each pass's `requires` as it is appended."""

    def __init__(self, inputs: Sequence[str], outputs: Sequence[str], auto_prereqs: bool) -> None:
        self.inputs, self.outputs, self.auto_prereqs = inputs, outputs, auto_prereqs
        self.steps: list[PipelineStep] = []
        self.notes: list[str] = []
        self._pending: list[str] = []  # passes being inserted, to catch requirement cycles

    def add(self, spec: PassSpec, inserted_for: Optional[str]) -> None:
        pass_cls = lookup_pass(spec.name)
        context = make_context(spec, pass_cls, self.inputs, self.outputs)
        self._satisfy(spec.name, pass_cls)
        ignore_errors = bool(context.param("ignore_errors"))
        self.steps.append(PipelineStep(0, spec, pass_cls, context, ignore_errors, inserted_for))

    def _satisfy(self, name: str, pass_cls: type[Pass]) -> None:
        for required in pass_cls.requires:
            if any(step.name == required for step in self.steps):
                continue
            if required not in PASS_REGISTRY:
                raise PipelineError(f"pass '{name}' requires '{required}', which is not a registered pass")
            if not self.auto_prereqs:
                raise PipelineError(
                    f"pass '{name}' requires '{required}' to run earlier in the pipeline; "
                    f"add {required} before {name}, or use --auto-prereqs to insert it")
            if required in self._pending:
                chain = " -> ".join([*self._pending, required])
                raise PipelineError(f"prerequisites form a cycle: {chain}")
            self._pending.append(required)
            self.add(PassSpec(required), inserted_for=name)
            self._pending.pop()
            self.notes.append(f"inserted {required} before {name}, which requires it (auto-prereqs)")


# -- running ----------------------------------------------------------------------


def snapshot(graph: Graph) -> Graph:
    """An independent copy, including the function library (a mutable protobuf message)."""
    copy = graph.clone()
    library = graph.extras.library
    if library is not None:
        copy.extras.library = type(library)()
        copy.extras.library.CopyFrom(library)
    return copy


class PassManager:
    """Runs a validated pipeline; construction raises PipelineError for any invalid entry."""

    def __init__(self, specs: Sequence[PassSpec], inputs: Sequence[str] = (), outputs: Sequence[str] = (),
                 auto_prereqs: bool = False, instruments: Optional[Sequence[Instrument]] = None,
                 notes: Sequence[str] = ()) -> None:
        load_installed_plugins()
        self.steps, insertions = plan_pipeline(specs, inputs, outputs, auto_prereqs)
        self.notes = [*notes, *insertions]
        self.instruments = [VerifierInstrument()] if instruments is None else list(instruments)
        for instrument in self.instruments:
            instrument.check_pipeline(self.steps)

    def run(self, graph: Graph, in_place: bool = False) -> PipelineReport:
        """Run every step on a copy of `graph` (on `graph` itself with `in_place`, for a caller that
        loaded it only to compile it); the rewritten graph is `report.graph`."""
        recorder = ReportInstrument()
        hooks = [*self.instruments, recorder]
        for hook in hooks:
            hook.before_pipeline(graph, self.steps)
        current = graph if in_place else snapshot(graph)
        for step in self.steps:
            current = self._run_step(step, current, hooks)
        for hook in reversed(hooks):
            hook.after_pipeline(current)
        return recorder.report(current, self.notes)

    def _run_step(self, step: PipelineStep, graph: Graph, hooks: Sequence[Instrument]) -> Graph:
        checkpoint = Checkpoint(graph) if step.ignore_errors else None
        for hook in hooks:
            hook.before_pass(graph, step)
        outcome = execute_step(step, graph)
        if outcome.failed and checkpoint is not None:
            checkpoint.restore()
        for hook in reversed(hooks):
            hook.after_pass(graph, step, outcome)
        return graph


def execute_step(step: PipelineStep, graph: Graph) -> PassOutcome:
    """Run one pass; its error is returned when ignored, raised as PassFailure otherwise."""
    try:
        result = step.pass_cls().run(graph, step.context)
        if not isinstance(result, PassResult):
            raise PassFailure(f"returned {type(result).__name__}, not a PassResult")
    except Exception as err:  # noqa: BLE001 - a pass may fail in any way; all of them are reported
        if step.ignore_errors:
            return PassOutcome(error=describe_error(err))
        raise pass_failure(step, err) from err
    return PassOutcome(result=result)


def describe_error(err: Exception) -> str:
    """Our own errors are already user messages; anything else is a bug, so keep its type."""
    message = str(err).strip().replace("\n", " ")
    if isinstance(err, GttcError):
        return message
    return f"{type(err).__name__}: {message}" if message else type(err).__name__


def pass_failure(step: PipelineStep, err: Exception) -> GttcError:
    """A PassFailure naming the pass (a PluginError naming the plugin too, for a loaded pass);
    a bad-input error keeps its exit code (2)."""
    if step.pass_cls.origin:
        detail = str(err) if isinstance(err, GttcError) else describe_plugin_error(err)
        return PluginError(f"{step.title} failed: {detail}")
    failure = PassFailure(f"{step.title} failed: {describe_error(err)}")
    if isinstance(err, GttcError):
        failure.exit_code = err.exit_code
    return failure


def run_pipeline(graph: Graph, text_or_specs: str | Sequence[PassSpec], inputs: Sequence[str] = (),
                 outputs: Sequence[str] = (), auto_prereqs: bool = False, verify_each: bool = True,
                 print_ir_after: Optional[str] = None, stream: Optional[TextIO] = None) -> PipelineReport:
    """Parse (if text), validate and run a pipeline; the caller's graph is left as it was."""
    specs = parse_pipeline(text_or_specs) if isinstance(text_or_specs, str) else list(text_or_specs)
    instruments = default_instruments(verify_each, print_ir_after, stream)
    return PassManager(specs, inputs, outputs, auto_prereqs, instruments).run(graph)


__all__ = [
    "PassManager", "PipelineStep", "execute_step", "lookup_pass", "make_context", "plan_pipeline",
    "run_pipeline", "snapshot",
]
