"""The errors gttc reports to users: each one names what went wrong and where."""
from __future__ import annotations


class GttcError(Exception):
    """Base class; `str(err)` is the one line shown to the user."""

    exit_code = 1


class InputError(GttcError):
    """A bad model file, node name or command line (exit code 2, no output written)."""

    exit_code = 2


class PipelineError(InputError):
    """A malformed or invalid pass pipeline: unknown pass, parameter or value."""


class PluginError(InputError):
    """A pass plugin that cannot be loaded or whose pass misbehaves; names the plugin (exit code 2)."""


class PassFailure(GttcError):
    """A pass could not transform the graph."""


class VerificationError(GttcError):
    """The IR broke an invariant (raised by the verifier)."""


class ToleranceExceeded(GttcError):
    """Numerical verification found outputs further apart than allowed (exit code 1)."""
