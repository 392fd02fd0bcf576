"""Every TensorProto encoding decodes to the values TensorFlow itself reads."""
from __future__ import annotations

import numpy as np
import pytest

from compiler.ir.dtypes import DType
from compiler.ir.tensor import Tensor
from compiler.proto import tensor_pb2
from compiler.proto.codec import decode_tensor, encode_tensor


def proto(dtype: DType, shape, **fields) -> tensor_pb2.TensorProto:
    t = tensor_pb2.TensorProto(dtype=int(dtype), **fields)
    for d in shape:
        t.tensor_shape.dim.add().size = d
    return t


@pytest.mark.parametrize("dtype, field, values, expected", [
    (DType.FLOAT, "float_val", [1.5, 2.5, 3.5], np.array([1.5, 2.5, 3.5], np.float32)),
    (DType.DOUBLE, "double_val", [0.1, 0.2, 0.3], np.array([0.1, 0.2, 0.3])),
    (DType.INT32, "int_val", [1, -2, 3], np.array([1, -2, 3], np.int32)),
    (DType.INT64, "int64_val", [1 << 40, 2, 3], np.array([1 << 40, 2, 3], np.int64)),
    (DType.QUINT8, "int_val", [0, 128, 255], np.array([0, 128, 255], np.uint8)),
    (DType.QINT8, "int_val", [-128, 0, 127], np.array([-128, 0, 127], np.int8)),
    (DType.QINT32, "int_val", [-5, 0, 5], np.array([-5, 0, 5], np.int32)),
    (DType.BOOL, "bool_val", [True, False, True], np.array([True, False, True])),
    (DType.HALF, "half_val", [0x3C00, 0x4000, 0xBC00], np.array([1.0, 2.0, -1.0], np.float16)),
    (DType.UINT32, "uint32_val", [1, 2, 4000000000], np.array([1, 2, 4000000000], np.uint32)),
])
def test_repeated_fields(dtype, field, values, expected):
    tensor = decode_tensor(proto(dtype, [3], **{field: values}))
    np.testing.assert_array_equal(tensor.numpy(), expected)
    assert tensor.numpy().dtype == dtype.to_numpy()


def test_splat_repeats_last_value_and_empty_means_zero():
    assert decode_tensor(proto(DType.FLOAT, [2, 3], float_val=[7.0])).numpy().tolist() == [[7.0] * 3] * 2
    assert decode_tensor(proto(DType.INT32, [4], int_val=[1, 2])).numpy().tolist() == [1, 2, 2, 2]
    assert decode_tensor(proto(DType.FLOAT, [3])).numpy().tolist() == [0.0, 0.0, 0.0]


def test_tensor_content_and_strings():
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = decode_tensor(proto(DType.FLOAT, [2, 3], tensor_content=arr.tobytes()))
    np.testing.assert_array_equal(t.numpy(), arr)
    s = decode_tensor(proto(DType.STRING, [2], string_val=[b"a", b"\xff"]))
    assert list(s.numpy()) == [b"a", b"\xff"]


def test_bfloat16_half_val():
    bits = [0x3F80, 0xC000]  # 1.0, -2.0 in bfloat16
    t = decode_tensor(proto(DType.BFLOAT16, [2], half_val=bits))
    np.testing.assert_array_equal(t.numpy().astype(np.float32), [1.0, -2.0])


def test_too_many_values_is_an_error():
    with pytest.raises(ValueError, match="holds 3 values"):
        decode_tensor(proto(DType.INT32, [2], int_val=[1, 2, 3])).numpy()


def test_untouched_tensor_reemits_source_and_new_tensor_packs_content():
    src = proto(DType.FLOAT, [3], float_val=[1.0])
    assert encode_tensor(decode_tensor(src)) == src
    fresh = encode_tensor(Tensor.from_numpy(np.array([1, 2], np.int32)))
    assert fresh.tensor_content == np.array([1, 2], np.int32).tobytes()


@pytest.mark.tf
def test_decoding_matches_tensorflow_on_fixture_constants():
    """TF's own tensor_util.MakeNdarray agrees with gttc on every Const of every fixture."""
    tf = pytest.importorskip("tensorflow")
    from conftest import FIXTURES, SMALL_MODELS

    checked = 0
    for name in SMALL_MODELS:
        graph = tf.compat.v1.GraphDef.FromString((FIXTURES / f"{name}.pb").read_bytes())
        for node in graph.node:
            if node.op != "Const":
                continue
            ours = decode_tensor(tensor_pb2.TensorProto.FromString(node.attr["value"].tensor.SerializeToString()))
            theirs = tf.make_ndarray(node.attr["value"].tensor)
            assert ours.numpy().tobytes() == np.asarray(theirs).tobytes(), node.name
            checked += 1
    assert checked > 300


def _decodable_dtypes() -> list[DType]:
    found = []
    for dtype in DType:
        try:
            dtype.to_numpy()
        except TypeError:
            continue
        if dtype != DType.STRING:
            found.append(dtype)
    return found


@pytest.mark.parametrize("dtype", _decodable_dtypes(), ids=lambda d: d.tf_name)
def test_tensor_attr_chunks_are_the_serialized_attr_value(dtype):
    """The backend's direct encoding of a computed tensor is byte for byte what protobuf writes,
    for every element type and for scalars, empty and zero-sized dimensions."""
    from compiler.proto.codec import attr_bytes, tensor_attr_chunks

    rng = np.random.default_rng(int(dtype))
    for shape in [(), (0,), (3,), (2, 0, 3), (1, 1), (300, 2), (5, 1, 2, 7)]:
        values = rng.random(shape) > 0.5 if dtype == DType.BOOL else rng.standard_normal(shape) * 100
        tensor = Tensor.from_numpy(np.asarray(values).astype(dtype.to_numpy()), dtype)
        assert b"".join(tensor_attr_chunks(tensor)) == attr_bytes(tensor), shape


def test_tensor_attr_chunks_leave_sources_and_strings_to_protobuf():
    from compiler.proto.codec import tensor_attr_chunks

    assert tensor_attr_chunks(decode_tensor(proto(DType.FLOAT, [2], float_val=[1.0, 2.0]))) is None
    assert tensor_attr_chunks(Tensor.from_numpy(np.array([b"a", b"bc"], dtype=object), DType.STRING)) is None
