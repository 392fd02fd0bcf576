"""The op-type -> kernel table shared by the reference interpreter and constant folding.

Kernels are plain functions `fn(attrs, inputs) -> outputs` over numpy arrays.
Registration wraps each one so every failure surfaces as a `KernelError` that
names the op: callers (the interpreter, the folder) then need only one except
clause and still get a message that says which node type went wrong.
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import Callable, Iterator, Mapping

import numpy as np

Kernel = Callable[[Mapping[str, object], list[np.ndarray]], list[np.ndarray]]

KERNELS: dict[str, Kernel] = {}


class KernelError(Exception):
    """An op cannot be evaluated: unsupported attribute, bad input, or no kernel."""


# numpy raises these for shape mismatches, out-of-range indices and the like;
# they mean "this node cannot be evaluated", which is what KernelError says.
_EVALUATION_ERRORS = (ValueError, IndexError, TypeError, ArithmeticError)


# True inside `ieee_warnings_off`: numpy's IEEE warnings are already off, for a batch of kernel runs.
_WARNINGS_OFF: contextvars.ContextVar[bool] = contextvars.ContextVar("kernels_ieee_warnings_off", default=False)


@contextlib.contextmanager
def ieee_warnings_off() -> Iterator[None]:
    """Turn numpy's IEEE warnings off once for every kernel run inside, instead of once per run:
    `np.errstate` costs about a microsecond, and constant folding runs hundreds of kernels."""
    token = _WARNINGS_OFF.set(True)
    try:
        with np.errstate(all="ignore"):
            yield
    finally:
        _WARNINGS_OFF.reset(token)


def _named(op_type: str, fn: Kernel) -> Kernel:
    """Wrap `fn` so errors carry `op_type`, IEEE warnings stay silent (TF
    produces inf/nan quietly), and every output is an ndarray."""

    @functools.wraps(fn)
    def run(attrs: Mapping[str, object], inputs: list[np.ndarray]) -> list[np.ndarray]:
        try:
            if _WARNINGS_OFF.get():
                return _as_arrays(fn(attrs, inputs))
            with np.errstate(all="ignore"):
                return _as_arrays(fn(attrs, inputs))
        except KernelError as exc:
            raise KernelError(f"{op_type}: {exc}") from exc
        except _EVALUATION_ERRORS as exc:
            raise KernelError(f"{op_type}: {type(exc).__name__}: {exc}") from exc

    run.op_type = op_type  # type: ignore[attr-defined]
    return run


def _as_arrays(outputs: list[np.ndarray]) -> list[np.ndarray]:
    """numpy hands back scalars for 0-d results; callers get arrays."""
    return [np.asarray(out) for out in outputs]


def kernel(*op_types: str) -> Callable[[Kernel], Kernel]:
    """Register the decorated function as the kernel of every op type given."""
    if not op_types:
        raise ValueError("kernel() needs at least one op type")

    def register(fn: Kernel) -> Kernel:
        for op_type in op_types:
            if op_type in KERNELS:
                raise ValueError(f"duplicate kernel for op '{op_type}'")
            KERNELS[op_type] = _named(op_type, fn)
        return fn

    return register


def get_kernel(op_type: str) -> Kernel:
    """The kernel registered for `op_type`."""
    try:
        return KERNELS[op_type]
    except KeyError:
        raise KernelError(f"no kernel for op '{op_type}'") from None
