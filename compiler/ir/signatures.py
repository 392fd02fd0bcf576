"""Check every op against its TensorFlow OpDef, as TensorFlow's graph importer does.

A GraphDef that TensorFlow itself would refuse to import must not get into
the IR: a pass or a backend would meet an op with the wrong number of
operands, an attribute of the wrong kind or a constant whose bytes do not
fit its shape, far from where the damage is.  `check_signatures` runs once
after lowering and names the first offending node in a one-line error.

Checked, for ops TF registers and calls of library functions:
- attributes: present unless defaulted, of the declared kind, in the
  allowed set, at least the declared minimum.  Unlike TF, attributes the
  OpDef does not declare are kept: GTT's rename_attribute makes them and no
  pass, backend or kernel reads them;
- operands: the count the OpDef's input arguments give (list arguments
  included), and each operand's dtype where both sides are known;
- results: exactly the count of the OpDef's output arguments;
- function attributes naming a function the library holds;
- tensor attributes: a TF dtype, non-negative dimensions, and a byte length
  (or value count) that fits the shape; checked on the encoding, so the
  elements stay undecoded.

Ops TF does not register (custom ops) pass unchecked, as they do in GTT.
"""
from __future__ import annotations

import functools
import math
import operator
from dataclasses import dataclass
from typing import Any, Mapping, NoReturn, Optional

from compiler.errors import InputError
from compiler.ir.attrs import FuncAttr, PlaceholderAttr, RawAttr
from compiler.ir.dtypes import DTYPE_BY_NUMBER, DType
from compiler.ir.graph import EncodedTensorAttr, Graph, Op
from compiler.ir.op_registry import attr_defaults, attr_or_default, op_def
from compiler.ir.shapes import Shape
from compiler.ir.tensor import Tensor
from compiler.proto.codec import tensor_dims


class SignatureError(InputError):
    """An op that does not match its OpDef (exit code 2, like any bad model file)."""


# -- what an OpDef asks for, digested once per op type -------------------------------------------

@dataclass(frozen=True)
class ArgSpec:
    """One input or output argument: how many values it stands for and of which type."""

    name: str
    dtype: Optional[int]          # a fixed type (DataType number), or None
    type_attr: str                # ... or the attribute naming its type
    number_attr: str              # repeated this many times
    type_list_attr: str           # or one value per type in this list


@dataclass(frozen=True)
class AttrSpec:
    name: str
    kind: str                     # "int", "list(type)", ...
    has_default: bool
    allowed: frozenset            # allowed types (numbers) or strings; empty: anything
    minimum: Optional[int]
    oneof: str = ""               # the AttrValue field holding such a value ("list" for every list kind)
    plain: bool = False           # that field alone makes a value valid (no allowed set, minimum, types)

    @staticmethod
    def of(attr: Any) -> "AttrSpec":
        allowed = frozenset(attr.allowed_values.list.type) | frozenset(attr.allowed_values.list.s)
        minimum = attr.minimum if attr.has_minimum else None
        oneof = "list" if attr.type.startswith("list(") else _SPEC_ONEOF.get(attr.type, "")
        plain = not allowed and minimum is None and oneof not in ("type", "list")
        return AttrSpec(attr.name, attr.type, attr.HasField("default_value"), allowed, minimum, oneof, plain)


@dataclass(frozen=True)
class Signature:
    inputs: tuple[ArgSpec, ...]
    outputs: tuple[ArgSpec, ...]
    attrs: Mapping[str, AttrSpec]
    check_attrs: bool             # False for function calls: their attrs instantiate the body
    fixed_outputs: Optional[int]  # the result count when no attribute decides it


def _digest(opdef: Any, check_attrs: bool = True) -> Signature:
    def arg(a: Any) -> ArgSpec:
        return ArgSpec(a.name, a.type or None, a.type_attr, a.number_attr, a.type_list_attr)

    attrs = {a.name: AttrSpec.of(a) for a in opdef.attr}
    outputs = tuple(map(arg, opdef.output_arg))
    fixed = None if any(a.number_attr or a.type_list_attr for a in outputs) else len(outputs)
    return Signature(tuple(map(arg, opdef.input_arg)), outputs, attrs, check_attrs, fixed)


@functools.lru_cache(maxsize=None)
def registered_signature(op_type: str) -> Optional[Signature]:
    found = op_def(op_type)
    return None if found is None else _digest(found)


