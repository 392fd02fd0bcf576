"""pytest plugin: every `.ir` file with a `// RUN:` line is one test, run by compiler.testing.lit.

Installed as the `gttc` entry point of the `pytest11` group, so a project that
has gttc installed runs its lit files with plain `pytest`.  Lit files for a
project's own passes need those passes loaded first: `--gttc-load-passes=
PATH_OR_MODULE` (repeatable) or the `gttc_load_passes` ini option (one per
line; relative paths are relative to the ini file) does that before
collection.  A failing file shows the runner's message, not a traceback into
the runner.

pytest loads this module into every run of an environment with gttc
installed, so the runner (which imports every pass) is only imported once an
`.ir` file turns up or a plugin is to be loaded.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Optional, Union

import pytest

from compiler.errors import PluginError

if TYPE_CHECKING:
    from _pytest._code.code import TerminalRepr, TracebackStyle

OPTION = "gttc_load_passes"
SUFFIX = ".ir"  # compiler.testing.lit.LIT_SUFFIX, checked here before importing the runner


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gttc", "gttc lit-style pass tests")
    group.addoption("--gttc-load-passes", action="append", dest=OPTION, default=[], metavar="PATH_OR_MODULE",
                    help="load gttc passes from a plugin file or module before collecting lit files (repeatable)")
    parser.addini(OPTION, type="linelist", default=[],
                  help="gttc pass plugins (files or modules) to load before collecting lit files, one per line")


def pytest_configure(config: pytest.Config) -> None:
    specs = plugin_specs(config)
    if not specs:
        return
    from compiler.passes.plugins import load_passes

    for spec in specs:
        try:
            load_passes(spec)
        except PluginError as err:
            raise pytest.UsageError(str(err)) from None


def plugin_specs(config: pytest.Config) -> list[str]:
    """The ini file's plugins, then the command line's, in order."""
    base = config.inipath.parent if config.inipath is not None else config.rootpath
    from_ini = [_resolve(spec, base) for spec in config.getini(OPTION)]
    # default=None: when the plugin is registered late (a conftest fallback), the option was never parsed.
    return from_ini + list(config.getoption(OPTION, default=None) or [])


def _resolve(spec: str, base: Path) -> str:
    """An ini entry naming a file is relative to the ini file; a module name stays as it is."""
    candidate = base / spec
    if spec.endswith(".py") or "/" in spec or os.sep in spec or candidate.exists():
        return str(candidate)
    return spec


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> Optional["LitFile"]:
    if file_path.suffix != SUFFIX:
        return None
    from compiler.testing.lit import is_lit_file

    if is_lit_file(file_path):
        return LitFile.from_parent(parent, path=file_path)
    return None


class LitFile(pytest.File):
    """A lit file is a single test: its checks run against one pipeline result."""

    def collect(self) -> Iterator["LitItem"]:
        yield LitItem.from_parent(self, name=self.path.stem)


class LitItem(pytest.Item):
    """Loads and runs the file at run time, so a malformed file fails as a test instead of breaking collection."""

    def runtest(self) -> None:
        from compiler.testing.lit import LitCase, run_case

        run_case(LitCase.load(self.path))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Optional["TracebackStyle"] = None) -> Union[str, "TerminalRepr"]:
        from compiler.testing.lit import LitFailure

        if isinstance(excinfo.value, LitFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style)

    def reportinfo(self) -> tuple[Path, Optional[int], str]:
        return self.path, None, f"lit: {self.path.name}"
