"""freeze_requantization_ranges and GTT's min/max log format.

The real thing first: GTT quantizes a fixture (quantize_weights
quantize_nodes), insert_logging instruments its RequantizationRange ops,
TensorFlow runs it on seeded inputs in a subprocess (Print writes to stderr
from C++), and GTT and gttc freeze the same graph from that log; the
GraphDefs must be identical, for several percentiles and record counts.
Then the parser line by line against GTT's, the writer (GTT must read
what it writes), and the one-line errors through the CLI.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Optional

import numpy as np
import pytest

from compiler.api import transform_graph
from compiler.backends.graphdef import emit_graphdef_bytes
from compiler.cli import main as gttc_main
from compiler.errors import InputError, PipelineError
from compiler.frontends.graphdef import load_graph_bytes
from compiler.ir.parser import parse_graph
from compiler.passes import run_pipeline
from compiler.passes.freeze_requantization_ranges import freeze_op
from compiler.quantization import minmax_log
from compiler.quantization.minmax_log import (
    check_percentile, format_log, format_log_line, parse_float32, parse_log, parse_log_line, percentile_indices,
    percentile_range, read_log, write_log,
)
from tests.conftest import ROOT, load_model_fixture
from tests.oracle import gtt_transform, require_tf
from tests.passes.test_gtt_differential import assert_same_graphdef

LOGGING = 'insert_logging(op=RequantizationRange, show_name=true, message="__requant_min_max:")'
LOGGED_FIXTURES = ("tf1_fused_bn", "keras_small_cnn")
RUNS = 7  # an odd count, so half-way percentile indices round away from zero

# Runs every feed set of an .npz (keys "RUN:INPUT") through one GraphDef; Print writes the log to stderr.
RUNNER = r"""
import sys
import numpy as np
import tensorflow as tf

graph_bytes = open(sys.argv[1], "rb").read()
arrays = np.load(sys.argv[2])
outputs = sys.argv[3].split(",")
graph = tf.Graph()
with graph.as_default():
    tf.import_graph_def(tf.compat.v1.GraphDef.FromString(graph_bytes), name="")
tensor = lambda name: graph.get_tensor_by_name(name if ":" in name else name + ":0")
runs = sorted({int(key.split(":", 1)[0]) for key in arrays.files})
config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
with tf.compat.v1.Session(graph=graph, config=config) as session:
    for run in runs:
        feeds = {tensor(key.split(":", 1)[1]): arrays[key] for key in arrays.files if key.startswith(f"{run}:")}
        session.run([tensor(name) for name in outputs], feeds)
