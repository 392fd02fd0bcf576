"""The project's lit-style pass tests: tests/passes/lit/*.ir, one case per file.

The files are run by gttc's own pytest plugin (compiler.testing.pytest_plugin,
the public runner in compiler.testing.lit), which collects every `.ir` file with
a `// RUN:` line as a test; see compiler/testing/lit.py for the file format.
This module guards that they keep running, that every covered pass has a file,
and that the FileCheck matcher they rely on can fail.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from compiler.passes.pipeline import parse_pipeline
from compiler.testing import FileCheckError, filecheck
from compiler.testing.lit import LitCase, is_lit_file

LIT_DIR = Path(__file__).resolve().parent / "lit"
LIT_FILES = sorted(LIT_DIR.glob("*.ir"))
# The passes whose behaviour these files pin down; each needs at least one file.
COVERED_PASSES = (
    "strip_unused_nodes", "remove_nodes", "remove_device", "set_device", "rename_op", "rename_attribute",
    "remove_attribute", "add_default_attributes", "backport_concatv2", "sort_by_execution_order",
    "merge_duplicate_nodes", "obfuscate_names", "insert_logging", "quantize_weights", "round_weights",
    "sparsify_gather", "quantize_nodes",
)


def test_the_lit_plugin_is_active(pytestconfig: pytest.Config) -> None:
    # Without it the .ir files would silently stop being tests.
    assert pytestconfig.pluginmanager.has_plugin("gttc"), "the gttc pytest plugin is not registered"


def test_every_lit_file_is_collected_as_a_test() -> None:
    not_lit = [path.name for path in LIT_FILES if not is_lit_file(path)]
    assert LIT_FILES and not not_lit, f"files the plugin would skip (no '// RUN:' line): {not_lit}"


def test_every_covered_pass_has_a_lit_file() -> None:
    tested = {spec.name for path in LIT_FILES for spec in parse_pipeline(LitCase.load(path).pipeline)}
    missing = [name for name in COVERED_PASSES if name not in tested]
    assert not missing, f"passes without a lit test: {missing}"


# -- the matcher itself: a FileCheck that never fails would make every lit file vacuous --

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

