"""strip_unused_nodes: keep only what the outputs need, fed from the inputs."""
from __future__ import annotations

from typing import Any, Optional

from compiler.errors import PassFailure
from compiler.graphutil.graphdef_header import discard_graphdef_header
from compiler.graphutil.names import node_name, node_names
from compiler.graphutil.reachability import backward_closure
from compiler.graphutil.rewire import move_control_users, redirect_uses
from compiler.ir.dtypes import DType
from compiler.ir.graph import Graph, Op
from compiler.ir.shapes import Shape
from compiler.passes.base import Param, Pass, PassContext, PassResult, register_pass
from compiler.runtime.kernels.lookup import TABLE_INITIALIZER_OPS, TABLE_OPS

PLACEHOLDER = "Placeholder"


@register_pass
class StripUnusedNodes(Pass):
    """Remove every op the outputs do not need when fed from the inputs.

    Training-only ops (savers, summaries, decoders before the input layer)
    disappear.  An input that is not a Placeholder becomes a new Placeholder
    of the same name, in the same place, with only `dtype` and `shape`
    attributes: `type`/`shape` give defaults (float, scalar), and
    `name=X, type_for_name=T, shape_for_name=S` override them per input,
    pairing the i-th `name` with the i-th `type_for_name`/`shape_for_name`
    as GTT does.  Sites are the ops removed.
    """

    name = "strip_unused_nodes"
    edits_through_api = True
    params = (
        Param("type", "dtype", DType.FLOAT, "dtype of new Placeholders (e.g. float, int32, quint8)"),
        Param("shape", "shape", Shape(()), "shape of new Placeholders, e.g. \"1,299,299,3\" (default scalar)"),
        Param("name", "str", None, "an input name the next type_for_name/shape_for_name apply to", repeated=True),
        Param("type_for_name", "dtype", None, "dtype for the matching `name`", repeated=True),
        Param("shape_for_name", "shape", None, "shape for the matching `name`", repeated=True),
    )

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        input_names = node_names(ctx.inputs)
        needed = needed_ops(graph, input_names, [node_name(o) for o in ctx.outputs])
        to_replace = [op for op in graph if op.name in input_names and op.type != PLACEHOLDER]
        _check_replaceable(to_replace, needed)
        _check_kept_placeholders(graph, input_names, needed)
        placeholders = {op.name: _placeholder_attrs(ctx, op.name) for op in to_replace}
        replaced = {op: _replace_with_placeholder(graph, op, placeholders[op.name]) for op in to_replace}
        doomed = [op for op in graph if op not in needed and op not in replaced.values()]
        erased = graph.erase_ops(doomed + to_replace)
        for old, new in replaced.items():
            graph.rename(new, old.name)
        dropped_header = discard_graphdef_header(graph)
        result = PassResult(sites=len(doomed), changed=bool(erased) or dropped_header)
        result.note(f"removed {len(doomed)} unused ops, kept {len(graph)}")
        for op in to_replace:
            attrs = placeholders[op.name]
            result.note(f"replaced input '{op.name}' ({op.type}) with a Placeholder "
                        f"{attrs['dtype'].tf_name}{attrs['shape']}")
        return result


def needed_ops(graph: Graph, input_names: set[str], output_names: list[str]) -> set[Op]:
    """Ops reachable backwards from the outputs, not looking past inputs, plus the inputs themselves."""
    missing = [name for name in output_names if name not in graph and name not in input_names]
    if missing:
        raise PassFailure(f"output node '{missing[0]}' not found in graph")
    roots = [graph.op(name) for name in output_names if name in graph]
    needed = backward_closure(roots, stop=lambda op: op.name in input_names)
    needed |= _table_fillers(needed, input_names)
    needed.update(graph.op(name) for name in input_names if name in graph)
    return needed


