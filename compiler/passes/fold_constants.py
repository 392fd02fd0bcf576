"""fold_constants: replace subgraphs that only depend on constants by Const ops.

What may fold: an op whose every data and control input may fold, that is
not stateful, random, control flow, a placeholder, a graph input or a call,
and that has a kernel.  Only the values such a subgraph hands to the rest of
the graph are materialized; a value that merely forwards a Const through
Identity-like ops is rewired to that Const instead of being copied, so big
weights are never decoded.  New constants are named like TF's folder names
them (`<node>/_<k>__cf__<k>`); an output that becomes constant keeps its
node name.

Beyond GTT: control edges from ops that may fold carry no meaning (they
order nothing observable) and are dropped.  TF2/Keras frozen graphs hang
every weight read on a `NoOp` that the output control-depends on; GTT keeps
those edges, which makes every weight "used elsewhere" and blocks
fold_batch_norms.

Errors: an op without a kernel simply does not fold.  A kernel that fails
on its constant inputs raises, unless `ignore_errors=true`, in which case
that op (and what depends on it) is left unfolded and the rest still folds.
Values larger than `max_bytes` stay unfolded, as in TF (10 MiB).
"""
from __future__ import annotations

import functools
from collections import deque
from typing import Optional

import numpy as np

from compiler.errors import PassFailure
from compiler.frontends.graphdef.functions import function_names
from compiler.ir.dtypes import DType
from compiler.ir.graph import Graph, Op, Value
from compiler.ir.op_registry import is_stateful
from compiler.ir.tensor import Tensor
from compiler.passes.base import Param, Pass, PassContext, PassResult, register_pass
from compiler.rewrite.constants import const_op
from compiler.rewrite.edit import erase_dead, node_names, take_over
from compiler.runtime.control_flow import TF1_CONTROL_FLOW_OPS
from compiler.runtime.functions import FUNCTIONAL_OPS
from compiler.runtime.kernels.registry import ieee_warnings_off
from compiler.runtime.op_eval import FORWARDING_OPS, InterpreterError, evaluate_op, has_kernel

TF_MAX_CONSTANT_BYTES = 10 * 1024 * 1024
_NEVER_FOLD = frozenset({"Placeholder", "PlaceholderWithDefault", "PlaceholderV2", "_Arg", "_Retval"})
_UNFOLDABLE_DTYPES = frozenset({DType.RESOURCE, DType.VARIANT})


@register_pass
class FoldConstants(Pass):
    """Evaluate constant-only subgraphs and replace them with Const ops (drops meaningless control edges)."""

    name = "fold_constants"
    params = (Param("max_bytes", "int", TF_MAX_CONSTANT_BYTES, "largest value (bytes) to materialize as a constant"),)

    def run(self, graph: Graph, ctx: PassContext) -> PassResult:
        folder = _Folder(graph, ctx)
        return folder.run()


