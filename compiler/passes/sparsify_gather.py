"""sparsify_gather: turn embedding Gathers on sparse frozen weights into hash-table lookups.

GTT matches `Const -> Identity -> Gather(params, ids)` (and the same with
`GatherV2(params, ids, axis Const)` along axis 0), where the weights are a
float `[N, 1]` column, as in TF.learn linear models.  Each match becomes

    <w>/indices  Const int64[k]    rows whose |weight| >= 1e-5 (or [0] if none)
    <w>/values   Const float[k]    their weights (or [0.0])
    <w>/HashTable        HashTable(key_dtype=int64, value_dtype=float)
    <w>/InitializeTable  InitializeTable(<w>/HashTable, <w>/indices, <w>/values)
    <g>/LookupTableFind  LookupTableFind(<w>/HashTable, ids, <g>/Const)
    <g>/Const            Const float 0.0 (the value of every row left out)
    <g>/ExpandDims/Const Const int32 -1
    <g>                  ExpandDims(<g>/LookupTableFind, <g>/ExpandDims/Const)

written where the Gather stood, after the node producing the ids (which
moves there).  Nothing in the lookup path depends on the initializer: the
NoOp `group_init_node` (default `group_deps`, created at the end of the
graph if missing, even when nothing matched) gets a control input from every
InitializeTable, and a user must run it once before the lookups - in
TensorFlow `session.run("group_deps")`, in gttc's interpreter
`Interpreter.run({}, [], targets=["group_deps"])` or `initialize_tables()`.

GTT then deletes the Identity and weights and, by counting references to
input strings, everything that only they fed; nodes that lose an input to
them are repaired or pruned as GTT does (a ConcatV2 loses that operand or
becomes an Identity; Assign, Reshape, Equal, Mean and ScalarSummary left with
one input and nodes left with none are deleted, recursively).  It also strips
`_output_shapes` from every node.  gttc does all of this with GTT's names,
attributes, tensor encodings and node order.

Where GTT would fail or write a graph TensorFlow cannot run, gttc leaves the
Gather alone and says why: weights that are not float `[N, 1]`, a GatherV2
along another axis (GTT stops with an error); int32 ids (GTT's int64
LookupTableFind would not load); control inputs GTT would drop; weights,
Identity or axis that are graph inputs/outputs or that other ops still read
in a way GTT's clean-up breaks (found by trying the clean-up on a copy);
new names already taken.  Variable/VariableV2 weights need GTT's
`input_checkpoint`, which gttc does not read: freeze the graph first.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Optional

import numpy as np

from compiler.errors import PassFailure
from compiler.graphutil.graphdef_header import discard_graphdef_header
from compiler.graphutil.names import node_names
from compiler.graphutil.order import gtt_execution_order
from compiler.graphutil.rewire import set_explicit_port0
from compiler.ir.dtypes import DType
from compiler.ir.graph import Graph, Op, Value
from compiler.ir.tensor import Tensor
from compiler.passes.base import Param, Pass, PassContext, PassResult, register_pass
from compiler.passes.quantize_weights import tf_encoded_tensor
from compiler.proto.codec import decode_tensor
from compiler.proto.tensor_pb2 import TensorProto
from compiler.rewrite.edit import take_place

GATHER_TYPES = ("Gather", "GatherV2")  # GTT runs one full sweep per type, in this order
WEIGHT_TYPES = frozenset({"Const", "Variable", "VariableV2"})
VARIABLE_TYPES = frozenset({"Variable", "VariableV2"})
# GTT deletes these once a removed input leaves them with a single input.
PRUNED_AT_ONE_INPUT = frozenset({"Assign", "Reshape", "Equal", "Mean", "ScalarSummary"})
ZERO_THRESHOLD = 1.0e-5
SHAPES_ATTR = "_output_shapes"
MAX_LISTED = 8


@register_pass
class SparsifyGather(Pass):
    """Replace Gather/GatherV2 of a frozen sparse [N, 1] float weight by a HashTable lookup of its non-zero rows.

    Output identical to GTT's; the tables must be initialized once by running
    the NoOp `group_init_node` before the lookups.  Gathers GTT would reject
    or break are left alone, each with its reason in the report.
    """

    name = "sparsify_gather"
    params = (
        Param("group_init_node", "str", "group_deps",
              "NoOp that runs every table initializer (created at the end if missing)"),
        Param("input_checkpoint", "str", None,
              "GTT reads Variable weights from this checkpoint; gttc cannot (freeze the graph instead)"),
    )

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        if ctx.has("input_checkpoint"):
            raise PassFailure("sparsify_gather: gttc does not read TensorFlow checkpoints (input_checkpoint); "
                              "freeze the graph (variables to constants) and run it on the frozen graph")
        group_name: str = ctx.param("group_init_node")
        _check_group_node(graph, group_name)
        state = _State(group_name, list(ctx.inputs) + list(ctx.outputs),
                       node_names(ctx.inputs) | node_names(ctx.outputs), set(graph.ops))
        stripped = _strip_output_shapes(graph)
        had_group = group_name in graph
        for op_type in GATHER_TYPES:
            _sparsify_all(graph, op_type, state)
        dropped_header = discard_graphdef_header(graph)
        result = PassResult(sites=len(state.converted),
                            changed=bool(state.converted or stripped or dropped_header) or not had_group)
        _report(result, graph, state, stripped, had_group)
        return result


# -- one match ----------------------------------------------------------------------------


@dataclass
class Site:
    """One GTT match: the Gather, its params Identity and weights, the ids producer, the axis Const."""

    head: Op
    identity: Op
    weights: Op
    ids: Op
    axis: Optional[Op]

    @property
    def nodes(self) -> list[Op]:
        return [self.head, self.identity, self.weights, self.ids] + ([self.axis] if self.axis else [])

    @property
    def dropped(self) -> list[Op]:
        """The nodes GTT does not write back (the head is replaced, the ids producer re-emitted)."""
        return [self.identity, self.weights] + ([self.axis] if self.axis else [])

    def is_exclusive(self) -> bool:
        """Nothing outside the match reads the dropped nodes, so GTT's clean-up touches only them."""
        inside = {self.head, *self.dropped}
        return all(set(op.users) <= inside and not op.control_users for op in self.dropped)


