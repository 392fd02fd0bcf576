"""Elementwise ops: activations, arithmetic, comparisons, casts, pass-throughs.

None of these care about axis order, so each computes in the layout its
operands already have (see `layout.choose`); a constant operand of lower
rank is reshaped and permuted at compile time to broadcast the same way in
that layout.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
from onnx import TensorProto

from compiler.backends.onnx import layout
from compiler.backends.onnx.bands import TRILU_OPSET, TRILU_TYPES, band_of, emit_band
from compiler.backends.onnx.complex_pairs import COMPLEX_TYPES, cast_complex, complex_arithmetic
from compiler.backends.onnx.context import Lowered, LoweringContext
from compiler.backends.onnx.dtypes import FLOAT8_OPSET, FLOAT8_TYPES, carrier, onnx_type, ort_computes
from compiler.backends.onnx.errors import UnsupportedOpError
from compiler.backends.onnx.channel_affine import lower_channel_affine
from compiler.backends.onnx.fusion import absorb_bias
from compiler.backends.onnx.hard_sigmoid import lower_hard_activation
from compiler.backends.onnx.layout import Perm
from compiler.backends.onnx.registry import AGNOSTIC, ALIAS, lowers
from compiler.ir.dtypes import DType
from compiler.ir.graph import Op, Value
from compiler.runtime.kernels.nn import SELU_ALPHA, SELU_SCALE

UNARY = {
    "Abs": "Abs", "Acos": "Acos", "Acosh": "Acosh", "Asin": "Asin", "Asinh": "Asinh", "Atan": "Atan",
    "Atanh": "Atanh", "Ceil": "Ceil", "Cos": "Cos", "Cosh": "Cosh", "Elu": "Elu", "Erf": "Erf",
    "Exp": "Exp", "Floor": "Floor", "Inv": "Reciprocal", "IsInf": "IsInf", "IsNan": "IsNaN",
    "Log": "Log", "LogicalNot": "Not", "Neg": "Neg", "Reciprocal": "Reciprocal", "Relu": "Relu",
    "Rint": "Round", "Round": "Round", "Selu": "Selu", "Sigmoid": "Sigmoid", "Sign": "Sign",
    "Sin": "Sin", "Sinh": "Sinh", "Softplus": "Softplus", "Softsign": "Softsign", "Sqrt": "Sqrt",
    "Tan": "Tan", "Tanh": "Tanh",
}

BINARY = {
    "Add": "Add", "AddV2": "Add", "Sub": "Sub", "Mul": "Mul", "RealDiv": "Div", "Div": "Div",
    "TruncateDiv": "Div", "Maximum": "Max", "Minimum": "Min", "Pow": "Pow", "Greater": "Greater",
    "Less": "Less", "GreaterEqual": "GreaterOrEqual", "LessEqual": "LessOrEqual", "Equal": "Equal",
    "LogicalAnd": "And", "LogicalOr": "Or",
}

PASS_THROUGH = ("Identity", "StopGradient", "PreventGradient", "Snapshot", "CheckNumerics",
                "CheckNumericsV2", "IdentityN", "PlaceholderWithDefault")


# -- operands in a common layout ----------------------------------------------------
def broadcast_operands(ctx: LoweringContext, op: Op, values: Sequence[Value]) -> tuple[list[str], Perm]:
    """The operands as tensors broadcasting correctly in the layout the op will compute in."""
    rank = ctx.rank(op.results[0])
    if any(ctx.rank(v) is None for v in values):
        rank = None
    candidates = [(ctx.layout_vote(v), ctx.rank(v)) for v in values if not ctx.is_constant(v)]
    if ctx.has_preference(op.results[0]):
        candidates.append((ctx.wanted(op.results[0]), rank))
    perm = layout.choose(candidates, rank)
    return [_broadcast_operand(ctx, v, perm, rank) for v in values], perm


def _broadcast_operand(ctx: LoweringContext, value: Value, perm: Perm, rank: Optional[int]) -> str:
    own = ctx.rank(value)
    if perm is None or own == rank:
        return ctx.value_in(value, perm)
    if ctx.shape(value).num_elements == 1:
        return ctx.value_in(value, None)
    assert rank is not None and own is not None
    padded = (1,) * (rank - own) + tuple(ctx.shape(value).dims)  # type: ignore[operator]
    array = ctx.constant(value)
    if array is not None:
        stored = layout.to_physical(array.reshape(padded), perm)
        while stored.ndim > 1 and stored.shape[0] == 1:
            stored = stored.reshape(stored.shape[1:])
        return ctx.initializer(stored, f"{value.name}/{''.join(map(str, perm))}")
    lifted = ctx.node("Unsqueeze", [ctx.value_in(value, None), ctx.ints(range(rank - own), f"{value.name}/lift")],
                      f"{value.name}/lift")[0]
    return layout.convert(ctx, lifted, None, perm, padded)


def lower_broadcasting(ctx: LoweringContext, op: Op, onnx_op: str, values: Sequence[Value]) -> None:
    inputs, perm = broadcast_operands(ctx, op, values)
    out = emit_typed(ctx, op, onnx_op, inputs, ctx.dtype(values[0]), wraps=op.type in _WRAPPING)
    ctx.bind(op.results[0], out, perm)


# -- element types onnxruntime computes in --------------------------------------------
# TF ops whose integer results wrap around (modulo 2^bits), which a same-width type computes too.
_WRAPPING = frozenset({"Add", "AddV2", "Sub", "Mul", "Square", "AddN", "BiasAdd", "BiasAddV1", "Sum", "Prod",
                       "Cumsum", "MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3"})


def type_name(dtype: Optional[DType]) -> str:
    return "an unknown type" if dtype is None else dtype.name.lower()


def cast_to(ctx: LoweringContext, op: Op, tensor: str, dtype: DType, suffix: str) -> str:
    """`tensor` as `dtype`: a constant converted at export time, an int64 tensor some narrowing
    Cast read from, else a Cast node `<op>/<suffix>`."""
    array = ctx.scope.initializers.get(tensor)
    if array is not None:
        return ctx.initializer(array.astype(dtype.to_numpy()), f"{op.name}/{suffix}")
    wide = ctx.wide_source(tensor)
    if wide is not None and dtype == DType.INT64:
        return wide
    return ctx.helper1(op, suffix, "Cast", [tensor], to=onnx_type(dtype))


def in_carrier(ctx: LoweringContext, op: Op, tensor: str, dtype: Optional[DType], work: DType) -> str:
    """`tensor` (of type `dtype`) in carrier type `work`: itself, or cast to it (named after the type)."""
    return tensor if work == dtype else cast_to(ctx, op, tensor, work, type_name(work))


def emit_typed(ctx: LoweringContext, op: Op, onnx_op: str, inputs: Sequence[str], dtype: Optional[DType],
               typed: Optional[Sequence[int]] = None, wraps: bool = False, back: Optional[bool] = None,
               suffix: Optional[str] = None, **attrs) -> str:
    """ONNX `onnx_op` on `inputs`, whose operands `typed` (default: all) are `dtype`, as `op`'s main
    node (or its helper `suffix`).  Where onnxruntime has no kernel for `dtype`, a carrier type
    computes it (dtypes.carrier; `wraps`: the result is wanted modulo 2^bits): those operands cast
    to it, the result cast back when `back` (default: when `op`'s result is of type `dtype`, not a
    comparison's bool or an index).  Refused naming the type when no type carries it exactly."""
    through = carrier_of(ctx, op, onnx_op, dtype, wraps)
    if through != dtype:
        positions = range(len(inputs)) if typed is None else typed
        inputs = [cast_to(ctx, op, t, through, f"{suffix or onnx_op.lower()}_in{i}_{type_name(through)}")
                  if i in positions else t for i, t in enumerate(inputs)]
    if back is None:
        back = ctx.dtype(op.results[0]) == dtype
    return emit_last(ctx, op, dtype, through if back else dtype, onnx_op, inputs, suffix, **attrs)  # type: ignore


def carrier_of(ctx: LoweringContext, op: Op, onnx_op: str, dtype: Optional[DType], wraps: bool = False) -> DType:
    """The type `onnx_op` computes in for `op`'s `dtype` operands (dtypes.carrier), or a refusal naming it."""
    through = carrier(onnx_op, dtype, ctx.opset, wraps)
    if through is None:
        name = type_name(dtype)
        raise UnsupportedOpError(op.type, op.name, f"onnxruntime has no {onnx_op} kernel for {name}, and no type "
                                                   f"it has one for holds every {name} value")
    return through


def emit_last(ctx: LoweringContext, op: Op, dtype: DType, work: DType, onnx_op: str, inputs: Sequence[str],
              suffix: Optional[str] = None, **attrs) -> str:
    """The last node of a lowering whose operands are of carrier type `work`: `op`'s main node (or
    helper `suffix`), or when `work` is not `dtype` a helper cast back to `dtype` by that node."""
    if work != dtype:
        inputs = [ctx.helper1(op, f"{suffix or onnx_op.lower()}_{type_name(work)}", onnx_op, inputs, **attrs)]
        onnx_op, attrs = "Cast", {"to": onnx_type(dtype)}
    return ctx.emit1(op, onnx_op, inputs, **attrs) if suffix is None else ctx.helper1(op, suffix, onnx_op, inputs,
                                                                                       **attrs)


def is_integer(dtype: Optional[DType]) -> bool:
    return dtype is not None and dtype != DType.BOOL and dtype.to_numpy().kind in "iu"


# -- lowerings -----------------------------------------------------------------------
@lowers(*PASS_THROUGH, layout=ALIAS)
def _pass_through(ctx: LoweringContext, op: Op) -> None:
    """Aliases, not nodes: each result is its operand (constants stay constant)."""
    for value, source in zip(op.results, op.operands):
        if not ctx.is_constant(value):
            found = ctx.lowered(source)
            ctx.bind(value, found.tensor, found.perm)


@lowers(*UNARY, layout=AGNOSTIC)
def _unary(ctx: LoweringContext, op: Op) -> None:
    dtype = ctx.dtype(op.operands[0])
    if dtype in COMPLEX_TYPES:  # Neg: the one complex unary ops_complex.check_no_complex lets through
        complex_arithmetic(ctx, op)
        return
    found = ctx.agnostic_operand(op)
    if is_integer(dtype) and op.type in ("Relu", "Round", "Rint", "Reciprocal", "Inv"):
        _integer_unary(ctx, op, found, dtype)  # type: ignore[arg-type]
        return
    if dtype == DType.DOUBLE and op.type in _DOUBLE_FORMULAS and not ort_computes(UNARY[op.type], dtype, ctx.opset):
        ctx.bind(op.results[0], _DOUBLE_FORMULAS[op.type](ctx, op, found.tensor), found.perm)
        return
    ctx.bind(op.results[0], emit_typed(ctx, op, UNARY[op.type], [found.tensor], dtype), found.perm)


def _integer_unary(ctx: LoweringContext, op: Op, found: Lowered, dtype: DType) -> None:
    """Integer Relu, Round and Reciprocal, which ONNX defines on floats (Relu also on 8- and 32-bit
    integers from opset 14): Round leaves an integer as it is (as tf.math.round does; TF's raw kernel
    zeroes integers, a TF bug), so does Relu an unsigned one, a signed one is max(x, 0).  TF has no
    integer Reciprocal kernel, so that is refused."""
    if op.type in ("Reciprocal", "Inv"):
        raise UnsupportedOpError(op.type, op.name, f"{op.type} of {type_name(dtype)} (TF has no integer kernel, "
                                                   "ONNX Reciprocal takes floats)")
    if op.type in ("Round", "Rint") or dtype.to_numpy().kind == "u":
        ctx.bind(op.results[0], found.tensor, found.perm)
        return
    if ort_computes("Relu", dtype, ctx.opset):
        ctx.bind(op.results[0], ctx.emit1(op, "Relu", [found.tensor]), found.perm)
        return
    out = emit_typed(ctx, op, "Max", [found.tensor, ctx.scalar(0, dtype, "zero")], dtype)
    ctx.bind(op.results[0], out, found.perm)


def _tan(ctx: LoweringContext, op: Op, x: str) -> str:
    return ctx.emit1(op, "Div", [ctx.helper1(op, "sin", "Sin", [x]), ctx.helper1(op, "cos", "Cos", [x])])


def _cosh(ctx: LoweringContext, op: Op, x: str) -> str:
    """e^|x| / 2 + e^-|x| / 2, the first as e^(|x| - ln 2) so it overflows only where cosh does."""
    half_up = ctx.helper1(op, "half_exp", "Exp", [ctx.helper1(op, "shifted", "Sub", [
        ctx.helper1(op, "abs", "Abs", [x]), _double(ctx, np.log(2.0), "ln2")])])
    return ctx.emit1(op, "Add", [half_up, ctx.helper1(op, "half_exp_minus", "Div", [_double(ctx, 0.25, "quarter"),
                                                                                    half_up])])


def _softsign(ctx: LoweringContext, op: Op, x: str) -> str:
    """TF's x / (|x| + 1)."""
    plus_one = ctx.helper1(op, "abs_plus_one", "Add", [ctx.helper1(op, "abs", "Abs", [x]), _double(ctx, 1.0, "one")])
    return ctx.emit1(op, "Div", [x, plus_one])


def _elu(ctx: LoweringContext, op: Op, x: str, scale: float = 1.0, alpha: float = 1.0) -> str:
    """TF's x < 0 ? alpha * (e^x - 1) : x, times scale (Selu), with e^x - 1 as the Expm1 lowering spells it."""
    negative = ctx.helper1(op, "negative", "Less", [x, _double(ctx, 0.0, "zero")])
    below = ctx.helper1(op, "exp_minus_one", "Sub", [ctx.helper1(op, "exp", "Exp", [x]), _double(ctx, 1.0, "one")])
    if scale == 1.0 and alpha == 1.0:
        return ctx.emit1(op, "Where", [negative, below, x])
    below = ctx.helper1(op, "below", "Mul", [below, _double(ctx, scale * alpha, "scale_alpha")])
    above = ctx.helper1(op, "above", "Mul", [x, _double(ctx, scale, "scale")])
    return ctx.emit1(op, "Where", [negative, below, above])


# Double ops onnxruntime has float kernels only for, each as a formula in double.  The others are refused: the
# inverse trigonometric and hyperbolic functions and Erf have no ONNX formula, Sinh and Softplus would cancel.
_DOUBLE_FORMULAS = {"Tan": _tan, "Cosh": _cosh, "Softsign": _softsign, "Elu": _elu,
                    "Selu": lambda ctx, op, x: _elu(ctx, op, x, SELU_SCALE, SELU_ALPHA)}


@lowers("Relu6", layout=AGNOSTIC)
def _relu6(ctx: LoweringContext, op: Op) -> None:
    found = ctx.agnostic_operand(op)
    dtype = ctx.dtype(op.results[0])
    bounds = [ctx.scalar(0, dtype, "zero"), ctx.scalar(6, dtype, "six")]
    ctx.bind(op.results[0], emit_typed(ctx, op, "Clip", [found.tensor] + bounds, dtype), found.perm)


@lowers("LeakyRelu", layout=AGNOSTIC)
def _leaky_relu(ctx: LoweringContext, op: Op) -> None:
    """ONNX LeakyRelu, or where onnxruntime has no kernel for the type (double outside opsets 16-19)
    TF's x > 0 ? x : x * alpha with alpha the float attribute TF reads."""
    found = ctx.agnostic_operand(op)
    dtype = ctx.dtype(op.results[0])
    alpha = float(op.attr("alpha", 0.2))
    if ort_computes("LeakyRelu", dtype, ctx.opset):
        ctx.bind(op.results[0], ctx.emit1(op, "LeakyRelu", [found.tensor], alpha=alpha), found.perm)
        return
    if dtype != DType.DOUBLE:
        raise UnsupportedOpError(op.type, op.name, f"LeakyRelu of {type_name(dtype)}")
    positive = ctx.helper1(op, "positive", "Greater", [found.tensor, _double(ctx, 0.0, "zero")])
    scaled = ctx.helper1(op, "scaled", "Mul", [found.tensor, _double(ctx, float(np.float32(alpha)), "alpha")])
    ctx.bind(op.results[0], ctx.emit1(op, "Where", [positive, found.tensor, scaled]), found.perm)


@lowers("Rsqrt", layout=AGNOSTIC)
def _rsqrt(ctx: LoweringContext, op: Op) -> None:
    found = ctx.agnostic_operand(op)
    root = ctx.helper1(op, "sqrt", "Sqrt", [found.tensor])
    ctx.bind(op.results[0], ctx.emit1(op, "Reciprocal", [root]), found.perm)


@lowers("Square", layout=AGNOSTIC)
def _square(ctx: LoweringContext, op: Op) -> None:
    found = ctx.agnostic_operand(op)
    out = emit_typed(ctx, op, "Mul", [found.tensor, found.tensor], ctx.dtype(op.operands[0]), wraps=True)
    ctx.bind(op.results[0], out, found.perm)


@lowers("Log1p", "Expm1", layout=AGNOSTIC)
def _shifted(ctx: LoweringContext, op: Op) -> None:
    """log(1 + x) and exp(x) - 1: ONNX has neither, both are two nodes."""
    found = ctx.agnostic_operand(op)
    one = ctx.scalar(1, ctx.dtype(op.results[0]), "one")
    if op.type == "Log1p":
        out = ctx.emit1(op, "Log", [ctx.helper1(op, "plus_one", "Add", [found.tensor, one])])
    else:
        out = ctx.emit1(op, "Sub", [ctx.helper1(op, "exp", "Exp", [found.tensor]), one])
    ctx.bind(op.results[0], out, found.perm)


# Constant operands that leave the other operand as it is: (identity element, operand positions).
_NEUTRAL = {"Add": (0, (0, 1)), "AddV2": (0, (0, 1)), "Sub": (0, (1,)), "Mul": (1, (0, 1)),
            "RealDiv": (1, (1,)), "Div": (1, (1,))}


def _unchanged_operand(ctx: LoweringContext, op: Op) -> Optional[Value]:
    """x for x*1, x+0, x-0, x/1 when broadcasting changes neither x's shape nor its type."""
    element, positions = _NEUTRAL.get(op.type, (None, ()))
    for i in positions:
        constant, x = ctx.constant(op.operands[i]), op.operands[1 - i]
        if constant is None or ctx.is_constant(x) or not (constant == element).all():
            continue
        if _broadcasts_into(constant.shape, ctx.shape(x).dims) and ctx.dtype(x) == ctx.dtype(op.results[0]):
            return x
    return None


def _broadcasts_into(small: tuple[int, ...], dims: Optional[tuple[Optional[int], ...]]) -> bool:
    """Whether broadcasting a constant of shape `small` against `dims` leaves `dims` as they are
    (an unknown dimension, such as a dynamic batch, only meets 1s)."""
    if dims is None or len(small) > len(dims):
        return False
    return all(s == 1 or s == d for s, d in zip(small[::-1], dims[::-1]))


@lowers(*BINARY, layout=AGNOSTIC)
def _binary(ctx: LoweringContext, op: Op) -> None:
    if ctx.dtype(op.operands[0]) in COMPLEX_TYPES:  # Add, Sub, Mul: let through by ops_complex.check_no_complex
        complex_arithmetic(ctx, op)
        return
    unchanged = _unchanged_operand(ctx, op)
    if unchanged is not None:
        found = ctx.lowered(unchanged)
        ctx.bind(op.results[0], found.tensor, found.perm)
        ctx.stats["neutral_arithmetic_removed"] += 1
        return
    if op.type in ("Add", "AddV2"):
        for x, b in ((0, 1), (1, 0)):
            if absorb_bias(ctx, op, op.operands[x], op.operands[b]):
                return
        if lower_channel_affine(ctx, op):
            return
    if op.type in ("Mul", "RealDiv", "Div") and lower_hard_activation(ctx, op):
        return
    dtype = ctx.dtype(op.operands[0])
    if op.type == "TruncateDiv" and dtype is not None and dtype.is_float:
        _truncated_quotient(ctx, op)
        return
    lower_broadcasting(ctx, op, BINARY[op.type], op.operands)


def _truncated_quotient(ctx: LoweringContext, op: Op) -> None:
    """TF's float TruncateDiv is trunc(x / y): the quotient's ceiling where it is negative, else its floor
    (ONNX has no Trunc; infinities and NaN stay as trunc leaves them, but a -0 result comes out +0:
    onnxruntime's Where drops the sign of a zero it picks from its first branch)."""
    inputs, perm = broadcast_operands(ctx, op, op.operands)
    quotient = ctx.helper1(op, "quotient", "Div", inputs)
    negative = ctx.helper1(op, "negative", "Less", [quotient, ctx.scalar(0, ctx.dtype(op.operands[0]), "zero")])
    rounded = [ctx.helper1(op, "ceil", "Ceil", [quotient]), ctx.helper1(op, "floor", "Floor", [quotient])]
    ctx.bind(op.results[0], ctx.emit1(op, "Where", [negative] + rounded), perm)


@lowers("NotEqual", layout=AGNOSTIC)
def _not_equal(ctx: LoweringContext, op: Op) -> None:
    inputs, perm = broadcast_operands(ctx, op, op.operands)
    equal = ctx.helper1(op, "equal", "Equal", inputs)
    ctx.bind(op.results[0], ctx.emit1(op, "Not", [equal]), perm)


@lowers("SquaredDifference", layout=AGNOSTIC)
def _squared_difference(ctx: LoweringContext, op: Op) -> None:
    inputs, perm = broadcast_operands(ctx, op, op.operands)
    diff = ctx.helper1(op, "diff", "Sub", inputs)
    ctx.bind(op.results[0], ctx.emit1(op, "Mul", [diff, diff]), perm)


@lowers("FloorDiv", layout=AGNOSTIC)
def _floor_div(ctx: LoweringContext, op: Op) -> None:
    """Floats: floor(x / y).  ONNX's integer Div truncates toward zero, which is the floor only
    for unsigned types; a signed x first loses its floor remainder (Mod with the divisor's sign),
    leaving an exact multiple of y that Div divides without rounding."""
    dtype = ctx.dtype(op.results[0])
    if dtype is None:
        raise UnsupportedOpError(op.type, op.name, "the element type is unknown")
    inputs, perm = broadcast_operands(ctx, op, op.operands)
    if dtype.is_float:
        out = ctx.emit1(op, "Floor", [ctx.helper1(op, "div", "Div", inputs)])
        ctx.bind(op.results[0], out, perm)
        return
    work = carrier_of(ctx, op, "Div", dtype)  # 8- and 16-bit integers before opset 14: in int32
    inputs = [cast_to(ctx, op, t, work, f"in{i}_{type_name(work)}") if work != dtype else t
              for i, t in enumerate(inputs)]
    if dtype.to_numpy().kind == "u":
        out = emit_last(ctx, op, dtype, work, "Div", inputs)
    else:
        remainder = ctx.helper1(op, "remainder", "Mod", inputs, fmod=0)
        multiple = ctx.helper1(op, "multiple", "Sub", [inputs[0], remainder])
        out = emit_last(ctx, op, dtype, work, "Div", [multiple, inputs[1]])
    ctx.bind(op.results[0], out, perm)


@lowers("FloorMod", layout=AGNOSTIC)
def _floor_mod(ctx: LoweringContext, op: Op) -> None:
    """ONNX Mod with fmod=0 takes the divisor's sign (TF's FloorMod), but only for integers."""
    dtype = ctx.dtype(op.results[0])
    inputs, perm = broadcast_operands(ctx, op, op.operands)
    if dtype is not None and dtype.is_float:
        quotient = ctx.helper1(op, "floor", "Floor", [ctx.helper1(op, "div", "Div", inputs)])
        out = ctx.emit1(op, "Sub", [inputs[0], ctx.helper1(op, "times", "Mul", [quotient, inputs[1]])])
    else:
        out = ctx.emit1(op, "Mod", inputs, fmod=0)
    ctx.bind(op.results[0], out, perm)


# Element types onnxruntime's Where computes in (its kernel has no bool, 16-bit or wide unsigned integers).
_WHERE_TYPES = (DType.FLOAT, DType.DOUBLE, DType.HALF, DType.INT8, DType.UINT8, DType.INT32, DType.INT64,
                DType.STRING)


def emit_where(ctx: LoweringContext, op: Op, inputs: Sequence[str], dtype: Optional[DType]) -> str:
    """Where(cond, x, y) as `op`'s node, for any element type: booleans pick with And/Or, other
    integers pass through int64 and back."""
    cond, x, y = inputs
    if dtype is None or dtype in _WHERE_TYPES:
        return ctx.emit1(op, "Where", inputs)
    if dtype == DType.BOOL:
        kept = ctx.helper1(op, "kept", "And", [cond, x])
        other = ctx.helper1(op, "other", "And", [ctx.helper1(op, "not_cond", "Not", [cond]), y])
        return ctx.emit1(op, "Or", [kept, other])
    wide = onnx_type(DType.INT64)
    picked = ctx.helper1(op, "wide", "Where", [cond] + [ctx.helper1(op, f"wide{i}", "Cast", [v], to=wide)
                                                        for i, v in enumerate((x, y))])
    return ctx.emit1(op, "Cast", [picked], to=onnx_type(dtype))


@lowers("SelectV2", layout=AGNOSTIC)
def _select_v2(ctx: LoweringContext, op: Op) -> None:
    if _select_as_band(ctx, op):
        return
    inputs, perm = broadcast_operands(ctx, op, op.operands)
    ctx.bind(op.results[0], emit_where(ctx, op, inputs, ctx.dtype(op.results[0])), perm)


def _select_as_band(ctx: LoweringContext, op: Op) -> bool:
    """select(band mask, x, 0) or select(mask, 0, x), the mask's complement a band, as Trilu
    (bands.py): Keras' tril/triu with an offset, and the eye mask of keras.ops.trace.  Only for a
    constant mask that broadcasts over x, not x."""
    mask = ctx.constant(op.operands[0])
    dtype = ctx.dtype(op.results[0])
    if mask is None or ctx.opset < TRILU_OPSET or dtype not in TRILU_TYPES:
        return False
    for keep, zero, kept in ((1, 2, mask), (2, 1, ~mask)):
        x, zeros = op.operands[keep], ctx.constant(op.operands[zero])
        if zeros is None or not _all_plus_zero(zeros) or ctx.constant(x) is not None:
            continue
        band = band_of(kept)
        x_dims = ctx.shape(x).dims
        if (band is None or x_dims is None or x_dims != ctx.shape(op.results[0]).dims
                or tuple(x_dims[-2:]) != kept.shape[-2:] or ctx.lowered(x).perm is not None):
            continue
        ctx.bind(op.results[0], emit_band(ctx, op, ctx.value_in(x), band))
        ctx.stats["select_as_band"] += 1
        return True
    return False


def _all_plus_zero(array: np.ndarray) -> bool:
    return bool((array == 0).all()) and not (array.dtype.kind == "f" and np.signbit(array).any())


@lowers("Select")
def _select(ctx: LoweringContext, op: Op) -> None:
    """Select (v1) with a vector condition picks whole rows: lift it to the operands' rank."""
    cond, rank = op.operands[0], ctx.rank(op.operands[1])
    if ctx.rank(cond) == 1 and rank is not None and rank > 1:
        lifted = ctx.helper1(op, "rows", "Unsqueeze", [ctx.value_in(cond), ctx.ints(range(1, rank), f"{op.name}/rows")])
        out = emit_where(ctx, op, [lifted, ctx.operand(op, 1), ctx.operand(op, 2)], ctx.dtype(op.results[0]))
        ctx.bind(op.results[0], out)
        return
    inputs, perm = broadcast_operands(ctx, op, op.operands)
    ctx.bind(op.results[0], emit_where(ctx, op, inputs, ctx.dtype(op.results[0])), perm)


@lowers("AddN", layout=AGNOSTIC)
def _add_n(ctx: LoweringContext, op: Op) -> None:
    """ONNX Sum, which takes floats only: integers are a chain of Adds (one operand: itself)."""
    dtype = ctx.dtype(op.results[0])
    if dtype is None or dtype.is_float:
        lower_broadcasting(ctx, op, "Sum", op.operands)
        return
    inputs, perm = broadcast_operands(ctx, op, op.operands)
    total = inputs[0]
    for i, term in enumerate(inputs[1:], 1):
        last = i == len(inputs) - 1
        total = emit_typed(ctx, op, "Add", [total, term], dtype, wraps=True, suffix=None if last else f"sum{i}")
    ctx.bind(op.results[0], total, perm)


@lowers("ClipByValue", layout=AGNOSTIC)
def _clip_by_value(ctx: LoweringContext, op: Op) -> None:
    """TF's max(min(x, hi), lo), which is lo where lo > hi: ONNX Clip (hi there) for constant
    scalar bounds in order, else Min then Max."""
    found = ctx.agnostic_operand(op)
    lo, hi = op.operands[1], op.operands[2]
    dtype = ctx.dtype(op.results[0])
    bounds = [ctx.constant(lo), ctx.constant(hi)]
    if all(b is not None and b.size == 1 for b in bounds) and bounds[0].reshape(()) <= bounds[1].reshape(()):
        scalars = [_as_scalar(ctx, op, lo, "min"), _as_scalar(ctx, op, hi, "max")]
        ctx.bind(op.results[0], emit_typed(ctx, op, "Clip", [found.tensor] + scalars, dtype), found.perm)
        return
    inputs, perm = broadcast_operands(ctx, op, op.operands)
    high = emit_typed(ctx, op, "Min", [inputs[0], inputs[2]], dtype, suffix="min")
    ctx.bind(op.results[0], emit_typed(ctx, op, "Max", [high, inputs[1]], dtype), perm)


def _as_scalar(ctx: LoweringContext, op: Op, value: Value, what: str) -> str:
    array = ctx.constant(value)
    if array is not None:
        return ctx.initializer(array.reshape(()), f"{op.name}/{what}")
    return ctx.helper1(op, what, "Reshape", [ctx.value_in(value), ctx.ints([], f"{op.name}/scalar")])


@lowers("Cast", layout=AGNOSTIC)
def _cast(ctx: LoweringContext, op: Op) -> None:
    if COMPLEX_TYPES & {ctx.dtype(op.operands[0]), op.attr("DstT")}:
        cast_complex(ctx, op)
        return
    found = ctx.agnostic_operand(op)
    destination = op.attr("DstT")
    if ctx.dtype(op.operands[0]) == destination:
        ctx.bind(op.results[0], found.tensor, found.perm)
        return
    _check_castable(ctx, op, (ctx.dtype(op.operands[0]), destination))
    # TF does not saturate: a value past an eight-bit float's range becomes NaN (or inf), as ONNX's saturate=0
    saturate = {"saturate": 0} if destination in FLOAT8_TYPES else {}
    ctx.bind(op.results[0], ctx.emit1(op, "Cast", [found.tensor], to=onnx_type(destination), **saturate), found.perm)


def _check_castable(ctx: LoweringContext, op: Op, dtypes: Sequence[Optional[DType]]) -> None:
    """Refuse a cast between types ONNX lacks, or has only from a later opset (the eight-bit floats)."""
    for dtype in dtypes:
        if dtype is not None and onnx_type(dtype) == TensorProto.UNDEFINED:
            raise UnsupportedOpError(op.type, op.name, f"ONNX has no {type_name(dtype)} type")
        if dtype in FLOAT8_TYPES and ctx.opset < FLOAT8_OPSET:
            raise UnsupportedOpError(op.type, op.name, f"{type_name(dtype)} needs ONNX opset {FLOAT8_OPSET} or later "
                                                       f"(this export is at {ctx.opset}; use --opset {FLOAT8_OPSET})")


# Numerical Recipes' erfc fit, t = 1 / (1 + |x| / 2): erfc(|x|) = t * exp(-x^2 + sum c_i t^i),
# relative error below 1.2e-7 for every x (1 - Erf(x) loses all float32 bits from x ~ 4 on).
_ERFC_FIT = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807, -1.13520398,
             1.48851587, -0.82215223, 0.17087277)
