"""SparseReshape, SparseFillEmptyRows, DenseToDenseSetOperation and SampleDistortedBoundingBox(V2) in ONNX.

Each graph is built in TF with placeholders (dynamic shapes), exported by gttc and by tf2onnx,
run in onnxruntime on seeded random feeds and compared with TF's session: the sparse and set
results must equal TF's exactly, and gttc must use no more nodes than tf2onnx.  The bounding box
is random, so its ONNX outputs are held to TF's guarantees instead.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import onnx
import pytest

tf = pytest.importorskip("tensorflow")
pytest.importorskip("tf2onnx")

from compiler.backends.onnx import UnsupportedOpError, export_with_report  # noqa: E402
from compiler.backends.onnx.tf2onnx_compare import convert_with_tf2onnx  # noqa: E402
from compiler.frontends.graphdef import load_graph_bytes  # noqa: E402
from compiler.runtime.onnx_runner import run_onnx  # noqa: E402
from tests.runtime.test_kernels_sparse import _check_crop, _sparse_indices, _target  # noqa: E402

pytestmark = pytest.mark.tf
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
v1 = tf.compat.v1
I64 = np.int64


class TfGraph:
    """A TF1 graph: placeholders in, named Identity outputs."""

    def __init__(self, build: Callable[["TfGraph"], Sequence[object]]) -> None:
        self.graph = tf.Graph()
        self.inputs: list[str] = []
        with self.graph.as_default():
            results = build(self)
            self.outputs = [tf.identity(t, name=f"out{i}").op.name for i, t in enumerate(results)]
        self.data = self.graph.as_graph_def().SerializeToString()

    def input(self, name: str, dtype, shape) -> object:
        self.inputs.append(name)
        return v1.placeholder(dtype, shape, name=name)

    def run_tf(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        with v1.Session(graph=self.graph) as session:
            return session.run([f"{o}:0" for o in self.outputs], {f"{k}:0": v for k, v in feeds.items()})

    def export(self) -> tuple[onnx.ModelProto, int]:
        result = export_with_report(load_graph_bytes(self.data), self.inputs, self.outputs)
        onnx.checker.check_model(result.model, full_check=True)
        return result.model, len(result.model.graph.node)

    def tf2onnx_nodes(self) -> int:
        return len(convert_with_tf2onnx(self.data, self.inputs, self.outputs).graph.node)


def run_model(graph: TfGraph, model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    got = run_onnx(model, dict(feeds), graph.outputs)
    return [got[name] for name in graph.outputs]


def assert_equal_to_tf(graph: TfGraph, model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> None:
    for got, want, name in zip(run_model(graph, model, feeds), graph.run_tf(feeds), graph.outputs):
        want = np.asarray(want)
        assert got.dtype == want.dtype and got.shape == want.shape, (name, got.dtype, got.shape, want.shape)
        if want.dtype.kind == "f":
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=name)
        else:
            np.testing.assert_array_equal(got, want, err_msg=name)


def no_more_nodes_than_tf2onnx(graph: TfGraph, ours: int) -> int:
    theirs = graph.tf2onnx_nodes()
    assert ours <= theirs, f"gttc {ours} nodes, tf2onnx {theirs}"
    return theirs


# -- SparseReshape ---------------------------------------------------------------------------------
def _reshape_cases(rng: np.random.Generator, rank_in: int, rank_out: int, count: int) -> list[dict]:
    cases = []
    while len(cases) < count:
        dims = [int(d) for d in rng.integers(1, 6, rank_in)]
        target = _target(rng, dims)
        if len(target) != rank_out:
            continue
        indices = _sparse_indices(rng, dims, int(rng.integers(0, 15)))
        cases.append({"indices": indices, "shape": np.asarray(dims, I64), "target": np.asarray(target, I64)})
    return cases


@pytest.mark.parametrize("known", ["nothing", "target", "both"])
def test_sparse_reshape_equals_tf_with_no_more_nodes_than_tf2onnx(known):
    rng = np.random.default_rng(10)
    cases = _reshape_cases(rng, 3, 2, 12)
    fixed = cases[0]
    fixed["target"] = np.asarray([-1, int(np.prod(fixed["shape"][1:]))], I64)

    def build(g: TfGraph):
        indices = g.input("indices", tf.int64, [None, 3])
        shape = tf.constant(fixed["shape"]) if known == "both" else g.input("shape", tf.int64, [3])
        target = g.input("target", tf.int64, [2]) if known == "nothing" else tf.constant(fixed["target"])
        return list(tf.raw_ops.SparseReshape(input_indices=indices, input_shape=shape, new_shape=target))

    graph = TfGraph(build)
    model, ours = graph.export()
    for case in (cases if known == "nothing" else [fixed]):
        feeds = {"indices": case["indices"]}
        if known != "both":
            feeds["shape"] = case["shape"] if known == "nothing" else fixed["shape"]
        if known == "nothing":
            feeds["target"] = case["target"]
        if known != "nothing":
            feeds["indices"] = _sparse_indices(rng, list(fixed["shape"]), 9)
        assert_equal_to_tf(graph, model, feeds)
    theirs = no_more_nodes_than_tf2onnx(graph, ours)
    assert ours < theirs


def test_sparse_reshape_to_the_same_constant_shape_passes_indices_through():
    def build(g: TfGraph):
        indices = g.input("indices", tf.int64, [None, 2])
        return list(tf.raw_ops.SparseReshape(input_indices=indices, input_shape=tf.constant([3, 2], tf.int64),
                                             new_shape=tf.constant([3, -1], tf.int64)))

    graph = TfGraph(build)
    model, ours = graph.export()
    assert ours <= 2  # the two output Identities at most
    assert_equal_to_tf(graph, model, {"indices": np.asarray([[2, 1], [0, 5]], I64)})


# -- SparseFillEmptyRows ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype, reverse", [(tf.float32, True), (tf.int32, False), (tf.string, True),
                                            (tf.float64, False)])
def test_sparse_fill_empty_rows_equals_tf(dtype, reverse):
    rng = np.random.default_rng(11)

    def build(g: TfGraph):
        indices = g.input("indices", tf.int64, [None, 2])
        values = g.input("values", dtype, [None])
        dense_shape = g.input("dense_shape", tf.int64, [2])
        default = tf.constant("none" if dtype == tf.string else 7, dtype)
        outs = tf.raw_ops.SparseFillEmptyRows(indices=indices, values=values, dense_shape=dense_shape,
                                              default_value=default)
        return list(outs) if reverse else list(outs[:3])

    graph = TfGraph(build)
    model, ours = graph.export()
    for case in range(15):
        dims = [int(rng.integers(1, 8)), int(rng.integers(1, 5))]
        indices = _sparse_indices(rng, dims, int(rng.integers(0, 12)), unsorted=case % 2 == 0)
        drawn = rng.integers(0, 50, len(indices))
        values = np.asarray([f"v{v}".encode() for v in drawn], object) if dtype == tf.string else \
            drawn.astype(dtype.as_numpy_dtype)
        assert_equal_to_tf(graph, model, {"indices": indices, "values": values.reshape(len(indices)),
                                          "dense_shape": np.asarray(dims, I64)})
    if not reverse and dtype != tf.string:  # tf2onnx refuses a read reverse_index_map and string fills
        no_more_nodes_than_tf2onnx(graph, ours)


def test_sparse_fill_empty_rows_of_unknown_rank_and_rank_one():
    rng = np.random.default_rng(12)

    def build(g: TfGraph):
        indices = g.input("indices", tf.int64, [None, None])
        values = g.input("values", tf.float32, [None])
        dense_shape = g.input("dense_shape", tf.int64, [None])
        outs = tf.raw_ops.SparseFillEmptyRows(indices=indices, values=values, dense_shape=dense_shape,
                                              default_value=tf.constant(-1.0))
        return list(outs)

    graph = TfGraph(build)
    model, _ = graph.export()
    for dims in ([6], [4, 3, 2], [5, 1]):
        indices = _sparse_indices(rng, dims, 4)
        assert_equal_to_tf(graph, model, {"indices": indices, "values": rng.standard_normal(len(indices)).astype(
            np.float32), "dense_shape": np.asarray(dims, I64)})


# -- DenseToDenseSetOperation -------------------------------------------------------------------------
def _set_feed(rng: np.random.Generator, shape: tuple[int, ...], dtype) -> np.ndarray:
    drawn = rng.integers(0, 6, shape)
    if dtype == tf.string:
        return np.asarray([f"s{v}".encode() for v in drawn.reshape(-1)], object).reshape(shape)
    return (drawn - (2 if dtype.is_integer and dtype.min < 0 else 0)).astype(dtype.as_numpy_dtype)


def _set_graph(operation: str, dtype, rank: int) -> TfGraph:
    def build(g: TfGraph):
        a = g.input("a", dtype, [None] * rank)
        b = g.input("b", dtype, [None] * rank)
        return list(tf.raw_ops.DenseToDenseSetOperation(set1=a, set2=b, set_operation=operation))

    return TfGraph(build)


@pytest.mark.parametrize("operation", ["a-b", "b-a", "intersection", "union"])
@pytest.mark.parametrize("dtype", [tf.int32, tf.int64, tf.uint8, tf.int16, tf.string])
def test_dense_to_dense_set_operation_equals_tf(operation, dtype):
    rng = np.random.default_rng(13)
    for rank in (2, 3):
        graph = _set_graph(operation, dtype, rank)
        model, ours = graph.export()
        for case in range(6):
            groups = tuple(int(d) for d in rng.integers(0 if case == 5 else 1, 4, rank - 1))
            a = _set_feed(rng, groups + (int(rng.integers(0, 6)),), dtype)
            b = _set_feed(rng, groups + (int(rng.integers(0 if case else 1, 6)),), dtype)
            assert_equal_to_tf(graph, model, {"a": a, "b": b})
        if dtype == tf.int32 and rank == 3:  # tf2onnx casts strings to int64, which fails on them
            theirs = no_more_nodes_than_tf2onnx(graph, ours)
            assert ours < theirs


def test_dense_to_dense_set_operation_of_unknown_rank_is_refused():
    def build(g: TfGraph):
        a = tf.reshape(g.input("a", tf.int32, [None]), g.input("shape", tf.int32, [None]))  # rank unknown
        return list(tf.raw_ops.DenseToDenseSetOperation(set1=a, set2=a, set_operation="union"))

    with pytest.raises(UnsupportedOpError, match="known rank"):
        TfGraph(build).export()


# -- SampleDistortedBoundingBox(V2) -------------------------------------------------------------------
def _bbox_graph(op: str, use_image: bool, covered, boxes_shape, seed: int = 1) -> TfGraph:
    attrs = {"aspect_ratio_range": [0.5, 2.0], "area_range": [0.1, 0.8], "max_attempts": 40, "seed": seed,
             "seed2": 2, "use_image_if_no_bounding_boxes": use_image}

    def build(g: TfGraph):
        size = g.input("image_size", tf.int32, [3])
        boxes = g.input("boxes", tf.float32, boxes_shape)
        if op == "SampleDistortedBoundingBox":
            return list(tf.raw_ops.SampleDistortedBoundingBox(image_size=size, bounding_boxes=boxes,
                                                              min_object_covered=covered, **attrs))
        given = g.input("covered", tf.float32, []) if covered is None else tf.constant(covered, tf.float32)
        return list(tf.raw_ops.SampleDistortedBoundingBoxV2(image_size=size, bounding_boxes=boxes,
                                                            min_object_covered=given, **attrs))

    return TfGraph(build)


def _boxes(rng: np.random.Generator, count: int) -> np.ndarray:
    corners = np.sort(rng.uniform(0, 1, (1, count, 2, 2)), axis=2)
    return corners.transpose(0, 1, 3, 2).reshape(1, count, 4)[..., [0, 2, 1, 3]].astype(np.float32)


@pytest.mark.parametrize("op, use_image, covered, boxes_shape", [
    ("SampleDistortedBoundingBoxV2", False, 0.1, [1, None, 4]),
    ("SampleDistortedBoundingBoxV2", True, None, [1, None, 4]),
    ("SampleDistortedBoundingBox", True, 0.3, [1, 3, 4]),
    ("SampleDistortedBoundingBoxV2", False, 0.0, [1, None, 4]),
])
def test_sample_distorted_bounding_box_keeps_tf_guarantees_in_onnxruntime(op, use_image, covered, boxes_shape):
    rng = np.random.default_rng(14)
    graph = _bbox_graph(op, use_image, covered, boxes_shape)
    model, ours = graph.export()
    wholes = 0
    for case in range(20):
        height, width = (int(v) for v in rng.integers(1, 300, 2))
        count = 3 if boxes_shape[1] == 3 else int(rng.integers(0 if use_image else 1, 4))
        feeds = {"image_size": np.asarray([height, width, 3], np.int32), "boxes": _boxes(rng, count)}
        if covered is None:
            feeds["covered"] = np.asarray(rng.uniform(0, 0.7), np.float32)
        got = run_model(graph, model, feeds)
        want = graph.run_tf(feeds)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape
        wholes += _check_crop(*got, height, width, (0.5, 2.0), (0.1, 0.8))
        np.testing.assert_array_equal(got[0], run_model(graph, model, feeds)[0])  # seeded: repeats
    assert wholes < 10
    if op.endswith("V2"):  # tf2onnx reads V1's min_object_covered attribute as a third input and fails
        no_more_nodes_than_tf2onnx(graph, ours)


def test_sample_distorted_bounding_box_falls_back_to_the_whole_image_in_onnxruntime():
    graph = _bbox_graph("SampleDistortedBoundingBoxV2", False, 1.0, [1, None, 4])
    model, _ = graph.export()
    feeds = {"image_size": np.asarray([40, 60, 3], np.int32), "boxes": np.asarray([[[0.0, 0.0, 1.0, 1.0]]], np.float32)}
    begin, size, box = run_model(graph, model, feeds)  # no crop of at most 0.8 of the image covers all of it
    np.testing.assert_array_equal(begin, [0, 0, 0])
    np.testing.assert_array_equal(size, [40, 60, -1])
    np.testing.assert_array_equal(box, [[[0, 0, 1, 1]]])