@dataclass
class _State:
    """What the whole pass carries across sweeps and rounds, and what it reports."""

    group_name: str
    io_strings: list[str]
    protected: set[str]
    original: set[Op] = field(default_factory=set)
    converted: list[str] = field(default_factory=list)
    left_alone: dict[str, str] = field(default_factory=dict)
    pruned: list[str] = field(default_factory=list)


def examine(op: Op, op_type: str, protected: set[str]) -> tuple[Optional[Site], str]:
    """The match rooted at `op`, or None and why not ('' when `op` is not a `op_type` at all)."""
    if op.type != op_type:
        return None, ""
    site, why = _structure(op, op_type)
    if site is None:
        return None, why
    why = _gtt_rejects(site) or _gtt_breaks(site, protected)
    return (None, why) if why else (site, "")


def _structure(op: Op, op_type: str) -> tuple[Optional[Site], str]:
    """GTT's pattern: Gather(Identity(Const|Variable|VariableV2), *) or GatherV2(..., *, Const)."""
    arity = 2 if op_type == "Gather" else 3
    if len(op.operands) != arity:
        return None, f"it has {len(op.operands)} data inputs, not {arity}"
    identity = op.operands[0].op
    if identity.type != "Identity" or len(identity.operands) != 1:
        return None, f"its params come from {identity.type} '{identity.name}', not from an Identity of a Const"
    weights = identity.operands[0].op
    if weights.type not in WEIGHT_TYPES:
        return None, f"its params are read from {weights.type} '{weights.name}', not from a Const"
    axis = op.operands[2].op if op_type == "GatherV2" else None
    if axis is not None and axis.type != "Const":
        return None, f"its axis comes from {axis.type} '{axis.name}', not from a Const"
    return Site(op, identity, weights, op.operands[1].op, axis), ""


