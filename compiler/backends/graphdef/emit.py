"""Emit the IR as a GraphDef, binary or text.

Nodes are written straight to wire bytes in the op order of the IR.  An
attribute nobody reassigned is copied from its source message byte for byte,
so an empty pipeline gives back the same nodes, inputs, attributes, tensor
bits, library and versions.  Attribute keys are sorted, so the same IR always
gives the same bytes.  A large untouched tensor whose input bytes are what
protobuf would write for it (`GraphExtras.tensor_encodings`) is written from
those bytes: the output is then the only copy of it made.
"""
from __future__ import annotations

import functools
from typing import Any, Optional

from google.protobuf import text_format

from compiler.ir.graph import Graph, Op
from compiler.ir.tensor import Tensor
from compiler.proto import graph_pb2, versions_pb2
from compiler.proto.codec import attr_bytes, tensor_attr_chunks
from compiler.proto.wire import field_bytes, field_string, field_varint, length_prefix

_NODE, _LIBRARY, _LEGACY_VERSION, _VERSIONS, _DEBUG_INFO = 1, 2, 3, 4, 5


def input_strings(op: Op) -> list[str]:
    """The NodeDef `input` list: data operands as `name[:port]`, then `^control` deps."""
    out = []
    explicit = op.explicit_port0
    for i, value in enumerate(op.operands):
        if value.index == 0 and i not in explicit:
            out.append(value.op.name)
        else:
            out.append(f"{value.op.name}:{value.index}")
    deps = op.control_deps
    if deps:  # most ops have none: no generator made for nothing
        out.extend(["^" + dep.name for dep in deps])
    return out


def node_chunks(op: Op) -> list[Any]:
    """One NodeDef as byte chunks, fields in field-number order like protobuf writes them.

    Chunks (bytes, or views of a computed tensor's elements) rather than one
    bytes object: big tensors are then copied once, by the final join,
    instead of once per level of message nesting.
    """
    inputs = input_strings(op)
    if op.origin is not None:
        loaded = _as_loaded(op, inputs)
        if loaded is not None:
            return [loaded]
    chunks = [field_string(1, op.name)]
    if op.type:
        chunks.append(_op_type_field(op.type))
    chunks.extend([field_string(3, text) for text in inputs])
    if op.device:
        chunks.append(field_string(4, op.device))
    sources = op.attrs.unassigned_sources()
    if sources is not None:  # untouched attributes, as after loading: no merge of two key sets
        assigned: dict[str, Any] = {}
        keys = sorted(sources)
    else:
        sources, assigned = op.attrs.encodings()
        keys = sorted(sources.keys() | assigned.keys())
    encodings = op.graph.extras.tensor_encodings if op.graph is not None else _NONE_KNOWN
    for key in keys:
        source = sources.get(key)
        if source is not None:  # a large tensor's input bytes where they are protobuf's own, else protobuf's
            known = encodings.get(id(source))
            value = [known.encoded if known is not None else source.SerializeToString(deterministic=True)]
        else:
            assigned_value = assigned[key]
            value = (isinstance(assigned_value, Tensor) and tensor_attr_chunks(assigned_value)
                     or [attr_bytes(assigned_value)])
        chunks.append(_attr_entry_head(key, sum(map(len, value))))
        chunks.extend(value)
    chunks.append(op.extras)
    return chunks


_NONE_KNOWN: dict[int, Any] = {}


def _as_loaded(op: Op, inputs: list[str]) -> Optional[bytes]:
    """The NodeDef `op` was lowered from, serialized by protobuf, when that gives exactly the bytes
    written field by field below: the op still has the node's name, type, device, inputs and
    untouched attributes (an `AttrMap` replaces its sources on any write, so `is` tells), and
    no attribute key is a prefix of another (upb orders such keys longer first, TF and this
    module shorter first).  One C call instead of a Python step per field and attribute."""
    node, sources, name, op_type, device, node_inputs = op.origin
    if (op.attrs.unassigned_sources() is not sources or op._name != name or op.type != op_type
            or op.device != device or op.extras or inputs != node_inputs or not _keys_order_alike(tuple(sources))):
        return None
    return node.SerializeToString(deterministic=True)


@functools.lru_cache(maxsize=1024)
def _keys_order_alike(keys: tuple[str, ...]) -> bool:
    """Whether ordering `keys` by bytes gives the same order however a key that is another's
    prefix is placed: true unless one key starts with another."""
    ordered = sorted(keys)
    return not any(longer.startswith(shorter) for shorter, longer in zip(ordered, ordered[1:]))


# Bounded caches of byte strings that repeat across a graph's nodes: few op types, few
# attribute keys with values of a few sizes.
@functools.lru_cache(maxsize=1024)
def _op_type_field(op_type: str) -> bytes:
    return field_string(2, op_type)


@functools.lru_cache(maxsize=4096)
def _attr_entry_head(key: str, size: int) -> bytes:
    """What precedes an attribute's value of `size` bytes: the `attr` map entry's tag and
    length, the entry's key, then the value's tag and length."""
    head = field_string(1, key) + length_prefix(2, size)
    return length_prefix(5, len(head) + size) + head


def node_bytes(op: Op) -> bytes:
    return b"".join(node_chunks(op))


def emit_graphdef_bytes(graph: Graph) -> bytes:
    chunks: list[Any] = []
    for op in graph:
        node = node_chunks(op)
        chunks.append(length_prefix(_NODE, sum(map(len, node))))
        chunks.extend(node)
    extras = graph.extras
    if extras.library is not None:
        chunks.append(field_bytes(_LIBRARY, extras.library.SerializeToString(deterministic=True)))
    if extras.legacy_version:
        chunks.append(field_varint(_LEGACY_VERSION, extras.legacy_version))
    v = graph.versions
    if extras.has_versions or v.producer or v.min_consumer or v.bad_consumers:
        msg = versions_pb2.VersionDef(producer=v.producer, min_consumer=v.min_consumer,
                                      bad_consumers=list(v.bad_consumers))
        chunks.append(field_bytes(_VERSIONS, msg.SerializeToString()))
    if extras.debug_info:
        chunks.append(field_bytes(_DEBUG_INFO, extras.debug_info))
    chunks.append(extras.unknown)
    return b"".join(chunks)


def emit_graphdef(graph: Graph) -> graph_pb2.GraphDef:
    return graph_pb2.GraphDef.FromString(emit_graphdef_bytes(graph))


def emit_graphdef_text(graph: Graph) -> str:
    return text_format.MessageToString(emit_graphdef(graph))
