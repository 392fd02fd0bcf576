"""Ragged kernels against `tf.raw_ops` on seeded random ragged tensors.

"RaggedRange", "RaggedGather", "RaggedTensorToSparse" and "RaggedTensorToTensor"
compare directly (errors included, via check_or_both_fail).  Malformed
partitions on which TF's own kernel reads or writes out of bounds (it then
crashes the process) are never sent to TF.  The variant pair
"RaggedTensorToVariant" / "RaggedTensorFromVariant" is compared through
round trips, and a frozen tf.map_fn over a ragged tensor runs in the
interpreter against TF.
"""
from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from compiler.ir.dtypes import DType  # noqa: E402
from compiler.runtime.kernels import KernelError  # noqa: E402
from tests.runtime.test_kernels import (  # noqa: E402
    _tf_kwargs, _tf_tensor, assert_matches, check_or_both_fail, run_ours)

pytestmark = pytest.mark.tf

SPLIT_TYPES = [np.int32, np.int64]


def random_nested(rng: np.random.Generator, nrows: int, ragged_rank: int, max_len: int = 4,
                  split_type=np.int64) -> tuple[list[np.ndarray], int]:
    """Valid nested splits (outermost first) and the number of values they address."""
    nested, items = [], nrows
    for _ in range(ragged_rank):
        lengths = rng.integers(0, max_len + 1, items)
        nested.append(np.concatenate([[0], np.cumsum(lengths)]).astype(split_type))
        items = int(lengths.sum())
    return nested, items


def random_values(rng: np.random.Generator, count: int, inner: tuple[int, ...], dtype=np.float32) -> np.ndarray:
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal((count,) + inner).astype(dtype)
    return rng.integers(-50, 50, (count,) + inner).astype(dtype)


def run_tf_flat(op: str, inputs: dict[str, object], attrs: dict[str, object]) -> list[np.ndarray]:
    """`tf.raw_ops.<op>` with list outputs (nested splits) flattened, as our kernels return them."""
    result = getattr(tf.raw_ops, op)(**{k: _tf_tensor(v) for k, v in inputs.items()}, **_tf_kwargs(op, attrs))
    flat: list[np.ndarray] = []
    for part in result:
        flat.extend([np.asarray(t) for t in part] if isinstance(part, list) else [np.asarray(part)])
    return flat


def check_list_outputs_or_both_fail(op: str, inputs: dict[str, object], attrs: dict[str, object]) -> bool:
    """check_or_both_fail for ops with a list output (the harness's stacks outputs into one array)."""
    try:
        want = run_tf_flat(op, inputs, attrs)
    except tf.errors.InvalidArgumentError:
        with pytest.raises(KernelError):
            run_ours(op, inputs, attrs)
        return False
    assert_matches(op, run_ours(op, inputs, attrs), want)
    return True


# ---------------------------------------------------------------- RaggedRange
def _range_operand(rng, dtype, n, scalar):
    shape = () if scalar else (n,)
    if np.dtype(dtype).kind == "f":
        return (rng.uniform(-10, 10, shape)).astype(dtype)
    return rng.integers(-10, 11, shape).astype(dtype)


@pytest.mark.parametrize("seed", range(4))
def test_ragged_range(seed):
    rng = np.random.default_rng(seed)
    compared = 0
    for case in range(40):
        dtype = [np.float32, np.float64, np.int32, np.int64][case % 4]
        n = int(rng.integers(0, 5))
        scalars = rng.random(3) < 0.35
        starts, limits, deltas = (_range_operand(rng, dtype, n, s) for s in scalars)
        deltas = np.where(np.abs(deltas) < 0.5, np.asarray(1, dtype), deltas).astype(dtype)
        if case % 13 == 5:  # a zero delta, refused
            deltas = np.zeros_like(deltas)
        if case % 17 == 7 and not scalars[0]:  # mismatched lengths, refused
            starts = np.concatenate([starts, starts[:1] if n else np.zeros(1, dtype)])
        attrs = {"Tsplits": DType.from_numpy(SPLIT_TYPES[case % 2])}
        compared += check_or_both_fail("RaggedRange", {"starts": starts, "limits": limits, "deltas": deltas}, attrs)
    assert compared >= 25


