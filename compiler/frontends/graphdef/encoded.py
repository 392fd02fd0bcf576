"""Find where large tensor attributes sit in a binary GraphDef, to reuse their bytes.

Serializing a weight again at emit, or reading `tensor_content` to measure it,
copies megabytes into fresh memory, and on a VM each page of it faults in
(about 2.5 us a page).  The input already holds those bytes.  A large
attribute is reused only when its input encoding is byte for byte what
protobuf would write for the message parsed from it: one map entry for its
key, a TensorProto of exactly dtype, shape and tensor_content in field order,
minimal varints, and a shape that serializes back to itself.  Anything else
(or an input this scan cannot follow) is left to protobuf, as before.
"""
from __future__ import annotations

from typing import Any, Iterator, Optional

from compiler.ir.graph import EncodedTensorAttr
from compiler.proto import tensor_shape_pb2

# Nodes and attribute values smaller than this are not worth reusing: malloc serves such copies
# from memory it already has (it maps fresh memory for larger ones, at least 128 KiB).
MIN_REUSED_BYTES = 64 * 1024
# Below this an input holds no node worth a scan (a scan costs about 0.3 us per node).
MIN_SCANNED_INPUT = 256 * 1024

_LENGTH = 2
_NODE_TAG, _ATTR_TAG = (1 << 3) | _LENGTH, (5 << 3) | _LENGTH
_ATTR_TENSOR_TAG = (8 << 3) | _LENGTH
_DTYPE_TAG, _SHAPE_TAG, _CONTENT_TAG = (1 << 3), (2 << 3) | _LENGTH, (4 << 3) | _LENGTH
_KEY_TAG, _VALUE_TAG = (1 << 3) | _LENGTH, (2 << 3) | _LENGTH
# GraphDef's top-level fields: node, library, version (a varint), versions, debug_info.
_GRAPH_TAGS = frozenset(((1 << 3) | _LENGTH, (2 << 3) | _LENGTH, 3 << 3, (4 << 3) | _LENGTH, (5 << 3) | _LENGTH))


class WireError(Exception):
    """The bytes are not what this scan follows; the caller falls back to protobuf."""


def read_varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """(value, position after it) of a minimally encoded varint, as protobuf writes them."""
    value = shift = 0
    while pos < end:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            if byte == 0 and shift:  # a trailing zero byte: valid wire format, but not protobuf's encoding
                raise WireError("non-minimal varint")
            return value, pos
        shift += 7
    raise WireError("truncated varint")


def large_nodes(data: bytes, node_count: int) -> Optional[list[tuple[int, int, int]]]:
    """(node index, start, end) of each top-level NodeDef of at least MIN_REUSED_BYTES, or None
    when the input has a field this scan does not follow or not the `node_count` nodes protobuf read.

    This loop runs once per node of every binary input, so a node's tag and a length under
    2**14 (nearly all of them) are read inline rather than by `read_varint`."""
    found = []
    index = pos = 0
    end = len(data)
    try:
        while pos < end:
            tag = data[pos]
            size = data[pos + 1]
            if tag == _NODE_TAG and size < 0x80:
                pos += 2
            elif tag == _NODE_TAG and data[pos + 2] < 0x80 and data[pos + 2]:
                size = (size & 0x7F) | (data[pos + 2] << 7)
                pos += 3
            else:
                tag, pos = read_varint(data, pos, end)
                if tag not in _GRAPH_TAGS:
                    return None
                size, pos = read_varint(data, pos, end)
                if tag & 7 != _LENGTH:  # `version`: the varint just read was its value
                    continue
            if tag == _NODE_TAG:
                if size >= MIN_REUSED_BYTES:
                    found.append((index, pos, pos + size))
                index += 1
            pos += size
    except (WireError, IndexError):
        return None
    return found if pos == end and index == node_count else None