def _table_fillers(needed: set[Op], input_names: set[str]) -> set[Op]:
    """The ops filling the hash tables the kept ops read, and what they read.  GTT drops them: the
    kept lookups then fail ('Table not initialized') with nothing left to fill their tables."""
    fillers = [user for op in needed if op.type in TABLE_OPS for user, index in op.results[0].uses
               if index == 0 and user.type in TABLE_INITIALIZER_OPS]
    return backward_closure(fillers, stop=lambda op: op.name in input_names) if fillers else set()


def _check_replaceable(to_replace: list[Op], needed: set[Op]) -> None:
    """A new Placeholder has one output; refuse inputs whose other outputs are still read."""
    for op in to_replace:
        for value in op.results[1:]:
            readers = [user.name for user, _ in value.uses if user in needed]
            if readers:
                raise PassFailure(
                    f"input '{op.name}' becomes a one-output Placeholder, but '{readers[0]}' "
                    f"reads its output {value.index}")


def _check_kept_placeholders(graph: Graph, input_names: set[str], needed: set[Op]) -> None:
    """An input Placeholder is kept as is, so everything it reads must be kept too."""
    for name in input_names:
        op = graph.get(name)
        if op is None or op.type != PLACEHOLDER:
            continue
        lost = [p.name for p in [v.op for v in op.operands] + list(op.control_deps) if p not in needed]
        if lost:
            raise PassFailure(f"input Placeholder '{name}' depends on '{lost[0]}', which is removed "
                              "(GTT: invalid graph with inputs referring to nonexistent nodes)")


def _placeholder_attrs(ctx: PassContext, name: str) -> dict[str, Any]:
    return {"dtype": _placeholder_type(ctx, name), "shape": _placeholder_shape(ctx, name)}


def _placeholder_type(ctx: PassContext, name: str) -> DType:
    """The default `type`, overridden by the `type_for_name` paired with the last matching `name`."""
    if len(ctx.params("type")) > 1:
        raise PassFailure("You must pass no more than one default 'type' to strip_unused_nodes")
    chosen = ctx.param("type")
    override = _per_name(ctx, name, "type_for_name",
                         "strip_unused_nodes(name=foo, type_for_name=float, name=bar, type_for_name=quint8)")
    return chosen if override is None else override


def _placeholder_shape(ctx: PassContext, name: str) -> Shape:
    if len(ctx.params("shape")) > 1:
        raise PassFailure("You must pass no more than one default 'shape' to strip_unused_nodes")
    chosen = ctx.param("shape")
    override = _per_name(ctx, name, "shape_for_name",
                         'strip_unused_nodes(name=foo, shape_for_name="2,2,1", name=bar, shape_for_name="1")')
    shape = chosen if override is None else override
    if not shape.is_fully_defined or any(d < 0 for d in shape.dims):  # type: ignore[union-attr]
        raise PassFailure(f"strip_unused_nodes: Placeholder shape {shape} must list known, non-negative dimensions")
    return shape


def _per_name(ctx: PassContext, name: str, key: str, example: str) -> Optional[Any]:
    """GTT's pairing: the i-th `key` belongs to the i-th `name`; the last match wins."""
    names = ctx.params("name")
    if not names and not ctx.has(key):
        return None
    values = ctx.params(key)
    if len(values) != len(names):
        raise PassFailure(f"You must pass a '{key}' arg for every 'name', e.g. {example}")
    found = None
    for given, value in zip(names, values):
        if given == name:
            found = value
    return found


def _replace_with_placeholder(graph: Graph, op: Op, attrs: dict[str, Any]) -> Op:
    """Create the Placeholder in `op`'s place and move `op`'s users onto it.

    It has a temporary name until `op` is erased and the caller renames it;
    users keep their spelling of the input, as GTT keeps their input strings.
    """
    temp_name = graph.unique_name(op.name + "/placeholder")
    new = graph.create_op(PLACEHOLDER, temp_name, attrs=attrs, before=op)
    if op.results:
        redirect_uses(op.results[0], new.result)
    move_control_users(op, new)
    return new
