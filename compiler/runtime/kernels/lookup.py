"""Lookup tables: HashTable(V2), their initializers, Find, Import and Size.

Tables are state.  A table op's kernel returns a *handle*: a 0-d object
array holding a `HashTableResource`, the mutable table itself.  Initializer
kernels fill the table they are handed and return nothing; Find reads it.
Kernels stay plain `fn(attrs, inputs) -> outputs`; keeping one table alive
across runs, as a TensorFlow session does, is the interpreter's job (it
computes each op of `TABLE_OPS` once per `Interpreter` and reuses the
handle).  As in TensorFlow, a lookup in a table nobody initialized fails.

Semantics follow TF's CPU `HashTable` (an initializable table with scalar
keys and scalar values): keys and values are inserted once; a second
initialization is accepted only with the same number of entries (TF checks
no more than that) and changes nothing; a key given twice must carry the same
value; Find returns, in the shape of the keys, each key's value or for keys
not in the table the default.  The default may be a scalar or have the keys'
shape, but HashTable (unlike MutableHashTable) then still uses its first
element for every missing key.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Optional

import numpy as np

from .common import dtype_attr, held_object, object_handle
from .registry import KernelError, kernel

Array = np.ndarray
Attrs = Mapping[str, object]

# Ops whose result is a table handle: the interpreter creates each table once.
TABLE_OPS = frozenset({"HashTable", "HashTableV2"})
# What tf.compat.v1.tables_initializer() groups for tables built from tensors (a KeyValueTensorInitializer
# writes InitializeTableV2 or, in newer TF, LookupTableImportV2).
TABLE_INITIALIZER_OPS = frozenset({"InitializeTable", "InitializeTableV2", "LookupTableImport", "LookupTableImportV2"})


class HashTableResource:
    """The contents of one hash table: typed scalar keys -> typed scalar values.

    Numeric keys are kept sorted so a lookup is one vectorised binary
    search; other keys (strings) live in a dict.
    """

    def __init__(self, key_dtype: np.dtype, value_dtype: np.dtype) -> None:
        self.key_dtype = np.dtype(key_dtype)
        self.value_dtype = np.dtype(value_dtype)
        self.initialized = False
        self._keys: Optional[Array] = None
        self._values: Optional[Array] = None
        self._entries: dict[object, object] = {}

    @property
    def size(self) -> int:
        if self._keys is not None:
            return int(self._keys.size)
        return len(self._entries)

    def initialize(self, keys: Array, values: Array) -> None:
        """Insert every pair once; a table already filled only checks the entry count."""
        if keys.size == 0:
            raise KernelError("keys and values cannot be empty tensors")
        if self.initialized:
            if keys.size != self.size:
                raise KernelError("Table was already initialized with different data")
            return
        flat_keys, flat_values = keys.reshape(-1), values.reshape(-1)
        if self._is_numeric:
            self._insert_sorted(flat_keys, flat_values)
        else:
            self._insert_objects(flat_keys, flat_values)
        self.initialized = True

    def find(self, keys: Array, default: Array) -> Array:
        """The value of every key, shaped like `keys`; missing keys get the default's first element."""
        if not self.initialized:
            raise KernelError("Table not initialized")
        flat = keys.reshape(-1)
        out = np.full(flat.shape, default.reshape(-1)[0], dtype=self.value_dtype)
        if self._is_numeric:
            self._find_sorted(flat, out)
        else:
            for i, key in enumerate(flat):
                found = self._entries.get(_object_key(key), _MISSING)
                if found is not _MISSING:
                    out[i] = found
        return out.reshape(keys.shape)

    def items(self) -> tuple[Array, Array]:
        """Every (key, value) pair, as two vectors: numeric keys sorted, strings in insertion order."""
        if self._is_numeric:
            assert self._keys is not None and self._values is not None
            return self._keys, self._values
        keys = np.empty(len(self._entries), object)
        keys[:] = list(self._entries)
        return keys, np.asarray(list(self._entries.values()), self.value_dtype)

    @property
    def _is_numeric(self) -> bool:
        return self.key_dtype != np.dtype(object)

    def _insert_sorted(self, keys: Array, values: Array) -> None:
        unique, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        kept = values[first]
        clash = np.flatnonzero(kept[inverse.reshape(-1)] != values)
        if clash.size:
            i = int(clash[0])
            raise KernelError(f"HashTable has different value for same key. Key {keys[i]} has "
                              f"{kept[inverse.reshape(-1)[i]]} and trying to add value {values[i]}")
        self._keys, self._values = unique, kept.astype(self.value_dtype, copy=False)

    def _insert_objects(self, keys: Array, values: Array) -> None:
        for key, value in zip(keys, values):
            previous = self._entries.setdefault(_object_key(key), value)
            if previous != value:
                raise KernelError(f"HashTable has different value for same key. Key {key!r} has "
                                  f"{previous!r} and trying to add value {value!r}")

    def _find_sorted(self, flat: Array, out: Array) -> None:
        assert self._keys is not None and self._values is not None
        if not self._keys.size:
            return
        pos = np.minimum(np.searchsorted(self._keys, flat), self._keys.size - 1)
        hit = self._keys[pos] == flat
        out[hit] = self._values[pos[hit]]


