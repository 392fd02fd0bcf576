"""TensorFlow op signatures, from a snapshot of TF's own registry.

GraphDef does not say how many outputs a node has or of what type; the op's
definition does.  `tools/gen_op_registry.py` snapshots every OpDef of a
TensorFlow release into `data/tf_op_list.pb.gz`; this module answers the
questions the IR needs from it without importing TensorFlow.
"""
from __future__ import annotations

import functools
import gzip
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional

from compiler.ir.dtypes import DTYPE_BY_NUMBER, DType
from compiler.ir.shapes import Shape, UNKNOWN_SHAPE

_DATA = Path(__file__).resolve().parent / "data" / "tf_op_list.pb.gz"


@functools.lru_cache(maxsize=1)
def _registry() -> dict[str, Any]:
    from compiler.proto import op_def_pb2

    ops = op_def_pb2.OpList.FromString(gzip.decompress(_DATA.read_bytes()))
    return {op.name: op for op in ops.op}


def op_def(op_type: str) -> Optional[Any]:
    """The OpDef message for `op_type`, or None for ops TF does not register."""
    return _registry().get(op_type)


def known_op_types() -> list[str]:
    return sorted(_registry())


def is_stateful(op_type: str) -> bool:
    found = op_def(op_type)
    return bool(found and found.is_stateful)


@functools.lru_cache(maxsize=None)
def attr_defaults(op_type: str) -> dict[str, Any]:
    """Attribute name -> decoded default value, for attributes that have one."""
    from compiler.proto.codec import decode_attr

    found = op_def(op_type)
    if found is None:
        return {}
    return {a.name: decode_attr(a.default_value) for a in found.attr if a.HasField("default_value")}


def attr_default_sources(op_type: str) -> dict[str, Any]:
    """Attribute name -> the default's AttrValue message (for exact re-emission)."""
    found = op_def(op_type)
    if found is None:
        return {}
    return {a.name: a.default_value for a in found.attr if a.HasField("default_value")}


# More results than any real op has: a corrupt count, refused before a list that size is built.
MAX_RESULTS = 1 << 16

_MISSING = object()


@dataclass(frozen=True)
class _OutputArg:
    """One output_arg of an OpDef, read out of its message once."""

    type: Optional[DType]  # a fixed type, or None when an attribute gives it
    type_attr: str
    number_attr: str
    type_list_attr: str


@dataclass(frozen=True)
class _ResultPlan:
    """An op type's output args with what every node of the type asks of its OpDef, answered
    from protobuf once."""

    args: tuple[_OutputArg, ...]
    defaults: Mapping[str, Any]  # `attr_defaults` of the op type
    one_each: bool               # every arg is one result (none has a number_attr or type_list_attr)


@functools.lru_cache(maxsize=4096)  # bounded: a graph may name any number of unregistered op types
def _result_plan(op_type: str) -> Optional[_ResultPlan]:
    """None for an op type TF does not register."""
    found = op_def(op_type)
    if found is None:
        return None
    args = tuple(_OutputArg(DType(arg.type) if arg.type else None, arg.type_attr, arg.number_attr,
                            arg.type_list_attr) for arg in found.output_arg)
    one_each = not any(arg.number_attr or arg.type_list_attr for arg in args)
    return _ResultPlan(args, attr_defaults(op_type), one_each)


def attr_or_default(attrs: Mapping[str, Any], defaults: Mapping[str, Any], name: str, missing: Any = None) -> Any:
    """The node's value of `name`, else the OpDef's default (`defaults`, from `attr_defaults`), else `missing`."""
    value = attrs.get(name, _MISSING)
    return defaults.get(name, missing) if value is _MISSING else value


# The op types whose first result's shape an attribute states (besides `_output_shapes`).
_SHAPE_STATING = frozenset(("Const", "Placeholder", "PlaceholderWithDefault"))


def infer_result_types(op_type: str, attrs: Mapping[str, Any]) -> list[tuple[Optional[DType], Shape]]:
    """Result (dtype, shape) list derived from the OpDef; unknown ops get one untyped result.

    Shapes come only from what the op states outright (`_output_shapes`,
    a Const's value, a Placeholder's shape); everything else is unknown.
    """
    plan = _result_plan(op_type)
    dtypes: list[Optional[DType]]
    if plan is None:
        dtypes = [None]
    elif plan.one_each:  # nearly every op: one dtype per arg, `_arg_dtype` inline (passes create many ops)
        get, defaults = attrs.get, plan.defaults
        dtypes = []
        for arg in plan.args:
            dtype = arg.type
            if dtype is None:
                dtype = get(arg.type_attr, _MISSING)
                if dtype is _MISSING:
                    dtype = defaults.get(arg.type_attr)
                if not isinstance(dtype, DType):
                    dtype = None
            dtypes.append(dtype)
    else:
        dtypes = []
        for arg in plan.args:
            dtypes.extend(_arg_types(arg, attrs, plan.defaults))
    stated = attrs.get("_output_shapes", _MISSING)
    if stated is _MISSING and op_type not in _SHAPE_STATING:  # nearly every op again: all shapes unknown
        return [(dtype, UNKNOWN_SHAPE) for dtype in dtypes]
    return list(zip(dtypes, _stated_shapes(op_type, attrs, stated, len(dtypes))))


