"""Keep Python's cyclic collector out of a compile.

A compile allocates hundreds of thousands of small objects (ops, values, attribute
maps); each allocation burst triggers collections, and a full collection scans every
object in the process.  With TensorFlow imported that is its ~400k-object heap too, and
DenseNet121's compile spent 40% of its time there.  The IR's own garbage is small
and is collected as usual once the compile returns.
"""
from __future__ import annotations

import contextlib
import gc
from typing import Iterator


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Disable the cyclic collector inside the block, unless it already is (nesting is free);
    it is re-enabled on the way out, errors included."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
