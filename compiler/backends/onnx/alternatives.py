"""What a user can do instead, when an op type has no ONNX lowering.

Two sources, both only suggesting what the backend really lowers:
- another version of the same op (`NonMaxSuppressionV5` when V4 is lowered,
  `RefSwitch` / `Switch`, `StatelessIf` / `If`), which the user's TF can
  usually emit by a different API call or producer version;
- a short list of ops that mean "this graph is not ready for inference
  export", with the step that fixes that (freeze variables, inline calls,
  drop augmentation layers).
Close spellings are never suggested: `Cumprod` is not `Cumsum`.
"""
from __future__ import annotations

import re
from typing import Collection, Optional

_VERSION = re.compile(r"V\d+$")
_PREFIXES = ("Ref", "Stateless", "Stateful", "_")

# Op type -> the op (or step) that replaces it; _WHY says how to get there.
_INSTEAD = {
    "VariableV2": "Const", "VarHandleOp": "Const", "ReadVariableOp": "Const", "Variable": "Const",
    "PartitionedCall": "the inline_function_calls pass", "StatefulPartitionedCall": "the inline_function_calls pass",
    "RaggedTensorToVariant": "dense rows", "RaggedTensorFromVariant": "dense rows",
    "ImageProjectiveTransformV2": "Identity", "ImageProjectiveTransformV3": "Identity",
}
_WHY = {
    "Const": "freeze the variables first (convert_variables_to_constants_v2)",
    "the inline_function_calls pass": "inline function calls first (-O2 runs it)",
    "dense rows": "map over dense rows (RaggedTensor.to_tensor() before tf.map_fn): a map over ragged rows "
                  "exports only as tf.map_fn builds it (vector rows, one level of raggedness, each result row "
                  "written at its iteration)",
    "Identity": "Keras augmentation layers are identities at inference: export the model without them",
}


def _family(op_type: str) -> str:
    base = _VERSION.sub("", op_type)
    for prefix in _PREFIXES:
        if base.startswith(prefix) and len(base) > len(prefix):
            return base[len(prefix):]
    return base


def nearest_alternative(op_type: str, supported: Collection[str]) -> Optional[str]:
    """A sentence naming what to use instead of `op_type`, or None when nothing fits."""
    instead = _INSTEAD.get(op_type)
    # An op named as the way out must itself be lowered; a step (lower case) always applies.
    if instead is not None and (instead in supported or instead[0].islower()):
        return f"nearest supported alternative: {_WHY[instead]}"
    family = _family(op_type)
    relatives = sorted(name for name in supported if name != op_type and _family(name) == family)
    if relatives:
        # The highest version is usually the closest in semantics to a newer op.
        return f"nearest supported alternative: {relatives[-1]} (another version of this op)"
    return None
