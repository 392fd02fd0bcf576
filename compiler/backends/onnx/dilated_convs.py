"""TF's spelling of a dilated convolution, as one dilated ONNX Conv.

TF's CPU depthwise kernel has no dilations, so `tf.nn.convolution` (every
dilated Keras Conv1D, Conv2D, Conv3D, DepthwiseConv2D and SeparableConv2D)
emits SpaceToBatchND -> VALID, stride-1 conv -> BatchToSpaceND.  Lowered op by op
that is two Pad/Reshape/Transpose chains around the conv; ONNX's Conv has
dilations, so the three ops become one conv with `dilations = block_shape`.

Why the padding is exact: SpaceToBatchND pads the input by (p0, p1) per
spatial axis and splits it into block-strided grids; a VALID conv on each grid
and BatchToSpaceND's interleave compute, at output position j, the dilated
conv of the padded input at j.  BatchToSpaceND then crops (c0, c1), which is
the dilated conv with padding (p0 - c0, p1 - c1); that needs c <= p, which
TF's own padding computation always gives.

TF's Conv3D has no explicit padding, so a 3-D chain that pads becomes a zero
Pad before the dilated conv, which the ONNX Conv then absorbs.  A BiasAdd
between the conv and BatchToSpaceND (where GTT's fold_old_batch_norms puts a
folded batch norm's offset) moves after the fused conv: it is per channel, and
the interleave and crop leave each channel's values to that channel.  The fused
conv takes the BatchToSpaceND's name.  `export_rewrites` runs
this on the exporter's own copy of the graph.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Collection, Optional

import numpy as np

from compiler.analysis import analyze
from compiler.analysis.order import reachable_ops, topological_order
from compiler.backends.onnx.shape_terms import difference, terms
from compiler.ir.attrs import attr_text
from compiler.ir.dtypes import DType
from compiler.ir.graph import Graph, IRError, Op, Value
from compiler.ir.shapes import UNKNOWN_SHAPE
from compiler.rewrite.constants import const_array
from compiler.rewrite.edit import add_const

_CONVS = ("Conv2D", "DepthwiseConv2dNative", "Conv3D")


@dataclass(frozen=True)
class DilatedConv:
    """One SpaceToBatchND -> conv -> BatchToSpaceND chain and the padding of the equivalent dilated
    conv.  A Conv1D's chain reshuffles a 3-D tensor and wraps the conv in ExpandDims/Squeeze (the
    height axis TF adds): then `expand`/`squeeze` are those ops and the block is (1, rate)."""

    space_to_batch: Op
    conv: Op
    batch_to_space: Op
    block: tuple[int, ...]                 # one rate per spatial axis of the conv
    pads: tuple[tuple[int, int], ...]
    expand: Optional[Op] = None
    squeeze: Optional[Op] = None
    bias: Optional[Op] = None


def find_dilated_convs(graph: Graph, named: Collection[str] = ()) -> list[DilatedConv]:
    """Every chain that fuses; `named` ops (the caller's inputs and outputs) must stay visible,
    except the BatchToSpaceND, whose name the fused result takes over."""
    found = []
    for op in graph:
        if op.type == "BatchToSpaceND":
            match = _match(op, named)
            if match is not None:
                found.append(match)
    return found


def _match(b2s: Op, named: Collection[str]) -> Optional[DilatedConv]:
    if len(b2s.operands) != 3 or b2s.control_deps:
        return None
    bias = b2s.operands[0].op if _channels_last_bias(b2s.operands[0].op) else None
    inner = bias.operands[0] if bias is not None else b2s.operands[0]
    squeeze = inner.op if inner.op.type == "Squeeze" else None
    conv = (squeeze.operands[0] if squeeze is not None else inner).op
    if conv.type not in _CONVS or len(conv.operands) != 2 or not _plain_valid(conv):
        return None
    expand = conv.operands[0].op if squeeze is not None else None
    if expand is not None and (expand.type != "ExpandDims" or not _height_axis(expand, squeeze)):
        return None
    s2b = (expand.operands[0] if expand is not None else conv.operands[0]).op
    chain = [op for op in (s2b, expand, conv, squeeze, bias) if op is not None]
    if s2b.type != "SpaceToBatchND" or len(s2b.operands) != 3:
        return None
    if any(op.name in named or op.control_deps or op.control_users for op in chain):
        return None
    # The reshuffle into the conv may be shared (CSE merges the identical SpaceToBatchND/ExpandDims of
    # two dilated convs on one input, as in WaveNet's gated units); the conv on must be this chain's own.
    tail = [op for op in (conv, squeeze, bias) if op is not None]
    if not all(_only_use(op, user) for op, user in zip(tail, tail[1:] + [b2s])):
        return None
    spatial = 3 if conv.type == "Conv3D" else 2
    found = _block_and_pads(s2b, b2s, 1 if expand is not None else spatial)
    if found is None:
        return None
    block, left = found
    if expand is not None:  # the 1-D chain's one spatial axis is the conv's width
        block, left = np.concatenate([[1], block]), np.concatenate([[[0, 0]], left])
    return DilatedConv(s2b, conv, b2s, tuple(int(b) for b in block),
                       tuple((int(low), int(high)) for low, high in left), expand, squeeze, bias)


def _channels_last_bias(op: Op) -> bool:
    return op.type == "BiasAdd" and len(op.operands) == 2 and attr_text(op.attr("data_format", "NHWC")) == "NHWC"


def _block_and_pads(s2b: Op, b2s: Op, spatial: int) -> Optional[tuple[np.ndarray, np.ndarray]]:
    """The block shape both ops use and the padding left after the crops (pads - crops, never < 0)."""
    block, block_again = const_array(s2b.operands[1]), const_array(b2s.operands[1])
    if block is None or block_again is None:
        return None
    if block.shape != (spatial,) or not np.array_equal(block, block_again) or (block < 1).any():
        return None
    pads, crops = const_array(s2b.operands[2]), const_array(b2s.operands[2])
    if pads is None or crops is None:
        left = _run_time_pads_less_crops(s2b, b2s, spatial)
        return None if left is None else (block, left)
    if pads.shape != (spatial, 2) or crops.shape != (spatial, 2) or (crops < 0).any() or (crops > pads).any():
        return None
    return block, pads - crops


def _run_time_pads_less_crops(s2b: Op, b2s: Op, spatial: int) -> Optional[np.ndarray]:
    """pads - crops when both are computed at run time (TF's required_space_to_batch_paddings for
    unknown sizes pads the end by the amount that makes the size divisible, and crops it off
    again): read element by element, that amount cancels and the base padding is left."""
    values = [s2b.operands[2], b2s.operands[2]]
    try:
        info = analyze(topological_order(s2b.graph, reachable_ops(values)))
    except IRError:  # a cycle (TF1 loop)
        return None
    pads, crops = (terms(info, value) for value in values)
    if pads is None or crops is None or len(pads) != 2 * spatial or len(crops) != 2 * spatial:
        return None
    left = [difference(p, c) for p, c in zip(pads, crops)]
    if any(not isinstance(d, int) or d < 0 for d in left):
        return None
    return np.asarray(left, np.int64).reshape(spatial, 2)


def _height_axis(expand: Op, squeeze: Op) -> bool:
    """ExpandDims adds, and Squeeze removes, the height axis (1 of NHWC) around a Conv1D's conv."""
    axis = const_array(expand.operands[1]) if len(expand.operands) == 2 else None
    dims = [int(d) for d in squeeze.attr("squeeze_dims", ())]
    return axis is not None and axis.size == 1 and int(axis.reshape(())) in (1, -3) and dims in ([1], [-3])


def _plain_valid(conv: Op) -> bool:
    """Channels last, VALID, stride 1, no dilation: the conv TF puts between the two reshuffles."""
    volume = conv.type == "Conv3D"
    ones, layout = ([1] * 5, "NDHWC") if volume else ([1] * 4, "NHWC")
    return (attr_text(conv.attr("data_format", layout)) == layout and attr_text(conv.attr("padding")) == "VALID"
            and list(conv.attr("strides", ones)) == ones and list(conv.attr("dilations", ones)) == ones)


def _only_use(producer: Op, user: Op) -> bool:
    uses = producer.results[0].uses
    return len(uses) == 1 and uses[0][0] is user and all(not v.uses for v in producer.results[1:])


def fuse_found(graph: Graph, matches: list[DilatedConv], named: Collection[str] = ()) -> None:
    """Fuse the chains `find_dilated_convs` found in `graph`, in place."""
    for match in matches:
        _fuse(graph, match)


def _fuse(graph: Graph, match: DilatedConv) -> None:
    conv, b2s = match.conv, match.batch_to_space
    attrs = conv.attrs.copy()
    attrs["dilations"] = [1, *match.block, 1]
    name = b2s.name
    source = match.space_to_batch.operands[0]
    padded = any(low or high for low, high in match.pads)
    if padded and conv.type == "Conv3D":
        source = _zero_pad(graph, match, source, b2s)
    elif padded:
        attrs["padding"] = "EXPLICIT"
        attrs["explicit_paddings"] = [0, 0, *[p for pair in match.pads for p in pair], 0, 0]
    if match.expand is not None:
        source = _copy(graph, match.expand, [source, match.expand.operands[1]], b2s).results[0]
    fused = graph.create_op(conv.type, graph.unique_name(f"{name}/dilated"), [source, conv.operands[1]], attrs,
                            result_types=[(b2s.results[0].dtype, UNKNOWN_SHAPE if match.squeeze else
                                           b2s.results[0].shape)], device=conv.device, before=b2s)
    last = fused if match.squeeze is None else _copy(graph, match.squeeze, [fused.results[0]], b2s)
    if match.bias is not None:
        last = _copy(graph, match.bias, [last.results[0], match.bias.operands[1]], b2s)
    b2s.results[0].replace_all_uses_with(last.results[0])
    b2s.hand_control_users_to(last)
    graph.erase_ops([op for op in (b2s, match.bias, match.squeeze, conv) if op is not None])
    for shared in (match.expand, match.space_to_batch):  # in this order: the first reads the second
        if shared is not None and not any(value.uses for value in shared.results):
            graph.erase_op(shared)
    graph.rename(last, name)


def _zero_pad(graph: Graph, match: DilatedConv, source: Value, before: Op) -> Value:
    """A Pad of the spatial axes by the chain's padding (Conv3D has no explicit padding)."""
    amounts = np.asarray([(0, 0), *match.pads, (0, 0)], np.int64)
    base = f"{match.batch_to_space.name}/dilated_pad"
    paddings = add_const(graph, f"{base}/paddings", amounts, DType.INT64, before, device=match.conv.device)
    pad = graph.create_op("Pad", graph.unique_name(base), [source, paddings],
                          attrs={"T": source.dtype, "Tpaddings": DType.INT64}, device=match.conv.device, before=before)
    return pad.results[0]


def _copy(graph: Graph, op: Op, operands: list, before: Op) -> Op:
    """`op` again on new operands (its result shape is re-derived: the chain's sizes change)."""
    return graph.create_op(op.type, graph.unique_name(f"{op.name}/dilated"), operands, op.attrs.copy(),
                           device=op.device, before=before)
