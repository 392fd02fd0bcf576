"""Lookup-table kernels against TensorFlow's, and tables as state in the interpreter.

TF is the ground truth: each case builds the same table through `tf.raw_ops`
(eager HashTableV2 with a fresh shared_name, so no two cases share a table;
the V1 ref-typed ops in a tf.compat.v1 session) and through our kernels, and
requires identical values, dtypes and shapes, or both sides failing.  The
interpreter tests need no TensorFlow: they check that a table op runs once per
Interpreter, so an initializer run fills the table later runs read.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from compiler.errors import GttcError
from compiler.ir.parser import parse_graph
from compiler.runtime.interpreter import Interpreter
from compiler.runtime.kernels import KernelError, get_kernel
from compiler.runtime.kernels.lookup import HashTableResource, table_of

_NAMES = itertools.count()
NP_TYPES = {"int64": np.int64, "int32": np.int32, "float32": np.float32, "float64": np.float64, "string": object}


def _tf():
    return pytest.importorskip("tensorflow")


def _tf_dtype(name: str):
    return _tf().dtypes.as_dtype(name)


def _ir_dtype(name: str):
    from compiler.ir.dtypes import DType

    return DType.parse(name)


def sample(name: str, values: np.ndarray) -> np.ndarray:
    """Integers as the given type (strings spelled `k<n>`)."""
    if name == "string":
        return np.array([f"k{v}".encode() for v in values.reshape(-1)], dtype=object).reshape(values.shape)
    return values.astype(NP_TYPES[name])


# -- running one scenario on both sides -------------------------------------------------


# Our kernel for each step, in the V1 (ref handle) and V2 (resource handle) spelling.
OUR_OPS = {
    "HashTable": ("HashTable", "HashTableV2"),
    "InitializeTable": ("InitializeTable", "InitializeTableV2"),
    "LookupTableImport": ("LookupTableImport", "LookupTableImportV2"),
    "LookupTableFind": ("LookupTableFind", "LookupTableFindV2"),
    "LookupTableSize": ("LookupTableSize", "LookupTableSizeV2"),
}


def ours(key: str, value: str, steps: list[tuple[str, list[np.ndarray]]], v1: bool = False) -> list[np.ndarray]:
    """Create a table, then run (op, inputs) steps on it; outputs of the last step."""
    form = 0 if v1 else 1
    attrs = {"key_dtype": _ir_dtype(key), "value_dtype": _ir_dtype(value)}
    (handle,) = get_kernel(OUR_OPS["HashTable"][form])(attrs, [])
    out: list[np.ndarray] = []
    for op, inputs in steps:
        out = get_kernel(OUR_OPS[op][form])({}, [handle] + inputs)
    return out


def theirs(key: str, value: str, steps: list[tuple[str, list[np.ndarray]]]) -> list[np.ndarray]:
    """The same in TensorFlow's eager V2 kernels."""
    tf = _tf()
    handle = tf.raw_ops.HashTableV2(key_dtype=_tf_dtype(key), value_dtype=_tf_dtype(value),
                                    shared_name=f"lookup_test_{next(_NAMES)}")
    out = None
    for op, inputs in steps:
        out = _TF_STEPS[op](tf.raw_ops, handle, *inputs)
    if out is None:
        return []
    value = out.numpy()
    return [np.array(value, dtype=object) if isinstance(value, bytes) else value]


_TF_STEPS = {
    "InitializeTable": lambda r, h, k, v: r.InitializeTableV2(table_handle=h, keys=k, values=v),
    "LookupTableImport": lambda r, h, k, v: r.LookupTableImportV2(table_handle=h, keys=k, values=v),
    "LookupTableFind": lambda r, h, k, d: r.LookupTableFindV2(table_handle=h, keys=k, default_value=d),
    "LookupTableSize": lambda r, h: r.LookupTableSizeV2(table_handle=h),
}