_ERFC_TYPES = (DType.FLOAT, DType.HALF, DType.BFLOAT16)


def _double(ctx: LoweringContext, value: float, base: str) -> str:
    return ctx.scalar(value, DType.DOUBLE, base)


@lowers("Erfc", layout=AGNOSTIC)
def _erfc(ctx: LoweringContext, op: Op) -> None:
    """ONNX has no Erfc, and 1 - Erf cancels to noise for large x: a fit evaluated in double,
    within about one float32 ulp (too coarse for double inputs, which are refused)."""
    dtype = ctx.dtype(op.results[0])
    if dtype not in _ERFC_TYPES:
        raise UnsupportedOpError(op.type, op.name, f"Erfc of {type_name(dtype)} (the ONNX formula is accurate to "
                                                   "float32 only)")
    found = ctx.agnostic_operand(op)
    x = ctx.helper1(op, "x64", "Cast", [found.tensor], to=onnx_type(DType.DOUBLE))
    z = ctx.helper1(op, "abs", "Abs", [x])
    half_z = ctx.helper1(op, "half_z", "Mul", [z, _double(ctx, 0.5, "half")])
    t = ctx.helper1(op, "t", "Reciprocal", [ctx.helper1(op, "one_plus", "Add", [half_z, _double(ctx, 1.0, "one")])])
    poly = _double(ctx, _ERFC_FIT[-1], "erfc_c")
    for i, c in reversed(list(enumerate(_ERFC_FIT[:-1]))):
        poly = ctx.helper1(op, f"poly{i}", "Add", [ctx.helper1(op, f"times_t{i}", "Mul", [poly, t]),
                                                   _double(ctx, c, "erfc_c")])
    exponent = ctx.helper1(op, "exponent", "Sub", [poly, ctx.helper1(op, "square", "Mul", [z, z])])
    tail = ctx.helper1(op, "tail", "Mul", [t, ctx.helper1(op, "exp", "Exp", [exponent])])
    mirrored = ctx.helper1(op, "mirrored", "Sub", [_double(ctx, 2.0, "two"), tail])
    negative = ctx.helper1(op, "negative", "Less", [x, _double(ctx, 0.0, "zero")])
    both = ctx.helper1(op, "erfc64", "Where", [negative, mirrored, tail])
    ctx.bind(op.results[0], ctx.emit1(op, "Cast", [both], to=onnx_type(dtype)), found.perm)