"""


def freeze(path: Path, min_percentile=None, max_percentile=None) -> str:
    args = [f'min_max_log_file="{path}"']
    if min_percentile is not None:
        args.append(f"min_percentile={min_percentile}")
    if max_percentile is not None:
        args.append(f"max_percentile={max_percentile}")
    return f"freeze_requantization_ranges({', '.join(args)})"


class LoggedModel:
    """A GTT-quantized fixture and the log TensorFlow wrote running its logged copy."""

    def __init__(self, name: str, folder: Path, quantized: Optional[bytes] = None) -> None:
        self.model = load_model_fixture(name)
        self.inputs, self.outputs = self.model.inputs, self.model.outputs
        self.quantized = quantized if quantized is not None else gtt_transform(
            self.model.data, self.inputs, self.outputs, "quantize_weights quantize_nodes")
        self.folder = folder
        self.log_path = folder / f"{name}.log"

    def write_feeds(self) -> Path:
        rng = np.random.default_rng(1234)
        arrays = {f"{run}:{key}": (feed + rng.normal(0.0, 0.5, feed.shape)).astype(feed.dtype)
                  for run in range(RUNS) for key, feed in self.model.feeds.items()}
        path = self.folder / f"{self.model.name}_feeds.npz"
        np.savez(path, **arrays)
        return path

    def record_log(self, env: Optional[dict[str, str]] = None) -> None:
        """Run the logged graph in a TF child process (`env` added to its environment)."""
        logged = gtt_transform(self.quantized, self.inputs, self.outputs, LOGGING)
        graph_path = self.folder / f"{self.model.name}_logged.pb"
        graph_path.write_bytes(logged)
        done = subprocess.run([sys.executable, "-c", RUNNER, str(graph_path), str(self.write_feeds()),
                               ",".join(self.outputs)], capture_output=True, text=True, timeout=300, cwd=ROOT,
                              env={**os.environ, **(env or {})})
        assert done.returncode == 0, done.stderr[-2000:]
        self.log_path.write_text(done.stderr)

    def both(self, transforms: str) -> tuple[bytes, bytes]:
        return (transform_graph(self.quantized, self.inputs, self.outputs, transforms),
                gtt_transform(self.quantized, self.inputs, self.outputs, transforms))


@pytest.fixture(scope="module")
def logged(tmp_path_factory) -> dict[str, LoggedModel]:
    require_tf()
    folder = tmp_path_factory.mktemp("minmax_logs")
    models = {name: LoggedModel(name, folder) for name in LOGGED_FIXTURES}
    for model in models.values():
        model.record_log()
    return models


# -- identical to GTT on real logs ------------------------------------------------------------

PERCENTILES = [(None, None), (0, 0), (0, 100), (50, 50), (30, 70), (12.5, 37.5), (92, 8), (14.3, 85.7)]


@pytest.mark.tf
@pytest.mark.parametrize("min_percentile, max_percentile", PERCENTILES)
@pytest.mark.parametrize("fixture", LOGGED_FIXTURES)
def test_same_as_gtt_on_a_real_log(logged, fixture: str, min_percentile, max_percentile) -> None:
    model = logged[fixture]
    assert_same_graphdef(*model.both(freeze(model.log_path, min_percentile, max_percentile)))


@pytest.mark.tf
def test_real_log_freezes_every_range_op(logged) -> None:
    model = logged["keras_small_cnn"]
    log = read_log(model.log_path)
    assert len(log.ranges) == 25 and all(len(pairs) == RUNS for pairs in log.ranges.values())
    report = run_pipeline(load_graph_bytes(model.quantized), freeze(model.log_path), model.inputs, model.outputs)
    assert f"froze 25 of 25 RequantizationRange ops from {log.lines} log lines ({25 * RUNS} range records" \
        in report.format()
    assert not any(op.type == "RequantizationRange" for op in report.graph)


@pytest.mark.tf
@pytest.mark.parametrize("runs", [1, 2, 3, 4, 6])
def test_written_logs_read_the_same_by_gtt(logged, tmp_path, runs: int) -> None:
    """Logs written by `write_log` (here the first `runs` runs of the real one) freeze identically in GTT."""
    model = logged["tf1_fused_bn"]
    records = {name: pairs[:runs] for name, pairs in read_log(model.log_path).ranges.items()}
    path = tmp_path / "written.log"
    write_log(path, records)
    for min_percentile, max_percentile in [(None, None), (0, 0), (50, 50), (25, 75), (0, 100)]:
        if min_index_in_bounds(runs, 5 if min_percentile is None else min_percentile):
            assert_same_graphdef(*model.both(freeze(path, min_percentile, max_percentile)))


def min_index_in_bounds(count: int, min_percentile: float) -> bool:
    """Whether GTT's unclamped min index stays inside its array (past the end its result is undefined)."""
    raw = np.float32(count) * (np.float32(min_percentile) / np.float32(100.0))
    return int(np.floor(raw + np.float32(0.5))) < count


