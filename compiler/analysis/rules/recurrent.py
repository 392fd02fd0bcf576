"""Shapes of cuDNN's fused RNN ops (CudnnRNN, V2, V3), as their kernel makes them."""
from __future__ import annotations

from typing import Optional

from compiler.analysis.rules.registry import OpFacts, shape_rule
from compiler.ir.shapes import Shape

_SCALAR = Shape(())


@shape_rule("CudnnRNN", "CudnnRNNV2", "CudnnRNNV3")
def _cudnn_rnn(facts: OpFacts) -> Optional[list[Shape]]:
    """output [time, batch, dirs * units] ([batch, time, ...] for a batch-major V3); output_h as
    input_h; output_c as input_h for an LSTM, else a scalar; reserve_space a vector of cuDNN's
    size when training, else a scalar; host_reserved (V2, V3) two bytes when training."""
    x, h = facts.dims(0), facts.dims(1)
    x = x if x is not None and len(x) == 3 else (None, None, None)
    h_shape = facts.shapes[1] if h is not None and len(h) == 3 else Shape((None, None, None))
    units = h_shape.dims[2]
    dirs = 2 if facts.attr("direction", "unidirectional") in ("bidirectional", b"bidirectional") else 1
    output = Shape((x[0], x[1], None if units is None else dirs * units))
    training = bool(facts.attr("is_training", True))
    lstm = facts.attr("rnn_mode", "lstm") in ("lstm", b"lstm")
    shapes = [output, h_shape, h_shape if lstm else _SCALAR, Shape((None,)) if training else _SCALAR]
    if facts.op.type != "CudnnRNN":
        shapes.append(Shape((2,)) if training else _SCALAR)
    return shapes
