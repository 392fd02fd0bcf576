"""The SSA graph: values, ops and the mutation API that keeps use-lists true.

Every `Value` is defined by exactly one op result and knows its uses; every
`Op` knows its operands, results and control dependencies (and who depends on
it).  Passes change the graph only through the methods here, so use-lists,
the name table and the op order never drift apart.

Ops keep GraphDef order, not topological order: TensorFlow graphs may list a
node before its inputs, and TF1 loops feed NextIteration back into Merge.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Iterator, Mapping, NamedTuple, Optional, Sequence

from compiler.ir.attrs import AttrMap
from compiler.ir.dtypes import DType
from compiler.ir.op_registry import infer_result_types
from compiler.ir.shapes import Shape, UNKNOWN_SHAPE


class IRError(Exception):
    """A misuse of the IR API (unknown name, erasing a value still in use...)."""


class StructureClock:
    """Counts structural changes (operands, uses, control edges, op list, names) made through
    this module, in any graph.  The verifier instrument reads it to skip re-checking a graph no
    pass changed; attribute and type edits do not count, as the verifier does not read them."""

    ticks = 0


# The usual `explicit_port0`: one shared empty set rather than one made per op.
_NO_SLOTS: frozenset[int] = frozenset()


class Value:
    """One result of one op: `op.results[index]`."""

    __slots__ = ("op", "index", "dtype", "shape", "uses")

    def __init__(self, op: "Op", index: int, dtype: Optional[DType], shape: Shape) -> None:
        self.op = op
        self.index = index
        self.dtype = dtype
        self.shape = shape
        self.uses: list[tuple[Op, int]] = []  # (consumer, operand index)

    @property
    def name(self) -> str:
        """TensorFlow's tensor name: `node` for port 0, else `node:port`."""
        return self.op.name if self.index == 0 else f"{self.op.name}:{self.index}"

    @property
    def users(self) -> list["Op"]:
        """Distinct consuming ops, in first-use order."""
        seen: dict[Op, None] = {}
        for op, _ in self.uses:
            seen.setdefault(op, None)
        return list(seen)

    def replace_all_uses_with(self, new: "Value") -> int:
        """Point every use of this value at `new`; returns how many were moved."""
        if new is self:
            return 0
        StructureClock.ticks += 1
        moved = self.uses
        self.uses = []
        for op, i in moved:
            operands = op._operands
            op._operands = (*operands[:i], new, *operands[i + 1:])
            new.uses.append((op, i))
        return len(moved)

    def __repr__(self) -> str:
        return f"<Value %{self.name}>"


