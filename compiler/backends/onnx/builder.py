"""An editable ONNX graph under construction: nodes, names, initializers.

Lowerings append nodes here instead of building protobufs directly, so
emission-time peepholes (a BiasAdd folding into the Conv its producer
emitted) can still edit a node, tensors can be renamed to the user's output
names, and dead nodes are pruned before anything is serialized.  Names are
global across subgraphs, as ONNX requires; initializers all live in the
main graph, where every subgraph can see them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Optional, Sequence, Union

import numpy as np
import onnx
from onnx import helper, numpy_helper

from compiler.backends.onnx.errors import OnnxExportError

Dim = Union[int, str, None]

# Small constants are shared by content: one `0.0` or `[2, 3]` for the whole model.
_SHARED_CONSTANT_LIMIT = 64


@dataclass
class ValueSpec:
    """A typed tensor declaration: `dims is None` means unknown rank."""

    name: str
    elem_type: int
    dims: Optional[tuple[Dim, ...]] = None

    def to_proto(self) -> onnx.ValueInfoProto:
        dims = None if self.dims is None else [_declarable(d) for d in self.dims]
        return helper.make_tensor_value_info(self.name, self.elem_type, dims)


def _declarable(dim: Dim) -> Dim:
    """A dimension as ONNX can declare it: an int64 extent inferred from a corrupt graph (negative,
    or past 2^63) is declared unknown rather than refused by onnx's helper."""
    if isinstance(dim, int) and not 0 <= dim < 1 << 63:
        return None
    return dim


@dataclass
class Node:
    """One ONNX node; attribute values may be GraphBuilders (subgraphs), serialized last."""

    op_type: str
    inputs: list[str]
    outputs: list[str]
    name: str
    attrs: dict[str, Any] = field(default_factory=dict)
    domain: str = ""

    def subgraphs(self) -> list["GraphBuilder"]:
        return [v for v in self.attrs.values() if isinstance(v, GraphBuilder)]

    def to_proto(self) -> onnx.NodeProto:
        attrs = {k: (v.to_proto(f"{self.name}/{k}") if isinstance(v, GraphBuilder) else v)
                 for k, v in self.attrs.items()}
        try:
            return helper.make_node(self.op_type, self.inputs, self.outputs, name=self.name,
                                    domain=self.domain or None, **attrs)
        except ValueError as err:  # an attribute ONNX cannot hold, e.g. an int past int64 from a TF attribute
            raise OnnxExportError(f"node '{self.name}' ({self.op_type}): an attribute ONNX cannot hold: {err}") from None


class NameTable:
    """Names already used; `reserved` names (the TF graph's) are handed out only on request."""

    def __init__(self, reserved: Iterable[str] = ()) -> None:
        self._taken: set[str] = set()
        self._reserved = set(reserved)

    def claim(self, name: str) -> str:
        """`name` itself if still free (reserved names included), else a fresh variant."""
        if name not in self._taken:
            self._taken.add(name)
            return name
        return self.fresh(name)

    def take(self, name: str) -> None:
        """Mark `name` used (a reserved name the caller is about to give a tensor)."""
        self._taken.add(name)

    def fresh(self, base: str) -> str:
        """An unused, unreserved name starting with `base`."""
        name, i = base, 0
        while name in self._taken or name in self._reserved:
            i += 1
            name = f"{base}_{i}"
        self._taken.add(name)
        return name


# Elements sampled from a large array to find the arrays that may equal it.
_SAMPLED = 64