@pytest.mark.tf
def test_noisy_log_same_as_gtt(logged, tmp_path) -> None:
    """Logging prefixes, CRLF endings, blank and unrelated lines around the records change nothing."""
    model = logged["tf1_fused_bn"]
    noisy = []
    for number, line in enumerate(model.log_path.read_text().split("\n")):
        noisy.append(f"I0108 21:45:42.{number:06d}    1972 logging_ops.cc:79] {line}\r" if number % 2 else line)
        noisy += ["", "2025-01-01 WARNING something else entirely", "[1.0][2.0] __print__ but not a range"]
    path = tmp_path / "noisy.log"
    path.write_text("\n".join(noisy))
    assert read_log(path).matched == read_log(model.log_path).matched
    assert_same_graphdef(*model.both(freeze(path, 0, 0)))


@pytest.mark.tf
def test_largest_min_when_min_percentile_is_100(logged) -> None:
    """GTT reads past the end of its sorted mins here; gttc takes the largest min."""
    model = logged["tf1_fused_bn"]
    records = read_log(model.log_path).ranges
    report = run_pipeline(load_graph_bytes(model.quantized), freeze(model.log_path, 100, 0),
                          model.inputs, model.outputs)
    for name, pairs in records.items():
        frozen_min = report.graph.op(f"{name}/frozen_min").attrs["value"].numpy()
        frozen_max = report.graph.op(f"{name}/frozen_max").attrs["value"].numpy()
        assert frozen_min == np.float32(max(low for low, _ in pairs))
        assert frozen_max == np.float32(max(high for _, high in pairs))


# -- the parser, line by line against GTT -----------------------------------------------------

RANGE_GRAPH = """graph {
  %x = Placeholder() {dtype = qi32, shape = shape<4>} : qi32[4]
  %lo = Const() {dtype = f32, value = dense<f32[], [-10.0]>} : f32[]
  %hi = Const() {dtype = f32, value = dense<f32[], [10.0]>} : f32[]
  %range[2] = RequantizationRange(%x, %lo, %hi) {Tinput = qi32} : f32[], f32[]
  %rq[3] = Requantize(%x, %lo, %hi, %range, %range:1) {Tinput = qi32, out_type = qu8} : qu8[4], f32[], f32[]
  %out = Dequantize(%rq, %rq:1, %rq:2) {T = qu8, mode = "MIN_FIRST"} : f32[4]
  %other[2] = RequantizationRange(%x, %lo, %hi) {Tinput = qi32} : f32[], f32[]
}
"""
BASE_LOG = ";range__print__;__requant_min_max:[-1][1]\n;range__print__;__requant_min_max:[-2][2]\n"

# (line, accepted): with percentiles 0/0 an accepted line's extreme values become the frozen range.
TRICKY_LINES = [
    ("I0108 21:45:42.261883    1972 logging_ops.cc:79] ;range__print__;__requant_min_max:[-1000][1000]", True),
    (";range__print__;__requant_min_max:[-1000][1000]\r", True),
    (";range__print__;__requant_min_max:[ -1000 ][ +1000\t]", True),
    (";range__print__;__requant_min_max:[-1e3][1E+3]", True),
    (";range__print__;__requant_min_max:[-1000.][.5e3]", True),
    (";range__print__;__requant_min_max:[-1000]x[1000]trailing", True),
    (";range__print__;__requant_min_max:[-1000][1000];extra", True),
    ("range__print__;__requant_min_max:[-1000][1000]", True),
    (";range__print__;__requant_min_max:[-inf][Infinity]", True),
    (";range__print__;__requant_min_max:[-1e39][1e39]", True),
    (";range__print__;__requant_min_max:[-3][1000.0000305175781250000001]", True),
    (";range__print__;__requant_min_max:[-3][1000.000030517578125]", True),
    (";range__print__;__requant_min_max:[-1000][1000]]", False),
    (";range__print__;__requant_min_max:[-1000][1000][5]", False),
    (";range__print__; __requant_min_max:[-1000][1000]", False),
    (";x;range__print__;__requant_min_max:[-1][1];__requant_min_max:[-1000][1000]", False),
    (";range__print__;__requant_min_max:[-1000][abc]", False),
    (";range__print__;__requant_min_max:[--1000][1000]", False),
    (";range__print__;__requant_min_max:[+-1000][1000]", False),
    (";range__print__;__requant_min_max:[-0x3E8][0x1.0000010000000001p10]", True),
    (";range__print__;__requant_min_max:[ -0x1.f4p9 ][+0xA.Bp+7]", True),
    (";range__print__;__requant_min_max:[0x][1000]", False),
    (";range__print__;__requant_min_max:[-1000][0xinf]", False),
    (";range__print__;__requant_min_max:[0x1p][1000]", False),
    (";range__print__;__requant_min_max:[1e][1000]", False),
    (";range__print__;__requant_min_max:[-1000][1000] [x]", False),
    (";range__print__;__requant_min_max:[-1000][1000", False),
    (";range__print__;__requant_min_max:[][1000]", False),
    (";range__print__;__requant_min_max: [-1000][1000]", False),
    (";range__print;__requant_min_max:[-1000][1000]", False),
]


