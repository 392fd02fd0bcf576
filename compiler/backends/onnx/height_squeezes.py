"""Keras' 1-D layers kept four-dimensional from one layer to the next, so they export as 2-D windows.

TF has no 1-D conv or pool: Keras adds a unit height axis (ExpandDims),
runs the 2-D op, and removes the axis again (Squeeze), around every layer.
This rewrite moves each such height Squeeze below the ops that read it and
do not care about the extra axis (activations, a bias, a residual sum, a
concat, a transpose, a pad, a reduction), until the next layer's ExpandDims
meets it and both go.  Consecutive 1-D layers then share one 4-D tensor and
lower like any Conv2D chain: one Unsqueeze where the chain starts, one
Squeeze where it ends, nothing between two layers.  A Pad read only by the
chain's first ExpandDims moves below it, so the conv can take the padding,
and ExpandDims repeating one of the same tensor go.  Every move is an
identity of the math whatever the data format: axis 1, of size 1, is
simply carried along.

Why 2-D rather than ONNX's own 1-D Conv: onnxruntime runs a 2-D Conv
through its blocked NCHWc kernels, which sum in the order TF's Conv2D does
(bit-identical on the layers measured) and were as fast or faster; its 1-D
Conv takes another path that rounds differently.  Usually that is a few
units in the last place, but a model whose result depends on small
differences of large sums (basic-pitch's constant-Q front end, a log of
near-zero magnitudes) turns it into a 1.8e-3 error against TF.
"""
from __future__ import annotations

from typing import Collection, Optional

import numpy as np

from compiler.backends.onnx.ops_elementwise import BINARY, UNARY
from compiler.ir.attrs import attr_text
from compiler.ir.graph import Graph, Op, Value
from compiler.rewrite.constants import const_array
from compiler.rewrite.edit import add_const, inherit_control_deps

HEIGHT = 1  # the NHWC axis Keras adds for a 1-D layer

# Ops computing each element from the same position of their operands (or, for the
# softmaxes, from the channel axis, which stays last): unchanged on a 4-D tensor.
_ELEMENTWISE = frozenset(UNARY) | frozenset(BINARY) | frozenset({
    "BiasAdd", "Relu6", "LeakyRelu", "Rsqrt", "Square", "Log1p", "Expm1", "Erfc", "Softmax", "LogSoftmax",
    "Identity", "Cast", "SquaredDifference", "NotEqual", "AddN", "ClipByValue", "SelectV2", "DivNoNan",
})
_PADS = ("Pad", "PadV2", "MirrorPad")
_REDUCTIONS = ("Mean", "Max", "Min", "Sum", "Prod")

# TF ops defined on 4-D tensors only: a Squeeze of axis -3 after one removes the height.
_FOUR_D = frozenset({"Conv2D", "DepthwiseConv2dNative", "Conv2DBackpropInput", "MaxPool", "AvgPool"})


def _removes_height(op: Op) -> bool:
    """`op` is a Squeeze of just the height axis of a 4-D tensor (TF fails it when that axis is not 1)."""
    if op.type != "Squeeze" or len(op.operands) != 1 or op.control_deps:
        return False
    return [_axis(a, 4) for a in op.attr("squeeze_dims", ())] == [HEIGHT]


def _is_height_expand(op: Op) -> bool:
    """`op` inserts axis 1 (-3): the ExpandDims before a 1-D layer when its operand is 3-D, which
    holds where it matters (a height-squeezed tensor, a Pad of [3, 2] amounts)."""
    if op.type != "ExpandDims" or len(op.operands) != 2:
        return False
    axis = const_array(op.operands[1])
    return axis is not None and axis.size == 1 and _axis(axis.reshape(()), 4) == HEIGHT