class _Folder:
    """One folding run over one graph."""

    def __init__(self, graph: Graph, ctx: PassContext) -> None:
        self.graph = graph
        self.ignore_errors = bool(ctx.param("ignore_errors"))
        self.max_bytes = int(ctx.param("max_bytes"))
        self.inputs = node_names(ctx.inputs)
        self.outputs = node_names(ctx.outputs)
        self.pinned_outputs = _pinned_outputs(graph, ctx.outputs)
        self.foldable = _foldable_ops(graph, self.inputs | self.pinned_outputs)
        self.values: dict[Value, np.ndarray] = {}
        self.failed: dict[Op, str] = {}
        self.done: set[Op] = set()
        self.counter = 0
        self.result = PassResult()

    def run(self) -> PassResult:
        had_uses = {op for op in self.foldable if op.has_uses}
        dropped = self._drop_control_edges()
        forwarded, created, skipped = self._replace_boundaries()
        outputs = self._replace_outputs()
        candidates = [op for op in self.foldable if op in had_uses and op.graph is self.graph and not op.has_uses]
        erased = erase_dead(self.graph, candidates, self.inputs | self.outputs,
                            removable=lambda op: op in self.foldable and op in had_uses)
        return self._report(dropped, forwarded, created, outputs, erased, skipped)

    # -- control edges -------------------------------------------------------------
    def _drop_control_edges(self) -> int:
        """Remove every control dependency on an op that may fold."""
        dropped = 0
        for op in list(self.graph):
            if not op.control_deps_view:  # most ops: no copy of an empty list to loop over
                continue
            for dep in op.control_deps:
                if dep in self.foldable:
                    op.remove_control_dep(dep)
                    dropped += 1
        return dropped

    # -- boundary values -------------------------------------------------------------
    def _boundaries(self) -> list[Value]:
        """Values of foldable, non-Const ops read by ops that do not fold."""
        found = []
        for op in self.graph:
            if op not in self.foldable or op.type == "Const":
                continue
            for value in op.results:
                if any(user not in self.foldable for user, _ in value.uses):
                    found.append(value)
        return found

    def _replace_boundaries(self) -> tuple[int, int, int]:
        """Each boundary value becomes the Const it forwards, or a new one; all are computed first
        (redirecting readers outside the foldable ops changes no foldable op's operands)."""
        forwarded = created = skipped = 0
        boundaries = [(value, const_op(value)) for value in self._boundaries()]
        computed = iter(self._evaluate_all([value for value, origin in boundaries if origin is None]))
        for value, origin in boundaries:
            if origin is not None:
                _redirect_outside(value, origin.results[0], self.foldable)
                forwarded += 1
                continue
            arr = next(computed)
            if arr is None or arr.nbytes > self.max_bytes:
                skipped += 1
                continue
            const = self._new_const(value, arr, self._fold_name(value.op))
            _redirect_outside(value, const.results[0], self.foldable)
            created += 1
        return forwarded, created, skipped

    def _replace_outputs(self) -> int:
        """Outputs computed by foldable non-Const ops become Consts with the same name."""
        replaced = 0
        for name in sorted(self.outputs):  # each checked after the last was replaced: that may free its results
            op = self.graph.get(name)
            if op is None or op not in self.foldable or op.type == "Const" or not op.results:
                continue
            if any(v.uses for v in op.results[1:]):
                continue
            (arr,) = self._evaluate_all([op.results[0]])
            if arr is None:
                continue
            const = self._new_const(op.results[0], arr, self.graph.unique_name(name + "/_folded"))
            take_over(self.graph, op, const.results[0])
            self.foldable.add(const)
            replaced += 1
        return replaced

    def _new_const(self, value: Value, arr: np.ndarray, name: str) -> Op:
        dtype = value.dtype if value.dtype is not None else DType.from_numpy(arr.dtype)
        return self.graph.create_op("Const", name, attrs={"dtype": dtype, "value": Tensor.from_numpy(arr, dtype)},
                                    device=value.op.device, before=value.op)

    def _fold_name(self, op: Op) -> str:
        name = self.graph.unique_name(f"{op.name}/_{self.counter}__cf__{self.counter}")
        self.counter += 1
        return name

    # -- evaluation -------------------------------------------------------------------
    def _evaluate_all(self, targets: list[Value]) -> list[Optional[np.ndarray]]:
        """`_evaluate` of each target, in order, with numpy's IEEE warnings turned off once for
        every kernel run (as each kernel would turn them off for itself)."""
        with ieee_warnings_off():
            return [self._evaluate(target) for target in targets]

    def _evaluate(self, target: Value) -> Optional[np.ndarray]:
        """The value of `target`, computing what it needs first; None if something failed."""
        done = self.done  # failed ops are done too: `_compute` marks every op it is given
        stack = [target.op]
        while stack:
            op = stack[-1]
            if op in done:
                stack.pop()
                continue
            missing = [v.op for v in op.operands if v.op not in done]
            if missing:
                stack.extend(missing)
                continue
            stack.pop()
            self._compute(op)
        return self.values.get(target)

    def _compute(self, op: Op) -> None:
        self.done.add(op)
        operands = op.operands
        inputs = [self.values.get(v) for v in operands]
        for value, arr in zip(operands, inputs):
            if arr is None:  # `None in inputs` would compare arrays with ==
                self.failed[op] = f"input '{value.name}' could not be computed"
                return
        try:
            outputs = evaluate_op(op, inputs)
        except InterpreterError as err:
            if not self.ignore_errors:
                raise PassFailure(f"fold_constants: {err}") from None
            self.failed[op] = str(err)
            return
        for value, arr in zip(op.results, outputs):
            self.values[value] = arr

    # -- report -------------------------------------------------------------------------
    def _report(self, dropped: int, forwarded: int, created: int, outputs: int, erased: int,
                skipped: int) -> PassResult:
        result = self.result
        result.sites = forwarded + created + outputs
        result.changed = bool(dropped or result.sites or erased)
        result.note(f"replaced {result.sites} values with constants: {created} new Const ops, "
                    f"{forwarded} forwarded to existing constants, {outputs} outputs turned into Consts")
        result.note(f"removed {erased} ops left unused; dropped {dropped} control edges from constant ops")
        if skipped:
            result.note(f"left {skipped} values unfolded (evaluation failed or larger than {self.max_bytes} bytes)")
        for op, reason in list(self.failed.items())[:5]:
            result.note(f"could not evaluate '{op.name}' ({op.type}): {reason}")
        return result


def _foldable_ops(graph: Graph, fed: set[str]) -> set[Op]:
    """Every op whose value depends only on constants (closure over data and control inputs)."""
    library = set(function_names(graph.extras.library))
    blocked = deque(op for op in graph if not _may_fold(op, fed, library))
    unfoldable = set(blocked)
    while blocked:
        op = blocked.popleft()
        readers = [user for value in op.results for user, _ in value.uses]  # repeats are harmless here
        readers += op.control_users
        for user in readers:
            if user not in unfoldable:
                unfoldable.add(user)
                blocked.append(user)
    return {op for op in graph if op not in unfoldable}


def _may_fold(op: Op, fed: set[str], library: set[str]) -> bool:
    """Whether the op itself could be evaluated at compile time (ignoring its inputs)."""
    kind = op.type
    if op.name in fed or kind in library or _never_folds(kind):
        return False
    for value in op.results:  # a loop, not any(): asked of every op
        if value.dtype in _UNFOLDABLE_DTYPES:
            return False
    return kind == "Const" or kind in FORWARDING_OPS or has_kernel(kind)


@functools.lru_cache(maxsize=4096)  # bounded: a corrupt graph may name any number of op types
def _never_folds(kind: str) -> bool:
    """Op types that never fold, whatever the op: asked once per type (the OpDef lookup is not free)."""
    return (kind in _NEVER_FOLD or kind in TF1_CONTROL_FLOW_OPS or kind in FUNCTIONAL_OPS or is_stateful(kind)
            or "Random" in kind)


def _pinned_outputs(graph: Graph, outputs: list[str]) -> set[str]:
    """Outputs fetched at a port other than 0 cannot become a one-result Const: keep those ops."""
    pinned = set()
    for name in outputs:
        head, sep, tail = name.rpartition(":")
        if sep and tail.isdigit() and int(tail) > 0:
            pinned.add(head)
    return pinned


def _redirect_outside(value: Value, new: Value, foldable: set[Op]) -> None:
    """Point the uses of `value` by ops that do not fold at `new` (foldable readers are going away)."""
    for user, index in list(value.uses):
        if user not in foldable:
            user.set_operand(index, new)
