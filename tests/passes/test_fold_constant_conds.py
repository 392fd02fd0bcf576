"""fold_constant_conds on a TF1 graph built here: batch norm and dropout behind `cond(training)`
with `training` frozen to a Const, as `tf.compat.v1` training code leaves an inference graph.

At -O2 no Switch or Merge is left, the inference batch norm folds into the conv
(so no batch-norm op is left either), and TF runs the result within 1e-5 of
the original graph.  The tidy-up passes and the graph's reachable ops decide
how much shrinks; the exact counts are pinned by the lit files.
"""
from __future__ import annotations

import numpy as np
import pytest

from compiler.backends.graphdef import emit_graphdef_bytes
from compiler.frontends.graphdef import load_graph_bytes
from compiler.passes import run_pipeline
from compiler.passes.levels import preset_pipeline
from tests.oracle import run_tf, tf1_control_flow_graph

tf = pytest.importorskip("tensorflow")
pytestmark = pytest.mark.tf

CONTROL_FLOW = {"Switch", "Merge"}
BATCH_NORMS = {"FusedBatchNorm", "FusedBatchNormV3"}


def _frozen_training_graph(training: bool) -> bytes:
    """conv -> cond(training, batch-stats BN, moving-stats BN) -> relu -> cond(training, dropout, identity)."""
    rng = np.random.RandomState(7)
    with tf1_control_flow_graph(tf) as graph:
        x = tf.compat.v1.placeholder(tf.float32, [2, 6, 6, 3], name="input")
        flag = tf.constant(training, name="training")
        w = tf.constant(rng.normal(0, 0.5, (3, 3, 3, 4)).astype(np.float32))
        conv = tf.nn.conv2d(x, w, [1, 1, 1, 1], "SAME")
        scale, offset = (tf.constant(rng.uniform(0.5, 1.5, 4).astype(np.float32)) for _ in range(2))
        mean = tf.constant(rng.normal(0, 0.3, 4).astype(np.float32))
        var = tf.constant(rng.uniform(0.5, 2.0, 4).astype(np.float32))

        def batch_stats():
            return tf.compat.v1.nn.fused_batch_norm(conv, scale, offset, is_training=True)[0]

        def moving_stats():
            return tf.compat.v1.nn.fused_batch_norm(conv, scale, offset, mean, var, is_training=False)[0]

        normed = tf.compat.v1.cond(flag, batch_stats, moving_stats, name="bn_cond")
        act = tf.nn.relu(normed)
        dropped = tf.compat.v1.cond(flag, lambda: tf.nn.dropout(act, rate=0.5, seed=1),
                                    lambda: tf.identity(act), name="dropout_cond")
        tf.identity(dropped, name="output")
    return graph.as_graph_def().SerializeToString()


def _op_types(data: bytes) -> set[str]:
    return {op.type for op in load_graph_bytes(data)}


def test_o2_removes_frozen_training_conds_and_folds_the_batch_norm() -> None:
    original = _frozen_training_graph(training=False)
    assert CONTROL_FLOW <= _op_types(original)
    specs, _ = preset_pipeline(2)
    report = run_pipeline(load_graph_bytes(original), specs, ["input"], ["output"])
    optimized = emit_graphdef_bytes(report.graph)
    left = _op_types(optimized)
    assert not left & CONTROL_FLOW, left
    assert not left & BATCH_NORMS, left
    notes = [note for record in report.records if record.label.startswith("fold_constant_conds")
             for note in record.notes]
    assert notes == ["'training' is always False: folded 12 Switch ops, resolved 2 Merge ops, "
                     "removed 13 ops of the dead branch"], notes
    feeds = {"input": np.random.RandomState(3).uniform(-1, 1, (2, 6, 6, 3)).astype(np.float32)}
    want = run_tf(original, feeds, ["output"])["output"]
    got = run_tf(optimized, feeds, ["output"])["output"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def test_a_true_flag_keeps_the_training_branch() -> None:
    """With training=True the live side is the batch-statistics BN and the dropout.  TF's dropout
    mask is random, so only the structure is checked: no cond left, the BN kept (it cannot fold)."""
    original = _frozen_training_graph(training=True)
    specs, _ = preset_pipeline(2)
    report = run_pipeline(load_graph_bytes(original), specs, ["input"], ["output"])
    left = _op_types(emit_graphdef_bytes(report.graph))
    assert not left & CONTROL_FLOW, left
    assert left & BATCH_NORMS, left  # batch statistics cannot fold