def _library_signatures(library: Any) -> dict[str, Signature]:
    if library is None:
        return {}
    return {f.signature.name: _digest(f.signature, check_attrs=False) for f in library.function}


# -- the check --------------------------------------------------------------------------------------

def check_signatures(graph: Graph, where: str = "<graph>", library: Any = None) -> None:
    """Raise SignatureError naming the first op that TF's importer would refuse.

    `library` is the function library calls resolve in (default: the graph's own).
    """
    functions = _library_signatures(graph.extras.library if library is None else library)
    encodings = graph.extras.tensor_encodings
    passed: set[tuple] = set()
    for op in graph:
        key, tensors = _check_key(op)
        if key is not None and key in passed:
            if tensors:  # all that can differ from the op that passed: check it as the full check would
                _OpCheck(op, where, functions, encodings).tensors(tensors)
            continue
        signature = functions.get(op.type) or registered_signature(op.type)
        _OpCheck(op, where, functions, encodings).run(signature)
        if key is not None:
            passed.add(key)


def _check_key(op: Op) -> tuple[Optional[tuple], list[tuple[str, Any]]]:
    """Everything the check of `op` reads but its tensor attributes' contents, as a hashable key
    (None once a pass assigned an attribute), and those tensors (name, AttrValue) in name order.

    The check is a function of the op type, its attributes, its operands' dtypes and its result
    count (in one graph, whose function library is fixed), so an op equal to one that passed in
    all of these passes too; a graph repeats the same few ops thousands of times.  A tensor
    attribute enters the key by its kind alone: its bytes are the weights, and the only checks
    that read them (`_OpCheck.tensors`) are run for every op.  Attributes enter in the map's
    order, by their plain serialization: equal bytes still mean equal attributes, and equal
    attributes listed or serialized in another order (maps parsed alike iterate alike) only
    cost a check.  A scalar attribute (a type, string, int, float, bool or placeholder) enters
    by its kind and value instead, all the check reads of it, without serializing it."""
    sources = op.attrs.unassigned_sources()
    if sources is None:
        return None, []
    attrs: list[tuple] = []
    tensors: list[tuple[str, Any]] = []
    for name, source in sources.items():
        kind = source.WhichOneof("value")
        if kind in _SCALAR_KINDS:
            attrs.append((name, kind, getattr(source, kind)))
        elif kind == "tensor":
            attrs.append((name, None))
            tensors.append((name, source))
        else:
            attrs.append((name, source.SerializeToString()))
    if len(tensors) > 1:
        tensors.sort(key=operator.itemgetter(0))  # the full check's order: the same error comes first
    return (op.type, tuple(attrs), tuple([value.dtype for value in op._operands]), len(op.results)), tensors


# AttrValue kinds whose one field is the whole value: a key holds it as read, not serialized.
_SCALAR_KINDS = frozenset(("type", "s", "i", "f", "b", "placeholder"))


