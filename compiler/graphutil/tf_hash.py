"""TensorFlow's Hash64 and GTT's HashNodeDef, bit for bit.

merge_duplicate_nodes groups nodes by this hash and writes the surviving
nodes out in ascending hash order, so reproducing GTT's output order needs
the very same 64-bit values: MurmurHash64A with TensorFlow's seed, and
Hash64Combine over the op, name, canonical inputs, device and the
serialized attribute values (in attribute-name order).
"""
from __future__ import annotations

import functools

import numpy as np

from compiler.graphutil.names import canonical_inputs
from compiler.ir.graph import Op
from compiler.proto.codec import attr_bytes

MASK64 = (1 << 64) - 1
_SEED = 0xDECAFCAFFE
_MULTIPLIER = 0xC6A4A7935BD1E995
_SHIFT = 47
_GOLDEN = 0x9E3779B97F4A7800


def _mixed_words(words: np.ndarray) -> list[int]:
    """Mix every 8-byte word the way Hash64 does before folding it in (vectorized)."""
    with np.errstate(over="ignore"):
        k = words * np.uint64(_MULTIPLIER)
        k ^= k >> np.uint64(_SHIFT)
        k *= np.uint64(_MULTIPLIER)
    return k.tolist()


def hash64(data: bytes, seed: int = _SEED) -> int:
    """TensorFlow's Hash64 (MurmurHash64A, little-endian words)."""
    n = len(data)
    h = (seed ^ (n * _MULTIPLIER)) & MASK64
    whole = n - n % 8
    if whole:
        for k in _mixed_words(np.frombuffer(data, dtype="<u8", count=whole // 8)):
            h = ((h ^ k) * _MULTIPLIER) & MASK64
    tail = data[whole:]
    if tail:
        h ^= int.from_bytes(tail, "little")
        h = (h * _MULTIPLIER) & MASK64
    h ^= h >> _SHIFT
    h = (h * _MULTIPLIER) & MASK64
    h ^= h >> _SHIFT
    return h


def hash64_combine(a: int, b: int) -> int:
    return a ^ ((b + _GOLDEN + (a << 10) + (a >> 4)) & MASK64)


@functools.lru_cache(maxsize=1 << 16)
def hash_text(text: str) -> int:
    """Hash64 of a string; cached, because merging rounds hash the same op names and input names again."""
    return hash64(text.encode("utf-8"))


def encoded_attr(op: Op, key: str) -> bytes:
    """The serialized AttrValue of one attribute (its source message while untouched)."""
    source = op.attrs.source(key)
    return source.SerializeToString() if source is not None else attr_bytes(op.attrs[key])


def attr_hashes(op: Op) -> list[int]:
    """Hash64 of each serialized attribute value, in attribute-name order."""
    return [hash64(encoded_attr(op, key)) for key in sorted(op.attrs)]


def node_hash(op: Op, include_name: bool, attrs: list[int] | None = None) -> int:
    """GTT's HashNodeDef of the op's NodeDef, with its name blanked unless `include_name`.

    `attrs` may pass precomputed `attr_hashes(op)`; they are the expensive part.
    """
    h = hash_text(op.type)
    h = hash64_combine(h, hash_text(op.name if include_name else ""))
    for text in canonical_inputs(op):
        h = hash64_combine(h, hash_text(text))
    h = hash64_combine(h, hash_text(op.device))
    for value in attr_hashes(op) if attrs is None else attrs:
        h = hash64_combine(h, value)
    return h
