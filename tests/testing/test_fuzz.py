"""The fuzz harness: deterministic cases, and a short run of mutated fixtures with no crash, hang or leftover."""
from __future__ import annotations

import os
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from compiler.proto import graph_pb2
from compiler.testing import fuzz

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
# Every committed fixture but the 1.9 MB MobileNet (the long run in docs/ROBUSTNESS.md includes it).
SEED_MODELS = ("devices_gather", "digits_cnn", "digits_mlp", "keras_padded_convs", "keras_small_cnn",
               "resize_pad_conv", "tf1_control_flow", "tf1_fused_bn", "tf1_old_batch_norm",
               "tf2_functional_control_flow")
SHORT_RUN_CASES = 2000
SHORT_RUN_SEED = 20261123


@pytest.fixture(scope="module")
def seeds() -> list[fuzz.FuzzSeed]:
    return [fuzz.load_seed(FIXTURES / f"{name}.pb") for name in SEED_MODELS]


def test_cases_are_a_function_of_seed_and_index(seeds):
    first = [fuzz.make_case(seeds, 5, i) for i in range(40)]
    again = [fuzz.make_case(seeds, 5, i) for i in range(40)]
    assert [(c.data, c.mutations) for c in first] == [(c.data, c.mutations) for c in again]
    assert len({c.data for c in first}) == 40
    assert fuzz.make_case(seeds, 6, 0).data != first[0].data


def test_every_mutation_changes_the_model(seeds):
    rng = random.Random(0)
    model = next(s for s in seeds if s.name == "tf1_fused_bn")
    for mutate in fuzz.WIRE_MUTATIONS:
        data, what = mutate(model.data, rng)
        assert data != model.data and what
    with_functions = next(s for s in seeds if s.name == "tf2_functional_control_flow")
    for mutate in fuzz.GRAPH_MUTATIONS:
        model = with_functions if mutate is fuzz.mutate_function_body else model
        original = graph_pb2.GraphDef.FromString(model.data).SerializeToString(deterministic=True)
        changed = False
        for _ in range(20):  # a mutation may pick a spot where it has nothing to do
            graph = graph_pb2.GraphDef.FromString(model.data)
            what = mutate(graph, rng)
            changed = changed or graph.SerializeToString(deterministic=True) != original
        assert changed and what, mutate.__name__


def test_short_run_has_no_crash_hang_or_leftover_output(seeds):
    summary = fuzz.fuzz(seeds, SHORT_RUN_CASES, seed=SHORT_RUN_SEED)
    report = "\n".join(f"case {c.index} ({c.seed_name}: {'; '.join(c.mutations)}): {r.outcome}: {r.detail}"
                       for c, r in summary.failures)
    assert not summary.failures, f"{summary.line()}\n{report}"
    # The run reached every stage: some cases compiled, exported and verified, others were refused.
    assert summary.outcomes["ok"] > SHORT_RUN_CASES // 20
    assert summary.outcomes["rejected"] > SHORT_RUN_CASES // 2


def _one_case(seeds) -> fuzz.FuzzCase:
    return fuzz.make_case(seeds, 0, 0)


def test_an_exception_that_is_not_gttcs_is_a_crash(seeds, monkeypatch):
    def broken(argv):
        raise IndexError("tuple index out of range")

    monkeypatch.setattr("compiler.cli.main", broken)
    result = fuzz.run_case(_one_case(seeds))
    assert result.outcome == "crash" and result.failed
    assert result.detail.startswith("IndexError: tuple index out of range @ testing/")


def test_a_case_past_its_budget_is_a_hang(seeds, monkeypatch):
    monkeypatch.setattr("compiler.cli.main", lambda argv: time.sleep(5))
    result = fuzz.run_case(_one_case(seeds), budget=0.2)
    assert result.outcome == "hang" and "0.2 s" in result.detail


def test_a_case_that_kills_its_worker_is_named_and_the_run_goes_on(seeds, monkeypatch):
    """A native library aborting leaves no exception: with --jobs 2 the pool breaks, the case runs
    again alone, and its death is its result; the cases after it still run."""
    def aborts_on_case_3(case, budget=30.0):
        if case.index == 3:
            os.abort()
        return fuzz.CaseResult(case.index, "ok")

    monkeypatch.setattr(fuzz, "run_case", aborts_on_case_3)
    summary = fuzz.fuzz(seeds, 8, seed=5, jobs=2)
    assert summary.cases == 8 and summary.outcomes == {"ok": 7, "died": 1}
    [(case, result)] = summary.failures
    assert case.index == 3 and result.detail == "the process died (signal 6) with no Python exception"


def test_output_left_by_a_failed_compile_is_a_failure(seeds, monkeypatch):
    def leaky(argv):
        Path(argv[argv.index("-o") + 1]).write_bytes(b"partial")
        return 2

    monkeypatch.setattr("compiler.cli.main", leaky)
    result = fuzz.run_case(_one_case(seeds))
    assert result.outcome == "partial-output" and "out.pb" in result.detail


def test_command_line_replays_a_case(seeds, capsys):
    models = [str(FIXTURES / f"{name}.pb") for name in SEED_MODELS[:3]]
    limits = resource.getrlimit(resource.RLIMIT_AS)
    assert fuzz.main([*models, "--replay", "3", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("case 3: ") and ("ok" in out or "rejected" in out)
    # Only the script caps its address space: TF and onnxruntime in a caller's process (this test
    # run) crash instead of raising when an allocation fails.
    assert resource.getrlimit(resource.RLIMIT_AS) == limits


def test_the_command_line_caps_its_address_space():
    """Past the cap an allocation is a MemoryError in its case, not the machine's OOM killer."""
    code = ("import numpy as np\nfrom compiler.testing.fuzz import cap_address_space\ncap_address_space(2 << 30)\n"
            "try:\n    np.ones(3 << 30, np.uint8)\nexcept MemoryError:\n    print('refused')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.stdout.strip() == "refused", done.stderr
    with pytest.raises(SystemExit):
        fuzz.main([str(FIXTURES / "digits_mlp.pb"), "--address-space", "lots"])