class Op:
    """One TensorFlow node: type, attributes, operands, results, control deps."""

    __slots__ = (
        "type", "_name", "attrs", "_operands", "results", "_control_deps", "control_users",
        "device", "extras", "explicit_port0", "origin", "graph", "_prev", "_next", "__weakref__",
    )

    def __init__(self, type: str, name: str, attrs: AttrMap, device: str = "") -> None:
        self.type = type
        self._name = name
        self.attrs = attrs
        self._operands: tuple[Value, ...] = ()  # a tuple, replaced on change: `operands` hands it out uncopied
        self.results: list[Value] = []
        self._control_deps: list[Op] = []
        self.control_users: list[Op] = []
        self.device = device
        # Raw NodeDef fields the IR does not model, carried to the output as is.
        self.extras: bytes = b""
        # Operand slots whose source spelled port 0 as `name:0`.
        self.explicit_port0: frozenset[int] = _NO_SLOTS
        # What the frontend lowered this op from, or None: (NodeDef message, attribute sources,
        # name, type, device, input strings).  A backend may write the message itself while the
        # op still matches it (see graphdef/emit.py).
        self.origin: Optional[tuple[Any, Mapping[str, Any], str, str, str, list[str]]] = None
        self.graph: Optional[Graph] = None
        self._prev: Optional[Op] = None
        self._next: Optional[Op] = None

    # -- read access -------------------------------------------------------
    @property
    def name(self) -> str:
        return self._name

    @property
    def operands(self) -> tuple[Value, ...]:
        return self._operands  # a tuple, replaced on change: safe to hand out

    @property
    def control_deps(self) -> tuple["Op", ...]:
        return tuple(self._control_deps)

    @property
    def control_deps_view(self) -> Sequence["Op"]:
        """`control_deps` without the copy, for sweeps over every op that only read it (it
        changes when the op's dependencies do: not for loops that add or remove them)."""
        return self._control_deps

    @property
    def result(self) -> Value:
        """The single result of a one-result op."""
        if len(self.results) != 1:
            raise IRError(f"op '{self.name}' ({self.type}) has {len(self.results)} results, not 1")
        return self.results[0]

    def attr(self, name: str, default: Any = None) -> Any:
        return self.attrs[name] if name in self.attrs else default

    @property
    def users(self) -> list["Op"]:
        """Distinct ops reading any result (data uses only)."""
        seen: dict[Op, None] = {}
        for value in self.results:
            for op, _ in value.uses:
                seen.setdefault(op, None)
        return list(seen)

    @property
    def has_uses(self) -> bool:
        if self.control_users:
            return True
        for value in self.results:  # a loop, not any(): passes ask this of every op, often
            if value.uses:
                return True
        return False

    # -- operand mutation ----------------------------------------------------
    def set_operand(self, index: int, value: Value) -> None:
        operands = self._operands
        old = operands[index]
        if old is value:
            return
        StructureClock.ticks += 1
        old.uses.remove((self, index))
        self._operands = (*operands[:index], value, *operands[index + 1:])
        value.uses.append((self, index))
        self.explicit_port0 = self.explicit_port0 - {index}

    def set_operands(self, values: Sequence[Value]) -> None:
        """Replace the whole operand list (use-lists follow)."""
        StructureClock.ticks += 1
        self._drop_operand_uses()
        self._operands = tuple(values)
        for i, v in enumerate(self._operands):
            v.uses.append((self, i))
        self.explicit_port0 = _NO_SLOTS

    def append_operand(self, value: Value) -> None:
        StructureClock.ticks += 1
        self._operands = (*self._operands, value)
        value.uses.append((self, len(self._operands) - 1))

    def _drop_operand_uses(self) -> None:
        StructureClock.ticks += 1
        for i, v in enumerate(self._operands):
            v.uses.remove((self, i))

    # -- control dependencies ------------------------------------------------
    def add_control_dep(self, dep: "Op") -> None:
        if dep not in self._control_deps:
            StructureClock.ticks += 1
            self._control_deps.append(dep)
            dep.control_users.append(self)

    def remove_control_dep(self, dep: "Op") -> None:
        StructureClock.ticks += 1
        self._control_deps.remove(dep)
        dep.control_users.remove(self)

    def hand_control_users_to(self, new: "Op") -> int:
        """Make every op that control-depends on this one depend on `new` instead, at the same place
        in its list; returns how many ops changed.  Linear in the users: this op's list is cleared
        once, not entry by entry."""
        if not self.control_users:  # most ops: nothing to move
            return 0
        StructureClock.ticks += 1
        users = list(dict.fromkeys(self.control_users))
        for user in users:
            deps = [new if dep is self else dep for dep in user._control_deps]
            new.control_users.extend(user for dep in user._control_deps if dep is self)
            user._control_deps = deps
        self.control_users = []
        return len(users)

    def set_control_deps(self, deps: Iterable["Op"]) -> None:
        """Replace the control dependencies; a dependency kept keeps its entry in the other op's
        control_users, so rewiring the users of a hub with thousands of them stays linear."""
        StructureClock.ticks += 1
        new = list(deps)
        if not new:  # dropping them all (every erased op): nothing is kept, no sets to build
            for dep in self._control_deps:
                dep.control_users.remove(self)
            self._control_deps = new
            return
        kept = set(new) & set(self._control_deps)
        if len(set(new)) != len(new) or len(set(self._control_deps)) != len(self._control_deps):
            kept = set()  # duplicates: rebuild both sides entry by entry
        for dep in self._control_deps:
            if dep not in kept:
                dep.control_users.remove(self)
        for dep in new:
            if dep not in kept:
                dep.control_users.append(self)
        self._control_deps = new

    def __repr__(self) -> str:
        return f"<Op {self.type} '{self.name}'>"


