"""What one op's lowering sees: its operands as ONNX tensors, static facts, and emission helpers.

The context maps each TF value to the ONNX tensor holding it and that
tensor's layout (see `layout.py`).  Constants are never lowered eagerly:
they become initializers when, and in the layout in which, a consumer asks.
Main nodes take the TF node's name and produce tensors named after its
results; helper nodes get the TF name plus a suffix, so every ONNX node
traces back to the TF node it came from.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import numpy as np

from compiler.analysis import StaticInfo
from compiler.backends.onnx import layout
from compiler.backends.onnx.builder import GraphBuilder, ModelScope, ValueSpec
from compiler.backends.onnx.dtypes import onnx_type
from compiler.backends.onnx.errors import OnnxExportError
from compiler.backends.onnx.layout import Perm
from compiler.ir.dtypes import DType
from compiler.ir.graph import Op, Value
from compiler.ir.shapes import Shape


# ONNX ops whose output is their input's elements in the same order, only the shape changed.
_SAME_ORDER = frozenset({"Reshape", "Squeeze", "Unsqueeze", "Flatten"})
# A constant-filled tensor up to this many elements is an initializer; a larger one is a
# ConstantOfShape node, so the file does not carry it.
INITIALIZER_ELEMENTS = 4096


@dataclass(frozen=True)
class Lowered:
    """The ONNX tensor holding a TF value, and the layout it is stored in."""

    tensor: str
    perm: Perm = None


class LoweringContext:
    """Bindings from TF values to ONNX tensors for one graph (or function body) being lowered."""

    def __init__(self, builder: GraphBuilder, info: StaticInfo, library: Any = None, prefix: str = "",
                 stats: Optional[Counter] = None) -> None:
        self.builder = builder
        self.info = info
        self.library = library
        self.prefix = prefix
        self.stats: Counter = Counter() if stats is None else stats
        self._bound: dict[Value, Lowered] = {}
        # Values whose tensor must stay their own (graph outputs, function results).
        self.keep: set[Value] = set()
        # The layout readers want each value in (see layout.preferred_layouts).
        self.preferred: dict[Value, Perm] = {}
        self._constants: dict[tuple[Value, Perm], str] = {}
        self._converted: dict[tuple[str, Perm, Perm], str] = {}
        # The type and stored shape of each tensor bound to a value or converted from one, for
        # peepholes on the finished graph (value_info holds only what was annotated).
        self.described: dict[str, ValueSpec] = {}
        # Narrow integer tensors (TF's int32 indices, sizes) cast from an int64 one whose values fit.
        self._wide: dict[str, str] = {}

    @property
    def scope(self) -> ModelScope:
        return self.builder.scope

    @property
    def opset(self) -> int:
        return self.builder.scope.opset

    def child(self, builder: GraphBuilder, info: StaticInfo, prefix: str) -> "LoweringContext":
        """A context for a function body, sharing names, initializers and statistics."""
        return LoweringContext(builder, info, self.library, prefix, self.stats)

    # -- static facts ----------------------------------------------------------
    def shape(self, value: Value) -> Shape:
        return self.info.shape(value)

    def rank(self, value: Value) -> Optional[int]:
        return self.info.rank(value)

    def dtype(self, value: Value) -> Optional[DType]:
        return self.info.dtype(value)

    def constant(self, value: Value) -> Optional[np.ndarray]:
        return self.info.constant(value)

    def is_constant(self, value: Value) -> bool:
        return self.info.is_constant(value)

    def is_read(self, value: Value) -> bool:
        """Whether an op or the graph's outputs read `value`."""
        return bool(value.uses) or value in self.keep

    def const_operand(self, op: Op, index: int, what: str) -> np.ndarray:
        """Operand `index`, which this lowering needs at compile time."""
        found = self.constant(op.operands[index])
        if found is None:
            raise OnnxExportError(f"node '{op.name}' ({op.type}): {what} must be a constant to export to ONNX")
        return found

    # -- values ------------------------------------------------------------------
    def bind(self, value: Value, tensor: str, perm: Perm = None, describe: bool = True) -> None:
        """Record that `tensor` (stored in layout `perm`) holds `value`, and describe it unless
        `describe` is false (the tensor holds the value in another type, e.g. dequantized)."""
        self._bound[value] = Lowered(tensor, perm)
        if not describe:
            return
        spec = self._describe(value, tensor, perm)
        if spec is not None and self.builder.producer(tensor) is not None and tensor not in self.builder.value_info:
            self.builder.annotate(spec)

    def _describe(self, value: Value, tensor: str, perm: Perm) -> Optional[ValueSpec]:
        """Record `tensor`'s type and stored shape, holding `value` in layout `perm`."""
        elem = onnx_type(self.dtype(value))
        if not elem:
            return None
        dims = self.shape(value).dims
        spec = ValueSpec(tensor, elem, None if dims is None else layout.physical_dims(dims, perm))
        self.described.setdefault(tensor, spec)
        return spec

    def bind_constant_tensor(self, value: Value, tensor: str) -> None:
        """A constant that already has a tensor (a function argument fed from outside)."""
        self._constants[(value, None)] = tensor

    def is_bound(self, value: Value) -> bool:
        return value in self._bound

    def lowered(self, value: Value) -> Lowered:
        """The value as lowered so far; constants materialize in TF layout."""
        found = self._bound.get(value)
        if found is not None:
            return found
        if self.is_constant(value):
            return Lowered(self.constant_tensor(value, None))
        raise OnnxExportError(f"internal: value '{value.name}' ({value.op.type}) was used before it was lowered")

    def value_in(self, value: Value, perm: Perm = None) -> str:
        """The value stored in layout `perm`, converting (once) if needed."""
        if value not in self._bound and self.is_constant(value):
            return self.constant_tensor(value, perm)
        found = self.lowered(value)
        if found.perm == perm:
            return found.tensor
        key = (found.tensor, found.perm, perm)
        if key not in self._converted:
            dims = self.shape(value).dims
            if dims is None:
                raise OnnxExportError(f"value '{value.name}' needs a layout change but its rank is unknown")
            for wanted in (found.perm, perm):
                if wanted is not None and len(wanted) != len(dims):
                    raise OnnxExportError(f"value '{value.name}' has rank {len(dims)}, but a lowering "
                                          f"stores or reads it in a rank-{len(wanted)} layout")
            self._converted[key] = layout.convert(self, found.tensor, found.perm, perm, dims)
            self._describe(value, self._converted[key], perm)
        return self._converted[key]

    def narrowed(self, narrow: str, wide: str) -> str:
        """Record that `narrow` is int64 `wide` cast to a narrower integer type without loss (an
        index or size TF declares int32), so a reader wanting int64 takes `wide` instead of a
        second Cast.  Returns `narrow`."""
        self._wide[narrow] = wide
        return narrow

    def wide_source(self, tensor: str) -> Optional[str]:
        """The int64 tensor `tensor` was cast from without loss, if any."""
        return self._wide.get(tensor)

    def operand(self, op: Op, index: int, perm: Perm = None) -> str:
        return self.value_in(op.operands[index], perm)

    def agnostic_operand(self, op: Op, index: int = 0) -> Lowered:
        """An operand of a layout-agnostic op: as stored, or converted up front when it is in
        TF order and the op's result is wanted in another layout."""
        value = op.operands[index]
        found = self.lowered(value)
        wanted = self.wanted(op.results[0])
        if found.perm is None and wanted is not None and self.rank(value) == len(wanted) and not self.is_constant(value):
            return Lowered(self.value_in(value, wanted), wanted)
        return found

    def wanted(self, value: Value) -> Perm:
        """The layout the readers of `value` prefer (None: TF order or no preference)."""
        return self.preferred.get(value)

    def has_preference(self, value: Value) -> bool:
        """Whether the readers of `value` prefer a layout, TF order included."""
        return value in self.preferred

    def layout_vote(self, value: Value) -> Perm:
        """The layout an operand asks a layout-agnostic op to compute in: the one it is stored in,
        or, stored in TF order, the one its readers want it in (converted once for all of them)."""
        stored = self.lowered(value).perm
        return stored if stored is not None else self.preferred.get(value)

    def constant_tensor(self, value: Value, perm: Perm) -> str:
        """An initializer holding a constant value in layout `perm`."""
        key = (value, perm)
        if key not in self._constants:
            array = self.constant(value)
            if array is None:
                raise OnnxExportError(f"constant '{value.name}' has no readable elements")
            base = self.prefix + value.name + ("" if perm is None else "/" + "".join(map(str, perm)))
            self._constants[key] = self.scope.initializer(layout.to_physical(array, perm), base, exact=perm is None)
        return self._constants[key]

    # -- emission ----------------------------------------------------------------
    def emit(self, op: Op, op_type: str, inputs: Sequence[str], outputs: int = 1, **attrs: Any) -> list[str]:
        """The main node of TF op `op`: named after it, producing tensors named after its results."""
        names = [self.scope.tensors.claim(self.prefix + v.name) for v in op.results[:outputs]]
        node_name = self.scope.nodes.claim(self.prefix + op.name)
        self.builder.add_node(op_type, inputs, names, node_name, attrs)
        return names

    def emit1(self, op: Op, op_type: str, inputs: Sequence[str], **attrs: Any) -> str:
        return self.emit(op, op_type, inputs, 1, **attrs)[0]

    def helper(self, op: Op, suffix: str, op_type: str, inputs: Sequence[str], outputs: int = 1,
               **attrs: Any) -> list[str]:
        """A helper node for TF op `op`, named `<op>/<suffix>`."""
        return self.node(op_type, inputs, f"{self.prefix}{op.name}/{suffix}", outputs, **attrs)

    def helper1(self, op: Op, suffix: str, op_type: str, inputs: Sequence[str], **attrs: Any) -> str:
        return self.helper(op, suffix, op_type, inputs, 1, **attrs)[0]

    def node(self, op_type: str, inputs: Sequence[str], base: str, outputs: int = 1, **attrs: Any) -> list[str]:
        """A node and its output tensors, all named fresh from `base`."""
        names = [self.scope.tensors.fresh(base if outputs == 1 else f"{base}_{i}") for i in range(outputs)]
        self.builder.add_node(op_type, inputs, names, self.scope.nodes.fresh(base), attrs)
        return names

    def initializer(self, array: np.ndarray, base: str) -> str:
        return self.scope.initializer(np.asarray(array), self.prefix + base)

    def ints(self, values: Sequence[int], base: str) -> str:
        """A 1-D int64 initializer (ONNX's type for shapes, axes, pads)."""
        return self.initializer(np.asarray(list(values), np.int64), base)

    def scalar(self, value: Any, dtype: Optional[DType], base: str) -> str:
        np_type = dtype.to_numpy() if dtype is not None else np.float32
        return self.initializer(np.asarray(value, np_type), base)

    def reshape_source(self, tensor: str) -> str:
        """What a Reshape of `tensor` may read instead: the input of the Reshapes, Squeezes and
        Unsqueezes producing it, which only relabel the same elements in the same order (a global
        pool's Squeeze then Keras' reshape back to [N, 1, 1, C] is one Reshape)."""
        producer = self.builder.producer(tensor)
        while producer is not None and producer.op_type in _SAME_ORDER:
            tensor = producer.inputs[0]
            producer = self.builder.producer(tensor)
        return tensor

    def unsqueeze(self, tensor: str, axes: Sequence[int], rank_after: int, base: str) -> str:
        """`tensor` with size-1 axes inserted at `axes` (of the rank-`rank_after` result), or the
        tensor a Squeeze of those same axes made it from (a shrunk slice stacked again)."""
        producer = self.builder.producer(tensor)
        if producer is not None and producer.op_type == "Squeeze" and len(producer.inputs) == 2:
            removed = self.scope.initializers.get(producer.inputs[1])
            if removed is not None and sorted(int(a) % rank_after for a in removed.reshape(-1)) == sorted(
                    a % rank_after for a in axes):
                return producer.inputs[0]
        return self.node("Unsqueeze", [tensor, self.ints(list(axes), f"{base}/axes")], self.prefix + base)[0]

    def reshape(self, tensor: str, shape: str, base: str) -> str:
        """`tensor` reshaped to the constant `shape`: no node when its reshape source is already
        declared with that shape (a global pool's output read back as [N, C, 1, 1])."""
        source = self.reshape_source(tensor)
        if self._declared_with_shape(source, shape):
            return source
        return self.node("Reshape", [source, shape], base)[0]

    def _declared_with_shape(self, tensor: str, shape: str) -> bool:
        target = self.scope.initializers.get(shape)
        spec = self.builder.value_info.get(tensor)
        if target is None or spec is None or spec.dims is None or target.ndim != 1 or len(spec.dims) != target.size:
            return False
        wanted = target.tolist()
        if wanted.count(-1) > 1:
            return False
        return all(w == -1 or (w > 0 and isinstance(d, int) and d == w) for w, d in zip(wanted, spec.dims))