@pytest.mark.tf
@pytest.mark.parametrize("line, accepted", TRICKY_LINES, ids=[str(i) for i in range(len(TRICKY_LINES))])
def test_line_parsing_same_as_gtt(tmp_path, line: str, accepted: bool) -> None:
    require_tf()
    path = tmp_path / "tricky.log"
    path.write_text(BASE_LOG + line + "\n")
    assert (parse_log_line(line) is not None) == accepted
    data = emit_graphdef_bytes(parse_graph(RANGE_GRAPH, "range_graph"))
    transforms = freeze(path, 0, 0)
    assert_same_graphdef(transform_graph(data, [], ["out"], transforms), gtt_transform(data, [], ["out"], transforms))


def test_parse_log_groups_records_by_op_in_file_order() -> None:
    text = ("noise\n;a__print__;__requant_min_max:[-1][2]\nI0 x.cc:1] ;b__print__;__requant_min_max:[0][5]\n"
            "\n;a__print__;__requant_min_max:[-3][1.5]\n;a__print__;__requant_min_max:[x][1]\n")
    log = parse_log(text)
    assert log.ranges == {"a": [(-1.0, 2.0), (-3.0, 1.5)], "b": [(0.0, 5.0)]}
    assert (log.lines, log.matched) == (6, 3)


def test_name_comes_from_the_print_op() -> None:
    assert parse_log_line(";conv/Conv2D/eightbit/requant_range__print__;__requant_min_max:[-20.887871][22.274715]") \
        == ("conv/Conv2D/eightbit/requant_range", np.float32(-20.887871), np.float32(22.274715))


@pytest.mark.parametrize("text, expected", [
    ("1.5", 1.5), (" -2 ", -2.0), ("+3e2", 300.0), ("inf", np.inf), ("-INFINITY", -np.inf), ("1e39", np.inf),
    ("1000.0000305175781250000001", 1000.00006103515625), ("1000.000030517578125", 1000.0),
    ("0.1", float(np.float32(0.1))), ("0x10", 16.0), ("-0x1.8p3", -12.0), ("0x1.000001p0", 1.0),
    ("0x1.0000010000000001p0", 1.0000001192092896), ("0x1p99999", np.inf), ("nan(x1)", np.nan),
])
def test_parse_float32_rounds_once_to_float32(text: str, expected: float) -> None:
    assert np.float32(parse_float32(text)).tobytes() == np.float32(expected).tobytes() or np.isnan(expected)


@pytest.mark.parametrize("text", ["", "+-1", "--1", "0x", "0xinf", "1e", "1.5f", "1,5", "nan(", "1 2", "0x1p"])
def test_parse_float32_rejects_what_absl_rejects(text: str) -> None:
    assert parse_float32(text) is None


