"""Shape rules of ops whose result has the shape of their (broadcast) operands."""
from __future__ import annotations

from typing import Optional

from compiler.analysis.rules.registry import OpFacts, broadcast, shape_rule
from compiler.ir.shapes import Shape

SAME_SHAPE_OPS = (
    "Abs", "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "Cast", "Ceil", "CheckNumerics",
    "CheckNumericsV2", "ClipByValue", "Cos", "Cosh", "Elu", "Erf", "Erfc", "Exp", "Expm1", "Floor",
    "Identity", "Inv", "IsFinite", "IsInf", "IsNan", "LeakyRelu", "Log", "Log1p", "LogicalNot",
    "LogSoftmax", "Neg", "OnesLike", "PreventGradient", "Reciprocal", "Relu", "Relu6", "Rint",
    "Round", "Rsqrt", "Selu", "Sigmoid", "Sign", "Sin", "Sinh", "Snapshot", "Softmax", "Softplus",
    "Softsign", "Sqrt", "Square", "StopGradient", "Tan", "Tanh", "ZerosLike", "BiasAdd",
    "BiasAddV1", "Gelu", "Bucketize", "_MklLayerNorm",
)

BROADCAST_OPS = (
    "Add", "AddV2", "Atan2", "Div", "DivNoNan", "Equal", "FloorDiv", "FloorMod",
    "Greater", "GreaterEqual", "Less", "LessEqual", "LogicalAnd", "LogicalOr", "Maximum",
    "Minimum", "Mod", "Mul", "MulNoNan", "NotEqual", "Pow", "RealDiv", "SquaredDifference", "Sub",
    "TruncateDiv", "TruncateMod", "SelectV2", "AddN", "Xdivy", "Xlogy", "Xlog1py",
)


@shape_rule(*SAME_SHAPE_OPS)
def same_shape(facts: OpFacts) -> Optional[list[Shape]]:
    """The result has the first operand's shape (also registered for array and image ops that
    reorder or rescale elements in place)."""
    return [facts.shapes[0]]


@shape_rule(*BROADCAST_OPS)
def _broadcast(facts: OpFacts) -> Optional[list[Shape]]:
    return [broadcast(facts.shapes)]


# Broadcasting integer ops that are not evaluated at analysis time (const_eval reads BROADCAST_OPS).
shape_rule("BitwiseAnd", "BitwiseOr", "BitwiseXor", "LeftShift", "RightShift")(_broadcast)
# Elementwise ops that are not evaluated at analysis time: text conversions, a shuffle of rows, QAT rounding.
shape_rule("AsString", "StringToNumber", "RandomShuffle", "QuantizeAndDequantizeV2", "QuantizeAndDequantizeV3",
           "QuantizeAndDequantizeV4")(same_shape)


@shape_rule("Select")
def _select(facts: OpFacts) -> Optional[list[Shape]]:
    """Select (v1) takes a condition of rank 1 or of the operands' rank, never broadcasting them."""
    return [broadcast(facts.shapes[1:])]


@shape_rule("IdentityN")
def _identity_n(facts: OpFacts) -> Optional[list[Shape]]:
    return list(facts.shapes)
