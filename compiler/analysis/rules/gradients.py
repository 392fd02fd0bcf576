"""Shape rules of the gradient ops a `tf.GradientTape` leaves in a graph that serves derivatives.

StridedSliceGrad takes its result's shape as an operand (rules/array.py), as
the pool and depthwise input gradients do (rules/image.py); the rest are here.
"""
from __future__ import annotations

from typing import Optional

from compiler.analysis.rules.elementwise import same_shape
from compiler.analysis.rules.registry import OpFacts, shape_rule
from compiler.analysis.window import data_format
from compiler.ir.shapes import Shape

# Elementwise in their first operand (the forward result or the incoming gradient); MaxPoolGrad has orig_input's shape.
shape_rule("TanhGrad", "SigmoidGrad", "RsqrtGrad", "SqrtGrad", "ReciprocalGrad", "InvGrad", "ReluGrad", "Relu6Grad",
           "LeakyReluGrad", "EluGrad", "SeluGrad", "SoftplusGrad", "SoftsignGrad", "MaxPoolGrad",
           "MaxPoolGradV2")(same_shape)


def _channels(facts: OpFacts, index: int) -> Optional[int]:
    """Operand `index`'s channel count under the op's data_format (NC*: dim 1 whatever the rank)."""
    dims = facts.dims(index)
    if dims is None or len(dims) < 2:
        return None
    return dims[data_format(facts.attr("data_format")).channel_axis(len(dims))]


@shape_rule("BiasAddGrad")
def _bias_add_grad(facts: OpFacts) -> Optional[list[Shape]]:
    """One sum per channel."""
    return [Shape((_channels(facts, 0),))]


@shape_rule("ConcatOffset")
def _concat_offset(facts: OpFacts) -> Optional[list[Shape]]:
    """One offset vector per shape operand, as long as it."""
    return list(facts.shapes[1:])


@shape_rule("BroadcastGradientArgs")
def _broadcast_gradient_args(facts: OpFacts) -> Optional[list[Shape]]:
    """Two lists of reduction axes, as long as the values say."""
    return [Shape((None,)), Shape((None,))]


@shape_rule("FusedBatchNormGrad", "FusedBatchNormGradV2", "FusedBatchNormGradV3")
def _fused_batch_norm_grad(facts: OpFacts) -> Optional[list[Shape]]:
    """x's gradient, the scale and offset gradients per channel, and two empty placeholders."""
    scale = facts.dims(2)
    count = scale[0] if scale is not None and len(scale) == 1 and scale[0] is not None else _channels(facts, 1)
    return [facts.shapes[1], Shape((count,)), Shape((count,)), Shape((0,)), Shape((0,))]