def tensor_attrs(data: bytes, view: memoryview, start: int, end: int) -> dict[str, EncodedTensorAttr]:
    """Attribute key -> its encoding (a slice of `view`, which shows `data`), for each large tensor
    attribute of the NodeDef in data[start:end] whose bytes are protobuf's own; `source` is left
    for the caller to fill."""
    found: dict[str, Optional[EncodedTensorAttr]] = {}
    try:
        for tag, field_start, field_end in _fields(data, start, end):
            if tag == _ATTR_TAG:
                key, value = _attr_entry(data, view, field_start, field_end)
                found[key] = None if key in found else value  # a key given twice: protobuf keeps the last
    except (WireError, UnicodeDecodeError):
        return {}
    return {key: value for key, value in found.items() if value is not None}


def _fields(data: bytes, pos: int, end: int) -> Iterator[tuple[int, int, int]]:
    """(tag, payload start, payload end) of each field in data[pos:end]; groups are not followed."""
    while pos < end:
        tag, pos = read_varint(data, pos, end)
        wire_type = tag & 7
        if wire_type == 0:
            _, after = read_varint(data, pos, end)
        elif wire_type == _LENGTH:
            size, pos = read_varint(data, pos, end)
            after = pos + size
        elif wire_type in (1, 5):
            after = pos + (8 if wire_type == 1 else 4)
        else:
            raise WireError("group")
        if after > end:
            raise WireError("field past its message")
        yield tag, pos, after
        pos = after


def _attr_entry(data: bytes, view: memoryview, start: int, end: int) -> tuple[str, Optional[EncodedTensorAttr]]:
    """An `attr` map entry: exactly a key, then a value."""
    if data[start] != _KEY_TAG:
        raise WireError("map entry does not start with its key")
    size, key_start = read_varint(data, start + 1, end)
    key_end = key_start + size
    if key_end >= end or data[key_end] != _VALUE_TAG:
        raise WireError("map entry's key is not followed by its value")
    size, value_start = read_varint(data, key_end + 1, end)
    if value_start + size != end:
        raise WireError("map entry holds more than a key and a value")
    key = data[key_start:key_end].decode("utf-8")
    if size < MIN_REUSED_BYTES:
        return key, None
    return key, _tensor_value(data, view, value_start, end)


def _tensor_value(data: bytes, view: memoryview, start: int, end: int) -> Optional[EncodedTensorAttr]:
    """An AttrValue that is only a TensorProto of dtype, shape and tensor_content, each once and
    in field order, with a shape protobuf would write the same way; else None."""
    fields = list(_fields(data, start, end))
    if len(fields) != 1 or fields[0][0] != _ATTR_TENSOR_TAG:
        return None
    tensor = list(_fields(data, fields[0][1], fields[0][2]))
    if [tag for tag, _, _ in tensor] != [_DTYPE_TAG, _SHAPE_TAG, _CONTENT_TAG]:
        return None
    (_, dtype_start, _), (_, shape_start, shape_end), (_, content_start, content_end) = tensor
    dtype, _ = read_varint(data, dtype_start, end)
    shape = data[shape_start:shape_end]
    if not 0 < dtype < 0x80 or content_end == content_start or not _canonical_shape(shape):
        return None
    return EncodedTensorAttr(None, view[start:end], content_end - content_start)


def _canonical_shape(encoded: bytes) -> bool:
    shape = tensor_shape_pb2.TensorShapeProto.FromString(encoded)
    return shape.SerializeToString(deterministic=True) == encoded


def find_tensor_attrs(data: Any, node_count: int) -> list[tuple[int, dict[str, EncodedTensorAttr]]]:
    """(node index, key -> encoding) for every large node with a reusable tensor attribute of
    the `node_count` nodes parsed from `data`."""
    if not isinstance(data, bytes) or len(data) < MIN_SCANNED_INPUT:  # a bytearray could change under the views
        return []
    nodes = large_nodes(data, node_count)
    if not nodes:
        return []
    view = memoryview(data)
    found = [(index, tensor_attrs(data, view, start, end)) for index, start, end in nodes]
    return [(index, attrs) for index, attrs in found if attrs]
