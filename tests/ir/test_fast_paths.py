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


# remove_nodes skips a round that would match only the graph outputs the last round kept in place.
_REMOVE_CASES = {
    # the Keras shape: every Identity goes in the first round but the output's
    "output Identity": ("%x = Placeholder() {dtype = f32}\n%a = Identity(%x) {T = f32}\n%r = Relu(%a) {T = f32}\n"
                        "%b = Identity(%x) {T = f32}\n%s = Sub(%r, %b) {T = f32}\n%out = Identity(%s) {T = f32}",
                        ["out"]),
    # a chain: the output's input goes first, so the second round matches it with a new input
    "chain into the output": ("%x = Placeholder() {dtype = f32}\n%a = Identity(%x) {T = f32}\n"
                              "%out = Identity(%a) {T = f32}", ["out"]),
    # the output stays; an Identity chain beside it needs a second round
    "chain beside an output": ("%x = Placeholder() {dtype = f32}\n%r = Relu(%x) {T = f32}\n"
                               "%out = Identity(%r) {T = f32}\n%c = Identity(%x) {T = f32}\n"
                               "%d = Identity(%c) {T = f32}\n%s = Sub(%d, %r) {T = f32}", ["out", "s"]),
    # an output and an Identity reading one op: the output claims it in every round
    "outputs sharing an input": ("%x = Placeholder() {dtype = f32}\n%a = Identity(%x) {T = f32}\n"
                                 "%r = Relu(%a) {T = f32}\n%i = Identity(%r) {T = f32}\n"
                                 "%o1 = Identity(%r) {T = f32}\n%s = Sub(%i, %x) {T = f32}", ["o1", "s"]),
    # an output reading another output
    "output of an output": ("%x = Placeholder() {dtype = f32}\n%a = Identity(%x) {T = f32}\n"
                            "%r = Relu(%a) {T = f32}\n%o1 = Identity(%r) {T = f32}\n%o2 = Identity(%o1) {T = f32}",
                            ["o1", "o2"]),
    # an Identity kept for its control input stays a candidate
    "protected carrier": ("%x = Placeholder() {dtype = f32}\n%n[0] = NoOp()\n%a = Identity(%x, ^%n) {T = f32}\n"
                          "%b = Identity(%x) {T = f32}\n%r = AddV2(%a, %b) {T = f32}\n%out = Identity(%r) {T = f32}",
                          ["out"]),
}


def _remove_identities(text: str, outputs: list[str]) -> tuple[bytes, list[str], int]:
    """remove_nodes(op=Identity) on an IR graph: the output, the notes and how many rounds matched."""
    from compiler.ir.parser import parse_graph
    from compiler.passes import remove_nodes

    rounds = []
    original = remove_nodes.find_matches

    def counted(*args):
        rounds.append(1)
        return original(*args)

    remove_nodes.find_matches = counted
    try:
        typed = "\n".join(line if "NoOp" in line else line + " : f32[2]" for line in text.splitlines())
        report = run_pipeline(parse_graph("graph {\n" + typed + "\n}"), "remove_nodes(op=Identity)", ["x"], outputs)
    finally:
        remove_nodes.find_matches = original
    notes = [note for record in report.records for note in record.notes]
    return emit_graphdef_bytes(report.graph), notes, len(rounds)


@pytest.mark.parametrize("text, outputs", list(_REMOVE_CASES.values()), ids=list(_REMOVE_CASES))
def test_remove_nodes_skips_only_rounds_that_change_nothing(text, outputs, monkeypatch):
    from compiler.passes import remove_nodes

    fast = _remove_identities(text, outputs)
    monkeypatch.setattr(remove_nodes, "repeats_kept_matches", lambda *args: False)
    slow = _remove_identities(text, outputs)
    assert fast[:2] == slow[:2]
    saved = {"output Identity": 1, "chain beside an output": 1}  # the others' last rounds do not qualify
    name = next(key for key, case in _REMOVE_CASES.items() if case[0] == text)
    assert fast[2] == slow[2] - saved.get(name, 0)


def test_a_round_after_one_that_kept_an_output_can_still_remove(monkeypatch):
    """The first round keeps the output and removes the head of a chain whose next Identity only the
    second round can match: skipping that round would leave it in (as the always-skip variant shows)."""
    from compiler.passes import remove_nodes

    text, outputs = _REMOVE_CASES["chain beside an output"]
    right = _remove_identities(text, outputs)
    monkeypatch.setattr(remove_nodes, "repeats_kept_matches", lambda *args: True)
    assert _remove_identities(text, outputs)[0] != right[0]


@pytest.mark.parametrize("text", [
    "dtype: DT_FLOAT tensor_shape { dim { size: 2 } } tensor_content: '\\000\\000\\200?\\000\\000\\000@'",
    "dtype: DT_FLOAT tensor_shape { dim { size: 2 } } tensor_content: '\\000\\000\\200?'",
    "dtype: DT_FLOAT tensor_shape { dim { size: 1 } } float_val: [1, 2]",
    "dtype: DT_INT32 tensor_shape { dim { size: 3 } dim { size: 0 } } int_val: 1",
    "dtype: DT_INVALID tensor_shape { dim { size: 1 } }",
    "dtype: DT_RESOURCE",
    "dtype: DT_STRING tensor_shape { dim { size: 1 } } string_val: ['a', 'b']",
])
def test_a_decoded_constant_is_checked_as_its_encoding(text):
    """The signature check reads a Const's dtype and dims from the Tensor decoded at load."""
    from compiler.ir.signatures import tensor_encoding_problem
    from compiler.proto import tensor_pb2
    from compiler.proto.codec import decode_tensor

    proto = text_format.Parse(text, tensor_pb2.TensorProto())
    assert tensor_encoding_problem(proto, None, decode_tensor(proto)) == tensor_encoding_problem(proto)


def test_a_computed_tensor_in_any_memory_order_is_written_as_protobuf_writes_it():
    """Emit writes a contiguous little-endian array from a view of it; anything else is converted."""
    from compiler.ir.dtypes import DType
    from compiler.ir.tensor import Tensor
    from compiler.proto.codec import attr_bytes, encode_attr, tensor_attr_chunks

    base = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    for array in (np.asfortranarray(base), base.transpose(2, 0, 1).copy(order="F"), base[:, ::2]):
        tensor = Tensor(DType.FLOAT, array.shape, array=array)  # held as is, not copied into C order
        assert b"".join(tensor_attr_chunks(tensor)) == attr_bytes(tensor)
    for value in (DType.HALF, DType.HALF, "NCHW", "NCHW", "", True, 1, 1.0, -0.0):  # types and strings are kept
        assert attr_bytes(value) == encode_attr(value).SerializeToString(deterministic=True), value