def test_ragged_range_float_steps_accumulate_like_tf():
    # 0.1 added 30 times drifts from 0.1 * i; TF adds step by step.
    inputs = {"starts": np.float32([0.0, 1.0]), "limits": np.float32([3.0, 1.5]), "deltas": np.float32(0.1)}
    assert check_or_both_fail("RaggedRange", inputs, {"Tsplits": DType.INT64})


def test_ragged_range_bad_rank_and_infinite_size_fail_like_tf():
    assert not check_or_both_fail("RaggedRange", {"starts": np.zeros([1, 1], np.int32), "limits": np.int32(3),
                                                  "deltas": np.int32(1)}, {})
    assert not check_or_both_fail("RaggedRange", {"starts": np.float32(0), "limits": np.float32(np.inf),
                                                  "deltas": np.float32(1)}, {})


# ---------------------------------------------------------------- RaggedGather
@pytest.mark.parametrize("seed", range(4))
def test_ragged_gather(seed):
    rng = np.random.default_rng(100 + seed)
    compared = 0
    for case in range(30):
        ragged_rank = int(rng.integers(1, 4))
        split_type = SPLIT_TYPES[case % 2]
        nrows = int(rng.integers(1, 6))
        nested, count = random_nested(rng, nrows, ragged_rank, split_type=split_type)
        inner = [(), (2,), (2, 3)][case % 3]
        values = random_values(rng, count, inner, [np.float32, np.int32][case % 2])
        index_shape = [(), (4,), (2, 3), (0,)][int(rng.integers(0, 4))]
        if index_shape == () and ragged_rank == 1:
            index_shape = (3,)
        high = nrows + (1 if case % 11 == 3 else 0)  # sometimes out of range: refused
        indices = rng.integers(0, high, index_shape).astype([np.int32, np.int64][case % 2 if seed % 2 else 0])
        out_rank = len(index_shape) - 1 + ragged_rank
        inputs = {"params_nested_splits": nested, "params_dense_values": values, "indices": indices}
        compared += check_list_outputs_or_both_fail("RaggedGather", inputs, {"OUTPUT_RAGGED_RANK": out_rank})
    assert compared >= 20


def test_ragged_gather_unsorted_splits_fail_like_tf():
    inputs = {"params_nested_splits": [np.int64([0, 3, 1, 4])], "params_dense_values": np.arange(4.0, dtype=np.float32),
              "indices": np.int32([1])}
    assert not check_list_outputs_or_both_fail("RaggedGather", inputs, {"OUTPUT_RAGGED_RANK": 1})


# ---------------------------------------------------------------- RaggedTensorToSparse
@pytest.mark.parametrize("seed", range(3))
def test_ragged_tensor_to_sparse(seed):
    rng = np.random.default_rng(200 + seed)
    compared = 0
    for case in range(30):
        ragged_rank = int(rng.integers(1, 4))
        nested, count = random_nested(rng, int(rng.integers(0, 5)), ragged_rank, split_type=SPLIT_TYPES[case % 2])
        values = random_values(rng, count, [(), (3,), (2, 2)][case % 3])
        if case % 9 == 4:  # splits not starting at 0, or not matching the values: refused
            nested[-1] = nested[-1] + 1
        compared += check_or_both_fail("RaggedTensorToSparse", {"rt_nested_splits": nested, "rt_dense_values": values},
                                       {})
    assert compared >= 20


# ---------------------------------------------------------------- RaggedTensorToTensor
def _value_rowids(splits: np.ndarray) -> np.ndarray:
    return np.repeat(np.arange(splits.size - 1), np.diff(splits)).astype(splits.dtype)


def _partitions(rng, nested, nrows, encoding):
    """The row partition tensors and types for one encoding of `nested`."""
    if encoding == "ROW_SPLITS":
        return list(nested), ["ROW_SPLITS"] * len(nested)
    if encoding == "VALUE_ROWIDS":
        first = np.asarray(nrows + int(rng.integers(0, 2)), nested[0].dtype)
        return [first] + [_value_rowids(s) for s in nested], ["FIRST_DIM_SIZE"] + ["VALUE_ROWIDS"] * len(nested)
    mixed = [nested[0]] + [_value_rowids(s) if i % 2 else s for i, s in enumerate(nested[1:])]
    return mixed, ["ROW_SPLITS"] + ["VALUE_ROWIDS" if i % 2 else "ROW_SPLITS" for i in range(len(nested) - 1)]


