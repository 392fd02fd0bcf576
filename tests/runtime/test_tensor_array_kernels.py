"""TF1 TensorArray kernels (runtime/kernels/tensor_array.py) against TF's own session.

Each graph is built with control flow v1 (Switch/Merge frames, TensorArrayV3: what tf.map_fn,
tf.scan, tf.foldl and a TensorArray in a while_loop freeze to), run by TF, and by gttc's
interpreter as loaded and after -O2.  tests/backends/test_onnx_tensor_arrays.py exports the same
graphs to ONNX."""
from __future__ import annotations

from typing import Callable

import numpy as np
import pytest

from compiler.frontends.graphdef import load_graph_bytes
from compiler.passes import run_pipeline
from compiler.passes.levels import preset_pipeline
from compiler.runtime.interpreter import run_graph
from compiler.runtime.op_eval import InterpreterError
from tests.oracle import tf1_control_flow_graph

pytestmark = pytest.mark.tf

KERNEL_OPS = ("TensorArrayV3", "TensorArrayWriteV3", "TensorArrayScatterV3", "TensorArraySplitV3",
              "TensorArrayReadV3", "TensorArrayGatherV3", "TensorArrayConcatV3", "TensorArraySizeV3",
              "TensorArrayCloseV3")


def _map_fn(tf, x):
    w = tf.constant(np.random.RandomState(1).standard_normal((4, 4)).astype(np.float32))
    return tf.map_fn(lambda row: tf.nn.relu(tf.linalg.matvec(w, row)) * 2.0, x)


def _scan(tf, x):
    w = tf.constant(np.random.RandomState(2).standard_normal((4, 4)).astype(np.float32) * 0.5)
    steps = tf.transpose(tf.reshape(x, [3, 2, 2]), [1, 0, 2])  # 2 steps of [3, 2]
    return tf.scan(lambda h, e: tf.tanh(tf.matmul(tf.concat([h, e], 1), w[:, :2])), steps,
                   initializer=tf.zeros([3, 2]))


def _foldl(tf, x):
    return tf.foldl(lambda acc, row: acc * 0.5 + tf.sin(row), x, initializer=tf.zeros([4]))


def _written_in_a_while_loop(tf, x):
    array = tf.TensorArray(tf.float32, size=5, clear_after_read=False)  # read(2), then stack()

    def body(i, array, h):
        h = tf.nn.relu(h - 0.1 * tf.cast(i, tf.float32))
        return i + 1, array.write(i, h), h

    _, array, _ = tf.compat.v1.while_loop(lambda i, *_: i < 5, body, [tf.constant(0), array, x])
    return tf.reduce_sum(array.stack(), 0) + tf.cast(array.size(), tf.float32) + array.read(2)


def _partly_written(tf, x):
    """Items never written read as zeros (the element shape is known)."""
    array = tf.TensorArray(tf.float32, size=4, element_shape=[3, 4])
    array = array.write(1, x * 2.0).write(3, x)
    return array.stack()


GRAPHS = {"map_fn": _map_fn, "scan": _scan, "foldl": _foldl, "while_loop": _written_in_a_while_loop,
          "partly_written": _partly_written}


def _tf1_built(tf, build: Callable):
    """The TF graph `out = build(tf, x)`, x: float32[3, 4], with control flow v1."""
    with tf1_control_flow_graph(tf) as graph:
        x = tf.compat.v1.placeholder(tf.float32, [3, 4], name="x")
        tf.identity(build(tf, x), name="out")
    return graph


def _tf1_graph(tf, build: Callable) -> tuple[bytes, np.ndarray, np.ndarray]:
    """(GraphDef bytes, a feed, TF's output) for `_tf1_built(tf, build)`."""
    graph = _tf1_built(tf, build)
    feed = np.random.RandomState(0).uniform(-1, 1, (3, 4)).astype(np.float32)
    with tf.compat.v1.Session(graph=graph) as session:
        want = session.run("out:0", {"x:0": feed})
    return graph.as_graph_def().SerializeToString(), feed, want


def _o2(data: bytes):
    specs, _ = preset_pipeline(2)
    return run_pipeline(load_graph_bytes(data), specs, ["x"], ["out"]).graph


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_the_runtime_runs_tensor_arrays_as_tf_does(name: str) -> None:
    tf = pytest.importorskip("tensorflow")
    data, feed, want = _tf1_graph(tf, GRAPHS[name])
    for graph in (load_graph_bytes(data), _o2(data)):
        got = run_graph(graph, {"x": feed}, ["out"])["out"]
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def _grown(tf, x):
    """dynamic_size: the array grows with each write (and its size is asked at run time)."""
    array = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
    _, array = tf.compat.v1.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a.write(i, x[i] * 2.0)),
                                       [tf.constant(0), array])
    return array.stack() + tf.cast(array.size(), tf.float32)


def _split_concat_closed(tf, x):
    array = tf.TensorArray(tf.float32, size=2, infer_shape=False, clear_after_read=False).split(x, [1, 2])
    result = array.concat() * 2.0 + array.read(1)[0]
    with tf.control_dependencies([result]):
        closed = array.close()
    with tf.control_dependencies([closed]):
        return tf.identity(result)


def test_a_growing_array_runs_as_tf_does() -> None:
    tf = pytest.importorskip("tensorflow")
    data, feed, want = _tf1_graph(tf, _grown)
    np.testing.assert_allclose(run_graph(load_graph_bytes(data), {"x": feed}, ["out"])["out"], want, rtol=1e-6)


def test_split_concat_and_close_run_as_tf_does() -> None:
    tf = pytest.importorskip("tensorflow")
    data, feed, want = _tf1_graph(tf, _split_concat_closed)
    np.testing.assert_allclose(run_graph(load_graph_bytes(data), {"x": feed}, ["out"])["out"], want, rtol=1e-6)


def test_a_second_write_to_one_index_fails_as_in_tf() -> None:
    tf = pytest.importorskip("tensorflow")

    def twice(tf, x):
        return tf.TensorArray(tf.float32, size=2).write(0, x).write(0, x).stack()

    graph = _tf1_built(tf, twice)
    feed = np.zeros((3, 4), np.float32)
    with tf.compat.v1.Session(graph=graph) as session, pytest.raises(tf.errors.InvalidArgumentError):
        session.run("out:0", {"x:0": feed})
    with pytest.raises(InterpreterError, match="already been written"):
        run_graph(load_graph_bytes(graph.as_graph_def().SerializeToString()), {"x": feed}, ["out"])


def test_these_graphs_run_every_tensor_array_kernel() -> None:
    tf = pytest.importorskip("tensorflow")
    seen = set()
    for build in [*GRAPHS.values(), _grown, _split_concat_closed]:
        data, _, _ = _tf1_graph(tf, build)
        seen |= {op.type for op in load_graph_bytes(data)}
    assert set(KERNEL_OPS) <= seen, sorted(set(KERNEL_OPS) - seen)
