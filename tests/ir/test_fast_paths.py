"""The shortcuts of the seventh compile-time round give what the long way gives.

fold_batch_norms multiplies large weights straight from the input's bytes.
"""
from __future__ import annotations

import numpy as np
from google.protobuf import text_format

from compiler.backends.graphdef import emit_graphdef_bytes
from compiler.frontends.graphdef import load_graph_bytes
from compiler.passes.manager import run_pipeline
from compiler.proto import graph_pb2
from compiler.rewrite.conv_affine import _weight_elements


def _conv_bn_graph(weights: np.ndarray) -> bytes:
    """x -> Conv2D(w) -> Mul(scale) -> AddV2(shift): a chain fold_batch_norms folds into w."""
    channels = weights.shape[-1]

    def const(name: str, array: np.ndarray) -> str:
        dims = "".join(f"dim {{ size: {d} }}" for d in array.shape)
        content = "".join(f"\\{b:03o}" for b in array.astype("<f4").tobytes())
        return (f"node {{ name: '{name}' op: 'Const' attr {{ key: 'dtype' value {{ type: DT_FLOAT }} }}"
                f" attr {{ key: 'value' value {{ tensor {{ dtype: DT_FLOAT tensor_shape {{ {dims} }}"
                f" tensor_content: '{content}' }} }} }} }}")

    rng = np.random.default_rng(7)
    text = (
        "node { name: 'x' op: 'Placeholder' attr { key: 'dtype' value { type: DT_FLOAT } } }"
        + const("w", weights) + const("scale", rng.normal(size=channels)) + const("shift", rng.normal(size=channels))
        + "node { name: 'conv' op: 'Conv2D' input: ['x', 'w'] attr { key: 'T' value { type: DT_FLOAT } }"
          " attr { key: 'padding' value { s: 'SAME' } } attr { key: 'strides' value { list { i: [1, 1, 1, 1] } } } }"
        + "node { name: 'mul' op: 'Mul' input: ['conv', 'scale'] attr { key: 'T' value { type: DT_FLOAT } } }"
        + "node { name: 'out' op: 'AddV2' input: ['mul', 'shift'] attr { key: 'T' value { type: DT_FLOAT } } }")
    return text_format.Parse(text, graph_pb2.GraphDef()).SerializeToString()


def test_weights_scaled_from_the_input_bytes_equal_the_decoded_ones():
    weights = np.random.default_rng(3).normal(size=(3, 3, 64, 128)).astype(np.float32)  # 295 KB: reused
    data = _conv_bn_graph(weights)
    graph = load_graph_bytes(data)
    tensor = graph.op("w").attrs["value"]
    read = _weight_elements(graph, graph.op("w"), tensor)
    assert not tensor.is_decoded and not read.flags.owndata  # a view of `data`, nothing decoded
    assert np.array_equal(read, weights)

    outputs = []
    for reuse in (True, False):
        graph = load_graph_bytes(data)
        if not reuse:
            graph.extras.tensor_encodings = {}
        folded = run_pipeline(graph, "fold_constants fold_batch_norms", ["x"], ["out"]).graph
        assert [op.type for op in folded] == ["Placeholder", "Const", "Conv2D", "Const", "BiasAdd"]
        outputs.append(emit_graphdef_bytes(folded))
    assert outputs[0] == outputs[1]
