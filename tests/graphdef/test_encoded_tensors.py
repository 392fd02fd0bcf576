"""Large tensors are emitted and measured from the input's bytes, only where those are protobuf's own.

Each test compares the emitted bytes with what the same graph gives when every
attribute is serialized again by protobuf (an empty `tensor_encodings`), so a
reused encoding can never change the output.
"""
from __future__ import annotations

import numpy as np
import pytest

from compiler.backends.graphdef import emit_graphdef_bytes
from compiler.frontends.graphdef import encoded, load_graph, load_graph_bytes
from compiler.ir.graph import Checkpoint
from compiler.ir.signatures import SignatureError
from compiler.proto import graph_pb2
from compiler.proto.wire import field_bytes, field_string, field_varint, length_prefix

WEIGHTS = np.arange(70_000, dtype=np.float32)  # 280 KB: above both thresholds on its own
SHAPE = field_bytes(2, field_bytes(2, field_varint(1, WEIGHTS.size)))  # TensorProto.tensor_shape, one dim
CONTENT = field_bytes(4, WEIGHTS.tobytes())


def _tensor_attr(tensor: bytes) -> bytes:
    return field_bytes(8, tensor)  # AttrValue.tensor


def _entry(key: str, value: bytes) -> bytes:
    return field_bytes(5, field_string(1, key) + field_bytes(2, value))  # NodeDef.attr map entry


def _const_node(name: str, value_entries: list[bytes]) -> bytes:
    dtype = _entry("dtype", field_varint(6, 1))  # AttrValue.type = DT_FLOAT
    return field_bytes(1, field_string(1, name) + field_string(2, "Const") + dtype + b"".join(value_entries))


def _graph(value_entries: list[bytes]) -> bytes:
    return _const_node("w", value_entries) + _const_node("small", [_entry("value", _tensor_attr(
        field_varint(1, 1) + field_bytes(2, b"") + field_bytes(5, b"\x00\x00\x80\x3f")))])


def _reserialized(data: bytes) -> bytes:
    """What emit writes when protobuf serializes every attribute."""
    graph = load_graph_bytes(data)
    graph.extras.tensor_encodings = {}
    return emit_graphdef_bytes(graph)


CANONICAL = _entry("value", _tensor_attr(field_varint(1, 1) + SHAPE + CONTENT))


def test_a_canonical_large_tensor_is_emitted_from_the_input():
    data = _graph([CANONICAL])
    graph = load_graph_bytes(data)
    (known,) = graph.extras.tensor_encodings.values()
    assert known.source is graph.op("w").attrs.source("value")
    assert known.content_size == WEIGHTS.nbytes
    assert emit_graphdef_bytes(graph) == _reserialized(data)
    assert np.array_equal(graph.op("w").attrs["value"].numpy(), WEIGHTS)


NOT_PROTOBUFS_OWN = {
    "fields out of order": _entry("value", _tensor_attr(field_varint(1, 1) + CONTENT + SHAPE)),
    "a field protobuf would not write": _entry("value", _tensor_attr(field_varint(1, 1) + SHAPE + field_varint(3, 0)
                                                                     + CONTENT)),
    "a longer varint than needed": _entry("value", _tensor_attr(
        field_varint(1, 1) + SHAPE + bytes([0x22]) + bytes([0x80 | (WEIGHTS.nbytes & 0x7F),
                                                           0x80 | (WEIGHTS.nbytes >> 7 & 0x7F),
                                                           0x80 | (WEIGHTS.nbytes >> 14), 0x00])
        + WEIGHTS.tobytes())),
    "a shape that serializes otherwise": _entry("value", _tensor_attr(
        field_varint(1, 1) + field_bytes(2, field_bytes(2, field_varint(1, WEIGHTS.size)) + bytes([0x18, 0x00]))
        + CONTENT)),
    "an AttrValue with another field": _entry("value", field_string(2, "") + _tensor_attr(
        field_varint(1, 1) + SHAPE + CONTENT)),
}


@pytest.mark.parametrize("entry", list(NOT_PROTOBUFS_OWN.values()), ids=list(NOT_PROTOBUFS_OWN))
def test_an_encoding_protobuf_would_not_write_is_serialized_again(entry):
    data = _graph([entry])
    graph = load_graph_bytes(data)
    assert not graph.extras.tensor_encodings
    assert emit_graphdef_bytes(graph) == _reserialized(data)


def test_a_key_given_twice_is_not_reused():
    """Protobuf keeps the last entry of a key; the large first one must not stand in for it."""
    small = _entry("value", _tensor_attr(field_varint(1, 1) + field_bytes(2, b"") + field_bytes(5, b"\x00\x00\x80\x3f")))
    data = _graph([CANONICAL, small])
    graph = load_graph_bytes(data)
    assert not graph.extras.tensor_encodings
    assert emit_graphdef_bytes(graph) == _reserialized(data)
    assert graph.op("w").attrs["value"].shape == ()


def test_an_input_the_scan_cannot_follow_is_left_to_protobuf():
    data = _graph([CANONICAL]) + field_varint(7, 1)  # a GraphDef field this schema does not have
    graph = load_graph_bytes(data)
    assert not graph.extras.tensor_encodings
    assert emit_graphdef_bytes(graph) == _reserialized(data)


def test_a_wrong_content_size_is_still_refused_by_its_measure():
    shape = field_bytes(2, field_bytes(2, field_varint(1, WEIGHTS.size + 1)))
    data = _graph([_entry("value", _tensor_attr(field_varint(1, 1) + shape + CONTENT))])
    with pytest.raises(SignatureError, match=f"tensor_content has {WEIGHTS.nbytes} bytes, a float tensor of shape "
                                             rf"\[{WEIGHTS.size + 1}\] needs {WEIGHTS.nbytes + 4}"):
        load_graph_bytes(data)


def test_files_and_mutable_inputs_reuse_nothing(tmp_path):
    """A file's bytes would have to be kept for the whole compile; a bytearray could change under the views."""
    data = _graph([CANONICAL])
    binary, text = tmp_path / "g.pb", tmp_path / "g.pbtxt"
    binary.write_bytes(data)
    text.write_text(str(graph_pb2.GraphDef.FromString(data)))
    assert not load_graph(binary).extras.tensor_encodings
    assert not load_graph(text).extras.tensor_encodings
    assert not load_graph_bytes(bytearray(data)).extras.tensor_encodings
    assert not load_graph_bytes(text.read_bytes()).extras.tensor_encodings


def test_copies_of_the_graph_keep_the_encodings():
    data = _graph([CANONICAL])
    graph = load_graph_bytes(data)
    expected = emit_graphdef_bytes(graph)
    assert emit_graphdef_bytes(graph.clone()) == expected
    checkpoint = Checkpoint(graph)
    graph.extras.tensor_encodings = {}
    checkpoint.restore()
    assert graph.extras.tensor_encodings
    assert emit_graphdef_bytes(graph) == expected


def test_the_scan_reads_varints_as_protobuf_writes_them():
    for value in (0, 1, 127, 128, 300, 16_383, 16_384, 2**21, 2**35):
        encoded_value = length_prefix(1, value)[1:]
        assert encoded.read_varint(encoded_value, 0, len(encoded_value)) == (value, len(encoded_value))
    with pytest.raises(encoded.WireError):
        encoded.read_varint(bytes([0x81, 0x00]), 0, 2)
