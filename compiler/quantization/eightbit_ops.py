"""Which float ops quantize_nodes can turn into eight-bit ops, and how.

`EIGHTBIT_OPS` is GTT's table (TensorFlow 2.21, quantize_nodes.cc): for each
float op, the attributes copied onto its `Quantized*` twin, the dtype
attributes set there, whether the twin returns 32-bit results that need
requantizing, which inputs stay in float (shapes, sizes, axes) and whether
the min/max inputs come as (min0, max0, min1, max1) or (min0, min1, max0, max1).

`kernel_problem` answers a question GTT never asks: would TensorFlow's
quantized kernel compute the same thing as the float op?  GTT converts some
ops it cannot express (NCHW layouts, dilations, explicit padding) and some
that the kernels reject or miscompute at run time (QuantizedMul/Add
broadcasts other than scalar or innermost vector); quantize_nodes leaves
those in float and says why.  `attribute_fixes` lists the two attributes
GTT forgets although the quantized op supports them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence

from compiler.ir import op_registry
from compiler.ir.attrs import attr_text
from compiler.ir.dtypes import DType
from compiler.ir.graph import Op
from compiler.ir.shapes import Shape
from compiler.rewrite.constants import const_array


@dataclass(frozen=True)
class EightBitOp:
    """How one float op type becomes its quantized equivalent."""

    float_type: str
    copied_attrs: tuple[str, ...]
    set_dtypes: tuple[tuple[str, DType], ...]
    wide_output: bool                      # qint32 results: RequantizationRange + Requantize follow
    float_inputs: frozenset[int] = frozenset()  # inputs passed through unquantized
    separate_min_max: bool = False         # mins of all inputs, then maxes (Concat)

    @property
    def quantized_type(self) -> str:
        return "Quantized" + self.float_type


_Q8, _Q32 = DType.QUINT8, DType.QINT32
_BINARY = (("T1", _Q8), ("T2", _Q8), ("Toutput", _Q32))

EIGHTBIT_OPS: dict[str, EightBitOp] = {info.float_type: info for info in (
    EightBitOp("Add", (), _BINARY, True),
    EightBitOp("AvgPool", ("ksize", "strides", "padding"), (("T", _Q8),), False),
    EightBitOp("BiasAdd", (), (("T1", _Q8), ("T2", _Q8), ("out_type", _Q32)), True),
    EightBitOp("Concat", ("N",), (("T", _Q8),), False, frozenset({0}), separate_min_max=True),
    EightBitOp("Conv2D", ("strides", "padding"), (("Tinput", _Q8), ("Tfilter", _Q8), ("out_type", _Q32)), True),
    EightBitOp("MatMul", ("transpose_a", "transpose_b"), _BINARY, True),
    EightBitOp("MaxPool", ("ksize", "strides", "padding"), (("T", _Q8),), False),
    EightBitOp("Mul", (), _BINARY, True),
    EightBitOp("Relu", (), (("Tinput", _Q8),), False),
    EightBitOp("ResizeBilinear", ("align_corners",), (("T", _Q8),), False, frozenset({1})),
    EightBitOp("Relu6", (), (("Tinput", _Q8),), False),
    EightBitOp("Reshape", (), (("T", _Q8),), False, frozenset({1})),
)}


# -- op signatures ----------------------------------------------------------------


def declared_types(op: Op, outputs: bool) -> Optional[list[Optional[DType]]]:
    """The op's input (or output) dtypes as its definition and attributes give them (GTT's GetInOutTypes).

    None when TensorFlow does not know the op type.
    """
    found = op_registry.op_def(op.type)
    if found is None:
        return None
    defaults = op_registry.attr_defaults(op.type)
    types: list[Optional[DType]] = []
    for arg in (found.output_arg if outputs else found.input_arg):
        types.extend(_arg_types(arg, op, defaults))
    return types


def _arg_types(arg: Any, op: Op, defaults: dict[str, Any]) -> list[Optional[DType]]:
    def lookup(name: str) -> Any:
        return op.attrs[name] if name in op.attrs else defaults.get(name)

    if arg.type_list_attr:
        listed = lookup(arg.type_list_attr)
        return [t if isinstance(t, DType) else None for t in listed] if isinstance(listed, tuple) else [None]
    dtype = DType(arg.type) if arg.type else lookup(arg.type_attr)
    dtype = dtype if isinstance(dtype, DType) else None
    if arg.number_attr:
        count = lookup(arg.number_attr)
        return [dtype] * count if isinstance(count, int) else [None]
    return [dtype]


def non_float_reason(op: Op, info: EightBitOp) -> Optional[str]:
    """Why GTT's all-float check keeps `op` in float, or None when every quantized input and output is float."""
    inputs, outputs = declared_types(op, False), declared_types(op, True)
    if inputs is None or outputs is None:
        return "TensorFlow does not know the op, so its dtypes are unknown"
    for i, dtype in enumerate(inputs):
        if i not in info.float_inputs and dtype != DType.FLOAT:
            return f"input {i} is {_type_name(dtype)}, not float"
    for i, dtype in enumerate(outputs):
        if dtype != DType.FLOAT:
            return f"output {i} is {_type_name(dtype)}, not float"
    return None