def _gtt_rejects(site: Site) -> str:
    """Why GTT would stop with an error on this match ('' if it would not)."""
    weights = site.weights
    if weights.type in VARIABLE_TYPES:
        return (f"its params are {weights.type} '{weights.name}': GTT reads those from input_checkpoint, "
                "which gttc does not (freeze the graph first)")
    if site.axis is not None:
        axis = _axis_value(site.axis)
        if axis != 0:
            return f"it gathers along axis {axis}; only axis 0 can become a lookup"
    if weights.attr("dtype") != DType.FLOAT:
        return f"its params '{weights.name}' are {_dtype_name(weights.attr('dtype'))}, not float"
    tensor = weights.attr("value")
    if not isinstance(tensor, Tensor) or not tensor.is_decodable:
        return f"the value of '{weights.name}' cannot be read"
    if len(tensor.shape) != 2 or tensor.shape[1] != 1 or tensor.dtype != DType.FLOAT:
        return (f"its params '{weights.name}' have shape {list(tensor.shape)}, not [N, 1] "
                "(GTT sparsifies single-column weights only)")
    return ""


def _gtt_breaks(site: Site, protected: set[str]) -> str:
    """Why GTT's output for this match would not run in TensorFlow ('' if it would)."""
    ids_type = site.head.attr("Tindices")
    if ids_type != DType.INT64:
        return (f"its ids are {_dtype_name(ids_type)}: GTT's LookupTableFind takes int64 keys, "
                "so TensorFlow would reject GTT's output")
    if site.ids in site.dropped:
        return f"its ids come from '{site.ids.name}', a node GTT deletes"
    for op in (site.head, site.identity, site.weights):
        if op.control_deps:
            return f"GTT would drop the control inputs of '{op.name}'"
    for op in site.dropped:
        if op.name in protected:
            return f"'{op.name}' is a graph input or output, and GTT deletes it"
    if site.axis is not None and (set(site.axis.users) - {site.head} or site.axis.control_users):
        reader = (list(set(site.axis.users) - {site.head}) + site.axis.control_users)[0]
        return f"its axis Const '{site.axis.name}' is also read by '{reader.name}', which GTT would leave dangling"
    taken = [name for name in _new_names(site) if name in site.head.graph]  # type: ignore[operator]
    if taken:
        return f"GTT would create an op named '{taken[0]}', which exists already"
    return ""


def _new_names(site: Site) -> list[str]:
    w, g = site.weights.name, site.head.name
    return [f"{w}/indices", f"{w}/values", f"{w}/HashTable", f"{w}/InitializeTable",
            f"{g}/LookupTableFind", f"{g}/Const", f"{g}/ExpandDims/Const"]


def _axis_value(op: Op) -> object:
    tensor = op.attr("value")
    if not isinstance(tensor, Tensor) or tensor.dtype not in (DType.INT32, DType.INT64) or tensor.num_elements != 1:
        return "(not an int32/int64 scalar)"
    return int(tensor.numpy().reshape(()))


def _dtype_name(dtype: object) -> str:
    return dtype.tf_name if isinstance(dtype, DType) else str(dtype)


# -- GTT's sweeps and rounds ----------------------------------------------------------------


def _sparsify_all(graph: Graph, op_type: str, state: _State) -> None:
    """One GTT sweep for `op_type`: rounds of match, replace and clean up until nothing matches."""
    refs = reference_counts(graph)
    excluded: dict[str, str] = {}
    while True:
        sites = _safe_sites(graph, op_type, refs, excluded, state)
        problems = apply_round(graph, sites, refs, state)
        if problems:  # _safe_sites tried this very round on a copy, so this cannot happen
            raise PassFailure(f"sparsify_gather: internal error: {problems[0]}")
        if not sites:
            break
    state.left_alone.update(excluded)


