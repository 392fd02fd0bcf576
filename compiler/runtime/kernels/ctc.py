"""CTC greedy decoding: the best class per time step, repeats merged, blanks dropped.

The result is sparse, as TF gives it: (batch, position) coordinates in
row-major order, the classes there, the dense shape [batch, longest], and
each sequence's log probability, minus the sum of its best logits.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .registry import KernelError, kernel

Array = np.ndarray
Attrs = Mapping[str, object]


def blank_class(blank_index: int, classes: int) -> int:
    """TF's blank_index, where a negative one counts from the last class."""
    return blank_index + classes if blank_index < 0 else blank_index


@kernel("CTCGreedyDecoder")
def _ctc_greedy_decoder(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    logits, lengths = inputs
    if logits.ndim != 3:
        raise KernelError(f"inputs must be [max_time, batch, classes], not rank {logits.ndim}")
    steps, batch, classes = logits.shape
    if not classes:
        raise KernelError("inputs have no classes")
    if lengths.shape != (batch,):
        raise KernelError(f"sequence_length of shape {list(lengths.shape)} does not match batch {batch}")
    if lengths.size and (lengths.min() < 0 or lengths.max() > steps):
        raise KernelError(f"sequence lengths must be in [0, {steps}]")
    best, top = logits.argmax(axis=2), logits.max(axis=2)
    valid = np.arange(steps)[:, None] < lengths[None, :]
    log_prob = -np.where(valid, top, 0).sum(axis=0).astype(logits.dtype).reshape(batch, 1)
    kept = valid & (best != blank_class(int(attrs.get("blank_index", -1)), classes))  # type: ignore[call-overload]
    if attrs.get("merge_repeated", False):
        kept[1:] &= best[1:] != best[:-1]
    rows, steps_kept = np.nonzero(kept.T)
    positions = (np.cumsum(kept.T, axis=1) - 1)[rows, steps_kept]
    indices = np.stack([rows, positions], axis=1).astype(np.int64).reshape(-1, 2)
    values = best.T[rows, steps_kept].astype(np.int64)
    longest = int(kept.sum(axis=0).max(initial=0))
    return [indices, values, np.asarray([batch, longest], np.int64), log_prob]
