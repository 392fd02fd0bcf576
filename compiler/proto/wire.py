"""Protobuf wire-format primitives for writing GraphDefs without building messages.

The GraphDef backend writes nodes straight to bytes: it is faster than
filling NodeDef messages, and lets untouched attributes be copied verbatim.
"""
from __future__ import annotations

import struct
from typing import Any

_VARINT, _FIXED64, _LENGTH, _GROUP_START, _GROUP_END, _FIXED32 = 0, 1, 2, 3, 4, 5


_ONE_BYTE = [bytes((i,)) for i in range(0x80)]


def varint(value: int) -> bytes:
    """Base-128 varint; negative numbers as 64-bit two's complement, like protobuf."""
    if 0 <= value < 0x80:
        return _ONE_BYTE[value]
    if 0 < value < 0x4000:  # two bytes (most lengths in a GraphDef): no loop
        return bytes(((value & 0x7F) | 0x80, value >> 7))
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def tag(field: int, wire_type: int) -> bytes:
    return varint((field << 3) | wire_type)


# Tags of length-delimited fields 1-15 (one byte each): a GraphDef's writer asks for them per
# name, input and attribute, so they are looked up rather than encoded each time.
_LENGTH_TAGS = [tag(f, _LENGTH) for f in range(16)]


def _length_tag(field: int) -> bytes:
    return _LENGTH_TAGS[field] if 0 < field < 16 else tag(field, _LENGTH)


def length_prefix(field: int, size: int) -> bytes:
    """The tag and length that precede a length-delimited field of `size` bytes."""
    return _length_tag(field) + varint(size)


def field_bytes(field: int, payload: bytes) -> bytes:
    """A length-delimited field (strings, bytes, sub-messages)."""
    return _length_tag(field) + varint(len(payload)) + payload


def field_string(field: int, text: str) -> bytes:
    data = text.encode("utf-8")
    return _length_tag(field) + varint(len(data)) + data


def field_varint(field: int, value: int) -> bytes:
    return tag(field, _VARINT) + varint(value)


def encode_unknown_fields(fields: Any) -> bytes:
    """Re-encode a google.protobuf.unknown_fields.UnknownFieldSet verbatim."""
    out = bytearray()
    for f in fields:
        num, wt, data = f.field_number, f.wire_type, f.data
        out += tag(num, wt)
        if wt == _VARINT:
            out += varint(data)
        elif wt == _FIXED64:
            out += struct.pack("<Q", data)
        elif wt == _LENGTH:
            out += varint(len(data)) + data
        elif wt == _FIXED32:
            out += struct.pack("<I", data)
        elif wt == _GROUP_START:
            out += encode_unknown_fields(data) + tag(num, _GROUP_END)
    return bytes(out)
