"""Constant tensor values held by attributes (Const `value`, and so on).

A Tensor decodes its elements only when someone asks for them: a pass that
never looks at weights never pays for them, and a backend can re-emit the
untouched original encoding (`source`) bit for bit.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np

from compiler.ir.dtypes import DType
from compiler.limits import check_tensor_size


def _decoded_itemsize(dtype: DType) -> int:
    """Bytes per decoded element (a string element is an object pointer)."""
    try:
        return dtype.to_numpy().itemsize
    except TypeError:
        return 8


class Tensor:
    """An immutable n-d constant: a DType, a fully known shape and elements."""

    __slots__ = ("dtype", "shape", "_array", "_loader", "source")

    def __init__(
        self,
        dtype: DType,
        shape: tuple[int, ...],
        array: Optional[np.ndarray] = None,
        loader: Optional[Callable[[], np.ndarray]] = None,
        source: Any = None,
    ) -> None:
        self.dtype = dtype
        self.shape = tuple(map(int, shape))
        self._array = array
        self._loader = loader
        # The encoding this tensor was read from, reused verbatim while untouched.
        self.source = source

    @classmethod
    def encoded(cls, dtype: DType, shape: tuple[int, ...], loader: Optional[Callable[[], np.ndarray]],
                source: Any) -> "Tensor":
        """A tensor read from `source`, whose `shape` is already a tuple of ints: the decoder makes
        one per constant at load, so the checks of `__init__` are skipped."""
        tensor = cls.__new__(cls)
        tensor.dtype, tensor.shape, tensor._array, tensor._loader, tensor.source = dtype, shape, None, loader, source
        return tensor

    @staticmethod
    def from_numpy(array: np.ndarray, dtype: Optional[DType] = None, owned: bool = False) -> "Tensor":
        """Wrap a copy of an array; `dtype` picks a quantized type for integer storage.  With
        `owned` the caller hands over an array nothing else holds (one it just computed), which
        is then frozen instead of copied: folded weights are megabytes."""
        arr = np.asarray(array)
        dtype = DType.from_numpy(arr.dtype) if dtype is None else dtype
        if dtype != DType.STRING and arr.dtype != dtype.to_numpy():
            arr = arr.astype(dtype.to_numpy())
        elif not (owned and arr.flags.owndata):
            arr = np.array(arr, copy=True)
        arr.flags.writeable = False
        return Tensor(dtype, arr.shape, array=arr)

    @property
    def num_elements(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def numpy(self) -> np.ndarray:
        """The elements as a read-only array (decoded on first use)."""
        if self._array is None:
            if self._loader is None:
                raise ValueError(f"tensor of type {self.dtype.tf_name} has no decodable elements")
            check_tensor_size(self.shape, _decoded_itemsize(self.dtype), lambda: f"constant {self!r}")
            arr = self._loader()
            arr.flags.writeable = False
            self._array = arr
            self._loader = None
        return self._array

    @property
    def is_decoded(self) -> bool:
        """Whether the elements were decoded already (`numpy` then returns them without work)."""
        return self._array is not None

    @property
    def is_decodable(self) -> bool:
        return self._array is not None or self._loader is not None

    def same_value(self, other: "Tensor") -> bool:
        """Exact equality of type, shape and bits (NaNs compare by bit pattern)."""
        if self.dtype != other.dtype or self.shape != other.shape:
            return False
        if self.source is not None and self.source is other.source:
            return True
        a, b = self.numpy(), other.numpy()
        if a.dtype == object:
            return bool(np.array_equal(a, b))
        return a.tobytes() == b.tobytes()

    def __repr__(self) -> str:
        return f"Tensor({self.dtype.short}{list(self.shape)})"
