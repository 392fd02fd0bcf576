"""The CudnnRNN(V2, V3) shape rule against what the runtime kernel (checked against Keras in
tests/runtime/test_kernels_cudnn_rnn.py) produces, for every result and layout."""
from __future__ import annotations

import numpy as np
import pytest

from compiler.analysis import analyze
from compiler.runtime.interpreter import Interpreter
from tests.backends.test_onnx_export import Builder

GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1}


@pytest.mark.parametrize("op_type,mode,dirs,training,time_major", [
    ("CudnnRNN", "lstm", 2, False, True), ("CudnnRNN", "gru", 1, True, True),
    ("CudnnRNNV2", "rnn_tanh", 2, True, True), ("CudnnRNNV3", "lstm", 1, False, False),
    ("CudnnRNNV3", "gru", 2, True, False)])
def test_rule_agrees_with_the_kernel(op_type, mode, dirs, training, time_major):
    steps, batch, inputs, units, layers = 4, 3, 5, 2, 2
    size = dirs * GATES[mode] * units * ((inputs + units + 2) + (layers - 1) * (dirs * units + units + 2))
    b = Builder()
    x_dims = [steps, batch, inputs] if time_major else [batch, steps, inputs]
    h_dims = [layers * dirs, batch, units] if time_major else [batch, layers * dirs, units]
    operands = [b.input("x", x_dims), b.input("h", h_dims), b.input("c", h_dims),
                b.const(np.linspace(-1, 1, size, dtype=np.float32))]
    attrs = {"rnn_mode": mode, "direction": "bidirectional" if dirs == 2 else "unidirectional",
             "is_training": training}
    if op_type == "CudnnRNNV3":
        operands.append(b.const(np.full(batch, steps, np.int32)))
        attrs["time_major"] = time_major
    results = b(op_type, *operands, **attrs)
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal(x_dims).astype(np.float32), "h": np.zeros(h_dims, np.float32),
             "c": np.zeros(h_dims, np.float32)}
    info = analyze(list(b.graph), {})
    got = Interpreter(b.graph).run(feeds, [v.name for v in results])
    for value in results:
        dims, actual = info.shape(value).dims, got[value.name].shape
        assert dims is not None and len(dims) == len(actual), value.name
        assert all(d is None or d == n for d, n in zip(dims, actual)), (value.name, dims, actual)
    assert info.shape(results[0]).dims == got[results[0].name].shape  # output fully known
