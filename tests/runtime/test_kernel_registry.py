"""Kernels run with numpy's IEEE warnings off, whether each run turns them off or a batch does."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from compiler.runtime.kernels import KernelError, get_kernel
from compiler.runtime.kernels.registry import ieee_warnings_off

ONE_BY_ZERO = [np.array([1.0, 0.0], np.float32), np.array([0.0, 0.0], np.float32)]


def _divide() -> np.ndarray:
    return get_kernel("RealDiv")({"T": None}, ONE_BY_ZERO)[0]


@pytest.mark.parametrize("batched", [False, True], ids=["one run", "a batch"])
def test_a_kernel_gives_inf_and_nan_quietly_whatever_the_callers_settings(batched):
    with np.errstate(all="raise"), warnings.catch_warnings():
        warnings.simplefilter("error")
        if batched:
            with ieee_warnings_off():
                out = _divide()
            with pytest.raises(FloatingPointError):  # the caller's settings are back after the batch
                np.float32(1) / np.float32(0)
        else:
            out = _divide()
    assert np.isinf(out[0]) and np.isnan(out[1])


def test_a_failing_kernel_in_a_batch_still_names_its_op():
    with ieee_warnings_off(), pytest.raises(KernelError, match="^RealDiv: "):
        get_kernel("RealDiv")({}, [np.ones((2, 3), np.float32), np.ones((4,), np.float32)])
