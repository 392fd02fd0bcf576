"""What a pass is: a named, documented graph rewrite with typed parameters.

A pass declares its parameters and the passes that must have run before
it; which -O levels and targets run it is decided in `levels.py` alone.
`run` rewrites the graph only through the IR's mutation API and returns a
PassResult saying how many sites it matched and what it changed; the pass manager adds timing, node
counts and verification around it, so passes hold no logging code.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Iterator, Sequence

from compiler.errors import PipelineError
from compiler.ir.dtypes import DType
from compiler.ir.graph import Graph
from compiler.ir.shapes import Shape


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise ValueError(f"'{text}' is not true or false")


# Parameter kinds: how a GTT parameter string becomes a typed value.
PARAM_KINDS: dict[str, Callable[[str], Any]] = {
    "str": str,
    "int": int,
    "float": float,
    "bool": _parse_bool,
    "dtype": DType.parse,
    "shape": Shape.parse,
}


@dataclass(frozen=True)
class Param:
    """One parameter: `kind` is a key of PARAM_KINDS; `repeated` allows `op=A, op=B`."""

    name: str
    kind: str
    default: Any
    help: str
    repeated: bool = False

    def convert(self, text: str, pass_name: str) -> Any:
        try:
            return PARAM_KINDS[self.kind](text)
        except (ValueError, KeyError) as err:
            raise PipelineError(
                f"{pass_name}: bad value '{text}' for parameter '{self.name}' (expected {self.kind}: {err})"
            ) from None


# Every pass accepts this one, as GTT's transforms do.
IGNORE_ERRORS = Param("ignore_errors", "bool", False, "log errors and skip the pass instead of failing")


@dataclass
class PassContext:
    """What a pass may read besides the graph: the graph's I/O names and its parameters.

    `raw_params` keeps every `name=value` pair in the order given, which
    passes with paired parameters (strip_unused_nodes' name/type_for_name)
    need; `param`/`params` give typed, validated values.
    """

    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    pass_name: str = ""
    declared: dict[str, Param] = field(default_factory=dict)
    raw_params: list[tuple[str, str]] = field(default_factory=list)

    def params(self, name: str) -> list[Any]:
        """All typed values given for `name`, in order (empty if none)."""
        decl = self._decl(name)
        return [decl.convert(v, self.pass_name) for k, v in self.raw_params if k == name]

    def param(self, name: str) -> Any:
        """The single typed value of `name`, or its default."""
        values = self.params(name)
        if len(values) > 1 and not self._decl(name).repeated:
            raise PipelineError(f"{self.pass_name}: parameter '{name}' given {len(values)} times, expected once")
        return values[-1] if values else self._decl(name).default

    def has(self, name: str) -> bool:
        return any(k == name for k, _ in self.raw_params)

    def _decl(self, name: str) -> Param:
        try:
            return self.declared[name]
        except KeyError:
            raise PipelineError(f"{self.pass_name}: reads undeclared parameter '{name}'") from None


@dataclass
class PassResult:
    """How many sites the pass matched, whether the graph changed, and details for the report."""

    sites: int = 0
    changed: bool = False
    notes: list[str] = field(default_factory=list)

    def note(self, text: str) -> None:
        self.notes.append(text)


class Pass:
    """Base class; subclasses set the class attributes and implement `run`.

    The docstring's first line is the summary `--list-passes` shows.
    """

    name: ClassVar[str] = ""
    params: ClassVar[Sequence[Param]] = ()
    requires: ClassVar[Sequence[str]] = ()
    # Where a pass loaded from outside the package came from ("" for built-in passes);
    # set by compiler.passes.plugins so errors and --list-passes can name the plugin.
    origin: ClassVar[str] = ""
    # True for a built-in pass whose every structural edit goes through the IR's mutation API
    # (reviewed, not enforced): a run of it that ticked no `StructureClock` left the structure
    # as last verified, even if it reports a change (a header or an attribute dropped), so the
    # verifier instrument need not sweep the graph again.  Plugin passes are verified anyway.
    edits_through_api: ClassVar[bool] = False

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:  # pragma: no cover - abstract
        raise NotImplementedError

    @classmethod
    def summary(cls) -> str:
        doc = (cls.__doc__ or "").strip()
        return doc.splitlines()[0] if doc else ""

    @classmethod
    def all_params(cls) -> dict[str, Param]:
        out = {p.name: p for p in cls.params}
        out.setdefault(IGNORE_ERRORS.name, IGNORE_ERRORS)
        return out


PASS_REGISTRY: dict[str, type[Pass]] = {}


class PassRegistrationError(ValueError):
    """A pass class that cannot be registered: not a Pass, no name, a bad name, or a name already taken."""


def register_pass(cls: type[Pass]) -> type[Pass]:
    """Class decorator: make the pass available by name to pipelines and the CLI."""
    if not (isinstance(cls, type) and issubclass(cls, Pass)):
        raise PassRegistrationError(f"{cls!r} is not a subclass of compiler.passes.Pass")
    if not cls.name:
        raise PassRegistrationError(f"pass class {cls.__name__} has no name")
    if not cls.name.isidentifier():
        raise PassRegistrationError(f"pass name '{cls.name}' is not an identifier (pipelines could not name it)")
    existing = PASS_REGISTRY.get(cls.name)
    if existing is not None and existing is not cls:
        owner = existing.origin or f"built in, {existing.__module__}"
        raise PassRegistrationError(f"pass '{cls.name}' is already registered ({owner})")
    PASS_REGISTRY[cls.name] = cls
    return cls


@contextmanager
def restored_registry() -> Iterator[None]:
    """Whatever registers passes inside the `with` block is forgotten when it ends."""
    saved = dict(PASS_REGISTRY)
    try:
        yield
    finally:
        PASS_REGISTRY.clear()
        PASS_REGISTRY.update(saved)


@contextmanager
def temporarily_registered(*classes: type[Pass]) -> Iterator[None]:
    """Register passes for the length of a `with` block, then restore the registry.

    For tests and experiments that need a pass the package does not ship.
    """
    with restored_registry():
        for cls in classes:
            register_pass(cls)
        yield
