"""The shortcuts loading and emitting take give what the long way gives.

Signature checks skip an op equal to one that passed but still read every
tensor; tensor dims are read through the shape's encoding; result types come
from a per-op-type plan; the GraphDef writer caches repeated byte strings.
"""
from __future__ import annotations

import pytest
from google.protobuf import text_format
from google.protobuf.internal import encoder

from compiler.backends.graphdef import emit_graphdef_bytes
from compiler.errors import InputError
from compiler.frontends.graphdef import load_graph_bytes
from compiler.ir.attrs import AttrMap, FuncAttr, PlaceholderAttr, RawAttr
from compiler.ir.dtypes import DType
from compiler.ir.op_registry import infer_result_types
from compiler.ir.shapes import Shape, UNKNOWN_SHAPE
from compiler.ir.signatures import SignatureError
from compiler.proto import attr_value_pb2, graph_pb2, node_def_pb2, tensor_pb2
from compiler.proto.codec import decode_attr, tensor_dims
from compiler.proto.wire import varint


def _const(name: str, tensor: str, dtype: str = "DT_FLOAT") -> str:
    return (f"node {{ name: '{name}' op: 'Const' attr {{ key: 'dtype' value {{ type: {dtype} }} }}"
            f"  attr {{ key: 'value' value {{ tensor {{ {tensor} }} }} }} }}")


def _load(*nodes: str) -> None:
    load_graph_bytes(text_format.Parse("".join(nodes), graph_pb2.GraphDef()).SerializeToString())


GOOD = "dtype: DT_FLOAT tensor_shape { dim { size: 2 } } tensor_content: '\\000\\000\\200?\\000\\000\\000@'"


@pytest.mark.parametrize("tensor, message", [
    ("dtype: DT_FLOAT tensor_shape { dim { size: 2 } } tensor_content: '\\000\\000\\200?'",
     "node 'b' (Const): attribute 'value': tensor_content has 4 bytes, a float tensor of shape [2] needs 8"),
    ("dtype: DT_FLOAT tensor_shape { dim { size: 1 } } float_val: [1, 2]",
     "node 'b' (Const): attribute 'value': tensor holds 2 values, its shape [1] has 1 elements"),
    ("dtype: DT_INT32 int_val: 1",
     "node 'b' (Const): value is int32 but attribute 'dtype' says float"),
])
def test_a_const_like_one_that_passed_still_has_its_tensor_checked(tensor, message):
    """Both constants share dtype, type and result count: the second skips all but its tensor's checks."""
    with pytest.raises(SignatureError) as info:
        _load(_const("a", GOOD), _const("b", tensor))
    assert str(info.value) == f"<bytes>: {message}"


def test_tensor_dims_are_the_stated_sizes():
    for dims in ([], [0], [3, 1, 7], [-1, 4], [1 << 40, 2]):
        proto = tensor_pb2.TensorProto(dtype=1)
        for size in dims:
            proto.tensor_shape.dim.add(size=size)
        assert tensor_dims(proto) == tuple(dims)


def test_a_negative_constant_dimension_is_refused_at_lowering():
    with pytest.raises(InputError, match=r"node 'a' \(Const\): constant tensor with unknown dimension \[2, -1\]"):
        _load(_const("a", "dtype: DT_FLOAT tensor_shape { dim { size: 2 } dim { size: -1 } }"))


def _attrs(text: str) -> AttrMap:
    node = text_format.Parse(text, node_def_pb2.NodeDef())
    return AttrMap.encoded({key: node.attr[key] for key in node.attr}, decode_attr)


@pytest.mark.parametrize("op_type, attrs, expected", [
    ("Relu", "attr { key: 'T' value { type: DT_HALF } }", [(DType.HALF, UNKNOWN_SHAPE)]),
    ("ExpandDims", "attr { key: 'T' value { type: DT_FLOAT } }", [(DType.FLOAT, UNKNOWN_SHAPE)]),
    ("Relu", "attr { key: 'T' value { i: 1 } }", [(None, UNKNOWN_SHAPE)]),
    ("Split", "attr { key: 'T' value { type: DT_INT8 } } attr { key: 'num_split' value { i: 2 } }",
     [(DType.INT8, UNKNOWN_SHAPE)] * 2),
    ("IdentityN", "attr { key: 'T' value { list { type: [DT_FLOAT, DT_INT32] } } }",
     [(DType.FLOAT, UNKNOWN_SHAPE), (DType.INT32, UNKNOWN_SHAPE)]),
    ("Shape", "attr { key: 'T' value { type: DT_FLOAT } }"
              "attr { key: '_output_shapes' value { list { shape { dim { size: 4 } } } } }",
     [(DType.INT32, Shape((4,)))]),
    ("Placeholder", "attr { key: 'dtype' value { type: DT_FLOAT } } attr { key: 'shape' value { shape { } } }",
     [(DType.FLOAT, Shape(()))]),
    ("NoSuchOp", "", [(None, UNKNOWN_SHAPE)]),
])
def test_result_types(op_type, attrs, expected):
    assert infer_result_types(op_type, _attrs(attrs)) == expected


def test_varint_matches_protobuf():
    for value in [*range(0, 0x4100), 0x1FFFFF, 0x200000, (1 << 63) - 1, -1, -0x80, -(1 << 63)]:
        out: list[bytes] = []
        encoder._VarintEncoder()(out.append, value if value >= 0 else value + (1 << 64), True)
        assert varint(value) == b"".join(out), value