@lowers("IsFinite", layout=AGNOSTIC)
def _is_finite(ctx: LoweringContext, op: Op) -> None:
    """Neither infinite nor NaN: ONNX has the two tests, not their complement."""
    found = ctx.agnostic_operand(op)
    x, dtype = found.tensor, ctx.dtype(op.operands[0])
    x = in_carrier(ctx, op, x, dtype, carrier_of(ctx, op, "IsInf", dtype))  # half: IsInf takes it from opset 20
    inf = ctx.helper1(op, "is_inf", "IsInf", [x])
    nan = ctx.helper1(op, "is_nan", "IsNaN", [x])
    ctx.bind(op.results[0], ctx.emit1(op, "Not", [ctx.helper1(op, "not_finite", "Or", [inf, nan])]), found.perm)


@lowers("DivNoNan", layout=AGNOSTIC)
def _div_no_nan(ctx: LoweringContext, op: Op) -> None:
    """x / y, but 0 where y is 0: the quotient masked.  An integer divisor's zeros are made ones
    first (an integer division by zero is undefined); a float one's inf/NaN is masked away.
    A constant divisor without zeros masks nothing: a plain Div (the moments of Keras'
    GroupNormalization divide by a folded count of weights this way)."""
    inputs, perm = broadcast_operands(ctx, op, op.operands)
    divisor_value = ctx.constant(op.operands[1])
    if divisor_value is not None and divisor_value.size and not np.any(divisor_value == 0):
        ctx.bind(op.results[0], ctx.emit1(op, "Div", inputs), perm)
        return
    dtype = ctx.dtype(op.operands[1])
    zero = ctx.scalar(0, dtype, "zero")
    is_zero = ctx.helper1(op, "is_zero", "Equal", [inputs[1], zero])
    divisor = inputs[1]
    if dtype is None or not dtype.is_float:
        divisor = ctx.helper1(op, "safe_divisor", "Where", [is_zero, ctx.scalar(1, dtype, "one"), divisor])
    quotient = ctx.helper1(op, "quotient", "Div", [inputs[0], divisor])
    out = ctx.emit1(op, "Where", [is_zero, zero, quotient])
    ctx.bind(op.results[0], out, perm)