def _requested_shape(rng, natural_rank, inner, shape_type, kind):
    if kind == 0:
        return np.asarray(-1, shape_type)  # unknown rank
    dims = []
    for axis in range(natural_rank):
        if axis >= natural_rank - len(inner):
            dims.append(inner[axis - natural_rank + len(inner)] if rng.random() < 0.5 else -1)
        else:
            dims.append(-1 if rng.random() < 0.4 else int(rng.integers(0, 5)))
    if kind == 3:  # a wrong rank or a wrong uniform dim: refused
        dims = dims + [2] if not inner else dims[:-1] + [inner[-1] + 1]
    return np.asarray(dims, shape_type)


def _default(rng, inner, dtype, kind):
    shapes = {0: (), 1: inner, 2: tuple(1 if rng.random() < 0.5 else d for d in inner)[-1:] if inner else (),
              3: (1,) * (len(inner) + 1)}  # kind 3: rank too high, refused
    return random_values(rng, 1, shapes[kind], dtype)[0]


@pytest.mark.parametrize("seed", range(5))
def test_ragged_tensor_to_tensor(seed):
    rng = np.random.default_rng(300 + seed)
    compared = 0
    for case in range(40):
        ragged_rank = int(rng.integers(1, 4))
        index_type = SPLIT_TYPES[case % 2]
        nrows = int(rng.integers(0, 5))
        nested, count = random_nested(rng, nrows, ragged_rank, split_type=index_type)
        inner = [(), (2,), (2, 3)][int(rng.integers(0, 3))]
        dtype = [np.float32, np.int32, np.float64][case % 3]
        values = random_values(rng, count, inner, dtype)
        encoding = ["ROW_SPLITS", "VALUE_ROWIDS", "MIXED"][int(rng.integers(0, 3))]
        partitions, types = _partitions(rng, nested, nrows, encoding)
        if encoding == "VALUE_ROWIDS" and case % 10 == 9 and count:
            partitions[0] = np.asarray(0, index_type)  # row ids past FIRST_DIM_SIZE: refused
        shape_kind = int(rng.choice([0, 1, 2, 3], p=[0.25, 0.3, 0.35, 0.1]))
        shape = _requested_shape(rng, ragged_rank + 1 + len(inner), inner, SPLIT_TYPES[seed % 2], shape_kind)
        default = _default(rng, inner, dtype, int(rng.choice([0, 1, 2, 3], p=[0.4, 0.3, 0.2, 0.1])))
        inputs = {"shape": shape, "values": values, "default_value": default, "row_partition_tensors": partitions}
        compared += check_or_both_fail("RaggedTensorToTensor", inputs, {"row_partition_types": types})
    assert compared >= 25


def test_ragged_tensor_to_tensor_default_broadcasts_right_aligned_like_tf():
    values = np.arange(3 * 3 * 4, dtype=np.float32).reshape(3, 3, 4)
    splits = [np.int64([0, 1, 3])]
    attrs = {"row_partition_types": ["ROW_SPLITS"]}
    column = np.float32([[9], [8], [7]])  # [3, 1]: passes TF's left-aligned check and broadcasts
    assert check_or_both_fail("RaggedTensorToTensor", {"shape": np.int64(-1), "values": values,
                                                       "default_value": column, "row_partition_tensors": splits}, attrs)
    row = np.float32([9, 8, 7])  # [3]: passes the left-aligned check, cannot broadcast to [3, 4]
    assert not check_or_both_fail("RaggedTensorToTensor", {"shape": np.int64(-1), "values": values,
                                                           "default_value": row, "row_partition_tensors": splits}, attrs)