def _type_name(dtype: Optional[DType]) -> str:
    return "of unknown type" if dtype is None else dtype.tf_name


# -- what TensorFlow's quantized kernels cannot do ------------------------------------


def kernel_problem(op: Op, shapes: Sequence[Shape]) -> Optional[str]:
    """Why the quantized kernel would not compute what `op` computes, or None.

    `shapes` are the static shapes of the op's operands (unknown ones pass).
    """
    check = _CHECKS.get(op.type)
    return check(op, shapes) if check is not None else None


def _nhwc_only(op: Op, _shapes: Sequence[Shape]) -> Optional[str]:
    layout = attr_text(op.attr("data_format", "NHWC"))
    if layout != "NHWC":
        return f"data_format={layout}; {EIGHTBIT_OPS[op.type].quantized_type} computes NHWC only"
    return None


def _conv2d(op: Op, shapes: Sequence[Shape]) -> Optional[str]:
    found = _nhwc_only(op, shapes)
    if found is not None:
        return found
    dilations = tuple(op.attr("dilations", (1, 1, 1, 1)))
    if any(d != 1 for d in dilations):
        return f"dilations={list(dilations)}; GTT's QuantizedConv2D would drop them"
    padding = attr_text(op.attr("padding", ""))
    if padding not in ("SAME", "VALID"):
        return f"padding={padding}; QuantizedConv2D takes SAME or VALID only"
    strides = tuple(op.attr("strides", (1, 1, 1, 1)))
    for axis in (1, 2):
        if _window_starts_inside(shapes, axis, int(strides[axis]) if len(strides) == 4 else 1, padding):
            return (f"{padding} windows with stride {strides[axis]}: QuantizedConv2D would start them inside "
                    "the input, where Conv2D pads")
    return None