@lowers("MulNoNan", layout=AGNOSTIC)
def _mul_no_nan(ctx: LoweringContext, op: Op) -> None:
    """x * y, but 0 where y is 0 even when x is inf or NaN (TF's MulNoNan): the product masked."""
    inputs, perm = broadcast_operands(ctx, op, op.operands)
    zero = ctx.scalar(0, ctx.dtype(op.operands[1]), "zero")
    is_zero = ctx.helper1(op, "y_is_zero", "Equal", [inputs[1], zero])
    product = ctx.helper1(op, "product", "Mul", inputs)
    ctx.bind(op.results[0], ctx.emit1(op, "Where", [is_zero, zero, product]), perm)


@lowers("Xdivy", "Xlogy", "Xlog1py", layout=AGNOSTIC)
def _x_times(ctx: LoweringContext, op: Op) -> None:
    """x / y, x * log(y) or x * log(1 + y), with 0 wherever x is 0 (TF's Xdivy, Xlogy and
    Xlog1py): the result masked."""
    inputs, perm = broadcast_operands(ctx, op, op.operands)
    zero = ctx.scalar(0, ctx.dtype(op.operands[0]), "zero")
    if op.type == "Xdivy":
        product = ctx.helper1(op, "quotient", "Div", inputs)
    else:
        y = inputs[1]
        if op.type == "Xlog1py":
            y = ctx.helper1(op, "plus_one", "Add", [y, ctx.scalar(1, ctx.dtype(op.operands[1]), "one")])
        product = ctx.helper1(op, "product", "Mul", [inputs[0], ctx.helper1(op, "log_y", "Log", [y])])
    is_zero = ctx.helper1(op, "x_is_zero", "Equal", [inputs[0], zero])
    ctx.bind(op.results[0], ctx.emit1(op, "Where", [is_zero, zero, product]), perm)