@pytest.mark.parametrize("partitions, types, message", [
    ([np.int64([0, 2, 4])], ["ROW_SPLITS"], "address 4 values but there are 3"),
    ([np.int64(3), np.int64([2, 0, 0])], ["FIRST_DIM_SIZE", "VALUE_ROWIDS"], "must be sorted"),
    ([np.int64(2), np.int64([0, 1, 1, 1])], ["FIRST_DIM_SIZE", "VALUE_ROWIDS"], "address 4 values"),
])
def test_ragged_tensor_to_tensor_refuses_what_tf_reads_out_of_bounds(partitions, types, message):
    # TF's kernel reads garbage or corrupts its heap on these; they are not sent to TF.
    inputs = [np.int64([-1, -1]), np.float32([1, 2, 3]), np.float32(0), *partitions]
    with pytest.raises(KernelError, match=message):
        run_ours("RaggedTensorToTensor", inputs, {"row_partition_types": types})


# ---------------------------------------------------------------- variants
def _tf_round_trip(nested, values, batched, input_rank, output_rank, split_type, stack=False):
    raw = tf.raw_ops
    if stack:  # what map_fn's loop builds: one unbatched variant per row, stacked
        encoded = tf.stack([raw.RaggedTensorToVariant(rt_nested_splits=[], rt_dense_values=v, batched_input=False)
                            for v in values])
    else:
        encoded = raw.RaggedTensorToVariant(rt_nested_splits=[tf.constant(s) for s in nested], rt_dense_values=values,
                                            batched_input=batched)
    outs = raw.RaggedTensorFromVariant(encoded_ragged=encoded, input_ragged_rank=input_rank,
                                       output_ragged_rank=output_rank, Tvalues=tf.as_dtype(values[0].dtype
                                                                                           if stack else values.dtype),
                                       Tsplits=tf.as_dtype(split_type))
    return [np.asarray(t) for t in outs[0]] + [np.asarray(outs[1])]


def _our_round_trip(nested, values, batched, input_rank, output_rank, split_type, stack=False):
    if stack:
        rows = [run_ours("RaggedTensorToVariant", [v], {"RAGGED_RANK": 0, "batched_input": False})[0] for v in values]
        encoded = np.empty(len(rows), object)
        for i, r in enumerate(rows):
            encoded[i] = r[()]
        value_type = values[0].dtype
    else:
        encoded = run_ours("RaggedTensorToVariant", nested + [values],
                           {"RAGGED_RANK": len(nested), "batched_input": batched})[0]
        value_type = values.dtype
    attrs = {"input_ragged_rank": input_rank, "output_ragged_rank": output_rank,
             "Tvalues": DType.from_numpy(value_type), "Tsplits": DType.from_numpy(split_type)}
    return run_ours("RaggedTensorFromVariant", [encoded], attrs)


@pytest.mark.parametrize("seed", range(3))
def test_variant_round_trips_match_tf(seed):
    rng = np.random.default_rng(400 + seed)
    for case in range(12):
        split_type = SPLIT_TYPES[case % 2]
        ragged_rank = int(rng.integers(1, 4))
        nested, count = random_nested(rng, int(rng.integers(1, 5)), ragged_rank, split_type=split_type)
        values = random_values(rng, count, [(), (2,)][case % 2])
        batched = bool(case % 3)
        input_rank = [ragged_rank, ragged_rank - 1, -1][case % 3]
        args = (nested, values, batched, input_rank, ragged_rank, split_type)
        assert_matches("RaggedTensorFromVariant", _our_round_trip(*args), _tf_round_trip(*args))


def test_stacked_row_variants_decode_like_tf():
    rng = np.random.default_rng(7)
    rows = [random_values(rng, n, (2,)) for n in (2, 0, 3)]
    args = ([], rows, False, 0, 1, np.int64, True)
    assert_matches("RaggedTensorFromVariant", _our_round_trip(*args), _tf_round_trip(*args))


def test_decoding_with_the_wrong_value_type_fails():
    encoded = run_ours("RaggedTensorToVariant", [np.int64([0, 2]), np.float32([1, 2])],
                       {"RAGGED_RANK": 1, "batched_input": False})[0]
    with pytest.raises(KernelError, match="values Tensor dtype"):
        run_ours("RaggedTensorFromVariant", [encoded], {"input_ragged_rank": 1, "output_ragged_rank": 1,
                                                        "Tvalues": DType.INT32, "Tsplits": DType.INT64})


