"""Compile time with TensorFlow loaded: gttc's transform_graph, TF's GTT and the protobuf floor, in one process.

    python bench/bench_compile.py [--models keras_densenet121,keras_mobilenet_v2] [--runs 7]
    python bench/bench_compile.py --zoo      # every Keras application tools/make_zoo.py has cached
    python bench/bench_compile.py --faults   # also each tool's minor page faults per run (median)

All three run on the same bytes with GTT's "Optimizing for Deployment" recipe, in a
process that has imported TensorFlow (and so carries its ~400k-object heap), the way a
notebook or a training script calls gttc.  Runs alternate between the tools and the
median is reported.  Unlike bench_o2.py, nothing freezes TF's heap first: whatever
the collector costs during a compile is part of the measurement.

- gttc:  `compiler.api.transform_graph(bytes, inputs, outputs, recipe)` -> bytes
         (signature checks at load and the verifier after every pass included);
- GTT:   `TransformGraphWithStringInputs`, bytes to bytes;
- floor: protobuf parse (gttc's schema), a Python walk reading every node's name, op,
         inputs and each attribute's value kind, and serialize: what any Python tool
         that looks at every node pays.
"""
from __future__ import annotations

import argparse
import gc
import os
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow  # noqa: E402,F401  - the point: its heap is present, as in a notebook

from compiler.api import transform_graph  # noqa: E402
from compiler.proto import graph_pb2  # noqa: E402
from tests.conftest import Model, build_big_fixture, load_model_fixture  # noqa: E402
from tests.oracle import gtt_deployment_recipe, gtt_transform  # noqa: E402

ZOO_CACHE = Path(os.environ.get("GTTC_ZOO_CACHE", ROOT / ".cache" / "zoo"))  # as tools/make_zoo.py reads it
DEFAULT_MODELS = ("keras_mobilenet_v2", "keras_efficientnet_b0", "keras_densenet121", "keras_resnet50",
                  "keras_inception_v3")


def floor(data: bytes) -> bytes:
    """Parse, touch every node's name, op, inputs and attribute kinds, serialize."""
    graph = graph_pb2.GraphDef.FromString(data)
    seen = 0
    for node in graph.node:
        seen += len(node.name) + len(node.op) + len(node.input)
        for key, value in node.attr.items():
            seen += len(key) + len(value.WhichOneof("value") or "")
    assert seen
    return graph.SerializeToString()


def timed(fn: Callable[[], bytes]) -> tuple[float, int]:
    """Seconds and minor page faults of one call: on a VM each fault costs microseconds."""
    gc.collect()
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    start = time.perf_counter()
    fn()
    seconds = time.perf_counter() - start
    return seconds, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults


def load(name: str) -> Model:
    """A zoo model (`app_*`, from tools/make_zoo.py's cache) or a big fixture (built on first use)."""
    if name.startswith("app_"):
        return load_model_fixture(name, ZOO_CACHE)
    return build_big_fixture(name)


def bench_model(name: str, runs: int, show_faults: bool = False) -> str:
    model = load(name)
    recipe = gtt_deployment_recipe(model.inputs, model.feeds)
    tools: dict[str, Callable[[], bytes]] = {
        "gttc": lambda: transform_graph(model.data, model.inputs, model.outputs, recipe),
        "GTT": lambda: gtt_transform(model.data, model.inputs, model.outputs, recipe),
        "floor": lambda: floor(model.data),
    }
    for fn in tools.values():
        fn()  # warm-up
    measured: dict[str, list[tuple[float, int]]] = {tool: [] for tool in tools}
    for _ in range(runs):
        for tool, fn in tools.items():
            measured[tool].append(timed(fn))
    ms = {tool: statistics.median(s for s, _ in m) * 1000.0 for tool, m in measured.items()}
    nodes = len(graph_pb2.GraphDef.FromString(model.data).node)
    row = (f"| {name} | {nodes} | {ms['gttc']:.0f} | {ms['GTT']:.0f} | {ms['floor']:.0f} | "
           f"{ms['gttc'] / ms['GTT']:.2f}x | {ms['gttc'] / ms['floor']:.2f}x |")
    if show_faults:
        row += "".join(f" {statistics.median(f for _, f in measured[tool]):.0f} |" for tool in tools)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS), help="comma-separated big fixture names")
    parser.add_argument("--zoo", action="store_true",
                        help="every Keras application in .cache/zoo (run tools/make_zoo.py --families apps first)")
    parser.add_argument("--runs", type=int, default=7, help="timed runs per tool and model (median reported)")
    parser.add_argument("--faults", action="store_true", help="add each tool's median minor page faults per run")
    args = parser.parse_args(argv)
    names = sorted(p.stem for p in ZOO_CACHE.glob("app_*.pb")) if args.zoo else args.models.split(",")
    if not names:
        parser.error(f"no Keras applications cached in {ZOO_CACHE}: run tools/make_zoo.py --families apps")
    print(f"runs: {args.runs}, interleaved, median; TensorFlow {tensorflow.__version__} imported, heap not frozen\n")
    header = "| model | nodes | gttc ms | GTT ms | floor ms | gttc / GTT | gttc / floor |"
    rule = "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
    if args.faults:
        header += " gttc faults | GTT faults | floor faults |"
        rule += " ---: | ---: | ---: |"
    print(header)
    print(rule)
    for name in names:
        print(bench_model(name.strip(), args.runs, args.faults), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
