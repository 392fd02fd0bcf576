"""TF1 control flow: a dataflow executor with frames, iterations and dead tensors.

TensorFlow 1 expresses `cond` and `while_loop` with Switch/Merge (a dead
token flows down the untaken branch), Enter/Exit (move a value into or out
of a loop frame), NextIteration (move it to the next iteration) and
LoopCond; a frozen TF2 `switch_case` lowers to _SwitchN, an N-way Switch on
an index.  This executor follows TF's own executor: every token lives in a
*context* -- the chain of (frame, iteration) pairs it was produced in -- and
an op fires in a context once all its inputs there have arrived; an op with
a dead input produces dead outputs (Merge fires on its first live input).
Loop invariants (`Enter(is_constant=true)`) are delivered to every iteration
of their frame; dead NextIteration tokens end a loop; an Exit that only ever
saw dead tokens passes one dead token out once the loop has drained.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np

from compiler.ir.graph import Op, Value
from compiler.limits import LoopWork, check_loop_iterations
from compiler.runtime.op_eval import InterpreterError

TF1_CONTROL_FLOW_OPS = frozenset({
    "Switch", "RefSwitch", "_SwitchN", "Merge", "RefMerge", "Enter", "RefEnter", "Exit", "RefExit",
    "NextIteration", "RefNextIteration", "LoopCond", "ControlTrigger",
})
_SWITCH = ("Switch", "RefSwitch")
_MERGE = ("Merge", "RefMerge")
_ENTER = ("Enter", "RefEnter")
_EXIT = ("Exit", "RefExit")
_NEXT = ("NextIteration", "RefNextIteration")


class _Dead:
    """The token of a value on an untaken branch."""

    def __repr__(self) -> str:
        return "DEAD"


DEAD = _Dead()
Context = tuple  # tuple[tuple[str, int], ...]: (frame name, iteration) from outermost in
Compute = Callable[[Op, list[np.ndarray]], list[np.ndarray]]


@dataclass
class _Pending:
    """Inputs that have arrived for one op in one context."""

    inputs: list
    controls: int = 0
    control_dead: bool = False
    fired: bool = False


@dataclass
class _Frame:
    """One loop frame instance: its started iterations and loop invariants."""

    iterations: set = field(default_factory=set)
    invariants: list = field(default_factory=list)  # (constant Enter op, token)


class FrameExecutor:
    """Runs the `needed` ops of a graph that contains TF1 control flow."""

    def __init__(self, needed: set[Op], compute: Compute) -> None:
        self.needed = needed
        self.compute = compute
        self.tokens: dict[Value, object] = {}  # values outside every loop: the ones a fetch can read
        self.pending: dict[tuple[Op, Context], _Pending] = {}
        self.frames: dict[tuple[Context, str], _Frame] = {}
        self.queue: deque[tuple[Op, Context]] = deque()
        self.dead_exits: dict[tuple[Op, Context], bool] = {}
        self.back_edge_slots = {op: _back_edge_slots(op) for op in needed if op.type in _MERGE}
        self.controls_needed = {op: sum(1 for d in op.control_deps if d in needed) for op in needed}
        self.work = LoopWork()

    # -- driver ------------------------------------------------------------------
    def run(self, feeds: Mapping[Value, np.ndarray], fetches: Sequence[Value]) -> list[np.ndarray]:
        for value, arr in feeds.items():
            self._deliver_value(value, (), arr)
        for op in dict.fromkeys(v.op for v in feeds):
            self._deliver_control(op, (), False)
        for op in self.needed:
            if not op.operands and not op.control_deps:
                self._schedule(op, ())
        while True:
            self._drain()
            if not self._release_dead_exits():
                break
        return [self._fetch(v) for v in fetches]

    def _drain(self) -> None:
        while self.queue:
            op, ctx = self.queue.popleft()
            self._fire(op, ctx)

    def _fetch(self, value: Value) -> np.ndarray:
        token = self.tokens.get(value)
        if token is None:
            raise InterpreterError(f"fetch '{value.name}' was never computed (it is inside a loop or "
                                   f"depends on a value that never arrived)")
        if token is DEAD:
            raise InterpreterError(f"fetch '{value.name}' is dead: it lies on an untaken cond branch")
        return token  # type: ignore[return-value]

    # -- arrival -------------------------------------------------------------------
    def _state(self, op: Op, ctx: Context) -> _Pending:
        key = (op, ctx)
        state = self.pending.get(key)
        if state is None:
            state = _Pending([None] * len(op.operands))
            self.pending[key] = state
        return state

    def _deliver_value(self, value: Value, ctx: Context, token: object) -> None:
        """Hand `value` to every needed consumer in `ctx`, and record it if it is outside every loop
        (only those can be fetched): a loop's values are not kept past their readers, so memory
        does not grow with the iteration count."""
        if not ctx:
            self.tokens[value] = token
        for user, slot in value.uses:
            if user in self.needed:
                state = self._state(user, ctx)
                state.inputs[slot] = token
                self._check_ready(user, ctx, state)

    def _deliver_control(self, op: Op, ctx: Context, dead: bool) -> None:
        for user in op.control_users:
            if user in self.needed:
                state = self._state(user, ctx)
                state.controls += 1
                state.control_dead = state.control_dead or dead
                self._check_ready(user, ctx, state)

    def _check_ready(self, op: Op, ctx: Context, state: _Pending) -> None:
        if state.fired or state.controls < self.controls_needed[op]:
            return
        if op.type in _MERGE:
            if any(t is not None and t is not DEAD for t in state.inputs) or self._merge_all_dead(op, ctx, state):
                self._schedule(op, ctx)
        elif all(t is not None for t in state.inputs):
            self._schedule(op, ctx)

    def _merge_all_dead(self, op: Op, ctx: Context, state: _Pending) -> bool:
        """Every input that can still arrive here is dead (loop back edges count only after iteration 0)."""
        skip = self.back_edge_slots[op] if _iteration(ctx) == 0 else ()
        slots = [i for i in range(len(state.inputs)) if i not in skip]
        return bool(slots) and all(state.inputs[i] is DEAD for i in slots)

    def _schedule(self, op: Op, ctx: Context) -> None:
        state = self._state(op, ctx)
        if not state.fired:
            state.fired = True
            self.queue.append((op, ctx))

    # -- firing ----------------------------------------------------------------------
    def _fire(self, op: Op, ctx: Context) -> None:
        state = self.pending[(op, ctx)]
        inputs = state.inputs
        if op.type in _MERGE:
            self._fire_merge(op, ctx, inputs)
        elif op.type in _SWITCH:
            self._fire_switch(op, ctx, inputs, state.control_dead)
        elif op.type == "_SwitchN":
            self._fire_switch_n(op, ctx, inputs, state.control_dead)
        elif op.type in _ENTER:
            self._fire_enter(op, ctx, inputs[0] if not state.control_dead else DEAD)
        elif op.type in _EXIT:
            self._fire_exit(op, ctx, inputs[0] if not state.control_dead else DEAD)
        elif op.type in _NEXT:
            self._fire_next(op, ctx, inputs[0] if not state.control_dead else DEAD)
        elif op.type == "ControlTrigger":
            self._deliver_control(op, ctx, False)
        elif state.control_dead or any(t is DEAD for t in inputs):
            self._emit(op, ctx, [DEAD] * len(op.results), dead=True)
        else:
            outputs = self._compute(op, inputs)
            if ctx:
                self.work.add(outputs, lambda: f"loop '{ctx[-1][0]}' (node '{op.name}')")
            self._emit(op, ctx, outputs, dead=False)
        del self.pending[(op, ctx)]

    def _compute(self, op: Op, inputs: list) -> list:
        if op.type == "LoopCond":
            return [inputs[0]]
        return self.compute(op, inputs)

    def _emit(self, op: Op, ctx: Context, outputs: list, dead: bool) -> None:
        for value, token in zip(op.results, outputs):
            self._deliver_value(value, ctx, token)
        self._deliver_control(op, ctx, dead)

    def _fire_merge(self, op: Op, ctx: Context, inputs: list) -> None:
        live = [i for i, t in enumerate(inputs) if t is not None and t is not DEAD]
        if not live:  # TF: a dead control input does not kill a Merge (a cond's branch_executed Merge)
            self._emit(op, ctx, [DEAD, DEAD], dead=True)
        else:
            self._emit(op, ctx, [inputs[live[0]], np.asarray(live[0], dtype=np.int32)], dead=False)

    def _fire_switch(self, op: Op, ctx: Context, inputs: list, control_dead: bool) -> None:
        data, pred = inputs
        if control_dead or data is DEAD or pred is DEAD:
            self._emit(op, ctx, [DEAD, DEAD], dead=True)
        elif _predicate(op, pred):
            self._emit(op, ctx, [DEAD, data], dead=False)
        else:
            self._emit(op, ctx, [data, DEAD], dead=False)

    def _fire_switch_n(self, op: Op, ctx: Context, inputs: list, control_dead: bool) -> None:
        """A lowered `switch_case`: the data goes to output `index`, or to the last output (the
        default branch) for an index out of range, as TF's kernel does."""
        data, index = inputs
        count = len(op.results)
        if control_dead or data is DEAD or index is DEAD:
            self._emit(op, ctx, [DEAD] * count, dead=True)
            return
        if np.size(index) != 1 or np.asarray(index).dtype.kind not in "iu":
            raise InterpreterError(f"_SwitchN '{op.name}': output_index must be an integer scalar, got "
                                   f"{np.asarray(index).dtype} of shape {np.shape(index)}")
        taken = int(np.asarray(index).reshape(()))
        taken = taken if 0 <= taken < count else count - 1
        self._emit(op, ctx, [data if i == taken else DEAD for i in range(count)], dead=False)

    def _fire_enter(self, op: Op, ctx: Context, token: object) -> None:
        frame_name = _frame_name(op)
        frame = self.frames.setdefault((ctx, frame_name), _Frame())
        frame.iterations.add(0)
        if bool(op.attr("is_constant", False)):
            # A loop invariant: TF activates its readers, data and control, in every iteration.
            frame.invariants.append((op, token))
            for it in sorted(frame.iterations):
                self._deliver_invariant(op, ctx + ((frame_name, it),), token)
        else:
            self._deliver_value(op.results[0], ctx + ((frame_name, 0),), token)
            self._deliver_control(op, ctx + ((frame_name, 0),), token is DEAD)

    def _deliver_invariant(self, enter: Op, ctx: Context, token: object) -> None:
        self._deliver_value(enter.results[0], ctx, token)
        self._deliver_control(enter, ctx, token is DEAD)

    def _fire_next(self, op: Op, ctx: Context, token: object) -> None:
        if token is DEAD:
            return  # a dead back edge ends the loop
        if not ctx:
            raise InterpreterError(f"NextIteration '{op.name}' runs outside any loop frame")
        parent, (frame_name, it) = ctx[:-1], ctx[-1]
        nxt = parent + ((frame_name, it + 1),)
        frame = self.frames.setdefault((parent, frame_name), _Frame())
        if it + 1 not in frame.iterations:
            check_loop_iterations(it, f"loop '{frame_name}' (NextIteration '{op.name}')")
            frame.iterations.add(it + 1)
            for enter, inv in frame.invariants:
                self._deliver_invariant(enter, nxt, inv)
        self._deliver_value(op.results[0], nxt, token)
        self._deliver_control(op, nxt, False)

    def _fire_exit(self, op: Op, ctx: Context, token: object) -> None:
        if not ctx:
            raise InterpreterError(f"Exit '{op.name}' runs outside any loop frame")
        parent = ctx[:-1]
        if token is DEAD:
            self.dead_exits.setdefault((op, parent), False)
            return
        self.dead_exits[(op, parent)] = True
        self._deliver_value(op.results[0], parent, token)
        self._deliver_control(op, parent, False)

    def _release_dead_exits(self) -> bool:
        """Pass one dead token out of every Exit that never saw a live one; True if any did."""
        released = False
        for (op, parent), live in list(self.dead_exits.items()):
            if not live:
                self.dead_exits[(op, parent)] = True
                self._deliver_value(op.results[0], parent, DEAD)
                self._deliver_control(op, parent, True)
                released = True
        return released


def _back_edge_slots(op: Op) -> tuple[int, ...]:
    return tuple(i for i, v in enumerate(op.operands) if v.op.type in _NEXT)


def _iteration(ctx: Context) -> int:
    return ctx[-1][1] if ctx else 0


def _frame_name(op: Op) -> str:
    name = op.attr("frame_name", "")
    if isinstance(name, bytes):
        name = name.decode("utf-8", "replace")
    if not name:
        raise InterpreterError(f"Enter '{op.name}' has no frame_name")
    return name


def _predicate(op: Op, pred: object) -> bool:
    """A Switch's predicate, which TF requires to be one boolean."""
    array = np.asarray(pred)
    if array.size != 1:
        raise InterpreterError(f"Switch '{op.name}': its predicate has shape {list(array.shape)}, not one element")
    return bool(array.reshape(()))
