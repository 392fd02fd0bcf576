"""Functional control flow and calls: If, Case, While, PartitionedCall.

TF2 graphs keep control flow as ops that name functions of the graph's
library.  Each function is lowered once (`lower_function`) and run by its
own cached Interpreter, which shares this runner so nested calls reuse the
same cache.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from compiler.errors import InputError
from compiler.frontends.graphdef.functions import Function, function_names, lower_function
from compiler.ir.attrs import FuncAttr
from compiler.ir.graph import Op
from compiler.limits import LoopWork, check_loop_iterations
from compiler.runtime.op_eval import InterpreterError

if TYPE_CHECKING:
    from compiler.runtime.interpreter import Interpreter

_IF = ("If", "StatelessIf")
_CASE = ("Case", "StatelessCase")
_WHILE = ("While", "StatelessWhile")
_CALL = ("PartitionedCall", "StatefulPartitionedCall")
FUNCTIONAL_OPS = frozenset(_IF + _CASE + _WHILE + _CALL)


def is_function_call(op: Op, library: Any) -> bool:
    """True for functional control flow and for nodes whose op is a library function."""
    if op.type in FUNCTIONAL_OPS:
        return True
    return library is not None and op.type in _library_names(library)


def _library_names(library: Any) -> frozenset[str]:
    """The library's function names, remembered for the last library asked about only: a run
    asks about one library thousands of times, and a cache of every library ever seen keeps
    each alive for as long as the process runs (a notebook compiling model after model)."""
    global _last_names
    if _last_names[0] is not library:
        _last_names = (library, frozenset(function_names(library)))
    return _last_names[1]


_last_names: tuple[Any, frozenset[str]] = (None, frozenset())


class FunctionRunner:
    """Calls library functions; lowers and plans each one once."""

    def __init__(self, library: Any) -> None:
        self.library = library
        self._bodies: dict[str, tuple[Function, "Interpreter"]] = {}

    def call_op(self, op: Op, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """Run one functional op (or direct function call) on its inputs."""
        if op.type in _IF:
            branch = "then_branch" if _truthy(inputs[0]) else "else_branch"
            return self.call(_func_name(op, branch), inputs[1:], op)
        if op.type in _CASE:
            return self.call(_case_branch(op, inputs[0]), inputs[1:], op)
        if op.type in _WHILE:
            return self._run_while(op, inputs)
        if op.type in _CALL:
            return self.call(_func_name(op, "f"), inputs, op)
        return self.call(op.type, inputs, op)

    def call(self, name: str, args: Sequence[np.ndarray], caller: Op) -> list[np.ndarray]:
        fn, interp = self._body(name, caller)
        if len(args) != len(fn.args):
            raise InterpreterError(f"node '{caller.name}' ({caller.type}) passes {len(args)} arguments "
                                   f"to function '{name}', which takes {len(fn.args)}")
        feeds = {arg.results[0]: np.asarray(a) for arg, a in zip(fn.args, args)}
        return interp.run_values(feeds, fn.results)

    def _run_while(self, op: Op, inputs: list[np.ndarray]) -> list[np.ndarray]:
        cond, body = _func_name(op, "cond"), _func_name(op, "body")
        loop_vars = list(inputs)
        iteration, work = 0, LoopWork()
        while _truthy(self.call(cond, loop_vars, op)[0]):
            check_loop_iterations(iteration, f"node '{op.name}' ({op.type})")
            loop_vars = self.call(body, loop_vars, op)
            work.add(loop_vars, lambda: f"node '{op.name}' ({op.type})")
            iteration += 1
        return loop_vars

    def _body(self, name: str, caller: Op) -> tuple[Function, "Interpreter"]:
        found = self._bodies.get(name)
        if found is None:
            from compiler.runtime.interpreter import Interpreter

            try:
                fn = lower_function(self.library, name)
            except InputError as err:
                raise InterpreterError(f"node '{caller.name}' ({caller.type}): {err}") from None
            found = (fn, Interpreter(fn.graph, self.library, self))
            self._bodies[name] = found
        return found


def _func_name(op: Op, attr: str) -> str:
    value = op.attr(attr)
    if not isinstance(value, FuncAttr):
        raise InterpreterError(f"node '{op.name}' ({op.type}) has no function attribute '{attr}'")
    return value.name


def _case_branch(op: Op, index: np.ndarray) -> str:
    branches = op.attr("branches", ())
    if not branches:
        raise InterpreterError(f"node '{op.name}' ({op.type}) has no branches")
    i = int(np.asarray(index).reshape(-1)[0])
    chosen = branches[i] if 0 <= i < len(branches) else branches[-1]  # TF: out of range -> last
    return chosen.name


def _truthy(arr: np.ndarray) -> bool:
    """TF's predicate rule: a scalar by its value (non-empty for strings), a tensor by being non-empty."""
    arr = np.asarray(arr)
    if arr.ndim == 0:
        item = arr.item()
        return len(item) > 0 if isinstance(item, (bytes, str)) else bool(item)
    return arr.size > 0
