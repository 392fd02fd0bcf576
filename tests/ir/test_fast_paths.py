"""The shortcuts of the seventh compile-time round give what the long way gives.

Result types of a freshly lowered op come from its type attributes' enum numbers;
fold_batch_norms multiplies large weights straight from the input's bytes.
"""
from __future__ import annotations

import numpy as np
import pytest
from google.protobuf import text_format

from compiler.backends.graphdef import emit_graphdef_bytes
from compiler.frontends.graphdef import load_graph_bytes
from compiler.ir.attrs import AttrMap
from compiler.ir.op_registry import infer_result_types, lowered_result_types
from compiler.passes.manager import run_pipeline
from compiler.proto import graph_pb2, node_def_pb2
from compiler.proto.codec import decode_attr
from compiler.rewrite.conv_affine import _weight_elements


def _sources(text: str) -> dict:
    node = text_format.Parse(text, node_def_pb2.NodeDef())
    return {key: node.attr[key] for key in node.attr}


@pytest.mark.parametrize("op_type, attrs", [
    ("Relu", "attr { key: 'T' value { type: DT_HALF } }"),
    ("Relu", "attr { key: 'T' value { i: 1 } }"),                      # not a type: the long way
    ("Relu", "attr { key: 'T' value { type: DT_FLOAT_REF } }"),       # a number with no DType
    ("Relu", "attr { key: 'T' value { type: 12345 } }"),
    ("Relu", ""),                                                      # left out, no default
    ("ExpandDims", "attr { key: 'T' value { type: DT_FLOAT } }"),      # Tdim left out
    ("Shape", "attr { key: 'T' value { type: DT_FLOAT } }"),           # out_type's default
    ("Shape", "attr { key: 'T' value { type: DT_FLOAT } } attr { key: 'out_type' value { type: DT_INT64 } }"),
    ("Shape", "attr { key: 'T' value { type: DT_FLOAT } }"
              "attr { key: '_output_shapes' value { list { shape { dim { size: 4 } } } } }"),
    ("FusedBatchNormV3", "attr { key: 'T' value { type: DT_HALF } } attr { key: 'U' value { type: DT_FLOAT } }"),
    ("Split", "attr { key: 'T' value { type: DT_INT8 } } attr { key: 'num_split' value { i: 2 } }"),
    ("NoOp", ""),
    ("NoSuchOp", "attr { key: 'T' value { type: DT_FLOAT } }"),
    ("Placeholder", "attr { key: 'dtype' value { type: DT_FLOAT } } attr { key: 'shape' value { shape { } } }"),
    ("Const", "attr { key: 'dtype' value { type: DT_FLOAT } }"
              "attr { key: 'value' value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 3 } } } } }"),
    ("Const", "attr { key: 'dtype' value { type: DT_FLOAT } }"),       # no value: shape unknown
    ("Const", "attr { key: 'dtype' value { s: 'x' } }"
              "attr { key: 'value' value { tensor { dtype: DT_FLOAT } } }"),
    ("Const", "attr { key: 'dtype' value { type: DT_INT32 } } attr { key: 'value' value { i: 3 } }"),
])
def test_lowered_result_types_are_the_inferred_ones(op_type, attrs):
    slow = infer_result_types(op_type, AttrMap.encoded(_sources(attrs), decode_attr))
    sources = _sources(attrs)
    assert lowered_result_types(op_type, AttrMap.encoded(sources, decode_attr), sources) == slow


def test_a_bad_constant_is_refused_the_same_way():
    attrs = ("attr { key: 'dtype' value { type: DT_FLOAT } }"
             "attr { key: 'value' value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: -2 } } } } }")
    with pytest.raises(ValueError) as slow:
        infer_result_types("Const", AttrMap.encoded(_sources(attrs), decode_attr))
    sources = _sources(attrs)
    with pytest.raises(ValueError) as fast:
        lowered_result_types("Const", AttrMap.encoded(sources, decode_attr), sources)
    assert str(fast.value) == str(slow.value)


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