def _sharing_key(array: np.ndarray, exact: bool) -> Optional[tuple[str, tuple[int, ...], bytes]]:
    """Where to look for arrays holding `array`'s value (see ModelScope.initializer): all its bytes
    when small, else evenly spaced elements of it, the candidates then compared whole (hashing every
    large array instead cost MobileNetV2's export half again its time); None for what is not shared."""
    if array.dtype == object:
        return None
    if array.size <= _SHARED_CONSTANT_LIMIT:
        return array.dtype.str, array.shape, array.tobytes()
    if exact:
        return None
    flat = array.reshape(-1)
    return array.dtype.str, array.shape, flat[::max(1, flat.size // _SAMPLED)].tobytes()


class ModelScope:
    """What all graphs of one model share: tensor and node names, and the initializers."""

    def __init__(self, opset: int, reserved: Iterable[str] = ()) -> None:
        reserved = set(reserved)
        self.opset = opset
        self.tensors = NameTable(reserved)
        self.nodes = NameTable(reserved)
        self.initializers: dict[str, np.ndarray] = {}
        self._shared: dict[tuple[str, tuple[int, ...], bytes], list[str]] = {}

    def initializer(self, array: np.ndarray, base: str, exact: bool = False) -> str:
        """Register a constant and return its tensor name, shared by value: every small one, and
        a large one a lowering derives (not `exact`), so that convolutions reading one TF filter
        (a detection head run on every pyramid level) read one OIHW copy of it, not one each.

        `exact` asks for `base` itself (a TF constant keeping its TF name) when free.
        """
        array = np.asarray(array)
        key = _sharing_key(array, exact)
        for shared in self._shared.get(key, ()) if key is not None else ():
            if array.size <= _SHARED_CONSTANT_LIMIT or np.array_equal(self.initializers[shared], array):
                return shared
        name = self.tensors.claim(base) if exact else self.tensors.fresh(base)
        self.initializers[name] = array
        if key is not None:
            self._shared.setdefault(key, []).append(name)
        return name

    def initializer_protos(self, used: set[str]) -> list[onnx.TensorProto]:
        # (not np.ascontiguousarray: it turns scalars into 1-element vectors)
        return [numpy_helper.from_array(a if a.flags.c_contiguous else a.copy(order="C"), n)
                for n, a in self.initializers.items() if n in used]


class GraphBuilder:
    """The nodes, inputs and outputs of one graph (the model's or a subgraph)."""

    def __init__(self, scope: ModelScope) -> None:
        self.scope = scope
        self.nodes: list[Node] = []
        self.inputs: list[ValueSpec] = []
        self.outputs: list[ValueSpec] = []
        self.value_info: dict[str, ValueSpec] = {}
        self._producers: dict[str, Node] = {}
        self._pending_outputs: list[tuple[str, ValueSpec]] = []
        self._aliases: dict[str, str] = {}  # old -> new name, for renames

    # -- construction --------------------------------------------------------
    def add_node(self, op_type: str, inputs: Sequence[str], outputs: Sequence[str], name: str,
                 attrs: Optional[dict[str, Any]] = None, domain: str = "") -> Node:
        node = Node(op_type, list(inputs), list(outputs), name, dict(attrs or {}), domain)
        self.nodes.append(node)
        for out in node.outputs:
            self._producers[out] = node
        return node

    def move_before(self, node: Node, anchor: Node) -> None:
        """Place `node` just before `anchor`, for an input made after the node that reads it."""
        self.nodes.remove(node)
        self.nodes.insert(self.nodes.index(anchor), node)

    def remove(self, node: Node) -> None:
        """Take `node` out of the graph (a peephole replacing it)."""
        self.nodes.remove(node)
        for out in node.outputs:
            if self._producers.get(out) is node:
                del self._producers[out]

    def substitute(self, old: Node, new: Node) -> None:
        """Put `new` in `old`'s place, producing what it produced (a peephole respelling a node)."""
        self.nodes[self.nodes.index(old)] = new
        for out in old.outputs:
            if self._producers.get(out) is old:
                del self._producers[out]
        for out in new.outputs:
            self._producers[out] = new

    def drop_output(self, node: Node, tensor: str) -> None:
        """Stop `node` computing its optional output `tensor`, which nothing reads any more."""
        node.outputs = ["" if out == tensor else out for out in node.outputs]
        if self._producers.get(tensor) is node:
            del self._producers[tensor]
        self.value_info.pop(tensor, None)

    def add_input(self, spec: ValueSpec) -> None:
        self.inputs.append(spec)

    def producer(self, tensor: str) -> Optional[Node]:
        """The node of this graph that computes `tensor` (None for inputs, initializers, outer names)."""
        return self._producers.get(tensor)

    def readers(self, tensor: str) -> list[Node]:
        """The nodes of this graph reading `tensor`, directly or from a subgraph they hold."""
        return [node for node in self.nodes if tensor in node_reads(node)]

    def is_exposed(self, tensor: str) -> bool:
        """Whether `tensor` is, or is about to become, an output of this graph."""
        tensor = self._aliases.get(tensor, tensor)
        return any(t == tensor for t, _ in self._pending_outputs) or any(o.name == tensor for o in self.outputs)

    def annotate(self, spec: ValueSpec) -> None:
        """Record an intermediate tensor's type and shape for the model's value_info."""
        self.value_info[spec.name] = spec

    def expose(self, tensor: str, spec: ValueSpec) -> None:
        """Make `tensor` the graph output `spec.name` (settled when the graph is finished)."""
        self._pending_outputs.append((tensor, spec))

    def settle_outputs(self) -> None:
        """Give each exposed tensor its output name: rename it when nothing else needs the old
        name, else add an Identity.  A tensor already holding an output's name (a TF node's
        channels-first result, when the output is its TF-layout copy) steps aside."""
        for tensor, spec in self._pending_outputs:
            tensor = self._aliases.get(tensor, tensor)
            if tensor != spec.name:
                if spec.name in self._producers:
                    self.rename(spec.name, self.scope.tensors.fresh(f"{spec.name}/stored"))
                else:
                    self.scope.tensors.take(spec.name)
                if tensor in self._producers and all(o.name != tensor for o in self.outputs):
                    self.rename(tensor, spec.name)
                else:
                    self.add_node("Identity", [tensor], [spec.name], self.scope.nodes.claim(spec.name))
            self.outputs.append(spec)
        self._pending_outputs = []

    def rename(self, old: str, new: str) -> None:
        """Rename a tensor this graph produces, everywhere it is read (subgraphs included)."""
        node = self._producers.pop(old)
        node.outputs = [new if o == old else o for o in node.outputs]
        self._producers[new] = node
        self._aliases[old] = new
        if old in self.value_info:
            spec = self.value_info.pop(old)
            self.value_info[new] = ValueSpec(new, spec.elem_type, spec.dims)
        self._rename_uses(old, new)

    def replace_uses(self, old: str, new: str) -> None:
        """Make every reader of `old` read `new` instead (a peephole found them equal)."""
        self._rename_uses(old, new)

    def _rename_uses(self, old: str, new: str) -> None:
        self._pending_outputs = [(new if t == old else t, spec) for t, spec in self._pending_outputs]
        for node in self.nodes:
            node.inputs = [new if i == old else i for i in node.inputs]
            for sub in node.subgraphs():
                sub._rename_uses(old, new)

    # -- cleanup -------------------------------------------------------------
    def prune(self) -> int:
        """Settle outputs, then drop nodes no output depends on (subgraphs first); returns how many went."""
        self.settle_outputs()
        removed = sum(sub.prune() for node in self.nodes for sub in node.subgraphs())
        live: set[str] = {o.name for o in self.outputs}
        kept: list[Node] = []
        for node in reversed(self.nodes):
            if any(out in live for out in node.outputs):
                kept.append(node)
                live.update(node_reads(node))
            else:
                removed += 1
                for out in node.outputs:
                    self._producers.pop(out, None)
        self.nodes = kept[::-1]
        self.value_info = {k: v for k, v in self.value_info.items() if k in self._producers}
        return removed

    def restore_order(self) -> None:
        """Reorder the nodes so each comes after the producers of what it reads, after a peephole
        added nodes at the end; nodes already in order keep their places (a stable sort)."""
        index = {id(node): i for i, node in enumerate(self.nodes)}
        placed: set[int] = set()
        order: list[Node] = []
        for root in self.nodes:
            stack, entered = [root], set()
            while stack:
                node = stack[-1]
                if id(node) in placed:
                    stack.pop()
                    continue
                waiting = [] if id(node) in entered else self._unplaced_producers(node, placed, index)
                entered.add(id(node))   # a cycle (none in a valid graph) is placed as found
                if waiting:
                    stack.extend(waiting)
                else:
                    placed.add(id(node))
                    order.append(node)
                    stack.pop()
        self.nodes = order

    def _unplaced_producers(self, node: Node, placed: set[int], index: dict[int, int]) -> list[Node]:
        """The producers of what `node` reads that are not placed yet, the earliest last (popped first)."""
        found = {id(p): p for p in (self._producers.get(t) for t in node_reads(node)) if p is not None}
        return sorted((p for key, p in found.items() if key not in placed), key=lambda p: index[id(p)], reverse=True)

    def iter_nodes(self) -> Iterator[Node]:
        """Every node, subgraphs included, depth first."""
        for node in self.nodes:
            yield node
            for sub in node.subgraphs():
                yield from sub.iter_nodes()

    # -- serialization -------------------------------------------------------
    def to_proto(self, name: str, initializers: Sequence[onnx.TensorProto] = ()) -> onnx.GraphProto:
        declared = {s.name for s in self.inputs} | {s.name for s in self.outputs}
        infos = [s.to_proto() for k, s in self.value_info.items() if k not in declared]
        return helper.make_graph([n.to_proto() for n in self.nodes], name,
                                 [s.to_proto() for s in self.inputs], [s.to_proto() for s in self.outputs],
                                 initializer=list(initializers), value_info=infos)


def constant_ints(builder: GraphBuilder, name: str) -> Optional[list[int]]:
    """The values of an integer vector initializer (a Slice's bounds, a Squeeze's axes), else None."""
    array = _integer_initializer(builder, name, 1)
    return None if array is None else [int(v) for v in array]


def constant_int(builder: GraphBuilder, name: str) -> Optional[int]:
    """The value of an integer scalar initializer (a Loop's trip count), else None."""
    array = _integer_initializer(builder, name, 0)
    return None if array is None else int(array)


def _integer_initializer(builder: GraphBuilder, name: str, ndim: int) -> Optional[np.ndarray]:
    array = builder.scope.initializers.get(name)
    return array if array is not None and array.dtype.kind in "iu" and array.ndim == ndim else None


# A Slice bound at least this far out runs to the end of its axis.
RUNS_TO_END = 1 << 62


def slice_bounds(builder: GraphBuilder, node: Node) -> Optional[tuple[Optional[list[int]], ...]]:
    """A Slice's constant (starts, ends, axes, steps), each None where not a constant vector, steps
    [1] when omitted; None for a node that is not a Slice with axes given."""
    if node.op_type != "Slice" or node.domain or len(node.inputs) < 4:
        return None
    starts, ends, axes = (constant_ints(builder, name) for name in node.inputs[1:4])
    steps = constant_ints(builder, node.inputs[4]) if len(node.inputs) > 4 and node.inputs[4] else [1]
    return starts, ends, axes, steps


def node_reads(node: Node) -> set[str]:
    """Every tensor name a node reads, including names its subgraphs read from outside."""
    names = {i for i in node.inputs if i}
    for sub in node.subgraphs():
        for inner in sub.iter_nodes():
            names.update(i for i in inner.inputs if i)
    return names