# -- bits -------------------------------------------------------------------------------------
_BITWISE = {"BitwiseAnd": "BitwiseAnd", "BitwiseOr": "BitwiseOr", "BitwiseXor": "BitwiseXor", "Invert": "BitwiseNot"}
_SHIFT_TYPES = (DType.UINT8, DType.UINT32, DType.UINT64)
_UNSIGNED_OF = {DType.INT8: DType.UINT8, DType.INT32: DType.UINT32, DType.INT64: DType.UINT64}


@lowers(*_BITWISE, layout=AGNOSTIC)
def _bitwise(ctx: LoweringContext, op: Op) -> None:
    if ctx.opset < 18:
        raise UnsupportedOpError(op.type, op.name, f"ONNX bitwise operators need opset 18 (exporting at {ctx.opset})")
    lower_broadcasting(ctx, op, _BITWISE[op.type], op.operands)


@lowers("LeftShift", "RightShift", layout=AGNOSTIC)
def _shift(ctx: LoweringContext, op: Op) -> None:
    """ONNX BitShift, with the amount clamped to [0, bits - 1] as TF clamps it.  BitShift is
    logical and unsigned only (onnxruntime: 8, 32 and 64 bits), so a signed x shifts as the
    unsigned type of its width: to the left that is TF's own definition, to the right TF's shift
    is arithmetic, which for a negative x is ~(~x >> y), with ~x = -1 - x not negative."""
    dtype = ctx.dtype(op.results[0])
    unsigned = dtype if dtype in _SHIFT_TYPES else _UNSIGNED_OF.get(dtype)  # type: ignore[arg-type]
    if unsigned is None:
        raise UnsupportedOpError(op.type, op.name, f"ONNX BitShift takes 8/32/64-bit integers, not {type_name(dtype)}")
    (x, y), perm = broadcast_operands(ctx, op, op.operands)
    y = _clamped_amount(ctx, op, y, dtype)
    direction = "LEFT" if op.type == "LeftShift" else "RIGHT"
    if dtype == unsigned:
        ctx.bind(op.results[0], ctx.emit1(op, "BitShift", [x, y], direction=direction), perm)
        return
    if direction == "LEFT":
        y = ctx.helper1(op, "amount", "Cast", [y], to=onnx_type(unsigned))
        bits = ctx.helper1(op, "bits", "Cast", [x], to=onnx_type(unsigned))
        shifted = ctx.helper1(op, "shifted", "BitShift", [bits, y], direction=direction)
        ctx.bind(op.results[0], ctx.emit1(op, "Cast", [shifted], to=onnx_type(dtype)), perm)
        return
    work = carrier_of(ctx, op, "Sub", dtype)  # int8 before opset 14: as int32, which shifts alike sign-extended
    if work != dtype:
        x, unsigned = cast_to(ctx, op, x, work, type_name(work)), _UNSIGNED_OF[work]
    y = ctx.helper1(op, "amount", "Cast", [y], to=onnx_type(unsigned))
    negative = ctx.helper1(op, "negative", "Less", [x, ctx.scalar(0, work, f"{op.name}/zero")])
    minus_one = ctx.scalar(-1, work, f"{op.name}/minus_one")
    flipped = ctx.helper1(op, "flipped", "Where", [negative, ctx.helper1(op, "inverted", "Sub", [minus_one, x]), x])
    bits = ctx.helper1(op, "bits", "Cast", [flipped], to=onnx_type(unsigned))
    shifted = ctx.helper1(op, "shifted", "Cast", [ctx.helper1(op, "logical", "BitShift", [bits, y], direction=direction)],
                          to=onnx_type(work))
    restored = ctx.helper1(op, "restored", "Sub", [minus_one, shifted])
    ctx.bind(op.results[0], emit_last(ctx, op, dtype, work, "Where", [negative, restored, shifted]), perm)