class _OpCheck:
    def __init__(self, op: Op, where: str, functions: Mapping[str, Signature],
                 encodings: Mapping[int, EncodedTensorAttr]) -> None:
        self.op = op
        self.where = where
        self.functions = functions
        self.encodings = encodings  # large tensors' encodings in the input: their sizes without copies

    def fail(self, message: str) -> NoReturn:
        raise SignatureError(f"{self.where}: node '{self.op.name}' ({self.op.type}): {message}")

    def run(self, signature: Optional[Signature]) -> None:
        """Every attribute once (encoded or assigned), then operands and results."""
        specs = signature.attrs if signature is not None and signature.check_attrs else None
        encoded, assigned = self.op.attrs.encodings()
        for name in sorted(encoded):  # in name order, so the first error named is always the same one
            self.encoded_attr(name, encoded[name], specs)
        for name in sorted(assigned):
            self.assigned_attr(name, assigned[name], specs)
        if signature is None:
            return
        if specs is not None:
            for spec in specs.values():
                if not spec.has_default and spec.name not in encoded and spec.name not in assigned:
                    self.fail(f"missing attribute '{spec.name}' ({spec.kind})")
        self.operands(signature)
        self.results(signature)

    # attributes --------------------------------------------------------------------------------
    @staticmethod
    def spec(name: str, specs: Optional[Mapping[str, AttrSpec]]) -> Optional[AttrSpec]:
        """The definition of a known attribute; attributes the OpDef does not know are left alone
        (GTT's rename_attribute makes them, and nothing reads them)."""
        return None if specs is None else specs.get(name)

    def encoded_attr(self, name: str, source: Any, specs: Optional[Mapping[str, AttrSpec]]) -> None:
        kind = source.WhichOneof("value")
        if kind in _NESTED_KINDS:
            self.nested(name, kind, source)
        spec = self.spec(name, specs)
        if spec is None or kind == "placeholder":
            return
        if kind == spec.oneof:
            if spec.plain:
                return
            if kind == "type" and source.type in (spec.allowed or _TYPE_NUMBERS):
                return
        elif not spec.kind.startswith("list("):
            self.fail(f"attribute '{name}' is {_say_kind(_source_kind(source))}, the op wants {spec.kind}")
        kind_name = _source_kind(source) if kind == "list" else _ONEOF_KIND.get(kind, "nothing")
        self.value(spec, kind_name, self.op.attrs[name])

    def nested(self, name: str, kind: str, source: Any) -> None:
        """Tensors and function references inside an attribute."""
        if kind == "tensor":
            self.tensor_attr(name, source)
        elif kind == "func":
            self.function(name, source.func.name)
        else:
            for tensor in source.list.tensor:
                self.tensor_proto(name, tensor)
            for func in source.list.func:
                self.function(name, func.name)

    def assigned_attr(self, name: str, value: Any, specs: Optional[Mapping[str, AttrSpec]]) -> None:
        for item in value if isinstance(value, tuple) else (value,):
            if isinstance(item, FuncAttr):
                self.function(name, item.name)
        spec = self.spec(name, specs)
        if spec is not None:
            self.value(spec, _value_kind(value), value)

    def value(self, spec: AttrSpec, kind: str, value: Any) -> None:
        """A decoded value against its spec: kind, allowed types or strings, minimum."""
        if kind == "placeholder":
            return
        if kind != spec.kind and not (kind == "list()" and spec.kind.startswith("list(")):
            self.fail(f"attribute '{spec.name}' is {_say_kind(kind)}, the op wants {spec.kind}")
        items = value if isinstance(value, tuple) else (value,)
        if spec.kind in ("type", "list(type)"):
            self.check_types(spec, items)
        elif spec.allowed and spec.kind in ("string", "list(string)"):
            for item in items:
                if (item.encode() if isinstance(item, str) else item) not in spec.allowed:
                    self.fail(f"attribute '{spec.name}' is {item!r}, allowed: {_say_allowed(spec)}")
        if spec.minimum is not None:
            size = len(value) if isinstance(value, tuple) else value
            if isinstance(size, int) and size < spec.minimum:
                what = "has length" if isinstance(value, tuple) else "is"
                self.fail(f"attribute '{spec.name}' {what} {size}, less than its minimum {spec.minimum}")

    def check_types(self, spec: AttrSpec, items: tuple) -> None:
        for item in items:
            if not isinstance(item, DType) or item == DType.INVALID:
                self.fail(f"attribute '{spec.name}' holds {_say_type(item)}, which is not a TensorFlow data type")
            if spec.allowed and int(item) not in spec.allowed:
                self.fail(f"attribute '{spec.name}' is {item.tf_name}, allowed: {_say_allowed(spec)}")

    # operands and results --------------------------------------------------------------------------
    def arg_values(self, arg: ArgSpec) -> tuple[int, Any]:
        """How many values an argument stands for, and their dtype (a tuple of them for a type list).
        An attribute the node leaves out has its OpDef default, as TF's importer reads it (ExpandDims
        without `Tdim` takes an int32 `dim`)."""
        attrs, defaults = self.op.attrs, attr_defaults(self.op.type)
        if arg.type_list_attr:
            types = attr_or_default(attrs, defaults, arg.type_list_attr, ())
            if not isinstance(types, tuple):
                self.fail(f"attribute '{arg.type_list_attr}' is not a list of types")
            return len(types), tuple(t if isinstance(t, DType) else None for t in types)
        fixed = DTYPE_BY_NUMBER.get(arg.dtype)
        dtype = fixed if fixed is not None else attr_or_default(attrs, defaults, arg.type_attr)
        dtype = dtype if isinstance(dtype, DType) else None
        if not arg.number_attr:
            return 1, dtype
        count = attr_or_default(attrs, defaults, arg.number_attr)
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            self.fail(f"attribute '{arg.number_attr}' is not a count")
        return count, dtype

    def count(self, args: tuple[ArgSpec, ...]) -> int:
        return sum(self.arg_values(arg)[0] for arg in args)

    def operands(self, signature: Signature) -> None:
        got = self.op._operands
        expected = self.count(signature.inputs)
        if len(got) != expected:
            names = ", ".join(arg.name for arg in signature.inputs) or "none"
            self.fail(f"has {len(got)} data inputs, its definition takes {expected} ({names})")
        i = 0
        for arg in signature.inputs:
            count, dtype = self.arg_values(arg)
            for k in range(count):
                want = dtype[k] if isinstance(dtype, tuple) else dtype
                value = got[i]
                if want is not None and value.dtype is not None and value.dtype != want:
                    self.fail(f"input {i} ('{arg.name}') is {value.dtype.tf_name} from '{value.name}', "
                              f"the op wants {want.tf_name}")
                i += 1

    def results(self, signature: Signature) -> None:
        if signature.fixed_outputs is not None:
            count = signature.fixed_outputs
        else:
            count = self.count(signature.outputs)
        if len(self.op.results) != count:
            self.fail(f"has {len(self.op.results)} results, its definition gives {count}")

    # tensors and functions -------------------------------------------------------------------------
    def function(self, attr: str, name: str) -> None:
        if name not in self.functions and registered_signature(name) is None:
            self.fail(f"attribute '{attr}' names function '{name}', which is not in the graph's library")

    def tensors(self, tensors: list[tuple[str, Any]]) -> None:
        """The checks of `tensor_attr` for each (attribute name, AttrValue), in order."""
        for name, source in tensors:
            self.tensor_attr(name, source)

    def tensor_attr(self, attr: str, source: Any) -> None:
        """`tensor_proto` on a tensor AttrValue, measuring a large tensor from its encoding.  A Const's
        value was decoded at load (for its result's shape): its dtype and dims are read from that."""
        known = self.encodings.get(id(source))
        proto = source.tensor
        decoded = self.op.attrs.cached(attr)
        if not (isinstance(decoded, Tensor) and decoded.source is proto):
            decoded = None
        self.tensor_proto(attr, proto, None if known is None else known.content_size, decoded)

    def tensor_proto(self, attr: str, proto: Any, content_size: Optional[int] = None,
                     decoded: Optional[Tensor] = None) -> None:
        problem = tensor_encoding_problem(proto, content_size, decoded)
        if problem:
            self.fail(f"attribute '{attr}': {problem}")
        if self.op.type == "Const" and attr == "value":
            declared = self.declared_type("dtype")
            number = proto.dtype if decoded is None else int(decoded.dtype)
            if declared is not None and int(declared) != number:
                self.fail(f"value is {DType(number).tf_name} but attribute 'dtype' says {declared.tf_name}")

    def declared_type(self, name: str) -> Optional[DType]:
        """The type attribute `name` holds, None for anything else; read from its encoding while
        untouched, as decoding it would give (every Const asks, and the load decodes none)."""
        source = self.op.attrs.source(name)
        if source is None:
            value = self.op.attrs.get(name)
            return value if isinstance(value, DType) else None
        return DTYPE_BY_NUMBER.get(source.type) if source.WhichOneof("value") == "type" else None