class _Squeezes:
    """The height Squeezes of a graph: those after a 1-D layer's window and those this rewrite made."""

    def __init__(self) -> None:
        self.made: set[Op] = set()

    def source(self, value: Value) -> Optional[Value]:
        """The 4-D value `value` is the height Squeeze of, if it is one."""
        op = value.op
        if op in self.made or (_removes_height(op) and op.operands[0].op.type in _FOUR_D):
            return op.operands[0]
        return None

    def movable(self, user: Op, named: Collection[str]) -> bool:
        """`user`, which reads a height Squeeze, can run on the 4-D tensors instead.  A named op
        (an output) keeps its value under its name: the Squeeze after it takes the name."""
        if len(user.results) != 1:
            return False
        if _is_height_expand(user):
            return not _named_or_tied(user, named)
        if user.type in _ELEMENTWISE:
            return self._elementwise_fits(user)
        if user.type in _PADS:
            return self.pad_amounts(user) is not None
        if user.type in _REDUCTIONS:
            return self.reduced_axes(user) is not None
        if user.type == "ConcatV2":
            return self.concat_axis(user) is not None
        if user.type == "Transpose":
            return self.permutation(user) is not None
        return False

    def _elementwise_fits(self, op: Op) -> bool:
        """Every operand is a height-squeezed tensor or a constant that broadcasts the same against
        4-D as against 3-D (rank <= 2, or 3 with a leading 1)."""
        if op.type == "BiasAdd" and attr_text(op.attr("data_format", "NHWC")) != "NHWC":
            return False
        for value in op.operands:
            array = const_array(value)
            if array is not None:
                if array.ndim > 3 or (array.ndim == 3 and array.shape[0] != 1):
                    return False
            elif self.source(value) is None:
                return False
        return True

    def pad_amounts(self, op: Op) -> Optional[np.ndarray]:
        """The Pad's constant [3, 2] amounts when it pads a height-squeezed tensor."""
        amounts = const_array(op.operands[1])
        if self.source(op.operands[0]) is None or amounts is None or amounts.shape != (3, 2):
            return None
        return amounts

    def reduced_axes(self, op: Op) -> Optional[np.ndarray]:
        """The reduction's axes (non-negative), without keep_dims, of a height-squeezed tensor."""
        axes = const_array(op.operands[1])
        if self.source(op.operands[0]) is None or axes is None or axes.size == 0 or op.attr("keep_dims", False):
            return None
        found = [_axis(a, 3) for a in axes.reshape(-1)]
        return None if None in found else np.asarray(found)

    def concat_axis(self, op: Op) -> Optional[int]:
        """The concat axis (non-negative) when every input is a height-squeezed tensor."""
        axis = const_array(op.operands[-1])
        if axis is None or axis.size != 1 or any(self.source(v) is None for v in op.operands[:-1]):
            return None
        return _axis(axis.reshape(()), 3)

    def permutation(self, op: Op) -> Optional[list[int]]:
        """The constant permutation of a height-squeezed tensor's three axes."""
        perm = const_array(op.operands[1])
        if self.source(op.operands[0]) is None or perm is None or sorted(perm.reshape(-1).tolist()) != [0, 1, 2]:
            return None
        return [int(p) for p in perm.reshape(-1)]


def find_height_squeezes(graph: Graph, named: Collection[str] = ()) -> list[Op]:
    """Height Squeezes some reader of which can take the 4-D tensor instead, Pads feeding only a
    height ExpandDims, and height ExpandDims repeating another of the same tensor."""
    squeezes = _Squeezes()
    found = [op for op in graph if op.type == "Squeeze" and squeezes.source(op.results[0]) is not None
             and any(squeezes.movable(user, named) for user in op.results[0].users)]
    expands = [op for op in graph if _is_height_expand(op)]
    return found + [op for op in expands if _hoistable_pad(op, named) is not None] + list(_twins(expands, named))


def sink_found(graph: Graph, found: list[Op], named: Collection[str] = ()) -> None:
    """Move the Squeezes `find_height_squeezes` found down until ExpandDims cancel them."""
    for op in found:
        if op.type == "ExpandDims" and op.graph is graph:
            _hoist_pad(graph, op, named)
    for twin, first in _twins([op for op in graph if _is_height_expand(op)], named).items():
        twin.results[0].replace_all_uses_with(first.results[0])
        graph.erase_op(twin)
    squeezes = _Squeezes()
    work = [op for op in found if op.type == "Squeeze"]
    while work:
        squeeze = work.pop()
        if squeeze.graph is not graph:
            continue
        for user in squeeze.results[0].users:
            if user.graph is graph and squeezes.movable(user, named):
                work.extend(_sink(graph, squeezes, user, named))
        if not squeeze.results[0].uses and not squeeze.control_users and squeeze.name not in named:
            graph.erase_op(squeeze)


def _axis(value, rank: int) -> Optional[int]:
    """An axis of a rank-`rank` tensor as a non-negative index; None when TF would refuse it
    (then nothing moves, and the export reports the op as TF would)."""
    axis = int(value)
    return axis % rank if -rank <= axis < rank else None


def _taller(axis: int) -> int:
    """A 3-D axis's place once the height axis is back."""
    return axis if axis < HEIGHT else axis + 1