def lowered_result_types(op_type: str, attrs: Mapping[str, Any],
                         sources: Mapping[str, Any]) -> list[tuple[Optional[DType], Shape]]:
    """`infer_result_types` of an op just lowered, whose attributes are all still `sources`
    (AttrValue messages).  Nearly every op's results are typed by fixed types and type
    attributes, and state no shapes: those are looked up by the attributes' type numbers,
    without decoding them (a Const decodes its value, for its shape).  Any other op, or a
    type attribute of another kind, takes the long way."""
    names = None if "_output_shapes" in sources else _type_attrs(op_type)
    if names is not None and (op_type == "Const" or op_type not in _SHAPE_STATING):
        if len(names) == 1:  # most ops (T, or a Const's dtype): no list built for one number
            numbers: tuple = (_type_number(sources, names[0]),)
        else:
            numbers = tuple([_type_number(sources, name) for name in names])
        if _MISSING not in numbers:
            types = list(_typed_results(op_type, numbers))
            if op_type == "Const":
                value = attrs.get("value", _MISSING)  # decoded, and refused, as the long way does
                if hasattr(value, "shape"):
                    types[0] = (types[0][0], _known_shape(tuple(value.shape)))
            return types
    return infer_result_types(op_type, attrs)


def _type_number(sources: Mapping[str, Any], name: str) -> Any:
    """The type enum number a `type` attribute holds, None when the op leaves it out (its default
    applies), _MISSING for an attribute of another kind."""
    source = sources.get(name)
    if source is None:
        return None
    return source.type if source.WhichOneof("value") == "type" else _MISSING


@functools.lru_cache(maxsize=4096)
def _type_attrs(op_type: str) -> Optional[tuple[str, ...]]:
    """The type attributes typing an op type's results, when each output arg is one result of a
    fixed type or of such an attribute; else None (unregistered, lists, counts)."""
    plan = _result_plan(op_type)
    if plan is None or not plan.one_each:
        return None
    return tuple(dict.fromkeys(arg.type_attr for arg in plan.args if arg.type is None))


@functools.lru_cache(maxsize=4096)
def _typed_results(op_type: str, numbers: tuple[Optional[int], ...]) -> tuple[tuple[Optional[DType], Shape], ...]:
    """What `infer_result_types` gives an op of a `_type_attrs` type whose type attributes hold these
    numbers (None: left out) and that states no shapes.  Bounded: a corrupt graph may hold any number."""
    plan = _result_plan(op_type)
    if plan is None:
        return ((None, UNKNOWN_SHAPE),)
    names = _type_attrs(op_type) or ()
    decoded = {name: DTYPE_BY_NUMBER.get(number) for name, number in zip(names, numbers) if number is not None}
    return tuple([(_arg_dtype(arg, decoded, plan.defaults), UNKNOWN_SHAPE) for arg in plan.args])


def _arg_dtype(arg: _OutputArg, attrs: Mapping[str, Any], defaults: Mapping[str, Any]) -> Optional[DType]:
    """The dtype of each result of an arg that is not a type list: fixed, or its type attribute's."""
    dtype = arg.type if arg.type is not None else attr_or_default(attrs, defaults, arg.type_attr)
    return dtype if isinstance(dtype, DType) else None


def _arg_types(arg: _OutputArg, attrs: Mapping[str, Any], defaults: Mapping[str, Any]) -> list[Optional[DType]]:
    if arg.type_list_attr:
        types = attr_or_default(attrs, defaults, arg.type_list_attr)
        return [t if isinstance(t, DType) else None for t in types] if isinstance(types, tuple) else []
    dtype = _arg_dtype(arg, attrs, defaults)
    if arg.number_attr:
        count = attr_or_default(attrs, defaults, arg.number_attr)
        if isinstance(count, int) and count > MAX_RESULTS:
            raise ValueError(f"attribute '{arg.number_attr}' asks for {count} results (at most {MAX_RESULTS})")
        return [dtype] * count if isinstance(count, int) else []
    return [dtype]


def _stated_shapes(op_type: str, attrs: Mapping[str, Any], stated: Any, count: int) -> list[Shape]:
    """Result shapes from `stated` (the `_output_shapes` value, if any) and the op's own attributes."""
    shapes = [UNKNOWN_SHAPE] * count
    if isinstance(stated, tuple):
        for i, s in enumerate(stated[:count]):
            if isinstance(s, Shape):
                shapes[i] = s
    if count and op_type == "Const":
        value = attrs.get("value", _MISSING)
        if value is not _MISSING:
            shapes[0] = _known_shape(tuple(value.shape)) if hasattr(value, "shape") else UNKNOWN_SHAPE
    elif count and op_type in ("Placeholder", "PlaceholderWithDefault") and isinstance(attrs.get("shape"), Shape):
        shapes[0] = attrs["shape"]
    return shapes


@functools.lru_cache(maxsize=4096)
def _known_shape(dims: tuple[int, ...]) -> Shape:
    """One Shape per distinct constant shape (shapes are immutable; weights repeat a few shapes)."""
    return Shape(dims)