def test_nan_parses_but_is_ignored_when_freezing(tmp_path) -> None:
    path = tmp_path / "nan.log"
    path.write_text(BASE_LOG + ";range__print__;__requant_min_max:[nan][1000]\n")
    assert len(read_log(path).ranges["range"]) == 3
    report = run_pipeline(parse_graph(RANGE_GRAPH, "g"), freeze(path, 0, 0), [], ["out"])
    assert report.graph.op("range/frozen_min").attrs["value"].numpy() == np.float32(-2.0)
    assert "ignored 1 records with a NaN range" in report.format()


# -- percentiles ---------------------------------------------------------------------------------


@pytest.mark.parametrize("count, min_percentile, max_percentile, expected", [
    (7, 5, 5, (0, 6)),        # 0.35 -> 0; 6.65 -> 7, clamped to 6
    (7, 50, 50, (4, 4)),      # 3.5 rounds away from zero
    (10, 5, 5, (1, 9)),       # 10 * 0.95f is 9.5 in float32 (not 9.4999...), so 10, clamped to 9
    (3, 0, 0, (0, 2)),
    (3, 100, 100, (2, 0)),    # GTT would read mins[3]; gttc clamps
    (1, 37, 63, (0, 0)),
    (20, 12.5, 12.5, (3, 18)),  # 2.5 -> 3, 17.5 -> 18
])
def test_percentile_indices(count: int, min_percentile: float, max_percentile: float, expected) -> None:
    assert percentile_indices(count, min_percentile, max_percentile) == expected


def test_percentile_range_sorts_mins_and_maxs_separately() -> None:
    pairs = [(-1.0, 9.0), (-5.0, 2.0), (-3.0, 4.0)]
    assert percentile_range(pairs, 0, 0) == (-5.0, 9.0)
    assert percentile_range(pairs, 50, 50) == (-1.0, 9.0)  # 1.5 rounds to index 2 for both
    assert percentile_range(pairs, 34, 67) == (-3.0, 4.0)


@pytest.mark.parametrize("value", [-0.5, 100.01, float("nan"), 1e9])
def test_check_percentile_rejects_outside_0_100(value: float) -> None:
    with pytest.raises(PipelineError, match="min_percentile must be between 0 and 100"):
        check_percentile(value, "min_percentile")


# -- writing ----------------------------------------------------------------------------------


def test_written_lines_read_back_bit_for_bit(tmp_path) -> None:
    rng = np.random.default_rng(5)
    values = np.concatenate([rng.normal(size=200) * 10.0 ** rng.integers(-40, 38, size=200),
                             [0.0, -0.0, 1e-45, 3.4028235e38, np.inf, -np.inf]]).astype(np.float32)
    records = {"a/b": [(float(v), float(-v)) for v in values], "c": [(1.0, 2.0)]}
    path = tmp_path / "log.txt"
    write_log(path, records)
    back = read_log(path).ranges
    assert list(back) == ["a/b", "c"]
    got = np.array([low for low, _ in back["a/b"]], np.float32)
    assert got.tobytes() == values.tobytes()
    assert format_log_line("x/y", -1.25, 3.0) == ";x/y__print__;__requant_min_max:[-1.25][3]"


def test_log_is_written_run_by_run() -> None:
    text = format_log({"a": [(-1.0, 1.0), (-2.0, 2.0)], "b": [(0.0, 1.0)]})
    assert text.splitlines() == [format_log_line("a", -1, 1), format_log_line("b", 0, 1),
                                 format_log_line("a", -2, 2)]


@pytest.mark.parametrize("name", ["", "a;b", "a[0]", "a\nb"])
def test_unloggable_names_are_refused(name: str) -> None:
    with pytest.raises(InputError, match="cannot log a range"):
        format_log_line(name, 0.0, 1.0)


