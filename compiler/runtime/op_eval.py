"""Evaluate one op on concrete arrays: constants, placeholders and kernels.

Shared by the interpreter and by constant folding, so both agree on what an
op computes and both report failures the same way: an `InterpreterError`
that names the node and its op type.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from compiler.errors import GttcError
from compiler.graphutil import input_pipeline
from compiler.ir.graph import Op
from compiler.limits import ResourceLimitError, check_tensor_size, max_tensor_bytes
from compiler.runtime.kernels import KERNELS, KernelError, get_kernel

# Ops that only forward their first operand (no arithmetic, no copy needed).
FORWARDING_OPS = frozenset({"Identity", "Snapshot", "StopGradient", "PreventGradient", "RefIdentity"})


class InterpreterError(GttcError):
    """An op could not be evaluated; the message names the node and op type."""


class MissingKernelError(InterpreterError):
    """No kernel exists for the op type (as opposed to a kernel that failed)."""


def const_value(op: Op) -> np.ndarray:
    """The elements of a Const op's `value` attribute."""
    try:
        return op.attrs["value"].numpy()
    except (KeyError, ValueError, TypeError, AttributeError) as err:
        raise InterpreterError(f"node '{op.name}' (Const): cannot read its value: {err}") from None
    except ResourceLimitError as err:
        raise ResourceLimitError(f"node '{op.name}' (Const): {err}") from None


def has_kernel(op_type: str) -> bool:
    return op_type in KERNELS


def run_kernel(op: Op, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Run the registered kernel of `op` and check it produced enough results."""
    try:
        fn = get_kernel(op.type)
    except KernelError:
        raise MissingKernelError(f"no kernel for op type '{op.type}' (node '{op.name}')") from None
    try:
        results = fn(op.attrs, list(inputs))  # registered kernels hand back ndarrays
    except KernelError as err:
        raise InterpreterError(f"node '{op.name}' ({op.type}): {err}") from None
    except ResourceLimitError as err:
        raise ResourceLimitError(f"node '{op.name}' ({op.type}): {err}") from None
    except MemoryError:
        raise ResourceLimitError(f"node '{op.name}' ({op.type}): out of memory computing its result from "
                                 f"inputs {_describe(inputs)}") from None
    except (ValueError, IndexError, TypeError, ArithmeticError) as err:
        # numpy refusing the operands: what TF reports as InvalidArgument, named the same way
        raise InterpreterError(f"node '{op.name}' ({op.type}): invalid inputs {_describe(inputs)}: "
                               f"{type(err).__name__}: {_first_line(err)}") from None
    limit = max_tensor_bytes()
    for i, out in enumerate(results):
        if not out.size or out.nbytes > limit:  # an empty result's extent can still be huge
            check_tensor_size(out.shape, out.itemsize, f"node '{op.name}' ({op.type}) result {i}")
    return results


def _describe(inputs: Sequence[np.ndarray]) -> str:
    """`[float32[1, 8], int32[2]]`: what a kernel was given, for its error message."""
    parts = [f"{np.asarray(x).dtype}{list(np.shape(x))}" for x in inputs]
    return "[" + ", ".join(parts) + "]"


def _first_line(err: Exception) -> str:
    text = str(err).strip()
    return text.splitlines()[0][:200] if text else "(no message)"


def evaluate_op(op: Op, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The results of a data op (no control flow, no function calls) on `inputs`."""
    if op.type == "Const":
        return [const_value(op)]
    if op.type in ("Placeholder", "PlaceholderV2", "_Arg"):
        raise InterpreterError(f"placeholder '{op.name}' ({op.type}) is not fed")
    if op.type in input_pipeline.READERS or op.type in input_pipeline.SOURCES:
        raise InterpreterError(input_pipeline.feed_hint(op.name, op.type))
    if op.type == "PlaceholderWithDefault":
        return [inputs[0]]
    if op.type in FORWARDING_OPS:
        return [inputs[0]]
    return run_kernel(op, inputs)
