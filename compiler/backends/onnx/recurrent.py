"""A Keras LSTM, GRU or SimpleRNN loop as one ONNX LSTM/GRU/RNN node instead of a Loop.

Keras 3 frozen with lowered control flow writes each recurrent layer as a
TF1 while frame (see `tf1_frames`): the input sequence unstacked into a
TensorList read one step per iteration, the cell's MatMuls and gates, the
step's output written into a second list, and two counters.  When the frame
is exactly that -- every body op explained, weights constant, sigmoid or
hard-sigmoid gates and tanh, relu or sigmoid as the layer's activation, the
loop running once per timestep -- the whole frame is one ONNX LSTM, GRU or
RNN node, which runtimes execute far faster than a Loop.
Anything else (another activation, masking, a custom cell) is not matched,
and `ops_tf1_control` lowers the frame as a Loop.

Gate pre-activations are matched as *linear forms*: a sum of `source @ W`
terms and a bias, through MatMul, Add/BiasAdd and ops that only pick columns
(Split, StridedSlice, Squeeze of a batch of one...).  A column picker is
recognised by running its kernel on a tensor of column numbers, so every
spelling Keras or grappler may produce is handled by one rule.  Keras'
go_backwards and Bidirectional reverse the sequence outside the loop
(ReverseV2), so the loop itself always runs forward.

TF1's `dynamic_rnn` around a tf.compat.v1 rnn_cell writes the same frame with
three differences, each taken by the same rules: the input list is entered as
a loop invariant rather than carried; the cell multiplies concat([x, h]) by one
kernel (a MatMul of a Concat is one term per piece, with that piece's rows of
the kernel); and GRUCell takes one Sigmoid of both gates before splitting it
(a gate may be the columns a split picks of a Sigmoid).  BasicLSTMCell's
forget bias is a constant added to a gate: part of the form's bias.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional, Union

import numpy as np

from compiler.analysis import StaticInfo, analyze
from compiler.analysis.const_eval import evaluate, is_evaluable
from compiler.backends.onnx.context import LoweringContext
from compiler.backends.onnx.tf1_frames import FORWARDING, LoopVariable, WhileFrame, forwarded_source
from compiler.ir.dtypes import DType
from compiler.ir.graph import Op, Value

_ADDS = frozenset({"Add", "AddV2", "BiasAdd"})
_RNN_ACTIVATIONS = ("Tanh", "Relu", "Sigmoid")  # TF op types ONNX RNN names the same
# Ops that may only pick columns of a [batch, width] value; which operand is the data.
_COLUMN_PICKERS = {"Split": 1, "SplitV": 0, "StridedSlice": 0, "Slice": 0, "Squeeze": 0}
_BATCH_STAND_IN = 2
# Positions float32 numbers exactly (2^24), far past any cell's [batch, units * gates] data.
_LARGEST_PROBE = 1 << 24
Weights = tuple[np.ndarray, np.ndarray, np.ndarray]   # W, R, B
# GRU's candidate gate: the reset gate's pre-activation, (W_h, R_h, Wb_h, Rb_h), linear_before_reset.
Candidate = tuple["PreActivation", tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], int]
# How deep `_fold` looks for a constant the export's analysis left unknown.
_FOLD_DEPTH = 4


@dataclass
class Linear:
    """sum(source @ weights[source]) + bias, over [batch, width] values."""

    weights: dict[Value, np.ndarray]
    bias: np.ndarray

    def plus(self, other: "Linear") -> Optional["Linear"]:
        weights = dict(self.weights)
        for source, w in other.weights.items():
            if source in weights and weights[source].shape != w.shape:
                return None
            weights[source] = weights[source] + w if source in weights else w
        try:
            bias = self.bias + other.bias
        except ValueError:
            return None
        return Linear(weights, bias)

    def columns(self, picked: np.ndarray) -> Optional["Linear"]:
        """The form of the `picked` columns; None when a weight or the bias is narrower than they
        reach (a bias that does not fit its MatMul: TF refuses the graph when it runs)."""
        widths = [w.shape[1] for w in self.weights.values()] + ([] if self.bias.size == 1 else [self.bias.shape[-1]])
        if picked.size and (picked.min() < 0 or any(picked.max() >= width for width in widths) or self.bias.ndim > 1):
            return None
        bias = self.bias if self.bias.size == 1 else self.bias[picked]
        return Linear({s: w[:, picked] for s, w in self.weights.items()}, bias)

    def gate(self, sources: tuple[Value, ...], width: int) -> Optional[list[np.ndarray]]:
        """[W_s for s in sources] (each [width, inputs], ONNX's orientation) and the bias, when
        the form reads exactly `sources` and is `width` wide."""
        if set(self.weights) != set(sources) or any(w.shape[1] != width for w in self.weights.values()):
            return None
        if self.bias.ndim > 1 or self.bias.size not in (1, width):
            return None
        return [self.weights[s].T for s in sources] + [np.broadcast_to(self.bias, (width,))]


# A gate's input: a value in the body, or the columns of one that a split picks.
PreActivation = Union[Value, Linear]
# A matched cell: op type, weights, its states (ONNX output order), gate pre-activations, attributes.
Cell = tuple[str, Weights, list[LoopVariable], list[PreActivation], dict[str, object]]


@dataclass
class RecurrentCell:
    """What a matched frame becomes: the ONNX node's attributes and weights, and what to bind."""

    op_type: str                      # "LSTM", "GRU" or "RNN"
    hidden: int
    w: np.ndarray                     # [gates*hidden, inputs], ONNX gate order
    r: np.ndarray                     # [gates*hidden, hidden]
    b: np.ndarray                     # [2*gates*hidden]: input biases, then recurrent biases
    sequence: Value                   # the dense [time, batch, inputs] tensor the input list came from
    states: list[LoopVariable]        # h (and c for an LSTM), in ONNX's output order
    outputs: LoopVariable             # the list the steps write into
    every_step: bool                  # the list holds every step (else only the last, at index 0)
    attrs: dict[str, object] = field(default_factory=dict)


class _Matcher:
    """Structural matching over one frame's body, with its facts (shapes and folded constants)."""

    def __init__(self, ctx: LoweringContext, info: StaticInfo, hard_gates: bool = False) -> None:
        self.ctx, self.info = ctx, info
        self.used: set[Op] = set()
        self.hard_gates = hard_gates  # Keras' recurrent_activation="hard_sigmoid"

    def gate(self, value: Value) -> Optional[PreActivation]:
        """The pre-activation of a gate: Sigmoid, or with hard gates Keras 3's hard sigmoid,
        relu6(z + 3) / 6 (ONNX HardSigmoid, alpha 1/6, beta 1/2).  TF1's GRUCell takes one
        Sigmoid of both gates and splits it: a gate is then the form of the columns it picks."""
        if not self.hard_gates:
            if self.src(value).op.type in _COLUMN_PICKERS:
                return self._columns(self.src(value), through="Sigmoid")
            return self.unary(value, "Sigmoid")
        scaled = self.op(value, "RealDiv", "Div", "Mul")
        if scaled is None or len(scaled.operands) != 2:
            return None
        clipped, by = scaled.operands
        if scaled.type == "Mul" and self._is_scalar(clipped):
            clipped, by = by, clipped
        if not self._is_scalar(by, 6.0 if scaled.type != "Mul" else 1 / 6):
            return None
        shift = self.op(clipped, "Relu6")
        shift = None if shift is None else self.op(shift.operands[0], "Add", "AddV2")
        if shift is None or len(shift.operands) != 2:
            return None
        for z, three in (shift.operands, shift.operands[::-1]):
            if self._is_scalar(three, 3.0):
                return z
        return None

    def _is_scalar(self, value: Value, number: Optional[float] = None) -> bool:
        """A one-element float constant (equal to `number` in float32, when given)."""
        found = self.constant(value)
        if found is None or np.size(found) != 1:
            return False
        return number is None or np.float32(np.asarray(found).reshape(())) == np.float32(number)

    def dims(self, value: Value) -> Optional[tuple]:
        """Shapes as the enclosing export refined them (through lists), else as found locally."""
        dims = self.ctx.shape(value).dims
        return dims if dims is not None else self.info.shape(value).dims

    def src(self, value: Value) -> Value:
        while value.op.type in FORWARDING:
            self.used.add(value.op)
            value = value.op.operands[0]
        return value

    def op(self, value: Value, *types: str) -> Optional[Op]:
        found = self.src(value).op
        if found.type not in types:
            return None
        self.used.add(found)
        return found

    def unary(self, value: Value, op_type: str) -> Optional[Value]:
        found = self.op(value, op_type)
        return None if found is None else found.operands[0]

    def pair(self, value: Value, types: frozenset[str], first: Callable, second: Callable) -> Optional[tuple]:
        """`first(a)` and `second(b)` for the operands of a commutative op, in either order."""
        found = self.op(value, *types)
        if found is None or len(found.operands) != 2:
            return None
        for a, b in (found.operands, found.operands[::-1]):
            x, y = first(a), second(b)
            if x is not None and y is not None:
                return x, y
        return None

    def constant(self, value: Value) -> Optional[np.ndarray]:
        return self.info.constant(self.src(value))

    def linear(self, value: PreActivation) -> Optional[Linear]:
        if isinstance(value, Linear):
            return value
        value = self.src(value)
        folded = self.info.constant(value)
        if folded is not None:
            if np.asarray(folded).dtype.kind != "f":
                return None
            bias = np.asarray(folded, np.float64)
            return Linear({}, bias[0] if bias.ndim == 2 and bias.shape[0] == 1 else bias)
        op = value.op
        if op.type == "MatMul":
            return self._matmul(op)
        if op.type in _ADDS and len(op.operands) == 2:
            a, b = self.linear(op.operands[0]), self.linear(op.operands[1])
            if a is None or b is None:
                return None
            self.used.add(op)
            return a.plus(b)
        if op.type in _COLUMN_PICKERS:
            return self._columns(value)
        return None

    def _matmul(self, op: Op) -> Optional[Linear]:
        weights = self.constant(op.operands[1])
        if weights is None or weights.ndim != 2 or op.attr("transpose_a", False) or self.constant(op.operands[0]) is not None:
            return None
        weights = np.asarray(weights.T if op.attr("transpose_b", False) else weights, np.float64)
        pieces = self._row_pieces(op.operands[0], weights.shape[0])
        if pieces is None:
            return None
        self.used.add(op)
        form, start = Linear({}, np.zeros(weights.shape[1])), 0
        for source, width in pieces:
            form = form.plus(Linear({source: weights[start:start + width]}, np.zeros(weights.shape[1])))
            if form is None:
                return None
            start += width
        return form

    def _row_pieces(self, value: Value, rows: int) -> Optional[list[tuple[Value, int]]]:
        """The [batch, width] sources a MatMul's left operand joins side by side, with the rows of
        the weights each one meets: TF1's RNN cells multiply concat([x, h]) by one kernel."""
        value = self.src(value)
        concat = value.op
        if concat.type != "ConcatV2" or not self._is_axis(concat.operands[-1], 1):
            return [(value, rows)]
        pieces = concat.operands[:-1]
        dims = [self.dims(v) for v in pieces]
        if any(d is None or len(d) != 2 or d[1] is None for d in dims) or any(self.constant(v) is not None
                                                                             for v in pieces):
            return None
        widths = [d[1] for d in dims]
        if sum(widths) != rows:
            return None
        self.used.add(concat)
        return [(self.src(v), w) for v, w in zip(pieces, widths)]

    def _is_axis(self, value: Value, axis: int) -> bool:
        """A scalar constant naming `axis` of a rank-2 value (counting from either end)."""
        found = self.constant(value)
        return found is not None and np.ndim(found) == 0 and int(found) in (axis, axis - 2)

    def _columns(self, value: Value, through: Optional[str] = None) -> Optional[Linear]:
        """The form of the columns `value` picks of a linear form, or (`through` an activation)
        the form of the columns it picks of that activation of one: the activation's input."""
        op = value.op
        data = op.operands[_COLUMN_PICKERS[op.type]]
        source = data if through is None else self.unary(data, through)
        inner = None if source is None else self.linear(source)
        if inner is None:
            return None
        picked = self._picked_columns(op, value.index, data)
        if picked is None:
            return None
        self.used.add(op)
        return inner.columns(picked)

    def _picked_columns(self, op: Op, index: int, data: Value) -> Optional[np.ndarray]:
        """The columns `op` keeps of its [batch, width] data, all rows kept; None if it does more.

        The op's kernel runs on a tensor holding each element's position: what comes out says
        which elements were kept, whatever the op's spelling.  An unknown batch is stood in for by
        two rows; the op's result shape (from the shape rules, which try huge stand-ins) must then
        keep the batch unknown, so a slice of the first rows is not taken for all of them."""
        dims, out_dims = self.dims(data), self.dims(op.results[index])
        if dims is None or len(dims) != 2 or dims[1] is None or out_dims is None:
            return None
        if len(out_dims) == 2 and out_dims[0] != dims[0]:
            return None
        rows, width = dims[0] or _BATCH_STAND_IN, dims[1]
        if rows * width > _LARGEST_PROBE:
            return None  # no cell is that wide; the frame stays a Loop
        positions = np.arange(rows * width, dtype=np.float32).reshape(rows, width)
        operands = [positions if v is data else self.info.constant(v) for v in op.operands]
        if any(a is None for a in operands):
            return None
        results = evaluate(op, operands)
        if results is None:
            return None
        out = np.asarray(results[index])
        if out.ndim == 1 and rows == 1:
            out = out[None, :]
        if out.ndim != 2 or out.shape[0] != rows:
            return None
        picked = out[0].astype(np.int64)
        expected = np.arange(rows)[:, None] * width + picked[None, :]
        return picked if np.array_equal(out, expected) else None


def match_recurrent(ctx: LoweringContext, frame: WhileFrame) -> Optional[RecurrentCell]:
    """The LSTM/GRU/RNN node `frame` is, or None when any part of it is something else."""
    if any(v.body_input is None for v in frame.variables):  # a value only the condition reads
        return None
    roles = _roles(ctx, frame)
    if roles is None:
        return None
    matcher = _Matcher(ctx, _facts(ctx, frame), hard_gates=any(op.type == "Relu6" for op in frame.body_ops))
    found = _frame_shape(ctx, matcher, frame, roles)
    if found is None:
        return None
    x, sequence, steps = found
    for var in roles["counters"] + roles["inputs"]:  # a counter's step, an invariant's pass-through
        step = matcher.op(var.body_output, "Add", "AddV2")
        for value in step.operands if step is not None else ():
            matcher.src(value)
    states, outputs = roles["states"], roles["list"][0]
    writes = _writes(ctx, matcher, outputs, roles["time"], steps)
    if writes is None:
        return None
    every_step, written = writes
    if len(states) == 2:
        cell = _lstm(matcher, x, states, written)
    else:
        cell = _simple_rnn(matcher, x, states[0], written) or _gru(matcher, x, states[0], written)
    if cell is None or not _all_explained(matcher, frame, cell[3]):
        return None
    op_type, (w, r, b), ordered, _, attrs = cell
    if w.shape[1] != ctx.shape(sequence).dims[2]:
        return None
    return RecurrentCell(op_type, r.shape[1], w, r, b, sequence, ordered, outputs, every_step, attrs)


# -- the frame around the cell ------------------------------------------------------------
def _roles(ctx: LoweringContext, frame: WhileFrame) -> Optional[dict[str, list[LoopVariable]]]:
    """Sort the carried values: counters (0, +1), the output list, the float states; None if the
    frame carries anything else, or a counter's final value is read."""
    roles: dict[str, list[LoopVariable]] = {"counters": [], "list": [], "states": [], "inputs": []}
    for var in frame.variables:
        origin = forwarded_source(var.initial).op.type
        if var.invariant:
            roles["inputs"].append(var)
        elif origin == "TensorListReserve":
            roles["list"].append(var)
        elif _is_counter(ctx, var):
            if var.exit is not None:
                return None
            roles["counters"].append(var)
        elif ctx.dtype(var.initial) == DType.FLOAT and ctx.rank(var.initial) == 2:
            roles["states"].append(var)
        else:
            return None
    if len(roles["list"]) != 1 or not roles["counters"] or not 1 <= len(roles["states"]) <= 2:
        return None
    return roles


def _is_counter(ctx: LoweringContext, var: LoopVariable) -> bool:
    start = ctx.constant(var.initial)
    step = forwarded_source(var.body_output).op
    if start is None or np.asarray(start).shape != () or int(start) != 0 or step.type not in ("Add", "AddV2"):
        return False
    operands = [forwarded_source(v) for v in step.operands]
    ones = [v for v in operands if np.ndim(ctx.constant(v)) == 0 and ctx.constant(v) == 1]
    return len(ones) == 1 and var.body_input in operands


def _facts(ctx: LoweringContext, frame: WhileFrame) -> StaticInfo:
    """Shapes and constants inside the frame: invariants (weights) are the constants they enter."""
    constants: dict[Value, np.ndarray] = {}
    inputs = {}
    for enter in frame.invariants:
        known = ctx.constant(enter.operands[0])
        if known is not None:
            constants[enter.results[0]] = known
        else:
            inputs[enter.results[0]] = ctx.shape(enter.operands[0])
    for var in frame.variables:
        known = _fold(ctx, var.initial, _FOLD_DEPTH) if var.invariant else None
        for value in (var.merged, var.body_input):
            if known is not None:
                constants[value] = known
            else:
                inputs[value] = ctx.shape(var.merged)
    return analyze(frame.cond_ops + frame.body_ops, inputs, constants)


def _fold(ctx: LoweringContext, value: Value, depth: int) -> Optional[np.ndarray]:
    """`value` if a few cheap ops on constants compute it.  Keras bounds its loop by
    `Max(steps, Range(0, Rank(steps)))`, whose empty Range the shape rules leave unsized."""
    known = ctx.constant(value)
    if known is not None or depth == 0 or not is_evaluable(value.op):
        return known
    operands = [_fold(ctx, v, depth - 1) for v in value.op.operands]
    if any(a is None for a in operands):
        return None
    results = evaluate(value.op, operands)
    return None if results is None else results[value.index]


def _frame_shape(ctx: LoweringContext, matcher: _Matcher, frame: WhileFrame, roles: dict
                 ) -> Optional[tuple[Value, Value, int]]:
    """The step read (GetItem of the input list at the time counter), the dense sequence it reads
    from, and the step count, when the condition stops the loop exactly at the sequence's end."""
    reads = [op for op in frame.body_ops if op.type == "TensorListGetItem"]
    if len(reads) != 1:
        return None
    read = reads[0]
    source = _read_list(matcher, frame, roles["inputs"], read.operands[0])
    time = [v for v in roles["counters"] if v.body_input is matcher.src(read.operands[1])]
    if source is None or len(time) != 1 or source.op.type != "TensorListFromTensor":
        return None
    sequence = source.op.operands[0]
    dims = ctx.shape(sequence).dims
    if dims is None or len(dims) != 3 or dims[0] is None or ctx.dtype(sequence) != DType.FLOAT:
        return None
    roles["time"] = time[0]
    matcher.used.add(read)
    if _steps(matcher, frame, roles["counters"]) != dims[0]:
        return None
    return read.results[0], sequence, dims[0]


def _read_list(matcher: _Matcher, frame: WhileFrame, inputs: list[LoopVariable], read: Value) -> Optional[Value]:
    """The list (outside the frame) the step read takes its item from.  Keras carries it as a loop
    variable handed back unchanged; TF1's dynamic_rnn enters it as a loop invariant."""
    read = matcher.src(read)
    carried = [v.initial for v in inputs if v.body_input is read]
    entered = [enter.operands[0] for enter in frame.invariants if enter.results[0] is read]
    found = carried + entered
    return forwarded_source(found[0]) if len(found) == 1 else None


def _steps(matcher: _Matcher, frame: WhileFrame, counters: list[LoopVariable]) -> Optional[int]:
    """How many iterations the condition allows: a conjunction of `counter < constant`."""
    bounds: list[int] = []
    pending = [frame.predicate]
    merged = {v.merged for v in counters}
    while pending:
        value = pending.pop()
        joined = matcher.op(value, "LogicalAnd")
        if joined is not None:
            pending.extend(joined.operands)
            continue
        less = matcher.op(value, "Less")
        bound = None if less is None else matcher.constant(less.operands[1])
        if less is None or matcher.src(less.operands[0]) not in merged or bound is None or np.ndim(bound):
            return None
        bounds.append(int(bound))
    leftover = [op for op in frame.cond_ops if op not in matcher.used and op.type not in ("Const", *FORWARDING)]
    return min(bounds) if bounds and not leftover else None


def _writes(ctx: LoweringContext, matcher: _Matcher, outputs: LoopVariable, time: LoopVariable,
            steps: int) -> Optional[tuple[bool, Value]]:
    """Whether the output list gets every step (index = time, `steps` items) or only the last
    (index 0 of a one-item list), and the value written; None for anything else."""
    write = matcher.op(outputs.body_output, "TensorListSetItem")
    reserve = forwarded_source(outputs.initial).op
    count = ctx.constant(reserve.operands[1])
    if write is None or matcher.src(write.operands[0]) is not outputs.body_input or count is None or np.ndim(count) != 0:
        return None
    if bool(write.attr("resize_if_index_out_of_bounds", False)):
        return None
    index = matcher.src(write.operands[1])
    if index is time.body_input and int(count) == steps:
        return True, write.operands[2]
    fixed = matcher.constant(index)
    if fixed is not None and np.ndim(fixed) == 0 and int(fixed) == 0 and int(count) == 1:
        return False, write.operands[2]
    return None


def _all_explained(matcher: _Matcher, frame: WhileFrame, gates: list[PreActivation]) -> bool:
    """Every body op is part of the match, or computes a constant (weights sliced in the loop);
    every gate pre-activation is a [batch, hidden] matrix (picked columns of one are)."""
    if any(len(matcher.dims(v) or ()) != 2 for v in gates if not isinstance(v, Linear)):
        return False
    return all(op in matcher.used or all(matcher.info.is_constant(v) for v in op.results) for op in frame.body_ops)


# -- the cells --------------------------------------------------------------------------
def _lstm(m: _Matcher, x: Value, states: list[LoopVariable], written: Value) -> Optional[Cell]:
    """h = o * act(c), c = f * c_prev + i * act(g): ONNX LSTM with gates in i, o, f, c order.
    act is Keras' `activation` (tanh by default, relu in many time-series models)."""
    by_output = {m.src(v.body_output): v for v in states}
    h_var = by_output.get(m.src(written))
    if h_var is None:
        return None
    c_var = next(v for v in states if v is not h_var)
    c_new = m.src(c_var.body_output)
    chosen = _Activations()
    o_act = m.pair(written, frozenset({"Mul"}), m.gate, lambda v: _is(m, chosen.match(m, v, "h"), c_new))
    if o_act is None:
        return None
    c_prev = c_var.body_input
    forget = lambda v: m.pair(v, frozenset({"Mul"}), m.gate, lambda b: _is(m, b, c_prev))  # noqa: E731
    update = lambda v: m.pair(v, frozenset({"Mul"}), m.gate, lambda b: chosen.match(m, b, "g"))  # noqa: E731
    terms = m.pair(c_new, frozenset({"Add", "AddV2"}), forget, update)
    if terms is None:
        return None
    (f_pre, _), (i_pre, g_pre) = terms
    pre = [i_pre, o_act[0], f_pre, g_pre]
    found = _gates(m, pre, (x, h_var.body_input), _width(m, h_var, f_pre))
    if found is None:
        return None
    w, r, b = found
    return "LSTM", (w, r, np.concatenate([b, np.zeros_like(b)])), [h_var, c_var], pre, chosen.attrs(m, "g", "h")


class _Activations:
    """Which of ONNX's activations a cell applies where Keras applies its `activation`: ONNX
    LSTM/GRU default to Tanh there, and name any other in `activations` after the gates' (Sigmoid,
    or HardSigmoid with its alpha and beta)."""

    def __init__(self) -> None:
        self.found: dict[str, str] = {}

    def match(self, m: _Matcher, value: Value, role: str) -> Optional[Value]:
        """The operand of `value` when it is one of the activations (recorded for `role`)."""
        for activation in _RNN_ACTIVATIONS:
            pre = m.unary(value, activation)
            if pre is not None:
                self.found[role] = activation
                return pre
        return None

    def attrs(self, m: _Matcher, *roles: str) -> dict[str, object]:
        chosen = [self.found[role] for role in roles]
        if not m.hard_gates:
            return {} if all(a == "Tanh" for a in chosen) else {"activations": ["Sigmoid", *chosen]}
        return {"activations": ["HardSigmoid", *chosen], "activation_alpha": [1 / 6], "activation_beta": [0.5]}


def _gru(m: _Matcher, x: Value, h_var: LoopVariable, written: Value) -> Optional[Cell]:
    """h = z * h_prev + (1 - z) * act(x W_h + r * (h R_h + Rb_h))  (Keras reset_after: ONNX
    linear_before_reset=1), or act(x W_h + (r * h_prev) R_h + b) (linear_before_reset=0); act as
    for an LSTM."""
    h_prev, h_new = h_var.body_input, m.src(h_var.body_output)
    if m.src(written) is not h_new:
        return None
    keep = lambda v: m.pair(v, frozenset({"Mul"}), lambda a: a if m.gate(a) is not None else None,  # noqa: E731
                            lambda b: _is(m, b, h_prev))
    chosen = _Activations()
    blend = lambda v: m.pair(v, frozenset({"Mul"}), lambda a: _one_minus(m, a),  # noqa: E731
                             lambda b: chosen.match(m, b, "g"))
    terms = m.pair(h_new, frozenset({"Add", "AddV2"}), keep, blend)
    if terms is None or m.src(terms[0][0]) is not m.src(terms[1][0]):
        return None
    z_pre, candidate = m.gate(terms[0][0]), terms[1][1]
    width = _width(m, h_var, z_pre)
    if width is None:
        return None
    after = _reset_after(m, candidate, x, h_prev, width)
    found = after or _reset_before(m, candidate, x, h_prev, width)
    if found is None:
        return None
    r_pre, h_gate, linear_before_reset = found
    zr = _gates(m, [z_pre, r_pre], (x, h_prev), width)
    if zr is None:
        return None
    (w_zr, r_zr, b_zr), (w_h, r_h, wb_h, rb_h) = zr, h_gate
    if not _stackable([(w_zr, w_h), (r_zr, r_h)], width):
        return None
    w = np.concatenate([w_zr, w_h])
    r = np.concatenate([r_zr, r_h])
    b = np.concatenate([b_zr, wb_h, np.zeros(2 * width), rb_h])
    attrs = {"linear_before_reset": linear_before_reset, **chosen.attrs(m, "g")}
    return "GRU", (w, r, b), [h_var], [z_pre, r_pre, candidate], attrs


def _stackable(pairs: list[tuple[np.ndarray, np.ndarray]], width: int) -> bool:
    """Whether each (two gates', one gate's) weight pair stacks into ONNX's [3 * width, inputs] form:
    a mangled slice (fuzzed masks) can pick other shapes, and the frame then stays a Loop."""
    return all(a.ndim == b.ndim == 2 and a.shape == (2 * width, b.shape[1]) and b.shape[0] == width
               for a, b in pairs)


def _simple_rnn(m: _Matcher, x: Value, h_var: LoopVariable, written: Value) -> Optional[Cell]:
    """h = act(x W + h_prev R + b), act one of ONNX RNN's (Keras' SimpleRNN: tanh by default)."""
    h_new = m.src(h_var.body_output)
    if m.src(written) is not h_new:
        return None
    chosen = _Activations()
    pre = chosen.match(m, h_new, "h")
    if pre is None:
        return None
    found = _gates(m, [pre], (x, h_var.body_input), _width(m, h_var, pre))
    if found is None:
        return None
    w, r, b = found
    return "RNN", (w, r, np.concatenate([b, np.zeros_like(b)])), [h_var], [pre], {"activations": [chosen.found["h"]]}


def _is(m: _Matcher, value: Optional[Value], wanted: Value) -> Optional[Value]:
    """`value` when it is `wanted` (looking through identities)."""
    return value if value is not None and m.src(value) is wanted else None


def _width(m: _Matcher, state: LoopVariable, gate: Value) -> Optional[int]:
    """The hidden size: the state's last dim, or (a dynamic batch's zeros relax it to unknown) the
    rows of the recurrent weights in one gate."""
    dims = m.dims(state.body_input)
    if dims is not None and len(dims) == 2 and dims[1] is not None:
        return dims[1]
    form = m.linear(gate)
    recurrent = None if form is None else form.weights.get(state.body_input)
    return None if recurrent is None else recurrent.shape[0]


def _one_minus(m: _Matcher, value: Value) -> Optional[Value]:
    sub = m.op(value, "Sub")
    one = None if sub is None else m.constant(sub.operands[0])
    if one is None or not np.all(np.asarray(one) == 1) or np.size(one) != 1:
        return None
    return sub.operands[1]


def _reset_after(m: _Matcher, candidate: Value, x: Value, h_prev: Value, width: int) -> Optional[Candidate]:
    """x W_h + Wb_h + r * (h R_h + Rb_h)."""
    reset = lambda v: m.pair(v, frozenset({"Mul"}), m.gate, lambda b: m.linear(b))  # noqa: E731
    found = m.pair(candidate, _ADDS, lambda a: m.linear(a), reset)
    if found is None:
        return None
    from_x, (r_pre, from_h) = found
    xs, hs = from_x.gate((x,), width), from_h.gate((h_prev,), width)
    if xs is None or hs is None:
        return None
    return r_pre, (xs[0], hs[0], xs[1], hs[1]), 1


def _reset_before(m: _Matcher, candidate: Value, x: Value, h_prev: Value, width: int) -> Optional[Candidate]:
    """x W_h + (r * h_prev) R_h + b."""
    form = m.linear(candidate)
    if form is None:
        return None
    others = [s for s in form.weights if s is not x]
    if len(others) != 1:
        return None
    gated = m.pair(others[0], frozenset({"Mul"}), m.gate, lambda b: _is(m, b, h_prev))
    found = None if gated is None else form.gate((x, others[0]), width)
    if found is None:
        return None
    return gated[0], (found[0], found[1], found[2], np.zeros(width)), 0


def _gates(m: _Matcher, pre: list[PreActivation], sources: tuple[Value, Value], width: Optional[int]
           ) -> Optional[Weights]:
    """Stacked [W; R; Wb] of gate pre-activations that are each `x W + h R + b`."""
    if width is None:
        return None
    parts = []
    for value in pre:
        form = m.linear(value)
        found = None if form is None else form.gate(sources, width)
        if found is None:
            return None
        parts.append(found)
    w, r, b = (np.concatenate([p[i] for p in parts]) for i in range(3))
    return w, r, b


# -- emission -------------------------------------------------------------------------------
def lower_recurrent(ctx: LoweringContext, frame: WhileFrame) -> bool:
    """Emit `frame` as one ONNX LSTM/GRU/RNN node if it is one; False leaves it to the Loop lowering."""
    cell = match_recurrent(ctx, frame)
    if cell is None:
        return False
    base = f"{ctx.prefix}{frame.name}/{cell.op_type.lower()}"
    weights = [ctx.initializer(a[None].astype(np.float32), f"{frame.name}/{n}")
               for a, n in ((cell.w, "W"), (cell.r, "R"), (cell.b, "B"))]
    initial = [_initial_state(ctx, v, base) for v in cell.states]
    state_outs = [ctx.scope.tensors.fresh(f"{base}/Y_{'hc'[i]}") for i in range(len(cell.states))]
    every = ctx.scope.tensors.fresh(base + "/Y") if cell.every_step and cell.outputs.exit is not None else ""
    inputs = [ctx.value_in(cell.sequence, None)] + weights + [""] + initial
    while not inputs[-1]:
        inputs.pop()
    ctx.builder.add_node(cell.op_type, inputs, [every] + state_outs, ctx.scope.nodes.fresh(base),
                         {"hidden_size": cell.hidden, **cell.attrs})
    if cell.outputs.exit is not None:
        steps = ctx.node("Squeeze", [every, ctx.ints([1], base + "/axes1")], base + "/steps")[0] \
            if cell.every_step else state_outs[0]
        ctx.bind(cell.outputs.exit.results[0], steps)
    for var, tensor in zip(cell.states, state_outs):
        if var.exit is not None:
            ctx.bind(var.exit.results[0], ctx.node("Squeeze", [tensor, ctx.ints([0], base + "/axes0")],
                                                   f"{base}/final")[0])
    for var in frame.variables:
        if var.invariant and var.exit is not None:
            ctx.bind(var.exit.results[0], ctx.value_in(var.initial, None))
    ctx.stats["onnx_" + cell.op_type.lower()] += 1
    return True


def is_zeros(ctx: LoweringContext, value: Value) -> bool:
    """A constant of zeros, or zeros of a run-time shape (Keras' state for a dynamic batch)."""
    value = forwarded_source(value)
    if value.op.type in ("Fill", "BroadcastTo"):
        value = value.op.operands[1 if value.op.type == "Fill" else 0]
    elif value.op.type == "ZerosLike":
        return True
    known = ctx.constant(value)
    return known is not None and not np.any(known)


def _initial_state(ctx: LoweringContext, var: LoopVariable, base: str) -> str:
    """The state's starting value as [1, batch, hidden]; omitted (ONNX's zeros) when it is zeros."""
    if is_zeros(ctx, var.initial):
        return ""
    tensor = ctx.value_in(var.initial, None)
    return ctx.node("Unsqueeze", [tensor, ctx.ints([0], base + "/axes0")], base + "/initial")[0]