@dataclass
class Versions:
    """GraphDef's VersionDef."""

    producer: int = 0
    min_consumer: int = 0
    bad_consumers: tuple[int, ...] = ()


class EncodedTensorAttr(NamedTuple):
    """A tensor attribute's source message with the input bytes it was parsed from, where those
    are what protobuf would write for it: the serialized AttrValue without serializing it again."""

    source: Any            # the AttrValue message an AttrMap holds
    encoded: memoryview    # its serialization, a view of the input
    content_size: int      # len(source.tensor.tensor_content), which protobuf can only tell by copying

    @property
    def content(self) -> memoryview:
        """The tensor_content bytes, a view of the input (the encoding's last field)."""
        return self.encoded[len(self.encoded) - self.content_size:]


@dataclass
class GraphExtras:
    """Parts of a GraphDef the IR carries without interpreting them."""

    library: Any = None          # FunctionDefLibrary message, or None
    has_versions: bool = False   # whether the source had a `versions` field at all
    legacy_version: int = 0      # GraphDef.version (deprecated field 3)
    debug_info: bytes = b""      # serialized GraphDebugInfo
    unknown: bytes = b""         # fields this schema does not know, verbatim
    misc: dict[str, Any] = field(default_factory=dict)
    # id(source) -> its encoding, for large tensor attributes read from binary input.  Never
    # changed, so copies of the graph share it; each entry holds its source alive, so no other
    # object can have that id while the table lives.
    tensor_encodings: Mapping[int, EncodedTensorAttr] = field(default_factory=dict)

    def copy(self) -> "GraphExtras":
        """A copy whose mutable parts (the library message, `misc`) are its own."""
        return replace(self, library=_copy_library(self.library), misc=dict(self.misc))