_MISSING = object()


def _object_key(key: object) -> object:
    """String keys compare as bytes whether they arrive as str or bytes."""
    return key.encode("utf-8") if isinstance(key, str) else key


def make_handle(table: HashTableResource) -> Array:
    """A 0-d object array holding `table` (what table ops output)."""
    return object_handle(table)


def table_of(handle: Array) -> HashTableResource:
    """The table behind a handle, or a KernelError naming what arrived instead."""
    table = held_object(handle, HashTableResource)
    if table is None:
        arr = np.asarray(handle)
        raise KernelError(f"expected a table handle, got an array of {arr.dtype} {list(arr.shape)}")
    return table  # type: ignore[return-value]


def _check_types(table: HashTableResource, attrs: Attrs, key_attr: str, value_attr: str) -> None:
    """The op's declared key/value types must be the table's (TF's signature check)."""
    for name, want in ((key_attr, table.key_dtype), (value_attr, table.value_dtype)):
        got = dtype_attr(attrs, name, want)
        if got != want:
            raise KernelError(f"attribute {name}={got} does not match the table's type {want}")


def _check_dtype(arr: Array, want: np.dtype, what: str) -> None:
    if want == np.dtype(object):
        if arr.dtype != np.dtype(object) and arr.dtype.kind not in "SU":
            raise KernelError(f"{what} must be strings but got {arr.dtype}")
    elif arr.dtype != want:
        raise KernelError(f"{what} must be type {want} but got {arr.dtype}")


def _checked_pairs(table: HashTableResource, keys: Array, values: Array) -> None:
    _check_dtype(keys, table.key_dtype, "Key")
    _check_dtype(values, table.value_dtype, "Value")
    if values.shape != keys.shape:
        raise KernelError(f"Expected shape {list(keys.shape)} for value, got {list(values.shape)}")


# ---------------------------------------------------------------- kernels


@kernel("HashTable", "HashTableV2")
def _hash_table(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    table = HashTableResource(dtype_attr(attrs, "key_dtype"), dtype_attr(attrs, "value_dtype"))
    return [make_handle(table)]


@kernel("InitializeTable", "InitializeTableV2")
def _initialize_table(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    handle, keys, values = inputs
    table = table_of(handle)
    _check_types(table, attrs, "Tkey", "Tval")
    if keys.ndim != 1:
        raise KernelError(f"Keys must be a vector, but received shape {list(keys.shape)}")
    if values.ndim != 1:
        raise KernelError(f"Values must be a vector, but received shape {list(values.shape)}")
    if keys.size != values.size:
        raise KernelError(f"Keys and values must have the same size {keys.size} vs {values.size}")
    _checked_pairs(table, keys, values)
    table.initialize(keys, values)
    return []


@kernel("LookupTableImport", "LookupTableImportV2")
def _import_table(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    handle, keys, values = inputs
    table = table_of(handle)
    _check_types(table, attrs, "Tin", "Tout")
    _checked_pairs(table, keys, values)
    table.initialize(keys, values)
    return []


@kernel("LookupTableFind", "LookupTableFindV2")
def _find(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    handle, keys, default = inputs
    table = table_of(handle)
    _check_types(table, attrs, "Tin", "Tout")
    _check_dtype(keys, table.key_dtype, "Key")
    _check_dtype(default, table.value_dtype, "Value")
    if default.ndim != 0 and default.shape != keys.shape:
        raise KernelError(f"Expected shape [] or {list(keys.shape)} for default value, got {list(default.shape)}")
    return [table.find(keys, default)]


@kernel("LookupTableSize", "LookupTableSizeV2")
def _size(attrs: Attrs, inputs: list[Array]) -> list[Array]:
    return [np.array(table_of(inputs[0]).size, dtype=np.int64)]