def find_matches(graph: Graph, op_type: str, excluded: Iterable[str], protected: set[str],
                 only: Optional[set[str]] = None) -> list[Site]:
    """GTT's greedy matcher: heads in GTT's execution order, each node in at most one match."""
    skip = set(excluded)
    ordered = gtt_execution_order(graph).ordered
    reachable = set(ordered)
    claimed: set[Op] = set()
    sites = []
    for op in ordered:
        if op in claimed or op.name in skip or (only is not None and op.name not in only):
            continue
        site, _ = examine(op, op_type, protected)
        if site is None or any(n in claimed or n not in reachable for n in site.nodes):
            continue
        claimed.update(site.nodes)
        sites.append(site)
    return sites


def _safe_sites(graph: Graph, op_type: str, refs: Counter, excluded: dict[str, str], state: _State) -> list[Site]:
    """This round's matches, minus those whose clean-up would break the graph (tried on copies)."""
    while True:
        sites = find_matches(graph, op_type, excluded, state.protected)
        if all(site.is_exclusive() for site in sites):
            return sites
        problems = _trial(graph, sites, refs, state)
        if not problems:
            return sites
        broken = {}
        for site in sites:
            if not site.is_exclusive():
                alone = _trial(graph, [site], refs, state)
                if alone:
                    broken[site.head.name] = f"GTT's clean-up after it would break the graph: {alone[0]}"
        if not broken:
            raise PassFailure(f"sparsify_gather: GTT's clean-up after converting "
                              f"{', '.join(s.head.name for s in sites)} would break the graph: {problems[0]}")
        excluded.update(broken)


def _trial(graph: Graph, sites: list[Site], refs: Counter, state: _State) -> list[str]:
    """The problems one round with `sites` would cause, found on a copy of the graph."""
    copy = graph.clone()
    heads = {site.head.name for site in sites}
    copied = find_matches(copy, sites[0].head.type, (), state.protected, heads) if sites else []
    trial_state = _State(state.group_name, state.io_strings, state.protected)
    return apply_round(copy, copied, Counter(refs), trial_state)


def apply_round(graph: Graph, sites: list[Site], refs: Counter, state: _State) -> list[str]:
    """Replace every match, wire the initializers to the group NoOp, then GTT's clean-up.

    `refs` (GTT's count of references per input string) is updated in place.
    Returns what would be broken; empty when the round went through cleanly.
    """
    removed: list[str] = []
    position = {op: i for i, op in enumerate(graph)}
    initializers = []
    for site in sorted(sites, key=lambda s: position[s.head]):
        removed += [site.weights.name, site.identity.name]
        for text in input_strings(site.identity):
            refs[_referenced(text)] -= 1
        initializers.append(replace_site(graph, site, refs))
        state.converted.append(_describe(site))
    group = _group_node(graph, state.group_name)
    for init in initializers:
        group.add_control_dep(init)
        refs[init.name] += 1
    for text in state.io_strings:
        refs.pop(text, None)
    removed += [text for text, count in refs.items() if count == 0]
    ghosts = {op for site in sites for op in site.dropped}
    return _clean_up(graph, removed, refs, ghosts, state)


# -- the replacement --------------------------------------------------------------------------


