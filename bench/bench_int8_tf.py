"""Eight-bit graphs in TensorFlow: gttc's against GTT's and against float, latency and accuracy.

    python bench/bench_int8_tf.py [--models keras_mobilenet_v2,keras_inception_v3,keras_resnet50]
                                  [--runs 15] [--calibration-feeds 16]

Per model, four GraphDefs run in TensorFlow sessions (one thread each, so the
numbers compare kernels rather than scheduling), interleaved run by run, and
the median latency is reported:

- float:  gttc -O2 (the float baseline every eight-bit graph is judged against);
- GTT:    GTT's deployment recipe + `quantize_weights quantize_nodes
          strip_unused_nodes sort_by_execution_order` (its eight-bit recipe);
- gttc:   `-O2 --target=mobile-int8` with dynamic ranges (RequantizationRange kept);
- gttc-cal: the same with ranges calibrated on seeded random feeds and frozen.

Accuracy is the cosine of each eight-bit graph's logits (the first output)
against float's on the fixture's reference feed, which is not one of the
calibration feeds.  A graph TF cannot run is reported as failed with TF's error.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from compiler.api import compile as gttc_compile  # noqa: E402
from tests.conftest import Model, build_big_fixture  # noqa: E402
from tests.oracle import gtt_deployment_recipe, gtt_transform  # noqa: E402

DEFAULT_MODELS = ("keras_mobilenet_v2", "keras_inception_v3", "keras_resnet50")
GTT_EIGHT_BIT = " quantize_weights quantize_nodes strip_unused_nodes sort_by_execution_order"


def calibration_file(model: Model, count: int, folder: Path) -> Path:
    """`count` seeded feeds shaped and ranged like the fixture's own feed, stacked along a new axis 0."""
    rng = np.random.default_rng(1234)
    arrays = {}
    for name, feed in model.feeds.items():
        low, high = float(feed.min()), float(feed.max())
        arrays[name] = rng.uniform(low, high, size=(count,) + feed.shape).astype(feed.dtype)
    path = folder / f"{model.name}_calibration.npz"
    np.savez(path, **arrays)
    return path


def build_graphs(model: Model, calibration: Path) -> dict[str, tuple[bytes, float]]:
    """Each contender's GraphDef bytes and the seconds it took to build."""
    recipe = gtt_deployment_recipe(model.inputs, model.feeds)
    builders = {
        "float": lambda: gttc_compile(model.data, model.inputs, model.outputs, 2).graph_def,
        "GTT": lambda: gtt_transform(model.data, model.inputs, model.outputs, recipe + GTT_EIGHT_BIT),
        "gttc": lambda: gttc_compile(model.data, model.inputs, model.outputs, 2, "mobile-int8").graph_def,
        "gttc-cal": lambda: gttc_compile(model.data, model.inputs, model.outputs, 2, "mobile-int8",
                                         calibration=str(calibration)).graph_def,
    }
    graphs = {}
    for name, build in builders.items():
        start = time.perf_counter()
        data = build()
        graphs[name] = (data, time.perf_counter() - start)
    return graphs


def tf_session(data: bytes):
    import tensorflow as tf
    from tensorflow.core.framework import graph_pb2

    graph = tf.Graph()
    with graph.as_default():
        tf.graph_util.import_graph_def(graph_pb2.GraphDef.FromString(data), name="")
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
    return tf.compat.v1.Session(graph=graph, config=config)


def count_ops(data: bytes, op_type: str) -> int:
    from compiler.proto import graph_pb2

    return sum(1 for node in graph_pb2.GraphDef.FromString(data).node if node.op == op_type)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.ravel().astype(np.float64), b.ravel().astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def bench_model(model: Model, runs: int, calibration: Path) -> list[str]:
    graphs = build_graphs(model, calibration)
    feeds = {f"{name}:0": value for name, value in model.feeds.items()}
    fetch = f"{model.outputs[0]}:0"
    sessions, results, errors = {}, {}, {}
    for name, (data, _) in graphs.items():
        sessions[name] = tf_session(data)
        try:
            results[name] = sessions[name].run(fetch, feeds)
        except Exception as err:  # TF's own failure is the measurement here
            errors[name] = str(err).splitlines()[0][:160]
    times: dict[str, list[float]] = {name: [] for name in results}
    for _ in range(runs):
        for name in results:
            start = time.perf_counter()
            sessions[name].run(fetch, feeds)
            times[name].append(time.perf_counter() - start)
    float_ms = statistics.median(times["float"]) * 1000
    rows = []
    for name, (data, build_s) in graphs.items():
        if name in errors:
            rows.append(f"| {model.name} | {name} | failed in TF: {errors[name]} | | | | |")
            continue
        ms = statistics.median(times[name]) * 1000
        rows.append(f"| {model.name} | {name} | {ms:.1f} | {ms / float_ms:.2f} | "
                    f"{cosine(results['float'], results[name]):.6f} | {count_ops(data, 'RequantizationRange')} | "
                    f"{len(data) / 1e6:.1f} | {build_s:.1f} |")
    for session in sessions.values():
        session.close()
    return rows


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS), help="comma-separated big fixture names")
    parser.add_argument("--runs", type=int, default=15, help="timed runs per graph (median reported)")
    parser.add_argument("--calibration-feeds", type=int, default=16, help="random feeds to calibrate gttc-cal on")
    args = parser.parse_args(argv)
    print(f"TF, 1 thread, {args.runs} interleaved runs, median; cosine of logits vs float on the reference feed\n")
    print("| model | graph | latency ms | vs float | cosine vs float | RequantizationRange | MB | build s |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory() as folder:
        for name in args.models.split(","):
            model = build_big_fixture(name.strip())
            calibration = calibration_file(model, args.calibration_feeds, Path(folder))
            for row in bench_model(model, args.runs, calibration):
                print(row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
