"""Passes from outside the package: --load-passes files and modules, entry points, and bad plugins."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from compiler.cli import main
from compiler.errors import PluginError
from compiler.passes import PASS_REGISTRY
from compiler.passes.base import restored_registry
from compiler.passes.plugins import load_passes

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "tests/fixtures/digits_mlp.pb"

COUNT_OPS = '''
from compiler.passes import Param, Pass, PassResult, register_pass

@register_pass
class CountOps(Pass):
    """Count the ops of one type (a pass that reads and reports, changing nothing)."""
    name = "count_ops"
    params = (Param("type", "str", "MatMul", "op type to count"),)
    requires = ("remove_nodes",)

    def run(self, graph, ctx):
        found = [op for op in graph if op.type == ctx.param("type")]
        result = PassResult(sites=len(found))
        result.note(f"{len(found)} {ctx.param('type')} ops")
        return result
'''


@pytest.fixture(autouse=True)
def _clean_registry():
    with restored_registry():
        yield


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def run_cli(args: list[str], capsys) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_plugin_file_is_a_first_class_pass(tmp_path, capsys):
    plugin = write(tmp_path, "count_ops.py", COUNT_OPS)
    code, out, _ = run_cli(["--list-passes", f"--load-passes={plugin}"], capsys)
    assert code == 0
    listing = out[out.index("  count_ops"):]
    assert "Count the ops of one type" in listing
    assert "type (str) = MatMul" in listing and "requires: remove_nodes" in listing
    assert f"from:     plugin {plugin}" in listing
    out_path = tmp_path / "out.pb"
    code, _, err = run_cli([MODEL, "-o", out_path, f"--load-passes={plugin}",
                            "--transforms=remove_nodes(op=Identity) count_ops(type=BiasAdd)"], capsys)
    assert code == 0 and out_path.exists()
    assert "count_ops(type=BiasAdd)" in err and "2 BiasAdd ops" in err


def test_prerequisites_and_parameters_of_a_plugin_pass_are_checked(tmp_path, capsys):
    plugin = write(tmp_path, "count_ops.py", COUNT_OPS)
    code, _, err = run_cli([MODEL, "-o", tmp_path / "o.pb", f"--load-passes={plugin}", "--transforms=count_ops"],
                           capsys)
    assert code == 2 and "requires 'remove_nodes' to run earlier" in err
    code, _, err = run_cli([MODEL, "-o", tmp_path / "o.pb", f"--load-passes={plugin}",
                            "--transforms=remove_nodes(op=Identity) count_ops(kind=x)"], capsys)
    assert code == 2 and "count_ops: unknown parameter 'kind'" in err
    assert not (tmp_path / "o.pb").exists()


def test_a_module_on_the_path_loads_by_name(tmp_path, monkeypatch):
    write(tmp_path, "my_gttc_passes.py", COUNT_OPS)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert load_passes("my_gttc_passes") == ["count_ops"]
    assert PASS_REGISTRY["count_ops"].origin == "plugin module my_gttc_passes"
    assert load_passes("my_gttc_passes") == ["count_ops"]  # loading twice is harmless


@pytest.mark.parametrize("source, message", [
    ("import numpy\nx = 1 / 0\n", "ZeroDivisionError: division by zero (line 2)"),
    ("def broken(:\n", "SyntaxError: "),
    ("import no_such_module_anywhere\n", "ModuleNotFoundError: No module named 'no_such_module_anywhere' (line 1)"),
    ("x = 1\n", "registers no passes"),
    (COUNT_OPS.replace('"count_ops"', '"remove_nodes"'),
     "pass 'remove_nodes' is already registered (built in, compiler.passes.remove_nodes)"),
    (COUNT_OPS.replace('"count_ops"', '"count-ops"'), "pass name 'count-ops' is not an identifier"),
    ("import sys\nsys.exit(3)\n", "SystemExit: 3"),
])
def test_a_bad_plugin_is_one_line_naming_the_file(tmp_path, capsys, source, message):
    plugin = write(tmp_path, "bad_plugin.py", source)
    before = dict(PASS_REGISTRY)
    out_path = tmp_path / "o.pb"
    code, out, err = run_cli([MODEL, "-o", out_path, f"--load-passes={plugin}", "-O1"], capsys)
    assert code == 2 and not out_path.exists() and out == ""
    assert err.startswith(f"gttc: error: plugin {plugin}: ") and message in err
    assert err.count("\n") == 1
    assert PASS_REGISTRY == before  # nothing half-registered


def test_missing_plugin_file_and_module(tmp_path):
    with pytest.raises(PluginError, match=r"plugin .*nowhere.py: no such file"):
        load_passes(str(tmp_path / "nowhere.py"))
    with pytest.raises(PluginError, match="plugin module no_such_gttc_plugin: ModuleNotFoundError"):
        load_passes("no_such_gttc_plugin")


BREAKS_IR = '''
from compiler.passes import Pass, PassResult, register_pass

@register_pass
class MakeCycle(Pass):
    """Make the first Relu read its own result: invalid IR the verifier must catch."""
    name = "make_cycle"

    def run(self, graph, ctx):
        relu = next(op for op in graph if op.type == "Relu")
        relu.set_operand(0, relu.result)
        return PassResult(sites=1, changed=True)

@register_pass
class Crash(Pass):
    """Fail with a plain Python error."""
    name = "crash"

    def run(self, graph, ctx):
        return {}["missing"]
'''


@pytest.mark.parametrize("pipeline, message", [
    ("make_cycle", "pass 1 'make_cycle' (plugin {plugin}) left invalid IR: graph has a cycle"),
    ("crash", "pass 1 'crash' (plugin {plugin}) failed: KeyError: 'missing' (line 20)"),
])
def test_a_plugin_pass_that_breaks_the_ir_or_crashes_is_blamed(tmp_path, capsys, pipeline, message):
    plugin = write(tmp_path, "breaks.py", BREAKS_IR)
    out_path = tmp_path / "o.pb"
    code, _, err = run_cli([MODEL, "-q", "-o", out_path, f"--load-passes={plugin}", f"--transforms={pipeline}"],
                           capsys)
    assert code == 2 and not out_path.exists()
    assert message.format(plugin=plugin) in err and err.count("\n") == 1


def test_an_entry_point_loads_with_no_flag(tmp_path):
    """A package installed with a `gttc.passes` entry point (a dist-info on sys.path, as pip leaves it)."""
    (tmp_path / "count_pkg").mkdir()
    write(tmp_path, "count_pkg/__init__.py", COUNT_OPS)
    info = tmp_path / "count_pkg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: count-pkg\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[gttc.passes]\ncount_ops = count_pkg\n")
    env_path = str(tmp_path)
    out = tmp_path / "o.pb"
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from compiler.cli import main; sys.exit(main(sys.argv[1:]))",
         str(MODEL), "-o", str(out), "--transforms=remove_nodes(op=Identity) count_ops(type=Relu)"],
        capture_output=True, text=True, cwd=ROOT, env=_env(env_path))
    assert proc.returncode == 0, proc.stderr
    assert "1 Relu ops" in proc.stderr and out.exists()
    listing = subprocess.run(
        [sys.executable, "-c", "import sys; from compiler.cli import main; sys.exit(main(sys.argv[1:]))",
         "--list-passes"], capture_output=True, text=True, cwd=ROOT, env=_env(env_path)).stdout
    assert "from:     entry point 'count_ops = count_pkg' of count-pkg" in listing


@pytest.mark.parametrize("target, message", [
    ("broken_pkg_missing", "ModuleNotFoundError: No module named 'broken_pkg_missing'"),
    ("json:dumps", "TypeError: the target <function dumps"),  # neither a module nor a Pass subclass
])
def test_a_broken_entry_point_is_one_line(tmp_path, target, message):
    info = tmp_path / "broken_pkg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-pkg\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[gttc.passes]\nbroken = {target}\n")
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from compiler.cli import main; sys.exit(main(sys.argv[1:]))",
         str(MODEL), "-o", str(tmp_path / "o.pb"), "-O1"],
        capture_output=True, text=True, cwd=ROOT, env=_env(str(tmp_path)))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert proc.stderr.startswith(f"gttc: error: entry point 'broken = {target}' of broken-pkg: {message}")
    assert not (tmp_path / "o.pb").exists()


def _env(extra_path: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([extra_path, str(ROOT), env.get("PYTHONPATH", "")])
    return env