def replace_site(graph: Graph, site: Site, refs: Counter) -> Op:
    """Write GTT's lookup subgraph in place of the Gather; returns the InitializeTable op."""
    head, w = site.head, site.weights.name
    keys, values = sparsify(site.weights.attr("value").numpy())
    ids_value, ids_text = head.operands[1], input_strings(head)[1]
    graph.move_before(site.ids, head)

    def make(op_type: str, name: str, operands: tuple[Value, ...] = (), attrs: Optional[dict] = None,
             before: Op = head) -> Op:
        return graph.create_op(op_type, name, operands, attrs or {}, before=before)

    indices = make("Const", f"{w}/indices", attrs=_const_attrs(keys, DType.INT64))
    weights = make("Const", f"{w}/values", attrs=_const_attrs(values, DType.FLOAT))
    table = make("HashTable", f"{w}/HashTable", attrs={"key_dtype": DType.INT64, "value_dtype": DType.FLOAT})
    init = make("InitializeTable", f"{w}/InitializeTable", (table.results[0], indices.result, weights.result),
                {"Tkey": DType.INT64, "Tval": DType.FLOAT})
    default = make("Const", f"{head.name}/Const", attrs=_const_attrs(np.zeros((), np.float32), DType.FLOAT))
    lookup = make("LookupTableFind", f"{head.name}/LookupTableFind", (table.results[0], ids_value, default.result),
                  {"Tin": DType.INT64, "Tout": DType.FLOAT}, before=default)
    if 1 in head.explicit_port0:
        set_explicit_port0(lookup, 1, True)
    dim = make("Const", f"{head.name}/ExpandDims/Const",
               attrs=_const_attrs(np.array(-1, np.int32), DType.INT32, as_field=True))
    expand = make("ExpandDims", graph.unique_name(f"{head.name}/__sparsify_gather__"),
                  (lookup.result, dim.result), {"T": DType.FLOAT})
    for op, count in ((table, 2), (indices, 1), (weights, 1), (default, 1), (lookup, 1), (dim, 1)):
        refs[op.name] += count
    refs[ids_text] += 1
    take_place(graph, head, expand)
    return init


