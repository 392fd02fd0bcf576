"""Shape rules of FFTs and of the ops that take complex values apart or build them.

The transforms act on the one, two or three innermost axes: an RFFT crops
them to fft_length and keeps fft_length // 2 + 1 bins of the innermost, an
IRFFT turns them back into fft_length samples, FFTs and IFFTs keep the shape.
"""
from __future__ import annotations

from typing import Optional

from compiler.analysis.rules.elementwise import same_shape
from compiler.analysis.rules.registry import OpFacts, broadcast, shape_rule
from compiler.ir.shapes import Shape

_SUFFIXES = {1: "", 2: "2D", 3: "3D"}


def _transformed(facts: OpFacts, count: int, forward: bool) -> Optional[list[Shape]]:
    dims = facts.dims(0)
    lengths = facts.ints(1)
    if dims is None or len(dims) < count:
        return None
    if lengths is None or len(lengths) != count:
        return [Shape(dims[:-count] + (None,) * count)]
    sizes = tuple(lengths[:-1]) + ((lengths[-1] // 2 + 1,) if forward else (lengths[-1],))
    return [Shape(dims[:-count] + sizes)]


def _register(count: int) -> None:
    suffix = _SUFFIXES[count]
    shape_rule(f"RFFT{suffix}")(lambda facts: _transformed(facts, count, forward=True))
    shape_rule(f"IRFFT{suffix}")(lambda facts: _transformed(facts, count, forward=False))


for _count in _SUFFIXES:
    _register(_count)


shape_rule("FFT", "IFFT", "FFT2D", "IFFT2D", "FFT3D", "IFFT3D", "Real", "Imag", "ComplexAbs", "Angle")(same_shape)


@shape_rule("Complex")
def _complex(facts: OpFacts) -> Optional[list[Shape]]:
    return [broadcast(facts.shapes)]
