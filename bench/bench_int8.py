"""Eight-bit ONNX: gttc's mobile-int8 against onnxruntime's own static quantizer, in one process.

    python bench/bench_int8.py [--models keras_mobilenet_v2,keras_inception_v3,keras_resnet50]
                               [--runs 30] [--calibration-feeds 16]

Per model, on the same seeded calibration feeds:

- float:      tf2onnx's conversion of the frozen graph (what onnxruntime's quantizer starts from);
- ort-int8:   `onnxruntime.quantization.quantize_static` on that model: U8S8 QDQ, per tensor, MinMax,
              Softmax excluded (its best settings on this machine);
- gttc-int8:  `gttc -O2 --target=mobile-int8 --calibration DATA -o m.onnx` (the default: U8S8, ONNX's
              QLinearConv/QLinearMatMul where a group has one, QDQ elsewhere: `--onnx-quant=qlinear`);
- gttc-qdq:   the same model written as pure QDQ (`--onnx-quant=qdq`), which onnxruntime fuses itself;
- gttc-u8u8:  the same without symmetric_weights, so the weights keep TF's quint8 grid (U8U8);
- gttc-qop:   gttc-int8 in onnxruntime's QOperator form (`--onnx-quant=qoperator`: QLinearAdd, QGemm...).

Each model runs in onnxruntime with one thread; runs alternate between the
models and the median is reported, with the ratio to ort-int8.  Accuracy is
measured against float over the fixture's reference feed plus every
calibration feed: the mean logit cosine and the top-1 agreement.  File size
and build time complete the table.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Optional

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from bench.bench_int8_tf import calibration_file, cosine  # noqa: E402
from compiler.api import compile as gttc_compile  # noqa: E402
from compiler.backends.onnx.tf2onnx_compare import convert_with_tf2onnx  # noqa: E402
from compiler.frontends.graphdef import load_graph_bytes  # noqa: E402
from compiler.modelio import DEFAULT_QUANT_FORMAT, serialize_onnx  # noqa: E402
from compiler.passes.levels import TARGETS  # noqa: E402
from compiler.runtime.onnx_runner import OnnxRunner, time_interleaved  # noqa: E402
from tests.conftest import Model, build_big_fixture  # noqa: E402

DEFAULT_MODELS = ("keras_mobilenet_v2", "keras_inception_v3", "keras_resnet50")


def ort_static_int8(float_model_path: Path, calibration: Path, out: Path) -> None:
    """onnxruntime's quantize_static with its best settings here: U8S8 QDQ, per tensor, MinMax, no Softmax."""
    import onnx
    from onnxruntime.quantization import CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType
    from onnxruntime.quantization import quantize_static

    model = onnx.load(str(float_model_path))
    input_names = [i.name for i in model.graph.input]
    stacks = dict(np.load(calibration))

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            count = len(next(iter(stacks.values())))
            self.feeds = iter([{onnx_name: stacks[onnx_name.split(":")[0]][i] for onnx_name in input_names}
                               for i in range(count)])

        def get_next(self) -> Optional[dict]:
            return next(self.feeds, None)

    op_types = sorted({node.op_type for node in model.graph.node} - {"Softmax"})
    quantize_static(str(float_model_path), str(out), Reader(), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, per_channel=False,
                    calibrate_method=CalibrationMethod.MinMax, op_types_to_quantize=op_types)


def timed(build: Callable[[], None]) -> float:
    start = time.perf_counter()
    build()
    return time.perf_counter() - start


def gttc_int8_onnx(model: Model, calibration: Path, symmetric: bool = True,
                   quant_format: str = DEFAULT_QUANT_FORMAT) -> bytes:
    """gttc's mobile-int8 ONNX; without `symmetric`, the calibrated pipeline minus symmetric_weights."""
    if symmetric:
        graph_def = gttc_compile(model.data, model.inputs, model.outputs, 2, "mobile-int8",
                                 calibration=str(calibration)).graph_def
    else:
        quantizing = TARGETS["mobile-int8"].after.replace(" strip_unused_nodes sort_by_execution_order", "")
        transforms = (f"{quantizing} quantize_activations calibrate_ranges(data={calibration}) "
                      "strip_unused_nodes sort_by_execution_order")
        graph_def = gttc_compile(model.data, model.inputs, model.outputs, 2, "portable", transforms=transforms).graph_def
    data, _ = serialize_onnx(load_graph_bytes(graph_def), model.inputs, model.outputs, quant_format=quant_format)
    return data


