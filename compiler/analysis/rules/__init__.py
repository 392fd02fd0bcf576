"""Per-op-family shape rules; importing the package fills `SHAPE_RULES`."""
from compiler.analysis.rules import (  # noqa: F401  (registration)
    array, audio, control, elementwise, feeds, gradients, image, misc_ops, nn, quantized, ragged, recurrent, sparse,
    special_math, spectral)
from compiler.analysis.rules.registry import SHAPE_RULES, OpFacts, broadcast, shape_rule

__all__ = ["SHAPE_RULES", "OpFacts", "broadcast", "shape_rule"]