def test_emit_reproduces_attributes_of_every_length_class():
    """Entry heads are cached by key and size: values of 1-, 2- and 3-byte lengths, control inputs."""
    graph = graph_pb2.GraphDef()
    for i, size in enumerate((1, 200, 20000)):
        node = graph.node.add(name=f"c{i}", op="Const")
        node.attr["dtype"].type = 1
        node.attr["value"].tensor.dtype = 1
        node.attr["value"].tensor.tensor_shape.dim.add(size=size)
        node.attr["value"].tensor.tensor_content = bytes(4 * size)
        if i:
            node.input.append(f"^c{i - 1}")
    data = graph.SerializeToString(deterministic=True)
    assert emit_graphdef_bytes(load_graph_bytes(data)) == data


@pytest.mark.parametrize("order", [("a_t", "b_t"), ("b_t", "a_t")])
def test_of_two_bad_tensors_the_first_by_name_is_named(order):
    bad = "tensor { dtype: DT_FLOAT tensor_shape { dim { size: 2 } } tensor_content: 'abc' }"
    good = "tensor { dtype: DT_FLOAT float_val: 1 }"

    def node(name: str, value: str) -> str:
        return f"node {{ name: '{name}' op: 'MyCustomOp' " + "".join(
            f"attr {{ key: '{key}' value {{ {value} }} }}" for key in order) + " }"

    for nodes in ([node("n", bad)], [node("m", good), node("n", bad)]):
        with pytest.raises(SignatureError, match=r"node 'n' \(MyCustomOp\): attribute 'a_t': tensor_content has 3 bytes"):
            _load(*nodes)


def _node(name: str, op_type: str, attrs: str, inputs: str = "") -> str:
    return f"node {{ name: '{name}' op: '{op_type}' {inputs} {attrs} }}"


_X = _node("x", "Placeholder", "attr { key: 'dtype' value { type: DT_FLOAT } }")


@pytest.mark.parametrize("good, bad, message", [
    ("attr { key: 'T' value { type: DT_FLOAT } } attr { key: 'ksize' value { list { i: [1, 2, 2, 1] } } }"
     " attr { key: 'strides' value { list { i: [1, 1, 1, 1] } } } attr { key: 'padding' value { s: 'SAME' } }",
     "attr { key: 'T' value { type: DT_FLOAT } } attr { key: 'ksize' value { list { i: [1, 2, 2, 1] } } }"
     " attr { key: 'strides' value { list { i: [1, 1, 1, 1] } } } attr { key: 'padding' value { s: 'ODD' } }",
     "attribute 'padding' is 'ODD', allowed: EXPLICIT, SAME, VALID"),
    ("attr { key: 'T' value { type: DT_FLOAT } } attr { key: 'ksize' value { list { i: [1, 2, 2, 1] } } }"
     " attr { key: 'strides' value { list { i: [1, 1, 1, 1] } } } attr { key: 'padding' value { s: 'SAME' } }",
     "attr { key: 'T' value { type: DT_BOOL } } attr { key: 'ksize' value { list { i: [1, 2, 2, 1] } } }"
     " attr { key: 'strides' value { list { i: [1, 1, 1, 1] } } } attr { key: 'padding' value { s: 'SAME' } }",
     "attribute 'T' is bool, allowed:"),
])
def test_an_op_differing_from_one_that_passed_in_a_scalar_attribute_is_checked(good, bad, message):
    """Scalar attributes enter the check's key by kind and value: a different value is a different key."""
    _load(_X, _node("a", "MaxPool", good, "input: 'x'"))
    with pytest.raises(SignatureError, match=rf"node 'b' \(MaxPool\): {message}"):
        _load(_X, _node("a", "MaxPool", good, "input: 'x'"), _node("b", "MaxPool", bad, "input: 'x'"))


def test_an_int_below_its_minimum_fails_after_an_equal_op_with_a_valid_int():
    ok = "attr { key: 'T' value { type: DT_FLOAT } } attr { key: 'N' value { i: 2 } }"
    low = "attr { key: 'T' value { type: DT_FLOAT } } attr { key: 'N' value { i: 0 } }"
    with pytest.raises(SignatureError, match=r"node 'b' \(AddN\): attribute 'N' is 0, less than its minimum 1"):
        _load(_X, _node("a", "AddN", ok, "input: 'x' input: 'x'"), _node("b", "AddN", low))


@pytest.mark.parametrize("text, expected", [
    ("type: DT_INT8", DType.INT8),
    ("type: 1234", RawAttr(attr_value_pb2.AttrValue(type=1234).SerializeToString())),
    ("s: 'SAME'", "SAME"),
    ("s: '\\377'", b"\xff"),
    ("i: -3", -3),
    ("f: 0.5", 0.5),
    ("b: true", True),
    ("shape { dim { size: 2 } dim { size: -1 } }", Shape((2, None))),
    ("list { i: [1, 2] }", (1, 2)),
    ("list { }", ()),
    ("placeholder: 'T'", PlaceholderAttr("T")),
    ("func { name: 'f' attr { key: 'k' value { i: 1 } } }", FuncAttr("f", {"k": 1})),
    ("", RawAttr(b"")),
])
def test_every_attribute_kind_decodes_through_the_table(text, expected):
    assert decode_attr(text_format.Parse(text, attr_value_pb2.AttrValue())) == expected
