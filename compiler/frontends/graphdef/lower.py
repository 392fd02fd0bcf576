"""Lower a GraphDef message into the SSA IR.

Two sweeps: the first creates every op with its results (so forward
references and TF1 loop back-edges resolve), the second wires operands and
control dependencies from the `name:port` and `^name` input strings.
Attributes stay encoded until a pass reads them.
"""
from __future__ import annotations

from typing import Any

from google.protobuf import unknown_fields

from compiler.errors import InputError
from compiler.ir.attrs import AttrMap
from compiler.ir.graph import Graph, Op, Value
from compiler.ir.op_registry import infer_result_types, op_def
from compiler.ir.shapes import UNKNOWN_SHAPE
from compiler.ir.signatures import SignatureError
from compiler.proto import graph_pb2
from compiler.proto.codec import decode_attr
from compiler.proto.wire import encode_unknown_fields, field_bytes

# NodeDef fields the IR models directly; everything else rides along in Op.extras.
_DEBUG_INFO_FIELD = 6
_EXPERIMENTAL_TYPE_FIELD = 7


def lower_graphdef(graph_def: graph_pb2.GraphDef, where: str = "<graph>") -> Graph:
    graph = Graph()
    _lower_graph_fields(graph_def, graph)
    nodes = list(graph_def.node)
    parsed_inputs = [_parse_inputs(node, where) for node in nodes]
    max_port: dict[str, tuple[int, str]] = {}
    for node, inputs in zip(nodes, parsed_inputs):
        for name, port in inputs[0]:
            if port > max_port.get(name, (-1, ""))[0]:
                max_port[name] = (port, node.name)
    ops = [_create_op(graph, node, max_port.get(node.name, (-1, "")), where) for node in nodes]
    for op, node, (data, control, explicit) in zip(ops, nodes, parsed_inputs):
        _wire(graph, op, data, control, explicit, where)
    return graph


def _lower_graph_fields(graph_def: graph_pb2.GraphDef, graph: Graph) -> None:
    if graph_def.HasField("versions"):
        v = graph_def.versions
        graph.versions.producer = v.producer
        graph.versions.min_consumer = v.min_consumer
        graph.versions.bad_consumers = tuple(v.bad_consumers)
        graph.extras.has_versions = True
    graph.extras.legacy_version = graph_def.version
    if graph_def.HasField("library"):
        graph.extras.library = graph_def.library
    if graph_def.HasField("debug_info"):
        graph.extras.debug_info = graph_def.debug_info.SerializeToString(deterministic=True)
    graph.extras.unknown = encode_unknown_fields(unknown_fields.UnknownFieldSet(graph_def))


def _parse_inputs(node: Any, where: str) -> tuple[list[tuple[str, int]], list[str], frozenset[int]]:
    """Split a node's input strings into data (name, port), control names, explicit `:0` slots."""
    data: list[tuple[str, int]] = []
    control: list[str] = []
    explicit: set[int] = set()
    for text in node.input:
        if text.startswith("^"):
            control.append(text[1:])
            continue
        if control:
            raise InputError(f"{where}: node '{node.name}': data input '{text}' follows a control input")
        head, sep, tail = text.rpartition(":")
        if sep and tail.isdigit():
            if tail == "0":
                explicit.add(len(data))
            data.append((head, int(tail)))
        else:
            data.append((text, 0))
    return data, control, frozenset(explicit)


def _create_op(graph: Graph, node: Any, max_read: tuple[int, str], where: str) -> Op:
    if not node.name:
        raise InputError(f"{where}: a node of op '{node.op}' has no name")
    if node.name in graph:
        raise InputError(f"{where}: duplicate node name '{node.name}'")
    attrs = AttrMap(sources=dict(node.attr), decode=decode_attr)
    try:
        types = infer_result_types(node.op, attrs)
    except (ValueError, TypeError) as err:
        raise InputError(f"{where}: node '{node.name}' ({node.op}): {err}") from None
    max_port, reader = max_read
    if max_port >= len(types):
        _check_port(node, len(types), max_port, reader, where)
    while len(types) <= max_port:
        types.append((None, UNKNOWN_SHAPE))
    op = Op(node.op, node.name, attrs, node.device)
    op.results = [Value(op, i, dt, sh) for i, (dt, sh) in enumerate(types)]
    op.extras = _node_extras(node)
    graph._link(op)
    return op


# Readers decide how many results an op unknown to TF's registry has; past this many, a port is corrupt.
MAX_UNREGISTERED_PORT = 4096


def _check_port(node: Any, count: int, port: int, reader: str, where: str) -> None:
    """A registered op has exactly the outputs its OpDef gives; TF's importer refuses a read past them."""
    if op_def(node.op) is not None or port > MAX_UNREGISTERED_PORT:
        noun = "output" if count == 1 else "outputs"
        raise SignatureError(f"{where}: node '{reader}' reads output {port} of '{node.name}' ({node.op}), "
                             f"which has {count} {noun}")


def _node_extras(node: Any) -> bytes:
    extras = b""
    if node.HasField("experimental_debug_info"):
        extras += field_bytes(_DEBUG_INFO_FIELD, node.experimental_debug_info.SerializeToString())
    if node.HasField("experimental_type"):
        extras += field_bytes(_EXPERIMENTAL_TYPE_FIELD, node.experimental_type.SerializeToString())
    unknown = unknown_fields.UnknownFieldSet(node)
    if len(unknown):
        extras += encode_unknown_fields(unknown)
    return extras


def _wire(graph: Graph, op: Op, data: list[tuple[str, int]], control: list[str],
          explicit: frozenset[int], where: str) -> None:
    for name, port in data:
        producer = graph.get(name)
        if producer is None:
            raise InputError(f"{where}: node '{op.name}' reads '{name}', which is not in the graph")
        op.append_operand(producer.results[port])
    for name in control:
        dep = graph.get(name)
        if dep is None:
            raise InputError(f"{where}: node '{op.name}' has a control input '^{name}', which is not in the graph")
        op._control_deps.append(dep)
        dep.control_users.append(op)
    op.explicit_port0 = explicit