def accuracy_feeds(model: Model, calibration: Path) -> list[dict[str, np.ndarray]]:
    """The fixture's reference feed, then every calibration feed."""
    stacks = dict(np.load(calibration))
    count = len(next(iter(stacks.values())))
    return [dict(model.feeds)] + [{name: stack[i] for name, stack in stacks.items()} for i in range(count)]


def accuracy(runner: OnnxRunner, reference: list[np.ndarray], feeds: list[dict], output: str) -> tuple[float, float]:
    """(mean cosine, top-1 agreement) of the runner's first output against float's."""
    got = [runner.run(feed)[output] for feed in feeds]
    cosines = [cosine(r, g) for r, g in zip(reference, got)]
    agree = [float(np.argmax(r) == np.argmax(g)) for r, g in zip(reference, got)]
    return float(np.mean(cosines)), float(np.mean(agree))


def bench_model(model: Model, runs: int, calibration: Path, folder: Path) -> list[str]:
    names = ["float", "ort-int8", "gttc-int8", "gttc-qdq", "gttc-u8u8", "gttc-qop"]
    paths = {name: folder / f"{model.name}.{name}.onnx" for name in names}
    builders: dict[str, Callable[[], None]] = {
        "float": lambda: paths["float"].write_bytes(
            convert_with_tf2onnx(model.data, model.inputs, model.outputs).SerializeToString()),
        "ort-int8": lambda: ort_static_int8(paths["float"], calibration, paths["ort-int8"]),
        "gttc-int8": lambda: paths["gttc-int8"].write_bytes(gttc_int8_onnx(model, calibration)),
        "gttc-qdq": lambda: paths["gttc-qdq"].write_bytes(gttc_int8_onnx(model, calibration, quant_format="qdq")),
        "gttc-u8u8": lambda: paths["gttc-u8u8"].write_bytes(gttc_int8_onnx(model, calibration, symmetric=False)),
        "gttc-qop": lambda: paths["gttc-qop"].write_bytes(
            gttc_int8_onnx(model, calibration, quant_format="qoperator")),
    }
    build_s = {name: timed(builders[name]) for name in names}
    runners = [OnnxRunner(str(path)) for path in paths.values()]
    output = model.outputs[0]
    feeds = accuracy_feeds(model, calibration)
    reference = [runners[0].run(feed)[output] for feed in feeds]
    scores = [accuracy(runner, reference, feeds, output) for runner in runners]
    times = time_interleaved(runners, model.feeds, runs)
    ort_ms = statistics.median(times[1]) * 1e3
    rows = []
    for (name, path), (cos, top1), samples in zip(paths.items(), scores, times):
        ms = statistics.median(samples) * 1e3
        rows.append(f"| {model.name} | {name} | {ms:.2f} | {ms / ort_ms:.2f} | {cos:.6f} | {100 * top1:.0f}% | "
                    f"{path.stat().st_size / 1e6:.1f} | {build_s[name]:.1f} |")
    return rows


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS), help="comma-separated big fixture names")
    parser.add_argument("--runs", type=int, default=30, help="timed runs per model (median reported)")
    parser.add_argument("--calibration-feeds", type=int, default=16, help="seeded random calibration feeds")
    args = parser.parse_args(argv)
    print(f"onnxruntime, 1 thread, {args.runs} interleaved runs, median; accuracy of the first output vs float "
          f"over the reference feed and {args.calibration_feeds} calibration feeds\n")
    print("| model | model file | latency ms | vs ort-int8 | mean cosine vs float | top-1 agreement | MB | build s |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        for model_name in args.models.split(","):
            model = build_big_fixture(model_name.strip())
            calibration = calibration_file(model, args.calibration_feeds, folder)
            for row in bench_model(model, args.runs, calibration, folder):
                print(row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
