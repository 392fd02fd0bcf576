"""TensorFlow as the reference: GTT's own transform and TF's own execution.

Only tests marked `tf` use this module; they call `require_tf()` (or the
`tf` pytest fixture) first, so without TensorFlow they skip cleanly.
"""
from __future__ import annotations

import contextlib
import os
from typing import Iterator, Mapping, Sequence

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def require_tf():
    """Import TensorFlow or skip the calling test."""
    return pytest.importorskip("tensorflow")


@contextlib.contextmanager
def tf1_control_flow_graph(tf) -> Iterator[object]:
    """A fresh default tf.Graph whose conds and while loops build as TF1 control flow (Switch/Merge,
    Enter/Exit frames).  The switch is process-wide, so it is put back as found even when the build
    raises: a test that needs TF2's If/While must not depend on the order tests run in."""
    was_v2 = tf.compat.v1.control_flow_v2_enabled()
    tf.compat.v1.disable_control_flow_v2()
    try:
        graph = tf.Graph()
        with graph.as_default():
            yield graph
    finally:
        if was_v2:
            tf.compat.v1.enable_control_flow_v2()


def gtt_transform(graph_bytes: bytes, inputs: Sequence[str], outputs: Sequence[str], transforms: str) -> bytes:
    """Run TensorFlow's Graph Transform Tool in process and return its output GraphDef bytes."""
    require_tf()
    from tensorflow.python.util._pywrap_transform_graph import TransformGraphWithStringInputs

    return TransformGraphWithStringInputs(
        graph_bytes, ",".join(inputs).encode(), ",".join(outputs).encode(), transforms.encode()
    )


def gtt_deployment_recipe(inputs: Sequence[str], feeds: Mapping[str, np.ndarray]) -> str:
    """GTT's "Optimizing for Deployment" recipe, typed and shaped per input from reference feeds."""
    args = []
    for name in inputs:
        feed = feeds[name]
        dtype = "float" if feed.dtype == np.float32 else str(feed.dtype)
        args += [f"name={name}", f"type_for_name={dtype}", f'shape_for_name="{",".join(map(str, feed.shape))}"']
    return (f"strip_unused_nodes({', '.join(args)}) remove_nodes(op=Identity, op=CheckNumerics) "
            "fold_constants(ignore_errors=true) fold_batch_norms fold_old_batch_norms")


def run_tf(graph_bytes: bytes, feeds: Mapping[str, np.ndarray], outputs: Sequence[str]) -> dict[str, np.ndarray]:
    """Execute a GraphDef in TensorFlow (skipping without it); keys are the output names as given."""
    require_tf()
    from compiler.crosscheck import run_in_tensorflow

    return run_in_tensorflow(graph_bytes, feeds, outputs)