def _clamped_amount(ctx: LoweringContext, op: Op, y: str, dtype: DType) -> str:
    """The shift amount in [0, bits - 1]: TF shifts by the nearest end of that range."""
    bits = 8 * dtype.to_numpy().itemsize
    amounts = ctx.constant(op.operands[1])
    if amounts is not None and ((amounts >= 0) & (amounts < bits)).all():
        return y
    if dtype not in _SHIFT_TYPES:
        y = ctx.helper1(op, "not_negative", "Max", [y, ctx.scalar(0, dtype, f"{op.name}/no_shift")])
    return ctx.helper1(op, "clamped", "Min", [y, ctx.scalar(bits - 1, dtype, "widest_shift")])


def _sign_bit(ctx: LoweringContext, op: Op, name: str, t: str, zero: str) -> str:
    """min(t, 1 / t) < 0: negative numbers, -0 (whose reciprocal is -inf) and -inf (itself)."""
    inverse = ctx.helper1(op, f"{name}_inverse", "Reciprocal", [t])
    return ctx.helper1(op, f"{name}_sign_bit", "Less", [ctx.helper1(op, f"{name}_lesser", "Min", [t, inverse]), zero])


@lowers("Atan2", layout=AGNOSTIC)
def _atan2(ctx: LoweringContext, op: Op) -> None:
    """ONNX has no Atan2: see atan2_float32. onnxruntime has no double Atan, so double is refused."""
    dtype = atan2_type(ctx, op)
    inputs, perm = broadcast_operands(ctx, op, op.operands)
    y, x = inputs
    if dtype == DType.HALF:
        y, x = (ctx.helper1(op, f"{n}32", "Cast", [t], to=onnx_type(DType.FLOAT)) for n, t in zip("yx", inputs))
    ctx.bind(op.results[0], atan2_float32(ctx, op, y, x, last=dtype == DType.FLOAT), perm)


