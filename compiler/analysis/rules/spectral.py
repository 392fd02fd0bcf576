"""Shape rules of FFTs and of the ops that take complex values apart or build them.

The transforms act on the innermost axis: RFFT keeps fft_length // 2 + 1 bins
of it, IRFFT turns them back into fft_length samples, FFT/IFFT keep its size.
"""
from __future__ import annotations

from typing import Optional

from compiler.analysis.rules.registry import OpFacts, broadcast, shape_rule
from compiler.ir.shapes import Shape


def _innermost_resized(facts: OpFacts, size: Optional[int]) -> Optional[list[Shape]]:
    dims = facts.dims(0)
    if dims is None or not dims:
        return None
    return [Shape(dims[:-1] + (size,))]


def _fft_length(facts: OpFacts) -> Optional[int]:
    found = facts.ints(1)
    return found[0] if found is not None and len(found) == 1 else None


@shape_rule("RFFT")
def _rfft(facts: OpFacts) -> Optional[list[Shape]]:
    length = _fft_length(facts)
    return _innermost_resized(facts, None if length is None else length // 2 + 1)


@shape_rule("IRFFT")
def _irfft(facts: OpFacts) -> Optional[list[Shape]]:
    return _innermost_resized(facts, _fft_length(facts))


@shape_rule("FFT", "IFFT", "Real", "Imag", "ComplexAbs")
def _same_shape(facts: OpFacts) -> Optional[list[Shape]]:
    return [facts.shapes[0]]


@shape_rule("Complex")
def _complex(facts: OpFacts) -> Optional[list[Shape]]:
    return [broadcast(facts.shapes)]
