"""An inference batch norm after a reshaped matmul, folded into the matmul's weights.

A Keras Dense on a sequence ([batch, tokens, features]) freezes as Reshape ->
MatMul -> Reshape; when a BatchNormalization follows (LeViT, EfficientFormer),
its FusedBatchNorm reads the second Reshape, so -O2's fold_old_batch_norms (which
folds only a batch norm reading the matmul itself, as GTT does) leaves it.  In
ONNX it stays a BatchNormalization after a Gemm, which onnxruntime does not fuse
(it fuses one after a MatMul): LeViT-128S spent 11% of its latency there.

The reshape keeps the matmul's columns on its last axis when that axis has the
matmul's width (element (m, j) lands at flat index m * C + j), and a
channels-last batch norm scales and shifts exactly that axis.  So the scale goes
into the weight columns and the shift becomes a BiasAdd before the Reshape, as
fold_old_batch_norms does for a batch norm on the matmul's own result.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Collection, Optional

import numpy as np

from compiler.ir.attrs import attr_text
from compiler.ir.graph import Graph, Op
from compiler.rewrite.constants import const_array
from compiler.rewrite.conv_affine import BN_TYPES, ConvSite, bn_scale_shift, conv_site, scale_weights
from compiler.rewrite.edit import add_const


@dataclass(frozen=True)
class Site:
    """A FusedBatchNorm reading a Reshape of a constant-weight MatMul."""

    bn: Op
    reshape: Op
    matmul: ConvSite
    scale: np.ndarray
    shift: np.ndarray


def find_sites(graph: Graph, named: Collection[str] = ()) -> list[Site]:
    found = (_site(op, named) for op in graph if op.type in BN_TYPES and op.type != "BatchNormWithGlobalNormalization")
    return [site for site in found if site is not None]


def _site(bn: Op, named: Collection[str]) -> Optional[Site]:
    if (bn.attr("is_training", True) or attr_text(bn.attr("data_format", "NHWC")) != "NHWC"
            or len(bn.operands) != 5 or any(v.uses for v in bn.results[1:]) or bn.name in named):
        return None
    reshape = bn.operands[0].op
    if reshape.type != "Reshape" or not _only_reader(reshape, bn, named):
        return None
    matmul = reshape.operands[0].op
    site = conv_site(matmul)
    if site is None or matmul.type != "MatMul" or not _only_reader(matmul, reshape, named):
        return None
    target = const_array(reshape.operands[1])
    if target is None or target.ndim != 1 or not target.size or int(target[-1]) != site.channels:
        return None
    arrays = [const_array(v) for v in bn.operands[1:]]  # gamma, beta, mean, var
    if any(a is None or a.shape != (site.channels,) for a in arrays):
        return None
    gamma, beta, mean, var = arrays
    scale, shift = bn_scale_shift(mean, var, beta, gamma, float(bn.attr("epsilon", 1e-4)), True)
    return Site(bn, reshape, site, scale, shift)


def _only_reader(producer: Op, reader: Op, named: Collection[str]) -> bool:
    """`reader` alone reads `producer`'s one result, and nothing else depends on `producer`."""
    return (producer.name not in named and not producer.control_users and not reader.control_deps
            and len(producer.results) == 1 and all(user is reader for user, _ in producer.results[0].uses))


def fold_found(graph: Graph, sites: list[Site], named: Collection[str] = ()) -> None:
    """Fold the batch norm of every site `find_sites` found in `graph` into its matmul."""
    for site in sites:
        _fold(graph, site)


def _fold(graph: Graph, site: Site) -> None:
    matmul = site.matmul.conv
    scale_weights(graph, site.matmul, site.scale)
    if np.any(site.shift != 0):
        dtype = matmul.attr("T")
        shift = add_const(graph, f"{site.bn.name}/shift", site.shift.astype(dtype.to_numpy()), dtype, before=site.reshape)
        bias = graph.create_op("BiasAdd", graph.unique_name(f"{site.bn.name}/bias"), [matmul.results[0], shift],
                               attrs={"T": dtype}, device=matmul.device, before=site.reshape)
        site.reshape.set_operand(0, bias.results[0])
    site.bn.results[0].replace_all_uses_with(site.reshape.results[0])
    graph.erase_op(site.bn)