def atan2_type(ctx: LoweringContext, op: Op) -> DType:
    """The result type of an op computed with atan2_float32: float32 or half."""
    dtype = ctx.dtype(op.results[0])
    if dtype not in (DType.FLOAT, DType.HALF):
        raise UnsupportedOpError(op.type, op.name, f"{op.type} of {type_name(dtype)} "
                                                   "(onnxruntime's Atan is float32 only)")
    return dtype


def atan2_float32(ctx: LoweringContext, op: Op, y: str, x: str, last: bool) -> str:
    """atan(y / x), turned by pi toward y's sign where x's sign bit is set (y / +-0 is +-inf, so
    x == 0 needs nothing more).  Where y / x is NaN (the origin, both operands infinite, or a NaN
    operand) the ratio becomes clip(y) * clip(x) to [-1, 1]: a zero with y's sign at the origin
    (the turn supplies +-pi when x is -0), +-1 on the diagonals, NaN stays NaN.  The turn never
    cancels (|result| >= pi/2), so float32 keeps ~1 ulp.  atan2(-0, +0) comes out +0:
    onnxruntime's Where drops the sign of a zero it picks from its first branch.  `last`: the
    result is the op's own (else a float32 value the caller casts)."""
    zero = ctx.scalar(0.0, DType.FLOAT, "zero")
    ratio = ctx.helper1(op, "ratio", "Div", [y, x])
    unit = [ctx.scalar(-1.0, DType.FLOAT, "minus_one"), ctx.scalar(1.0, DType.FLOAT, "one")]
    clipped = ctx.helper1(op, "clipped_product", "Mul", [ctx.helper1(op, f"{n}_clipped", "Clip", [t, *unit])
                                                         for n, t in (("y", y), ("x", x))])
    defined = ctx.helper1(op, "defined_ratio", "Where", [ctx.helper1(op, "undefined", "IsNaN", [ratio]), clipped, ratio])
    base = ctx.helper1(op, "atan", "Atan", [defined])
    y_minus, x_minus = (_sign_bit(ctx, op, n, t, zero) for n, t in (("y", y), ("x", x)))
    half_turn = ctx.helper1(op, "half_turn", "Where", [y_minus, ctx.scalar(-np.pi, DType.FLOAT, "minus_pi"),
                                                        ctx.scalar(np.pi, DType.FLOAT, "pi")])
    turn = [x_minus, ctx.helper1(op, "plus_turn", "Add", [base, half_turn]), base]
    if last:
        return ctx.emit1(op, "Where", turn)
    return ctx.emit1(op, "Cast", [ctx.helper1(op, "atan2_32", "Where", turn)], to=onnx_type(DType.HALF))
