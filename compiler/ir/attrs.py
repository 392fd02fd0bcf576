"""Op attributes: typed Python values, decoded lazily from their source.

Attribute values are plain, immutable Python objects:

=============  ==============================================
TF kind        Python value
=============  ==============================================
s              `str` (UTF-8) or `bytes` (anything else)
i / f / b      `int` / `float` / `bool`
type           `DType`
shape          `Shape`
tensor         `Tensor`
list           `tuple` of the above (`()` for an empty list)
func           `FuncAttr`
placeholder    `PlaceholderAttr`
=============  ==============================================

An `AttrMap` keeps each attribute's original encoding until a pass assigns
a new value, so a backend can copy untouched attributes verbatim.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, MutableMapping, Optional


def attr_text(value: object) -> str:
    """A string attribute as `str`: an `s` attribute that is not UTF-8 stays `bytes` (see above)."""
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass(frozen=True)
class FuncAttr:
    """A function reference with its own attributes (TF's NameAttrList)."""

    name: str
    attrs: Mapping[str, Any] = field(default_factory=dict)

    def __hash__(self) -> int:
        return hash((self.name, tuple(sorted(self.attrs))))


@dataclass(frozen=True)
class PlaceholderAttr:
    """A reference to an enclosing function's attribute (`$T` in FunctionDefs)."""

    name: str


@dataclass(frozen=True)
class RawAttr:
    """An attribute value with no typed meaning (an empty or odd AttrValue), kept as bytes."""

    encoded: bytes


_MISSING = object()


class AttrMap(MutableMapping[str, Any]):
    """Name -> value; values arrive either decoded or as `(source, decode)`."""

    __slots__ = ("_values", "_sources", "_decode")

    def __init__(
        self,
        values: Optional[Mapping[str, Any]] = None,
        sources: Optional[Mapping[str, Any]] = None,
        decode: Optional[Callable[[Any], Any]] = None,
    ) -> None:
        self._values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in (values or {}).items()}
        self._sources: dict[str, Any] = dict(sources or {})
        self._decode = decode

    @classmethod
    def encoded(cls, sources: dict[str, Any], decode: Callable[[Any], Any]) -> "AttrMap":
        """A map of attributes still in their source encoding, taking `sources` over uncopied
        (the frontend builds one per node and keeps no other reference to it)."""
        attrs = cls.__new__(cls)
        attrs._values, attrs._sources, attrs._decode = {}, sources, decode
        return attrs

    def get(self, name: str, default: Any = None) -> Any:
        """The value of `name` (decoded on first access), or `default`; no KeyError raised and caught."""
        value = self._values.get(name, _MISSING)
        if value is not _MISSING:
            return value
        source = self._sources.get(name, _MISSING)
        if source is _MISSING:
            return default
        value = self._values[name] = self._decode(source)  # type: ignore[misc]
        return value

    def __getitem__(self, name: str) -> Any:
        value = self.get(name, _MISSING)
        if value is _MISSING:
            raise KeyError(name)
        return value

    # Writes replace the dicts rather than change them (copy on write), so `contents` can hand
    # out the dicts themselves.  Caching a decoded source in `_values` is the one change made in
    # place: a cached entry is what decoding that same source gives, true in any later state.
    def __setitem__(self, name: str, value: Any) -> None:
        if isinstance(value, list):
            value = tuple(value)
        self._values = {**self._values, name: value}
        if name in self._sources:
            self._sources = {k: v for k, v in self._sources.items() if k != name}

    def __delitem__(self, name: str) -> None:
        if name not in self:
            raise KeyError(name)
        self._values = {k: v for k, v in self._values.items() if k != name}
        self._sources = {k: v for k, v in self._sources.items() if k != name}

    def __contains__(self, name: object) -> bool:
        return name in self._values or name in self._sources

    def __iter__(self) -> Iterator[str]:
        yield from sorted(set(self._values) | set(self._sources))

    def __len__(self) -> int:
        return len(set(self._values) | set(self._sources))

    def encodings(self) -> tuple[Mapping[str, Any], dict[str, Any]]:
        """(name -> original encoding, name -> value a pass assigned): every attribute once,
        nothing decoded; for checks that read encodings directly (unordered)."""
        sources = self._sources
        return sources, {k: v for k, v in self._values.items() if k not in sources}

    def unassigned_sources(self) -> Optional[Mapping[str, Any]]:
        """name -> original encoding when no pass assigned any attribute, else None: `encodings`
        for callers that only handle that case, without building the (then empty) assigned dict."""
        sources = self._sources
        return sources if self._values.keys() <= sources.keys() else None

    def cached(self, name: str) -> Any:
        """The value of `name` if it was decoded (or assigned) already, else None: decodes nothing."""
        return self._values.get(name)

    def source(self, name: str) -> Any:
        """The untouched original encoding of `name`, or None once reassigned."""
        return self._sources.get(name)

    def copy(self) -> "AttrMap":
        copied = AttrMap.__new__(AttrMap)
        copied._values, copied._sources, copied._decode = dict(self._values), dict(self._sources), self._decode
        return copied

    def contents(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """What this map holds now, for `restore_contents` (a pass that fails is undone in place).
        No copy is made: writes replace the dicts instead of changing them."""
        return self._values, self._sources

    def restore_contents(self, contents: tuple[dict[str, Any], dict[str, Any]]) -> None:
        self._values, self._sources = contents

    def __repr__(self) -> str:
        return "{" + ", ".join(f"{k}={self[k]!r}" for k in self) + "}"
