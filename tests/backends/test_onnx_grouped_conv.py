"""Grouped Conv2D (filter input channels dividing the input's, as Keras' `Conv2D(groups=...)` emits):
ONNX Conv with `group` against gttc's interpreter, and the interpreter's kernel against TF's."""
from __future__ import annotations

import numpy as np
import pytest

from compiler.backends.onnx import UnsupportedOpError, export
from compiler.runtime.kernels import KernelError, get_kernel
from tests.backends.test_onnx_added_ops import check, integer_image
from tests.backends.test_onnx_export import Builder

# (input NHWC, filter HWIO, attributes): groups = input channels / filter input channels.
CASES = {
    "groups2_same": ((1, 7, 7, 4), (3, 3, 2, 6), {"padding": "SAME"}),
    "groups2_strided_valid": ((2, 9, 8, 6), (3, 2, 3, 4), {"padding": "VALID", "strides": [1, 2, 3, 1]}),
    "groups4_dilated_same": ((1, 9, 9, 8), (3, 3, 2, 8), {"padding": "SAME", "dilations": [1, 2, 2, 1]}),
    "groups2_explicit": ((1, 6, 7, 4), (2, 3, 2, 6), {"padding": "EXPLICIT",
                                                      "explicit_paddings": [0, 0, 1, 2, 0, 1, 0, 0]}),
    "depthwise_like": ((1, 8, 8, 6), (7, 7, 1, 6), {"padding": "SAME"}),
    "depthwise_like_multiplier_strided": ((1, 9, 9, 3), (3, 3, 1, 6), {"padding": "SAME", "strides": [1, 2, 2, 1]}),
}


def _attrs(attrs: dict) -> dict:
    return {"strides": [1, 1, 1, 1], **attrs}


def _arrays(x_shape, w_shape, seed: int = 0, exact: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Small integers make every sum exact in float32, so both sides must agree to the bit;
    TF is compared on normal samples within the kernel tests' tolerance."""
    rng = np.random.default_rng(seed)
    if exact:
        return integer_image(rng, x_shape), integer_image(rng, w_shape)
    return rng.standard_normal(x_shape).astype(np.float32), rng.standard_normal(w_shape).astype(np.float32)


def _conv(x_shape, w_shape, attrs: dict, data_format: str = "NHWC"):
    b = Builder()
    x, w = _arrays(x_shape, w_shape)
    if data_format == "NCHW":
        x = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
        attrs = {k: ([v[0], v[3], v[1], v[2]] if k in ("strides", "dilations") else v) for k, v in attrs.items()}
    y = b("Conv2D", b.input("x", list(x.shape)), b.const(w), data_format=data_format, **attrs)
    return b, {"x": x}, y


@pytest.mark.parametrize("case", sorted(CASES))
def test_grouped_conv_lowers_to_conv_with_group(case: str):
    x_shape, w_shape, attrs = CASES[case]
    b, feeds, y = _conv(x_shape, w_shape, _attrs(attrs))
    counts = check(b, feeds, [y])
    assert counts["Conv"] == 1
    model = export(b.graph, ["x"], [y.name])
    conv = next(n for n in model.graph.node if n.op_type == "Conv")
    group = next(a.i for a in conv.attribute if a.name == "group")
    assert group == x_shape[3] // w_shape[2]


def test_grouped_conv_in_nchw():
    b, feeds, y = _conv((1, 7, 7, 4), (3, 3, 2, 6), _attrs({"padding": "SAME", "strides": [1, 2, 2, 1]}), "NCHW")
    assert check(b, feeds, [y])["Conv"] == 1


@pytest.mark.parametrize("x_shape, w_shape", [((1, 5, 5, 5), (3, 3, 2, 4)), ((1, 5, 5, 4), (3, 3, 2, 5))],
                         ids=["input_not_a_multiple", "outputs_not_divisible"])
def test_a_filter_that_does_not_fit_is_refused_by_both(x_shape, w_shape):
    b, feeds, y = _conv(x_shape, w_shape, _attrs({"padding": "SAME"}))
    with pytest.raises(UnsupportedOpError, match=r"'Conv2D' \(node 'conv2d'\).*does not fit the filter"):
        export(b.graph, ["x"], [y.name])
    with pytest.raises(KernelError, match="incompatible with filter"):
        get_kernel("Conv2D")({"strides": [1, 1, 1, 1], "padding": "SAME"}, list(_arrays(x_shape, w_shape)))


@pytest.mark.tf
@pytest.mark.parametrize("case", sorted(CASES))
def test_runtime_grouped_conv_matches_tf(case: str):
    pytest.importorskip("tensorflow")
    from tests.runtime.test_kernels import check as check_against_tf

    x_shape, w_shape, attrs = CASES[case]
    x, w = _arrays(x_shape, w_shape, seed=1, exact=False)
    check_against_tf("Conv2D", {"input": x, "filter": w}, _attrs(attrs))