def _sink(graph: Graph, squeezes: _Squeezes, user: Op, named: Collection[str]) -> list[Op]:
    """Run `user` on the 4-D tensors; returns the Squeeze now after it (none for an ExpandDims,
    which the 4-D tensor replaces, or a reduction, whose result has no height axis left)."""
    if _is_height_expand(user):
        user.results[0].replace_all_uses_with(squeezes.source(user.operands[0]))
        graph.erase_op(user)
        return []
    operands = [squeezes.source(v) or v for v in user.operands]
    if user.type in _PADS:
        amounts = np.insert(squeezes.pad_amounts(user), HEIGHT, 0, axis=0)
        operands[1] = add_const(graph, f"{user.name}/height_pad", amounts, user.operands[1].dtype, user)
    elif user.type in _REDUCTIONS:
        axes = sorted({HEIGHT, *(_taller(int(a)) for a in squeezes.reduced_axes(user))})
        operands[1] = add_const(graph, f"{user.name}/height_axes", np.asarray(axes), user.operands[1].dtype, user)
    elif user.type == "ConcatV2":
        operands[-1] = add_const(graph, f"{user.name}/height_axis", np.asarray(_taller(squeezes.concat_axis(user))),
                                 user.operands[-1].dtype, user)
    elif user.type == "Transpose":
        perm = [_taller(p) for p in squeezes.permutation(user)]
        perm.insert(HEIGHT, HEIGHT)
        operands[1] = add_const(graph, f"{user.name}/height_perm", np.asarray(perm), user.operands[1].dtype, user)
    name, keeps_name = user.name, user.name in named and user.type not in _REDUCTIONS
    tall = graph.create_op(user.type, graph.unique_name(f"{name}/4d"), operands, user.attrs.copy(),
                           device=user.device, before=user)
    if user.type in _REDUCTIONS:
        last, made = tall, []
    else:
        last = graph.create_op("Squeeze", graph.unique_name(f"{name}/height"), [tall.results[0]],
                               {"T": user.results[0].dtype, "squeeze_dims": [HEIGHT]}, device=user.device,
                               before=user)
        made = [last]
    user.results[0].replace_all_uses_with(last.results[0])
    inherit_control_deps(tall, [user])
    user.hand_control_users_to(tall)
    graph.erase_op(user)
    graph.rename(last if keeps_name else tall, name)
    squeezes.made.update(made)
    return made


def _named_or_tied(op: Op, named: Collection[str]) -> bool:
    """`op` is an output, or ordered by control edges: it stays as it is."""
    return op.name in named or bool(op.control_deps or op.control_users)


def _twins(expands: list[Op], named: Collection[str]) -> dict[Op, Op]:
    """Each ExpandDims repeating an earlier one in `expands` (same tensor, same axis), mapped to that
    earlier one: the dilated-conv rewrite gives each conv its own copy of one shared ExpandDims, and
    each would be an Unsqueeze."""
    first: dict[tuple[Value, int], Op] = {}
    twins = {}
    for op in expands:
        key = (op.operands[0], int(const_array(op.operands[1]).reshape(())))
        if key not in first:
            first[key] = op
        elif not _named_or_tied(op, named):
            twins[op] = first[key]
    return twins


def _hoistable_pad(expand: Op, named: Collection[str]) -> Optional[Op]:
    """The Pad of constant amounts that a height ExpandDims is the only reader of."""
    pad = expand.operands[0].op
    if pad.type not in _PADS or _named_or_tied(pad, named) or _named_or_tied(expand, named):
        return None
    amounts = const_array(pad.operands[1])
    if amounts is None or amounts.shape != (3, 2) or [u for u, _ in pad.results[0].uses] != [expand]:
        return None
    return pad


def _hoist_pad(graph: Graph, expand: Op, named: Collection[str]) -> None:
    """ExpandDims(Pad(x)) as Pad(ExpandDims(x)): the pad then meets the conv after it."""
    pad = _hoistable_pad(expand, named)
    if pad is None:
        return
    source = pad.operands[0]
    taller = graph.create_op("ExpandDims", graph.unique_name(f"{expand.name}/unpadded"),
                             [source, expand.operands[1]], expand.attrs.copy(), device=expand.device, before=expand)
    amounts = np.insert(const_array(pad.operands[1]), HEIGHT, 0, axis=0)
    operands = [taller.results[0], add_const(graph, f"{pad.name}/height_pad", amounts, pad.operands[1].dtype, expand),
                *pad.operands[2:]]
    padded = graph.create_op(pad.type, graph.unique_name(f"{pad.name}/4d"), operands, pad.attrs.copy(),
                             device=pad.device, before=expand)
    expand.results[0].replace_all_uses_with(padded.results[0])
    graph.erase_ops([expand, pad])
    graph.rename(padded, pad.name)
    graph.rename(taller, expand.name)

