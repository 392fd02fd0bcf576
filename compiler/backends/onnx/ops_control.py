"""Control flow: TF2's functional If/While as ONNX If/Loop (TF1 frames: `ops_tf1_control.py`).

Branch and loop bodies are library functions, lowered into ONNX subgraphs
that read outer values by name.  TF's While evaluates `cond` before every
iteration including the first, ONNX's Loop checks a condition carried out
of the body, so the cond function is lowered twice: once in the enclosing
graph for the first test, once at the end of the body for the next.
TF1 loops and conds (Enter/Merge/Switch/NextIteration/Exit frames) are
recovered into the same structure by `tf1_frames.py` and lowered by
`ops_tf1_control.py`.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
from onnx import TensorProto

from compiler.backends.onnx.builder import GraphBuilder, ValueSpec
from compiler.backends.onnx.context import LoweringContext
from compiler.backends.onnx.dtypes import onnx_type
from compiler.backends.onnx.errors import UnsupportedOpError
from compiler.backends.onnx.lowering import (Argument, bind_as_stored, cond_results, lower_function_body,
                                           lower_function_subgraph, outer_argument)
from compiler.backends.onnx.registry import lowers
from compiler.backends.onnx.tf1_frames import forwarded_source
from compiler.frontends.graphdef.functions import Function, lower_function
from compiler.ir.dtypes import DType
from compiler.ir.graph import Op, Value

def _function(ctx: LoweringContext, op: Op, attr: str) -> Function:
    return lower_function(ctx.library, op.attr(attr).name)


def _arguments(ctx: LoweringContext, values: Sequence[Value], as_stored: bool = False) -> list[Argument]:
    return [outer_argument(ctx, v, as_stored) for v in values]


def _as_bool(ctx: LoweringContext, op: Op, tensor: str, dtype: DType | None, suffix: str) -> str:
    """TF tests a non-boolean scalar condition for being non-zero."""
    if dtype == DType.BOOL:
        return tensor
    return ctx.helper1(op, suffix, "Cast", [tensor], to=TensorProto.BOOL)


def _expose_results(ctx: LoweringContext, body: GraphBuilder, tensors: Sequence[str], values: Sequence[Value],
                    names: Sequence[str], prefix: str) -> None:
    for tensor, value, name in zip(tensors, values, names):
        spec = ValueSpec(ctx.scope.tensors.fresh(prefix + name), onnx_type(ctx.dtype(value)))
        body.expose(tensor, spec)


def known_truth(ctx: LoweringContext, value: Value) -> Optional[bool]:
    """The condition's truth when the exporter knows its value, by TF's rule (a scalar is true when
    non-zero, any other tensor when non-empty); None when it is only known at run time."""
    found = ctx.constant(value)
    if found is None or ctx.dtype(value) == DType.STRING:
        return None
    array = np.asarray(found)
    return bool(array) if array.ndim == 0 else array.size > 0


@lowers("If", "StatelessIf")
def _if(ctx: LoweringContext, op: Op) -> None:
    """An If whose branches read the operands as stored and hand each result back in the layout
    both computed it in (see `lowering.cond_results`), so a layout survives the cond."""
    args = _arguments(ctx, op.operands[1:], as_stored=True)
    taken = known_truth(ctx, op.operands[0])
    if taken is not None:
        label = "then" if taken else "else"
        _inline_branch(ctx, op, _function(ctx, op, f"{label}_branch"), label, args)
        ctx.stats["conds_with_known_predicate"] += 1
        return
    cond = _as_bool(ctx, op, ctx.operand(op, 0), ctx.dtype(op.operands[0]), "cond")
    attrs, labels = ("then_branch", "else_branch"), ("then", "else")
    fns, bodies = [_function(ctx, op, attr) for attr in attrs], [GraphBuilder(ctx.scope) for _ in attrs]
    sides = [(lower_function_subgraph(ctx, fn, body, f"{ctx.prefix}{op.name}/{label}/", args), fn.results)
             for fn, body, label in zip(fns, bodies, labels)]
    layouts, results = cond_results(ctx, op.results, sides)
    for fn, body, label, tensors in zip(fns, bodies, labels, results):
        _expose_results(ctx, body, tensors, op.results, fn.result_names, f"{ctx.prefix}{op.name}/{label}/out/")
    outs = ctx.emit(op, "If", [cond], len(op.results), **dict(zip(attrs, bodies)))
    for value, tensor, perm in zip(op.results, outs, layouts):
        ctx.bind(value, tensor, perm)


def _branch_graph(ctx: LoweringContext, op: Op, fn: Function, label: str, args: Sequence[Argument]) -> GraphBuilder:
    """One branch of a case as an If subgraph, handing its results back in TF order."""
    prefix = f"{ctx.prefix}{op.name}/{label}/"
    body = GraphBuilder(ctx.scope)
    results = lower_function_body(ctx, fn, body, prefix, args)
    _expose_results(ctx, body, results, op.results, fn.result_names, prefix + "out/")
    return body


def _inline_branch(ctx: LoweringContext, op: Op, fn: Function, label: str, args: Sequence[Argument]) -> None:
    """The one branch that runs, in the enclosing graph, its results bound as stored.  For a
    condition known at export this matters beyond size: onnxruntime type-checks both branches of
    an If, and the one TF never runs may not even have consistent static shapes (Keras builds such
    conds on a dimension known when it traces)."""
    bind_as_stored(ctx, op.results, lower_function_subgraph(ctx, fn, ctx.builder, f"{ctx.prefix}{op.name}/{label}/",
                                                            args), fn.results)


@lowers("Case", "StatelessCase")
def _case(ctx: LoweringContext, op: Op) -> None:
    """One branch per index, the last also for any index out of range (TF's default): nested Ifs on
    `index == 0`, `index == 1`, ..., or only the branch that runs when the export knows which."""
    args = _arguments(ctx, op.operands[1:], as_stored=True)
    branches = [lower_function(ctx.library, f.name) for f in op.attr("branches")]
    if not branches:
        raise UnsupportedOpError(op.type, op.name, "it has no branches")
    taken = _known_branch(ctx, op.operands[0], len(branches))
    if taken is not None:
        _inline_branch(ctx, op, branches[taken], f"branch{taken}", args)
        if len(branches) > 1:
            ctx.stats["conds_with_known_predicate"] += 1
        return
    index, dtype = ctx.operand(op, 0), ctx.dtype(op.operands[0])
    tests = [ctx.helper1(op, f"index_is_{k}", "Equal", [index, ctx.scalar(k, dtype, f"{op.name}/k{k}")])
             for k in range(len(branches) - 1)]
    otherwise = _branch_graph(ctx, op, branches[-1], f"branch{len(tests)}", args)
    for k in reversed(range(1, len(tests))):  # branch k, else the ones after it
        nested = GraphBuilder(ctx.scope)
        base = f"{ctx.prefix}{op.name}/from_{k}"
        names = [ctx.scope.tensors.fresh(f"{base}/{i}") for i in range(len(op.results))]
        nested.add_node("If", [tests[k]], names, ctx.scope.nodes.fresh(base),
                        {"then_branch": _branch_graph(ctx, op, branches[k], f"branch{k}", args),
                         "else_branch": otherwise})
        _expose_results(ctx, nested, names, op.results, [str(i) for i in range(len(names))], base + "/out/")
        otherwise = nested
    outs = ctx.emit(op, "If", [tests[0]], len(op.results),
                    then_branch=_branch_graph(ctx, op, branches[0], "branch0", args), else_branch=otherwise)
    for value, tensor in zip(op.results, outs):
        ctx.bind(value, tensor)


def _known_branch(ctx: LoweringContext, index: Value, count: int) -> Optional[int]:
    """The branch a Case runs when the export knows it: its index's, the last for one out of range."""
    if count == 1:
        return 0
    found = ctx.constant(index)
    if found is None or np.size(found) != 1:
        return None
    k = int(np.asarray(found).reshape(()))
    return k if 0 <= k < count else count - 1


@lowers("While", "StatelessWhile")
def _while(ctx: LoweringContext, op: Op) -> None:
    """An ONNX Loop.  A loop variable the body returns unchanged (a bound, a step, a captured
    tensor: TF2 carries every value a loop reads) is not carried: the body and condition read the
    outer tensor, a constant folds into them, and the While's result is its operand."""
    cond_fn, body_fn = _function(ctx, op, "cond"), _function(ctx, op, "body")
    prefix = f"{ctx.prefix}{op.name}/"
    initial = _arguments(ctx, op.operands)
    first = lower_function_body(ctx, cond_fn, ctx.builder, prefix + "cond_first/", initial)[0]
    first = _as_bool(ctx, op, first, cond_fn.results[0].dtype, "cond_first_bool")

    unchanged = [forwarded_source(r) is a.results[0] for a, r in zip(body_fn.args, body_fn.results)]
    invariant = [fixed and not (i == 0 and all(unchanged)) for i, fixed in enumerate(unchanged)]  # Loop needs one
    body = GraphBuilder(ctx.scope)
    names = ctx.scope.tensors
    body.add_input(ValueSpec(names.fresh(prefix + "body/iteration"), TensorProto.INT64, ()))
    body.add_input(ValueSpec(names.fresh(prefix + "body/cond_in"), TensorProto.BOOL, ()))
    carried = []
    for arg, value, outer, fixed, same in zip(body_fn.args, op.results, initial, invariant, unchanged):
        if fixed:
            carried.append(outer)
            continue
        spec = ValueSpec(names.fresh(f"{prefix}body/in/{arg.name}"), onnx_type(ctx.dtype(value)))
        body.add_input(spec)
        carried.append(Argument(spec.name, outer.shape if same else ctx.shape(value)))
    results = lower_function_body(ctx, body_fn, body, prefix + "body/", carried)
    next_args = [a if fixed else Argument(t, a.shape) for t, a, fixed in zip(results, carried, invariant)]
    again = lower_function_body(ctx, cond_fn, body, prefix + "body/cond/", next_args)[0]
    if cond_fn.results[0].dtype != DType.BOOL:
        again = _cast_bool_in_body(ctx, body, again, prefix)
    body.expose(again, ValueSpec(names.fresh(prefix + "body/cond_out"), TensorProto.BOOL, ()))
    moving = [i for i, fixed in enumerate(invariant) if not fixed]
    _expose_results(ctx, body, [results[i] for i in moving], [op.results[i] for i in moving],
                    [body_fn.result_names[i] for i in moving], prefix + "body/out/")
    outs = iter(ctx.emit(op, "Loop", ["", first] + [initial[i].tensor for i in moving], len(moving), body=body))
    for value, outer, fixed in zip(op.results, initial, invariant):
        ctx.bind(value, outer.tensor if fixed else next(outs))


def _cast_bool_in_body(ctx: LoweringContext, body: GraphBuilder, tensor: str, prefix: str) -> str:
    """The loop body's next-iteration test as bool (the body has its own builder, not ctx's)."""
    name = ctx.scope.tensors.fresh(prefix + "body/cond_bool")
    body.add_node("Cast", [tensor], [name], ctx.scope.nodes.fresh(name), {"to": TensorProto.BOOL})
    return name
