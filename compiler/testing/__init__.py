"""Test support shipped with the compiler: a FileCheck-style matcher for printed IR and the lit-style runner.

The runner's names are re-exported lazily: the pytest plugin in this package is
loaded into every pytest run of an environment with gttc installed, and the
runner imports the whole pass package, which only files with lit tests need.
"""
from __future__ import annotations

from typing import Any

from compiler.testing.filecheck import Directive, FileCheckError, filecheck, parse_directives

_LIT = ("LitCase", "LitFailure", "collect_lit_files", "is_lit_file", "run_case", "run_lit_files")


def __getattr__(name: str) -> Any:
    if name in _LIT:
        from compiler.testing import lit

        return getattr(lit, name)
    raise AttributeError(f"module 'compiler.testing' has no attribute '{name}'")


__all__ = ["Directive", "FileCheckError", "filecheck", "parse_directives", *_LIT]