class Graph:
    """An ordered collection of uniquely named ops."""

    def __init__(self) -> None:
        self._first: Optional[Op] = None
        self._last: Optional[Op] = None
        self._by_name: dict[str, Op] = {}
        # Ops erased from this graph, still alive if someone holds them: `release` breaks their cycles too.
        self._erased: list[weakref.ref[Op]] = []
        self.versions = Versions()
        self.extras = GraphExtras()

    # -- iteration and lookup ------------------------------------------------
    def __iter__(self) -> Iterator[Op]:
        op = self._first
        while op is not None:
            nxt = op._next
            yield op
            op = nxt

    @property
    def ops(self) -> list[Op]:
        return list(self)

    def __len__(self) -> int:
        return len(self._by_name)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def op(self, name: str) -> Op:
        try:
            return self._by_name[name]
        except KeyError:
            raise IRError(f"no op named '{name}'") from None

    def get(self, name: str) -> Optional[Op]:
        return self._by_name.get(name)

    def value(self, tensor_name: str) -> Value:
        """Look up `node` or `node:port`."""
        name, port = split_tensor_name(tensor_name)
        op = self.op(name)
        if port >= len(op.results):
            raise IRError(f"op '{name}' has no output {port} (it has {len(op.results)})")
        return op.results[port]

    def unique_name(self, base: str) -> str:
        """`base` if free, else `base_1`, `base_2`, ..."""
        if base not in self._by_name:
            return base
        i = 1
        while f"{base}_{i}" in self._by_name:
            i += 1
        return f"{base}_{i}"

    # -- creation ------------------------------------------------------------
    def create_op(
        self,
        type: str,
        name: str,
        operands: Sequence[Value] = (),
        attrs: Optional[Mapping[str, Any] | AttrMap] = None,
        result_types: Optional[Sequence[tuple[Optional[DType], Shape]]] = None,
        control_deps: Iterable[Op] = (),
        device: str = "",
        before: Optional[Op] = None,
        after: Optional[Op] = None,
    ) -> Op:
        """Create an op, link it into the order (default: at the end) and the use-lists.

        `result_types` defaults to what the op registry derives from the type
        and attributes; an op the registry does not know gets one result.
        """
        if name in self._by_name:
            raise IRError(f"an op named '{name}' already exists")
        attr_map = attrs if isinstance(attrs, AttrMap) else AttrMap(attrs or {})
        op = Op(type, name, attr_map, device)
        if result_types is None:
            result_types = infer_result_types(type, attr_map)
        if len(result_types) == 1:  # most ops: no comprehension set up for one value
            dtype, shape = result_types[0]
            op.results = [Value(op, 0, dtype, shape)]
        else:
            op.results = [Value(op, i, dt, sh) for i, (dt, sh) in enumerate(result_types)]
        if operands:
            StructureClock.ticks += 1
            op._operands = tuple(operands)
            for i, value in enumerate(op._operands):
                value.uses.append((op, i))
        for dep in control_deps:
            op.add_control_dep(dep)
        self._link(op, before=before, after=after)
        return op

    def _link(self, op: Op, before: Optional[Op] = None, after: Optional[Op] = None) -> None:
        StructureClock.ticks += 1
        op.graph = self
        self._by_name[op.name] = op
        if before is not None:
            prev = before._prev
            op._prev, op._next = prev, before
            before._prev = op
            if prev is None:
                self._first = op
            else:
                prev._next = op
        elif after is not None:
            nxt = after._next
            op._prev, op._next = after, nxt
            after._next = op
            if nxt is None:
                self._last = op
            else:
                nxt._prev = op
        else:
            op._prev, op._next = self._last, None
            if self._last is None:
                self._first = op
            else:
                self._last._next = op
            self._last = op

    def _unlink(self, op: Op) -> None:
        StructureClock.ticks += 1
        if op._prev is None:
            self._first = op._next
        else:
            op._prev._next = op._next
        if op._next is None:
            self._last = op._prev
        else:
            op._next._prev = op._prev
        op._prev = op._next = None

    def move_before(self, op: Op, anchor: Op) -> None:
        """Reorder `op` to stand just before `anchor`."""
        if op is anchor:
            return
        self._unlink(op)
        self._link(op, before=anchor)

    def move_to_end(self, op: Op) -> None:
        self._unlink(op)
        self._link(op)

    def reorder(self, ops: Sequence[Op]) -> None:
        """Put all ops in the given order (which must list every op once)."""
        if len(ops) != len(self._by_name) or len(set(map(id, ops))) != len(ops):
            raise IRError("reorder needs every op exactly once")
        self._relink(list(ops))

    # -- renaming and erasure ------------------------------------------------
    def rename(self, op: Op, new_name: str) -> None:
        """Rename an op; every reference follows because references are pointers."""
        if new_name == op.name:
            return
        if new_name in self._by_name:
            raise IRError(f"cannot rename '{op.name}': '{new_name}' already exists")
        StructureClock.ticks += 1
        del self._by_name[op.name]
        op._name = new_name
        self._by_name[new_name] = op

    def erase_op(self, op: Op) -> None:
        """Remove an op whose results are unused and that nobody control-depends on."""
        for value in op.results:  # a loop, not any(): passes erase thousands of ops
            if value.uses:
                users = ", ".join(sorted({u.name for v in op.results for u, _ in v.uses}))
                raise IRError(f"cannot erase '{op.name}': its results are used by {users}")
        if op.control_users:
            users = ", ".join(sorted(u.name for u in op.control_users))
            raise IRError(f"cannot erase '{op.name}': {users} control-depend on it")
        _detach(op)
        self._unlink(op)
        del self._by_name[op.name]
        op.graph = None
        self._erased.append(weakref.ref(op))

    def erase_ops(self, ops: Iterable[Op]) -> int:
        """Erase a set of ops that may use each other but nothing outside the set."""
        doomed = list(dict.fromkeys(ops))
        inside = set(doomed)
        for op in doomed:
            outside = [u for v in op.results for u, _ in v.uses if u not in inside]
            outside += [u for u in op.control_users if u not in inside]
            if outside:
                raise IRError(f"cannot erase '{op.name}': '{outside[0].name}' still uses it")
        for op in doomed:
            _detach(op)
        for op in doomed:
            self.erase_op(op)
        return len(doomed)

    def replace_op(self, old: Op, new_values: Sequence[Value]) -> None:
        """Redirect every use of `old`'s results to `new_values`, move its control
        users onto the ops defining the new values, then erase `old`."""
        if len(new_values) != len(old.results):
            raise IRError(f"replacing '{old.name}' needs {len(old.results)} values, got {len(new_values)}")
        for value, new in zip(old.results, new_values):
            value.replace_all_uses_with(new)
        providers = list(dict.fromkeys(v.op for v in new_values))
        for user in list(old.control_users):
            user.remove_control_dep(old)
            for provider in providers:
                user.add_control_dep(provider)
        self.erase_op(old)

    def release(self) -> None:
        """Empty the graph, breaking the reference cycles between its ops and values.

        Ops and values point at each other, so a dropped graph is freed only by the
        cyclic collector, which must then visit every object of it.  A caller that is
        done with a graph (the API after emitting it) releases it instead, and
        reference counting frees it at once.  Ops erased from it earlier (and not since
        put back) are released as well.
        """
        StructureClock.ticks += 1
        op = self._first
        while op is not None:
            nxt = op._next
            _break_cycles(op)
            op = nxt
        for ref in self._erased:  # erased ops still point at their results and back: cycles too
            erased = ref()
            if erased is not None and erased.graph is None:
                _break_cycles(erased)
        self._first = self._last = None
        self._by_name = {}
        self._erased = []

    @staticmethod
    def hand_over_control_users(moves: Sequence[tuple[Op, Op]]) -> int:
        """`old.hand_control_users_to(new)` for each (old, new) in turn, with the same result, but
        each affected op's dependency list is rebuilt once: a NoOp that waits on hundreds of
        removed Identities costs one pass over its list, not one per Identity.

        Returns how many (old, user) pairs moved.  Chains (a `new` that is also an `old`)
        go one move at a time.
        """
        StructureClock.ticks += 1
        target = dict(moves)
        if len(target) != len(moves) or any(new in target for new in target.values()):
            return sum(old.hand_control_users_to(new) for old, new in moves)
        touched: dict[Op, None] = {}
        moved = 0
        for old, new in moves:
            entries: dict[Op, list[Op]] = {}  # one entry per edge, grouped by user in first-use order
            for user in old.control_users:
                entries.setdefault(user, []).append(user)
            for same_user in entries.values():
                new.control_users.extend(same_user)
            touched.update(dict.fromkeys(entries))
            moved += len(entries)
            old.control_users = []
        for user in touched:
            user._control_deps = [target.get(dep, dep) for dep in user._control_deps]
        return moved

    def clone(self) -> "Graph":
        """A deep structural copy (tensors and attribute sources are shared, they are immutable).

        Use-lists and control_users of the copy list their entries in op order."""
        out = Graph()
        out.versions = Versions(self.versions.producer, self.versions.min_consumer, self.versions.bad_consumers)
        out.extras = replace(self.extras, misc=dict(self.extras.misc))
        ops = list(self)
        copies = [Op(op.type, op._name, op.attrs.copy(), op.device) for op in ops]
        mapping = dict(zip(ops, copies))
        for op, new in zip(ops, copies):
            new.extras = op.extras
            new.explicit_port0 = op.explicit_port0
            new.results = [Value(new, v.index, v.dtype, v.shape) for v in op.results]
        for op, new in zip(ops, copies):
            operands = tuple([mapping[v.op].results[v.index] for v in op._operands])
            new._operands = operands
            for i, value in enumerate(operands):
                value.uses.append((new, i))
            if op._control_deps:  # as add_control_dep would: a duplicate is not copied
                new._control_deps = list(dict.fromkeys(mapping[dep] for dep in op._control_deps))
                for dep in new._control_deps:
                    dep.control_users.append(new)
        out._relink(copies)
        return out

    def _relink(self, ops: list[Op]) -> None:
        """Make `ops`, in this order, the graph's whole op list and name table."""
        StructureClock.ticks += 1
        prev: Optional[Op] = None
        for op in ops:
            op.graph = self
            op._prev = prev
            if prev is not None:
                prev._next = op
            prev = op
        if prev is not None:
            prev._next = None
        self._first = ops[0] if ops else None
        self._last = prev
        self._by_name = {op._name: op for op in ops}


