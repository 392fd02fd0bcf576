"""Drive the lowering table over a list of ops: the main graph's or a function body's.

Ops whose every result is a (cheaply computed) constant emit nothing: the
constants turn into initializers where they are read.  Everything else goes
through its registered lowering.  Unsupported op types are reported before
anything is emitted, naming the first one and the node.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

import numpy as np

from compiler.analysis import analyze, reachable_ops, topological_order
from compiler.backends.onnx.alternatives import nearest_alternative
from compiler.backends.onnx.builder import GraphBuilder
from compiler.backends.onnx.context import LoweringContext
from compiler.backends.onnx.errors import UnsupportedOpError
from compiler.backends.onnx.layout import Perm, preferred_layouts
from compiler.backends.onnx.ops_complex import check_no_complex
from compiler.backends.onnx.registry import LAYOUT_ROLES, LOWERINGS
from compiler.backends.onnx.tf1_frames import REGION_LOWERINGS, needs_shape_refinement, refine_shapes, schedule
from compiler.frontends.graphdef.functions import Function
from compiler.ir.graph import Op, Value
from compiler.ir.shapes import Shape


def is_folded(ctx: LoweringContext, op: Op) -> bool:
    return bool(op.results) and all(ctx.is_constant(v) for v in op.results)


def check_supported(ctx: LoweringContext, ops: Sequence[Op]) -> None:
    """Fail before emitting anything if some op type has no lowering."""
    missing = [op for op in ops if op.type not in LOWERINGS and not is_folded(ctx, op)]
    if missing:
        others = sorted({op.type for op in missing[1:]} - {missing[0].type})
        reason = "no lowering for this op type" + (f" (nor for {', '.join(others)})" if others else "")
        alternative = nearest_alternative(missing[0].type, LOWERINGS)
        if alternative:
            reason += f"; {alternative}"
        raise UnsupportedOpError(missing[0].type, missing[0].name, reason)


def lower_ops(ctx: LoweringContext, ops: Sequence[Op]) -> None:
    """Lower `ops` (topologically ordered, loop back-edges cut) into the context's graph; each TF1
    while loop or cond among them is lowered as one unit (see `tf1_frames`)."""
    check_supported(ctx, ops)
    units = schedule(ops)
    if needs_shape_refinement(ops):
        ctx.info = refine_shapes(ctx.info, ops)
    ctx.preferred = preferred_layouts(ops, LAYOUT_ROLES, ctx.rank, ctx.keep)
    for op in units:
        if not isinstance(op, Op):
            REGION_LOWERINGS[type(op)](ctx, op)
            continue
        if is_folded(ctx, op):
            ctx.stats["folded_ops"] += op.type != "Const"
            continue
        if op.results and all(ctx.is_bound(v) for v in op.results):
            continue
        lower_op(ctx, op)


def lower_op(ctx: LoweringContext, op: Op) -> None:
    """One op through its lowering; operands or attributes the lowering cannot take (a rank, a
    shape or a value TF would refuse at run time) are an error naming the node."""
    check_no_complex(ctx, op)
    try:
        LOWERINGS[op.type](ctx, op)
    except (ValueError, IndexError, TypeError, KeyError, ArithmeticError) as err:
        text = str(err).strip().splitlines()[0][:200] if str(err).strip() else "(no message)"
        shapes = ", ".join(str(ctx.shape(v)) for v in op.operands)
        raise UnsupportedOpError(op.type, op.name, f"its operands ({shapes}) or attributes do not fit the op "
                                                   f"({type(err).__name__}: {text})") from None


@dataclass
class Argument:
    """What a function argument is bound to: an outer tensor, what is known of it, and the layout the
    tensor is stored in (TF order unless the subgraph reads it as stored, like a cond branch)."""

    tensor: str
    shape: Shape
    constant: Optional[np.ndarray] = None
    perm: Perm = None


def lower_function_body(ctx: LoweringContext, fn: Function, builder: GraphBuilder, prefix: str,
                        args: Sequence[Argument]) -> list[str]:
    """Lower function `fn` into `builder` with its arguments bound to `args`; returns its results (TF layout)."""
    child = lower_function_subgraph(ctx, fn, builder, prefix, args)
    return [child.value_in(r) for r in fn.results]


def lower_function_subgraph(ctx: LoweringContext, fn: Function, builder: GraphBuilder, prefix: str,
                            args: Sequence[Argument]) -> LoweringContext:
    """`lower_function_body` leaving its results as stored: the child context (see `lower_subgraph`)."""
    arg_values = [a.results[0] for a in fn.args]
    ops = topological_order(fn.graph, reachable_ops(fn.results, arg_values), arg_values)
    return lower_subgraph(ctx, ops, builder, prefix, dict(zip(arg_values, args)), fn.results)


def lower_bound_ops(ctx: LoweringContext, ops: Sequence[Op], builder: GraphBuilder, prefix: str,
                    bound: Mapping[Value, Argument], results: Sequence[Value]) -> list[str]:
    """Lower `ops` (topological) into `builder` in a child context where each value of `bound` is
    already its Argument's tensor; returns the tensors of `results` (TF layout).

    A function body, a loop's body or condition, and a cond branch are all this: a subgraph that
    reads a few values from outside (constants among them stay constants, so weights fold).
    """
    child = lower_subgraph(ctx, ops, builder, prefix, bound, results)
    return [child.value_in(r) for r in results]


def lower_subgraph(ctx: LoweringContext, ops: Sequence[Op], builder: GraphBuilder, prefix: str,
                   bound: Mapping[Value, Argument], results: Sequence[Value], as_stored: bool = False
                   ) -> LoweringContext:
    """`lower_bound_ops` without fixing the results' layout: the child context, whose `lowered`
    tells how each result is stored.  With `as_stored`, outside values the ops read directly come
    in the layout they are stored in (a subgraph that runs at most once, like a cond branch, can:
    a loop body's carried values must keep one layout from one iteration to the next)."""
    ops, bound = _with_outer_reads(ctx, ops, bound, as_stored)
    runtime = {v: a.shape for v, a in bound.items() if a.constant is None}
    constants = {v: a.constant for v, a in bound.items() if a.constant is not None}
    child = ctx.child(builder, analyze(ops, runtime, constants), prefix)
    child.keep.update(results)
    for value, arg in bound.items():
        if arg.constant is None:
            child.bind(value, arg.tensor, arg.perm)
        else:
            child.bind_constant_tensor(value, arg.tensor)
    lower_ops(child, ops)
    return child


def outer_argument(ctx: LoweringContext, value: Value, as_stored: bool = False) -> Argument:
    """An enclosing-graph value as a subgraph reads it: in TF order, or with `as_stored` in the
    layout it is stored in (no conversion on either side of the boundary).  Constants stay
    constants, in TF order."""
    constant = ctx.constant(value)
    if as_stored and constant is None:
        stored = ctx.lowered(value)
        return Argument(stored.tensor, ctx.shape(value), None, stored.perm)
    return Argument(ctx.value_in(value, None), ctx.shape(value), constant)


def cond_results(ctx: LoweringContext, merged: Sequence[Value],
                 sides: Sequence[tuple[LoweringContext, Sequence[Value]]]) -> tuple[list[Perm], list[list[str]]]:
    """The layout each cond output is stored in (`_agreed_layout`) and, per branch (its context and
    the values it hands back), the tensors it hands back in those layouts."""
    layouts = [_agreed_layout(ctx, value, [(child, roots[i]) for child, roots in sides])
               for i, value in enumerate(merged)]
    return layouts, [[child.value_in(root, perm) for root, perm in zip(roots, layouts)] for child, roots in sides]


def _agreed_layout(ctx: LoweringContext, merged: Value, sides: Sequence[tuple[LoweringContext, Value]]) -> Perm:
    """The layout a cond's output is stored in: the one every branch computed it in, so no branch
    converts (a branch handing back a constant has none to impose); where they differ, the one
    the readers want if some branch has it, else TF order."""
    stored = {child.lowered(root).perm for child, root in sides if child.is_bound(root)}
    if len(stored) == 1:
        return stored.pop()
    wanted = ctx.wanted(merged)
    return wanted if wanted in stored else None


def bind_as_stored(ctx: LoweringContext, values: Sequence[Value], child: LoweringContext,
                   roots: Sequence[Value]) -> None:
    """Bind each of `values` to the tensor `child` (lowered into ctx's own graph: a cond's known
    branch) holds the matching root in, keeping its layout."""
    for value, root in zip(values, roots):
        stored = child.lowered(root)
        ctx.bind(value, stored.tensor, stored.perm)


def _with_outer_reads(ctx: LoweringContext, ops: Sequence[Op], bound: Mapping[Value, Argument], as_stored: bool
                      ) -> tuple[list[Op], dict[Value, Argument]]:
    """`ops` plus the operand-free ops (Consts) they read from outside, and `bound` plus the other
    outside values they read directly (a TF1 cond branch may read its enclosing graph's values)."""
    members, extended = set(ops), dict(bound)
    constants: list[Op] = []
    for op in ops:
        for value in op.operands:
            if value.op in members or value in extended:
                continue
            if not value.op.operands and value.op not in constants:
                constants.append(value.op)
            elif value.op.operands:
                extended[value] = outer_argument(ctx, value, as_stored)
    return constants + list(ops), extended