def test_freeze_helper_for_calibration() -> None:
    """`aggregate_records` + `freeze_op`: what the in-process calibration (calibrate_ranges) uses."""
    graph = parse_graph(RANGE_GRAPH, "g")
    ranges = minmax_log.aggregate_records({"range": [(-1.0, 1.0), (-2.0, 2.0)], "x": [(0.0, 1.0)]}, 0, 0)
    assert ranges == {"range": (-2.0, 2.0), "x": (0.0, 1.0)}
    freeze_op(graph, graph.op("range"), *ranges["range"])
    assert [op.name for op in graph if op.type == "RequantizationRange"] == ["other"]
    assert graph.op("range/frozen_min").attrs["value"].numpy() == np.float32(-2.0)


# -- bad input through the CLI: one line, exit 2, nothing written --------------------------------


def _cli_cases(tmp_path: Path) -> list[tuple[str, str]]:
    good = tmp_path / "good.log"
    good.write_text(BASE_LOG)
    empty = tmp_path / "nothing.log"
    empty.write_text("I0108 nothing to see\n;range__print__;__requant_min_max:[a][b]\n")
    strangers = tmp_path / "strangers.log"
    strangers.write_text(";ghost__print__;__requant_min_max:[-1][1]\n;lo__print__;__requant_min_max:[-1][1]\n")
    return [
        (freeze(tmp_path / "missing.log"), f"cannot read min/max log file '{tmp_path / 'missing.log'}'"),
        (freeze(tmp_path), f"cannot read min/max log file '{tmp_path}'"),
        (freeze(empty), "no min/max range lines"),
        (freeze(strangers), "none of the 2 ops named in"),
        (freeze(good, min_percentile=-1), "min_percentile must be between 0 and 100, got -1"),
        (freeze(good, max_percentile=100.5), "max_percentile must be between 0 and 100, got 100.5"),
        ("freeze_requantization_ranges", "min_max_log_file is required"),
        (freeze(good, min_percentile="abc"), "bad value 'abc' for parameter 'min_percentile'"),
    ]


def test_bad_input_is_one_line_exit_2_and_no_output(tmp_path, capsys) -> None:
    graph_path = tmp_path / "graph.ir"
    graph_path.write_text(RANGE_GRAPH)
    for transforms, message in _cli_cases(tmp_path):
        out = tmp_path / "out.pb"
        code = gttc_main([str(graph_path), "-o", str(out), "--outputs=out", f"--transforms={transforms}"])
        lines = capsys.readouterr().err.strip().splitlines()
        assert code == 2, (transforms, lines)
        assert len(lines) == 1 and message in lines[0], (transforms, lines)
        assert lines[0].startswith("gttc: error: ")
        assert not out.exists()


def test_cli_subprocess_exit_code(tmp_path) -> None:
    graph_path = tmp_path / "graph.ir"
    graph_path.write_text(RANGE_GRAPH)
    out = tmp_path / "out.pb"
    done = subprocess.run([str(ROOT / ".venv" / "bin" / "gttc"), str(graph_path), "-o", str(out),
                           f"--transforms={freeze(tmp_path / 'missing.log')}"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "missing.log" in done.stderr
    assert not out.exists()


def test_report_names_what_stayed_live_and_what_matched_nothing(tmp_path) -> None:
    path = tmp_path / "partial.log"
    path.write_text(BASE_LOG + ";ghost__print__;__requant_min_max:[-1][1]\n;lo__print__;__requant_min_max:[0][1]\n")
    report = run_pipeline(parse_graph(RANGE_GRAPH, "g"), freeze(path), [], ["out"])
    table = report.format()
    assert "froze 1 of 2 RequantizationRange ops from 4 log lines (4 range records" in table
    assert "left 1 RequantizationRange ops live (no usable records in the log): other" in table
    assert "ignored records of 1 ops not in the graph: ghost" in table
    assert "ignored records of 1 ops that are not RequantizationRange: lo (Const)" in table
