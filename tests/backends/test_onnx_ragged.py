"""Ragged ops exported to ONNX from real tf.compat.v1 GraphDefs with run-time row partitions: outputs
against TF (1e-4 for floats, exact for integers) on seeded random ragged inputs, node counts against
tf2onnx's on the same GraphDef, and the variant pair refused by name."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

from compiler.backends.onnx import export_with_report
from compiler.backends.onnx.tf2onnx_compare import convert_with_tf2onnx
from compiler.frontends.graphdef import load_graph_bytes
from compiler.runtime.onnx_runner import run_onnx
from tests.oracle import run_tf

tf = pytest.importorskip("tensorflow")
pytestmark = pytest.mark.tf

RTOL = 1e-4


def frozen(build) -> tuple[bytes, list[str], list[str]]:
    """A tf.compat.v1 graph: `build` makes placeholders and returns {output name: tensor}."""
    with tf.Graph().as_default() as g:
        inputs, outputs = build()
        for name, tensor in outputs.items():
            tf.identity(tensor, name=name)
    return g.as_graph_def().SerializeToString(), inputs, list(outputs)


def assert_same(got: np.ndarray, want: np.ndarray, what: str) -> float:
    assert got.shape == want.shape and got.dtype == want.dtype, (what, got.shape, want.shape, got.dtype, want.dtype)
    if want.dtype.kind == "f":
        scale = max(float(np.max(np.abs(want), initial=0.0)), 1.0)
        err = float(np.max(np.abs(got - want), initial=0.0)) / scale
        assert err <= RTOL, (what, err)
        return err
    np.testing.assert_array_equal(got, want, err_msg=what)
    return 0.0


def export_and_compare(data: bytes, inputs: list[str], outputs: list[str], feeds_list: list[dict],
                       tf2onnx_converts: bool = True) -> tuple[int, int | None]:
    """Export, check, run every feed against TF; returns (gttc nodes, tf2onnx nodes)."""
    result = export_with_report(load_graph_bytes(data), inputs, outputs)
    onnx.checker.check_model(result.model, full_check=True)
    for feeds in feeds_list:
        want = run_tf(data, feeds, outputs)
        got = run_onnx(result.model, feeds, outputs)
        for name in outputs:
            assert_same(np.asarray(got[name]), want[name], name)
    theirs = None
    if tf2onnx_converts:
        theirs = len(convert_with_tf2onnx(data, inputs, outputs).graph.node)
        assert result.report.node_count <= theirs, (result.report.format() if hasattr(result.report, "format")
                                                    else result.report.op_counts, theirs)
    return result.report.node_count, theirs


def random_lengths(rng: np.random.Generator, rows: int, longest: int = 5) -> np.ndarray:
    return rng.integers(0, longest + 1, rows).astype(np.int64)


def splits_of(lengths: np.ndarray, dtype=np.int64) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(lengths)]).astype(dtype)


# ---------------------------------------------------------------- RaggedRange
@pytest.mark.parametrize("dtype, scalar_delta", [(np.float32, True), (np.int32, False), (np.int64, True),
                                                 (np.float64, False)])
def test_ragged_range(dtype, scalar_delta):
    tf_type = tf.as_dtype(dtype)

    def build():
        starts = tf.compat.v1.placeholder(tf_type, [None], "starts")
        limits = tf.compat.v1.placeholder(tf_type, [None], "limits")
        deltas = tf.compat.v1.placeholder(tf_type, [] if scalar_delta else [None], "deltas")
        splits, values = tf.raw_ops.RaggedRange(starts=starts, limits=limits, deltas=deltas,
                                                Tsplits=tf.int32 if dtype == np.int32 else tf.int64)
        return ["starts", "limits", "deltas"], {"splits": splits, "values": values}

    data, inputs, outputs = frozen(build)
    rng = np.random.default_rng(1)
    feeds = []
    for rows in (4, 1, 0, 7):
        cast = (lambda a: a.astype(dtype)) if np.dtype(dtype).kind == "f" else (lambda a: np.round(a).astype(dtype))
        starts, limits = cast(rng.uniform(-8, 8, rows)), cast(rng.uniform(-8, 8, rows))
        shape = () if scalar_delta else (rows,)
        deltas = cast(rng.choice([-1, 1], shape) * rng.uniform(0.6, 3, shape))
        feeds.append({"starts": starts, "limits": limits, "deltas": deltas})
    ours, theirs = export_and_compare(data, inputs, outputs, feeds)
    assert ours < theirs


def test_ragged_range_of_scalars():
    def build():
        limit = tf.compat.v1.placeholder(tf.int64, [], "limit")
        splits, values = tf.raw_ops.RaggedRange(starts=tf.constant(2, tf.int64), limits=limit,
                                                deltas=tf.constant(3, tf.int64))
        return ["limit"], {"splits": splits, "values": values}

    data, inputs, outputs = frozen(build)
    export_and_compare(data, inputs, outputs, [{"limit": np.int64(v)} for v in (20, 2, -5)], tf2onnx_converts=False)


# ---------------------------------------------------------------- RaggedTensorToTensor
def _to_tensor_graph(ragged_rank: int, inner: tuple[int, ...], shape, default_shape=(), split_type=tf.int64):
    def build():
        values = tf.compat.v1.placeholder(tf.float32, [None, *inner], "values")
        names, nested = ["values"], []
        for level in range(ragged_rank):
            nested.append(tf.compat.v1.placeholder(split_type, [None], f"splits{level}"))
            names.append(f"splits{level}")
        default = tf.constant(np.full(default_shape, 7.5, np.float32))
        out = tf.raw_ops.RaggedTensorToTensor(shape=tf.constant(shape, tf.int64), values=values,
                                              default_value=default, row_partition_tensors=nested,
                                              row_partition_types=["ROW_SPLITS"] * ragged_rank)
        return names, {"dense": out}

    return frozen(build)


def _nested_feeds(rng, ragged_rank, inner, rows, split_type=np.int64):
    feeds, items = {}, rows
    for level in range(ragged_rank):
        lengths = random_lengths(rng, items, 4)
        feeds[f"splits{level}"] = splits_of(lengths, split_type)
        items = int(lengths.sum())
    feeds["values"] = rng.standard_normal((items, *inner)).astype(np.float32)
    return feeds


@pytest.mark.parametrize("ragged_rank, inner, shape, default_shape", [
    (1, (), -1, ()),
    (1, (), [-1, -1], ()),
    (1, (3,), [-1, -1, 3], (3,)),
    (2, (), -1, ()),
    (1, (), [3, 2], ()),            # truncated rows and columns
    (2, (2,), [-1, 6, 2, -1], (1,)),  # wider and truncated levels
])
def test_ragged_tensor_to_tensor(ragged_rank, inner, shape, default_shape):
    data, inputs, outputs = _to_tensor_graph(ragged_rank, inner, shape, default_shape)
    rng = np.random.default_rng(ragged_rank * 10 + len(inner))
    feeds = [_nested_feeds(rng, ragged_rank, inner, rows) for rows in (5, 1, 3, 0)]
    export_and_compare(data, inputs, outputs, feeds, tf2onnx_converts=True)


def test_value_rowids_partitions():
    def build():
        values = tf.compat.v1.placeholder(tf.float32, [None], "values")
        nrows = tf.compat.v1.placeholder(tf.int32, [], "nrows")
        rowids = tf.compat.v1.placeholder(tf.int32, [None], "rowids")
        out = tf.raw_ops.RaggedTensorToTensor(shape=tf.constant([-1, -1], tf.int32), values=values,
                                              default_value=tf.constant(-1.0), row_partition_tensors=[nrows, rowids],
                                              row_partition_types=["FIRST_DIM_SIZE", "VALUE_ROWIDS"])
        return ["values", "nrows", "rowids"], {"dense": out}

    data, inputs, outputs = frozen(build)
    rng = np.random.default_rng(5)
    feeds = []
    for rows in (4, 6, 1):
        lengths = random_lengths(rng, rows)
        feeds.append({"values": rng.standard_normal(int(lengths.sum())).astype(np.float32),
                      "nrows": np.int32(rows + 1), "rowids": np.repeat(np.arange(rows), lengths).astype(np.int32)})
    export_and_compare(data, inputs, outputs, feeds)


def test_from_row_lengths_to_tensor_like_keras_text_models():
    def build():
        values = tf.compat.v1.placeholder(tf.int64, [None], "tokens")
        lengths = tf.compat.v1.placeholder(tf.int64, [None], "lengths")
        rt = tf.RaggedTensor.from_row_lengths(values, lengths, validate=False)
        return ["tokens", "lengths"], {"padded": rt.to_tensor(default_value=0)}

    data, inputs, outputs = frozen(build)
    rng = np.random.default_rng(9)
    feeds = []
    for rows in (3, 8):
        lengths = random_lengths(rng, rows, 6)
        feeds.append({"tokens": rng.integers(1, 1000, int(lengths.sum())), "lengths": lengths})
    ours, theirs = export_and_compare(data, inputs, outputs, feeds)
    assert ours < theirs


# ---------------------------------------------------------------- RaggedTensorToSparse
@pytest.mark.parametrize("ragged_rank, inner", [(1, ()), (2, ()), (1, (2, 3))])
def test_ragged_tensor_to_sparse(ragged_rank, inner):
    def build():
        values = tf.compat.v1.placeholder(tf.float32, [None, *inner], "values")
        nested = [tf.compat.v1.placeholder(tf.int64, [None], f"splits{i}") for i in range(ragged_rank)]
        indices, sparse_values, dense_shape = tf.raw_ops.RaggedTensorToSparse(rt_nested_splits=nested,
                                                                             rt_dense_values=values)
        return ["values"] + [f"splits{i}" for i in range(ragged_rank)], {
            "indices": indices, "sparse_values": sparse_values, "dense_shape": dense_shape}

    data, inputs, outputs = frozen(build)
    rng = np.random.default_rng(20 + ragged_rank)
    feeds = [_nested_feeds(rng, ragged_rank, inner, rows) for rows in (4, 1, 6)]
    export_and_compare(data, inputs, outputs, feeds, tf2onnx_converts=not inner)


# ---------------------------------------------------------------- RaggedGather
@pytest.mark.parametrize("ragged_rank, inner, index_shape, split_type", [
    (1, (), [None], tf.int64), (1, (), [None], tf.int32), (2, (3,), [None], tf.int64),
    (1, (), [2, 3], tf.int64), (2, (), [], tf.int64)])
def test_ragged_gather(ragged_rank, inner, index_shape, split_type):
    def build():
        values = tf.compat.v1.placeholder(tf.float32, [None, *inner], "values")
        nested = [tf.compat.v1.placeholder(split_type, [None], f"splits{i}") for i in range(ragged_rank)]
        indices = tf.compat.v1.placeholder(tf.int32, index_shape, "indices")
        out_rank = len(index_shape) - 1 + ragged_rank
        *splits, gathered = tf.raw_ops.RaggedGather(params_nested_splits=nested, params_dense_values=values,
                                                    indices=indices, OUTPUT_RAGGED_RANK=out_rank)
        outs = {f"out_splits{i}": s for i, s in enumerate(splits[0])}
        outs["out_values"] = gathered
        return ["values", "indices"] + [f"splits{i}" for i in range(ragged_rank)], outs

    data, inputs, outputs = frozen(build)
    rng = np.random.default_rng(30 + ragged_rank)
    np_split = np.int32 if split_type == tf.int32 else np.int64
    feeds = []
    for rows in (5, 2, 7):
        feed = _nested_feeds(rng, ragged_rank, inner, rows, np_split)
        shape = [d if d is not None else 4 for d in index_shape]
        feed["indices"] = rng.integers(0, rows, shape).astype(np.int32)
        feeds.append(feed)
    simple = ragged_rank == 1 and len(index_shape) == 1 and not inner
    export_and_compare(data, inputs, outputs, feeds, tf2onnx_converts=simple)


# ---------------------------------------------------------------- variants
def test_map_fn_over_ragged_exports_and_matches_tf():
    """Two maps over one ragged tensor (to a scalar per row, to a ragged row densified after):
    once refused ("no lowering for RaggedTensorToVariant"), now rewritten into dense loop state
    (ragged_maps.py), including no rows and empty rows."""
    from tests.runtime.test_kernels_ragged import map_fn_over_ragged_graph_def

    graph_def = map_fn_over_ragged_graph_def()
    result = export_with_report(load_graph_bytes(graph_def.SerializeToString()), ["values", "lengths"], ["sums", "dense"])
    onnx.checker.check_model(result.model, full_check=True)
    assert result.report.stats["ragged_map_inputs"] == 2 and result.report.stats["ragged_map_results"] == 1
    rng = np.random.default_rng(11)
    for lengths in ([2, 0, 3, 1], [0], [5, 5], []):
        feeds = {"lengths": np.asarray(lengths, np.int64)}
        feeds["values"] = rng.standard_normal(int(feeds["lengths"].sum())).astype(np.float32)
        want = run_tf(graph_def.SerializeToString(), feeds, ["sums", "dense"])
        got = run_onnx(result.model, feeds, ["sums", "dense"])
        np.testing.assert_allclose(got["sums"], want["sums"], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got["dense"], want["dense"], rtol=1e-6)
        assert got["dense"].shape == want["dense"].shape