def _detach(op: Op) -> None:
    """Drop `op`'s operands and control dependencies, both ends of each edge (ops being erased)."""
    if op._operands:
        op._drop_operand_uses()
        op._operands = ()
    if op._control_deps:
        op.set_control_deps(())


def _break_cycles(op: Op) -> None:
    """Drop every reference `op` holds to other ops and values.  Its values may still point at
    it and at their readers, but with no op pointing at a value that is no cycle: nothing needs
    a loop over the results."""
    op.results = []
    op._operands = ()
    if op._control_deps:  # most are empty: a test is cheaper than a new list
        op._control_deps = []
    if op.control_users:
        op.control_users = []
    op._prev = op._next = None
    op.graph = None


class Checkpoint:
    """What a graph holds right now, to put back in place if a pass fails.

    Nothing is copied but the lists and maps a pass can change: every op's and value's
    fields, operand, result, control and use lists, attribute maps, the op order and the
    graph-level extras.  Ops and values are the same objects after `restore`, so
    references into the graph stay good; ops the failed pass created drop out.
    """

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.ops = list(graph)
        # Control lists are mostly empty: kept as () rather than copied.
        self.op_states = [(op.type, op._name, op.attrs, op.attrs.contents(), op._operands, op.results[:],
                           op._control_deps[:] if op._control_deps else (),
                           op.control_users[:] if op.control_users else (), op.device, op.extras, op.explicit_port0)
                          for op in self.ops]
        self.value_states = [(v, v.op, v.index, v.dtype, v.shape, v.uses[:]) for op in self.ops for v in op.results]
        v = graph.versions
        self.versions = (v.producer, v.min_consumer, v.bad_consumers)
        self.extras = graph.extras.copy()

    def restore(self) -> None:
        """Put the graph back as it was when the checkpoint was taken (any number of times)."""
        for op, state in zip(self.ops, self.op_states):
            (op.type, op._name, op.attrs, contents, operands, results, deps, users, op.device, op.extras,
             op.explicit_port0) = state
            op.attrs.restore_contents(contents)
            op._operands, op.results, op._control_deps, op.control_users = operands, results[:], list(deps), list(users)
        for value, op, index, dtype, shape, uses in self.value_states:
            value.op, value.index, value.dtype, value.shape, value.uses = op, index, dtype, shape, uses[:]
        self._drop_new_ops()
        self.graph._relink(self.ops)
        self.graph.versions = Versions(*self.versions)
        self.graph.extras = self.extras.copy()

    def _drop_new_ops(self) -> None:
        """Ops the failed pass created leave the graph as if erased (so `release` frees them too)."""
        kept = set(self.ops)
        for op in self.graph:
            if op not in kept:
                op.graph = None
                self.graph._erased.append(weakref.ref(op))


def _copy_library(library: Any) -> Any:
    """A function library is a mutable protobuf message: copy it whole."""
    if library is None:
        return None
    copied = type(library)()
    copied.CopyFrom(library)
    return copied


def split_tensor_name(tensor_name: str) -> tuple[str, int]:
    """`a/b:2` -> (`a/b`, 2); `a/b` -> (`a/b`, 0)."""
    head, sep, tail = tensor_name.rpartition(":")
    if sep and tail.isdigit():
        return head, int(tail)
    return tensor_name, 0


__all__ = ["Checkpoint", "EncodedTensorAttr", "Graph", "Op", "Value", "Versions", "GraphExtras", "IRError", "StructureClock",
           "split_tensor_name", "UNKNOWN_SHAPE"]