def map_fn_over_ragged_graph_def():
    """A frozen tf.function: map_fn over a ragged tensor, once to a scalar per row, once to a ragged row."""
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32), tf.TensorSpec([None], tf.int64)])
    def f(values, lengths):
        rt = tf.RaggedTensor.from_row_lengths(values, lengths)
        sums = tf.map_fn(lambda row: tf.reduce_sum(row * 2.0), rt, fn_output_signature=tf.float32)
        scaled = tf.map_fn(lambda row: row * 3.0 + 1.0, rt,
                           fn_output_signature=tf.RaggedTensorSpec([None], tf.float32))
        return tf.identity(sums, name="sums"), tf.identity(scaled.to_tensor(), name="dense")

    return convert_variables_to_constants_v2(f.get_concrete_function()).graph.as_graph_def()


def test_map_fn_over_ragged_runs_in_the_interpreter_like_tf(tmp_path):
    from compiler.modelio import load_model
    from compiler.runtime.interpreter import run_graph

    graph_def = map_fn_over_ragged_graph_def()
    path = tmp_path / "map_fn.pb"
    path.write_bytes(graph_def.SerializeToString())
    graph = load_model(str(path))
    rng = np.random.default_rng(11)
    for lengths in ([2, 0, 3, 1], [0], [5, 5], []):
        lengths = np.asarray(lengths, np.int64)
        values = rng.standard_normal(int(lengths.sum())).astype(np.float32)
        with tf.Graph().as_default() as g:
            tf.graph_util.import_graph_def(graph_def, name="")
            with tf.compat.v1.Session(graph=g) as sess:
                want = sess.run(["sums:0", "dense:0"], {"values:0": values, "lengths:0": lengths})
        got = run_graph(graph, {"values": values, "lengths": lengths}, ["sums", "dense"])
        np.testing.assert_allclose(got["sums"], want[0], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got["dense"], want[1], rtol=1e-6)
        assert got["dense"].shape == want[1].shape


# ---------------------------------------------------------------- shape rules
def test_shape_rules_agree_with_the_kernels():
    from compiler.analysis import analyze
    from compiler.runtime.interpreter import Interpreter
    from tests.backends.test_onnx_export import Builder

    b = Builder()
    i64 = lambda v: b.const(np.asarray(v, np.int64))  # noqa: E731
    values = b.input("values", [5, 2])
    splits = [i64([0, 2, 3]), i64([0, 1, 1, 5])]
    outs = list(b("RaggedRange", i64([0, 3, 1]), i64(7), i64([2, 1, 3]), T=DType.INT64, Tsplits=DType.INT64))
    outs += list(b("RaggedTensorToSparse", *splits, values, RAGGED_RANK=2, T=DType.FLOAT,
                   Tsplits=DType.INT64))
    outs += list(b("RaggedGather", *splits, values, b.const(np.zeros([2, 3], np.int32)), PARAMS_RAGGED_RANK=2,
                   OUTPUT_RAGGED_RANK=3, Tvalues=DType.FLOAT, Tindices=DType.INT32, Tsplits=DType.INT64))
    outs.append(b("RaggedTensorToTensor", i64([-1, 4, -1, 2]), values, b.const(np.float32(0)), *splits,
                  row_partition_types=["ROW_SPLITS", "ROW_SPLITS"], num_row_partition_tensors=2, T=DType.FLOAT,
                  Tindex=DType.INT64, Tshape=DType.INT64))
    outs.append(b("RaggedTensorToVariant", *splits, values, RAGGED_RANK=2, batched_input=True, Tvalues=DType.FLOAT,
                  Tsplits=DType.INT64))
    info = analyze(list(b.graph), {})
    got = Interpreter(b.graph).run({"values": np.ones([5, 2], np.float32)}, [v.name for v in outs])
    for value in outs:
        dims = info.shape(value).dims
        assert dims is not None and len(dims) == got[value.name].ndim, (value.name, dims)
        assert all(d is None or d == n for d, n in zip(dims, got[value.name].shape)), (value.name, dims)