def sparsify(weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """GTT's SparsifyWeights: (row, weight) of every |weight| >= 1e-5; one (0, 0.0) pair if none."""
    flat = np.asarray(weights, dtype=np.float32).reshape(-1)
    keep = np.abs(flat.astype(np.float64)) >= ZERO_THRESHOLD
    if not keep.any():
        return np.zeros(1, np.int64), np.zeros(1, np.float32)
    return np.flatnonzero(keep).astype(np.int64), flat[keep]


def _const_attrs(array: np.ndarray, dtype: DType, as_field: bool = False) -> dict:
    """A Const's attributes, its tensor encoded as GTT encodes it.

    GTT writes tensors with AsProtoTensorContent (packed bytes, as
    `tf_encoded_tensor` does) except the ExpandDims axis, a one-element tensor
    set through SetNodeAttr, which TensorFlow writes as `int_val`.  Both keep
    an (empty) shape message.
    """
    if not as_field:
        return {"value": tf_encoded_tensor(array, dtype), "dtype": dtype}
    proto = TensorProto(dtype=int(dtype))
    proto.tensor_shape.SetInParent()
    for size in array.shape:
        proto.tensor_shape.dim.add().size = size
    proto.int_val.extend(int(x) for x in array.reshape(-1))
    return {"value": decode_tensor(proto), "dtype": dtype}


def _group_node(graph: Graph, name: str) -> Op:
    found = graph.get(name)
    return found if found is not None else graph.create_op("NoOp", name)


def _check_group_node(graph: Graph, name: str) -> None:
    found = graph.get(name)
    if found is not None and found.type != "NoOp":
        raise PassFailure(f"sparsify_gather: op '{name}' is a {found.type}, not a NoOp; GTT would add a second "
                          f"op named '{name}' (choose another group_init_node)")


# -- GTT's clean-up ---------------------------------------------------------------------------


def reference_counts(graph: Graph) -> Counter:
    """How often each input string (without '^') appears in the graph, as GTT counts."""
    return Counter(_referenced(text) for op in graph for text in input_strings(op))


def input_strings(op: Op) -> list[str]:
    """The op's NodeDef inputs, spelled as written: `x`, `x:0`, `x:1`, `^x`."""
    data = [value.op.name if value.index == 0 and i not in op.explicit_port0 else f"{value.op.name}:{value.index}"
            for i, value in enumerate(op.operands)]
    return data + ["^" + dep.name for dep in op.control_deps]


def _referenced(text: str) -> str:
    return text.replace("^", "")


def _clean_up(graph: Graph, removed: list[str], refs: Counter, ghosts: set[Op], state: _State) -> list[str]:
    """GTT's deletion loop: delete each named node, strip every input spelled as its name, cascade.

    `ghosts` are the matched nodes GTT has already dropped: they are not in
    GTT's graph, so they are neither deleted by name nor scanned, and must be
    unread by the end.  Returns what GTT's result would leave broken.
    """
    problems: list[str] = []
    damaged: dict[Op, str] = {}
    repaired: set[Op] = set()
    while removed:
        name = removed.pop()
        target = graph.get(name)
        if target is not None and (target in ghosts or target.type == "RestoreV2"):
            target = None
        for op in graph.ops:
            if op in ghosts:
                continue
            if op is target:
                _release_inputs(op, refs, removed)
                continue
            _strip_and_repair(op, name, refs, removed, damaged, repaired, problems)
        if target is not None:
            problems += _erase(graph, target, state)
    for op, lost in damaged.items():
        if op.graph is graph and op not in repaired:
            problems.append(f"'{op.name}' ({op.type}) would lose its input '{lost}'")
    for op in repaired:
        if op.graph is graph and not _concat_consistent(op):
            problems.append(f"'{op.name}' (ConcatV2) would lose an input and no longer match its N")
    readers = [u for g in ghosts for u in g.users + g.control_users if u not in ghosts]
    if readers:
        problems.append(f"'{readers[0].name}' would read a node GTT deleted")
    else:
        graph.erase_ops(ghosts)
    return problems


def _release_inputs(op: Op, refs: Counter, removed: list[str]) -> None:
    for text in input_strings(op):
        key = _referenced(text)
        refs[key] -= 1
        if refs[key] == 0:
            removed.append(key)


def _strip_and_repair(op: Op, name: str, refs: Counter, removed: list[str], damaged: dict[Op, str],
                      repaired: set[Op], problems: list[str]) -> None:
    """Drop `op`'s inputs spelled `name` or `^name`, then GTT's repairs for what is left."""
    lost_data = _drop_inputs(op, name)
    if lost_data is None:
        return
    if lost_data:
        damaged.setdefault(op, name)
    if op.type == "ConcatV2":
        repaired.add(op)
        problem = _shrink_concat(op, refs, removed)
        if problem:
            problems.append(problem)
    count = len(input_strings(op))
    if (op.type in PRUNED_AT_ONE_INPUT and count == 1) or count == 0:
        removed.append(op.name)


def _drop_inputs(op: Op, name: str) -> Optional[bool]:
    """Remove inputs spelled `name` or `^name`; None if there were none, else whether data inputs went."""
    texts = input_strings(op)
    n_data = len(op.operands)
    keep = [i for i, text in enumerate(texts) if text != name and text != "^" + name]
    if len(keep) == len(texts):
        return None
    _keep_inputs(op, keep)
    return any(i not in keep for i in range(n_data))


def _keep_inputs(op: Op, keep: list[int]) -> None:
    """Keep only the NodeDef inputs at positions `keep`, with their spelling."""
    n_data = len(op.operands)
    data = [i for i in keep if i < n_data]
    explicit = {new for new, old in enumerate(data) if old in op.explicit_port0}
    deps = op.control_deps
    op.set_operands([op.operands[i] for i in data])
    op.explicit_port0 = frozenset(explicit)
    op.set_control_deps([deps[i - n_data] for i in keep if i >= n_data])


def _shrink_concat(op: Op, refs: Counter, removed: list[str]) -> str:
    """GTT's ConcatV2 repair: one value fewer, or an Identity of the last value; '' or a problem."""
    count = len(input_strings(op))
    if count > 2:
        op.attrs["N"] = count - 1
        return ""
    if count < 2:
        return f"GTT fails: ConcatV2 '{op.name}' would have no value left"
    axis_text = input_strings(op)[1]
    if refs[axis_text] != 1:
        return f"GTT fails: the axis of ConcatV2 '{op.name}' is referenced more than once"
    refs[axis_text] -= 1
    removed.append(axis_text)
    _keep_inputs(op, [0])
    del op.attrs["N"]
    op.type = "Identity"
    return ""


def _concat_consistent(op: Op) -> bool:
    """A repaired ConcatV2 still loads: N values plus the axis, or one value as an Identity.

    GTT counts control inputs as values, so a ConcatV2 with control inputs
    gets the wrong N.
    """
    if op.type == "Identity":
        return len(op.operands) == 1
    return op.attr("N") == len(op.operands) - 1


def _erase(graph: Graph, target: Op, state: _State) -> list[str]:
    """Delete a node GTT deletes by name; its readers spelled `name:k` would dangle in GTT."""
    readers = target.users + target.control_users
    if readers:
        return [f"'{readers[0].name}' would read '{target.name}', which GTT deletes"]
    if target in state.original:
        state.pruned.append(target.name)
    graph.erase_op(target)
    return []


# -- reporting --------------------------------------------------------------------------------


def _strip_output_shapes(graph: Graph) -> int:
    """GTT removes `_output_shapes` from every node before matching; returns how many went."""
    count = 0
    for op in graph:
        if SHAPES_ATTR in op.attrs:
            del op.attrs[SHAPES_ATTR]
            count += 1
    return count


def _describe(site: Site) -> str:
    weights = site.weights.attr("value").numpy()
    kept = int(np.count_nonzero(np.abs(weights.astype(np.float64)) >= ZERO_THRESHOLD))
    return f"'{site.head.name}' ({site.head.type}; '{site.weights.name}': {kept} of {weights.shape[0]} rows non-zero)"


def _report(result: PassResult, graph: Graph, state: _State, stripped: int, had_group: bool) -> None:
    total = len(state.converted) + sum(1 for op in graph if op.type in GATHER_TYPES)
    if not total:
        result.note("found no Gather/GatherV2 ops")
    else:
        result.note(f"converted {len(state.converted)} of {total} Gather/GatherV2 ops into HashTable lookups"
                    + (f": {_listing(state.converted)}" if state.converted else ""))
    for op in graph:
        if op.type in GATHER_TYPES:
            result.note(f"left '{op.name}' ({op.type}) alone: {_why_left(op, state)}")
    if state.converted:
        result.note(f"the tables are filled by NoOp '{state.group_name}': run it once before the lookups "
                    f"(TensorFlow: session.run('{state.group_name}'); gttc: "
                    f"Interpreter.run(..., targets=['{state.group_name}']))")
    elif not had_group:
        result.note(f"added the empty NoOp '{state.group_name}' (GTT adds it even when nothing matches)")
    if state.pruned:
        result.note(f"GTT's clean-up also deleted {len(state.pruned)} ops that read the weights: "
                    f"{_listing(sorted(state.pruned))}")
    if stripped:
        result.note(f"removed '{SHAPES_ATTR}' from {stripped} ops (GTT strips it everywhere)")


def _why_left(op: Op, state: _State) -> str:
    if op.name in state.left_alone:
        return state.left_alone[op.name]
    _, why = examine(op, op.type, state.protected)
    return why or "no match"


def _listing(names: list[str]) -> str:
    shown = ", ".join(names[:MAX_LISTED])
    return shown + (f", ... ({len(names) - MAX_LISTED} more)" if len(names) > MAX_LISTED else "")


__all__ = ["SparsifyGather", "Site", "apply_round", "examine", "find_matches", "reference_counts", "sparsify"]
