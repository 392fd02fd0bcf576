"""Lower a GraphDef message into the SSA IR.

Two sweeps: the first creates every op with its results (so forward
references and TF1 loop back-edges resolve), the second wires operands and
control dependencies from the `name:port` and `^name` input strings.
Attributes stay encoded until a pass reads them.
"""
from __future__ import annotations

from typing import Any, Optional

from google.protobuf import unknown_fields

from compiler.errors import InputError
from compiler.frontends.graphdef.encoded import find_tensor_attrs
from compiler.ir.attrs import AttrMap
from compiler.ir.graph import EncodedTensorAttr, Graph, Op, Value
from compiler.ir.op_registry import lowered_result_types, op_def
from compiler.ir.shapes import UNKNOWN_SHAPE
from compiler.ir.signatures import SignatureError
from compiler.proto import graph_pb2
from compiler.proto.codec import decode_attr
from compiler.proto.wire import encode_unknown_fields, field_bytes

# NodeDef fields the IR models directly; everything else rides along in Op.extras.
_DEBUG_INFO_FIELD = 6
_EXPERIMENTAL_TYPE_FIELD = 7


def lower_graphdef(graph_def: graph_pb2.GraphDef, where: str = "<graph>", encoded: Optional[bytes] = None) -> Graph:
    """The IR of `graph_def`; `encoded`, the bytes it was parsed from, lets large tensor attributes
    be emitted and measured from those bytes instead of copies protobuf makes."""
    graph = Graph()
    _lower_graph_fields(graph_def, graph)
    nodes = list(graph_def.node)
    parsed_inputs = [_parse_inputs(node, where) for node in nodes]
    max_port: dict[str, tuple[int, int]] = {}  # name -> (highest port read, index of the node reading it)
    for index, inputs in enumerate(parsed_inputs):
        for name, port in inputs[0]:
            seen = max_port.get(name)
            if seen is None or port > seen[0]:
                max_port[name] = (port, index)
    by_name: dict[str, Op] = {}
    ops = [_create_op(by_name, node, inputs[3], max_port, nodes, where) for node, inputs in zip(nodes, parsed_inputs)]
    graph._relink(ops)
    for op, (data, control, explicit, _) in zip(ops, parsed_inputs):
        _wire(by_name, op, data, control, explicit, where)
    if encoded is not None:
        graph.extras.tensor_encodings = _tensor_encodings(ops, encoded)
    return graph


def _tensor_encodings(ops: list[Op], data: bytes) -> dict[int, EncodedTensorAttr]:
    """id(source) -> encoding for the large tensor attributes found in `data` (see encoded.py)."""
    table = {}
    for index, attrs in find_tensor_attrs(data, len(ops)):
        ops[index].origin = None  # written from these encodings, not copied again by its message
        for key, found in attrs.items():
            source = ops[index].attrs.source(key)
            if source is not None:
                table[id(source)] = found._replace(source=source)
    return table


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


def _parse_inputs(node: Any, where: str) -> tuple[list[tuple[str, int]], list[str], frozenset[int], list[str]]:
    """Split a node's input strings into data (name, port), control names, explicit `:0` slots;
    the strings themselves last."""
    data: list[tuple[str, int]] = []
    control: list[str] = []
    explicit: list[int] = []
    texts = node.input[:]  # a slice copies the repeated field in one go, faster than iterating it
    for text in texts:
        if text.startswith("^"):
            control.append(text[1:])
            continue
        if control:
            raise InputError(f"{where}: node '{node.name}': data input '{text}' follows a control input")
        if ":" not in text:
            data.append((text, 0))
            continue
        head, sep, tail = text.rpartition(":")
        if tail.isdigit():
            if tail == "0":
                explicit.append(len(data))
            data.append((head, int(tail)))
        else:
            data.append((text, 0))
    return data, control, frozenset(explicit) if explicit else _NO_SLOTS, texts


_NO_SLOTS: frozenset[int] = frozenset()


def _create_op(by_name: dict[str, Op], node: Any, inputs: list[str], max_port: dict[str, tuple[int, int]],
               nodes: list[Any], where: str) -> Op:
    """The op for `node` (whose input strings are `inputs`), entered in `by_name`; linking it into
    the graph is left to the caller.  `max_port` holds the highest port of each node that some
    node (in `nodes`) reads."""
    name = node.name
    if not name:
        raise InputError(f"{where}: a node of op '{node.op}' has no name")
    if name in by_name:
        raise InputError(f"{where}: duplicate node name '{name}'")
    op_type = node.op
    entries = node.attr
    sources = {key: entries[key] for key in entries}  # faster than .items()
    attrs = AttrMap.encoded(sources, decode_attr)
    try:
        types = lowered_result_types(op_type, attrs, sources)
    except (ValueError, TypeError) as err:
        raise InputError(f"{where}: node '{name}' ({op_type}): {err}") from None
    read = max_port.get(name)
    if read is not None and read[0] >= len(types):
        port = read[0]
        _check_port(node, len(types), port, nodes[read[1]].name, where)
        types.extend([(None, UNKNOWN_SHAPE)] * (port + 1 - len(types)))
    device = node.device
    op = Op(op_type, name, attrs, device)
    if len(types) == 1:  # most ops: no comprehension set up for one value
        dtype, shape = types[0]
        op.results = [Value(op, 0, dtype, shape)]
    else:
        op.results = [Value(op, i, dt, sh) for i, (dt, sh) in enumerate(types)]
    op.extras = extras = _node_extras(node)
    if not extras:  # a node with fields the IR does not model is written field by field
        op.origin = (node, sources, name, op_type, device, inputs)
    by_name[name] = op
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


def _wire(by_name: dict[str, Op], op: Op, data: list[tuple[str, int]], control: list[str],
          explicit: frozenset[int], where: str) -> None:
    """Operands and control dependencies, both ends of each edge (what `append_operand` and
    `add_control_dep` record, without their checks: the op is new and its lists empty)."""
    operands: list[Value] = []
    for name, port in data:
        producer = by_name.get(name)
        if producer is None:
            raise InputError(f"{where}: node '{op.name}' reads '{name}', which is not in the graph")
        value = producer.results[port]
        value.uses.append((op, len(operands)))
        operands.append(value)
    op._operands = tuple(operands)
    for name in control:
        dep = by_name.get(name)
        if dep is None:
            raise InputError(f"{where}: node '{op.name}' has a control input '^{name}', which is not in the graph")
        op._control_deps.append(dep)
        dep.control_users.append(op)
    op.explicit_port0 = explicit