def _window_starts_inside(shapes: Sequence[Shape], axis: int, stride: int, padding: str) -> bool:
    """Whether QuantizedConv2D's first window along spatial `axis` starts inside the input.

    It places windows at (extent [+ 1 for VALID]) / 2 with C division, where
    extent = (out - 1) * stride + kernel - size; Conv2D never starts inside.  A
    negative extent trips that: SAME at extent <= -2, VALID at extent <= -3.
    With unknown sizes, strides above kernel + 1 (SAME) or 3 (VALID) may.
    """
    size = shapes[0].dims[axis] if len(shapes) > 0 and shapes[0].dims is not None else None
    kernel = shapes[1].dims[axis - 1] if len(shapes) > 1 and shapes[1].dims is not None else None
    if kernel is None:
        return stride > 3
    if size is None:
        return stride > (kernel + 1 if padding == "SAME" else 3)
    out = -(-size // stride) if padding == "SAME" else (size - kernel + stride) // stride
    extent = (out - 1) * stride + kernel - size
    return extent <= (-2 if padding == "SAME" else -3)


def _concat_axis(op: Op, _shapes: Sequence[Shape]) -> Optional[str]:
    """QuantizedConcat rejects a negative concat_dim at run time (Keras writes axis -1)."""
    axis = const_array(op.operands[0]) if op.operands else None
    if axis is not None and axis.size == 1 and int(axis.reshape(-1)[0]) < 0:
        return f"concat_dim={int(axis.reshape(-1)[0])}; QuantizedConcat rejects negative axes at run time"
    return None


def _broadcast(op: Op, shapes: Sequence[Shape]) -> Optional[str]:
    if len(shapes) != 2 or not all(s.is_fully_defined for s in shapes):
        return None
    x, y = (tuple(s.dims) for s in shapes)  # type: ignore[arg-type]
    runs = _broadcast_runs(x, y)
    if runs is None:
        return f"shapes {list(x)} and {list(y)} do not broadcast"
    if _kernel_broadcasts(runs):
        return None
    return (f"broadcasting {list(x)} with {list(y)}: {EIGHTBIT_OPS[op.type].quantized_type} only handles a "
            "scalar or a vector along the innermost dimensions")


def _broadcast_runs(x: tuple[int, ...], y: tuple[int, ...]) -> Optional[list[str]]:
    """TensorFlow's BCast grouping: one entry per run of dims that broadcast alike, outermost first.

    'same' runs broadcast neither side, 'x' runs broadcast x, 'y' runs
    broadcast y; dims of size 1 on both sides are dropped.  None if the
    shapes are incompatible.
    """
    rank = max(len(x), len(y))
    xs = (1,) * (rank - len(x)) + x
    ys = (1,) * (rank - len(y)) + y
    runs: list[str] = []
    for a, b in zip(xs, ys):
        if a == b:
            if a == 1:
                continue
            state = "same"
        elif a == 1:
            state = "x"
        elif b == 1:
            state = "y"
        else:
            return None
        if not runs or runs[-1] != state:
            runs.append(state)
    return runs


def _kernel_broadcasts(runs: list[str]) -> bool:
    """Whether QuantizedMul/QuantizedAdd compute this broadcast right.

    One run is an elementwise or scalar case.  With two runs the kernels
    repeat the smaller operand over the larger one's flat elements, which
    is right only when the smaller operand is broadcast over the outer run
    and matches the inner one.  Three or more runs fail at run time.
    """
    if len(runs) <= 1:
        return True
    return len(runs) == 2 and runs[1] == "same"



_CHECKS = {
    "Conv2D": _conv2d,
    "AvgPool": _nhwc_only,
    "MaxPool": _nhwc_only,
    "BiasAdd": _nhwc_only,
    "Mul": _broadcast,
    "Add": _broadcast,
    "Concat": _concat_axis,
}


def attribute_fixes(op: Op) -> dict[str, Any]:
    """Attributes the quantized op supports but GTT does not copy, when their values matter.

    GTT's QuantizedResizeBilinear loses `half_pixel_centers=true` (TF2's
    default resize), and its QuantizedReshape falls back to an int32 shape
    input; copying the attribute keeps those ops eight-bit and correct.
    """
    if op.type == "ResizeBilinear" and op.attr("half_pixel_centers", False):
        return {"half_pixel_centers": True}
    if op.type == "Reshape" and op.attr("Tshape", DType.INT32) != DType.INT32:
        return {"Tshape": op.attrs["Tshape"]}
    return {}


__all__ = [
    "EIGHTBIT_OPS", "EightBitOp", "attribute_fixes", "declared_types", "kernel_problem", "non_float_reason",
]