def assert_same(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if w.dtype == object:
            assert g.shape == w.shape and [_bytes(x) for x in g.reshape(-1)] == list(w.reshape(-1))
        else:
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_array_equal(g, w)


def _bytes(x: object) -> bytes:
    return x.encode() if isinstance(x, str) else x  # type: ignore[return-value]


def both(key: str, value: str, steps: list[tuple[str, list[np.ndarray]]]) -> list[np.ndarray]:
    want = theirs(key, value, steps)
    got = ours(key, value, steps)
    assert_same(got, want)
    return got


# -- values ---------------------------------------------------------------------------------


@pytest.mark.tf
@pytest.mark.parametrize("key", ["int64", "int32", "string"])
@pytest.mark.parametrize("value", ["float32", "float64", "int32", "string"])
@pytest.mark.parametrize("query_shape", [(), (7,), (2, 3)])
def test_find_matches_tf(key: str, value: str, query_shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(len(key) * 100 + len(value) * 10 + len(query_shape))
    stored = rng.choice(np.arange(-50, 50), size=12, replace=False)
    queries = rng.integers(-60, 60, size=query_shape)
    queries.reshape(-1)[:1] = stored[:1]  # at least one hit
    keys, values = sample(key, stored), sample(value, rng.integers(-9, 9, size=12))
    default = sample(value, np.array(-99))
    found = both(key, value, [("InitializeTable", [keys, values]),
                              ("LookupTableFind", [sample(key, queries), default])])
    assert found[0].shape == query_shape


@pytest.mark.tf
def test_missing_keys_get_the_first_element_of_the_default() -> None:
    """A default shaped like the keys is accepted, but HashTable uses only its first element."""
    steps = [("InitializeTable", [np.array([3, 1, 4], np.int64), np.array([0.5, -1.0, 2.0], np.float32)])]
    keys = np.array([[1, 2], [4, 9]], np.int64)
    shared = both("int64", "float32", steps + [("LookupTableFind", [keys, np.float32(7.0)])])
    per_key_default = np.arange(4, dtype=np.float32).reshape(2, 2)
    per_key = both("int64", "float32", steps + [("LookupTableFind", [keys, per_key_default])])
    np.testing.assert_array_equal(shared[0], [[-1.0, 7.0], [2.0, 7.0]])
    np.testing.assert_array_equal(per_key[0], [[-1.0, 0.0], [2.0, 0.0]])


@pytest.mark.tf
def test_duplicate_keys_with_equal_values_are_accepted() -> None:
    steps = [("InitializeTable", [np.array([5, 5, 6], np.int64), np.array([1.0, 1.0, 2.0], np.float32)])]
    both("int64", "float32", steps + [("LookupTableFind", [np.array([5, 6], np.int64), np.float32(0)])])
    assert both("int64", "float32", steps + [("LookupTableSize", [])])[0] == 2


@pytest.mark.tf
def test_import_and_size_match_tf() -> None:
    keys, values = np.array([[1, 2], [3, 4]], np.int64), np.array([[1.5, 2.5], [3.5, 4.5]], np.float32)
    assert both("int64", "float32", [("LookupTableSize", [])])[0] == 0
    both("int64", "float32", [("LookupTableImport", [keys, values]),
                              ("LookupTableFind", [np.array([4, 0, 1], np.int64), np.float32(-1)])])
    assert both("int64", "float32", [("LookupTableImport", [keys, values]), ("LookupTableSize", [])])[0] == 4


@pytest.mark.tf
def test_second_initialization_of_the_same_size_changes_nothing() -> None:
    """TF only compares the entry count of a second initialization."""
    first = ("InitializeTable", [np.array([1, 2], np.int64), np.array([10.0, 20.0], np.float32)])
    again = ("InitializeTable", [np.array([7, 8], np.int64), np.array([70.0, 80.0], np.float32)])
    found = both("int64", "float32", [first, again, ("LookupTableFind", [np.array([1, 7], np.int64), np.float32(0)])])
    np.testing.assert_array_equal(found[0], [10.0, 0.0])


# -- errors -----------------------------------------------------------------------------------

I64, F32 = np.int64, np.float32
ERROR_CASES = {
    "different values for one key": ([("InitializeTable", [np.array([1, 1], I64), np.array([1, 2], F32)])],
                                     "HashTable has different value for same key"),
    "NaN values for one key": ([("InitializeTable", [np.array([1, 1], I64), np.array([np.nan, np.nan], F32)])],
                               "HashTable has different value for same key"),
    "empty initializer": ([("InitializeTable", [np.zeros(0, I64), np.zeros(0, F32)])],
                          "keys and values cannot be empty"),
    "matrix of keys": ([("InitializeTable", [np.ones((1, 1), I64), np.ones((1, 1), F32)])],
                       "Keys must be a vector"),
    "lookup before initialization": ([("LookupTableFind", [np.array([1], I64), F32(0)])], "Table not initialized"),
    "reinitialized with another size": ([("InitializeTable", [np.array([1], I64), np.array([1], F32)]),
                                         ("InitializeTable", [np.array([1, 2], I64), np.array([1, 2], F32)])],
                                        "already initialized with different data"),
    "default of the wrong shape": ([("InitializeTable", [np.array([1], I64), np.array([1], F32)]),
                                    ("LookupTableFind", [np.array([1, 2], I64), np.zeros(3, F32)])],
                                   "for default value"),
    "int32 keys for an int64 table": ([("InitializeTable", [np.array([1], I64), np.array([1], F32)]),
                                       ("LookupTableFind", [np.array([1], np.int32), F32(0)])],
                                      "Key must be type int64"),
    "float64 values for a float table": ([("InitializeTable", [np.array([1], I64), np.array([1], np.float64)])],
                                         "Value must be type float32"),
}


@pytest.mark.tf
@pytest.mark.parametrize("case", sorted(ERROR_CASES))
def test_errors_where_tf_fails(case: str) -> None:
    steps, message = ERROR_CASES[case]
    with pytest.raises(Exception):  # noqa: B017 - TF raises its own error classes
        theirs("int64", "float32", steps)
    with pytest.raises(KernelError, match=message):
        ours("int64", "float32", steps)


def test_kernels_name_what_is_not_a_table() -> None:
    with pytest.raises(KernelError, match="^LookupTableFindV2: expected a table handle"):
        get_kernel("LookupTableFindV2")({}, [np.zeros(2, np.float32), np.array([1]), np.float32(0)])


def test_declared_types_must_be_the_tables() -> None:
    (handle,) = get_kernel("HashTableV2")({"key_dtype": _ir_dtype("int64"), "value_dtype": _ir_dtype("float32")}, [])
    with pytest.raises(KernelError, match="Tkey=int32 does not match"):
        get_kernel("InitializeTableV2")({"Tkey": _ir_dtype("int32")}, [handle, np.array([1]), np.array([1.0])])


def test_a_handle_is_a_scalar_holding_the_table() -> None:
    (handle,) = get_kernel("HashTable")({"key_dtype": _ir_dtype("int64"), "value_dtype": _ir_dtype("float32")}, [])
    assert handle.shape == () and handle.dtype == object
    table = table_of(handle)
    assert isinstance(table, HashTableResource) and not table.initialized and table.size == 0


# -- the V1 (ref-typed) ops GTT writes, in a TF1 session -----------------------------------------


@pytest.mark.tf
def test_v1_ops_match_tf_in_a_session() -> None:
    tf = _tf()
    keys, values = np.array([0, 3, 7], I64), np.array([0.5, -2.0, 0.25], F32)
    queries = np.array([[7, 1], [3, 0]], I64)
    graph = tf.Graph()
    with graph.as_default():
        table = tf.raw_ops.HashTable(key_dtype=tf.int64, value_dtype=tf.float32)
        init = tf.raw_ops.InitializeTable(table_handle=table, keys=keys, values=values)
        found = tf.raw_ops.LookupTableFind(table_handle=table, keys=queries, default_value=F32(0))
        size = tf.raw_ops.LookupTableSize(table_handle=table)
        with tf.compat.v1.Session() as session:
            session.run(init)
            want_found, want_size = session.run([found, size])
    steps = [("InitializeTable", [keys, values])]
    assert_same(ours("int64", "float32", steps + [("LookupTableFind", [queries, F32(0)])], v1=True), [want_found])
    assert_same(ours("int64", "float32", steps + [("LookupTableSize", [])], v1=True), [want_size])


# -- tables as state in the interpreter -------------------------------------------------------

GRAPH = """graph {
  %table = HashTable() {key_dtype = i64, value_dtype = f32} : str[*]
  %keys = Const() {dtype = i64, value = dense<i64[3], [2, 5, 9]>} : i64[3]
  %values = Const() {dtype = f32, value = dense<f32[3], [1.5, -3.0, 4.0]>} : f32[3]
  %init[0] = InitializeTable(%table, %keys, %values) {Tkey = i64, Tval = f32}
  %ids = Placeholder() {dtype = i64, shape = shape<?>} : i64[?]
  %default = Const() {dtype = f32, value = dense<f32[], [0.0]>} : f32[]
  %find = LookupTableFind(%table, %ids, %default) {Tin = i64, Tout = f32} : f32[?]
  %size = LookupTableSize(%table) : i64[]
  %group[0] = NoOp(^%init)
}
"""


def test_interpreter_keeps_tables_between_runs() -> None:
    interpreter = Interpreter(parse_graph(GRAPH))
    ids = np.array([9, 1, 2, 5], np.int64)
    with pytest.raises(GttcError, match="Table not initialized"):
        interpreter.run({"ids": ids}, ["find"])
    assert interpreter.run({}, [], targets=["group"]) == {}
    np.testing.assert_array_equal(interpreter.run({"ids": ids}, ["find"])["find"], [4.0, 0.0, 1.5, -3.0])
    assert interpreter.run({}, ["size"])["size"] == 3
    assert interpreter.run({"ids": ids[:1]}, ["find"])["find"].tolist() == [4.0]


def test_each_interpreter_has_its_own_tables() -> None:
    graph = parse_graph(GRAPH)
    filled = Interpreter(graph)
    assert filled.initialize_tables() == 1
    assert filled.run({}, ["size"])["size"] == 3
    assert Interpreter(graph).run({}, ["size"])["size"] == 0


def test_unknown_target_is_named() -> None:
    with pytest.raises(GttcError, match="target 'nope'"):
        Interpreter(parse_graph(GRAPH)).run({}, [], targets=["nope"])