# -- tensor encodings ---------------------------------------------------------------------------------

# Fields that may carry a tensor's values, and how many numbers make one element.
_VALUE_WIDTHS = {"float_val": 1, "double_val": 1, "int_val": 1, "int64_val": 1, "bool_val": 1, "string_val": 1,
                 "half_val": 1, "uint32_val": 1, "uint64_val": 1, "scomplex_val": 2, "dcomplex_val": 2,
                 "float8_val": 1}
_OPAQUE = (DType.RESOURCE, DType.VARIANT)
# Types whose elements are packed below a byte; their tensor_content length is not itemsize * count.
_SUB_BYTE = (DType.INT4, DType.UINT4, DType.INT2, DType.UINT2)
# Bytes per element of every type whose tensor_content length is checked (a dict, not
# `to_numpy()` per tensor: a graph has thousands of constants).
_ITEMSIZE = {dtype: dtype.to_numpy().itemsize for dtype in DType
             if dtype not in (DType.INVALID, DType.STRING, *_OPAQUE, *_SUB_BYTE)}


def tensor_encoding_problem(proto: Any, content_size: Optional[int] = None, decoded: Optional[Tensor] = None) -> str:
    """Why a TensorProto cannot be the tensor its dtype and shape say, or "" when it can;
    `content_size` is len(proto.tensor_content) when the caller knows it (reading it copies), and
    `decoded` the Tensor `decode_tensor` made of `proto`, if any: it holds the dtype and dims read
    from it, and its decoding refused an unknown dtype number and negative dims."""
    if decoded is not None:
        dtype, dims = decoded.dtype, list(decoded.shape)
    else:
        dtype = DTYPE_BY_NUMBER.get(proto.dtype, DType.INVALID)
        dims = list(tensor_dims(proto))
    if dtype == DType.INVALID:
        return f"tensor has dtype enum {proto.dtype}, which is not a TensorFlow data type"
    if dims and min(dims) < 0:
        return f"tensor has a negative dimension in shape {dims}"
    if dtype in _OPAQUE:
        return ""
    count = math.prod(dims)
    content = len(proto.tensor_content) if content_size is None else content_size
    if content and dtype != DType.STRING:
        if dtype in _SUB_BYTE:
            return ""
        expected = count * _ITEMSIZE[dtype]
        if content != expected:
            return (f"tensor_content has {content} bytes, a {dtype.tf_name} tensor of shape {dims} "
                    f"needs {expected}")
        return ""
    values = _value_count(proto)
    if values > count:
        return f"tensor holds {values} values, its shape {dims} has {count} elements"
    return ""


