#!/usr/bin/env python
"""onnxruntime's 1-D Conv against the same conv as a 2-D one over a unit height, and how each rounds.

Why gttc exports Keras 1-D layers as 2-D windows (compiler/backends/onnx/height_squeezes.py):
this times Conv + Relu both ways (1 thread, default optimization level, runs interleaved,
median) and reports each form's largest difference from a float64 reference and from the other.

    python bench/bench_conv1d_forms.py [--runs N]
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

# (input channels, width, kernel, output channels, stride)
CASES = ((4, 128, 3, 16, 1), (16, 128, 3, 32, 1), (64, 256, 3, 64, 1), (1, 22050, 256, 1, 2),
         (1, 4096, 256, 36, 256), (128, 64, 5, 128, 1))


def _session(weights: np.ndarray, stride: int, two_d: bool, shape: list[int]) -> ort.InferenceSession:
    if two_d:
        weights, shape = weights[:, :, None], shape[:2] + [1] + shape[2:]
    node_conv = helper.make_node("Conv", ["x", "w"], ["h"], strides=[1, stride] if two_d else [stride])
    graph = helper.make_graph([node_conv, helper.make_node("Relu", ["h"], ["y"])], "conv",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(weights, "w")])
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _reference(x: np.ndarray, weights: np.ndarray, stride: int) -> np.ndarray:
    """Conv + Relu in float64."""
    out, _, k = weights.shape
    width = (x.shape[2] - k) // stride + 1
    taps = np.lib.stride_tricks.sliding_window_view(x[0].astype(np.float64), k, axis=1)[:, ::stride][:, :width]
    return np.maximum(np.einsum("cwk,ock->ow", taps, weights.astype(np.float64)), 0)[None]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=60)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print("| C_in, width, kernel, C_out, stride | 1-D us | 2-D us | 1-D vs float64 | 2-D vs float64 | 1-D vs 2-D |")
    print("|---|---:|---:|---:|---:|---:|")
    for c, width, k, out, stride in CASES:
        weights = rng.standard_normal((out, c, k)).astype(np.float32)
        x = rng.standard_normal((1, c, width)).astype(np.float32)
        one, two = _session(weights, stride, False, [1, c, width]), _session(weights, stride, True, [1, c, width])
        times: dict[str, list[float]] = {"1d": [], "2d": []}
        for _ in range(args.runs):
            for key, session, feed in (("1d", one, x), ("2d", two, x[:, :, None])):
                start = time.perf_counter()
                session.run(None, {"x": feed})
                times[key].append(time.perf_counter() - start)
        y1 = one.run(None, {"x": x})[0]
        y2 = two.run(None, {"x": x[:, :, None]})[0][:, :, 0]
        ref = _reference(x, weights, stride)
        scale = np.abs(ref).max()
        print(f"| {c}, {width}, {k}, {out}, {stride} | {statistics.median(times['1d']) * 1e6:.1f} | "
              f"{statistics.median(times['2d']) * 1e6:.1f} | {np.abs(y1 - ref).max() / scale:.1e} | "
              f"{np.abs(y2 - ref).max() / scale:.1e} | {np.abs(y1 - y2).max() / scale:.1e} |")


if __name__ == "__main__":
    main()
