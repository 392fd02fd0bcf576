"""Static tensor shapes with unknown dimensions and unknown rank."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional

MAX_RANK = 254  # TensorShape's limit: TF refuses a shape with more dimensions


@dataclass(frozen=True)
class Shape:
    """A shape: `dims is None` means unknown rank; a `None` dim is unknown.

    Frozen so it can be shared between values and attributes without copies.
    """

    dims: Optional[tuple[Optional[int], ...]]

    @staticmethod
    def of(dims: Iterable[Optional[int]] | None) -> "Shape":
        if dims is None:
            return UNKNOWN_SHAPE
        return Shape(tuple(None if d is None or d < 0 else int(d) for d in dims))

    @property
    def rank(self) -> Optional[int]:
        return None if self.dims is None else len(self.dims)

    @property
    def is_fully_defined(self) -> bool:
        return self.dims is not None and all(d is not None for d in self.dims)

    @property
    def num_elements(self) -> Optional[int]:
        if not self.is_fully_defined:
            return None
        n = 1
        for d in self.dims:  # type: ignore[union-attr]
            n *= d  # type: ignore[operator]
        return n

    def __str__(self) -> str:
        """`[1,?,3]`, `[]` for scalars, `[*]` for unknown rank."""
        if self.dims is None:
            return "[*]"
        return "[" + ",".join("?" if d is None else str(d) for d in self.dims) + "]"

    @staticmethod
    def parse(text: str) -> "Shape":
        """Inverse of `str()`; also accepts GTT's `1,299,299,3` without brackets."""
        body = text.strip()
        if body.startswith("[") and body.endswith("]"):
            body = body[1:-1]
        body = body.strip()
        if body == "*":
            return UNKNOWN_SHAPE
        if not body:
            return Shape(())
        dims = []
        for part in body.split(","):
            part = part.strip()
            if part in ("?", "-1"):
                dims.append(None)
            else:
                try:
                    dims.append(int(part))
                except ValueError:
                    raise ValueError(f"bad shape '{text}': '{part}' is not a dimension") from None
        return Shape(tuple(dims))


UNKNOWN_SHAPE = Shape(None)