def _value_count(proto: Any) -> int:
    """How many elements a TensorProto's value fields spell out; ListFields names only the fields
    present, cheaper than asking for each of the twelve."""
    values = 0
    for field, value in proto.ListFields():
        width = _VALUE_WIDTHS.get(field.name)
        if width:
            values += len(value) // width
    return values


# -- how kinds are spelled ----------------------------------------------------------------------------

_ONEOF_KIND = {"s": "string", "i": "int", "f": "float", "b": "bool", "type": "type", "shape": "shape",
               "tensor": "tensor", "func": "func", "placeholder": "placeholder"}
_SPEC_ONEOF = {kind: field for field, kind in _ONEOF_KIND.items()}
_NESTED_KINDS = ("tensor", "list", "func")
_TYPE_NUMBERS = frozenset(int(t) for t in DType if t != DType.INVALID)
_LIST_FIELDS = (("s", "string"), ("i", "int"), ("f", "float"), ("b", "bool"), ("type", "type"),
                ("shape", "shape"), ("tensor", "tensor"), ("func", "func"))


def _source_kind(proto: Any) -> str:
    """The OpDef attr type an AttrValue encodes: "int", "list(type)", "list()" for an empty list..."""
    kind = proto.WhichOneof("value")
    if kind == "list":
        present = [name for field, name in _LIST_FIELDS if len(getattr(proto.list, field))]
        if not present:
            return "list()"
        return f"list({present[0]})" if len(present) == 1 else "a mixed list"
    return _ONEOF_KIND.get(kind, "nothing")


def _value_kind(value: Any) -> str:
    """The same for a decoded (or pass-assigned) attribute value."""
    if isinstance(value, tuple):
        kinds = {_value_kind(v) for v in value}
        if not kinds:
            return "list()"
        return f"list({kinds.pop()})" if len(kinds) == 1 else "a mixed list"
    for cls, kind in ((bool, "bool"), (DType, "type"), (int, "int"), (float, "float"), ((str, bytes), "string"),
                      (Shape, "shape"), (Tensor, "tensor"), (FuncAttr, "func"), (PlaceholderAttr, "placeholder")):
        if isinstance(value, cls):
            return kind
    return "nothing" if isinstance(value, RawAttr) else type(value).__name__


def _say_kind(kind: str) -> str:
    return {"nothing": "empty", "list()": "an empty list"}.get(kind, f"a {kind}" if "list" in kind else
                                                              f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}")


def _say_type(item: Any) -> str:
    if isinstance(item, RawAttr):
        return "an unknown type enum"
    return item.tf_name if isinstance(item, DType) else repr(item)


def _say_allowed(spec: AttrSpec) -> str:
    if spec.kind in ("type", "list(type)"):
        names = sorted(DType(t).tf_name for t in spec.allowed if t in DTYPE_BY_NUMBER)
    else:
        names = sorted(s.decode(errors="replace") for s in spec.allowed)
    return ", ".join(names)
