"""Unsupported-op errors name the nearest supported alternative, and only a real one."""
from __future__ import annotations

import pytest

from compiler.backends.onnx import UnsupportedOpError, export_with_report
from compiler.backends.onnx.alternatives import nearest_alternative
from tests.backends.test_onnx_export import Builder

LOWERED = {"NonMaxSuppressionV3", "NonMaxSuppressionV4", "While", "Const", "Identity", "Cumsum", "TopKV2"}


@pytest.mark.parametrize("op_type, expected", [
    ("NonMaxSuppressionV5", "NonMaxSuppressionV4 (another version of this op)"),
    ("StatelessWhile", "While (another version of this op)"),
    ("TopK", "TopKV2 (another version of this op)"),
    ("VarHandleOp", "freeze the variables first"),
    ("StatefulPartitionedCall", "inline function calls first"),
    ("RaggedTensorToVariant", "RaggedTensor.to_tensor() before tf.map_fn"),
    ("ImageProjectiveTransformV3", "export the model without them"),
])
def test_alternatives(op_type: str, expected: str) -> None:
    assert expected in nearest_alternative(op_type, LOWERED)


@pytest.mark.parametrize("op_type", ["Cumprod", "PyFunc", "NonMaxSuppression"])
def test_no_alternative_for_ops_that_only_look_alike(op_type: str) -> None:
    # Cumprod is not Cumsum; with no NonMaxSuppressionV<n> lowered, the V1 op has no relative.
    lowered = LOWERED - {"NonMaxSuppressionV3", "NonMaxSuppressionV4"}
    assert nearest_alternative(op_type, lowered) is None


def test_an_op_named_as_the_way_out_must_itself_be_lowered() -> None:
    assert nearest_alternative("VarHandleOp", {"Identity"}) is None


def test_export_error_carries_the_alternative() -> None:
    b = Builder()
    x = b.input("x", [2, 3])
    out = b("TopK", x, k=2, sorted=True)[0]
    with pytest.raises(UnsupportedOpError) as err:
        export_with_report(b.graph, ["x"], [out.name])
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("cannot export op type 'TopK' (node 'topk') to ONNX: no lowering for this op type")
    assert message.endswith("; nearest supported alternative: TopKV2 (another version of this op)")
