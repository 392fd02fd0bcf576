"""repair_weight_ranges: all-zero weights stored by quantize_weights must not dequantize to NaN in TF."""
from __future__ import annotations

import numpy as np
import pytest

from compiler.api import compile as gttc_compile
from compiler.api import transform_graph
from tests.oracle import require_tf, run_tf

pytestmark = pytest.mark.tf


def zero_bias_graph() -> bytes:
    """x + b with b a 1024-element all-zero constant (an untrained bias), built by TF."""
    tf = require_tf()
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [1, 1024], name="x")
        tf.identity(x + tf.constant(np.zeros(1024, np.float32)), name="out")
    return graph.as_graph_def().SerializeToString()


def test_quantize_weights_alone_gives_nan_in_tf_and_the_repair_fixes_it() -> None:
    data = zero_bias_graph()
    feeds = {"x": np.random.default_rng(7).normal(size=(1, 1024)).astype(np.float32)}
    gtt_identical = transform_graph(data, ["x"], ["out"], "quantize_weights")
    assert np.isnan(run_tf(gtt_identical, feeds, ["out"])["out"]).all()
    small = gttc_compile(data, ["x"], ["out"], 0, "mobile-small")
    assert "repaired 1 eight-bit constants whose range step is denormal" in small.report.format()
    np.testing.assert_array_equal(run_tf(small.graph_def, feeds, ["out"])["out"], feeds["x"])
