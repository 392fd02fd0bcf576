"""Where an exported ONNX graph starts: placeholders of either vintage, and cuts inside the
graph (a dataset iterator's or a queue's results, or any op's), with the shapes ONNX needs."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

from compiler.backends.onnx import OnnxExportError, export
from compiler.frontends.graphdef import load_graph
from compiler.ir.dtypes import DType
from compiler.ir.shapes import Shape
from compiler.runtime.interpreter import Interpreter, InterpreterError
from compiler.runtime.onnx_runner import run_onnx
from tests.backends.test_onnx_export import Builder, _weights


def declared_inputs(model: onnx.ModelProto) -> dict[str, list]:
    return {i.name: [d.dim_value if d.HasField("dim_value") else None for d in i.type.tensor_type.shape.dim]
            for i in model.graph.input}


def test_placeholder_v2_is_an_input_like_placeholder():
    """PlaceholderV2 (GraphDefs before version 23): its stated shape reaches ONNX, and the
    interpreter asks for it to be fed."""
    b = Builder()
    x = b.graph.create_op("PlaceholderV2", "x", attrs={"dtype": DType.FLOAT, "shape": Shape.of([2, 3])}).result
    y = b("Relu", b("MatMul", x, b.const(_weights(np.random.default_rng(0), 3, 4))))
    model = export(b.graph, ["x"], [y.name])
    onnx.checker.check_model(model, full_check=True)
    assert declared_inputs(model) == {"x": [2, 3]}
    feeds = {"x": np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)}
    expected = Interpreter(b.graph).run(feeds, [y.name])[y.name]
    np.testing.assert_allclose(run_onnx(model, feeds)[y.name], expected, rtol=1e-6)
    with pytest.raises(InterpreterError, match="placeholder 'x' .* is not fed"):
        Interpreter(b.graph).run({}, [y.name])
    with pytest.raises(OnnxExportError, match="placeholder 'x' is needed by the outputs"):
        export(b.graph, [], [y.name])


def test_a_cut_inside_the_graph_takes_the_shape_the_ops_above_imply():
    b = Builder()
    x = b.input("x", [2, 3])
    hidden = b("Relu", b("MatMul", x, b.const(_weights(np.random.default_rng(0), 3, 4))))
    y = b("Tanh", hidden)
    model = export(b.graph, [hidden.name], [y.name])
    onnx.checker.check_model(model, full_check=True)
    assert declared_inputs(model) == {hidden.name: [2, 4]}


def test_an_input_of_unknown_rank_is_refused_by_name():
    b = Builder()
    x = b.graph.create_op("Placeholder", "x", attrs={"dtype": DType.FLOAT}).result
    y = b("Relu", x)
    with pytest.raises(OnnxExportError, match="input 'x' has an unknown rank"):
        export(b.graph, ["x"], [y.name])


def _dataset_and_queue_graph(tf):
    """A TF1 graph reading a batch from a dataset iterator and another from a queue."""
    rng = np.random.default_rng(3)
    graph = tf.Graph()
    with graph.as_default():
        data = (rng.standard_normal((8, 4)).astype(np.float32), np.arange(8, dtype=np.int32))
        iterator = tf.compat.v1.data.make_one_shot_iterator(tf.data.Dataset.from_tensor_slices(data).batch(2))
        features, labels = iterator.get_next(name="IteratorGetNext")
        weights = tf.constant(rng.standard_normal((4, 3)).astype(np.float32))
        scored = tf.nn.relu(tf.matmul(features, weights)) + tf.cast(tf.expand_dims(labels, 1), tf.float32)
        tf.identity(scored, name="y")
        queue = tf.queue.FIFOQueue(10, [tf.float32], shapes=[[4]], name="queue")
        tf.identity(tf.reduce_sum(queue.dequeue_many(3, name="many") * 2.0, axis=1), name="z")
        tf.identity(queue.dequeue_up_to(3, name="up_to") - queue.dequeue(name="one"), name="w")
    return graph


@pytest.mark.tf
@pytest.mark.parametrize("inputs, outputs, declared", [
    (["IteratorGetNext:0", "IteratorGetNext:1"], ["y"], {"IteratorGetNext": [None, 4], "IteratorGetNext:1": [None]}),
    (["many"], ["z"], {"many": [3, 4]}),
    (["up_to", "one"], ["w"], {"up_to": [None, 4], "one": [4]}),
])
def test_dataset_and_queue_results_become_inputs_and_match_tf(inputs, outputs, declared, tmp_path):
    tf = pytest.importorskip("tensorflow")
    graph = _dataset_and_queue_graph(tf)
    path = tmp_path / "reader.pb"
    path.write_bytes(graph.as_graph_def().SerializeToString())
    model = export(load_graph(path), inputs, outputs)
    onnx.checker.check_model(model, full_check=True)
    assert declared_inputs(model) == declared
    rng = np.random.default_rng(4)
    sizes = {name: [2 if d is None else d for d in dims] for name, dims in declared.items()}
    feeds = {name: (rng.integers(0, 5, size).astype(np.int32) if name.endswith(":1") else
                    rng.standard_normal(size).astype(np.float32)) for name, size in sizes.items()}
    with tf.compat.v1.Session(graph=graph) as session:
        expected = session.run(f"{outputs[0]}:0", {graph.get_tensor_by_name(
            name if ":" in name else f"{name}:0"): value for name, value in feeds.items()})
    np.testing.assert_allclose(run_onnx(model, feeds)[outputs[0]], expected, rtol=1e-6, atol=1e-6)


@pytest.mark.tf
def test_an_uncut_input_pipeline_is_refused_with_the_cut_to_make(tmp_path):
    tf = pytest.importorskip("tensorflow")
    path = tmp_path / "reader.pb"
    path.write_bytes(_dataset_and_queue_graph(tf).as_graph_def().SerializeToString())
    graph = load_graph(path)
    with pytest.raises(OnnxExportError, match=r"'IteratorGetNext' \(IteratorGetNext\) reads a dataset or queue "
                                              r"at run time: list its results among the inputs \(IteratorGetNext:0"):
        export(graph, [], ["y"])
    with pytest.raises(OnnxExportError, match=r"'many' \(QueueDequeueManyV2\) reads a dataset or queue"):
        export(graph, [], ["z"])
    with pytest.raises(InterpreterError, match=r"'queue' \(FIFOQueueV2\) is part of an input pipeline"):
        Interpreter(graph).run({}, ["z"])
